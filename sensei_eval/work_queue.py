"""A judge run spread over worker processes (and machines) through a database table of jobs.

`sensei-eval judge --queue URL` enqueues one job per record and repeat (`WorkQueue.enqueue`), then
collects finished reports into the run folder (`collect_run`); `sensei-eval worker --queue URL` claims
jobs, judges them with the same runner, judges and profile as a local run, and stores each report on its
job (`run_worker`). Why a table and not a broker: the scoring service already runs on PostgreSQL with
`FOR UPDATE SKIP LOCKED` claims, and a row per job is what makes "each report once" and "a killed worker
loses nothing" checkable:

* **claim**: pending jobs are taken with `SELECT … FOR UPDATE SKIP LOCKED` (two workers never get the
  same row, neither waits for the other) and marked `in_progress` under a lease the worker renews while
  it works; every claim counts an attempt.
* **reclaim**: a job whose lease ran out (its worker died or hung) goes back to `pending`; after
  `max_attempts` claims it is `failed`, with why and who held it last. Every claim reclaims first, so
  a live worker picks up a dead one's jobs.
* **complete**: the report is written on the row in one transaction that checks the lease is still
  this worker's, so a worker that lost its lease (paused past it) cannot write a second report.
* **collect**: the enqueuing process (or a re-run of it with the same run id) writes each finished
  report to the run folder, then marks the jobs collected; a resumed collection counts the reports
  already collected without writing them again. The run-wide "same reasoning on every transcript"
  rule is applied to the collected run as a whole (`runner.ReportCollector`).

Leases are compared with each process's clock: machines sharing a queue need clocks that agree within a
small part of the lease (NTP does). SQLite works too, on one machine (writers take turns through
`BEGIN IMMEDIATE`, and `FOR UPDATE` is not needed there); across machines use PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from .cache import JudgeCache
from .evaluators.base import Judge
from .evaluators.registry import make_judges
from .models import JudgeModel, ModelSetupError, preflight, resolve_model
from .profiles import DEFAULT_PROFILE, Profile
from .records import QueryRecord
from .reports import EvaluationReport, JudgeResult, build_report
from .run_folder import RunFolder
from .runner import ReportCollector, StreamedRun, judge_records, report_judges

__all__ = (
    'DEFAULT_LEASE_S',
    'DEFAULT_MAX_ATTEMPTS',
    'Job',
    'QueueError',
    'QueueRun',
    'WorkQueue',
    'WorkerStats',
    'WorkerStopped',
    'collect_run',
    'failed_report',
    'profile_data',
    'profile_from_data',
    'run_worker',
    'worker_name',
)

log = logging.getLogger(__name__)

DEFAULT_LEASE_S = 60.0
DEFAULT_MAX_ATTEMPTS = 3


class QueueError(ValueError):
    """A queue that cannot take this run (e.g. the run id is already queued with other judges)."""


class WorkerStopped(RuntimeError):
    """The worker stopped because it cannot judge here (model not set up, model unreachable); its jobs
    went back to the queue for another worker. `exit_code`: 2 for a usage problem, 1 otherwise."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class QueueRun:
    """How every job of a run is judged: what a worker needs besides the record."""

    judges: list[str]
    fuse: list[str] = field(default_factory=list)
    profile: dict[str, Any] = field(default_factory=lambda: profile_data(DEFAULT_PROFILE))
    model: str | None = None
    base_url: str | None = None
    max_transcript_tokens: int | None = None
    cache: bool = True

    def as_json(self) -> dict[str, Any]:
        return {
            'judges': list(self.judges), 'fuse': list(self.fuse), 'profile': self.profile, 'model': self.model,
            'base_url': self.base_url, 'max_transcript_tokens': self.max_transcript_tokens, 'cache': self.cache,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueueRun:
        names = ('judges', 'fuse', 'profile', 'model', 'base_url', 'max_transcript_tokens', 'cache')
        return cls(**{k: data[k] for k in names if k in data})

    def make_judges(self) -> list[Judge]:
        return make_judges(self.judges, fuse=self.fuse or None)


@dataclass(frozen=True)
class Job:
    """One claimed job: a record (× repeat) of a run, and how the run is judged."""

    job_id: str
    run_id: str
    seq: int
    query_id: str
    repeat: int
    record: QueryRecord
    run: QueueRun
    attempts: int


@dataclass
class WorkerStats:
    completed: int = 0
    failed: int = 0
    lost: int = 0  # finished after the lease went to another worker: not written
    released: int = 0  # given back to the queue (the worker stopped before judging it)


def profile_data(profile: Profile) -> dict[str, Any]:
    """A profile as JSON, so a worker on another machine judges with the same checks and parameters."""
    return {
        'name': profile.name,
        'description': profile.description,
        'checks': list(profile.checks),
        'params': {k: dict(v) for k, v in profile.params.items()},
        'component_map': {k: list(v) for k, v in profile.component_map.items()} if profile.component_map else None,
    }


def profile_from_data(data: dict[str, Any]) -> Profile:
    """The profile `profile_data` wrote."""
    cmap = data.get('component_map')
    return Profile(
        name=data['name'],
        description=data.get('description', ''),
        checks=tuple(data.get('checks', ())),
        params=data.get('params') or {},
        component_map={k: tuple(v) for k, v in cmap.items()} if cmap else None,
    )


def worker_name() -> str:
    """Who holds a lease: host, pid and a random suffix (a restarted process with the same pid differs)."""
    return f'{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}'[-64:]


def failed_report(record: QueryRecord, run_id: str, repeat: int, judges: Sequence[Judge], reason: str) -> EvaluationReport:
    """The report of a job no worker could finish: every judge an error with the reason (never a verdict)."""
    results = [
        JudgeResult(
            judge=j.name,
            failure_mode=j.failure_mode,
            category=j.category,
            criteria_hash=j.criteria_hash(),
            model=None,
            status='error',
            error=f'not judged: {reason}',
        )
        for j in report_judges(judges)
    ]
    return build_report(record, results, run_id=run_id, repeat=repeat)


def _us(seconds: float) -> int:
    return int(seconds * 1_000_000)


class WorkQueue:
    """The `judge_jobs` table: enqueue, claim, renew, complete, reclaim, collect."""

    def __init__(self, url: str, *, migrate: bool = True, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> None:
        from .service.store import Store, normalise_url

        self.url = normalise_url(url)
        if migrate:
            _migrate(self.url)
        self.store = Store(self.url, pool_size=4)
        self.max_attempts = max_attempts
        self.reclaim_every_s = 1.0  # how often `claim` looks for expired leases (a write transaction)
        self._next_reclaim = 0.0

    def close(self) -> None:
        self.store.dispose()

    def __enter__(self) -> WorkQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the enqueuing side -------------------------------------------------------------------------

    def enqueue(self, run_id: str, records: Iterable[QueryRecord], run: QueueRun, *, repeat: int = 1, batch: int = 500) -> int:
        """Add a job per record and repeat; jobs the run already has are left as they are (enqueuing the
        same run again adds nothing). Returns how many were new. A run id already queued with another
        configuration (judges, profile, model) is a `QueueError`: its reports would not be one run."""
        from .service.store import JudgeJobRow

        config = run.as_json()
        with self.store.read() as db:
            existing = db.scalars(select(JudgeJobRow.config).where(JudgeJobRow.run_id == run_id).limit(1)).first()
        if existing is not None and _canonical(existing) != _canonical(config):
            raise QueueError(
                f'run {run_id!r} is already queued with another configuration '
                f'({_difference(existing, config)}); use another --run-id'
            )
        added = 0
        seq = 0
        chunk: list[tuple[int, QueryRecord, int]] = []
        for record in records:
            for rep in range(1, repeat + 1):
                chunk.append((seq, record, rep))
                seq += 1
            if len(chunk) >= batch:
                added += self._add(run_id, chunk, config)
                chunk = []
        if chunk:
            added += self._add(run_id, chunk, config)
        return added

    def _add(self, run_id: str, chunk: list[tuple[int, QueryRecord, int]], config: dict[str, Any]) -> int:
        from .service.store import JudgeJobRow, now_us

        for attempt in range(3):
            try:
                with self.store.write() as db:
                    have = set(
                        db.execute(
                            select(JudgeJobRow.query_id, JudgeJobRow.repeat).where(
                                JudgeJobRow.run_id == run_id, JudgeJobRow.query_id.in_({r.query_id for _, r, _ in chunk})
                            )
                        ).all()
                    )
                    fresh = {(r.query_id, rep): (s, r, rep) for s, r, rep in chunk if (r.query_id, rep) not in have}
                    created = now_us()
                    db.add_all(
                        JudgeJobRow(
                            job_id=str(uuid.uuid4()),
                            run_id=run_id,
                            seq=s,
                            query_id=record.query_id,
                            repeat=rep,
                            record=record.model_dump(mode='json'),
                            config=config,
                            status='pending',
                            attempts=0,
                            collected=False,
                            created_at_us=created,
                        )
                        for s, record, rep in fresh.values()
                    )
                    return len(fresh)
            except IntegrityError:  # another process enqueued the same run at the same moment: look again
                if attempt == 2:
                    raise
        return 0

    def counts(self, run_id: str) -> dict[str, int]:
        """Jobs of the run per status (`collected` too: finished and written to the run folder)."""
        from .service.store import JudgeJobRow

        with self.store.read() as db:
            rows = db.execute(
                select(JudgeJobRow.status, JudgeJobRow.collected, func.count())
                .where(JudgeJobRow.run_id == run_id)
                .group_by(JudgeJobRow.status, JudgeJobRow.collected)
            ).all()
        counts: dict[str, int] = {}
        for status, collected, n in rows:
            counts[status] = counts.get(status, 0) + int(n)
            if collected:
                counts['collected'] = counts.get('collected', 0) + int(n)
        return counts

    def active(self) -> int:
        """Jobs of any run still pending or in progress (a draining worker waits for them: a dead
        worker's jobs come back when their lease runs out)."""
        from .service.store import JudgeJobRow

        with self.store.read() as db:
            n = db.scalar(select(func.count()).where(JudgeJobRow.status.in_(('pending', 'in_progress'))))
        return int(n or 0)

    def run_config(self, run_id: str) -> QueueRun | None:
        """How the run was enqueued (None: no such run in the queue)."""
        from .service.store import JudgeJobRow

        with self.store.read() as db:
            config = db.scalars(select(JudgeJobRow.config).where(JudgeJobRow.run_id == run_id).limit(1)).first()
        return None if config is None else QueueRun.from_json(config)

    def collect(self, run_id: str, on_report: Callable[[EvaluationReport, int], None], *, limit: int = 200) -> int:
        """Hand the run's finished, not yet collected reports to `on_report` (in run order), then mark
        them collected. Returns how many. A job that failed for good is handed over as a report whose
        judges are errors with the reason, never dropped. If `on_report` raises, nothing of this batch is
        marked: a later collection hands the same reports over again."""
        from .service.store import JudgeJobRow

        rows = self._finished(run_id, collected=False, after=-1, limit=limit)
        done: list[str] = []
        try:
            for job_id, seq, report in rows:
                on_report(report, seq)
                done.append(job_id)
        finally:
            if done:
                with self.store.write() as db:
                    db.execute(update(JudgeJobRow).where(JudgeJobRow.job_id.in_(done)).values(collected=True))
        return len(rows)

    def collected(self, run_id: str, *, chunk: int = 500) -> Iterator[tuple[EvaluationReport, int]]:
        """The reports of the run already collected (a resumed collection counts them again), in run order."""
        after = -1
        while rows := self._finished(run_id, collected=True, after=after, limit=chunk):
            for _, seq, report in rows:
                yield report, seq
            after = rows[-1][1]

    def _finished(self, run_id: str, *, collected: bool, after: int, limit: int) -> list[tuple[str, int, EvaluationReport]]:
        from .service.store import JudgeJobRow

        with self.store.read() as db:
            rows = db.execute(
                select(
                    JudgeJobRow.job_id, JudgeJobRow.seq, JudgeJobRow.status, JudgeJobRow.report, JudgeJobRow.error,
                    JudgeJobRow.record, JudgeJobRow.repeat, JudgeJobRow.config,
                )
                .where(
                    JudgeJobRow.run_id == run_id,
                    JudgeJobRow.status.in_(('completed', 'failed')),
                    JudgeJobRow.collected.is_(collected),
                    JudgeJobRow.seq > after,
                )
                .order_by(JudgeJobRow.seq)
                .limit(limit)
            ).all()  # fmt: skip
        out = []
        for job_id, seq, status, report, error, record, repeat, config in rows:
            if status == 'completed' and report is not None:
                done = EvaluationReport.model_validate(report)
            else:
                judges = QueueRun.from_json(config).make_judges()
                done = failed_report(QueryRecord.model_validate(record), run_id, repeat, judges, error or 'the job failed')
            out.append((job_id, seq, done))
        return out

    def record(self, run_id: str, query_id: str, repeat: int) -> QueryRecord | None:
        """One job's record (what the run-wide rule needs to rebuild a multi-agent report)."""
        from .service.store import JudgeJobRow

        with self.store.read() as db:
            data = db.scalars(
                select(JudgeJobRow.record).where(
                    JudgeJobRow.run_id == run_id, JudgeJobRow.query_id == query_id, JudgeJobRow.repeat == repeat
                )
            ).first()
        return None if data is None else QueryRecord.model_validate(data)

    # -- the worker side ----------------------------------------------------------------------------

    def reclaim(self) -> tuple[int, int]:
        """Jobs whose lease ran out go back to pending, or fail once claimed `max_attempts` times.
        Returns (back to pending, failed)."""
        from .service.store import JudgeJobRow, now_us

        now = now_us()
        expired = (JudgeJobRow.status == 'in_progress') & (JudgeJobRow.lease_until_us < now)
        with self.store.write() as db:
            dead = db.execute(
                select(JudgeJobRow.job_id, JudgeJobRow.query_id, JudgeJobRow.owner, JudgeJobRow.attempts)
                .where(expired)
                .with_for_update(skip_locked=True)
            ).all()
            failed = [(j, q, o, a) for j, q, o, a in dead if a >= self.max_attempts]
            back = [j for j, _, _, a in dead if a < self.max_attempts]
            for job_id, query_id, owner, attempts in failed:
                reason = f'its worker stopped before finishing it {attempts} time(s) (lease expired; last held by {owner})'
                log.warning('job %s (%s) failed: %s', job_id, query_id, reason)
                db.execute(
                    update(JudgeJobRow)
                    .where(JudgeJobRow.job_id == job_id)
                    .values(status='failed', error=reason, owner=None, lease_until_us=None, completed_at_us=now)
                )
            for job_id, query_id, owner, attempts in dead:
                if attempts < self.max_attempts:
                    log.warning('job %s (%s): the lease of %s expired; back to the queue', job_id, query_id, owner)
            if back:
                db.execute(
                    update(JudgeJobRow)
                    .where(JudgeJobRow.job_id.in_(back))
                    .values(status='pending', owner=None, lease_until_us=None)
                )
        return len(back), len(failed)

    def claim(self, owner: str, limit: int, lease_s: float) -> list[Job]:
        """Take up to `limit` pending jobs under a lease of `lease_s` seconds (reclaiming expired ones first,
        at most every `reclaim_every_s`)."""
        from .service.store import JudgeJobRow, now_us

        if limit <= 0:
            return []
        if time.monotonic() >= self._next_reclaim:
            self._next_reclaim = time.monotonic() + self.reclaim_every_s
            self.reclaim()
        jobs: list[Job] = []
        with self.store.write() as db:
            rows = db.scalars(
                select(JudgeJobRow)
                .where(JudgeJobRow.status == 'pending')
                .order_by(JudgeJobRow.created_at_us, JudgeJobRow.seq)
                .limit(limit)
                .with_for_update(skip_locked=True)
            ).all()
            until = now_us() + _us(lease_s)
            for row in rows:
                row.status, row.owner, row.lease_until_us = 'in_progress', owner, until
                row.attempts += 1
                jobs.append(
                    Job(
                        row.job_id,
                        row.run_id,
                        row.seq,
                        row.query_id,
                        row.repeat,
                        QueryRecord.model_validate(row.record),
                        QueueRun.from_json(row.config),
                        row.attempts,
                    )
                )
        return jobs

    def renew(self, owner: str, job_ids: Iterable[str], lease_s: float) -> set[str]:
        """Extend the lease of the jobs this worker still holds; returns those (a job missing from it was
        reclaimed: its lease ran out)."""
        from .service.store import JudgeJobRow, now_us

        ids = list(job_ids)
        if not ids:
            return set()
        with self.store.write() as db:
            held = db.scalars(
                update(JudgeJobRow)
                .where(JudgeJobRow.job_id.in_(ids), JudgeJobRow.owner == owner, JudgeJobRow.status == 'in_progress')
                .values(lease_until_us=now_us() + _us(lease_s))
                .returning(JudgeJobRow.job_id)
            ).all()
        return set(held)

    def complete(self, job: Job, owner: str, report: EvaluationReport) -> bool:
        """Store the report if this worker still holds the job; False when the lease went elsewhere."""
        return self._finish(job, owner, status='completed', report=report.model_dump(mode='json'), error=None)

    def fail(self, job: Job, owner: str, error: str) -> bool:
        """The job cannot be judged (e.g. an unknown judge name on this worker): failed with `error`."""
        return self._finish(job, owner, status='failed', report=None, error=error)

    def release(self, job: Job, owner: str) -> bool:
        """Give a claimed job back untouched (this worker cannot judge it): pending again, attempt not counted."""
        from .service.store import JudgeJobRow

        with self.store.write() as db:
            done = db.execute(
                update(JudgeJobRow)
                .where(JudgeJobRow.job_id == job.job_id, JudgeJobRow.owner == owner, JudgeJobRow.status == 'in_progress')
                .values(status='pending', owner=None, lease_until_us=None, attempts=JudgeJobRow.attempts - 1)
            )
            return bool(getattr(done, 'rowcount', 0))

    def _finish(self, job: Job, owner: str, *, status: str, report: dict[str, Any] | None, error: str | None) -> bool:
        from .service.store import JudgeJobRow, now_us

        with self.store.write() as db:
            done = db.execute(
                update(JudgeJobRow)
                .where(JudgeJobRow.job_id == job.job_id, JudgeJobRow.owner == owner, JudgeJobRow.status == 'in_progress')
                .values(status=status, report=report, error=error, completed_at_us=now_us(), lease_until_us=None)
            )
            return bool(getattr(done, 'rowcount', 0))


def _migrate(url: str) -> None:
    """Bring the database to the current schema. Workers starting together race to migrate a fresh
    database: the loser's error is fine when the winner got it to the current revision."""
    from .service.migrate import HEAD, current_revision, upgrade

    if current_revision(url) == HEAD:
        return
    try:
        upgrade(url)
    except Exception:
        if current_revision(url) != HEAD:
            raise


def _canonical(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def _difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    keys = sorted(k for k in {*old, *new} if _canonical({k: old.get(k)}) != _canonical({k: new.get(k)}))
    return ', '.join(f'{k}: {old.get(k)!r} then {new.get(k)!r}' for k in keys)[:500]


# ---------------------------------------------------------------------------------------------------
# Collecting


def collect_run(
    queue: WorkQueue,
    run_id: str,
    folder: RunFolder,
    judges: Sequence[Judge],
    *,
    on_report: Callable[[EvaluationReport, Any], None] | None = None,
    on_progress: Callable[[dict[str, int]], None] | None = None,
    poll_s: float = 0.5,
    timeout_s: float | None = None,
) -> StreamedRun:
    """Write every finished report of the run to `folder` as the workers finish them, until no job is
    pending or in progress; then apply the run-wide rule and return the run's counts (`summary.json`
    is built from them). Reports collected by an earlier call are counted, not written again.
    `timeout_s`: give up waiting (TimeoutError) — the jobs stay queued and a later call resumes."""

    def speakers(query_id: str, repeat: int) -> dict[int, str] | None:
        from .transcript import render_transcript

        record = queue.record(run_id, query_id, repeat)
        return (render_transcript(record).speakers or None) if record is not None else None

    collector = ReportCollector(folder, judges, on_report=on_report, speakers=speakers)
    for report, seq in queue.collected(run_id):
        collector.add(report, seq, written=True)

    def write(report: EvaluationReport, seq: int) -> None:
        collector.add(report, seq)

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        if queue.collect(run_id, write):
            continue
        counts = queue.counts(run_id)
        if on_progress is not None:
            on_progress(counts)
        if not counts.get('pending') and not counts.get('in_progress'):
            if queue.collect(run_id, write):
                continue  # finished between the last collection and the count
            break
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(
                f'run {run_id}: {counts.get("pending", 0)} job(s) pending, {counts.get("in_progress", 0)} in progress'
            )
        time.sleep(poll_s)
    return collector.finish()


# ---------------------------------------------------------------------------------------------------
# The worker


ModelKey = tuple[str | None, str | None, int | None]


async def run_worker(
    queue: WorkQueue,
    *,
    owner: str | None = None,
    concurrency: int = 4,
    lease_s: float = DEFAULT_LEASE_S,
    poll_s: float = 0.5,
    model: JudgeModel | None = None,
    resolve: Callable[[QueueRun], JudgeModel] | None = None,
    cache: JudgeCache | None = None,
    stop: asyncio.Event | None = None,
    exit_when_idle: bool = False,
    on_job: Callable[[Job, EvaluationReport | None, str], None] | None = None,
) -> WorkerStats:
    """Claim and judge jobs, up to `concurrency` records at once, until `stop` is set (or, with
    `exit_when_idle`, until no job of the queue is pending or in progress: a dead worker's jobs are
    waited for, and taken over when their lease runs out).

    `model` judges every job (a worker with its own endpoint or key); otherwise each run's model is
    `resolve(run)` (default: `resolve_model` on the spec the enqueuing command stored, checked once with
    `preflight`). A model that cannot be set up, or that stops answering (the "first failure" rule),
    stops the worker with `WorkerStopped`: its jobs go back to the queue for another worker instead of
    being written as errors. Leases are renewed every `lease_s / 3` seconds while a job is judged."""
    owner = owner or worker_name()
    stop = stop or asyncio.Event()
    stats = WorkerStats()
    models: dict[ModelKey, JudgeModel] = {}
    judges_of: dict[str, list[Judge]] = {}
    in_flight: dict[str, asyncio.Task[None]] = {}
    fatal: list[WorkerStopped] = []

    async def model_for(run: QueueRun) -> JudgeModel:
        if model is not None:
            return model
        key = (run.model, run.base_url, run.max_transcript_tokens)
        if key not in models:
            try:
                if resolve is not None:
                    models[key] = resolve(run)
                else:
                    resolved = resolve_model(run.model, base_url=run.base_url, transcript_budget=run.max_transcript_tokens)
                    await preflight(resolved)
                    models[key] = resolved
            except ModelSetupError as e:
                raise WorkerStopped(f'cannot use the judge model of run: {e}', getattr(e, 'exit_code', 2)) from None
        return models[key]

    async def give_back(job: Job) -> None:
        stats.released += await asyncio.to_thread(queue.release, job, owner)
        if on_job is not None:
            on_job(job, None, 'released')

    async def one(job: Job) -> None:
        if fatal:
            await give_back(job)
            return
        config = _canonical(job.run.as_json())
        try:
            if config not in judges_of:
                judges_of[config] = job.run.make_judges()
            judges = judges_of[config]
            judge_model = await model_for(job.run) if any(j.needs_model for j in judges) else None
            reports = await judge_records(
                [job.record], judges, judge_model, run_id=job.run_id, profile=profile_from_data(job.run.profile),
                cache=cache if job.run.cache else None, repeat=job.repeat, first_repeat=job.repeat,
            )  # fmt: skip
            report = reports[0]
        except WorkerStopped as e:
            fatal.append(e)
            stop.set()
            await give_back(job)
            return
        except Exception as e:  # a job this code cannot judge (unknown judge name): that job's failure
            error = f'{type(e).__name__}: {e}'
            ok = await asyncio.to_thread(queue.fail, job, owner, error)
            stats.failed += ok
            stats.lost += not ok
            if on_job is not None:
                on_job(job, None, f'failed: {error}')
            return
        stopped = judge_model.connection.stopped if judge_model is not None else None
        if stopped is not None:  # this worker's model went away: another worker judges the job
            fatal.append(WorkerStopped(stopped))
            stop.set()
            await give_back(job)
            return
        ok = await asyncio.to_thread(queue.complete, job, owner, report)
        stats.completed += ok
        stats.lost += not ok
        if on_job is not None:
            on_job(job, report, 'completed' if ok else 'lost its lease: not written')

    async def renew_leases() -> None:
        while True:
            await asyncio.sleep(lease_s / 3)
            try:
                ids = list(in_flight)
                held = await asyncio.to_thread(queue.renew, owner, ids, lease_s)
                for job_id in set(ids) - held:
                    log.warning('job %s: lease lost (reclaimed by another worker); its report will not be written', job_id)
            except Exception as e:  # the database away for a moment: the next renewal tries again
                log.warning('renewing leases failed: %s', e)

    def forget(job_id: str) -> Callable[[asyncio.Task[None]], None]:
        def done(_task: asyncio.Task[None]) -> None:
            in_flight.pop(job_id, None)

        return done

    renewer = asyncio.create_task(renew_leases())
    stopping = asyncio.create_task(stop.wait())
    try:
        while not stop.is_set():
            free = concurrency - len(in_flight)
            jobs = await asyncio.to_thread(queue.claim, owner, free, lease_s) if free > 0 else []
            for job in jobs:
                task = asyncio.create_task(one(job))
                in_flight[job.job_id] = task
                task.add_done_callback(forget(job.job_id))
            if not in_flight and not jobs and exit_when_idle and not await asyncio.to_thread(queue.active):
                break
            if jobs and len(in_flight) < concurrency:
                continue  # more may be waiting: claim again before sleeping
            # until a job finishes (room to claim), stop is set, or it is time to look for new jobs
            await asyncio.wait([stopping, *in_flight.values()], timeout=poll_s, return_when=asyncio.FIRST_COMPLETED)
        if in_flight:
            await asyncio.gather(*in_flight.values(), return_exceptions=True)
    finally:
        for helper in (renewer, stopping):
            helper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await helper
        for m in models.values():
            m.close()
    if fatal:
        raise fatal[0]
    return stats
