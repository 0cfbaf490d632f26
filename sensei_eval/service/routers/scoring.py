"""The investigation score of a session: request it, read the latest, read the history.

`POST /api/v1/scoring/sessions/{id}/score` (body `{"force_rescore": bool}`, optional), implemented in
`repository.request_score`: 202 when a scoring is created or still active, 200 with an existing
finished one, 400 for a session not yet finished, 404, 409 for `force_rescore` while one is active.
`POST /api/v1/sessions/{id}/score` is the same operation under the session's path.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.routing import Route

from sensei_eval.core.sanitize import MAX_ID_LENGTH
from sensei_eval.service import repository
from sensei_eval.service.schemas import ScoreOut, ScoreRequest, SessionId
from sensei_eval.service.state import ServiceState, State, Writer

__all__ = ('FAST_GET_SCORE', 'router')

router = APIRouter(tags=['scoring'])

_SCORE_RESPONSES: dict[int | str, dict[str, str]] = {
    200: {'description': 'An existing finished scoring (completed, failed, timed_out, cancelled)'},
    400: {'description': 'The session is not finished'},
    404: {'description': 'No such session'},
    409: {'description': 'force_rescore while a scoring is pending or in progress'},
}


def _score(state: ServiceState, session_id: str, response: Response, user: str, body: ScoreRequest | None) -> ScoreOut:
    result = repository.request_score(
        state.store,
        session_id,
        force=bool(body and body.force_rescore),
        user=user,
        variant=state.settings.scorer,
        owner=state.settings.worker_id,
    )
    if result.created:
        state.wake()
    response.status_code = result.http_status
    assert result.score is not None
    return result.score


@router.post('/api/v1/scoring/sessions/{session_id}/score', response_model=ScoreOut, status_code=202, responses=_SCORE_RESPONSES)
def score_session(
    session_id: SessionId, response: Response, user: Writer, state: State, body: ScoreRequest | None = None
) -> ScoreOut:
    return _score(state, session_id, response, user, body)


@router.post('/api/v1/sessions/{session_id}/score', response_model=ScoreOut, status_code=202, responses=_SCORE_RESPONSES)
def score_session_alias(
    session_id: SessionId, response: Response, user: Writer, state: State, body: ScoreRequest | None = None
) -> ScoreOut:
    """The same operation under the session's own path."""
    return _score(state, session_id, response, user, body)


SCORE_PATH = '/api/v1/scoring/sessions/{session_id}/score'


@router.get(SCORE_PATH, response_model=ScoreOut, responses={404: {'description': 'No such session, or it has not been scored'}})
async def get_score(session_id: SessionId, request: Request) -> Response:
    """The latest scoring of any status. (Documents the route; `FAST_GET_SCORE` answers it.)"""
    return await _answer_score(request, session_id)


async def _get_score_fast(request: Request) -> Response:
    """GET score as a plain Starlette route, placed ahead of the FastAPI one: dashboards poll it, and
    FastAPI's per-request dependency solving and parameter validation cost more than the read itself.
    The id's length is checked here as `SessionId` would (the same 422)."""
    session_id: str = request.path_params['session_id']
    if len(session_id) > MAX_ID_LENGTH:
        error = {
            'type': 'string_too_long',
            'loc': ('path', 'session_id'),
            'input': session_id,
            'msg': f'String should have at most {MAX_ID_LENGTH} characters',
            'ctx': {'max_length': MAX_ID_LENGTH},
        }
        raise RequestValidationError([error])
    return await _answer_score(request, session_id)


async def _answer_score(request: Request, session_id: str) -> Response:
    # One statement, run on the event loop rather than hopping to the thread pool, serialised once (no
    # response_model re-validation); the state is read off the app, as `get_state` would.
    state: ServiceState = request.app.state.service
    if state.store.async_read_engine is not None:
        score = await repository.get_latest_score_async(state.store, session_id)
    else:  # SQLite: an in-process read of a few microseconds; a thread hop would cost more
        score = repository.get_latest_score(state.store, session_id)
    return Response(score.model_dump_json(), media_type='application/json')


# Mounted by `create_app` ahead of the routers (the first full match answers).
FAST_GET_SCORE = Route(SCORE_PATH, _get_score_fast, methods=['GET'])


@router.get('/api/v1/scoring/sessions/{session_id}/scores', response_model=list[ScoreOut])
def get_scores(session_id: SessionId, state: State) -> list[ScoreOut]:
    return repository.list_scores(state.store, session_id)
