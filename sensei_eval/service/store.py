"""The scoring service's store: SQLAlchemy 2 tables, the engine/session factory, and status rules.

Tables (created only by the Alembic migrations in `sensei_eval/service/migrations`, never by
`create_all`, so a database is always at a known revision):

* `sessions` — one ingested query history or TARSy investigation: the `QueryRecord` as JSON, the
  session's own status (pending … completed), the agent/chain that produced it, timestamps.
  `warnings` lists what ingest changed (text replaced by U+FFFD).
* `session_evaluations` — the service's one kind of job: its judges run over a session, the `RecordReport`
  stored as JSON. An evaluation (`POST …/evaluate`) runs the judges asked for; a scoring (`POST …/score`) runs
  the investigation judge (`scoring` names its variant) and keeps what the score API returns beside the
  report (`total_score`, `prompt_hash`, `score_detail`, `raw_output`: migration 0009, which moved the rows of
  the former `session_scores` and `score_missing_tools` tables here). Asking again adds a row; history is
  kept; "the score" of a session is its latest *completed* scoring, "the scoring state" its latest scoring of
  any status, and the same for evaluations. A partial unique index on (`session_id`, whether it is a scoring)
  over the active statuses (`pending`, `in_progress`) makes two active scorings (or evaluations) of one
  session impossible, whatever the API does.
* `traces`, `trace_spans`, `session_sampling` (migration 0004) — OTLP spans buffered per trace until
  its root span arrives (or the wait times out), the trace's state (`pending`, `ingested`,
  `rejected` with the reason), and the sampler's decision for each session made from a trace
  (sampled or not, why, the judge calls it costs: the budget's sliding window is counted from here).
* `service_workers` — one row per live service process (host, pid, heartbeat): how a starting process
  tells rows owned by a dead process (failed as orphans) from rows a live peer is still working on.

Status rules live here, once: `TRANSITIONS` lists every allowed move, `check_transition` is what the
worker calls before each change, and `sources_of` gives the statuses a bulk `UPDATE … WHERE status IN`
may move from. Nothing goes back from a terminal status.

SQLite is the embedded default (WAL, a busy timeout, foreign keys on). It gets two engines: reads use a
deferred `BEGIN`, writes `BEGIN IMMEDIATE`, so a read-then-write transaction takes the write lock up
front and waits for it (busy timeout) instead of failing with "database is locked" on upgrade.
PostgreSQL (`postgresql+psycopg://…`) uses one pool for both; reads run in autocommit (one round trip
per statement).

JSON columns are written by one serializer on both backends (`dumps_json`): NaN and ±Infinity, which
PostgreSQL refuses and SQLite would keep, are stored as null everywhere, so the stores never disagree
(OTLP span attributes never get here as numbers: `traces` keeps a non-finite double as its text).
"""

from __future__ import annotations

import asyncio
import enum
import json
import math
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Engine,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    create_engine,
    event,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from sensei_eval.core.errors import SenseiError

__all__ = (
    'ACTIVE_STATUSES',
    'ONE_ACTIVE_PER_SESSION',
    'SESSION_TERMINAL_STATUSES',
    'TERMINAL_STATUSES',
    'TRANSITIONS',
    'AlertRow',
    'Base',
    'EvaluationRow',
    'InvalidTransitionError',
    'JobMixin',
    'JobStatus',
    'SamplingRow',
    'SessionRow',
    'SessionStatus',
    'Store',
    'TraceRow',
    'TraceSpanRow',
    'WorkerRow',
    'check_transition',
    'dumps_json',
    'new_id',
    'normalise_url',
    'now_us',
    'sources_of',
)


class SessionStatus(enum.StrEnum):
    """A session's own status (TARSy's alert-session lifecycle)."""

    PENDING = 'pending'
    IN_PROGRESS = 'in_progress'
    COMPLETED = 'completed'
    FAILED = 'failed'
    CANCELLED = 'cancelled'
    TIMED_OUT = 'timed_out'


# Scoring reads a finished investigation only: these are the statuses a session can be scored in.
SESSION_TERMINAL_STATUSES = frozenset(
    {SessionStatus.COMPLETED, SessionStatus.FAILED, SessionStatus.CANCELLED, SessionStatus.TIMED_OUT}
)


