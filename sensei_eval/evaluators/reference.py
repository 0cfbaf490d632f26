"""Reference checks: the record's tool calls against the `expected_tool_calls` it carries, and its replies
against the `expected_outputs` (what it must tell the user).

The semantics, chosen from first principles and from what reference-based evaluators in the field
mean (tau-bench and tau2-bench judge the final state of the world and the required outputs);
`docs/reference.md` is the user's page for the same rules.

**What the reference says.** `expected_tool_calls` lists the calls a good run makes. A missing field
means *no reference* for calls; an empty list `[]` means *change nothing*: the run may look things up,
but any state-changing call fails it. `expected_outputs` lists what the agent's replies to the user
must say; missing or `[]`, nothing is required. With neither, the check is skipped.

**Required outputs** are part of the reference: each must appear in one of the agent's replies, read
as `core.outputs` reads them (numbers as numbers, words case-folded, in order). Every output no reply
says is named in one major `completeness` finding (mode score 0.5 x the share said), so a run that made
every call right but told the user "6 suitcases" where the reference says 4 fails.

**Every call is classified as state-changing or not**, from the best evidence the record has, and the
report says which evidence decided (`details.calls[*].evidence`, `details.tools`):

1. `annotation`: the tool's MCP annotations in the record's tool definitions (`metadata.tools`, MCP
   `{"name", "annotations": {"readOnlyHint", "destructiveHint"}}` or OpenAI `{"type": "function",
   "function": {...}}`): `readOnlyHint: true` reads; `readOnlyHint: false` or `destructiveHint: true` writes;
2. `description`: the tool's description in those definitions (or in `QueryRecord.tools`, the tools the
   agent had), read by its leading verb ("Cancel the
   reservation" writes; "Get the details", "Returns the status" read; "Calculate ..." computes; "Transfer
   the user to a human agent" hands off) or by what it says it does not do ("will not change the database");
3. `profile`: the check's `tools: {NAME: {read_only: true|false}}` rule, then its
   `state_changing_patterns` and `read_only_patterns` (regular expressions on the name);
4. `name`: the tool's name, split into words (snake_case, kebab, dotted, camelCase), as the last resort:
   a hand-off (`transfer_to_X`, `handoff`, `escalate`: the OpenAI Agents SDK's convention) and a pure
   computation (`calculate`, `think`, `final_answer`) change nothing; the first word that is a known
   verb decides (`cancel_x` writes, `get_x` reads). A name with no known verb (`scout_grep`,
   `kubectl-logs`) is `unknown`: an extra call of it does not fail the run (failing needs evidence, and
   most tools whose names say nothing only look things up), but a missing expected call of it does.
   Declare such a tool when it does change state (annotations in the record, or
   `tools: {NAME: {read_only: false}}` in a profile).

A call that errored changed nothing and counts as neither a match nor an extra write.

**Matching.** Each expected call is matched to a **distinct** successful call (a multiset: a tool
expected twice needs two calls) of the same tool whose arguments fit. At the top level,
`arguments='exact'` (default) compares every key (an argument the reference does not name is a
difference); `'subset'` only the expected keys. **Below the top level arguments compare as APIs read
them**, whatever that rule: keys of nested objects the reference does not name are ignored at every
depth (`flights[].origin` beside the expected `flight_number` and `date`); a list of scalars is a
multiset (`["b", "a"]` fits `["a", "b"]`: tau-bench stores `sorted(item_ids)`) unless the check's rule
for the tool names it ordered (`tools: {NAME: {ordered: [ARG, "flights.stops"]}}`, paths from the
arguments' root); list items that are objects are paired by a key they share (`id`, `*_id`, `name`,
or any key whose values are unique on both sides) or else, and in an ordered list, by position (a list
must have as many items as expected). An expected call with `args: null` matches any call of its tool. Values compare `lenient`
by default: what JSON cannot tell apart (key order), numbers and numeric strings (`"100"` == `100`),
spaces around any string, and case and runs of whitespace in **free text** (a string of
`free_text_words` words or more). `exact` compares the JSON values; `ignore` skips the argument; set it
for the check (`values`), per tool or per argument (`tools: {NAME: {values: ..., args: {ARG: mode}}}`).
Order is free (`ordered=True`: the matched calls must come in the expected order). The per-call match
table (`details.expected[*].matched`) follows these rules only, so agreement with a benchmark's
per-action labels stays measurable (it reproduces every one of tau2-airline's 148 action labels).

**What fails.**

* a missing or wrong **required** expected call (a `major` finding). An expected call is required when
  it says so (`required`), else by `tools.NAME.required`, else unless its tool is known to change
  nothing: the reference's word is evidence enough that an `unknown` tool was needed. A missing
  lookup, computation or hand-off is an advisory (`minor`) finding: reported, scored lower, the
  check passes. A call whose only differing arguments are free text (a summary in other words) is minor;
* an **extra state-changing call**: a successful state-changing call matched to no expected call
  (`extra_writes='fail'`, the default). Reads, computations and hand-offs the reference does not list
  are free. `extra_writes='allow'` (in a profile, for agents whose references are partial) lets extra
  writes pass, except under an empty reference, which always means "change nothing";
* with `strict=True`, **any** extra successful call, reads included.

Findings land in the failure modes' issue models: a missed call (or an extra one) is a
`tool_selection` issue (`missed_tools` / `unnecessary_tools`); a tool called but never with the
expected arguments is a `tool_parameters` issue naming the parameter, the expected and actual values
and the step (a wrong write is reported there once, not again as an extra write). Each mode gets its
own score: 1 with no finding; `0.5 + 0.5·r` with only minor ones; `0.5·r` once a major one, where `r`
is the weighted share of the reference done: expected calls matched (1 per required call, 0.25 per
advisory one) over all expected calls plus every extra write (1 each), so runs rank by how much of
the reference they did and how much they changed that nobody asked for.

The options are fields of the check (set them in a profile) and can be set per record in
`metadata.reference_check` (`{"strict": true, "ordered": true, "arguments": "subset",
"values": "exact", "extra_writes": "allow"}`).

pydantic-evals' `ToolCorrectness` (run on a span tree built from the record) gives the same answer for
tool names and still runs, so its verdict sits beside ours in `details`. Its `ArgumentCorrectness`
inspects one occurrence of a tool (first, last or an index), so a tool expected twice with different
arguments can never pass it, and its `TrajectoryMatch` F1 falls below 1 with any extra call: neither
can express the matching above, which is why the arguments and the are matched here.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal

from pydantic_evals.evaluators import EvaluatorContext, ToolCorrectness
from pydantic_evals.online import run_evaluators

from sensei_eval.core.errors import ConfigError
from sensei_eval.core.issues import Issue, ToolParameterIssue, ToolSelectionIssue
from sensei_eval.core.outputs import judge_outputs
from sensei_eval.core.records import ExpectedToolCall, QueryRecord, ToolCall
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.spans import span_tree
from sensei_eval.core.transcript import Transcript
from sensei_eval.evaluators.base import Judge, register_judge
from sensei_eval.evaluators.call_matching import (
    FREE_TEXT_WORDS,
    ArgumentMatch,
    CallMatch,
    Compare,
    ValueMatch,
    match_expected_calls,
    normal_value,
)
from sensei_eval.evaluators.tool_effects import Effect, classify_tool, tool_definitions
from sensei_eval.models.judge_model import JudgeModel

__all__ = ('ExtraWrites', 'ReferenceCheck')

ExtraWrites = Literal['fail', 'allow']
_VALUE_MATCHES = ('exact', 'lenient', 'ignore')
_EXTRA_WRITES = ('fail', 'allow')
# Keys a record's `metadata.reference_check` may set; anything else there is reported, not ignored.
_RECORD_OPTIONS = frozenset({'strict', 'ordered', 'arguments', 'values', 'extra_writes'})
# Keys of one tool's rule in `tools`.
_TOOL_RULE_KEYS = frozenset({'required', 'read_only', 'values', 'args', 'ordered'})
# Weight of an advisory expected call in the matched share `r` (a required call weighs 1): a missed
# lookup costs a quarter of what a missed state change costs.
_ADVISORY_WEIGHT = 0.25


# ---------------------------------------------------------------------------------------------------
@functools.cache
def _module_source() -> str:
    """The check's code, read once: this module, the call matching and what a tool does (the criteria hash
    changes when the semantics do)."""
    import sys

    from sensei_eval.evaluators import call_matching, tool_effects

    return ''.join(inspect.getsource(module) for module in (sys.modules[__name__], call_matching, tool_effects))


@register_judge
@dataclass(repr=False)
class ReferenceCheck(Judge):
    """The record's successful tool calls against its expected tool calls (see the module docstring)."""

    name: ClassVar[str] = 'reference_check'
    failure_mode: ClassVar[str | None] = 'tool_selection'
    # it reports findings of these modes, each tagged with its own (see reports.mode_verdicts); completeness:
    # the required outputs (`expected_outputs`) no reply says
    failure_modes: ClassVar[tuple[str, ...]] = ('tool_selection', 'tool_parameters', 'completeness')
    needs_model: ClassVar[bool] = False

    strict: bool = False
    ordered: bool = False
    arguments: ArgumentMatch = 'exact'
    values: ValueMatch = 'lenient'
    # an extra successful state-changing call: `fail` (the default) or `allow` (references that are partial)
    extra_writes: ExtraWrites = 'fail'
    # per tool: {required: bool, read_only: bool, values: exact|lenient|ignore, args: {ARG: mode}}
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # a profile's own name rules (regular expressions), checked before the built-in name rules
    read_only_patterns: Sequence[str] = ()
    state_changing_patterns: Sequence[str] = ()
    free_text_words: int = FREE_TEXT_WORDS

    def __post_init__(self) -> None:
        if self.values not in _VALUE_MATCHES:
            raise ConfigError(f'values: expected one of {", ".join(_VALUE_MATCHES)}, got {self.values!r}')
        if self.extra_writes not in _EXTRA_WRITES:
            raise ConfigError(f'extra_writes: expected one of {", ".join(_EXTRA_WRITES)}, got {self.extra_writes!r}')
        if not isinstance(self.tools, Mapping):
            raise ConfigError('tools: expected a mapping of tool name to its rule')
        for name, rule in self.tools.items():
            if not isinstance(rule, Mapping):
                raise ConfigError(f'tools.{name}: expected a mapping (required, read_only, values, args)')
            for key in rule:
                if key not in _TOOL_RULE_KEYS:
                    raise ConfigError(f'tools.{name}.{key}: unknown key (known: {", ".join(sorted(_TOOL_RULE_KEYS))})')
            for key in ('required', 'read_only'):
                if key in rule and not isinstance(rule[key], bool):
                    raise ConfigError(f'tools.{name}.{key}: expected true or false')
            if 'values' in rule and rule['values'] not in _VALUE_MATCHES:
                raise ConfigError(f'tools.{name}.values: expected one of {", ".join(_VALUE_MATCHES)}')
            args = rule.get('args', {})
            if not isinstance(args, Mapping) or any(v not in _VALUE_MATCHES for v in args.values()):
                raise ConfigError(f'tools.{name}.args: expected a mapping of argument to {"|".join(_VALUE_MATCHES)}')
            ordered = rule.get('ordered', [])
            if isinstance(ordered, str) or not isinstance(ordered, Sequence) or not all(isinstance(a, str) for a in ordered):
                raise ConfigError(f'tools.{name}.ordered: expected a list of argument paths (`stops`, `flights.stops`)')
        for option in ('read_only_patterns', 'state_changing_patterns'):
            for pattern in getattr(self, option):
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise ConfigError(f'{option}: {pattern!r} is not a regular expression ({e})') from None

    def criteria_hash(self) -> str:
        params = {f.name: getattr(self, f.name) for f in fields(self)}
        text = json.dumps(params, sort_keys=True, default=lambda v: list(v) if isinstance(v, tuple) else str(v))
        return hashlib.sha256((_module_source() + text).encode()).hexdigest()

    def applies_to(self, record: QueryRecord) -> str | None:
        # `[]` is a reference ("change nothing"); only a missing field is none
        if record.expected_tool_calls is not None or record.expected_outputs:
            return None
        return 'the record has no expected_tool_calls or expected_outputs'

    def for_record(self, record: QueryRecord) -> tuple[ReferenceCheck, list[str]]:
        """This check with the record's own options applied, and warnings about options it could not use."""
        options = record.metadata.get('reference_check')
        if options is None:
            return self, []
        if not isinstance(options, dict):
            return self, [f'metadata.reference_check: expected an object, got {type(options).__name__}; ignored']
        known = sorted(_RECORD_OPTIONS)
        unknown = [k for k in options if k not in _RECORD_OPTIONS]
        warnings = [f'metadata.reference_check.{k}: unknown option (known: {known}); ignored' for k in unknown]
        changes: dict[str, Any] = {}
        for key in ('strict', 'ordered'):
            if key in options:
                if isinstance(options[key], bool):
                    changes[key] = options[key]
                else:
                    warnings.append(f'metadata.reference_check.{key}: expected true or false; ignored')
        for key, allowed in (('arguments', ('exact', 'subset')), ('values', _VALUE_MATCHES), ('extra_writes', _EXTRA_WRITES)):
            if key in options:
                if options[key] in allowed:
                    changes[key] = options[key]
                else:
                    warnings.append(f'metadata.reference_check.{key}: expected one of {", ".join(allowed)}; ignored')
        return replace(self, **changes), warnings

    def compare_for(self, tool: str) -> Compare:
        """How `tool`'s arguments compare under this check's options and its rule for the tool."""
        rule = self.tools.get(tool, {})
        return Compare(
            keys=self.arguments,
            values=rule.get('values', self.values),
            args=dict(rule.get('args', {})),
            free_text_words=self.free_text_words,
            ordered=frozenset(rule.get('ordered', ())),
        )

    def effect(self, tool: str, definitions: Mapping[str, Mapping[str, Any]]) -> Effect:
        """What `tool` does, from the record's tool definitions, this check's rules, then its name."""
        return classify_tool(
            tool,
            definitions.get(tool),
            self.tools.get(tool),
            read_only_patterns=self.read_only_patterns,
            state_changing_patterns=self.state_changing_patterns,
        )

    def read_only(self, tool: str, definitions: Mapping[str, Mapping[str, Any]]) -> bool:
        """Whether `tool` changes nothing (reads, computes or hands off)."""
        return not self.effect(tool, definitions).state_changing

    def required(self, e: ExpectedToolCall, definitions: Mapping[str, Mapping[str, Any]]) -> bool:
        """Whether missing `e` fails the run: `e.required`, else `tools.NAME.required`, else unless its tool
        is known to change nothing (a read, a computation, a hand-off: an `unknown` tool stays required)."""
        if e.required is not None:
            return e.required
        rule = self.tools.get(e.tool_name, {})
        if 'required' in rule:
            return bool(rule['required'])
        return self.effect(e.tool_name, definitions).kind in ('write', 'unknown')

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        start = time.perf_counter()
        check, warnings = self.for_record(record)
        issues: list[tuple[str, Issue]] = []
        mode_scores: dict[str, float] = {}
        details: dict[str, Any] = check._options()
        reasons: list[str] = []
        if record.expected_tool_calls is not None:
            found = await check._judge_calls(record, transcript)
            if isinstance(found, str):  # pydantic-evals' ToolCorrectness failed: an error, never a verdict
                return self._result(model=None, status='error', error=found, latency_s=time.perf_counter() - start)
            call_issues, call_scores, call_details = found
            issues += call_issues
            mode_scores.update(call_scores)
            details.update(call_details)
            reasons.append(_reasoning(call_issues, len(record.expected_tool_calls)))
        if record.expected_outputs:
            outputs = judge_outputs(record, transcript)
            issues += [('completeness', i) for i in outputs.issues]
            mode_scores['completeness'], details['outputs'] = outputs.score, outputs.table
            reasons.append(outputs.reasoning)
        failing = [i for _, i in issues if i.severity != 'minor']
        details['minor_findings'] = len(issues) - len(failing)
        return self._result(
            model=None,
            status='ok',
            reasoning='; '.join(reasons),
            issues=[{**i.model_dump(mode='json'), 'failure_mode': mode} for mode, i in issues],
            score=min(mode_scores.values()),
            mode_scores=mode_scores,
            passed=not failing,
            latency_s=time.perf_counter() - start,
            warnings=warnings,
            details=details,
        )

    async def _judge_calls(
        self, record: QueryRecord, transcript: Transcript
    ) -> tuple[list[tuple[str, Issue]], dict[str, float], dict[str, Any]] | str:
        """The calls against `expected_tool_calls`: findings, mode scores and details (or why pydantic-evals'
        ToolCorrectness, run beside the matching, failed)."""
        check = self
        expected = record.expected_tool_calls or []
        calls = record.tool_calls()
        matches = match_expected_calls(expected, calls, ordered=check.ordered, compare=check.compare_for)
        definitions = tool_definitions(record)
        effects = {
            name: check.effect(name, definitions)
            for name in dict.fromkeys([*(c.tool_name for c in calls), *(e.tool_name for e in expected)])
        }
        required = [check.required(e, definitions) for e in expected]
        steps = _call_steps(transcript, calls)
        issues, extra_writes = check._issues(matches, calls, steps, required, effects, empty=not expected)

        names_result, failures = await run_evaluators(
            [ToolCorrectness(expected_tools=[e.tool_name for e in expected], allow_extra=not check.strict)],
            _context(record),
        )
        if failures:
            return '; '.join(f'{f.name}: {f.error_message}' for f in failures)

        share = _matched_share(matches, required, len(extra_writes))
        mode_scores = {'tool_selection': _mode_score(issues, 'tool_selection', share)}
        if any(e.args is not None for e in expected):
            mode_scores['tool_parameters'] = _mode_score(issues, 'tool_parameters', share)
        details = {
            'reference': 'empty: change nothing' if not expected else f'{len(expected)} expected call(s)',
            'matched': sum(1 for m in matches if m.actual_index is not None),
            'matched_share': round(share, 4),
            'extra_state_changing_calls': len(extra_writes),
            'tools': {name: e.as_dict() for name, e in effects.items()},
            'calls': _call_details(calls, matches, steps, effects),
            'expected': _expected_details(matches, required, steps),
            'ToolCorrectness': {'value': names_result[0].value, 'reason': names_result[0].reason},
        }
        return issues, mode_scores, details

    def _options(self) -> dict[str, Any]:
        """The options a verdict was reached with (in its details)."""
        return {
            'strict': self.strict,
            'ordered': self.ordered,
            'arguments': self.arguments,
            'values': self.values,
            'extra_writes': self.extra_writes,
        }

    def _issues(
        self,
        matches: list[CallMatch],
        calls: Sequence[ToolCall],
        steps: list[int | None],
        required: list[bool],
        effects: Mapping[str, Effect],
        *,
        empty: bool = False,
    ) -> tuple[list[tuple[str, Issue]], list[int]]:
        """The findings, and the indices of the extra state-changing calls (they lower the score's share)."""
        issues: list[tuple[str, Issue]] = []
        used = {m.actual_index for m in matches if m.actual_index is not None}
        # a wrong write is reported once, as a parameter finding, not again as an extra write
        explained: set[int] = set()
        for m, req in zip(matches, required, strict=True):
            if m.actual_index is None:
                issues.append(self._missed(m.expected, req, calls, steps, effects, used, explained))
        unmatched = [i for i, c in enumerate(calls) if not c.failed and i not in used]
        writes = [i for i in unmatched if effects[calls[i].tool_name].state_changing]
        if self.strict:
            extra = self._beyond_expected(unmatched, calls, steps)
        elif self.extra_writes == 'fail' or empty:
            extra = self._unasked_writes([i for i in writes if i not in explained], calls, steps, effects, empty=empty)
        else:
            extra = None
        if extra is not None:
            issues.append(('tool_selection', extra))
        for _, found in issues:
            found.source = 'check'
        extra_writes = [i for i in writes if i not in explained] if (self.extra_writes == 'fail' or empty or self.strict) else []
        return issues, extra_writes

    def _missed(
        self,
        e: ExpectedToolCall,
        req: bool,
        calls: Sequence[ToolCall],
        steps: list[int | None],
        effects: Mapping[str, Effect],
        used: set[int],
        explained: set[int],
    ) -> tuple[str, Issue]:
        """The finding for an expected call no call matched: wrong arguments (a parameter finding; the calls
        it explains are added to `explained`), or a call missing, failed or out of order (a selection one)."""
        compare = self.compare_for(e.tool_name)
        same_tool = [i for i, c in enumerate(calls) if c.tool_name == e.tool_name]
        ok = [i for i in same_tool if not calls[i].failed]
        if ok and all(compare.differing(e.args, calls[i].args) for i in ok):
            issue = _parameter_issue(e, calls, ok, used, steps, compare)
            explained.update(i for i in ok if i not in used)
            free = all(compare.free_text((e.args or {}).get(k)) for k in issue.parameter.split(', '))
            issue.severity = 'major' if req and not free else 'minor'
            if req and free:
                issue.reasoning += ' Only free text differs (a summary or message in other words): a minor finding.'
            elif not req:  # say why it is minor, so the score below 1 of a pass is explained
                effect = effects[e.tool_name]
                what = f'a {effect.kind}, by {effect.evidence}' if e.required is None else 'marked not required'
                issue.reasoning += f' An advisory call ({what}): a minor finding, it lowers the score and does not fail the run.'
            return 'tool_parameters', issue
        if ok:  # a fitting call exists, but it is out of the expected order or taken by another expectation
            why = (
                f'{e.tool_name} was called with the expected arguments, but not in the expected order'
                if self.ordered
                else f'{e.tool_name} is expected more times than it was successfully called so'
            )
        elif same_tool:
            why = f'every call of {e.tool_name} failed (steps {_steps_text(same_tool, steps)})'
        else:
            why = f'{e.tool_name} was expected but never called'
        if not req:  # say why it is advisory and what that means, so a score below 1 with a pass is explained
            effect = effects[e.tool_name]
            why += (
                f' (an advisory call: {effect.kind}, by {effect.evidence}: {effect.why}'
                if e.required is None
                else ' (an advisory call: marked not required'
            ) + '; a missing advisory call lowers the score and does not fail the run)'
        selection = ToolSelectionIssue(missed_tools=[e.tool_name], unnecessary_tools=[], reasoning=why + '.')
        selection.steps = [s for i in same_tool if (s := steps[i]) is not None]
        selection.severity = 'major' if req else 'minor'
        return 'tool_selection', selection

    @staticmethod
    def _beyond_expected(extra: list[int], calls: Sequence[ToolCall], steps: list[int | None]) -> Issue | None:
        """Strict: every successful call no expectation took is a finding."""
        if not extra:
            return None
        names = sorted({calls[i].tool_name for i in extra})
        return _unnecessary(names, extra, steps, f'{len(extra)} call(s) beyond the expected ones (strict): {", ".join(names)}.')

    @staticmethod
    def _unasked_writes(
        unasked: list[int], calls: Sequence[ToolCall], steps: list[int | None], effects: Mapping[str, Effect], *, empty: bool
    ) -> Issue | None:
        """State-changing calls the reference does not contain (and no parameter finding explains)."""
        if not unasked:
            return None
        names = sorted({calls[i].tool_name for i in unasked})
        how = '; '.join(f'{n}: {effects[n].why} ({effects[n].evidence})' for n in names)
        what = 'the reference is empty ("change nothing")' if empty else 'the reference does not contain them'
        return _unnecessary(names, unasked, steps, f'{len(unasked)} state-changing call(s) nobody asked for, {what}: {how}.')


