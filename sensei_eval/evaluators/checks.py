"""Deterministic checks: cheap, model-free tests of things a regex can see (group `checks`).

Each check is a `Judge` with `needs_model = False` that writes its findings into the same issue models
as the LLM judge of its failure mode, with `source="check"`, so a report shows them side by side:

| check | failure mode | fires when |
|---|---|---|
| `version_check` | tool_parameters | the query names a version that no tool call's arguments mention |
| `docs_tool_check` | tool_selection | a question about a library is answered with no documentation tool call |
| `greeting_check` | agent_format | the final answer opens with a greeting or carries chat filler |
| `citation_check` | citation_quality | the answer cites nothing, or cites without a snippet |
| `error_recovery_check` | tool_parameters | a tool error, then neither another attempt nor telling the user what failed and why |
| `repeated_call_check` | tool_parameters | a call that failed is repeated with identical arguments |
| `identifier_check` | hallucination | a code identifier in the answer appears in no tool result |

They are heuristics; each says exactly what it matched, so a false positive is easy to see. Four of
them encode one agent's conventions (`version_check`, `docs_tool_check`, `greeting_check`,
`citation_check`: the documentation-research agent's) and run only under the `docs-agent` profile;
`sensei_eval.judging.profiles` decides which checks run for which agent, and the report lists the others as
skipped.

Findings are filed under failure modes and issue fields that fit any agent: an unrecovered tool error
is a `tool_parameters` finding (the failed call, its error, what to do instead), not "research depth"
with "query phrasings tried". Under the `docs-agent` profile `error_recovery_check` runs with
`vocabulary: docs-agent` and files the same finding as that agent's `research_depth` issue.

**Nothing inspected never passes.** A check whose input is absent from the run (`nothing_to_inspect`:
a tool-call check on a run without a tool call, an answer check on a run without a final answer)
reports `not_applicable` with the reason ("no tool calls in this run"), never a pass; the verdict model
(`core.verdicts`) counts it neither as applied nor as judged, so a run where no check had anything to
inspect is "not judged". A check that read its input and found nothing wrong passes (tool calls that
all succeeded pass `error_recovery_check`).

A check's criteria hash is the SHA256 of its source code and parameters: change the logic, the hash
changes, just as editing a rubric changes an LLM judge's.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import ClassVar

from sensei_eval.core.errors import ConfigError, describe_error
from sensei_eval.core.issues import (
    AgentFormatIssue,
    CitationIssue,
    HallucinationIssue,
    Issue,
    ResearchDepthIssue,
    ToolParameterIssue,
    ToolSelectionIssue,
)
from sensei_eval.core.modes import MODES
from sensei_eval.core.records import QueryRecord, looks_like_error
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.transcript import Step, Transcript
from sensei_eval.core.verdicts import finding_reason
from sensei_eval.evaluators.base import Judge, register_judge
from sensei_eval.models.judge_model import JudgeModel

__all__ = (
    'CHECKS',
    'CitationCheck',
    'DeterministicCheck',
    'DocsToolCheck',
    'ErrorRecoveryCheck',
    'GreetingCheck',
    'IdentifierCheck',
    'RepeatedCallCheck',
    'VersionCheck',
)


@functools.cache
def _class_source(cls: type) -> str:
    """A check's source, read once (`inspect.getsource` costs more than running the check), without the line
    that registers it (`@register_judge`): where a check is listed is not what it checks."""
    return inspect.getsource(cls).replace('@register_judge\n', '', 1)


@dataclass(repr=False)
class DeterministicCheck(Judge):
    """Base for checks: subclasses implement `find(record, transcript) -> issues`, and `nothing_to_inspect`
    when some runs lack what they read."""

    needs_model: ClassVar[bool] = False

    def criteria_hash(self) -> str:
        params = {f.name: getattr(self, f.name) for f in fields(self)}
        material = _class_source(type(self)) + json.dumps(params, sort_keys=True, default=str)
        return hashlib.sha256(material.encode()).hexdigest()

    def find(self, record: QueryRecord, transcript: Transcript) -> list[Issue]:
        raise NotImplementedError

    def nothing_to_inspect(self, record: QueryRecord, transcript: Transcript) -> str | None:
        """Why the run holds nothing this check reads (it is then `not_applicable`), or None: it has."""
        return None

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        start = time.perf_counter()
        try:
            absent = self.nothing_to_inspect(record, transcript)
            if absent is not None:  # nothing inspected never passes (module docstring)
                return self._result(
                    model=None, status='not_applicable', error=absent, reasoning=absent, latency_s=time.perf_counter() - start
                )
            issues = self.find(record, transcript)
        except Exception as e:  # a check bug is an error in the report, not a pass
            return self._result(model=None, status='error', error=describe_error(e), latency_s=time.perf_counter() - start)
        for issue in issues:
            issue.source = 'check'
        return self._result(
            model=None,
            status='ok',
            reasoning='; '.join(_reason_of(i) for i in issues) or 'nothing found',
            issues=[_tagged(i, self.failure_mode) for i in issues],
            score=max(0.0, 1.0 - 0.5 * len(issues)),
            passed=not issues,
            latency_s=time.perf_counter() - start,
        )


def _tagged(issue: Issue, own_mode: str | None) -> dict[str, object]:
    """The issue as JSON, tagged with its failure mode when that is not the check's own (`mode_verdicts`)."""
    data = issue.model_dump(mode='json')
    mode = next((m.name for m in MODES.values() if m.issue_model is type(issue)), own_mode)
    if mode != own_mode:
        data['failure_mode'] = mode
    return data


