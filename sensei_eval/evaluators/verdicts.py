"""A record's judges as one pydantic-evals evaluator, read through the verdict model: per judge its
verdict, and the record's overall score beside its coverage, as `sensei-eval judge` reports them.

Each judge used as an evaluator on its own (`Dataset(evaluators=judges)`) gives its score and
`<judge>_passed`; a record's overall score needs all of them at once. `Verdicts(judges)` runs the judges
that apply to the case's record (`Judge.applies_to`), reads their results with
`core.verdicts.record_verdict` and returns:

* `<judge>` — the judge's score and `<judge>_passed`, for a judge that gave a pass/fail verdict;
* `<judge>_status` — a label: `pass`, `fail`, `inconclusive`, `error` or `smoke` (an answer of the
  embedded model: never a verdict);
* `overall` — the record's overall score, with its coverage as the reason; absent when no judge
  judged ("not judged": never a 1.0);
* `coverage` — a label: `all 5 judges`, `checks only, 4 of 7 judges`, `not judged`.

To judge a case as a run does, give it the judges its agent profile runs
(`judging.profiles.record_judges`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext, EvaluatorOutput

from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.transcript import render_transcript
from sensei_eval.core.verdicts import is_judged, judge_status, record_verdict
from sensei_eval.evaluators.base import Judge, record_from_context
from sensei_eval.evaluators.fused import FusedJudge

__all__ = ('Verdicts', 'verdict_outputs')


@dataclass(repr=False)
class Verdicts(Evaluator[Any, Any, Any]):
    """Every judge of `judges` that applies, and the record's overall score and coverage (module docstring)."""

    judges: Sequence[Judge]

    def get_default_evaluation_name(self) -> str:
        return 'verdicts'

    async def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluatorOutput:
        record = record_from_context(ctx)
        results: list[JudgeResult] = []
        for judge in self.judges:
            if judge.applies_to(record) is not None:
                continue  # not applicable: no result, as in a run's report
            model = judge.resolve_judge_model()
            transcript = render_transcript(record, budget_tokens=model.transcript_budget if model else None)
            if isinstance(judge, FusedJudge):
                results.extend(await judge.judge_members(record, transcript, model))
            else:
                results.append(await judge.judge(record, transcript, model))
        return verdict_outputs(results)


def verdict_outputs(results: Sequence[JudgeResult]) -> dict[str, bool | int | float | str | EvaluationReason]:
    """A record's judge results as pydantic-evals outputs, read from the verdict model: per judge its
    `<judge>_status`, and when it judged its score and `<judge>_passed` (a score-only judge asserts
    nothing); the record's `overall` score with its coverage (absent when not judged) and `coverage`.
    `Verdicts` and the online judging of a live agent (`production.online`) both answer with it."""
    verdict = record_verdict(results)
    out: dict[str, bool | int | float | str | EvaluationReason] = {}
    for result in results:
        status = judge_status(result)
        out[f'{result.judge}_status'] = EvaluationReason(value=status, reason=result.error)
        if is_judged(status):
            reason = (result.reasoning or '').strip() or None
            if result.score is not None:
                out[result.judge] = EvaluationReason(value=result.score, reason=reason)
            if result.passed is not None or result.issues:  # a score-only judge asserts nothing
                out[f'{result.judge}_passed'] = EvaluationReason(value=status == 'pass', reason=reason)
    if verdict.overall_score is not None:
        out['overall'] = EvaluationReason(value=verdict.overall_score, reason=verdict.coverage.label)
    out['coverage'] = verdict.coverage.label
    return out
