"""The session-scoring service: API, store, background scoring, live events, dashboard.

`create_app(ServiceSettings(...), judge_model)` builds the FastAPI app; `python -m sensei_eval serve`
runs it under uvicorn. Modules: `store` (tables, engines, status rules), `migrate` + `migrations/`
(Alembic, shipped in the package), `repository` (what each endpoint does to the store, the scoring
status table), `scoring` (the background worker), `reliability` (retries, circuit breaker), `events`
(WebSocket channels), `state` (what handlers share), `routers/` (one `APIRouter` per resource),
`errors` (error answers, body limit), `api` (assembles the app), `config` (settings), `schemas`
(request/response bodies), `dashboard/` (the browser pages and their read API).
"""

from __future__ import annotations

from sensei_eval.core.extras import requires_extra

# FastAPI, SQLAlchemy, Alembic, psycopg and uvicorn come with the "service" extra; without it, importing
# the service raises MissingExtraError (one line naming the pip command) instead of a bare ImportError.
with requires_extra('service', 'the scoring service'):
    import uvicorn  # noqa: F401  (`serve` runs the app under it)

    from sensei_eval.service.api import create_app
    from sensei_eval.service.config import ServiceSettings
    from sensei_eval.service.migrate import downgrade, upgrade
    from sensei_eval.service.store import JobStatus, SessionStatus, Store

__all__ = ('JobStatus', 'ServiceSettings', 'SessionStatus', 'Store', 'create_app', 'downgrade', 'upgrade')
