"""`GET /api/v1/health`: this process's worker, circuit breaker, judge model and WebSocket subscribers.

The route needs no token (load balancers call it), so what it says depends on who asks: a caller
that has not authenticated, on a service that requires it, learns only that the service is up. The
model is named with its URL redacted (`models.redact_url`: no password or key ever leaves).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from sensei_eval.service.guard import ANONYMOUS
from sensei_eval.service.state import State

__all__ = ('router',)

router = APIRouter(prefix='/api/v1', tags=['service'])


@router.get('/health')
def health(state: State, request: Request) -> dict[str, Any]:
    if state.settings.auth_required and getattr(request.state, 'user', ANONYMOUS) == ANONYMOUS:
        return {'status': 'ok'}
    worker = state.worker
    return {
        'status': 'ok',
        'worker_id': state.settings.worker_id,
        'in_flight': worker.in_flight if worker else 0,
        'breaker': worker.breaker.state if worker else None,
        'model': state.judge_model.name if state.judge_model else None,  # its URL redacted when it was made
        'judges': list(state.settings.judges),  # what an evaluation request naming none runs
        'websocket_subscribers': state.hub.subscriber_count(),
    }
