"""Run judges over records: concurrency, cache, and a report written the moment a record is done.

Each record (× repeat) is rendered to a transcript once, with the model's budget, and every judge of
that record reads the same bytes. Judge calls share one semaphore of size `concurrency`; tasks are
queued record by record and asyncio's semaphore is first-come first-served, so a record's judges run
close together, which is what lets a single-slot local server (and provider caches) reuse the shared
prefix. A judge that raises instead of returning an error result is still caught and reported as an
error: one bad judge never takes the run down.

Each record runs under an agent profile (`sensei_eval.profiles`): its own `metadata.profile`, else the
run's. Checks outside the profile are listed as skipped in the report; an unknown profile name is an
error in that record's report, never a silent fallback. Deterministic checks are not cached: they cost
less than a cache entry, and they read fields (expected calls, metadata) that the transcript hash does
not cover. Once every record is done, a judge that gave the same reasoning on every transcript has
those verdicts marked inconclusive and the affected reports rewritten.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .cache import JudgeCache
from .evaluators.base import Judge
from .evaluators.inconclusive import same_text_everywhere
from .models import JudgeModel
from .profiles import BUILTIN_PROFILES, DEFAULT_PROFILE, Profile
from .records import QueryRecord
from .reports import EvaluationReport, JudgeResult, build_report
from .run_folder import RunFolder
from .transcript import Transcript, render_transcript

__all__ = ('JudgeEvent', 'count_judge_calls', 'judge_records')


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
    run_dir: RunFolder | Path | None = None,
    concurrency: int | None = None,
    repeat: int = 1,
    cache: JudgeCache | None = None,
    on_judge: Callable[[JudgeEvent], None] | None = None,
    on_report: Callable[[EvaluationReport, Path | None], None] | None = None,
    profile: Profile = DEFAULT_PROFILE,
    profiles: Mapping[str, Profile] | None = None,
) -> list[EvaluationReport]:
    """Judge every record with every judge; returns the reports in record order.

    `profile` is the run's agent profile; `profiles` the ones a record may name besides the built-ins.
    With `run_dir` (a `RunFolder` or its path), each report is written there as soon as it is done.
    """
    folder = run_dir if isinstance(run_dir, RunFolder) or run_dir is None else RunFolder(run_dir)
    if model is None and any(j.needs_model for j in judges):
        raise ValueError('these judges need a model: ' + ', '.join(j.name for j in judges if j.needs_model))
    limit = concurrency or (model.default_concurrency if model else 4)
    semaphore = asyncio.Semaphore(max(1, limit))
    budget = model.transcript_budget if model else None

    async def one_judge(judge: Judge, record: QueryRecord, transcript: Transcript, rep: int) -> JudgeResult:
        key = None
        if cache is not None and judge.needs_model:
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

    known = _known_profiles(profile, profiles)
    configured: dict[tuple[str, int], Judge] = {}

    def for_profile(p: Profile, judge: Judge) -> Judge:
        key = (p.name, id(judge))
        if key not in configured:
            configured[key] = p.configure(judge)
        return configured[key]

    async def one_record(record: QueryRecord, rep: int) -> EvaluationReport:
        transcript = render_transcript(record, budget_tokens=budget)
        chosen, problems = _record_profile(record, profile, known)
        record_judges = [for_profile(chosen, j) for j in judges]

        async def tracked(judge: Judge) -> JudgeResult:
            result = await one_judge(judge, record, transcript, rep)
            if on_judge is not None:
                on_judge(JudgeEvent(record.query_id, rep, result))
            return result

        skipped = {
            j.name: why for j in record_judges if (why := chosen.skip_reason(j) or j.applies_to(record)) is not None
        }
        results = await asyncio.gather(*(tracked(j) for j in record_judges if j.name not in skipped))
        done.append(_Judged(record, rep, transcript, list(results), skipped, chosen.name, problems))
        return write(done[-1])

    def write(judged: _Judged) -> EvaluationReport:
        record, rep, transcript = judged.record, judged.repeat, judged.transcript
        report = build_report(
            record,
            judged.results,
            run_id=run_id,
            repeat=rep,
            model=model.name if model else None,
            truncation=transcript.truncation,
            transcript_sha256=transcript.sha256,
            skipped=judged.skipped,
            profile=judged.profile,
            speakers=transcript.speakers,
        )
        report.errors.extend(judged.problems)
        path = None
        if folder is not None:
            path = folder.write_report(report)
        if on_report is not None:
            on_report(report, path)
        return report

    done: list[_Judged] = []
    tasks = [one_record(record, rep) for record in records for rep in range(1, repeat + 1)]
    reports = list(await asyncio.gather(*tasks))
    rewritten = {(r.query_id, r.repeat): r for r in (write(done[i]) for i in _mark_same_text(done, judges))}
    return [rewritten.get((r.query_id, r.repeat), r) for r in reports]


@dataclass
class _Judged:
    """What a record's report is built from, kept so the run-wide rules can rebuild it."""

    record: QueryRecord
    repeat: int
    transcript: Transcript
    results: list[JudgeResult]
    skipped: dict[str, str]
    profile: str
    problems: list[str]


def count_judge_calls(
    records: Sequence[QueryRecord], judges: Sequence[Judge], profile: Profile = DEFAULT_PROFILE,
    profiles: Mapping[str, Profile] | None = None,
) -> int:  # fmt: skip
    """How many judge calls `judge_records` will make (per repeat): what a progress bar counts to."""
    known = _known_profiles(profile, profiles)
    total = 0
    for record in records:
        chosen, _ = _record_profile(record, profile, known)
        total += sum(1 for j in judges if chosen.skip_reason(j) is None and j.applies_to(record) is None)
    return total


def _known_profiles(profile: Profile, profiles: Mapping[str, Profile] | None) -> dict[str, Profile]:
    """The profiles a record may name: the built-ins, the ones given, and the run's own."""
    return {**BUILTIN_PROFILES, **(profiles or {}), profile.name: profile}


def _record_profile(record: QueryRecord, run_profile: Profile, known: Mapping[str, Profile]) -> tuple[Profile, list[str]]:
    """The record's own profile when it names one (`metadata.profile`), else the run's."""
    name = record.metadata.get('profile')
    if name is None:
        return run_profile, []
    if isinstance(name, str) and name in known:
        return known[name], []
    return run_profile, [
        f'metadata.profile: unknown profile {name!r} (known: {", ".join(known)}); '
        f'judged with {run_profile.name!r} instead, declare it with --profile FILE'
    ]


def _mark_same_text(done: Sequence[_Judged], judges: Sequence[Judge]) -> set[int]:
    """Mark inconclusive every verdict of a model judge that wrote one reasoning for every transcript."""
    touched: set[int] = set()
    for judge in judges:
        if not judge.needs_model:
            continue
        entries = [
            (i, k)
            for i, judged in enumerate(done)
            for k, r in enumerate(judged.results)
            if r.judge == judge.name and r.status == 'ok'
        ]
        texts = [(done[i].transcript.sha256, done[i].results[k].reasoning or '') for i, k in entries]
        if not same_text_everywhere(texts):
            continue
        for i, k in entries:
            result = done[i].results[k]
            done[i].results[k] = result.model_copy(
                update={
                    'status': 'inconclusive',
                    'error': f'the same reasoning on all {len(entries)} records of the run: {result.reasoning!r}'[:500],
                    'score': None,
                    'passed': None,
                    'raw_output': result.raw_output or result.reasoning,
                }
            )
            touched.add(i)
    return touched
