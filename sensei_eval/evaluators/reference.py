"""Reference checks: the record's tool calls against the `expected_tool_calls` it carries.

Semantics, chosen to mean what users mean by "the run made the expected calls" (and to reproduce the
per-action labels of published benchmarks such as tau2-bench):

* each expected call is matched to a **distinct** actual call (a multiset: a tool expected twice needs
  two calls) of the same tool whose arguments are **equal after JSON normalisation** (`arguments=
  'subset'`: the expected keys only); an expected call with `args: null` matches any call of its tool;
* only calls that did not error count (a result that reads as an error is a failed attempt);
* order is free (`ordered=True`: the matched calls must come in the expected order) and extra calls are
  allowed (`strict=True`: every successful call must be matched to an expected one).

The options are fields of the check (set them in a profile) and can be set per record in
`metadata.reference_check` (`{"strict": true, "ordered": true, "arguments": "subset"}`).

Findings land in the failure modes' issue models: an expected call with no successful call of its tool
is a `tool_selection` issue (a missed tool); a tool called but never with the expected arguments is a
`tool_parameters` issue naming the parameter, the expected and actual values and the step; with
`strict`, extra calls are a `tool_selection` issue (unnecessary tools). Each mode gets its own score.

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Literal

from pydantic_evals.evaluators import EvaluatorContext, ToolCorrectness
from pydantic_evals.online import run_evaluators

from ..issues import Issue, ToolParameterIssue, ToolSelectionIssue
from ..models import JudgeModel
from ..records import ExpectedToolCall, QueryRecord, ToolCall
from ..reports import JudgeResult
from ..spans import span_tree
from ..transcript import Transcript
from .base import Judge

__all__ = ('ArgumentMatch', 'CallMatch', 'ReferenceCheck', 'match_expected_calls')

ArgumentMatch = Literal['exact', 'subset']
# Keys a record's `metadata.reference_check` may set; anything else there is reported, not ignored.
_RECORD_OPTIONS = frozenset({'strict', 'ordered', 'arguments'})


@dataclass(frozen=True)
class CallMatch:
    """One expected call and the actual call (its index in `record.tool_calls()`) it was matched to."""

    expected: ExpectedToolCall
    actual_index: int | None


def match_expected_calls(
    expected: Sequence[ExpectedToolCall],
    calls: Sequence[ToolCall],
    *,
    ordered: bool = False,
    arguments: ArgumentMatch = 'exact',
) -> list[CallMatch]:
    """Match each expected call to a distinct successful call: a maximum matching, not a greedy one.

    Greedy matching fails on wildcards (`args: null` taking the one call a specific expectation needed),
    so unordered matching uses augmenting paths and ordered matching a longest common subsequence.
    """
    usable = [i for i, c in enumerate(calls) if not c.failed]

    def fits(e: ExpectedToolCall, i: int) -> bool:
        return calls[i].tool_name == e.tool_name and _arguments_match(e.args, calls[i].args, arguments)

    pairs = _ordered_matching(expected, usable, fits) if ordered else _bipartite_matching(expected, usable, fits)
    return [CallMatch(e, pairs.get(k)) for k, e in enumerate(expected)]


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

    def criteria_hash(self) -> str:
        params = {f.name: getattr(self, f.name) for f in fields(self)}
        return hashlib.sha256((_module_source() + json.dumps(params, sort_keys=True)).encode()).hexdigest()

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
        return replace(self, **changes), warnings

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        start = time.perf_counter()
        check, warnings = self.for_record(record)
        expected = record.expected_tool_calls or []
        calls = record.tool_calls()
        matches = match_expected_calls(expected, calls, ordered=check.ordered, arguments=check.arguments)
        steps = _call_steps(transcript, len(calls))
        issues = check._issues(matches, calls, steps)

        names_result, failures = await run_evaluators(
            [ToolCorrectness(expected_tools=[e.tool_name for e in expected], allow_extra=not check.strict)],
            _context(record),
        )
        if failures:
            message = '; '.join(f'{f.name}: {f.error_message}' for f in failures)
            return self._result(model=None, status='error', error=message, latency_s=time.perf_counter() - start)

        mode_scores = {'tool_selection': _mode_score(issues, 'tool_selection')}
        if any(e.args is not None for e in expected):
            mode_scores['tool_parameters'] = _mode_score(issues, 'tool_parameters')
        matched = sum(1 for m in matches if m.actual_index is not None)
        return self._result(
            model=None,
            status='ok',
            reasoning='; '.join(_reason(i) for _, i in issues) or f'all {len(expected)} expected call(s) matched',
            issues=[{**i.model_dump(mode='json'), 'failure_mode': mode} for mode, i in issues],
            score=min(mode_scores.values()),
            mode_scores=mode_scores,
            passed=not issues,
            latency_s=time.perf_counter() - start,
            warnings=warnings,
            details={
                'strict': check.strict,
                'ordered': check.ordered,
                'arguments': check.arguments,
                'matched': matched,
                'expected': [
                    {
                        'tool_name': m.expected.tool_name,
                        'args': m.expected.args,
                        'matched': m.actual_index is not None,
                        'step': steps[m.actual_index] if m.actual_index is not None else None,
                    }
                    for m in matches
                ],
                'ToolCorrectness': {'value': names_result[0].value, 'reason': names_result[0].reason},
            },
        )

    def _issues(self, matches: list[CallMatch], calls: Sequence[ToolCall], steps: list[int | None]) -> list[tuple[str, Issue]]:
        issues: list[tuple[str, Issue]] = []
        used = {m.actual_index for m in matches if m.actual_index is not None}
        for m in matches:
            if m.actual_index is not None:
                continue
            e = m.expected
            same_tool = [i for i, c in enumerate(calls) if c.tool_name == e.tool_name]
            ok = [i for i in same_tool if not calls[i].failed]
            if ok and not any(_arguments_match(e.args, calls[i].args, self.arguments) for i in ok):
                issues.append(('tool_parameters', _parameter_issue(e, calls, ok, used, steps, self.arguments)))
                continue
            if ok:  # a fitting call exists, but it is out of the expected order or taken by another expectation
                why = (f'{e.tool_name} was called with the expected arguments, but not in the expected order'
                       if self.ordered else f'{e.tool_name} is expected more times than it was successfully called so')
            elif same_tool:
                why = f'every call of {e.tool_name} failed (steps {_steps_text(same_tool, steps)})'
            else:
                why = f'{e.tool_name} was expected but never called'
            issue = ToolSelectionIssue(missed_tools=[e.tool_name], unnecessary_tools=[], reasoning=why + '.')
            issue.steps = [s for i in same_tool if (s := steps[i]) is not None]
            issues.append(('tool_selection', issue))
        if self.strict:
            extra = [i for i, c in enumerate(calls) if not c.failed and i not in used]
            if extra:
                names = sorted({calls[i].tool_name for i in extra})
                issue = ToolSelectionIssue(
                    missed_tools=[],
                    unnecessary_tools=names,
                    reasoning=f'{len(extra)} call(s) beyond the expected ones (strict): {", ".join(names)}.',
                )
                issue.steps = [s for i in extra if (s := steps[i]) is not None]
                issues.append(('tool_selection', issue))
        for _, found in issues:
            found.source = 'check'
        return issues


# ---------------------------------------------------------------------------------------------------
# Matching


def _normal(value: Any) -> Any:
    """JSON normalisation: what JSON cannot tell apart compares equal (key order, tuples vs lists)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _arguments_match(expected: dict[str, Any] | None, actual: dict[str, Any] | str, mode: ArgumentMatch) -> bool:
    if expected is None:
        return True
    if not isinstance(actual, dict):
        return False
    want, have = _normal(expected), _normal(actual)
    if mode == 'subset':
        return all(k in have and have[k] == v for k, v in want.items())
    return bool(want == have)


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
    mode: ArgumentMatch,
) -> ToolParameterIssue:
    """The closest call of the right tool (fewest differing keys, unmatched calls first) and what differs."""
    want = _normal(e.args or {})

    def diff(i: int) -> list[str]:
        have = _normal(calls[i].args) if isinstance(calls[i].args, dict) else {}
        keys = [k for k in want if have.get(k, _MISSING) != want[k]]
        if mode == 'exact':
            keys += [k for k in have if k not in want]
        return keys

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


_MISSING = object()


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + '…'


def _reason(issue: Issue) -> str:
    return str(getattr(issue, 'reasoning', type(issue).__name__))


def _mode_score(issues: list[tuple[str, Issue]], mode: str) -> float:
    return max(0.0, 1.0 - 0.5 * sum(1 for m, _ in issues if m == mode))


def _steps_text(indices: list[int], steps: list[int | None]) -> str:
    return ', '.join(str(steps[i]) for i in indices if steps[i] is not None) or 'not shown'


def _call_steps(transcript: Transcript, n_calls: int) -> list[int | None]:
    """The transcript step of each tool call: calls render in the order `record.tool_calls()` lists them."""
    numbers: list[int | None] = [s.number for s in transcript.steps if s.kind == 'tool_call']
    return (numbers + [None] * n_calls)[:n_calls]


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