def _reason_of(issue: Issue) -> str:
    """A finding's reason as every surface reads it (`core.verdicts.finding_reason`)."""
    return finding_reason(issue.model_dump(mode='json'))


# ---------------------------------------------------------------------------------------------------
# Shared reading of a transcript


def _tool_steps(record: QueryRecord, transcript: Transcript) -> list[tuple[Step, Step | None]]:
    """(tool_call, its result) steps in order, from the record's one pairing (`records.pair_tool_calls`:
    by order within the turn, the id only a hint), so every check agrees on which result is whose."""
    pairs: list[tuple[Step, Step | None]] = []
    for call in record.tool_calls():
        step = transcript.step_of(call.call_at)
        if step is not None:
            pairs.append((step, transcript.step_of(call.result_at)))
    return pairs


def _is_error(result: Step | None) -> bool:
    return result is not None and looks_like_error(result.text)


def _final_answer_step(transcript: Transcript) -> Step | None:
    for step in reversed(transcript.steps):
        if step.kind == 'assistant':
            return step
    return None


def _tool_results_text(record: QueryRecord) -> str:
    return '\n'.join(c.result or '' for c in record.tool_calls())


# What a check says when the run lacks what it reads (its `not_applicable` reason).
_NO_TOOL_CALLS = 'no tool calls in this run'
_NO_ANSWER = 'no final answer in this run'
_NO_TOOL_RESULTS = 'no tool results in this run to check the answer against'


def _no_tool_calls(record: QueryRecord) -> str | None:
    return None if record.tool_calls() else _NO_TOOL_CALLS


# ---------------------------------------------------------------------------------------------------
# The checks


# Versions as queries write them: dotted numbers ("2.0", "3.11.4"), "v2", or a major version right after
# a library-looking name ("Next.js 15", "React 19", "Django 5").
_VERSION = re.compile(
    r'(?<![\w.])[vV]?(?P<dotted>\d+\.\d+(?:\.\d+)*)(?![\w.]*\d)'
    r'|(?<![\w.])[vV](?P<v>\d+)\b'
    r'|(?P<lib>\b[A-Z][\w]*(?:\.js|\.py)?|\b[a-z]+\.(?:js|py))\s+(?P<major>\d{1,3})\b(?!\.\d|\s*(?:%|ms|s\b|seconds|minutes|items|rows))'
)


