"""Sessions: ingest (`POST /api/v1/sessions`), change status (`PATCH …/{id}`), list and read.

A session that is (or turns) `completed`, from an agent listed in `auto_score_agents`, is scored at
once; that is fail-open: if the scoring cannot be queued the session is still stored and the answer
says why in `auto_score_error`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from sensei_eval.service import repository
from sensei_eval.service.schemas import (
    Limit,
    Offset,
    SessionCreate,
    SessionCreated,
    SessionDetail,
    SessionId,
    SessionPage,
    SessionUpdate,
)
from sensei_eval.service.state import State, Writer, auto_score
from sensei_eval.service.store import SessionStatus

__all__ = ('router',)

router = APIRouter(prefix='/api/v1/sessions', tags=['sessions'])


@router.post('', status_code=201, response_model=SessionCreated)
def create_session(body: SessionCreate, user: Writer, request: Request, state: State) -> SessionCreated:
    warnings = _sanitize_warnings(getattr(request.state, 'sanitized', []))
    row = repository.create_session(state.store, body.record(), body.status, body.agent, user, warnings)
    auto, error = auto_score(state, row.session_id, row.status, row.agent)
    return SessionCreated(
        session_id=row.session_id, status=SessionStatus(row.status), auto_score=auto, auto_score_error=error, warnings=warnings
    )


@router.patch('/{session_id}', response_model=SessionCreated)
def update_session(session_id: SessionId, body: SessionUpdate, user: Writer, state: State) -> SessionCreated:
    row, before = repository.update_session_status(state.store, session_id, body.status)
    auto, error = (None, None)
    if before != row.status:
        auto, error = auto_score(state, row.session_id, row.status, row.agent)
    return SessionCreated(session_id=row.session_id, status=SessionStatus(row.status), auto_score=auto, auto_score_error=error)


@router.get('', response_model=SessionPage)
def list_sessions(
    state: State,
    limit: Limit = 50,
    offset: Offset = 0,
    agent: Annotated[str | None, Query(max_length=255)] = None,
    status: SessionStatus | None = None,
) -> SessionPage:
    return repository.list_sessions(state.store, limit=limit, offset=offset, agent=agent, status=status.value if status else None)


@router.get('/{session_id}', response_model=SessionDetail)
def get_session(session_id: SessionId, state: State) -> SessionDetail:
    return repository.get_session(state.store, session_id)


def _sanitize_warnings(paths: list[str]) -> list[str]:
    """The session's warnings for text the guard replaced (lone surrogates, NULs → U+FFFD)."""
    if not paths:
        return []
    shown = ', '.join(p[:200] for p in paths[:20]) + (f' and {len(paths) - 20} more' if len(paths) > 20 else '')
    return [f'text replaced: lone surrogate or NUL characters became U+FFFD at {shown}']
