"""What the API does to the store: ingest sessions, request scorings and evaluations, read them back.

Each function is one transaction. `request_score` implements the scoring status table in one place:

| existing latest scoring | force_rescore | result |
|---|---|---|
| none | any | new `pending` row, 202 |
| completed / failed / timed_out / cancelled | false | that row, 200 |
| pending / in_progress | false | that row, 202 |
| completed / failed / timed_out / cancelled | true | new `pending` row, 202 |
| pending / in_progress | true | `ConflictError` (409) |

plus `SessionNotFoundError` (404) and `SessionNotTerminalError` (400) before any of that. Two requests
racing to create a row for one session cannot both succeed: the partial unique index rejects the
second insert, which then re-reads and answers as if it had arrived second. `request_evaluation` is
the same table for the failure-mode judges (`force` instead of `force_rescore`).

Both create the service's one kind of job (a `session_evaluations` row, run by the worker the same way); a
scoring is a job of the investigation judge, told apart by its `scoring` column (the judge's variant), so
"the latest scoring" and "the latest evaluation" each read only the jobs asked for their way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, TypeVar

from sqlalchemy import Dialect, Select, bindparam, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from sensei_eval.core.errors import SenseiError
from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators.investigation import JUDGE_OF_VARIANT
from sensei_eval.evaluators.investigation_prompts import PROMPT_HASH, STRUCTURED_PROMPT_HASH
from sensei_eval.service.previews import cut, query_preview_column
from sensei_eval.service.schemas import (
    EvaluationOut,
    ScoreOut,
    SessionDetail,
    SessionPage,
    SessionSummary,
    evaluation_out,
    score_out,
    session_query,
)
from sensei_eval.service.store import (
    ACTIVE_STATUSES,
    SESSION_TERMINAL_STATUSES,
    EvaluationRow,
    JobStatus,
    SessionRow,
    SessionStatus,
    Store,
    new_id,
    now_us,
)

__all__ = (
    'ConflictError',
    'RequestResult',
    'SessionNotFoundError',
    'SessionNotTerminalError',
    'create_session',
    'get_latest_evaluation',
    'get_latest_score',
    'get_latest_score_async',
    'get_session',
    'list_scores',
    'list_sessions',
    'request_evaluation',
    'request_score',
    'update_session_status',
)

T = TypeVar('T')

# Times a request re-reads after losing an insert race on the partial unique index (one is enough in
# practice; the loop guards against a row finishing between the failed insert and the re-read).
_RACE_RETRIES = 5


class SessionNotFoundError(SenseiError, LookupError):
    pass


class SessionNotTerminalError(SenseiError, ValueError):
    pass


class ConflictError(SenseiError, RuntimeError):
    def __init__(self, message: str, active_id: str) -> None:
        super().__init__(message)
        self.active_id = active_id


@dataclass(frozen=True)
class RequestResult:
    """A scoring/evaluation request's answer: whether a row was created, and the row to return."""

    created: bool
    score: ScoreOut | None = None
    evaluation: EvaluationOut | None = None

    @property
    def http_status(self) -> int:
        row = self.score or self.evaluation
        assert row is not None
        return 202 if self.created or row.status.value in ACTIVE_STATUSES else 200


# ---------------------------------------------------------------------------------------------------
# Sessions


def create_session(
    store: Store,
    record: QueryRecord,
    status: SessionStatus,
    agent: str | None,
    user: str | None,
    warnings: list[str] | None = None,
) -> SessionRow:
    now = now_us()
    row = SessionRow(
        session_id=new_id(),
        query_id=record.query_id,
        agent=agent,
        status=status.value,
        record=record.model_dump(mode='json'),
        created_by=user,
        warnings=warnings or None,
        created_at_us=now,
        updated_at_us=now,
    )
    with store.write() as db:
        db.add(row)
    return row


def update_session_status(store: Store, session_id: str, status: SessionStatus) -> tuple[SessionRow, str]:
    """Set a session's status; returns the row and the status it had before."""
    with store.write() as db:
        row = db.get(SessionRow, session_id)
        if row is None:
            raise SessionNotFoundError(f'session {session_id} not found')
        before = row.status
        row.status = status.value
        row.updated_at_us = now_us()
    return row, before


# What a session list shows of each row: the columns, and of the stored record only a preview of its query
# (cut by the database, `previews`: a page of 50 multi-megabyte records is never read whole to list them).
_LISTED = (
    SessionRow.session_id,
    SessionRow.query_id,
    SessionRow.agent,
    SessionRow.status,
    SessionRow.created_at_us,
    SessionRow.updated_at_us,
    query_preview_column().label('query'),
)


