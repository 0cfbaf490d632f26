"""sensei judges in pydantic-evals, judged by the record engine: a judge's own `evaluate()` and `Verdicts`.

Every judge is a pydantic-evals `Evaluator` (`evaluators.base.Judge`), so it goes into a `Dataset` or an
`OnlineEvaluation` as it is. Its `evaluate()` reads the case's record (`evaluators.base.record_from_context`)
and hands it to the engine registered for it, `evaluate_record` here: the judges sit in a layer below this
one and cannot import it, so the engine is injected (the `sensei_eval.engines` entry point in
`pyproject.toml`, or `evaluators.base.use_engine`). `evaluate_record` runs `judge_record` (`judging.record`),
so a case is judged as `sensei-eval judge` judges a record: its agent profile (the record's
`metadata.profile`, else `default`) picks and configures the judges, a judge that does not apply gives no
result, every judge reads the transcript cut to its model's budget and fitted to its context, and the verdict
model reads the results.

`Verdicts(judges)` judges a case with a whole judge set in one evaluator, fused by the run's rule (with a
model, the LLM judges in one call), and answers with `core.evaluator_outputs.verdict_outputs`: each judge's
status, score and pass/fail, the record's `overall` score beside its coverage. Its `options` carry what a
run's options would (cache, profile, fusing); its judges' model is their own (`model=`) or the default one
(`evaluators.base.use_judge_model`, else `$SENSEI_EVAL_MODEL`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_evals.evaluators import Evaluator, EvaluatorContext, EvaluatorOutput

from sensei_eval.core.evaluator_outputs import verdict_outputs
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult
from sensei_eval.evaluators.base import Judge, record_from_context
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.record import judge_record, record_profile
from sensei_eval.models.judge_model import JudgeModel

__all__ = ('Verdicts', 'evaluate_record')


async def evaluate_record(
    record: QueryRecord, judges: Sequence[Judge], options: JudgeRunOptions | None = None
) -> list[JudgeResult]:
    """The results of `judges` on `record`, by `judge_record` under `options` (default: no cache, the
    `default` profile, fused by the run's rule), each judge with its own model (`resolve_judge_model`: its
    `model=`, else the default judge model). Judges with different models are judged one model at a time.
    A judge that does not apply under the record's profile gives no result, and its model is not resolved."""
    options = options or JudgeRunOptions()
    profile, _ = record_profile(record, options)
    applying = [j for j in judges if profile.skip_reason(j) is None and j.applies_to(record) is None]
    groups: dict[int, tuple[JudgeModel | None, list[Judge]]] = {}
    for judge in applying:
        model = judge.resolve_judge_model() if judge.needs_model else None
        groups.setdefault(id(model) if model is not None else 0, (model, []))[1].append(judge)
    checks = groups.pop(0, (None, []))[1]
    if not groups:
        groups[0] = (None, [])
    results: list[JudgeResult] = []
    for k, (model, group) in enumerate(groups.values()):
        chosen = [*checks, *group] if k == 0 else group  # the checks once, with the first model's judges
        chosen = [j for j in judges if any(j is c for c in chosen)]  # in the order given
        if chosen:
            report = await judge_record(record, chosen, replace(options, model=model))
            results.extend(report.judges.values())
    return results


@dataclass(repr=False)
class Verdicts(Evaluator[Any, Any, Any]):
    """Every judge of `judges` that applies, and the record's overall score and coverage (module docstring)."""

    judges: Sequence[Judge]
    options: JudgeRunOptions = field(default_factory=JudgeRunOptions)

    def get_default_evaluation_name(self) -> str:
        return 'verdicts'

    async def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluatorOutput:
        return verdict_outputs(await evaluate_record(record_from_context(ctx), self.judges, self.options))
