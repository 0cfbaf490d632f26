"""The investigation score of a session: request it, read the latest, read the history.

`POST /api/v1/scoring/sessions/{id}/score` (body `{"force_rescore": bool}`, optional), implemented in
`repository.request_score`: 202 when a scoring is created or still active, 200 with an existing
finished one, 400 for a session not yet finished, 404, 409 for `force_rescore` while one is active.
`POST /api/v1/sessions/{id}/score` is the same operation under the session's path.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from .. import repository
from ..schemas import ScoreOut, ScoreRequest, SessionId
from ..state import ServiceState, State, Writer

__all__ = ('router',)

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


@router.get(
    '/api/v1/scoring/sessions/{session_id}/score',
    response_model=ScoreOut,
    responses={404: {'description': 'No such session, or it has not been scored'}},
)
async def get_score(session_id: SessionId, request: Request) -> Response:
    # The hot read path (dashboards poll it): one statement, run on the event loop rather than hopping
    # to the thread pool, serialised once (no response_model re-validation), and no dependency to
    # solve (the state is read off the app, as `get_state` would).
    state: ServiceState = request.app.state.service
    if state.store.async_read_engine is not None:
        score = await repository.get_latest_score_async(state.store, session_id)
    else:  # SQLite: an in-process read of a few microseconds; a thread hop would cost more
        score = repository.get_latest_score(state.store, session_id)
    return Response(score.model_dump_json(), media_type='application/json')


@router.get('/api/v1/scoring/sessions/{session_id}/scores', response_model=list[ScoreOut])
def get_scores(session_id: SessionId, state: State) -> list[ScoreOut]:
    return repository.list_scores(state.store, session_id)
