"""Judging a live pydantic-ai agent through pydantic-evals' own online evaluation.

pydantic-evals ships online evaluation (`pydantic_evals.online`): the `OnlineEvaluation` capability on
an `Agent`, or `@evaluate` on a function, samples runs (`sample_rate`), runs evaluators in the
background, caps concurrency and hands results to sinks. sensei judges are plain pydantic-evals
evaluators, so they attach there as they are:

    from pydantic_evals.online_capability import OnlineEvaluation
    from sensei_eval.evaluators import Hallucination

    agent = Agent(model, instrument=True, capabilities=[OnlineEvaluation(evaluators=[Hallucination(model=judge)])])

Each judge reads the run from the span tree pydantic-evals captures (`evaluators.base.record_from_context`),
which is why the agent must be instrumented. `SenseiJudging` goes one step further: it judges the run with a
whole judge set through the same runner as `sensei-eval judge` (profiles, checks, the one verdict model),
writes each `RecordReport` to a run folder that `sensei-eval view` reads, and hands it to `on_report` (for
instance `post_to_service`, which stores the run in the scoring service). `online_evaluation(...)` builds the
capability.

What stays in `production.sampler`, because pydantic-evals' sampling cannot do it: pydantic-evals decides
*before* a run (a rate, or a callable of the inputs); the sampler decides *after* it, on the finished run,
so that every complaint (a low rating, an error status, user feedback) is judged, the share is a
deterministic hash of the trace id (the same answer on every replay and in every process), and judge calls
keep to an hourly budget shared across the service's processes. Use the sampler where runs arrive finished
(OTLP ingest, the service); use `OnlineEvaluation` in the agent's own process.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_evals.evaluators import Evaluator, EvaluatorContext, EvaluatorOutput
from pydantic_evals.online import OnlineEvalConfig, OnlineEvaluator
from pydantic_evals.online_capability import OnlineEvaluation

from sensei_eval.core.evaluator_outputs import verdict_outputs
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.base import record_from_context
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.run_folder import RunFolder
from sensei_eval.judging.runner import judge_records

__all__ = ('ReportCallback', 'SenseiJudging', 'online_evaluation', 'post_to_service')

ReportCallback = Callable[[RecordReport], Awaitable[None] | None]


@dataclass(repr=False)
class SenseiJudging(Evaluator[Any, Any, Any]):
    """Every judge of `options` on one live run, through the CLI's runner; the report goes to `run_dir`
    and `on_report`. Its outputs are `judging.evaluation.Verdicts`' (`verdict_outputs`): each judge's status, score and pass/fail,
    the record's `overall` score (absent when nothing judged it) and its coverage."""

    options: JudgeRunOptions
    run_id: str = 'online'
    run_dir: Path | None = None
    on_report: ReportCallback | None = None
    _folder: RunFolder | None = field(default=None, init=False, repr=False, compare=False)

    def get_default_evaluation_name(self) -> str:
        return 'sensei'

    async def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluatorOutput:
        record = record_from_context(ctx)
        if self.run_dir is not None and self._folder is None:
            self._folder = RunFolder(self.run_dir)
        [report] = await judge_records([record], self.options, run_id=self.run_id, run_dir=self._folder)
        if self.on_report is not None:
            done = self.on_report(report)
            if inspect.isawaitable(done):
                await done
        return verdict_outputs(list(report.judges.values()))


def online_evaluation(
    options: JudgeRunOptions,
    *,
    sample_rate: float | Callable[..., float | bool] | None = None,
    run_dir: Path | None = None,
    run_id: str = 'online',
    on_report: ReportCallback | None = None,
    config: OnlineEvalConfig | None = None,
    extra: Sequence[Evaluator[Any, Any, Any]] = (),
) -> OnlineEvaluation[Any]:
    """The `OnlineEvaluation` capability that judges a live agent's runs with `options`' judges (see
    `SenseiJudging`); `sample_rate` is pydantic-evals' own (a share, or a callable of the sampling context)."""
    judging = SenseiJudging(options, run_id=run_id, run_dir=run_dir, on_report=on_report)
    evaluator = OnlineEvaluator(evaluator=judging, sample_rate=sample_rate)
    return OnlineEvaluation(evaluators=[evaluator, *extra], config=config)


def post_to_service(
    base_url: str, *, agent: str | None = None, token: str | None = None, timeout_s: float = 30.0
) -> ReportCallback:
    """An `on_report` that stores each judged run in the scoring service as a session
    (`POST /api/v1/sessions`, as `agent`), where the dashboard, Patterns and alerts read it and the service
    judges it with its own judges (`serve --judges`); the report written here stays the agent side's record."""
    import httpx

    headers = {'Authorization': f'Bearer {token}'} if token else {}

    async def post(report: RecordReport) -> None:
        body: dict[str, Any] = {
            'query_id': report.query_id,
            'query': report.query,
            'messages': report.messages,
            'message_format': report.message_format,
            'prompt_version': report.prompt_version,
            'agent': agent,
        }
        if report.agent_rating is not None:
            body['rating'] = report.agent_rating.model_dump(mode='json')
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout_s) as client:
            answer = await client.post('/api/v1/sessions', json=body)
            answer.raise_for_status()

    return post
