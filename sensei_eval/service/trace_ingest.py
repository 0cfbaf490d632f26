"""Agent traces into sessions: buffer OTLP spans per trace in the store, build a trace's records once its
root span is in (or its wait is over), and let the sampler decide which of them are judged.

* `ingest_spans` stores a request's spans (one transaction; a span sent twice, as exporters do on
  retry, is kept once) under their trace's `traces` row, and finishes every trace whose root span is
  now present. Spans of a trace already finished are refused (counted in the OTLP `partial_success`).
* `finish_trace` builds the trace's records (`sensei_eval.traces.build_trace`), stores each as a
  session (`completed`, or `failed` when the agent run ended in error; agent from the run), asks the
  `Sampler` about it and records the decision in `session_sampling`; a sampled session gets a pending
  evaluation with its agent's judges, which the scoring worker runs like any other. The trace becomes
  `ingested` (or `rejected`, with the located errors, when it gave no record) and its spans are deleted.
* `sweep_traces` finishes traces pending longer than `TraceConfig.root_timeout_s` without their root.

The budget is counted from `session_sampling` inside the deciding transaction, under a lock (SQLite's
`BEGIN IMMEDIATE`, a PostgreSQL advisory lock), so concurrent requests and peer processes never
overspend it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import delete, func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..records import LoadError
from ..sampler import Sampler
from ..traces import Span, build_trace
from .config import ServiceSettings
from .store import (
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

__all__ = ('SAMPLER_USER', 'IngestResult', 'TraceOutcome', 'finish_trace', 'ingest_spans', 'sweep_traces')

log = logging.getLogger(__name__)

# Who triggered the evaluation of a sampled run.
SAMPLER_USER = 'sampler'
# The PostgreSQL advisory lock key that serialises budget decisions across processes.
_BUDGET_LOCK = 0x5E45E1
_RETRIES = 5


@dataclass
class TraceOutcome:
    """What finishing one trace did."""

    trace_id: str
    status: str
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


def ingest_spans(store: Store, spans: Sequence[Span], settings: ServiceSettings, *, user: str) -> IngestResult:
    """Buffer `spans` and finish the traces whose root is now in (see the module docstring)."""
    result = IngestResult()
    by_trace: dict[str, list[Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    complete: list[str] = []
    for trace_id, trace_spans in by_trace.items():
        accepted, message, rooted = _buffer(store, trace_id, trace_spans)
        result.accepted += accepted
        result.rejected += len(trace_spans) - accepted
        if message:
            result.messages.append(message)
        if rooted:
            complete.append(trace_id)
    for trace_id in complete:
        outcome = finish_trace(store, trace_id, settings, user=user, timed_out=False)
        if outcome is not None:
            result.finished.append(outcome)
    return result


def _buffer(store: Store, trace_id: str, spans: Sequence[Span]) -> tuple[int, str | None, bool]:
    """Store one trace's new spans; (spans accepted, why some were refused, whether its root is in)."""
    for _ in range(_RETRIES):
        try:
            with store.write() as db:
                now = now_us()
                trace = db.get(TraceRow, trace_id, with_for_update=True)
                if trace is None:
                    trace = TraceRow(
                        trace_id=trace_id, status='pending', span_count=0, root_seen=False, first_seen_us=now, updated_at_us=now
                    )
                    db.add(trace)
                    db.flush()
                elif trace.status != 'pending':
                    return 0, f'trace {trace_id} was already {trace.status}: {len(spans)} late span(s) dropped', False
                known = set(db.scalars(select(TraceSpanRow.span_id).where(TraceSpanRow.trace_id == trace_id)))
                fresh: dict[str, Span] = {}
                for span in spans:
                    if span.span_id not in known:
                        fresh.setdefault(span.span_id, span)
                db.add_all(TraceSpanRow(trace_id=trace_id, span_id=s.span_id, span=s.to_json()) for s in fresh.values())
                trace.span_count += len(fresh)
                trace.root_seen = trace.root_seen or any(s.parent_span_id is None for s in fresh.values())
                trace.updated_at_us = now
                # a span already buffered (an exporter's retry) is accepted: it is stored, once
                return len(spans), None, trace.root_seen
        except IntegrityError:
            continue  # a concurrent request created the trace or a span first: read again
    return 0, f'trace {trace_id}: the store kept refusing its spans', False


