"""The scoring service's store: SQLAlchemy 2 tables, the engine/session factory, and status rules.

Tables (created only by the Alembic migrations in `sensei_eval/service/migrations`, never by
`create_all`, so a database is always at a known revision):

* `sessions` — one ingested query history or TARSy investigation: the `QueryRecord` as JSON, the
  session's own status (pending … completed), the agent/chain that produced it, timestamps.
  `warnings` lists what ingest changed (text replaced by U+FFFD).
* `session_scores` — one row per scoring attempt (the session score's columns, the points of each rubric
  category as `breakdown_*` columns, plus the alternative approaches when the structured scorer
  ran). Re-scoring adds a row; history is kept; "the score" of a session is
  its latest *completed* row, "the scoring state" its latest row of any status. A partial unique index
  on `session_id` over the active statuses (`pending`, `in_progress`) makes two active scorings of one
  session impossible, whatever the API does.
* `score_missing_tools` — the missing tools of a completed scoring, one row per tool (name, rationale),
  written from the scorer's typed result for both variants.
* `session_evaluations` — runs of the failure-mode judges over a session; same lifecycle and the same
  partial unique index; the `RecordReport` is stored as JSON.
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
from sensei_eval.evaluators.investigation import CATEGORY_KEYS

__all__ = (
    'ACTIVE_STATUSES',
    'BREAKDOWN_COLUMNS',
    'JOB_TABLES',
    'SESSION_TERMINAL_STATUSES',
    'TERMINAL_STATUSES',
    'TRANSITIONS',
    'AlertRow',
    'Base',
    'EvaluationRow',
    'InvalidTransitionError',
    'JobMixin',
    'JobStatus',
    'MissingToolRow',
    'SamplingRow',
    'ScoreRow',
    'SessionRow',
    'SessionStatus',
    'Store',
    'TraceRow',
    'TraceSpanRow',
    'WorkerRow',
    'breakdown_of',
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


# The partial unique index's predicate: at most one row per session in these statuses.
_ACTIVE_PREDICATE = text("status IN ('pending', 'in_progress')")


def _one_active_per_session(name: str) -> Index:
    """The partial unique index that makes two active jobs of one session impossible (both job tables)."""
    return Index(name, 'session_id', unique=True, sqlite_where=_ACTIVE_PREDICATE, postgresql_where=_ACTIVE_PREDICATE)


class JobMixin:
    """The lifecycle columns scorings and evaluations share (what the worker reads and writes)."""

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


class ScoreRow(JobMixin, Base):
    __tablename__ = 'session_scores'

    score_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    variant: Mapped[str] = mapped_column(String(32))  # 'freeform' (two turns) or 'structured' (one JSON answer)
    prompt_hash: Mapped[str] = mapped_column(String(64))
    total_score: Mapped[int | None] = mapped_column(Integer)
    score_analysis: Mapped[str | None] = mapped_column(Text)
    missing_tools_analysis: Mapped[str | None] = mapped_column(Text)
    score_triggered_by: Mapped[str] = mapped_column(String(255))
    # points per rubric category (0-25), as the scorer's typed result gave them (migration 0003; NULL
    # where the answer did not give that category, and for scorings not completed)
    breakdown_logical_flow: Mapped[int | None] = mapped_column(Integer)
    breakdown_consistency: Mapped[int | None] = mapped_column(Integer)
    breakdown_tool_relevance: Mapped[int | None] = mapped_column(Integer)
    breakdown_synthesis_quality: Mapped[int | None] = mapped_column(Integer)
    # the structured scorer's alternative approaches (NULL for the freeform variant)
    alternative_approaches: Mapped[list[Any] | None] = mapped_column(JSON)
    # what the judge cost
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    # migration 0002: the model's raw answer (kept when parsing it failed) and the embedded-model mark
    raw_output: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index('ix_session_scores_session_id', 'session_id'),
        Index('ix_session_scores_prompt_hash', 'prompt_hash'),
        Index('ix_session_scores_total_score', 'total_score'),
        Index('ix_session_scores_status', 'status'),
        Index('ix_session_scores_session_status', 'session_id', 'status'),
        Index('ix_session_scores_status_started', 'status', 'started_at_us'),
        _one_active_per_session('uq_session_scores_one_active'),
    )

    @property
    def job_id(self) -> str:
        return self.score_id

    @property
    def breakdown(self) -> dict[str, int] | None:
        """The category points stored, keyed by category (None when no category has points)."""
        return breakdown_of(self)


# The rubric categories (`evaluators.investigation.CATEGORIES`) and the `session_scores` column holding each
# one's points: `breakdown_<key>`, declared on `ScoreRow` (migration 0003); a test holds the two equal.
BREAKDOWN_COLUMNS: dict[str, str] = {key: f'breakdown_{key}' for key in CATEGORY_KEYS}


def breakdown_of(row: Any) -> dict[str, int] | None:
    """The category points of a score row (ORM or Core row), from its `breakdown_*` columns."""
    found = {key: getattr(row, column) for key, column in BREAKDOWN_COLUMNS.items()}
    points = {key: int(value) for key, value in found.items() if value is not None}
    return points or None


class MissingToolRow(Base):
    __tablename__ = 'score_missing_tools'

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    score_id: Mapped[str] = mapped_column(String(36), ForeignKey('session_scores.score_id', ondelete='CASCADE'), index=True)
    tool_name: Mapped[str] = mapped_column(String(255), index=True)
    rationale: Mapped[str] = mapped_column(Text)


class EvaluationRow(JobMixin, Base):
    __tablename__ = 'session_evaluations'

    evaluation_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    evaluators: Mapped[list[str]] = mapped_column(JSON)
    triggered_by: Mapped[str] = mapped_column(String(255))
    overall_score: Mapped[float | None] = mapped_column()
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # the verdict model's summary of the report (`service.verdicts.VerdictSummary`; migration 0008)
    verdict: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    __table_args__ = (
        Index('ix_session_evaluations_session_id', 'session_id'),
        Index('ix_session_evaluations_status_started', 'status', 'started_at_us'),
        _one_active_per_session('uq_session_evaluations_one_active'),
    )

    @property
    def job_id(self) -> str:
        return self.evaluation_id


# The two kinds of job rows, in the order the worker claims them.
JOB_TABLES: tuple[type[JobMixin], ...] = (ScoreRow, EvaluationRow)


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