class JobStatus(enum.StrEnum):
    """The lifecycle of one scoring (or evaluation) row."""

    PENDING = 'pending'
    IN_PROGRESS = 'in_progress'
    COMPLETED = 'completed'
    FAILED = 'failed'
    TIMED_OUT = 'timed_out'
    CANCELLED = 'cancelled'


ACTIVE_STATUSES = (JobStatus.PENDING.value, JobStatus.IN_PROGRESS.value)
TERMINAL_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.TIMED_OUT, JobStatus.CANCELLED})

# Every allowed move of a job's status. Pending may fail (orphaned, or refused before it ran) or be
# cancelled (shutdown before it started); terminal statuses go nowhere.
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.PENDING: frozenset({JobStatus.IN_PROGRESS, JobStatus.FAILED, JobStatus.CANCELLED}),
    JobStatus.IN_PROGRESS: frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.TIMED_OUT, JobStatus.CANCELLED}),
    JobStatus.COMPLETED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.TIMED_OUT: frozenset(),
    JobStatus.CANCELLED: frozenset(),
}


class InvalidTransitionError(SenseiError, RuntimeError):
    """A status change the lifecycle forbids (e.g. completed → in_progress)."""


def check_transition(current: str | JobStatus, new: str | JobStatus) -> JobStatus:
    """The new status, if moving there from `current` is allowed; else `InvalidTransitionError`."""
    old, target = JobStatus(current), JobStatus(new)
    if target not in TRANSITIONS[old]:
        raise InvalidTransitionError(f'status {old.value} -> {target.value} is not allowed')
    return target


def sources_of(new: JobStatus) -> list[str]:
    """The statuses a bulk update may move rows from, to reach `new` (derived from `TRANSITIONS`)."""
    return [old.value for old, targets in TRANSITIONS.items() if new in targets]


def now_us() -> int:
    return time.time_ns() // 1000


def new_id() -> str:
    return str(uuid.uuid4())


# ---------------------------------------------------------------------------------------------------
# Tables


class Base(DeclarativeBase):
    pass


# The partial unique indexes' predicates: at most one row per session in these statuses, of each kind of ask.
_ACTIVE = "status IN ('pending', 'in_progress')"
_ACTIVE_EVALUATION = text(f'{_ACTIVE} AND scoring IS NULL')
_ACTIVE_SCORING = text(f'{_ACTIVE} AND scoring IS NOT NULL')
# The partial unique indexes that make two active jobs of one session asked for the same way impossible (an
# evaluation and a scoring may run side by side, as the two APIs always allowed; migration 0009).
ONE_ACTIVE_PER_SESSION = (
    Index(
        'uq_session_evaluations_one_active',
        'session_id',
        unique=True,
        sqlite_where=_ACTIVE_EVALUATION,
        postgresql_where=_ACTIVE_EVALUATION,
    ),
    Index(
        'uq_session_evaluations_one_active_scoring',
        'session_id',
        unique=True,
        sqlite_where=_ACTIVE_SCORING,
        postgresql_where=_ACTIVE_SCORING,
    ),
)


class JobMixin:
    """The lifecycle columns of a job (what the worker reads and writes)."""

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey('sessions.session_id', ondelete='CASCADE'))
    status: Mapped[str] = mapped_column(String(32))
    started_at_us: Mapped[int] = mapped_column(BigInteger)  # when it was triggered
    claimed_at_us: Mapped[int | None] = mapped_column(BigInteger)  # when it became in_progress
    completed_at_us: Mapped[int | None] = mapped_column(BigInteger)
    error_message: Mapped[str | None] = mapped_column(Text)
    owner: Mapped[str | None] = mapped_column(String(64))  # the service process that queued or claimed it
    model: Mapped[str | None] = mapped_column(String(255))
    # Finished by the embedded model: a smoke test of the pipeline, not a verdict (migration 0002).
    smoke: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text('false'))

    @property
    def job_id(self) -> str:
        raise NotImplementedError


class SessionRow(Base):
    __tablename__ = 'sessions'

    session_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    query_id: Mapped[str] = mapped_column(String(255), index=True)
    agent: Mapped[str | None] = mapped_column(String(255), index=True)
    status: Mapped[str] = mapped_column(String(32), index=True)
    record: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_by: Mapped[str | None] = mapped_column(String(255))
    warnings: Mapped[list[str] | None] = mapped_column(JSON)  # what ingest changed (migration 0002)
    created_at_us: Mapped[int] = mapped_column(BigInteger, index=True)
    updated_at_us: Mapped[int] = mapped_column(BigInteger)