@register_judge
@dataclass(repr=False)
class VersionCheck(DeterministicCheck):
    """A version in the query that no tool call passes on."""

    name: ClassVar[str] = 'version_check'
    failure_mode: ClassVar[str | None] = 'tool_parameters'

    def nothing_to_inspect(self, record: QueryRecord, transcript: Transcript) -> str | None:
        return _no_tool_calls(record)

    def find(self, record: QueryRecord, transcript: Transcript) -> list[Issue]:
        calls = [(c, r) for c, r in _tool_steps(record, transcript)]
        if not calls:
            return []
        versions = _versions(record.query)
        args_text = ' '.join(c.text for c, _ in calls)
        issues: list[Issue] = []
        for version in versions:
            if not _mentions_version(args_text, version):
                first = calls[0][0]
                issues.append(
                    ToolParameterIssue(
                        steps=[c.number for c, _ in calls],
                        tool_name=first.tool_name or '?',
                        parameter='version',
                        actual_value=first.text[:200],
                        suggested_value=f'pass version {version} (the query asks about it)',
                        reasoning=(
                            f'The query names version {version!r}, but none of the {len(calls)} tool call(s) '
                            'mention it in their arguments.'
                        ),
                    )
                )
        return issues


def _versions(query: str) -> list[str]:
    found: list[str] = []
    for m in _VERSION.finditer(query):
        version = m.group('dotted') or m.group('v') or m.group('major')
        if version and version not in found:
            found.append(version)
    return found


def _mentions_version(text: str, version: str) -> bool:
    # "2.0" is passed on as "2.0", "v2.0", "2.0.x" or, for a major version, "v2" / "2.x"
    major = version.split('.')[0]
    patterns = [rf'(?<![\d.]){re.escape(version)}(?!\d)']
    if '.' not in version or version.endswith('.0'):
        patterns.append(rf'(?<![\w.])v?{re.escape(major)}(?:\.x|\.\d+)?(?![\d])')
    return any(re.search(p, text) for p in patterns)


# Tools that read documentation, by name. The sample agent's are Context7's; override for other agents.
_DOCS_TOOLS = r'context7|docs?\b|_docs?_|docs_|documentation|read_docs|search_docs'
# Libraries and frameworks a documentation agent is asked about; a query naming one is a library question.
_LIBRARY_NAMES = (
    'fastapi pydantic django flask react next.js nextjs vue svelte sqlalchemy pandas numpy httpx requests tokio '
    'axum serde pytest typer click celery redis kubernetes terraform langchain pydantic-ai dspy tailwind express '
    'prisma spring rails asyncio polars pytorch tensorflow alembic'
)  # whitespace-separated
_LIBRARIES = tuple(_LIBRARY_NAMES.split())


@register_judge
@dataclass(repr=False)
class DocsToolCheck(DeterministicCheck):
    """A library question answered without looking at the library's documentation."""

    name: ClassVar[str] = 'docs_tool_check'
    failure_mode: ClassVar[str | None] = 'tool_selection'

    docs_tools: str = _DOCS_TOOLS
    libraries: tuple[str, ...] = _LIBRARIES

    def find(self, record: QueryRecord, transcript: Transcript) -> list[Issue]:
        named = _libraries_named(record.query, self.libraries)
        if not named:
            return []
        calls = [c for c in record.tool_calls()]
        docs_re = re.compile(self.docs_tools, re.IGNORECASE)
        if any(docs_re.search(c.tool_name) for c in calls):
            return []
        used = sorted({c.tool_name for c in calls})
        answer = _final_answer_step(transcript)
        return [
            ToolSelectionIssue(
                steps=[s.number for s in transcript.steps if s.kind == 'tool_call'] or ([answer.number] if answer else []),
                missed_tools=['documentation lookup (e.g. context7_get_docs)'],
                unnecessary_tools=[],
                reasoning=(
                    f'The query is about {", ".join(named)}, but no documentation tool was called'
                    + (f' (tools used: {", ".join(used)}).' if used else ' (no tools at all).')
                ),
            )
        ]


# Library names that are also everyday words ("celery" on a grocery list, "Express your answer"): they
# count only in a technical sentence, or written as a name in mid-sentence.
_EVERYDAY_WORDS = frozenset({'celery', 'express', 'click', 'requests', 'spring', 'rails', 'flask', 'react', 'pandas', 'polars'})
_TECH_CUE = re.compile(
    r'`|\(\)|\b(import|install|pip|npm|api|function|method|class|decorator|route|endpoint|config\w*|error|exception'
    r'|version|library|framework|package|module|app|code|python|javascript|typescript|query|schema|task|worker'
    r'|middleware|server|database|docs?|documentation)\b',
    re.IGNORECASE,
)


