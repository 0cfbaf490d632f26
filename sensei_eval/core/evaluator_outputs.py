"""How judge results read in pydantic-evals: the one projection of a `JudgeResult` into evaluator outputs.

Every surface that answers pydantic-evals (a judge's own `evaluate()`, `Verdicts`, online judging of a live
agent, the console's per-record table) reads a result through the verdict model (`core.verdicts`) and
projects it here, so a verdict reads the same everywhere:

* `result_outputs(result)` — for a result that judged (pass or fail): `<judge>`, its score, and
  `<judge>_passed`, whether it passed (a score-only judge, with neither pass/fail nor findings, asserts
  nothing); each with the judge's reasoning as the reason. A result that did not judge (error,
  inconclusive, smoke, not applicable) has no score and no assertion: never a 0 or a pass;
* `verdict_outputs(results)` — a record's results: each judge's `result_outputs` and its
  `<judge>_status` label (`pass`, `fail`, `inconclusive`, `error`, `smoke`, `not_applicable`), the
  record's `overall` score with its coverage as the reason (absent when nothing judged), and `coverage`;
* `to_pydantic_evals_report(reports)` — a run's reports as a pydantic-evals `EvaluationReport` (its console
  table and baseline comparison): per case each judge's score and assertion (named after the judge), a
  result that did not judge as an evaluator failure, and the `overall` score.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic_evals.evaluators import EvaluationReason

from sensei_eval.core.reports import JudgeResult, RecordReport
from sensei_eval.core.verdicts import is_judged, judge_status, record_verdict

if TYPE_CHECKING:
    from pydantic_evals.reporting import EvaluationReport as PydanticEvalsReport

__all__ = ('Outputs', 'passed_key', 'result_outputs', 'to_pydantic_evals_report', 'verdict_outputs')

Outputs = dict[str, bool | int | float | str | EvaluationReason]


def passed_key(judge: str) -> str:
    """The output that says whether `judge` passed."""
    return f'{judge}_passed'


def result_outputs(result: JudgeResult) -> Outputs:
    """A result's score and pass/fail as pydantic-evals outputs; empty when it did not judge (module docstring)."""
    status = judge_status(result)  # the verdict model's (`core.verdicts`)
    out: Outputs = {}
    if not is_judged(status):
        return out
    reason = (result.reasoning or '').strip() or None
    if result.score is not None:
        out[result.judge] = EvaluationReason(value=result.score, reason=reason)
    if result.passed is not None or result.issues:  # a score-only judge (no pass/fail) asserts nothing
        out[passed_key(result.judge)] = EvaluationReason(value=status == 'pass', reason=reason)
    return out


def verdict_outputs(results: Sequence[JudgeResult]) -> Outputs:
    """A record's judge results as pydantic-evals outputs: per judge its `<judge>_status` and, when it judged,
    `result_outputs`; the record's `overall` score with its coverage (absent when not judged) and `coverage`."""
    verdict = record_verdict(results)
    out: Outputs = {}
    for result in results:
        out[f'{result.judge}_status'] = EvaluationReason(value=judge_status(result), reason=result.error)
        out.update(result_outputs(result))
    if verdict.overall_score is not None:
        out['overall'] = EvaluationReason(value=verdict.overall_score, reason=verdict.coverage.label)
    out['coverage'] = verdict.coverage.label
    return out


def to_pydantic_evals_report(reports: Sequence[RecordReport], name: str = 'sensei-eval') -> PydanticEvalsReport[Any, Any, Any]:
    """The run as a pydantic-evals report: scores per judge, a pass assertion each, failures as failures."""
    from pydantic_evals.evaluators import EvaluationResult, EvaluatorFailure
    from pydantic_evals.evaluators.spec import EvaluatorSpec
    from pydantic_evals.reporting import EvaluationReport as PEReport
    from pydantic_evals.reporting import ReportCase

    cases: list[ReportCase[Any, Any, Any]] = []
    for report in reports:
        scores: dict[str, EvaluationResult[int | float]] = {}
        assertions: dict[str, EvaluationResult[bool]] = {}
        failures: list[EvaluatorFailure] = []
        for judge, result in report.judges.items():
            spec = EvaluatorSpec(name=judge, arguments=None)
            version = result.criteria_hash[:12]
            status = judge_status(result)  # the verdict model's: error, inconclusive and smoke are failures there
            if status == 'not_applicable':  # nothing to inspect: no score, no assertion, no failure
                continue
            if not is_judged(status):
                message = f'{status}: {result.error or "no reason given"}'
                failures.append(
                    EvaluatorFailure(
                        name=judge, error_message=message, error_stacktrace='', source=spec, evaluator_version=version
                    )
                )
                continue
            outputs = result_outputs(result)
            if isinstance(score := outputs.get(judge), EvaluationReason) and not isinstance(score.value, bool | str):
                scores[judge] = EvaluationResult(
                    name=judge, value=score.value, reason=score.reason, source=spec, evaluator_version=version
                )
            if isinstance(passed := outputs.get(passed_key(judge)), EvaluationReason) and isinstance(passed.value, bool):
                assertions[judge] = EvaluationResult(
                    name=judge, value=passed.value, reason=passed.reason, source=spec, evaluator_version=version
                )
        if report.overall_score is not None:
            overall_spec = EvaluatorSpec(name='overall', arguments=None)
            scores['overall'] = EvaluationResult(name='overall', value=report.overall_score, reason=None, source=overall_spec)
        name_ = report.query_id if report.repeat == 1 else f'{report.query_id}#{report.repeat}'
        cases.append(
            ReportCase(
                name=name_,
                inputs=report.query,
                metadata={'prompt_version': report.prompt_version},
                expected_output=None,
                output=None,
                metrics={'input_tokens': report.input_tokens, 'output_tokens': report.output_tokens},
                attributes={},
                scores=scores,
                labels={},
                assertions=assertions,
                task_duration=0.0,
                total_duration=report.latency_s,
                source_case_name=report.query_id if report.repeat != 1 else None,
                evaluator_failures=failures,
            )
        )
    return PEReport(name=name, cases=cases)