def finish_trace(store: Store, trace_id: str, settings: ServiceSettings, *, user: str, timed_out: bool) -> TraceOutcome | None:
    """Build a pending trace into sessions, sample them, and close the trace; None if another request
    or process finished it first."""
    with store.write() as db:
        trace = db.get(TraceRow, trace_id, with_for_update=True)
        if trace is None or trace.status != 'pending':
            return None
        spans = [Span.from_json(row.span) for row in db.scalars(select(TraceSpanRow).where(TraceSpanRow.trace_id == trace_id))]
        build = build_trace(spans, settings.traces, timed_out=timed_out) if spans else None
        outcome = TraceOutcome(trace_id, 'rejected')
        if build is not None:
            outcome.errors = build.errors
            if build.records:
                _lock_budget(db, store)
                sampler = Sampler(settings.sampler, _StoreBudget(db))
            for record in build.records:
                now = now_us()
                agent = record.metadata.get('agent') if isinstance(record.metadata.get('agent'), str) else None
                decision = sampler.decide(record, agent=agent, at=now / 1e6)
                record.metadata.setdefault('profile', decision.profile)
                status = SessionStatus.FAILED if record.metadata.get('status') == 'error' else SessionStatus.COMPLETED
                session_id = new_id()
                db.add(
                    SessionRow(
                        session_id=session_id, query_id=record.query_id[:255], agent=agent, status=status.value,
                        record=record.model_dump(mode='json'), created_by=user,
                        warnings=list(record.input_warnings) or None, created_at_us=now, updated_at_us=now,
                    )
                )  # fmt: skip
                db.flush()  # the session first: the rows below reference it
                evaluation_id = None
                if decision.sampled:
                    evaluation_id = new_id()
                    db.add(
                        EvaluationRow(
                            evaluation_id=evaluation_id, session_id=session_id, evaluators=list(decision.judges),
                            status=JobStatus.PENDING.value, triggered_by=SAMPLER_USER, started_at_us=now,
                            owner=settings.worker_id,
                        )
                    )  # fmt: skip
                    outcome.evaluations.append(evaluation_id)
                db.add(
                    SamplingRow(
                        session_id=session_id, trace_id=trace_id, agent=agent, sampled=decision.sampled,
                        reason=decision.reason, detail=decision.detail, judge_calls=decision.judge_calls,
                        judges=list(decision.judges), evaluation_id=evaluation_id, decided_at_us=now,
                    )
                )  # fmt: skip
                db.flush()  # the next decision's budget counts this one
                outcome.sessions.append(session_id)
        outcome.status = 'ingested' if outcome.sessions else 'rejected'
        trace.status = outcome.status
        trace.error = '; '.join(str(e) for e in outcome.errors)[:4000] or None
        trace.updated_at_us = now_us()
        db.execute(delete(TraceSpanRow).where(TraceSpanRow.trace_id == trace_id))
    for error in outcome.errors:
        log.warning('trace %s: %s', trace_id, error)
    return outcome


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


def _lock_budget(db: Session, store: Store) -> None:
    """Serialise budget decisions: SQLite's write transaction already is; PostgreSQL takes a lock."""
    if store.is_postgres:
        db.execute(text('SELECT pg_advisory_xact_lock(:key)'), {'key': _BUDGET_LOCK})


class _StoreBudget:
    """The sampler's budget counted from `session_sampling` (restarts and peers share it)."""

    def __init__(self, db: Session) -> None:
        self.db = db

    def used(self, at: float, window_s: float) -> int:
        since = int((at - window_s) * 1_000_000)
        query = select(func.coalesce(func.sum(SamplingRow.judge_calls), 0)).where(
            SamplingRow.sampled.is_(True), SamplingRow.decided_at_us > since
        )
        return int(self.db.scalar(query) or 0)

    def spend(self, at: float, calls: int) -> None:
        """Nothing to do: the decision's own `session_sampling` row is the spending."""