def _libraries_named(query: str, libraries: Sequence[str]) -> list[str]:
    technical = bool(_TECH_CUE.search(query))
    named = []
    for lib in libraries:
        for m in re.finditer(rf'(?<![\w-]){re.escape(lib)}(?![\w-])', query, re.IGNORECASE):
            if lib not in _EVERYDAY_WORDS or technical or _proper_noun(query, m.start()):
                named.append(lib)
                break
    return named


def _proper_noun(text: str, start: int) -> bool:
    """Capitalised and not the first word of a sentence."""
    before = text[:start].rstrip()
    return text[start].isupper() and bool(before) and before[-1] not in '.!?:\n'


_GREETING = re.compile(
    r'^\W*(hi|hello|hey|greetings|good (morning|afternoon|evening))\b[^\n]{0,40}'
    r"|\b(i'?d be (happy|glad) to help|i would be (happy|glad) to help|great question|happy to help"
    r'|let me think( about this)?|i hope this helps|hope (this|that) helps|feel free to (ask|reach)'
    r'|happy coding|let me know if you (have|need)|as an ai\b)',
    re.IGNORECASE,
)


@register_judge
@dataclass(repr=False)
class GreetingCheck(DeterministicCheck):
    """Greetings and chat filler in an answer meant for another agent."""

    name: ClassVar[str] = 'greeting_check'
    failure_mode: ClassVar[str | None] = 'agent_format'

    def nothing_to_inspect(self, record: QueryRecord, transcript: Transcript) -> str | None:
        return None if _final_answer_step(transcript) is not None else _NO_ANSWER

    def find(self, record: QueryRecord, transcript: Transcript) -> list[Issue]:
        answer = _final_answer_step(transcript)
        if answer is None:
            return []
        issues: list[Issue] = []
        for m in _GREETING.finditer(answer.text):
            text = m.group(0).strip()
            greeting = m.start() == 0 or bool(re.match(r'\W*(hi|hello|hey|greetings|good )', text, re.IGNORECASE))
            issues.append(
                AgentFormatIssue(
                    steps=[answer.number],
                    problem_type='greeting' if greeting else 'filler',
                    example_text=text[:120],
                    suggested_fix='Drop it: the reader is an agent; start with the answer.',
                )
            )
        return issues


# Inline citations as the sample agent writes them: <source ref="...">snippet</source>. A tag with an empty
# body, a self-closing tag or a bare ref is a citation without a snippet.
_SOURCE_TAG = re.compile(r'<source\b[^>]*?(/>|>(?P<body>.*?)</source>)', re.IGNORECASE | re.DOTALL)
_VAGUE_REF = re.compile(
    r'\b(the (official )?(docs|documentation) (say|says|state|states|mention)|according to the docs)\b', re.IGNORECASE
)


@register_judge
@dataclass(repr=False)
class CitationCheck(DeterministicCheck):
    """No citations, or citations without the snippet that backs them."""

    name: ClassVar[str] = 'citation_check'
    failure_mode: ClassVar[str | None] = 'citation_quality'

    def nothing_to_inspect(self, record: QueryRecord, transcript: Transcript) -> str | None:
        if _final_answer_step(transcript) is None:
            return _NO_ANSWER
        return None if record.tool_calls() else f'{_NO_TOOL_CALLS}: the answer rests on no source to cite'

    def find(self, record: QueryRecord, transcript: Transcript) -> list[Issue]:
        answer = _final_answer_step(transcript)
        if answer is None or not record.tool_calls():
            return []
        tags = list(_SOURCE_TAG.finditer(answer.text))
        with_snippet = sum(1 for t in tags if (t.group('body') or '').strip())
        without = len(tags) - with_snippet
        vague = [m.group(0) for m in _VAGUE_REF.finditer(answer.text)]
        if tags and not without:
            return []
        if not tags:
            reasoning = 'The answer cites no source at all, though it rests on tool results.'
        else:
            reasoning = f'{without} of {len(tags)} citation(s) carry no snippet from the source.'
        return [
            CitationIssue(
                steps=[answer.number],
                uncited_claims=[] if tags else [_first_sentence(answer.text)],
                citations_without_snippets=without,
                citations_with_snippets=with_snippet,
                vague_refs=vague,
                citation_balance='under',
                reasoning=reasoning,
            )
        ]


