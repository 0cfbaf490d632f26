"""The service's front door: who may call what, from which origin, with what body (one ASGI middleware).

`Guard` runs before any route (API, dashboard, `/docs`, static files, the WebSocket) and applies, in order:

1. **URL.** A NUL character in the path or the query string (`%00`) is refused with 400 on every
   backend (PostgreSQL cannot store or compare it; SQLite can: the answer must not depend on the store).
2. **Origin.** A browser sends `Origin` with every WebSocket handshake and every write. When it is
   present it must be the service's own origin (the request's `Host`, ports 80/443 implied) or one of
   `allowed_origins`; otherwise a write gets 403 and a WebSocket is closed with 1008 (policy violation)
   before it receives anything. No `Origin` header means a non-browser client: allowed.
3. **Authentication** (when `settings.auth_required`: a token, or trusted proxy addresses). A request
   proves itself with `Authorization: Bearer <token>`, or by coming from a `trusted_proxies` address
   with `X-Forwarded-User` / `X-Forwarded-Email` (only with `behind_proxy`). Every route except
   `GET /api/v1/health` needs that, unless `public_read`: then GET/HEAD requests and the WebSocket are
   open and only writes need it. Refused: 401 (`WWW-Authenticate: Bearer`), or close 1008 for a
   WebSocket. The user a write is recorded under is the proxy's user header when the request is
   authenticated and `behind_proxy` is set, else `token`, else (no authentication configured)
   `anonymous`; a user header on an unauthenticated request is ignored.
4. **Writes** (any method but GET/HEAD/OPTIONS) need `Content-Type: application/json` (415 otherwise),
   so no cross-origin page can send one as a CORS "simple" request; with no CORS headers served, a
   browser will not send a cross-origin JSON write at all. The JSON body is parsed once here: nesting
   deeper than `MAX_JSON_DEPTH` and NaN/Infinity (which PostgreSQL refuses and no JSON response can carry)
   are 422, and every lone surrogate or NUL in its text (keys too) is
   replaced by U+FFFD (`sanitize.clean_value`). The paths replaced go to `request.state.sanitized`;
   the ingest route stores them as the session's `warnings`. One exception: `POST /v1/traces` (the
   OTLP/HTTP trace endpoint) also takes `Content-Type: application/x-protobuf`, as OpenTelemetry
   exporters send it; a browser cannot send that type without a CORS preflight either, and the route
   still needs authentication like any write.
5. **Audit.** One log line (logger `sensei_eval.service.audit`, INFO) per write: method, path, user,
   client address and the status answered; refusals (401/403/415) are logged at WARNING.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any
from urllib.parse import urlsplit

from fastapi import HTTPException

from ..sanitize import MAX_ID_LENGTH, clean_text, clean_value
from .asgi import ASGIApp, Message, Receive, Scope, Send
from .config import ServiceSettings

__all__ = (
    'ANONYMOUS',
    'HEALTH_PATH',
    'MAX_JSON_DEPTH',
    'OTLP_TRACES_PATH',
    'Guard',
    'JsonRefusedError',
    'JsonTooDeepError',
    'identify',
    'json_depth',
    'loads_bounded',
    'origin_allowed',
)

audit = logging.getLogger('sensei_eval.service.audit')


ANONYMOUS = 'anonymous'
HEALTH_PATH = '/api/v1/health'
# Deepest JSON nesting a request body may have (a QueryRecord needs about 6; metadata a few more).
MAX_JSON_DEPTH = 64
_READS = frozenset({'GET', 'HEAD', 'OPTIONS'})
# The OTLP/HTTP trace route, the one write that may carry a protobuf body.
OTLP_TRACES_PATH = '/v1/traces'
_PROTOBUF = 'application/x-protobuf'
# WebSocket close code for a refused origin or missing credentials (RFC 6455 "policy violation").
WS_POLICY_VIOLATION = 1008


class JsonRefusedError(ValueError):
    """JSON the service refuses although Python's parser takes it (too deep, or a non-finite number)."""


class JsonTooDeepError(JsonRefusedError):
    """JSON nested deeper than the limit (refused before anything recurses over it)."""


def _no_constant(name: str) -> float:
    # NaN and ±Infinity are not JSON: PostgreSQL refuses them and no response could carry them back.
    raise JsonRefusedError(f'{name} is not a JSON number')


def _finite(text: str) -> float:
    value = float(text)
    if value in (float('inf'), float('-inf')):
        raise JsonRefusedError(f'number {text[:40]} is out of range')
    return value


def json_depth(value: Any) -> int:
    """How deeply a parsed JSON value nests (a scalar is 0, `[]` is 1), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in item)
    return deepest


def loads_bounded(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, refusing nesting deeper than `max_depth` with `JsonTooDeepError` (never RecursionError)."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise JsonTooDeepError(f'JSON nested deeper than {max_depth} levels') from None
    if json_depth(value) > max_depth:
        raise JsonTooDeepError(f'JSON nested deeper than {max_depth} levels')
    return value


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode('latin-1').lower(): v.decode('latin-1') for k, v in scope.get('headers', ())}


def _strip_default_port(netloc: str) -> str:
    netloc = netloc.strip().lower()
    for port in (':80', ':443'):
        if netloc.endswith(port):
            return netloc[: -len(port)]
    return netloc


def origin_allowed(origin: str, host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a browser `Origin` may talk to this service: its own origin (by Host) or an allowed one."""
    origin = origin.strip().rstrip('/').lower()
    if origin in {a.strip().rstrip('/').lower() for a in allowed}:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in ('http', 'https') or not parts.netloc or not host:
        return False  # 'null' (sandboxed frames, file://) and anything odd
    return _strip_default_port(parts.netloc) == _strip_default_port(host)


