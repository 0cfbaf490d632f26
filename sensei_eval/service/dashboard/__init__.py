"""The dashboard: sessions, scores and failure patterns in the browser, served by the service.

`mount_dashboard(app)` adds it to an app from `sensei_eval.service.create_app`: read endpoints under
`/api/v1/dashboard` (`routes`, over the queries in `queries`) and a page at `/` built from plain HTML,
vanilla JS modules and CSS in `static/` (package data; no build step, no network at run time). Live
scoring state comes from the service's WebSocket (`/api/v1/ws`); untrusted session text is only ever
written with `textContent`, behind a strict Content-Security-Policy.
"""

from __future__ import annotations

from sensei_eval.service.dashboard.routes import CSP, mount_dashboard

__all__ = ('CSP', 'mount_dashboard')
