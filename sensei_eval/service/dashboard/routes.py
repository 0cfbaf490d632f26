"""The dashboard's HTTP surface: its read endpoints under `/api/v1/dashboard`, and the pages at `/`.

`mount_dashboard(app)` adds both to an app built by `create_app`. The pages are one static HTML shell
plus vanilla JS modules and CSS shipped as package data (`static/`): no build step, no CDN, nothing
fetched at run time. Every HTML/JS/CSS response carries a strict Content-Security-Policy
(`script-src 'self'`, no inline script, no `eval`) — the second wall behind the JS, which writes
untrusted session text with `textContent` only, so a transcript containing `<script>` stays text.

Endpoints (read-only; writes go through the service's own API):

* `GET /api/v1/dashboard/sessions` — the list: filters `agent`, `status`, `min_score`, `max_score`,
  `scored`, `failure_mode`, `judge` (that judge failed), `failed`, `min_overall`/`max_overall` (0-1),
  `prompt_version`, `since`/`until` (YYYY-MM-DD), `q` (query id contains), `sort` (`date` | `score`),
  `order`, `limit`/`offset`; each row carries its latest evaluation (overall score, failure modes,
  failed judges) and, for alerts, its investigation score;
* `GET /api/v1/dashboard/sessions/{id}` — one session's page: record, numbered transcript steps,
  the latest evaluation with every judge's verdict, reasoning and cited steps, and (alerts) the
  latest scoring, score with its four-category breakdown, history;
* `GET /api/v1/dashboard/patterns` — pass rate per judge, failure rate per failure mode (with their
  denominators), failure rate per day/week (`bucket`) per agent or prompt version (`group`), the
  overall-score distribution, and the investigation scores' histogram, trend and missing tools;
  filters `agent`, `prompt_version`, `since`, `until`, `judge`; current criteria only; smoke results
  (embedded model) left out unless `include_smoke=true`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from sensei_eval.core.modes import MODES
from sensei_eval.evaluators.registry import resolve_names
from sensei_eval.service.dashboard import patterns, queries
from sensei_eval.service.dashboard.views import DashboardPage, PatternFilters, Patterns, SessionFilters, SessionView
from sensei_eval.service.schemas import SessionId
from sensei_eval.service.state import State

__all__ = ('CSP', 'STATIC_DIR', 'mount_dashboard', 'router')

STATIC_DIR = Path(str(resources.files(__package__ or 'sensei_eval.service.dashboard') / 'static'))

# No inline script or style, no eval, no plugins, no framing; fetch and WebSocket to this origin only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"
)
_SECURITY_HEADERS = {
    'Content-Security-Policy': CSP,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY',
    'Cache-Control': 'no-cache',
}

router = APIRouter(prefix='/api/v1/dashboard', tags=['dashboard'])


@router.get('/sessions', response_model=DashboardPage)
def dashboard_sessions(state: State, filters: Annotated[SessionFilters, Query()]) -> DashboardPage:
    if filters.failure_mode and filters.failure_mode not in MODES:
        known = ', '.join(MODES)
        raise HTTPException(
            422,
            detail=[{'loc': ['query', 'failure_mode'], 'msg': f'unknown failure mode; known: {known}', 'type': 'value_error'}],
        )
    return queries.list_sessions(state.store, filters)


@router.get('/sessions/{session_id}', response_model=SessionView)
def dashboard_session(session_id: SessionId, state: State) -> SessionView:
    view = queries.session_view(state.store, session_id)
    view.service_judges = resolve_names(state.settings.judges)  # what "Judge run" will run
    return view


@router.get('/patterns', response_model=Patterns)
def dashboard_patterns(state: State, filters: Annotated[PatternFilters, Query()]) -> Patterns:
    return patterns.patterns(state.store, state.settings.scorer, filters)


class _SecureStatic(StaticFiles):
    """Static files with the dashboard's security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(_SECURITY_HEADERS)
        return response


def _index() -> FileResponse:
    return FileResponse(STATIC_DIR / 'index.html', media_type='text/html', headers=_SECURITY_HEADERS)


def mount_dashboard(app: FastAPI) -> None:
    """Add the dashboard to a service app: its read API, the page at `/`, and `/static/dashboard/*`."""
    app.include_router(router)
    app.mount('/static/dashboard', _SecureStatic(directory=STATIC_DIR), name='dashboard-static')
    app.add_api_route('/', _index, methods=['GET'], include_in_schema=False, response_class=FileResponse)