def list_sessions(store: Store, *, limit: int, offset: int, agent: str | None = None, status: str | None = None) -> SessionPage:
    with store.read() as db:
        query = select(*_LISTED)
        count = select(func.count()).select_from(SessionRow)
        if agent is not None:
            query, count = query.where(SessionRow.agent == agent), count.where(SessionRow.agent == agent)
        if status is not None:
            query, count = query.where(SessionRow.status == status), count.where(SessionRow.status == status)
        total = db.scalar(count) or 0
        ordered = query.order_by(SessionRow.created_at_us.desc(), SessionRow.session_id)
        rows = list(db.execute(ordered.limit(limit).offset(offset)))
        latest, completed = _latest_scores(db, [r.session_id for r in rows])
        items = [_summary(r, latest.get(r.session_id), completed.get(r.session_id), query=r.query or '') for r in rows]
    return SessionPage(items=items, total=total, limit=limit, offset=offset)


def get_session(store: Store, session_id: str) -> SessionDetail:
    with store.read() as db:
        row = db.get(SessionRow, session_id)
        if row is None:
            raise SessionNotFoundError(f'session {session_id} not found')
        latest, completed = _latest_scores(db, [session_id])
        evaluation = _latest_evaluation(db, session_id)
        summary = _summary(row, latest.get(session_id), completed.get(session_id), full=True)
        latest_out = score_out(latest[session_id]) if session_id in latest else None
    return SessionDetail(
        **summary.model_dump(),
        record=row.record,
        created_by=row.created_by,
        warnings=list(row.warnings or []),
        latest_scoring=latest_out,
        latest_evaluation=evaluation_out(evaluation) if evaluation is not None else None,
    )


def get_latest_evaluation(store: Store, session_id: str) -> EvaluationOut:
    """The session's latest failure-mode evaluation of any status; 404 if none."""
    with store.read() as db:
        row = _latest_evaluation(db, session_id)
        if row is None:
            raise SessionNotFoundError(f'session {session_id} not found or not evaluated')
        return evaluation_out(row)


def _latest_evaluation(db: Session, session_id: str) -> EvaluationRow | None:
    """The one query for a session's latest evaluation (newest trigger first)."""
    query = (
        select(EvaluationRow)
        .where(EvaluationRow.session_id == session_id, EvaluationRow.scoring.is_(None))
        .order_by(EvaluationRow.started_at_us.desc(), EvaluationRow.evaluation_id)
        .limit(1)
    )
    return db.scalars(query).first()


# ---------------------------------------------------------------------------------------------------
# Scores


def get_latest_score(store: Store, session_id: str) -> ScoreOut:
    """The session's latest scoring of any status (what GET …/score returns); 404 if none.

    The hot read path (dashboards poll it): one statement, compiled once per dialect, run on a pooled
    driver connection — no `select()` built per call, no ORM, no transaction around it (SQLite runs
    the lone SELECT in autocommit, so no `BEGIN`/`ROLLBACK` round trips); a second statement only
    when there is no scoring, to tell 404 "not found" from "not scored".
    """
    statement = _latest_score_sql(store.read_engine.dialect)
    conn = store.read_engine.raw_connection()
    try:
        cursor = conn.cursor()
        try:
            cursor.execute(statement.sql, statement.params(session_id))
            rows = cursor.fetchall()
            if not rows:
                exists = _session_exists_sql(store.read_engine.dialect)
                cursor.execute(exists.sql, exists.params(session_id))
                raise _not_scored(session_id, cursor.fetchone() is not None)
        finally:
            cursor.close()
    finally:
        conn.close()
    return _score_from_rows(rows)


async def get_latest_score_async(store: Store, session_id: str) -> ScoreOut:
    """`get_latest_score` on the asyncio engine (PostgreSQL, autocommit): the round trip is awaited, not blocking."""
    engine = store.async_read_engine
    assert engine is not None
    statement = _latest_score_sql(engine.dialect)
    async with store.async_read_slot, engine.connect() as conn:
        # the driver's own asyncio connection (psycopg, autocommit): no result adaptation per row
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        rows = await (await driver.execute(statement.sql, statement.params(session_id))).fetchall()
        if not rows:
            exists = _session_exists_sql(engine.dialect)
            found = await (await driver.execute(exists.sql, exists.params(session_id))).fetchone()
            raise _not_scored(session_id, found is not None)
    return _score_from_rows(rows)


