"""Reference checks: the record's tool calls against the `expected_tool_calls` it carries.

Semantics, chosen to mean what users mean by "the run made the expected calls" (and to reproduce the
per-action labels of published benchmarks such as tau2-bench):

* each expected call is matched to a **distinct** actual call (a multiset: a tool expected twice needs
  two calls) of the same tool whose arguments are **equal** (`arguments='subset'`: the expected keys
  only); an expected call with `args: null` matches any call of its tool;
* argument values compare `lenient` by default: what JSON cannot tell apart (key order), numbers and
  numeric strings (`"100"` == `100` == `100.0`), spaces around any string, and case and runs of
  whitespace in **free text** (a string of `free_text_words` words or more). `exact` compares the
  JSON values; `ignore` skips the argument. Set it for the check (`values`), per tool or per argument
  (`tools: {NAME: {values: ..., args: {ARG: exact|lenient|ignore}}}`);
* only calls that did not error count (a result that reads as an error is a failed attempt);
* order is free (`ordered=True`: the matched calls must come in the expected order) and extra calls are
  allowed (`strict=True`: every successful call must be matched to an expected one).

The per-call match table (`details.expected[*].matched`) follows those rules only, so agreement with a
benchmark's per-action labels stays measurable. What a miss *means* depends on the call:

* an expected call is **required** or **advisory**: `required` on the expected call, else
  `tools.NAME.required`, else advisory when its tool is **read-only** and required otherwise;
* a tool is read-only when the record's tool definitions say so (`metadata.tools`: MCP-style
  `{"name": ..., "annotations": {"readOnlyHint": true}}`, also under `function`), else by
  `tools.NAME.read_only`, else when its name matches `read_only_patterns` (by default a lookup verb
  at the start of the name: get_, list_, search_, find_, read_, lookup_, fetch_, describe_, view_,
  show_, and their camelCase forms) — a convention, not knowledge of any one agent;
* a missing or wrong required call is a `major` finding and fails the check; a missing advisory call,
  or a call whose only differing arguments are free text (a summary in other words), is a `minor`
  finding: reported, scored lower, but the check passes.

Findings land in the failure modes' issue models: an expected call with no successful call of its tool
is a `tool_selection` issue (a missed tool); a tool called but never with the expected arguments is a
`tool_parameters` issue naming the parameter, the expected and actual values and the step; with
`strict`, extra calls are a `tool_selection` issue (unnecessary tools). Each mode gets its own score:
1 with no finding; `0.5 + 0.5·r` with only minor ones; `0.5·r` once a major one, where `r` is the
share of expected calls matched, weighted 1 per required call and 0.25 per advisory one (so runs
rank by how much of the reference they did, and any failed required call ranks below every pass).

The options are fields of the check (set them in a profile) and can be set per record in
`metadata.reference_check` (`{"strict": true, "ordered": true, "arguments": "subset",
"values": "exact"}`).

pydantic-evals' `ToolCorrectness` (run on a span tree built from the record) gives the same answer for
tool names and still runs, so its verdict sits beside ours in `details`. Its `ArgumentCorrectness`
inspects one occurrence of a tool (first, last or an index), so a tool expected twice with different
arguments can never pass it, and its `TrajectoryMatch` F1 falls below 1 with any extra call: neither
can express the matching above, which is why the arguments and the order are matched here.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal

from pydantic_evals.evaluators import EvaluatorContext, ToolCorrectness
from pydantic_evals.online import run_evaluators

from sensei_eval.core.issues import Issue, ToolParameterIssue, ToolSelectionIssue
from sensei_eval.core.records import ExpectedToolCall, QueryRecord, ToolCall
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.spans import span_tree
from sensei_eval.core.transcript import Transcript
from sensei_eval.evaluators.base import Judge
from sensei_eval.models.judge_model import JudgeModel

__all__ = (
    'DEFAULT_READ_ONLY_PATTERNS',
    'ArgumentMatch',
    'CallMatch',
    'ReferenceCheck',
    'ValueMatch',
    'match_expected_calls',
    'read_only_tools',
)

ArgumentMatch = Literal['exact', 'subset']
ValueMatch = Literal['exact', 'lenient', 'ignore']
_VALUE_MATCHES = ('exact', 'lenient', 'ignore')
# Keys a record's `metadata.reference_check` may set; anything else there is reported, not ignored.
_RECORD_OPTIONS = frozenset({'strict', 'ordered', 'arguments', 'values'})
# Keys of one tool's rule in `tools`.
_TOOL_RULE_KEYS = frozenset({'required', 'read_only', 'values', 'args'})
# A lookup verb at the start of a tool name (snake_case, kebab, dotted or camelCase): the common
# convention for tools that only read. A profile replaces the list; tool annotations win over it.
DEFAULT_READ_ONLY_PATTERNS: tuple[str, ...] = (
    r'^(?:get|list|search|find|read|lookup|fetch|describe|view|show)(?:[_\-.A-Z0-9]|$)',
)
# A string of this many words or more is free text (a summary, a reason, a message): compared without
# case and runs of whitespace, and a difference in it alone is a minor finding.
_FREE_TEXT_WORDS = 6
# Weight of an advisory expected call in the matched share `r` (a required call weighs 1): a missed
# lookup costs a quarter of what a missed state change costs.
_ADVISORY_WEIGHT = 0.25
_NUMERIC = re.compile(r'[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?')


@dataclass(frozen=True)
class CallMatch:
    """One expected call and the actual call (its index in `record.tool_calls()`) it was matched to."""

    expected: ExpectedToolCall
    actual_index: int | None


@dataclass(frozen=True)
class _Compare:
    """How one tool's arguments compare: which keys count (`keys`), and each value's mode."""

    keys: ArgumentMatch = 'exact'
    values: ValueMatch = 'lenient'
    args: Mapping[str, ValueMatch] = field(default_factory=dict)
    free_text_words: int = _FREE_TEXT_WORDS

    def mode(self, key: str) -> ValueMatch:
        return self.args.get(key, self.values)

    def differing(self, expected: dict[str, Any] | None, actual: dict[str, Any] | str) -> list[str]:
        """The argument names whose values differ (`['(arguments)']` for arguments that are not an object)."""
        if expected is None:
            return []
        if not isinstance(actual, dict):
            return ['(arguments)']
        keys = [k for k in expected if self.mode(k) != 'ignore' and not self.equal(k, expected[k], actual, k in actual)]
        if self.keys == 'exact':
            keys += [k for k in actual if k not in expected and self.mode(k) != 'ignore']
        return keys

    def equal(self, key: str, want: Any, actual: dict[str, Any], present: bool) -> bool:
        if not present:
            return False
        if self.mode(key) == 'exact':
            return bool(_normal(want) == _normal(actual[key]))
        return bool(_lenient(want, self.free_text_words) == _lenient(actual[key], self.free_text_words))

    def free_text(self, value: Any) -> bool:
        return isinstance(value, str) and len(value.split()) >= self.free_text_words


def match_expected_calls(
    expected: Sequence[ExpectedToolCall],
    calls: Sequence[ToolCall],
    *,
    ordered: bool = False,
    arguments: ArgumentMatch = 'exact',
    values: ValueMatch = 'lenient',
    compare: Callable[[str], _Compare] | None = None,
) -> list[CallMatch]:
    """Match each expected call to a distinct successful call: a maximum matching, not a greedy one.

    Greedy matching fails on wildcards (`args: null` taking the one call a specific expectation needed),
    so unordered matching uses augmenting paths and ordered matching a longest common subsequence.
    `compare` gives each tool's comparison (per-tool and per-argument modes); by default every tool
    compares with `arguments` and `values`.
    """
    usable = [i for i, c in enumerate(calls) if not c.failed]
    default = _Compare(keys=arguments, values=values)
    rule = compare or (lambda _name: default)

    def fits(e: ExpectedToolCall, i: int) -> bool:
        return calls[i].tool_name == e.tool_name and not rule(e.tool_name).differing(e.args, calls[i].args)

    pairs = _ordered_matching(expected, usable, fits) if ordered else _bipartite_matching(expected, usable, fits)
    return [CallMatch(e, pairs.get(k)) for k, e in enumerate(expected)]


def read_only_tools(record: QueryRecord) -> dict[str, bool]:
    """Tool name -> its `readOnlyHint`, from the tool definitions a record carries (`metadata.tools`)."""
    out: dict[str, bool] = {}
    tools = record.metadata.get('tools')
    if not isinstance(tools, list):
        return out
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        function = tool.get('function')
        inner: dict[str, Any] = function if isinstance(function, dict) else tool
        name = inner.get('name') or tool.get('name')
        notes = inner.get('annotations') or tool.get('annotations')
        if isinstance(name, str) and isinstance(notes, dict) and isinstance(notes.get('readOnlyHint'), bool):
            out[name] = notes['readOnlyHint']
    return out


@functools.cache
def _module_source() -> str:
    """The matching code, read once: the criteria hash changes when the semantics do."""
    import sys

    return inspect.getsource(sys.modules[__name__])


@dataclass(repr=False)
class ReferenceCheck(Judge):
    """The record's successful tool calls against its expected tool calls (see the module docstring)."""

    name: ClassVar[str] = 'reference_check'
    failure_mode: ClassVar[str | None] = 'tool_selection'
    # it reports findings of both modes, each tagged with its own (see reports.mode_verdicts)
    failure_modes: ClassVar[tuple[str, ...]] = ('tool_selection', 'tool_parameters')
    needs_model: ClassVar[bool] = False

    strict: bool = False
    ordered: bool = False
    arguments: ArgumentMatch = 'exact'
    values: ValueMatch = 'lenient'
    # per tool: {required: bool, read_only: bool, values: exact|lenient|ignore, args: {ARG: mode}}
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    read_only_patterns: Sequence[str] = DEFAULT_READ_ONLY_PATTERNS
    free_text_words: int = _FREE_TEXT_WORDS

    def __post_init__(self) -> None:
        if self.values not in _VALUE_MATCHES:
            raise ValueError(f'values: expected one of {", ".join(_VALUE_MATCHES)}, got {self.values!r}')
        if not isinstance(self.tools, Mapping):
            raise ValueError('tools: expected a mapping of tool name to its rule')
        for name, rule in self.tools.items():
            if not isinstance(rule, Mapping):
                raise ValueError(f'tools.{name}: expected a mapping (required, read_only, values, args)')
            for key in rule:
                if key not in _TOOL_RULE_KEYS:
                    raise ValueError(f'tools.{name}.{key}: unknown key (known: {", ".join(sorted(_TOOL_RULE_KEYS))})')
            for key in ('required', 'read_only'):
                if key in rule and not isinstance(rule[key], bool):
                    raise ValueError(f'tools.{name}.{key}: expected true or false')
            if 'values' in rule and rule['values'] not in _VALUE_MATCHES:
                raise ValueError(f'tools.{name}.values: expected one of {", ".join(_VALUE_MATCHES)}')
            args = rule.get('args', {})
            if not isinstance(args, Mapping) or any(v not in _VALUE_MATCHES for v in args.values()):
                raise ValueError(f'tools.{name}.args: expected a mapping of argument to {"|".join(_VALUE_MATCHES)}')
        for pattern in self.read_only_patterns:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f'read_only_patterns: {pattern!r} is not a regular expression ({e})') from None

    def criteria_hash(self) -> str:
        params = {f.name: getattr(self, f.name) for f in fields(self)}
        text = json.dumps(params, sort_keys=True, default=lambda v: list(v) if isinstance(v, tuple) else str(v))
        return hashlib.sha256((_module_source() + text).encode()).hexdigest()

    def applies_to(self, record: QueryRecord) -> str | None:
        return None if record.expected_tool_calls else 'the record has no expected_tool_calls'

    def for_record(self, record: QueryRecord) -> tuple[ReferenceCheck, list[str]]:
        """This check with the record's own options applied, and warnings about options it could not use."""
        options = record.metadata.get('reference_check')
        if options is None:
            return self, []
        if not isinstance(options, dict):
            return self, [f'metadata.reference_check: expected an object, got {type(options).__name__}; ignored']
        warnings = [f'metadata.reference_check.{k}: unknown option (known: {sorted(_RECORD_OPTIONS)}); ignored'
                    for k in options if k not in _RECORD_OPTIONS]  # fmt: skip
        changes: dict[str, Any] = {}
        for key in ('strict', 'ordered'):
            if key in options:
                if isinstance(options[key], bool):
                    changes[key] = options[key]
                else:
                    warnings.append(f'metadata.reference_check.{key}: expected true or false; ignored')
        if 'arguments' in options:
            if options['arguments'] in ('exact', 'subset'):
                changes['arguments'] = options['arguments']
            else:
                warnings.append("metadata.reference_check.arguments: expected 'exact' or 'subset'; ignored")
        if 'values' in options:
            if options['values'] in _VALUE_MATCHES:
                changes['values'] = options['values']
            else:
                warnings.append(f'metadata.reference_check.values: expected one of {", ".join(_VALUE_MATCHES)}; ignored')
        return replace(self, **changes), warnings

    def compare_for(self, tool: str) -> _Compare:
        """How `tool`'s arguments compare under this check's options and its rule for the tool."""
        rule = self.tools.get(tool, {})
        return _Compare(
            keys=self.arguments,
            values=rule.get('values', self.values),
            args=dict(rule.get('args', {})),
            free_text_words=self.free_text_words,
        )

    def read_only(self, tool: str, hints: Mapping[str, bool]) -> bool:
        """Whether `tool` only reads: the record's tool annotations, then the rule, then the name patterns."""
        if tool in hints:
            return hints[tool]
        rule = self.tools.get(tool, {})
        if 'read_only' in rule:
            return bool(rule['read_only'])
        return any(re.search(p, tool) for p in self.read_only_patterns)

    def required(self, e: ExpectedToolCall, hints: Mapping[str, bool]) -> bool:
        """Whether missing `e` fails the run (see the module docstring for the order of the rules)."""
        if e.required is not None:
            return e.required
        rule = self.tools.get(e.tool_name, {})
        if 'required' in rule:
            return bool(rule['required'])
        return not self.read_only(e.tool_name, hints)

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        start = time.perf_counter()
        check, warnings = self.for_record(record)
        expected = record.expected_tool_calls or []
        calls = record.tool_calls()
        matches = match_expected_calls(expected, calls, ordered=check.ordered, compare=check.compare_for)
        hints = read_only_tools(record)
        required = [check.required(e, hints) for e in expected]
        steps = _call_steps(transcript, calls)
        issues = check._issues(matches, calls, steps, required)

        names_result, failures = await run_evaluators(
            [ToolCorrectness(expected_tools=[e.tool_name for e in expected], allow_extra=not check.strict)],
            _context(record),
        )
        if failures:
            message = '; '.join(f'{f.name}: {f.error_message}' for f in failures)
            return self._result(model=None, status='error', error=message, latency_s=time.perf_counter() - start)

        weights = [1.0 if r else _ADVISORY_WEIGHT for r in required]
        share = sum(w for w, m in zip(weights, matches, strict=True) if m.actual_index is not None) / (sum(weights) or 1.0)
        mode_scores = {'tool_selection': _mode_score(issues, 'tool_selection', share)}
        if any(e.args is not None for e in expected):
            mode_scores['tool_parameters'] = _mode_score(issues, 'tool_parameters', share)
        matched = sum(1 for m in matches if m.actual_index is not None)
        failing = [i for _, i in issues if i.severity != 'minor']
        return self._result(
            model=None,
            status='ok',
            reasoning='; '.join(_reason(i) for _, i in issues) or f'all {len(expected)} expected call(s) matched',
            issues=[{**i.model_dump(mode='json'), 'failure_mode': mode} for mode, i in issues],
            score=min(mode_scores.values()),
            mode_scores=mode_scores,
            passed=not failing,
            latency_s=time.perf_counter() - start,
            warnings=warnings,
            details={
                'strict': check.strict,
                'ordered': check.ordered,
                'arguments': check.arguments,
                'values': check.values,
                'matched': matched,
                'matched_share': round(share, 4),
                'minor_findings': len(issues) - len(failing),
                'expected': [
                    {
                        'tool_name': m.expected.tool_name,
                        'args': m.expected.args,
                        'matched': m.actual_index is not None,
                        'required': req,
                        'step': steps[m.actual_index] if m.actual_index is not None else None,
                    }
                    for m, req in zip(matches, required, strict=True)
                ],
                'ToolCorrectness': {'value': names_result[0].value, 'reason': names_result[0].reason},
            },
        )

    def _issues(
        self, matches: list[CallMatch], calls: Sequence[ToolCall], steps: list[int | None], required: list[bool]
    ) -> list[tuple[str, Issue]]:
        issues: list[tuple[str, Issue]] = []
        used = {m.actual_index for m in matches if m.actual_index is not None}
        for m, req in zip(matches, required, strict=True):
            if m.actual_index is not None:
                continue
            e = m.expected
            compare = self.compare_for(e.tool_name)
            same_tool = [i for i, c in enumerate(calls) if c.tool_name == e.tool_name]
            ok = [i for i in same_tool if not calls[i].failed]
            if ok and all(compare.differing(e.args, calls[i].args) for i in ok):
                issue = _parameter_issue(e, calls, ok, used, steps, compare)
                free = all(compare.free_text((e.args or {}).get(k)) for k in issue.parameter.split(', '))
                issue.severity = 'major' if req and not free else 'minor'
                if req and free:
                    issue.reasoning += ' Only free text differs (a summary or message in other words): a minor finding.'
                issues.append(('tool_parameters', issue))
                continue
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
            if not req:
                why += ' (an advisory call: a read-only lookup or marked not required)'
            selection = ToolSelectionIssue(missed_tools=[e.tool_name], unnecessary_tools=[], reasoning=why + '.')
            selection.steps = [s for i in same_tool if (s := steps[i]) is not None]
            selection.severity = 'major' if req else 'minor'
            issues.append(('tool_selection', selection))
        if self.strict:
            extra = [i for i, c in enumerate(calls) if not c.failed and i not in used]
            if extra:
                names = sorted({calls[i].tool_name for i in extra})
                selection = ToolSelectionIssue(
                    missed_tools=[],
                    unnecessary_tools=names,
                    reasoning=f'{len(extra)} call(s) beyond the expected ones (strict): {", ".join(names)}.',
                )
                selection.steps = [s for i in extra if (s := steps[i]) is not None]
                selection.severity = 'major'
                issues.append(('tool_selection', selection))
        for _, found in issues:
            found.source = 'check'
        return issues


