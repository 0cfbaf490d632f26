"""The TARSy session-scoring service (seeds 000, 001, 003): API, store, background scoring, live events.

`create_app(ServiceSettings(...), judge_model)` builds the FastAPI app; `python -m sensei_eval serve`
runs it under uvicorn. Modules: `store` (tables, engines, status rules), `migrate` + `migrations/`
(Alembic, shipped in the package), `repository` (what each endpoint does to the store, seed 000's
status table), `scoring` (the background worker), `reliability` (retries, circuit breaker), `events`
(WebSocket channels), `api` (the app), `config` (settings), `schemas` (request/response bodies).
"""

from __future__ import annotations

from .api import create_app
from .config import ServiceSettings
from .migrate import downgrade, upgrade
from .store import JobStatus, SessionStatus, Store

__all__ = ('JobStatus', 'ServiceSettings', 'SessionStatus', 'Store', 'create_app', 'downgrade', 'upgrade')
