"""The failure-mode judges over a session: `POST /api/v1/sessions/{id}/evaluate` (body
`{"judges": [...], "force": bool}`, the same async pattern as scoring) and `GET …/evaluation`
(the latest evaluation).

With no `judges` (or the old name `evaluators`) the request runs the service's judges (`serve --judges`,
default `core,checks`, the CLI's default), so a run judged here gets the verdict `sensei-eval judge` gives
it. The names are resolved (groups expanded) before the row is stored: the evaluation records exactly
which judges it asked for."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response

from sensei_eval.evaluators.registry import UnknownJudgeError, resolve_names
from sensei_eval.service import repository
from sensei_eval.service.schemas import EvaluateRequest, EvaluationOut, SessionId
from sensei_eval.service.state import State, Writer

__all__ = ('router',)

router = APIRouter(prefix='/api/v1/sessions', tags=['evaluation'])


@router.post('/{session_id}/evaluate', response_model=EvaluationOut, status_code=202)
def evaluate_session(
    session_id: SessionId, response: Response, user: Writer, state: State, body: EvaluateRequest | None = None
) -> EvaluationOut:
    settings = state.settings
    asked = body.requested() if body else None
    try:
        names = resolve_names(asked or settings.judges)
    except UnknownJudgeError as e:
        field = 'evaluators' if body and body.judges is None else 'judges'
        raise HTTPException(422, detail=[{'loc': ['body', field], 'msg': str(e), 'type': 'value_error'}]) from None
    result = repository.request_evaluation(
        state.store, session_id, force=bool(body and body.force), user=user, evaluators=names, owner=settings.worker_id
    )
    if result.created:
        state.wake()
    response.status_code = result.http_status
    assert result.evaluation is not None
    return result.evaluation


@router.get('/{session_id}/evaluation', response_model=EvaluationOut)
def get_evaluation(session_id: SessionId, state: State) -> EvaluationOut:
    return repository.get_latest_evaluation(state.store, session_id)
