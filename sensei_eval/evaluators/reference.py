"""Reference checks: the record's tool calls against the `expected_tool_calls` it carries.

Nothing is re-implemented here: the record is adapted into a span tree (`sensei_eval.spans`) and
pydantic-evals' own agentic evaluators run on it through `pydantic_evals.online.run_evaluators`:

* `ToolCorrectness` — every expected tool was called (extra calls allowed: research agents explore);
* `TrajectoryMatch` — the expected tools in the expected order (LCS-based F1, `in_order`);
* `ArgumentCorrectness` — for each expected call that names `args`, the first successful call of that
  tool must contain them (`subset`, `occurrence="first"`: pydantic-evals has no "any occurrence").

Failed attempts (a tool result that reads as an error) don't count, as in pydantic-evals. The check
applies only to records with `expected_tool_calls`; others list it as skipped. The result's score is
the mean of the evaluators' values, it passes when all of them pass, and every evaluator's value and
reason is kept in `details`. An evaluator that raises makes the whole check an error.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic_evals.evaluators import ArgumentCorrectness, EvaluatorContext, ToolCorrectness, TrajectoryMatch
from pydantic_evals.evaluators.evaluator import Evaluator
from pydantic_evals.online import run_evaluators

from ..models import JudgeModel
from ..records import QueryRecord
from ..reports import JudgeResult
from ..spans import span_tree
from ..transcript import Transcript
from .base import Judge

__all__ = ('ReferenceCheck', 'reference_evaluators')


def reference_evaluators(record: QueryRecord) -> list[Evaluator[Any, Any, Any]]:
    expected = record.expected_tool_calls or []
    names = [e.tool_name for e in expected]
    evaluators: list[Evaluator[Any, Any, Any]] = [
        ToolCorrectness(expected_tools=names, allow_extra=True),
        TrajectoryMatch(expected_trajectory=names, order='in_order'),
    ]
    for i, e in enumerate(expected):
        if e.args:
            evaluators.append(
                ArgumentCorrectness(
                    tool_name=e.tool_name,
                    expected_arguments=e.args,
                    match_mode='subset',
                    occurrence='first',
                    evaluation_name=f'ArgumentCorrectness[{i}:{e.tool_name}]',
                )
            )
    return evaluators



@functools.cache
def _reference_hash() -> str:
    """The source of the reference evaluators, hashed once."""
    return hashlib.sha256(inspect.getsource(reference_evaluators).encode()).hexdigest()

@dataclass(repr=False)
class ReferenceCheck(Judge):
    """pydantic-evals' agentic evaluators against the record's expected tool calls."""

    name: ClassVar[str] = 'reference_check'
    category: ClassVar[str | None] = 'tool_usage'
    needs_model: ClassVar[bool] = False

    def criteria_hash(self) -> str:
        return _reference_hash()

    def applies_to(self, record: QueryRecord) -> str | None:
        return None if record.expected_tool_calls else 'the record has no expected_tool_calls'

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        start = time.perf_counter()
        ctx = EvaluatorContext[Any, Any, Any](
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
        results, failures = await run_evaluators(reference_evaluators(record), ctx)
        elapsed = time.perf_counter() - start
        if failures:
            message = '; '.join(f'{f.name}: {f.error_message}' for f in failures)
            return self._result(model=None, status='error', error=message, latency_s=elapsed)
        details = {r.name: {'value': r.value, 'reason': r.reason} for r in results}
        values = [float(r.value) for r in results if isinstance(r.value, bool | int | float)]
        passed = all((r.value is True) or (not isinstance(r.value, bool) and float(r.value) >= 1.0) for r in results)
        failing = [f'{r.name}: {r.reason or r.value}' for r in results if r.value is not True and r.value != 1.0]
        return self._result(
            model=None,
            status='ok',
            reasoning='; '.join(failing) or 'matches the expected tool calls',
            score=sum(values) / len(values) if values else None,
            passed=passed,
            latency_s=elapsed,
            details={'evaluators': json.loads(json.dumps(details, default=str))},
        )
