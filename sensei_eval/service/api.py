"""The scoring service's app: `create_app(settings, judge_model)` assembles the FastAPI app.

Endpoints (OpenAPI docs at `/docs`), one router per resource in `routers/`:

* sessions — `POST /api/v1/sessions` ingests a session (a `QueryRecord`'s fields plus `status`, default
  `completed`, and `agent`); a completed session of an agent listed in `auto_score_agents` is scored at
  once, fail-open (`auto_score_error` says why it could not start). `PATCH /api/v1/sessions/{id}`
  changes the status. `GET /api/v1/sessions` (paged, filter by `agent` / `status`) and
  `GET /api/v1/sessions/{id}` (record, latest scoring and evaluation);
* scoring — `POST /api/v1/scoring/sessions/{id}/score` (202 created or active, 200 an existing finished
  one, 400 not finished, 404, 409 `force_rescore` while active), `GET …/score` (latest, any status),
  `GET …/scores` (history), and `POST /api/v1/sessions/{id}/score` for the same operation;
* evaluation — `POST /api/v1/sessions/{id}/evaluate` and `GET /api/v1/sessions/{id}/evaluation`;
* `GET /api/v1/health`, and the WebSocket `/api/v1/ws` (see `routers.events` and `events`);
* the dashboard (`dashboard`): its read API under `/api/v1/dashboard` and the page at `/`;
* traces — `POST /v1/traces` (OTLP/HTTP: agent traces become sessions, sampled ones are judged) and
  `GET /api/v1/traces[/{trace_id}]` (see `routers.traces`, `trace_ingest`).

Who is asking, from where, with what: `guard.Guard` (token, trusted proxy, `public_read`, the
WebSocket's `Origin`, `Content-Type: application/json` on writes, text sanitising, the audit log; see
its docstring). Request bodies over `max_body_bytes` get 413; a malformed body gets 422 whose `detail`
names each bad field (`loc`) without echoing the input. Ids (path and `query_id`) are at most
`sanitize.MAX_ID_LENGTH` characters and `offset` at most `schemas.MAX_OFFSET` (422 past either), and a
database error a request could still cause is a 422, so a bad request gets the same 4xx on SQLite and
PostgreSQL, never a 500 (`errors`).

Handlers that touch the store are plain `def`s: FastAPI runs them in its thread pool, so the event loop
stays free for the background worker and WebSocket fan-out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from sensei_eval.models.judge_model import JudgeModel, resolve_model
from sensei_eval.service.alerting import AlertWatcher
from sensei_eval.service.config import ServiceSettings
from sensei_eval.service.dashboard import mount_dashboard
from sensei_eval.service.errors import BodyLimit, install_error_handlers
from sensei_eval.service.events import PgEventRelay
from sensei_eval.service.guard import Guard, ProxyPeer
from sensei_eval.service.migrate import upgrade
from sensei_eval.service.routers import ROUTERS
from sensei_eval.service.routers.scoring import FAST_GET_SCORE
from sensei_eval.service.routers.traces import router as traces_router
from sensei_eval.service.scoring import ScoringWorker
from sensei_eval.service.state import ServiceState
from sensei_eval.service.store import normalise_url
from sensei_eval.service.trace_ingest import sweep_traces

__all__ = ('ServiceState', 'create_app')

log = logging.getLogger(__name__)

_DESCRIPTION = (
    'Scores investigation sessions with the investigation judge (a 0-100 score over four rubric categories, '
    'plus the tools the investigation missed) and runs the failure-mode judges over any session.'
)


def create_app(settings: ServiceSettings, judge_model: JudgeModel | None = None, *, migrate: bool = True) -> FastAPI:
    """The service app. `judge_model` None resolves the model at start-up (flag, env, embedded)."""
    state = ServiceState(settings, judge_model)
    lifespan = _lifespan(state, migrate)
    app = FastAPI(title='sensei-eval scoring service', version='1.0', description=_DESCRIPTION, lifespan=lifespan)
    app.state.service = state
    # A request passes ProxyPeer (the connection's own address, before any X-Forwarded-For), the body
    # limit, the guard (which reads the body), then the routes; the last middleware added is outermost.
    app.add_middleware(Guard, settings=settings, parsing=state.parsing)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(ProxyPeer, trusted_proxies=settings.trusted_proxies)
    install_error_handlers(app)
    app.router.routes.append(FAST_GET_SCORE)  # first: the hot read path skips FastAPI's per-request work
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(traces_router)
    mount_dashboard(app)
    return app


def _lifespan(state: ServiceState, migrate: bool) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings = state.settings
        if migrate:
            await asyncio.to_thread(upgrade, settings.db_url)
        owns_model = state.judge_model is None
        if state.judge_model is None:
            state.judge_model = await asyncio.to_thread(resolve_model)
        relay = None
        if state.store.is_postgres:
            relay = PgEventRelay(_libpq_url(settings.db_url), state.hub, asyncio.get_running_loop())
            await asyncio.to_thread(relay.start)
        state.worker = ScoringWorker(state.store, state.hub, state.judge_model, settings)
        orphans = await state.worker.start()
        if orphans:
            log.warning('marked %d orphaned job(s) of dead service processes as failed', len(orphans))
        sweeper = asyncio.create_task(_sweep_traces(state), name='trace-sweeper')
        state.alerts = AlertWatcher(state.store, state.hub, settings)
        await state.alerts.start()
        try:
            yield
        finally:
            await state.alerts.stop()
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
            await state.worker.stop()
            if relay is not None:
                await asyncio.to_thread(relay.stop)
            await state.store.adispose()
            if owns_model:
                state.judge_model.close()

    return lifespan


async def _sweep_traces(state: ServiceState) -> None:
    """Finish traces whose root span is overdue (`trace_ingest.sweep_traces`), every `trace_sweep_s`."""
    while True:
        await asyncio.sleep(state.settings.trace_sweep_s)
        try:
            outcomes = await asyncio.to_thread(sweep_traces, state.store, state.settings)
        except Exception as e:  # a store hiccup must not end the sweeps
            log.error('sweeping overdue traces failed: %s', e)
            continue
        if any(o.evaluations for o in outcomes):
            state.wake()


def _libpq_url(url: str) -> str:
    """The store URL as psycopg itself takes it (no SQLAlchemy driver suffix)."""
    rest = normalise_url(url).split('://', 1)[1]
    return f'postgresql://{rest}'