class EvaluationRow(JobMixin, Base):
    """One job of the judges over a session (the service runs one kind of job): an evaluation asked for with
    `POST /sessions/{id}/evaluate`, or an investigation scoring asked for with `POST /…/score` (`scoring`
    names the investigation judge's variant then; null for an evaluation). The two are told apart only
    for the API that asked and for "one active job per session": the worker runs both the same way."""

    __tablename__ = 'session_evaluations'

    evaluation_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    judges: Mapped[list[str]] = mapped_column(JSON)  # the judge names or groups asked for (migration 0009: was `evaluators`)
    triggered_by: Mapped[str] = mapped_column(String(255))
    overall_score: Mapped[float | None] = mapped_column()
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # the verdict model's summary of the report, a cache of derived fields (`service.verdict_cache.VerdictSummary`;
    # migration 0008, renamed from `verdict` in 0009)
    verdict_cache: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # migration 0009, a scoring's: the investigation judge's variant (`freeform` or `structured`; null: an
    # evaluation), its prompt hash at the request, and from its result once completed the total (0-100), the
    # score's fields the API returns (`score_detail`: analyses, points per category, missing tools, alternative
    # approaches, tokens) and the model's raw answer
    scoring: Mapped[str | None] = mapped_column(String(32))
    prompt_hash: Mapped[str | None] = mapped_column(String(64))
    total_score: Mapped[int | None] = mapped_column(Integer)
    score_detail: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    raw_output: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index('ix_session_evaluations_session_id', 'session_id'),
        Index('ix_session_evaluations_status_started', 'status', 'started_at_us'),
        Index('ix_session_evaluations_prompt_hash', 'prompt_hash'),
        Index('ix_session_evaluations_total_score', 'total_score'),
        *ONE_ACTIVE_PER_SESSION,
    )

    @property
    def job_id(self) -> str:
        return self.evaluation_id


class WorkerRow(Base):
    __tablename__ = 'service_workers'

    worker_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at_us: Mapped[int] = mapped_column(BigInteger)
    heartbeat_at_us: Mapped[int] = mapped_column(BigInteger)


class TraceRow(Base):
    """One trace seen on `POST /v1/traces`: pending until its root span arrives or the wait times out."""

    __tablename__ = 'traces'

    trace_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))  # pending, ingested, rejected
    span_count: Mapped[int] = mapped_column(Integer)
    root_seen: Mapped[bool] = mapped_column(Boolean)  # its root span (no parent) has arrived
    first_seen_us: Mapped[int] = mapped_column(BigInteger)
    updated_at_us: Mapped[int] = mapped_column(BigInteger)
    error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index('ix_traces_status_first_seen', 'status', 'first_seen_us'),)


class TraceSpanRow(Base):
    """A buffered span (`traces.Span.to_json()`), kept until its trace is built."""

    __tablename__ = 'trace_spans'

    trace_id: Mapped[str] = mapped_column(String(32), ForeignKey('traces.trace_id', ondelete='CASCADE'), primary_key=True)
    span_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    span: Mapped[dict[str, Any]] = mapped_column(JSON)


class SamplingRow(Base):
    """The sampler's decision on a session made from a trace (sampled or not, and why)."""

    __tablename__ = 'session_sampling'

    session_id: Mapped[str] = mapped_column(String(36), ForeignKey('sessions.session_id', ondelete='CASCADE'), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32), index=True)
    agent: Mapped[str | None] = mapped_column(String(255))
    sampled: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str] = mapped_column(String(16))  # negative, rate, not_sampled, budget
    detail: Mapped[str] = mapped_column(Text)
    judge_calls: Mapped[int] = mapped_column(Integer)
    judges: Mapped[list[str]] = mapped_column(JSON)
    evaluation_id: Mapped[str | None] = mapped_column(String(36))
    decided_at_us: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (Index('ix_session_sampling_sampled_decided', 'sampled', 'decided_at_us'),)


# ---------------------------------------------------------------------------------------------------
# Engine and sessions


# Connections of the asyncio read pool (PostgreSQL). A few are enough to keep the database busy on
# single-row reads (4 sustained ~1200 GET/s on loopback, 2 cores, p95 < 90 ms at 100 clients), and a
# small pool keeps latency even: with 10-40 connections the backends crowded the CPU and p95 tripled.
_ASYNC_READ_POOL = 4