# ---------------------------------------------------------------------------------------------------
# Matching


def _normal(value: Any) -> Any:
    """JSON normalisation: what JSON cannot tell apart compares equal (key order, tuples vs lists)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _lenient(value: Any, free_text_words: int) -> Any:
    """The lenient form of a value: numeric strings as numbers, strings stripped, free text folded."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if _NUMERIC.fullmatch(text):
            try:
                return float(text)
            except ValueError:  # pragma: no cover - the pattern only lets floats through
                return text
        return ' '.join(text.casefold().split()) if len(text.split()) >= free_text_words else text
    if isinstance(value, dict):
        return {str(k): _lenient(v, free_text_words) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lenient(v, free_text_words) for v in value]
    return _normal(value)


def _bipartite_matching(
    expected: Sequence[ExpectedToolCall], usable: list[int], fits: Callable[[ExpectedToolCall, int], bool]
) -> dict[int, int]:
    """Maximum bipartite matching (Kuhn's augmenting paths): expected index -> call index."""
    owner: dict[int, int] = {}  # call index -> expected index

    def augment(k: int, seen: set[int]) -> bool:
        for i in usable:
            if i in seen or not fits(expected[k], i):
                continue
            seen.add(i)
            if i not in owner or augment(owner[i], seen):
                owner[i] = k
                return True
        return False

    for k in range(len(expected)):
        augment(k, set())
    return {k: i for i, k in owner.items()}