def _unnecessary(names: list[str], indices: list[int], steps: list[int | None], reasoning: str) -> ToolSelectionIssue:
    """A major selection finding: calls of `names` that should not have been made."""
    selection = ToolSelectionIssue(missed_tools=[], unnecessary_tools=names, reasoning=reasoning)
    selection.steps = [s for i in indices if (s := steps[i]) is not None]
    selection.severity = 'major'
    return selection


def _matched_share(matches: list[CallMatch], required: list[bool], extra_writes: int) -> float:
    """The weighted share of the reference done: a required call weighs 1, an advisory one less, and each
    extra state-changing call counts against it."""
    weights = [1.0 if r else _ADVISORY_WEIGHT for r in required]
    done = sum(w for w, m in zip(weights, matches, strict=True) if m.actual_index is not None)
    return done / (sum(weights) + extra_writes) if (sum(weights) + extra_writes) else 1.0


def _reasoning(issues: list[tuple[str, Issue]], expected: int) -> str:
    if issues:
        return '; '.join(_reason(i) for _, i in issues)
    if expected:
        return f'all {expected} expected call(s) matched and no state-changing call beyond them'
    return 'the reference is empty ("change nothing") and no call changed state'


def _call_details(
    calls: Sequence[ToolCall], matches: list[CallMatch], steps: list[int | None], effects: Mapping[str, Effect]
) -> list[dict[str, Any]]:
    """Each call: its step, whether it failed, the expectation it matched, and what its tool does."""
    by_call = {m.actual_index: k for k, m in enumerate(matches) if m.actual_index is not None}
    return [
        {
            'tool_name': c.tool_name,
            'step': steps[i],
            'failed': c.failed,
            'expected': by_call.get(i),
            'state_changing': effects[c.tool_name].state_changing,
            'evidence': effects[c.tool_name].evidence,
        }
        for i, c in enumerate(calls)
    ]