class Store:
    """Engines and transactions for one database URL (SQLite file or PostgreSQL)."""

    def __init__(self, url: str, *, pool_size: int = 20) -> None:
        self.url = normalise_url(url)
        parsed = make_url(self.url)
        self.is_sqlite = parsed.get_backend_name() == 'sqlite'
        self.is_postgres = parsed.get_backend_name() == 'postgresql'
        if self.is_sqlite:
            self.read_engine = _sqlite_engine(self.url, immediate=False)
            self.write_engine = _sqlite_engine(self.url, immediate=True)
        else:
            # No pre-ping (it costs a round trip per checkout); connections are recycled instead. Reads run
            # in autocommit: one round trip per statement instead of BEGIN, SELECT, ROLLBACK.
            self.write_engine = create_engine(
                self.url, pool_size=pool_size, max_overflow=pool_size, pool_recycle=1800, json_serializer=dumps_json
            )
            self.read_engine = self.write_engine.execution_options(isolation_level='AUTOCOMMIT')
        # PostgreSQL's hot read path (GET score) also has an asyncio engine: the query's round trip is
        # awaited on the event loop instead of blocking it or queueing for a thread. Its pool lets a
        # newcomer take a freed connection ahead of earlier waiters, so callers queue first on a FIFO
        # semaphore (`async_read_slot`) of the pool's size: under load, latency stays even, not bimodal.
        self.async_read_engine: AsyncEngine | None = None
        self.async_read_slot = asyncio.Semaphore(_ASYNC_READ_POOL)
        if self.is_postgres:
            self.async_read_engine = create_async_engine(
                self.url, pool_size=_ASYNC_READ_POOL, max_overflow=0, pool_recycle=1800, isolation_level='AUTOCOMMIT'
            )
        self._read = sessionmaker(self.read_engine, expire_on_commit=False)
        self._write = sessionmaker(self.write_engine, expire_on_commit=False)

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._read() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A transaction that commits on success and rolls back on any exception."""
        with self._write() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.write_engine.dispose()
        if self.is_sqlite:
            self.read_engine.dispose()

    async def adispose(self) -> None:
        """Close every pool, the asyncio one included (call from the loop that used it)."""
        if self.async_read_engine is not None:
            await self.async_read_engine.dispose()
        self.dispose()


def dumps_json(value: Any) -> str:
    """A JSON column's text, the same on SQLite and PostgreSQL: a NaN or ±Infinity anywhere becomes null."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(_finite_only(value), allow_nan=False)


def _finite_only(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_only(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_only(v) for v in value]
    return value


def normalise_url(url: str) -> str:
    """Accept a bare path as a SQLite file and `postgresql://` as psycopg 3."""
    if '://' not in url:
        return f'sqlite:///{url}'
    if url.startswith('postgresql://') or url.startswith('postgres://'):
        return 'postgresql+psycopg://' + url.split('://', 1)[1]
    return url


def _sqlite_engine(url: str, *, immediate: bool) -> Engine:
    engine = create_engine(
        url, connect_args={'timeout': 30, 'check_same_thread': False}, pool_size=20, max_overflow=20, json_serializer=dumps_json
    )

    @event.listens_for(engine, 'connect')
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (pysqlite's own is deferred and late)
        cur = dbapi_conn.cursor()
        cur.execute('PRAGMA journal_mode=WAL')
        cur.execute('PRAGMA busy_timeout=30000')
        cur.execute('PRAGMA foreign_keys=ON')
        cur.execute('PRAGMA synchronous=NORMAL')
        cur.close()

    @event.listens_for(engine, 'begin')
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql('BEGIN IMMEDIATE' if immediate else 'BEGIN')

    return engine


class AlertRow(Base):
    """A degradation alert (`sensei_eval.production.alerts`): stored when it fires, updated when it gains a metric or
    resolves. The id is derived from the run that fired it, so every process (and a restart replaying the
    evaluations) computes the same id and the row is written once."""

    __tablename__ = 'alerts'

    alert_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    agent: Mapped[str] = mapped_column(String(255), index=True)
    prompt_version: Mapped[str] = mapped_column(String(255))
    baseline_version: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16), index=True)
    metrics: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    message: Mapped[str] = mapped_column(String(2000))
    fired_at_us: Mapped[int] = mapped_column(BigInteger, index=True)
    resolved_at_us: Mapped[int | None] = mapped_column(BigInteger)
    webhook_status: Mapped[str | None] = mapped_column(String(500))