def _ordered_matching(
    expected: Sequence[ExpectedToolCall], usable: list[int], fits: Callable[[ExpectedToolCall, int], bool]
) -> dict[int, int]:
    """The longest run of expected calls matched in order (LCS with `fits` as equality)."""
    n, m = len(expected), len(usable)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for a in range(n - 1, -1, -1):
        for b in range(m - 1, -1, -1):
            best = max(table[a + 1][b], table[a][b + 1])
            if fits(expected[a], usable[b]):
                best = max(best, table[a + 1][b + 1] + 1)
            table[a][b] = best
    pairs: dict[int, int] = {}
    a = b = 0
    while a < n and b < m:
        if fits(expected[a], usable[b]) and table[a][b] == table[a + 1][b + 1] + 1:
            pairs[a] = usable[b]
            a, b = a + 1, b + 1
        elif table[a + 1][b] >= table[a][b + 1]:
            a += 1
        else:
            b += 1
    return pairs


# ---------------------------------------------------------------------------------------------------
# Findings


def _parameter_issue(
    e: ExpectedToolCall,
    calls: Sequence[ToolCall],
    candidates: list[int],
    used: set[int],
    steps: list[int | None],
    compare: _Compare,
) -> ToolParameterIssue:
    """The closest call of the right tool (fewest differing keys, unmatched calls first) and what differs."""
    want = _normal(e.args or {})

    def diff(i: int) -> list[str]:
        return [k for k in compare.differing(e.args, calls[i].args) if k != '(arguments)']

    best = min(candidates, key=lambda i: (i in used, len(diff(i)), i))
    keys = diff(best) or ['(arguments)']
    have = _normal(calls[best].args) if isinstance(calls[best].args, dict) else calls[best].args
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
