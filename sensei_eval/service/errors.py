"""How the service answers what went wrong: exception handlers (one JSON shape per error, the same 4xx
on SQLite and PostgreSQL) and the request-body size limit (413)."""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, SQLAlchemyError

from sensei_eval.core.errors import field_path
from sensei_eval.service.asgi import ASGIApp, Message, Receive, Scope, Send
from sensei_eval.service.repository import ConflictError, SessionNotFoundError, SessionNotTerminalError

__all__ = ('BodyLimit', 'install_error_handlers')

log = logging.getLogger(__name__)
# The guard's audit log (`guard.audit`): a write refused here, before the guard, is audited like its refusals.
_audit = logging.getLogger('sensei_eval.service.audit')
# Methods that are not writes (the guard's `_READS`): their refusals are not audited.
_READS = frozenset({'GET', 'HEAD', 'OPTIONS'})


# One message for a value the database refused, whichever backend and whichever error it raised.
_REFUSED_VALUE = 'the database refused a value in the request (too long, out of range or not storable)'


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {'loc': list(err.get('loc', ())), 'msg': str(err.get('msg', '')), 'type': str(err.get('type', ''))}
            for err in exc.errors()
        ]
        summary = '; '.join(f'{field_path(e["loc"]).lstrip(".")}: {e["msg"]}' for e in errors[:5])
        return JSONResponse({'detail': errors, 'message': summary}, status_code=422)

    @app.exception_handler(SessionNotFoundError)
    async def not_found(_: Request, exc: SessionNotFoundError) -> JSONResponse:
        return JSONResponse({'detail': str(exc.args[0] if exc.args else exc)}, status_code=404)

    @app.exception_handler(SessionNotTerminalError)
    async def not_terminal(_: Request, exc: SessionNotTerminalError) -> JSONResponse:
        return JSONResponse({'detail': str(exc)}, status_code=400)

    @app.exception_handler(ConflictError)
    async def conflict(_: Request, exc: ConflictError) -> JSONResponse:
        return JSONResponse({'detail': str(exc), 'active_id': exc.active_id}, status_code=409)

    @app.exception_handler(DataError)
    async def bad_value(_: Request, exc: DataError) -> JSONResponse:
        # A value the database refused (too long, out of range, a character it cannot store): the
        # request's fault. Validation refuses these first; this is the net, with one backend-free message.
        log.warning('database refused a value: %s', exc)
        return JSONResponse({'detail': _REFUSED_VALUE}, 422)

    @app.exception_handler(OverflowError)
    async def overflow(_: Request, exc: OverflowError) -> JSONResponse:
        log.warning('number out of range: %s', exc)
        return JSONResponse({'detail': _REFUSED_VALUE}, 422)

    @app.exception_handler(SQLAlchemyError)
    async def store_error(_: Request, exc: SQLAlchemyError) -> JSONResponse:
        log.error('store error: %s', exc)
        return JSONResponse({'detail': f'database error: {type(exc).__name__}'}, status_code=500)


class BodyLimit:
    """413 for bodies over `max_bytes`: by Content-Length up front, else while the body streams in. A write
    refused up front is audited here (the guard, which audits the others, never sees it)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] != 'http':
            await self.app(scope, receive, send)
            return
        for name, value in scope.get('headers', ()):
            if name == b'content-length':
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    method = str(scope.get('method', 'GET')).upper()
                    if method not in _READS:
                        client = scope.get('client')
                        _audit.warning(
                            '%s %s refused from %s: body of %s bytes, over the limit of %d',
                            method,
                            scope.get('path', ''),
                            client[0] if client else '?',
                            value.decode('latin-1')[:20],
                            self.max_bytes,
                        )
                    await self._reject(send)
                    return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message['type'] == 'http.request':
                received += len(message.get('body', b''))
                if received > self.max_bytes:
                    raise HTTPException(413, self._detail())
            return message

        await self.app(scope, limited, send)

    def _detail(self) -> str:
        return f'request body larger than the limit of {self.max_bytes} bytes'

    async def _reject(self, send: Send) -> None:
        body = json.dumps({'detail': self._detail()}).encode()
        headers = [(b'content-type', b'application/json'), (b'content-length', str(len(body)).encode())]
        await send({'type': 'http.response.start', 'status': 413, 'headers': headers})
        await send({'type': 'http.response.body', 'body': body})