@dataclass(frozen=True)
class _Compiled:
    """A statement compiled for one dialect: its SQL and how to bind the session id (the rest are constants)."""

    sql: str
    names: tuple[str, ...]  # positional parameters in order, or () for named ones
    defaults: dict[str, Any]

    def params(self, session_id: str) -> Any:
        if self.names:
            return tuple(session_id if n == 'session_id' else self.defaults[n] for n in self.names)
        return {**self.defaults, 'session_id': session_id}

    @classmethod
    def of(cls, statement: Select[Any], dialect: Dialect) -> _Compiled:
        compiled = statement.compile(dialect=dialect)
        defaults = compiled.construct_params({'session_id': ''}) or {}
        names = tuple(compiled.positiontup or ()) if compiled.positional else ()
        return cls(str(compiled), names, dict(defaults))


# What a scoring's API answer reads of its job row, in the order the latest-score statement returns them
# (never the report: it holds the whole session, and dashboards poll this).
_SCORE_COLUMNS = (
    'evaluation_id', 'session_id', 'status', 'prompt_hash', 'total_score', 'error_message', 'triggered_by',
    'started_at_us', 'completed_at_us', 'scoring', 'model', 'smoke', 'raw_output', 'score_detail',
)  # fmt: skip
_compiled: dict[tuple[str, str], _Compiled] = {}


def _score_columns() -> list[Any]:
    return [EvaluationRow.__table__.c[name] for name in _SCORE_COLUMNS]


def _latest_score_sql(dialect: Dialect) -> _Compiled:
    """The session's newest scoring (through the session index)."""
    key = ('latest_score', dialect.name + '+' + str(dialect.driver))
    found = _compiled.get(key)
    if found is None:
        jobs = EvaluationRow.__table__
        statement = (
            select(*_score_columns())
            .where(jobs.c.session_id == bindparam('session_id'), jobs.c.scoring.is_not(None))
            .order_by(jobs.c.started_at_us.desc(), jobs.c.evaluation_id)
            .limit(1)
        )
        found = _compiled[key] = _Compiled.of(statement, dialect)
    return found


def _session_exists_sql(dialect: Dialect) -> _Compiled:
    key = ('session_exists', dialect.name + '+' + str(dialect.driver))
    found = _compiled.get(key)
    if found is None:
        statement = select(SessionRow.session_id).where(SessionRow.session_id == bindparam('session_id'))
        found = _compiled[key] = _Compiled.of(statement, dialect)
    return found


def _score_from_rows(rows: Sequence[Sequence[Any]]) -> ScoreOut:
    """`ScoreOut` from the latest-score statement's row (the scoring's columns)."""
    row = SimpleNamespace(**dict(zip(_SCORE_COLUMNS, rows[0], strict=True)))
    if isinstance(row.score_detail, str):  # a JSON column as SQLite's driver returns it
        row.score_detail = json.loads(row.score_detail)
    return score_out(row)


def _not_scored(session_id: str, exists: bool) -> SessionNotFoundError:
    return SessionNotFoundError(f'session {session_id} has not been scored' if exists else f'session {session_id} not found')


def list_scores(store: Store, session_id: str) -> list[ScoreOut]:
    """Every scoring of a session, newest first."""
    with store.read() as db:
        if db.get(SessionRow, session_id) is None:
            raise SessionNotFoundError(f'session {session_id} not found')
        query = (
            select(*_score_columns())
            .where(EvaluationRow.session_id == session_id, EvaluationRow.scoring.is_not(None))
            .order_by(EvaluationRow.started_at_us.desc())
        )
        return [score_out(r) for r in db.execute(query)]


def request_score(store: Store, session_id: str, *, force: bool, user: str, variant: str, owner: str) -> RequestResult:
    """The scoring status table (see the module docstring): a job of the investigation judge of `variant`."""
    prompt_hash = STRUCTURED_PROMPT_HASH if variant == 'structured' else PROMPT_HASH

    def make(session_id: str, started: int) -> EvaluationRow:
        return EvaluationRow(
            evaluation_id=new_id(),
            session_id=session_id,
            judges=[JUDGE_OF_VARIANT[variant]],
            scoring=variant,
            prompt_hash=prompt_hash,
            triggered_by=user,
            status=JobStatus.PENDING.value,
            started_at_us=started,
            owner=owner,
        )

    def answer(db: Session, row: EvaluationRow, created: bool) -> RequestResult:
        return RequestResult(created=created, score=score_out(row))

    return _request(store, True, session_id, force, 'force_rescore', make, answer)


