"""Degradation alerts: `GET /api/v1/alerts` (newest first; filters `status`, `agent`) and the same events live on
the WebSocket's `alerts` channel. Alerts are raised by `service.alerting` from finished evaluations."""

from __future__ import annotations

import asyncio
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import select

from sensei_eval.production.alerts import MetricChange
from sensei_eval.service.schemas import Limit, Offset
from sensei_eval.service.state import ServiceState, State
from sensei_eval.service.store import AlertRow

__all__ = ('AlertOut', 'router')

router = APIRouter(tags=['alerts'])


class AlertOut(BaseModel):
    alert_id: str
    agent: str
    prompt_version: str
    baseline_version: str
    status: Literal['firing', 'resolved']
    metrics: list[MetricChange]
    message: str
    fired_at_us: int
    resolved_at_us: int | None
    webhook_status: str | None


@router.get('/api/v1/alerts', response_model=list[AlertOut])
async def list_alerts(
    state: State,
    status: Literal['firing', 'resolved'] | None = None,
    agent: str | None = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> list[AlertOut]:
    return await asyncio.to_thread(_read, state, status, agent, limit, offset)


def _read(state: ServiceState, status: str | None, agent: str | None, limit: int, offset: int) -> list[AlertOut]:
    query = select(AlertRow).order_by(AlertRow.fired_at_us.desc(), AlertRow.alert_id)
    if status is not None:
        query = query.where(AlertRow.status == status)
    if agent is not None:
        query = query.where(AlertRow.agent == agent)
    with state.store.read() as db:
        rows = db.scalars(query.limit(limit).offset(offset)).all()
        return [AlertOut.model_validate(row, from_attributes=True) for row in rows]
