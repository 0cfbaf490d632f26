"""Background judging: the worker that claims pending jobs, runs the judges and records the outcome.

One `ScoringWorker` runs in each service process, beside the API. The API only inserts `pending`
rows of `session_evaluations`, the one kind of job (an evaluation, or a scoring: the investigation judge)
and wakes the worker; the worker

* **claims** pending rows, oldest first, up to its free capacity (`concurrency`, default 10; the rest
  stay pending — that is the queue). The claim is `SELECT … FOR UPDATE SKIP LOCKED` then
  `UPDATE … SET status = 'in_progress', owner = <this process>` in one transaction, so with PostgreSQL
  several processes share the work and each row runs exactly once (SQLite has one writer at a time:
  `BEGIN IMMEDIATE` gives the same guarantee on one machine);
* **runs** every job the same way: the job's judges over the session's record through the library's runner
  (`judging.runner.judge_records`: the record engine, fused by the run's rule, as `sensei-eval judge`), the
  model behind `ReliableModel` (the process-wide circuit breaker, around each request retried under the one
  policy of `sensei_eval.models.retry`), under a per-job timeout; the report is stored with the verdict
  model's summary (`service.verdict_cache`). Events name the job as it was asked for: `evaluation.*`, or for a
  scoring `scoring.started`, `scoring.progress` for each phase the investigation judge reports
  (`analyzing_methodology` for its `scoring` phase, `identifying_missing_tools` for `missing_tools`), then
  `scoring.completed` (with `total_score`) or `scoring.failed` (with `error_message` and the final status:
  `failed`, `timed_out` or `cancelled`);
* **keeps** of a scoring what its API returns, from the investigation judge's typed result in the report
  (`evaluators.investigation_answers.RESULT_DETAIL`): the total, analyses, points per category, missing tools and
  alternative approaches (`score_detail`) — nothing is parsed from text later;
* **finishes** the row through `store.check_transition`, the one place status changes are validated: a
  row that is no longer `in_progress` (another process failed it as an orphan) is left alone and logged.

An errored investigation judge is a failed scoring with the judge's error as `error_message`, never a
score; what the model answered is kept as `raw_output`. An evaluation with a judge error is failed too,
its report kept. Every row a `JudgeModel` with `embedded` set finishes is
marked `smoke` (the embedded model is far too small to judge: its output proves the pipeline runs).

Liveness: each process has a row in `service_workers` with its host, pid and a heartbeat. At start-up
and on every heartbeat, rows that are `pending`/`in_progress` and owned by a dead process (its
heartbeat older than `stale_after_s`, or its pid gone on this host, or no worker row at all) are
recovered: `in_progress` ones (the work was running and is lost) become `failed` with a reason naming
the process; `pending` ones (never started) are requeued, taken over by this process and run as
usual. On shutdown, in-flight jobs get `shutdown_grace_s` to finish; the rest are cancelled and
marked `cancelled`. This process's rows still pending go to a live peer (PostgreSQL, several
processes) or, with none, are marked `cancelled` too.

The per-job timeout (`scoring_timeout_s`) covers evaluations as well as scorings; it is also the model calls'
deadline (`retry.call_deadline`, and the judge model's own per-call one): a 429 whose `Retry-After` reaches past it
is not waited out, and the job fails as rate-limited (the note of `retry.rate_limit_note`), not as timed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select

from sensei_eval.core.errors import describe_error
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.investigation import JUDGE_OF_VARIANT
from sensei_eval.evaluators.investigation_answers import RESULT_DETAIL, SCORING_PHASE_CALLBACK, InvestigationResult, ScoringPhase
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.models.retry import call_deadline
from sensei_eval.service.config import ServiceSettings
from sensei_eval.service.events import EventHub, evaluation_event, score_event
from sensei_eval.service.reliability import CircuitBreaker, ReliableModel
from sensei_eval.service.store import (
    ACTIVE_STATUSES,
    EvaluationRow,
    InvalidTransitionError,
    JobStatus,
    SessionRow,
    Store,
    WorkerRow,
    check_transition,
    now_us,
)
from sensei_eval.service.verdict_cache import summarise

__all__ = ('PHASES', 'Job', 'ScoringWorker')

log = logging.getLogger(__name__)

# The progress event's phase for each phase the scorer reports, in order.
PHASES: dict[ScoringPhase, str] = {'scoring': 'analyzing_methodology', 'missing_tools': 'identifying_missing_tools'}
# The most of a model's raw answer a scoring row keeps.
_RAW_OUTPUT_CHARS = 8000


# Why a scoring of a session without an alert failed (the investigation judge does not apply there).
_NOT_AN_ALERT = (
    'not an alert investigation: the session has no alert_data, which the investigation scorer needs; use '
    'POST /api/v1/sessions/{id}/evaluate for the failure-mode judges'
)


@dataclass(frozen=True)
class Job:
    """A claimed job: its id, its session, and for a scoring the investigation judge's variant (None: an
    evaluation). Only the API that asked, and so the events, tell the two apart."""

    job_id: str
    session_id: str
    scoring: str | None = None

    @property
    def kind(self) -> str:
        return 'score' if self.scoring is not None else 'evaluation'


@dataclass
class _Outcome:
    status: JobStatus
    error: str | None = None
    values: dict[str, Any] = dataclasses.field(default_factory=dict)


class ScoringWorker:
    """Claims and runs pending scorings and evaluations for one service process."""

    def __init__(self, store: Store, hub: EventHub, judge_model: JudgeModel, settings: ServiceSettings) -> None:
        self.store = store
        self.hub = hub
        self.judge_model = judge_model
        self.settings = settings
        self.worker_id = settings.worker_id
        self.host = socket.gethostname()
        self.breaker = CircuitBreaker(settings.breaker_threshold, settings.breaker_reset_s)
        # One shared reliable model for every job (judges cache their agent per model object), rebuilt when the
        # worker's judge model is replaced (`_model`)
        self._shared: tuple[JudgeModel, JudgeModel] = (judge_model, self._reliable())
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: list[asyncio.Task[None]] = []
        self._stopping = False
        self.runs: dict[str, int] = {}  # job id -> times this process started it (exactly-once checks)

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> list[Job]:
        """Register this process, fail orphans of dead processes, and start claiming. Returns the orphans."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._register)
        orphans = await self.recover_orphans()
        self._background = [
            asyncio.create_task(self._claim_loop(), name='scoring-claim-loop'),
            asyncio.create_task(self._heartbeat_loop(), name='scoring-heartbeat'),
        ]
        return orphans

    async def stop(self) -> None:
        """Stop claiming; give in-flight jobs the grace period, then cancel and mark the rest."""
        self._stopping = True
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        in_flight = list(self._tasks.values())
        if in_flight:
            _, pending = await asyncio.wait(in_flight, timeout=self.settings.shutdown_grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for job, reason in await asyncio.to_thread(self._release_own_rows):
            self._publish_end(job, JobStatus.CANCELLED, reason)
        await asyncio.to_thread(self._unregister)

    def wake(self) -> None:
        """Tell the claim loop there is new work; callable from any thread."""
        if self._loop is None or self._loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._wake.set()
        else:
            self._loop.call_soon_threadsafe(self._wake.set)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    # -- claiming ------------------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            free = self.settings.concurrency - len(self._tasks)
            if free > 0:
                try:
                    jobs = await asyncio.to_thread(self._claim, free)
                except Exception as e:  # a store hiccup must not kill the loop; log and poll again
                    log.error('claiming pending work failed: %s', describe_error(e))
                    jobs = []
                for job in jobs:
                    self._spawn(job)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.settings.poll_s)

    def _spawn(self, job: Job) -> None:
        self.runs[job.job_id] = self.runs.get(job.job_id, 0) + 1
        task = asyncio.create_task(self._run(job), name=f'{job.kind}:{job.job_id}')
        self._tasks[job.job_id] = task

        def done(_: asyncio.Task[None]) -> None:
            self._tasks.pop(job.job_id, None)
            self._wake.set()

        task.add_done_callback(done)

    def _claim(self, limit: int) -> list[Job]:
        jobs: list[Job] = []
        now = now_us()
        with self.store.write() as db:
            rows = list(
                db.scalars(
                    select(EvaluationRow)
                    .where(EvaluationRow.status == JobStatus.PENDING.value)
                    .order_by(EvaluationRow.scoring.is_(None), EvaluationRow.started_at_us)  # scorings first, as ever
                    .limit(limit)
                    .with_for_update(skip_locked=True)
                )
            )
            for row in rows:
                row.status = check_transition(row.status, JobStatus.IN_PROGRESS).value
                row.owner = self.worker_id
                row.claimed_at_us = now
                jobs.append(_job(row))
        return jobs

    # -- running -------------------------------------------------------------------------------------

    async def _run(self, job: Job) -> None:
        self._publish(job, 'started', status=JobStatus.IN_PROGRESS.value)
        try:
            # a Retry-After past the job's deadline is not waited for: the 429 ends the call, reported rate-limited
            async with asyncio.timeout(self.settings.scoring_timeout_s):
                with call_deadline(self.settings.scoring_timeout_s):
                    outcome = await self._judge(job)
        except TimeoutError:
            outcome = _Outcome(JobStatus.TIMED_OUT, f'timed out after {self.settings.scoring_timeout_s:g} s')
        except asyncio.CancelledError:
            await self._finish(job, _Outcome(JobStatus.CANCELLED, 'cancelled: the service shut down before it finished'))
            raise
        except Exception as e:
            log.exception('%s %s crashed', job.kind, job.job_id)
            outcome = _Outcome(JobStatus.FAILED, f'internal error: {describe_error(e)}')
        await self._finish(job, outcome)

    async def _judge(self, job: Job) -> _Outcome:
        """The job's judges over its session's record, as a run judges it; the report and what it says."""
        record, names = await asyncio.to_thread(self._load_input, job)

        def on_phase(phase: ScoringPhase) -> None:
            self._publish(job, 'progress', phase=PHASES[phase])

        token = SCORING_PHASE_CALLBACK.set(on_phase if job.scoring is not None else None)
        try:
            options = JudgeRunOptions(make_judges(names), self._model())
            [report] = await judge_records([record], options, run_id=f'service-{job.job_id}')
        finally:
            SCORING_PHASE_CALLBACK.reset(token)
        values: dict[str, Any] = {
            'report': report.model_dump(mode='json'),
            'overall_score': report.overall_score,
            'verdict_cache': summarise(list(report.judges.values())).model_dump(mode='json'),  # what the dashboard reads
            'model': self.judge_model.name,
            'smoke': self.judge_model.embedded,
        }
        if job.scoring is not None:
            return _scoring_outcome(report, JUDGE_OF_VARIANT[job.scoring], values)
        if report.errors:
            return _Outcome(JobStatus.FAILED, f'{len(report.errors)} judge(s) errored: ' + '; '.join(report.errors), values)
        return _Outcome(JobStatus.COMPLETED, None, values)

    def _model(self) -> JudgeModel:
        """The worker's judge model as it is now, behind retries and the breaker (built once per model)."""
        if self._shared[0] is not self.judge_model:
            self._shared = (self.judge_model, self._reliable())
        return self._shared[1]

    def _reliable(self) -> JudgeModel:
        # the breaker outside the retries: it sees one outcome per model call, after its attempts
        retrying = self.judge_model.retrying_model(attempts=self.settings.model_attempts, base_s=self.settings.retry_backoff_s)
        return self.judge_model.through(ReliableModel(retrying, breaker=self.breaker), retries_inside=True)

    def _load_input(self, job: Job) -> tuple[QueryRecord, list[str]]:
        with self.store.read() as db:
            session = db.get(SessionRow, job.session_id)
            row = db.get(EvaluationRow, job.job_id)
            assert session is not None and row is not None, f'{job} vanished from the store'
            return QueryRecord.model_validate(session.record), list(row.judges)

    # -- finishing -------------------------------------------------------------------------------------

    async def _finish(self, job: Job, outcome: _Outcome) -> None:
        try:
            written = await asyncio.to_thread(self._write_outcome, job, outcome)
        except Exception as e:
            what = outcome.status.value
            log.error('could not record the outcome of %s %s (%s): %s', job.kind, job.job_id, what, describe_error(e))
            return
        if not written:
            return
        if outcome.status == JobStatus.COMPLETED:
            extra: dict[str, Any] = {'status': outcome.status.value}
            if job.scoring is not None:
                extra['total_score'] = outcome.values.get('total_score')
            else:
                extra['overall_score'] = outcome.values.get('overall_score')
            self._publish(job, 'completed', **extra)
        else:
            self._publish_end(job, outcome.status, outcome.error or '')

    def _write_outcome(self, job: Job, outcome: _Outcome) -> bool:
        with self.store.write() as db:
            row = db.get(EvaluationRow, job.job_id, with_for_update=True)
            if row is None:
                log.error('%s %s vanished before its outcome (%s) was recorded', job.kind, job.job_id, outcome.status.value)
                return False
            try:
                row.status = check_transition(row.status, outcome.status).value
            except InvalidTransitionError as e:
                what = outcome.status.value
                log.warning('%s %s: outcome %s not recorded: %s (finished elsewhere)', job.kind, job.job_id, what, e)
                return False
            row.completed_at_us = now_us()
            row.error_message = outcome.error
            row.smoke = self.judge_model.embedded  # whatever the outcome, this model made it
            for key, value in outcome.values.items():
                setattr(row, key, value)
        return True

    def _publish(self, job: Job, what: str, **extra: Any) -> None:
        if job.scoring is not None:
            event = score_event(f'scoring.{what}', job.job_id, job.session_id, **extra)
        else:
            event = evaluation_event(f'evaluation.{what}', job.job_id, job.session_id, **extra)
        self.hub.publish_session(event)

    def _publish_end(self, job: Job, status: JobStatus, error: str) -> None:
        self._publish(job, 'failed', status=status.value, error_message=error)

    # -- liveness and orphans ------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.settings.heartbeat_s)
            try:
                await asyncio.to_thread(self._register)
                await self.recover_orphans()
            except Exception as e:
                log.error('heartbeat failed: %s', describe_error(e))

    def _register(self) -> None:
        now = now_us()
        with self.store.write() as db:
            row = db.get(WorkerRow, self.worker_id)
            if row is None:
                me = WorkerRow(worker_id=self.worker_id, host=self.host, pid=os.getpid(), started_at_us=now, heartbeat_at_us=now)
                db.add(me)
            else:
                row.heartbeat_at_us = now

    def _unregister(self) -> None:
        with self.store.write() as db:
            db.execute(delete(WorkerRow).where(WorkerRow.worker_id == self.worker_id))

    async def recover_orphans(self) -> list[Job]:
        """Fail the running rows of dead processes (with a reason) and publish their failure; their
        pending rows are requeued. Returns the failed ones."""
        failed = await asyncio.to_thread(self._fail_orphans)
        for job, reason in failed:
            self._publish_end(job, JobStatus.FAILED, reason)
        return [job for job, _ in failed]

    def _fail_orphans(self) -> list[tuple[Job, str]]:
        now = now_us()
        stale_us = int(self.settings.stale_after_s * 1_000_000)
        failed: list[tuple[Job, str]] = []
        requeued = 0
        with self.store.write() as db:
            workers = {w.worker_id: w for w in db.scalars(select(WorkerRow))}
            dead: dict[str, str] = {}
            for w in workers.values():
                if w.worker_id == self.worker_id:
                    continue
                if now - w.heartbeat_at_us > stale_us:
                    dead[w.worker_id] = f'its last heartbeat was {(now - w.heartbeat_at_us) / 1e6:.0f} s ago'
                elif w.host == self.host and not _pid_alive(w.pid):
                    dead[w.worker_id] = f'process {w.pid} on {w.host} is gone'
            rows = db.scalars(
                select(EvaluationRow).where(EvaluationRow.status.in_(ACTIVE_STATUSES)).with_for_update(skip_locked=True)
            )
            for row in rows:
                owner = row.owner or '?'
                if owner == self.worker_id or (owner in workers and owner not in dead):
                    continue
                why = dead.get(owner, 'it is no longer registered')
                if row.status == JobStatus.PENDING.value:
                    # never started: nothing was lost, so it is simply queued again (here; any claim loop may run it)
                    row.owner = self.worker_id
                    requeued += 1
                    job = _job(row)
                    log.info(
                        '%s %s of session %s requeued: its process %s stopped (%s)',
                        job.kind,
                        job.job_id,
                        job.session_id,
                        owner,
                        why,
                    )
                    continue
                reason = (
                    f'orphaned: the service process {owner} that left this {row.status} stopped without finishing '
                    f'it ({why}); request it again'
                )
                row.status = check_transition(row.status, JobStatus.FAILED).value
                row.error_message = reason
                row.completed_at_us = now
                failed.append((_job(row), reason))
            if dead:
                db.execute(delete(WorkerRow).where(WorkerRow.worker_id.in_(list(dead))))
        for job, reason in failed:
            log.warning('%s %s of session %s: %s', job.kind, job.job_id, job.session_id, reason)
        if requeued:
            log.warning('requeued %d pending job(s) of stopped service processes', requeued)
            self.wake()
        return failed

    def _release_own_rows(self) -> list[tuple[Job, str]]:
        """On shutdown: hand this process's pending rows to a live peer, or cancel them; cancel the rest.

        A pending row nobody has started goes to the live peer with the freshest heartbeat (its owner
        changes, so the peer's orphan check keeps it); with no live peer it is cancelled. Anything still
        in_progress here (an outcome that could not be written) is cancelled.
        """
        released: list[tuple[Job, str]] = []
        now = now_us()
        stale_us = int(self.settings.stale_after_s * 1_000_000)
        with self.store.write() as db:
            peers = [
                w
                for w in db.scalars(select(WorkerRow).order_by(WorkerRow.heartbeat_at_us.desc()))
                if w.worker_id != self.worker_id and now - w.heartbeat_at_us <= stale_us
            ]
            heir = peers[0].worker_id if peers else None
            rows = list(
                db.scalars(
                    select(EvaluationRow)
                    .where(EvaluationRow.owner == self.worker_id, EvaluationRow.status.in_(ACTIVE_STATUSES))
                    .with_for_update(skip_locked=True)
                )
            )
            for row in rows:
                if heir is not None and row.status == JobStatus.PENDING.value:
                    row.owner = heir
                    continue
                started = row.status == JobStatus.IN_PROGRESS.value
                reason = f'the service shut down before this job {"finished" if started else "started"}; request it again'
                row.status = check_transition(row.status, JobStatus.CANCELLED).value
                row.error_message = reason
                row.completed_at_us = now_us()
                released.append((_job(row), reason))
        return released