def request_evaluation(store: Store, session_id: str, *, force: bool, user: str, judges: list[str], owner: str) -> RequestResult:
    def make(session_id: str, started: int) -> EvaluationRow:
        return EvaluationRow(
            evaluation_id=new_id(),
            session_id=session_id,
            judges=judges,
            status=JobStatus.PENDING.value,
            triggered_by=user,
            started_at_us=started,
            owner=owner,
        )

    def answer(db: Session, row: EvaluationRow, created: bool) -> RequestResult:
        return RequestResult(created=created, evaluation=evaluation_out(row))

    return _request(store, False, session_id, force, 'force', make, answer)


def _request(
    store: Store,
    scoring: bool,
    session_id: str,
    force: bool,
    force_name: str,
    make: Callable[[str, int], EvaluationRow],
    answer: Callable[[Session, EvaluationRow, bool], RequestResult],
) -> RequestResult:
    """A scoring (`scoring`) or an evaluation asked for: the status table over the jobs asked for that way."""
    kind = 'scoring' if scoring else 'evaluation'
    asked_so = EvaluationRow.scoring.is_not(None) if scoring else EvaluationRow.scoring.is_(None)
    for _ in range(_RACE_RETRIES):
        try:
            with store.write() as db:
                session = db.get(SessionRow, session_id)
                if session is None:
                    raise SessionNotFoundError(f'session {session_id} not found')
                if SessionStatus(session.status) not in SESSION_TERMINAL_STATUSES:
                    raise SessionNotTerminalError(
                        f'session {session_id} is {session.status}: only a finished session '
                        '(completed, failed, cancelled or timed_out) can be scored'
                    )
                latest = db.scalars(
                    select(EvaluationRow)
                    .where(EvaluationRow.session_id == session_id, asked_so)
                    .order_by(EvaluationRow.started_at_us.desc())
                    .limit(1)
                ).first()
                if latest is not None and latest.status in ACTIVE_STATUSES:
                    if force:
                        raise ConflictError(
                            f'{force_name} refused: {kind} {latest.job_id} of session {session_id} is still '
                            f'{latest.status}; wait for it to finish',
                            latest.job_id,
                        )
                    return answer(db, latest, False)
                if latest is not None and not force:
                    return answer(db, latest, False)
                started = now_us() if latest is None else max(now_us(), latest.started_at_us + 1)
                row = make(session_id, started)
                db.add(row)
                db.flush()
                return answer(db, row, True)
        except IntegrityError:
            continue  # another request created the active row first: answer from it on the next pass
    raise RuntimeError(f'could not create or read the {kind} of session {session_id}: the store kept refusing the insert')


def _latest_scores(db: Session, session_ids: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per session: its latest scoring (its score columns), and its latest completed one."""
    latest: dict[str, Any] = {}
    completed: dict[str, Any] = {}
    if not session_ids:
        return latest, completed
    rows = db.execute(
        select(*_score_columns())
        .where(EvaluationRow.session_id.in_(session_ids), EvaluationRow.scoring.is_not(None))
        .order_by(EvaluationRow.started_at_us.desc())
    )
    for row in rows:
        latest.setdefault(row.session_id, row)
        if row.status == JobStatus.COMPLETED.value:
            completed.setdefault(row.session_id, row)
    return latest, completed


def _summary(row: Any, latest: Any, completed: Any, *, full: bool = False, query: str | None = None) -> SessionSummary:
    """A session's summary from its row: a `SessionRow` (its full query), or a listed row of `_LISTED` with the
    preview of its query given as `query` (cut to `previews.PREVIEW_CHARS`); its latest completed score with
    the model's raw answer only when `full` (one session's page, not a list)."""
    score = None
    if completed is not None:
        score = score_out(completed, with_raw=full)
    text, truncated = (session_query(row), False) if query is None else cut(query)
    return SessionSummary(
        session_id=row.session_id,
        query_id=row.query_id,
        query=text,
        query_truncated=truncated,
        agent=row.agent,
        status=SessionStatus(row.status),
        created_at_us=row.created_at_us,
        updated_at_us=row.updated_at_us,
        scoring_status=latest.status if latest is not None else 'not_scored',
        score=score,
    )
