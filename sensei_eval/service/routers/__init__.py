"""The service's API, one `APIRouter` per resource; `api.create_app` includes them all.

`sessions` (ingest, list, read, status), `scoring` (the investigation score), `evaluation` (the
failure-mode judges), `alerts` (degradation alerts), `events` (the WebSocket), `health`. Each handler
gets the shared `ServiceState` through the `state.State` dependency.
"""

from __future__ import annotations

from fastapi import APIRouter

from sensei_eval.service.routers import alerts, evaluation, events, health, scoring, sessions

__all__ = ('ROUTERS',)

ROUTERS: tuple[APIRouter, ...] = (
    sessions.router,
    scoring.router,
    evaluation.router,
    alerts.router,
    health.router,
    events.router,
)