def _first_sentence(text: str) -> str:
    m = re.search(r'[^.!?\n]{10,200}[.!?]', text)
    return (m.group(0) if m else text[:160]).strip()


# A reply that tells the user a step did not work: what an honest report of a refused or failed call says.
_TOLD_FAILURE = re.compile(
    r"\b(?:unable|cannot|can't|can ?not|couldn't|could not|wasn't able|was not able|not able|failed|fails|error"
    r"|unfortunately|not possible|impossible|isn't possible|not allowed|not permitted|not eligible|ineligible"
    r"|denied|refused|rejected|declined|unavailable|not available|isn't available|no longer|not enough|insufficient"
    r"|exceeds?|too (?:many|few|late|early)|didn't go through|did not go through|won't be able|will not be able)\b",
    re.IGNORECASE,
)
_BECAUSE = re.compile(r'\b(?:because|since|due to|as (?:the|your|there|it|this|that)|the reason|which means)\b', re.IGNORECASE)
_STOPWORD_TEXT = (
    'error the and for with that this from your have has was were are not but you can cannot could would there '
    'their which what when where been being into than then them they will only also such does did failed failure '
    'exception invalid status message code none null true false'
)  # whitespace-separated
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r'[a-z][a-z0-9_-]{3,}', text.lower()) if w not in _STOPWORDS}


def _told_user(error: str, reply: str) -> bool:
    """Whether `reply` tells the user what failed and why: it says the step did not work, and gives the
    reason (words of the error message itself, or an explicit "because/due to" clause)."""
    if not _TOLD_FAILURE.search(reply):
        return False
    return bool(_content_words(error) & _content_words(reply)) or bool(_BECAUSE.search(reply))


@register_judge
@dataclass(repr=False)
class ErrorRecoveryCheck(DeterministicCheck):
    """A tool error followed by an answer, with no other attempt and no honest word to the user.

    A recovery is either another attempt (different arguments or another tool) or telling the user
    what was refused and why (a business rule that says no is an answer, not a failure to recover).
    `vocabulary: docs-agent` files the finding as a documentation agent's `research_depth` issue."""

    name: ClassVar[str] = 'error_recovery_check'
    failure_mode: ClassVar[str | None] = 'tool_parameters'
    failure_modes: ClassVar[tuple[str, ...]] = ('tool_parameters', 'research_depth')

    vocabulary: str = 'any'

    def __post_init__(self) -> None:
        if self.vocabulary not in ('any', 'docs-agent'):
            raise ConfigError(f"vocabulary: expected 'any' or 'docs-agent', got {self.vocabulary!r}")

    def nothing_to_inspect(self, record: QueryRecord, transcript: Transcript) -> str | None:
        return _no_tool_calls(record)

    def find(self, record: QueryRecord, transcript: Transcript) -> list[Issue]:
        pairs = _tool_steps(record, transcript)
        for i, (call, result) in enumerate(pairs):
            if not _is_error(result):
                continue
            after = [c for c, _ in pairs[i + 1 :]]
            if any((c.tool_name, _normal_args(c.text)) != (call.tool_name, _normal_args(call.text)) for c in after):
                continue  # it tried something different afterwards
            assert result is not None
            replies = [s for s in transcript.steps if s.kind == 'assistant' and s.number > result.number and s.text.strip()]
            if any(_told_user(result.text, r.text) for r in replies):
                continue  # it told the user what failed and why: an honest answer is a recovery
            what = 'repeated the same call and then answered' if after else 'answered'
            reasoning = (
                f'{call.tool_name} returned an error at step {result.number}; the agent {what} without trying '
                'anything different and without telling the user what failed and why.'
            )
            steps = [call.number, result.number, *(c.number for c in after)]
            if self.vocabulary == 'docs-agent':
                return [
                    ResearchDepthIssue(
                        steps=steps,
                        query_phrasings_tried=len({c.text for c, _ in pairs}),
                        sources_consulted=len({c.tool_name for c, _ in pairs}),
                        depth_of_investigation='shallow',
                        missed_exploration=[f'another approach after {call.tool_name} failed (other arguments or tool)'],
                        premature_conclusion=True,
                        reasoning=reasoning,
                    )
                ]
            return [
                ToolParameterIssue(
                    steps=steps,
                    tool_name=call.tool_name or '?',
                    parameter='(the call failed)',
                    actual_value=result.text[:200],
                    suggested_value='retry with corrected arguments or another tool, or tell the user what failed and why',
                    reasoning=reasoning,
                )
            ]
        return []


