"""How `serve` runs the app under uvicorn: its own proxy-header handling off, and deadlines on slow clients.

uvicorn bounds a request's head by size (h11's 16 KiB incomplete-event limit) and an idle keep-alive
connection by time (`timeout_keep_alive`), but not a client that sends its head or its body slowly: one
header line every few seconds holds a connection (and a file descriptor) for as long as the client likes,
and a thousand such clients exhaust the process's descriptors, so health checks fail. `DeadlineProtocol`
is uvicorn's own HTTP protocol (httptools or h11, whichever it would pick) with two deadlines:

* **head** — a new connection, or a kept-alive one after its last response, must deliver a complete request
  line and headers within `header_timeout_s` (`serve --header-timeout`, default 10 s), else it is closed;
* **body** — once the head is in, the whole body must arrive within `body_timeout_s` (`--body-timeout`,
  default 60 s), else it is closed.

The app's own time (a handler running) is not limited here. A WebSocket, once upgraded, is its own protocol
and is left alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sensei_eval.service.config import ServiceSettings

__all__ = ('deadline_protocol', 'run_server')


def deadline_protocol(header_timeout_s: float, body_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with the head and body deadlines of the module docstring."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    base: Any = AutoHTTPProtocol

    class DeadlineProtocol(base):  # type: ignore[misc]
        _deadline: asyncio.TimerHandle | None = None
        _timed_cycle: object = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._arm(header_timeout_s)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            cycle = getattr(self, 'cycle', None)
            if cycle is None or cycle.response_complete:
                return  # waiting for a head: its deadline runs
            if cycle.more_body:
                if cycle is not self._timed_cycle:  # a new request's head is in: now its body has a deadline
                    self._timed_cycle = cycle
                    self._arm(body_timeout_s)
            elif self._deadline is not None:
                self._deadline.cancel()  # the whole request is in: the app's time is its own
                self._deadline = None

        def on_response_complete(self) -> None:
            self._arm(header_timeout_s)  # the next request's head (pipelined ones re-arm through data_received)
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

        def _arm(self, seconds: float) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _expired(self) -> None:
            self._deadline = None
            transport = getattr(self, 'transport', None)
            if transport is None or transport.is_closing() or transport.get_protocol() is not self:
                return  # closed already, or upgraded to a WebSocket
            cycle = getattr(self, 'cycle', None)
            if cycle is not None and not cycle.response_complete and not cycle.more_body:
                return  # the request is in and the app is answering
            transport.close()

    return DeadlineProtocol


def run_server(app: Any, settings: ServiceSettings, *, host: str, port: int, log_level: str) -> None:
    """Serve `app` on `host:port` until stopped (SIGINT/SIGTERM), with the deadlines above."""
    import uvicorn

    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=int(settings.shutdown_grace_s) + 5,
        # The app reads X-Forwarded-For itself, and only from --trusted-proxy addresses (guard.ProxyPeer);
        # uvicorn's own default would believe it from any loopback client.
        proxy_headers=False,
        http=deadline_protocol(settings.header_timeout_s, settings.body_timeout_s),
        timeout_keep_alive=5,
    )
