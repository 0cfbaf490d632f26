"""Agent traces into sessions: buffer OTLP spans per trace in the store, build a trace's records once its
root span is in (or its wait is over), and let the sampler decide which of them are judged.

* `ingest_spans` stores a request's spans (one transaction; a span sent twice, as exporters do on
  retry, is kept once) under their trace's `traces` row, and finishes every trace whose root span is
  now present. Spans of a trace already finished are refused (counted in the OTLP `partial_success`).
* `finish_trace` builds the trace's records (`sensei_eval.core.traces.build_trace`), stores each as a
  session (`completed`, or `failed` when the agent run ended in error; agent from the run), asks the
  `Sampler` about it and records the decision in `session_sampling`; a sampled session gets a pending
  evaluation with its agent's judges, which the scoring worker runs like any other. The trace becomes
  `ingested` (or `rejected`, with the located errors, when it gave no record) and its spans are deleted.
* `ingest_logs` buffers OTel log events (content sent as GenAI events) under their trace, beside its spans,
  until the trace is built; then each is joined to its span by span id (`traces.attach_logs`). Events for a
  trace already built are refused as late: an exporter sends a run's events before the run's root span ends
  (the SDK's batch processors export logs every second and spans every five), so late ones are rare.
* A trace that holds no run on purpose (an agent being built, `create_agent`) becomes `skipped`, not
  `rejected`, and its spans are not counted as refused.
* `sweep_traces` finishes traces pending longer than `TraceConfig.root_timeout_s` without their root.

The budget is counted from `session_sampling` inside the deciding transaction, under a lock (SQLite's
`BEGIN IMMEDIATE`, a PostgreSQL advisory lock), so concurrent requests and peer processes never
overspend it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from sensei_eval.core.errors import LoadError, LoadNotice
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.traces import LogEvent, Span, SpanEvent, TraceBuild, attach_logs, build_trace
from sensei_eval.production.sampler import JudgeSets, SampleDecision, Sampler
from sensei_eval.service.config import ServiceSettings
from sensei_eval.service.store import (
    EvaluationRow,
    JobStatus,
    SamplingRow,
    SessionRow,
    SessionStatus,
    Store,
    TraceRow,
    TraceSpanRow,
    new_id,
    now_us,
)

__all__ = (
    'BATCH_SPANS',
    'SAMPLER_USER',
    'IngestResult',
    'TraceOutcome',
    'finish_trace',
    'ingest_logs',
    'ingest_spans',
    'sweep_traces',
)

log = logging.getLogger(__name__)

# Who triggered the evaluation of a sampled run.
SAMPLER_USER = 'sampler'
# The PostgreSQL advisory lock key that serialises budget decisions across processes.
_BUDGET_LOCK = 0x5E45E1
_RETRIES = 5
# Spans written per transaction: one batch holds the write lock for milliseconds, so a large request
# (up to `ServiceSettings.otlp_max_spans`) never makes other writers wait for the whole of it.
BATCH_SPANS = 500
# Buffered log events share the span buffer: their row key is `L` and 15 hex digits (never a span id, which
# is 16 lower-case hex digits), so no schema change is needed and a trace's buffer is one table.
_LOG_ROW = 'L'
# The judges each sampler counts with, made once per process (`Sampler` would make them per request).
_JUDGES: JudgeSets = {}


@dataclass
class TraceOutcome:
    """What finishing one trace did."""

    trace_id: str
    status: str
    span_count: int = 0
    sessions: list[str] = field(default_factory=list)
    evaluations: list[str] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)


@dataclass
class IngestResult:
    """One OTLP request's answer: spans accepted and refused (with why), and the traces it finished."""

    accepted: int = 0
    rejected: int = 0
    messages: list[str] = field(default_factory=list)
    finished: list[TraceOutcome] = field(default_factory=list)

    @property
    def evaluations(self) -> int:
        return sum(len(t.evaluations) for t in self.finished)

    def partial_success(self) -> tuple[int, list[str]]:
        """The OTLP `partial_success` of this request: spans refused plus the spans of traces it finished
        that gave no run (`rejected`, each with its first reason), and the reasons."""
        rejected = self.rejected
        messages = list(self.messages)
        for outcome in self.finished:
            if outcome.status == 'rejected':
                rejected += outcome.span_count
                why = str(outcome.errors[0]) if outcome.errors else 'no agent run in it'
                if not outcome.span_count:
                    why = 'only log events arrived, no span of the trace'
                messages.append(f'trace {outcome.trace_id} rejected ({outcome.span_count} span(s)): {why}')
        return rejected, messages