@register_judge
@dataclass(repr=False)
class RepeatedCallCheck(DeterministicCheck):
    """The same failing call, same arguments, tried again."""

    name: ClassVar[str] = 'repeated_call_check'
    failure_mode: ClassVar[str | None] = 'tool_parameters'

    def nothing_to_inspect(self, record: QueryRecord, transcript: Transcript) -> str | None:
        return _no_tool_calls(record)

    def find(self, record: QueryRecord, transcript: Transcript) -> list[Issue]:
        issues: list[Issue] = []
        failed: dict[tuple[str | None, str], Step] = {}
        reported: set[tuple[str | None, str]] = set()
        for call, result in _tool_steps(record, transcript):
            key = (call.tool_name, _normal_args(call.text))
            if key in failed and key not in reported:
                reported.add(key)
                issues.append(
                    ToolParameterIssue(
                        steps=[failed[key].number, call.number],
                        tool_name=call.tool_name or '?',
                        parameter='(all arguments)',
                        actual_value=call.text[:200],
                        suggested_value='change the arguments (or the tool) after an error instead of repeating the call',
                        reasoning=(
                            f'Step {call.number} repeats the call of step {failed[key].number} unchanged, '
                            'though that call had failed.'
                        ),
                    )
                )
            if _is_error(result):
                failed.setdefault(key, call)
        return issues


def _normal_args(text: str) -> str:
    try:
        return json.dumps(json.loads(text), sort_keys=True)
    except json.JSONDecodeError:
        return ' '.join(text.split())


# An inline code span that names something: a dotted name, a call, a decorator or a flag.
_CODE_SPAN = re.compile(r'(?<!`)`([^`\n]{2,80})`(?!`)')
_IDENTIFIER = re.compile(r'^(?:@|--?)?[A-Za-z_][\w]*(?:[.:][A-Za-z_][\w]*)*(?:\(\s*\))?$')


@register_judge
@dataclass(repr=False)
class IdentifierCheck(DeterministicCheck):
    """Code identifiers in the answer that no tool result contains."""

    name: ClassVar[str] = 'identifier_check'
    failure_mode: ClassVar[str | None] = 'hallucination'

    min_length: int = 4

    def nothing_to_inspect(self, record: QueryRecord, transcript: Transcript) -> str | None:
        if _final_answer_step(transcript) is None:
            return _NO_ANSWER
        if not record.tool_calls():
            return f'{_NO_TOOL_CALLS}: no tool result to check the answer against'
        return None if _tool_results_text(record).strip() else _NO_TOOL_RESULTS

    def find(self, record: QueryRecord, transcript: Transcript) -> list[Issue]:
        answer = _final_answer_step(transcript)
        results = _tool_results_text(record)
        if answer is None or not results.strip():
            return []
        missing: list[str] = []
        for span in _CODE_SPAN.findall(answer.text):
            ident = span.strip()
            if not _IDENTIFIER.match(ident):
                continue
            core = ident.lstrip('@-').removesuffix('()').rstrip()
            last = re.split(r'[.:]', core)[-1]
            if len(last) < self.min_length or last in missing:
                continue
            if last not in results and core not in results and last not in record.query:
                missing.append(last if core == last else core)
        return [
            HallucinationIssue(
                steps=[answer.number],
                hallucinated_claim=f'`{name}`',
                what_tools_actually_said=f'no tool result mentions {name!r}',
                severity='major',
            )
            for name in missing
        ]


CHECKS: Sequence[type[DeterministicCheck]] = (
    VersionCheck,
    DocsToolCheck,
    GreetingCheck,
    CitationCheck,
    ErrorRecoveryCheck,
    RepeatedCallCheck,
    IdentifierCheck,
)

assert all(c.failure_mode in MODES for c in CHECKS)