def identify(settings: ServiceSettings, headers: dict[str, str], client_host: str | None) -> str | None:
    """Who an authenticated request is, or None when it proves nothing (see the module docstring)."""
    forwarded = None
    if settings.behind_proxy:
        raw = headers.get('x-forwarded-user') or headers.get('x-forwarded-email')
        if raw and raw.strip():
            forwarded = clean_text(raw.strip())[0][:MAX_ID_LENGTH]
    if settings.token:
        scheme, _, given = headers.get('authorization', '').partition(' ')
        if scheme.lower() == 'bearer' and hmac.compare_digest(given.strip().encode(), settings.token.encode()):
            return forwarded or 'token'
    if forwarded and client_host is not None and client_host in settings.trusted_proxies:
        return forwarded
    return None


class Guard:
    """The ASGI middleware applying the rules of the module docstring."""

    def __init__(self, app: ASGIApp, settings: ServiceSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] == 'http':
            await self._http(scope, receive, send)
        elif scope['type'] == 'websocket':
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # -- WebSocket -----------------------------------------------------------------------------------

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        client = _client(scope)
        origin = headers.get('origin')
        reason = None
        if origin is not None and not origin_allowed(origin, headers.get('host'), self.settings.allowed_origins):
            reason = f'origin {origin[:100]} is not allowed'
        elif self.settings.auth_required and not self.settings.public_read and identify(self.settings, headers, client) is None:
            reason = 'authentication required: Authorization: Bearer <token>'
        if reason is None:
            scope.setdefault('state', {})['user'] = identify(self.settings, headers, client) or ANONYMOUS
            await self.app(scope, receive, send)
            return
        audit.warning('websocket %s refused from %s: %s', scope.get('path'), client or '?', reason)
        message = await receive()
        if message['type'] != 'websocket.connect':
            return
        # Accepted then closed at once, so the client gets the close code and the reason (a refused
        # handshake is only an HTTP 403 that browsers hide); nothing is subscribed or sent.
        await send({'type': 'websocket.accept'})
        safe = reason.encode('ascii', 'replace')[:120].decode('ascii')  # a close reason is at most 123 bytes
        await send({'type': 'websocket.close', 'code': WS_POLICY_VIOLATION, 'reason': safe})

    # -- HTTP ------------------------------------------------------------------------------------------

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = str(scope.get('method', 'GET')).upper()
        path = str(scope.get('path', ''))
        headers = _headers(scope)
        client = _client(scope)
        write = method not in _READS
        state = scope.setdefault('state', {})

        if '\x00' in path or b'%00' in bytes(scope.get('query_string', b'')).lower():
            await _reply(send, 400, 'a NUL character is not allowed in the URL')
            return
        origin = headers.get('origin')
        if write and origin is not None and not origin_allowed(origin, headers.get('host'), self.settings.allowed_origins):
            audit.warning('%s %s refused from %s: origin %.100s is not allowed', method, path, client or '?', origin)
            await _reply(send, 403, f'cross-origin request refused: origin {origin[:100]} is not allowed')
            return
        user = identify(self.settings, headers, client)
        open_route = path == HEALTH_PATH or (not write and self.settings.public_read)
        if self.settings.auth_required and user is None and not open_route:
            if write:
                audit.warning('%s %s refused from %s: not authenticated', method, path, client or '?')
            await _reply(send, 401, 'authentication required: Authorization: Bearer <token>', [(b'www-authenticate', b'Bearer')])
            return
        user = user or ANONYMOUS
        state['user'] = user
        if not write:
            await self.app(scope, receive, send)
            return

        media = headers.get('content-type', '').split(';', 1)[0].strip().lower()
        protobuf = media == _PROTOBUF and method == 'POST' and path == OTLP_TRACES_PATH
        if media != 'application/json' and not protobuf:
            audit.warning('%s %s refused from %s (%s): content type %r', method, path, client or '?', user, media)
            await _reply(send, 415, 'write requests need Content-Type: application/json (the body may be empty)')
            return
        try:
            body = await _read_body(receive)
        except HTTPException as e:  # the body limit, raised while the body streamed in
            await _reply(send, e.status_code, str(e.detail))
            return
        state['sanitized'] = []
        if body.strip() and not protobuf:
            try:
                value = loads_bounded(body)
            except JsonRefusedError as e:
                await _reply(send, 422, f'request body refused: {e}')
                return
            except ValueError:
                value = None  # not JSON: the route's own validation answers (422 naming the problem)
            else:
                cleaned, changed = clean_value(value)
                if changed:
                    state['sanitized'] = changed
                    body = json.dumps(cleaned).encode()
                    scope['headers'] = [(k, v) for k, v in scope.get('headers', ()) if k.lower() != b'content-length']
                    scope['headers'].append((b'content-length', str(len(body)).encode()))

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {'type': 'http.request', 'body': body, 'more_body': False}
            return await receive()

        status = 500

        async def watch(message: Message) -> None:
            nonlocal status
            if message['type'] == 'http.response.start':
                status = int(message['status'])
            await send(message)

        try:
            await self.app(scope, replay, watch)
        finally:
            audit.info('%s %s by %s from %s: %d', method, path, user, client or '?', status)


def _client(scope: Scope) -> str | None:
    client = scope.get('client')
    return str(client[0]) if client else None


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message['type'] == 'http.disconnect':
            break
        chunks.append(message.get('body', b''))
        if not message.get('more_body', False):
            break
    return b''.join(chunks)


async def _reply(send: Send, status: int, detail: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({'detail': detail}).encode()
    headers = [(b'content-type', b'application/json'), (b'content-length', str(len(body)).encode()), *(extra or [])]
    await send({'type': 'http.response.start', 'status': status, 'headers': headers})
    await send({'type': 'http.response.body', 'body': body})