def ingest_spans(store: Store, spans: Sequence[Span], settings: ServiceSettings, *, user: str) -> IngestResult:
    """Buffer `spans` and finish the traces whose root is now in (see the module docstring), in
    transactions of at most `BATCH_SPANS` spans, so the write lock is never held for a whole large
    request. A trace split over batches has its root span(s) in its last batch: the earlier ones only
    buffer its spans, as if they had come in separate requests. A trace complete within one batch is
    built from the batch's spans directly: its spans are never written to the buffer."""
    by_trace: dict[str, dict[str, Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, {}).setdefault(span.span_id, span)  # a span sent twice counts once
    result = IngestResult()
    batch: dict[str, dict[str, Span]] = {}
    size = 0
    sent = len(spans) - sum(len(t) for t in by_trace.values())  # duplicates within the request count as accepted
    for trace_id, trace_spans in by_trace.items():
        for span in sorted(trace_spans.values(), key=lambda s: s.parent_span_id is None):  # roots last
            batch.setdefault(trace_id, {})[span.span_id] = span
            size += 1
            if size >= BATCH_SPANS:
                _merge(result, _ingest_batch(store, batch, settings, user, size + sent))
                batch, size, sent = {}, 0, 0
    if batch or sent:
        _merge(result, _ingest_batch(store, batch, settings, user, size + sent))
    return result


def _ingest_batch(
    store: Store, by_trace: dict[str, dict[str, Span]], settings: ServiceSettings, user: str, sent: int
) -> IngestResult:
    for _ in range(_RETRIES):
        try:
            return _ingest(store, by_trace, settings, user, sent)
        except IntegrityError:
            continue  # a concurrent request created one of these traces or spans first: read again
    return IngestResult(rejected=sent, messages=['the store kept refusing these spans (concurrent writers); send them again'])


def _merge(total: IngestResult, part: IngestResult) -> None:
    total.accepted += part.accepted
    total.rejected += part.rejected
    total.messages.extend(part.messages)
    total.finished.extend(part.finished)


def _ingest(store: Store, by_trace: dict[str, dict[str, Span]], settings: ServiceSettings, user: str, sent: int) -> IngestResult:
    result = IngestResult(accepted=sent)
    with store.write() as db:
        now = now_us()
        ids = sorted(by_trace)  # rows are locked in trace-id order: overlapping requests cannot deadlock
        known = {
            t.trace_id: t
            for t in db.scalars(select(TraceRow).where(TraceRow.trace_id.in_(ids)).order_by(TraceRow.trace_id).with_for_update())
        }
        buffered: dict[str, set[str]] = {}
        if known:
            pending = [t for t, row in known.items() if row.status == 'pending']
            for trace_id, span_id in db.execute(
                select(TraceSpanRow.trace_id, TraceSpanRow.span_id).where(TraceSpanRow.trace_id.in_(pending))
            ):
                buffered.setdefault(trace_id, set()).add(span_id)
        new_spans: list[dict[str, Any]] = []
        complete: list[tuple[TraceRow, list[Span]]] = []
        for trace_id in ids:
            trace_spans = by_trace[trace_id]
            row = known.get(trace_id)
            if row is not None and row.status != 'pending':
                late = len(trace_spans)
                result.accepted -= late
                result.rejected += late
                result.messages.append(f'trace {trace_id} was already {row.status}: {late} late span(s) dropped')
                continue
            have = buffered.get(trace_id, set())
            fresh = [s for s in trace_spans.values() if s.span_id not in have]
            rooted = any(s.parent_span_id is None for s in fresh)
            if row is None:
                row = TraceRow(
                    trace_id=trace_id, status='pending', span_count=0, root_seen=False, first_seen_us=now, updated_at_us=now
                )
                db.add(row)
            row.span_count += len(fresh)
            row.root_seen = row.root_seen or rooted
            row.updated_at_us = now
            if row.root_seen:
                complete.append((row, fresh))
            else:
                new_spans.extend({'trace_id': trace_id, 'span_id': s.span_id, 'span': s.to_json()} for s in fresh)
        db.flush()
        if new_spans:
            db.execute(insert(TraceSpanRow), new_spans)
        if complete:
            txn = _Txn(db, settings, _store_sampler(db, store, settings), user)
            for row, fresh in complete:
                earlier = buffered.get(row.trace_id)
                spans = fresh + (_buffered_spans(db, row.trace_id) if earlier else [])
                result.finished.append(_finish(txn, row, spans, timed_out=False, had_buffer=bool(earlier)))
            txn.rows.insert(db)
    for outcome in result.finished:
        _log_errors(outcome)
    return result


def finish_trace(store: Store, trace_id: str, settings: ServiceSettings, *, user: str, timed_out: bool) -> TraceOutcome | None:
    """Build a pending trace from its buffered spans into sessions, sample them, and close the trace;
    None if another request or process finished it first."""
    with store.write() as db:
        row = db.get(TraceRow, trace_id, with_for_update=True)
        if row is None or row.status != 'pending':
            return None
        spans = _buffered_spans(db, trace_id)
        txn = _Txn(db, settings, _store_sampler(db, store, settings), user)
        outcome = _finish(txn, row, spans, timed_out=timed_out, had_buffer=True)
        txn.rows.insert(db)
    _log_errors(outcome)
    return outcome


def _buffered_spans(db: Session, trace_id: str) -> list[Span]:
    """The trace's buffered spans, with its buffered log events joined to them (`traces.attach_logs`)."""
    spans: list[Span] = []
    logs: list[LogEvent] = []
    for key, data in db.execute(select(TraceSpanRow.span_id, TraceSpanRow.span).where(TraceSpanRow.trace_id == trace_id)):
        if key.startswith(_LOG_ROW):
            event = data['event']
            logs.append(
                LogEvent(trace_id, data['span_id'], SpanEvent(event['name'], int(event['time_ns']), dict(event['attributes'])))
            )
        else:
            spans.append(Span.from_json(data))
    joined, _ = attach_logs(spans, logs)  # an event whose span never came describes nothing that was built
    return joined


def ingest_logs(store: Store, logs: Sequence[LogEvent], settings: ServiceSettings, *, user: str) -> IngestResult:
    """Buffer a request's log events under their traces (see the module docstring); `accepted`/`rejected`
    count log records. A trace seen only through its events waits for its spans like any pending trace."""
    by_trace: dict[str, dict[str, dict[str, Any]]] = {}
    for log in logs:
        event = {'name': log.event.name, 'time_ns': log.event.time_ns, 'attributes': log.event.attributes}
        row = {'span_id': log.span_id, 'event': event}
        digest = hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()[:15]
        by_trace.setdefault(log.trace_id, {})[_LOG_ROW + digest] = row  # the same event sent twice is kept once
    result = IngestResult(accepted=len(logs))
    for _ in range(_RETRIES):
        try:
            part = _ingest_logs(store, by_trace, len(logs))
        except IntegrityError:
            continue  # a concurrent request created one of these traces or rows first: read again
        return part
    result.accepted, result.rejected = 0, len(logs)
    result.messages.append('the store kept refusing these log records (concurrent writers); send them again')
    return result


def _ingest_logs(store: Store, by_trace: dict[str, dict[str, dict[str, Any]]], sent: int) -> IngestResult:
    result = IngestResult(accepted=sent)
    with store.write() as db:
        now = now_us()
        ids = sorted(by_trace)
        known = {
            t.trace_id: t
            for t in db.scalars(select(TraceRow).where(TraceRow.trace_id.in_(ids)).order_by(TraceRow.trace_id).with_for_update())
        }
        have: set[tuple[str, str]] = set()
        pending = [t for t, row in known.items() if row.status == 'pending']
        if pending:
            rows = select(TraceSpanRow.trace_id, TraceSpanRow.span_id).where(
                TraceSpanRow.trace_id.in_(pending), TraceSpanRow.span_id.startswith(_LOG_ROW)
            )
            have = {(t, k) for t, k in db.execute(rows)}
        new_rows: list[dict[str, Any]] = []
        for trace_id in ids:
            events = by_trace[trace_id]
            row = known.get(trace_id)
            if row is not None and row.status != 'pending':
                result.accepted -= len(events)
                result.rejected += len(events)
                result.messages.append(
                    f'trace {trace_id} was already {row.status}: {len(events)} late log record(s) dropped '
                    "(export log events before the run's root span ends)"
                )
                continue
            if row is None:
                db.add(
                    TraceRow(
                        trace_id=trace_id, status='pending', span_count=0, root_seen=False, first_seen_us=now, updated_at_us=now
                    )
                )
            else:
                row.updated_at_us = now
            new_rows.extend(
                {'trace_id': trace_id, 'span_id': key, 'span': data}
                for key, data in events.items()
                if (trace_id, key) not in have
            )
        db.flush()
        if new_rows:
            db.execute(insert(TraceSpanRow), new_rows)
    return result


@dataclass
class _Rows:
    """The rows a transaction's traces give, inserted together (one statement per table)."""

    sessions: list[dict[str, Any]] = field(default_factory=list)
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def insert(self, db: Session) -> None:
        for table, rows in ((SessionRow, self.sessions), (EvaluationRow, self.evaluations), (SamplingRow, self.decisions)):
            if rows:
                db.execute(insert(table), rows)  # sessions first: the other two reference them


@dataclass
class _Txn:
    """What the traces finished in one write transaction share: the session, the settings, the sampler
    (its budget counted under the budget lock), the user, and the rows inserted together at the end."""

    db: Session
    settings: ServiceSettings
    sampler: Sampler
    user: str
    rows: _Rows = field(default_factory=lambda: _Rows())


def _finish(txn: _Txn, row: TraceRow, spans: list[Span], *, timed_out: bool, had_buffer: bool) -> TraceOutcome:
    """Sessions, sampling decisions and evaluations for one trace's records (added to `txn.rows`, which
    the caller inserts); the trace closed."""
    db, settings, sampler, user, rows = txn.db, txn.settings, txn.sampler, txn.user, txn.rows
    outcome = TraceOutcome(row.trace_id, 'rejected', span_count=row.span_count)
    build = _build(row.trace_id, spans, settings, timed_out=timed_out)
    sessions, evaluations, decisions = rows.sessions, rows.evaluations, rows.decisions
    if build is not None:
        outcome.errors = build.errors
        for record in build.records:
            now = now_us()
            agent = record.metadata.get('agent') if isinstance(record.metadata.get('agent'), str) else None
            decision = sampler.decide(record, agent=agent, at=now / 1e6)
            record.metadata.setdefault('profile', decision.profile)
            status = SessionStatus.FAILED if record.metadata.get('status') == 'error' else SessionStatus.COMPLETED
            session_id = new_id()
            sessions.append(_session_values(session_id, record, agent, status, user, now))
            evaluation_id = None
            if decision.sampled:
                evaluation_id = new_id()
                evaluations.append(_evaluation_values(evaluation_id, session_id, decision, settings.worker_id, now))
                outcome.evaluations.append(evaluation_id)
            decisions.append(_decision_values(session_id, row.trace_id, agent, decision, evaluation_id, now))
            outcome.sessions.append(session_id)
    outcome.status = 'ingested' if outcome.sessions else ('skipped' if build is not None and build.skipped else 'rejected')
    row.status = outcome.status
    row.error = '; '.join(str(e) for e in outcome.errors)[:4000] or None
    row.updated_at_us = now_us()
    if had_buffer:
        db.execute(delete(TraceSpanRow).where(TraceSpanRow.trace_id == row.trace_id))
    return outcome


def _build(trace_id: str, spans: list[Span], settings: ServiceSettings, *, timed_out: bool) -> TraceBuild | None:
    """The trace's records; a trace that cannot be built at all (a defect, not bad input: `build_trace` reports
    bad values per run) is rejected with the reason, never a failed request for the traces beside it."""
    if not spans:
        return None
    try:
        return build_trace(spans, settings.traces, timed_out=timed_out)
    except Exception as e:
        log.exception('trace %s could not be built', trace_id)
        build = TraceBuild(trace_id)
        build.errors.append(
            LoadError('trace', 0, None, f'trace {trace_id} could not be built: {type(e).__name__}: {str(e)[:200]}')
        )
        return build


def _session_values(
    session_id: str, record: QueryRecord, agent: str | None, status: SessionStatus, user: str, now: int
) -> dict[str, Any]:
    """The `sessions` row of one of a trace's records."""
    return {
        'session_id': session_id,
        'query_id': record.query_id[:255],
        'agent': agent,
        'status': status.value,
        'record': record.model_dump(mode='json'),
        'created_by': user,
        'warnings': list(record.input_warnings) or None,
        'created_at_us': now,
        'updated_at_us': now,
    }


def _evaluation_values(evaluation_id: str, session_id: str, decision: SampleDecision, owner: str, now: int) -> dict[str, Any]:
    """The pending `session_evaluations` row of a record the sampler picked: its judges, queued by the sampler."""
    return {
        'evaluation_id': evaluation_id,
        'session_id': session_id,
        'judges': list(decision.judges),
        'status': JobStatus.PENDING.value,
        'triggered_by': SAMPLER_USER,
        'started_at_us': now,
        'owner': owner,
        'smoke': False,
    }


def _decision_values(
    session_id: str, trace_id: str, agent: str | None, decision: SampleDecision, evaluation_id: str | None, now: int
) -> dict[str, Any]:
    """The sampling decision's row: sampled or not, why, and the evaluation it queued."""
    return {
        'session_id': session_id,
        'trace_id': trace_id,
        'agent': agent,
        'sampled': decision.sampled,
        'reason': decision.reason,
        'detail': decision.detail,
        'judge_calls': decision.judge_calls,
        'judges': list(decision.judges),
        'evaluation_id': evaluation_id,
        'decided_at_us': now,
    }


def _log_errors(outcome: TraceOutcome) -> None:
    for error in outcome.errors:
        (log.info if isinstance(error, LoadNotice) else log.warning)('trace %s: %s', outcome.trace_id, error)


def sweep_traces(store: Store, settings: ServiceSettings, *, now: float | None = None) -> list[TraceOutcome]:
    """Finish every trace that waited longer than the root-span timeout (see `traces`)."""
    cutoff = int(((time.time() if now is None else now) - settings.traces.root_timeout_s) * 1_000_000)
    with store.read() as db:
        due = list(
            db.scalars(select(TraceRow.trace_id).where(TraceRow.status == 'pending', TraceRow.first_seen_us <= cutoff).limit(500))
        )
    outcomes: list[TraceOutcome] = []
    for trace_id in due:
        outcome = finish_trace(store, trace_id, settings, user=SAMPLER_USER, timed_out=True)
        if outcome is not None:
            outcomes.append(outcome)
    return outcomes


def _store_sampler(db: Session, store: Store, settings: ServiceSettings) -> Sampler:
    """A sampler whose budget is counted from the store, under the budget lock (see the module docstring)."""
    if settings.sampler.budget_per_hour is not None and store.is_postgres:
        # serialise budget decisions across processes; SQLite's write transaction already is
        db.execute(text('SELECT pg_advisory_xact_lock(:key)'), {'key': _BUDGET_LOCK})
    return Sampler(settings.sampler, _StoreBudget(db), judges=_JUDGES)


class _StoreBudget:
    """The sampler's budget counted from `session_sampling` (restarts and peers share it): read once per
    transaction, plus what this transaction spent."""

    def __init__(self, db: Session) -> None:
        self.db = db
        self.read: tuple[float, float, int] | None = None  # (at, window, calls then)
        self.spent: list[tuple[float, int]] = []

    def used(self, at: float, window_s: float) -> int:
        if self.read is None or self.read[1] != window_s:
            since = int((at - window_s) * 1_000_000)
            query = select(func.coalesce(func.sum(SamplingRow.judge_calls), 0)).where(
                SamplingRow.sampled.is_(True), SamplingRow.decided_at_us > since
            )
            self.read = (at, window_s, int(self.db.scalar(query) or 0))
            self.spent = []
        return self.read[2] + sum(calls for _, calls in self.spent)

    def spend(self, at: float, calls: int) -> None:
        self.spent.append((at, calls))