def _expected_details(matches: list[CallMatch], required: list[bool], steps: list[int | None]) -> list[dict[str, Any]]:
    """Each expected call: whether it matched (at which step) and whether it was required."""
    return [
        {
            'tool_name': m.expected.tool_name,
            'args': m.expected.args,
            'matched': m.actual_index is not None,
            'required': req,
            'step': steps[m.actual_index] if m.actual_index is not None else None,
        }
        for m, req in zip(matches, required, strict=True)
    ]


# ---------------------------------------------------------------------------------------------------
# Findings


def _parameter_issue(
    e: ExpectedToolCall,
    calls: Sequence[ToolCall],
    candidates: list[int],
    used: set[int],
    steps: list[int | None],
    compare: Compare,
) -> ToolParameterIssue:
    """The closest call of the right tool (fewest differing keys, unmatched calls first) and what differs."""
    want = normal_value(e.args or {})

    def diff(i: int) -> list[str]:
        return [k for k in compare.differing(e.args, calls[i].args) if k != '(arguments)']

    best = min(candidates, key=lambda i: (i in used, len(diff(i)), i))
    keys = diff(best) or ['(arguments)']
    have = normal_value(calls[best].args) if isinstance(calls[best].args, dict) else calls[best].args
    actual = {k: have.get(k, '(absent)') for k in keys} if isinstance(have, dict) else have
    suggested = {k: want.get(k, '(absent)') for k in keys}
    step = steps[best]
    issue = ToolParameterIssue(
        tool_name=e.tool_name,
        parameter=', '.join(keys),
        actual_value=_short(actual),
        suggested_value=_short(suggested),
        reasoning=(
            f'{e.tool_name} was called ({len(candidates)} successful call(s)) but never with the expected arguments; '
            f'the closest call{f" (step {step})" if step else ""} differs in {", ".join(keys)}.'
        ),
    )
    issue.steps = [step] if step is not None else []
    return issue


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + '…'


