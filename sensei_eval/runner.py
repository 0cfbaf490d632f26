"""Run judges over records: concurrency, cache, and a report written the moment a record is done.

Each record (× repeat) is rendered to a transcript once, with the model's budget, and every judge of
that record reads the same bytes. Judge calls share one semaphore of size `concurrency`; tasks are
queued record by record and asyncio's semaphore is first-come first-served, so a record's judges run
close together, which is what lets a single-slot local server (and provider caches) reuse the shared
prefix. A judge that raises instead of returning an error result is still caught and reported as an
error: one bad judge never takes the run down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .cache import JudgeCache
from .evaluators.base import Judge
from .models import JudgeModel
from .records import QueryRecord
from .reports import EvaluationReport, JudgeResult, build_report, report_path, write_json_atomic
from .transcript import Transcript, render_transcript

__all__ = ('JudgeEvent', 'judge_records')


@dataclass(frozen=True)
class JudgeEvent:
    """Progress: one judge finished on one record."""

    query_id: str
    repeat: int
    result: JudgeResult


async def judge_records(
    records: Sequence[QueryRecord],
    judges: Sequence[Judge],
    model: JudgeModel | None,
    *,
    run_id: str,
    run_dir: Path | None = None,
    concurrency: int | None = None,
    repeat: int = 1,
    cache: JudgeCache | None = None,
    on_judge: Callable[[JudgeEvent], None] | None = None,
    on_report: Callable[[EvaluationReport, Path | None], None] | None = None,
) -> list[EvaluationReport]:
    """Judge every record with every judge; returns the reports in record order."""
    if model is None and any(j.needs_model for j in judges):
        raise ValueError('these judges need a model: ' + ', '.join(j.name for j in judges if j.needs_model))
    limit = concurrency or (model.default_concurrency if model else 4)
    semaphore = asyncio.Semaphore(max(1, limit))
    budget = model.transcript_budget if model else None

    async def one_judge(judge: Judge, record: QueryRecord, transcript: Transcript, rep: int) -> JudgeResult:
        key = None
        if cache is not None:
            model_name = model.name if (model and judge.needs_model) else '-'
            settings = dict(model.settings) if (model and judge.needs_model) else {}
            key = JudgeCache.key(judge.criteria_hash(), model_name, settings, transcript.sha256, rep)
            hit = cache.get(key)
            if hit is not None:
                return hit
        async with semaphore:
            try:
                result = await judge.judge(record, transcript, model if judge.needs_model else None)
            except Exception as e:  # a judge bug must not sink the run
                result = JudgeResult(
                    judge=judge.name,
                    failure_mode=judge.failure_mode,
                    category=judge.category,
                    criteria_hash=judge.criteria_hash(),
                    model=model.name if model else None,
                    status='error',
                    error=f'judge crashed: {type(e).__name__}: {e}',
                )
        if cache is not None and key is not None:
            cache.put(key, result)
        return result

    async def one_record(record: QueryRecord, rep: int) -> EvaluationReport:
        transcript = render_transcript(record, budget_tokens=budget)

        async def tracked(judge: Judge) -> JudgeResult:
            result = await one_judge(judge, record, transcript, rep)
            if on_judge is not None:
                on_judge(JudgeEvent(record.query_id, rep, result))
            return result

        skipped = {j.name: why for j in judges if (why := j.applies_to(record)) is not None}
        results = await asyncio.gather(*(tracked(j) for j in judges if j.name not in skipped))
        report = build_report(
            record,
            results,
            run_id=run_id,
            repeat=rep,
            model=model.name if model else None,
            truncation=transcript.truncation,
            transcript_sha256=transcript.sha256,
            skipped=skipped,
        )
        path = None
        if run_dir is not None:
            path = report_path(run_dir, record.query_id, rep)
            write_json_atomic(path, report.model_dump_json(indent=2))
        if on_report is not None:
            on_report(report, path)
        return report

    tasks = [one_record(record, rep) for record in records for rep in range(1, repeat + 1)]
    return list(await asyncio.gather(*tasks))
