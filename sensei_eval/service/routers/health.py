"""`GET /api/v1/health`: this process's worker, circuit breaker, judge model and WebSocket subscribers."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..state import State

__all__ = ('router',)

router = APIRouter(prefix='/api/v1', tags=['service'])


@router.get('/health')
def health(state: State) -> dict[str, Any]:
    worker = state.worker
    return {
        'status': 'ok',
        'worker_id': state.settings.worker_id,
        'in_flight': worker.in_flight if worker else 0,
        'breaker': worker.breaker.state if worker else None,
        'model': state.judge_model.name if state.judge_model else None,
        'websocket_subscribers': state.hub.subscriber_count(),
    }