# ---------------------------------------------------------------------------------------------------
# Helpers


def _scoring_outcome(report: RecordReport, judge: str, values: dict[str, Any]) -> _Outcome:
    """A scoring's outcome from its report: the investigation judge's total and the fields the score API
    returns (`score_detail`), from its typed result; failed when it did not apply (no alert) or errored."""
    result = report.judges.get(judge)
    if result is None:
        why = report.skipped.get(judge)
        error = _NOT_AN_ALERT if why is not None and 'alert' in why else f'{judge} did not run: {why or "; ".join(report.errors)}'
        return _Outcome(JobStatus.FAILED, error, values)
    typed = result.details.get(RESULT_DETAIL)
    if result.status != 'ok' or not isinstance(typed, dict):
        raw = result.raw_output[:_RAW_OUTPUT_CHARS] if result.raw_output else None
        return _Outcome(JobStatus.FAILED, f'judge error: {result.error}', {**values, 'model': result.model, 'raw_output': raw})
    scored = InvestigationResult.model_validate(typed)
    detail = {
        'score_analysis': scored.analysis,
        'missing_tools_analysis': scored.missing_tools_analysis,
        'score_breakdown': scored.breakdown.as_dict() or None,
        'missing_tools': [t.model_dump() for t in scored.missing_tools],
        'alternative_approaches': (
            [a.model_dump() for a in scored.alternative_approaches] if scored.variant == 'structured' else None
        ),
        'input_tokens': scored.input_tokens,
        'output_tokens': scored.output_tokens,
    }
    raw = scored.raw_output[:_RAW_OUTPUT_CHARS] if scored.raw_output else None
    scoring = {
        'total_score': scored.total_score,
        'prompt_hash': scored.prompt_hash,
        'score_detail': detail,
        'raw_output': raw,
        'model': scored.model,
        'smoke': scored.smoke,
    }
    return _Outcome(JobStatus.COMPLETED, None, {**values, **scoring})


def _job(row: EvaluationRow) -> Job:
    return Job(row.evaluation_id, row.session_id, row.scoring)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