def _reason(issue: Issue) -> str:
    return str(getattr(issue, 'reasoning', type(issue).__name__))


def _mode_score(issues: list[tuple[str, Issue]], mode: str, share: float) -> float:
    """1 with no finding; 0.5 + 0.5·share with minor ones only; 0.5·share once a major one (module docstring)."""
    found = [i for m, i in issues if m == mode]
    if not found:
        return 1.0
    if all(i.severity == 'minor' for i in found):
        return 0.5 + 0.5 * share
    return 0.5 * share


def _steps_text(indices: list[int], steps: list[int | None]) -> str:
    return ', '.join(str(steps[i]) for i in indices if steps[i] is not None) or 'not shown'


def _call_steps(transcript: Transcript, calls: Sequence[ToolCall]) -> list[int | None]:
    """The transcript step of each tool call, by the call's position in the record."""
    return [step.number if (step := transcript.step_of(c.call_at)) is not None else None for c in calls]


def _context(record: QueryRecord) -> EvaluatorContext[Any, Any, Any]:
    return EvaluatorContext[Any, Any, Any](
        name=record.query_id,
        inputs=record.query,
        metadata=None,
        expected_output=None,
        output=record.final_answer(),
        duration=0.0,
        _span_tree=span_tree(record),
        attributes={},
        metrics={},
    )
