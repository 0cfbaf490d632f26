"""The failure-mode judges over a session: `POST /api/v1/sessions/{id}/evaluate` (body
`{"judges": [...], "force": bool}`, the same async pattern as scoring) and `GET …/evaluation`
(the latest evaluation).

With no `judges` the request runs the service's judges (`serve --judges`, default `core,checks`, the CLI's
default), so a run judged here gets the verdict `sensei-eval judge` gives it. The names are resolved (groups
expanded) before the row is stored: the evaluation records exactly which judges it asked for.

`evaluators`, the old name of `judges`, is still accepted for one release: the answer then carries a
`Deprecation: true` header and a `Warning` header naming the new field, and the service logs it."""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException, Response

from sensei_eval.evaluators.registry import UnknownJudgeError, resolve_names
from sensei_eval.service import repository
from sensei_eval.service.schemas import EvaluateRequest, EvaluationOut, SessionId
from sensei_eval.service.state import State, Writer

__all__ = ('router',)

router = APIRouter(prefix='/api/v1/sessions', tags=['evaluation'])
log = logging.getLogger(__name__)

# What an answer to a request naming `evaluators` (the old name of `judges`) says about it, as HTTP headers.
_OLD_FIELD_HEADERS = {'Deprecation': 'true', 'Warning': '299 - "evaluators is deprecated: name the judges in judges"'}


@router.post('/{session_id}/evaluate', response_model=EvaluationOut, status_code=202)
def evaluate_session(
    session_id: SessionId, response: Response, user: Writer, state: State, body: EvaluateRequest | None = None
) -> EvaluationOut:
    settings = state.settings
    if body is not None and body.evaluators is not None:
        response.headers.update(_OLD_FIELD_HEADERS)
        log.warning('POST /sessions/%s/evaluate named its judges in evaluators, the old name of judges', session_id)
    asked = body.requested() if body else None
    try:
        names = resolve_names(asked or settings.judges)
    except UnknownJudgeError as e:
        field = 'evaluators' if body and body.judges is None else 'judges'
        raise HTTPException(422, detail=[{'loc': ['body', field], 'msg': str(e), 'type': 'value_error'}]) from None
    result = repository.request_evaluation(
        state.store, session_id, force=bool(body and body.force), user=user, judges=names, owner=settings.worker_id
    )
    if result.created:
        state.wake()
    response.status_code = result.http_status
    assert result.evaluation is not None
    return result.evaluation


@router.get('/{session_id}/evaluation', response_model=EvaluationOut)
def get_evaluation(session_id: SessionId, state: State) -> EvaluationOut:
    return repository.get_latest_evaluation(state.store, session_id)
