"""The service's front door: who may call what, from which origin, with what body (one ASGI middleware).

`Guard` runs before any route (API, dashboard, `/docs`, static files, the WebSocket) and applies, in order:

0. **Host** (DNS rebinding). The `Host` header must be a host and an optional port (`evil@localhost` and
   `localhost/x` are not) whose name is one of `allowed_hosts` (`*.example.com` matches subdomains, `*`
   turns the name check off): 400 otherwise, and a WebSocket handshake is refused
   with 403. A page on `evil.example` that rebinds its name to 127.0.0.1 sends `Host: evil.example`.
1. **URL.** A NUL character in the path or the query string (`%00`) is refused with 400 on every
   backend (PostgreSQL cannot store or compare it; SQLite can: the answer must not depend on the store).
2. **Origin.** A browser sends `Origin` with every WebSocket handshake and every write. When it is
   present it must be one of `allowed_origins`, or the service's own origin (the request's `Host`,
   ports 80/443 implied) with a name in `allowed_hosts`; otherwise a write gets 403 and a WebSocket
   handshake is refused with 403 on every path (nothing is accepted, subscribed or sent). No
   `Origin` header means a non-browser client: allowed.
3. **Authentication** (when `settings.auth_required`: a token, or trusted proxy addresses). A request
   proves itself with `Authorization: Bearer <token>` (compared as UTF-8 bytes after the strip and NFC of
   `config.normalise_token`: `token_matches`), or by coming from a `trusted_proxies` address
   with `X-Forwarded-User` / `X-Forwarded-Email` (only with `behind_proxy`). "Comes from" is the
   address that opened the connection (`ProxyPeer` keeps it), never `X-Forwarded-For`: uvicorn's
   `ProxyHeadersMiddleware` reads that header only for connections from `trusted_proxies`, and then
   only to name the client in the audit log (`serve` runs uvicorn with `proxy_headers=False`, so no
   loopback client can claim another address). Every route except
   `GET /api/v1/health` needs that, unless `public_read`: then GET/HEAD requests and the WebSocket are
   open and only writes need it (`public_read` with no token and no trusted proxy: every write is refused
   with 403, as nothing could authenticate it). Refused: 401 (`WWW-Authenticate: Bearer`), or close 1008 for a
   WebSocket. The user a write is recorded under is the proxy's user header when the request is
   authenticated and `behind_proxy` is set, else `token`, else (no authentication configured)
   `anonymous`; a user header on an unauthenticated request is ignored.
   `HEAD` is answered as `GET` without the body. A write no route takes goes to the router, which
   answers 405 (with `Allow`) or 404.
4. **Writes** (any method but GET/HEAD/OPTIONS) need `Content-Type: application/json` (415 otherwise),
   so no cross-origin page can send one as a CORS "simple" request; with no CORS headers served, a
   browser will not send a cross-origin JSON write at all. The JSON body is measured, then parsed, once
   here (`body_budget`: on the event loop up to `INLINE_BYTES`, else in a worker thread, so a costly body
   never stalls the other clients): more values than `max_json_values`, counted before parsing, are 413;
   nesting deeper than `MAX_JSON_DEPTH` and NaN/Infinity (which PostgreSQL refuses and no JSON response can
   carry) are 422; a body that is not UTF-8 is 422 naming each field (`loc`) holding the bad bytes; and
   every lone surrogate or NUL in its text (keys too) is replaced by U+FFFD (`sanitize.clean_value`). The
   paths replaced go to `request.state.sanitized`; the ingest route stores them as the session's
   `warnings`. A body with a `Content-Encoding`, and every body of `POST /v1/traces` and `/v1/logs` (the
   OTLP/HTTP endpoints, which take gzip and measure it as it inflates), is left to its route. Those routes
   also take `Content-Type: application/x-protobuf`, as OpenTelemetry exporters send it; a browser cannot send that
   type without a CORS preflight either, and the route still needs authentication like any write.
5. **Audit.** One log line (logger `sensei_eval.service.audit`, INFO) per write: method, path, user,
   client address and the status answered; refusals (401/403/413/415, and a body over the limit refused by
   `errors.BodyLimit` before this guard runs) are logged at WARNING.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import unicodedata
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi import HTTPException

from sensei_eval.core.sanitize import (
    MAX_ID_LENGTH,
    MAX_JSON_DEPTH,
    JsonLimitError,
    JsonTooDeepError,
    clean_text,
    clean_value,
    json_depth,
    loads_limited,
)
from sensei_eval.service.asgi import ASGIApp, Message, Receive, Scope, Send
from sensei_eval.service.body_budget import INLINE_BYTES, BodyBudget, BodyRefusedError, Parsing
from sensei_eval.service.config import ServiceSettings

__all__ = (
    'ANONYMOUS',
    'HEALTH_PATH',
    'MAX_JSON_DEPTH',
    'OTLP_LOGS_PATH',
    'OTLP_PATHS',
    'OTLP_TRACES_PATH',
    'Guard',
    'JsonRefusedError',
    'JsonTooDeepError',
    'ProxyPeer',
    'host_allowed',
    'identify',
    'json_depth',
    'loads_bounded',
    'origin_allowed',
    'token_matches',
)

audit = logging.getLogger('sensei_eval.service.audit')


ANONYMOUS = 'anonymous'
HEALTH_PATH = '/api/v1/health'
_READS = frozenset({'GET', 'HEAD', 'OPTIONS'})
# The OTLP/HTTP trace route, the one write that may carry a protobuf body.
OTLP_TRACES_PATH = '/v1/traces'
# The OTLP/HTTP log route (content sent as OTel events); it takes the same bodies and limits as the trace route.
OTLP_LOGS_PATH = '/v1/logs'
OTLP_PATHS = (OTLP_TRACES_PATH, OTLP_LOGS_PATH)
_PROTOBUF = 'application/x-protobuf'
# WebSocket close code for a refused origin or missing credentials (RFC 6455 "policy violation").
WS_POLICY_VIOLATION = 1008


# The JSON refusals are `sanitize`'s (one limit for every input path); these names are kept for callers.
JsonRefusedError = JsonLimitError


def loads_bounded(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`sanitize.loads_limited`: too deep is `JsonTooDeepError`, NaN/±Infinity `JsonRefusedError`."""
    return loads_limited(text, max_depth=max_depth)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode('latin-1').lower(): v.decode('latin-1') for k, v in scope.get('headers', ())}


def _strip_default_port(netloc: str) -> str:
    netloc = netloc.strip().lower()
    for port in (':80', ':443'):
        if netloc.endswith(port):
            return netloc[: -len(port)]
    return netloc


# What a `Host` header may be (RFC 9110 §7.2: uri-host [":" port]): a name or IPv4 address, or an IPv6
# literal in brackets, and a port. Userinfo (`evil@localhost`), a path (`localhost/x`), a query or anything
# else is malformed: urlsplit would read `localhost` out of both, so they are refused before it.
_HOST_HEADER = re.compile(r'(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:[0-9]{1,5})?')


def _host_name(netloc: str) -> str | None:
    """The host name of a `Host` header or an origin's netloc (`[::1]:8000` -> `::1`); None if malformed."""
    if not _HOST_HEADER.fullmatch(netloc.strip()):
        return None
    try:
        parts = urlsplit(f'//{netloc.strip()}')
        _ = parts.port  # a malformed port raises
    except ValueError:
        return None
    return parts.hostname.rstrip('.') if parts.hostname else None


def host_allowed(host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a `Host` header (or an origin's netloc) names this service: its name is one of `allowed`
    (`*.example.com` matches subdomains, `*` anything)."""
    if '*' in allowed:
        return True
    name = _host_name(host) if host else None
    if not name:
        return False
    for pattern in allowed:
        p = pattern.strip().lower().strip('[]').rstrip('.')
        if name == p or (p.startswith('*.') and name.endswith(p[1:])):
            return True
    return False


def origin_allowed(
    origin: str, host: str | None, allowed: frozenset[str], allowed_hosts: frozenset[str] = frozenset({'*'})
) -> bool:
    """Whether a browser `Origin` may talk to this service: an allowed origin, or its own origin (by
    Host) with a name in `allowed_hosts`."""
    origin = origin.strip().rstrip('/').lower()
    if origin in {a.strip().rstrip('/').lower() for a in allowed}:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in ('http', 'https') or not parts.netloc or not host:
        return False  # 'null' (sandboxed frames, file://) and anything odd
    return _strip_default_port(parts.netloc) == _strip_default_port(host) and host_allowed(parts.netloc, allowed_hosts)


def identify(settings: ServiceSettings, headers: dict[str, str], client_host: str | None) -> str | None:
    """Who an authenticated request is, or None when it proves nothing (see the module docstring)."""
    forwarded = None
    if settings.behind_proxy:
        raw = headers.get('x-forwarded-user') or headers.get('x-forwarded-email')
        if raw and raw.strip():
            forwarded = clean_text(raw.strip())[0][:MAX_ID_LENGTH]
    if settings.token:
        scheme, _, given = headers.get('authorization', '').partition(' ')
        if scheme.lower() == 'bearer' and token_matches(given, settings.token):
            return forwarded or 'token'
    if forwarded and client_host is not None and client_host in settings.trusted_proxies:
        return forwarded
    return None


def token_matches(given: str, token: str) -> bool:
    """Whether a header's token (decoded as latin-1, as ASGI headers are) is `token`: compared as UTF-8
    bytes in constant time, after the strip and NFC `config.normalise_token` applied to the token."""
    raw = given.encode('latin-1', 'replace')
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError:
        text = given
    candidate = unicodedata.normalize('NFC', text.strip()).encode('utf-8', 'replace')
    return hmac.compare_digest(candidate, unicodedata.normalize('NFC', token.strip()).encode('utf-8'))


class Guard:
    """The ASGI middleware applying the rules of the module docstring."""

    def __init__(self, app: ASGIApp, settings: ServiceSettings, parsing: Parsing | None = None) -> None:
        self.app = app
        self.settings = settings
        self.parsing = parsing or Parsing(settings.parse_concurrency)

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
        client, peer = _client(scope), _peer(scope)
        origin = headers.get('origin')
        host = headers.get('host')
        foreign = None
        if not host_allowed(host, self.settings.allowed_hosts):
            foreign = f'host {(host or "(none)")[:100]} is not allowed'
        elif origin is not None and not origin_allowed(origin, host, self.settings.allowed_origins, self.settings.allowed_hosts):
            foreign = f'origin {origin[:100]} is not allowed'
        reason = None
        if (
            foreign is None
            and self.settings.auth_required
            and not self.settings.public_read
            and identify(self.settings, headers, peer) is None
        ):
            reason = 'authentication required: Authorization: Bearer <token>'
        if foreign is None and reason is None:
            scope.setdefault('state', {})['user'] = identify(self.settings, headers, peer) or ANONYMOUS
            await self.app(scope, receive, send)
            return
        audit.warning('websocket %s refused from %s: %s', scope.get('path'), client or '?', foreign or reason)
        message = await receive()
        if message['type'] != 'websocket.connect':
            return
        if foreign is not None:
            # Another site's page: the handshake itself is refused (the server answers 403), on every path.
            await send({'type': 'websocket.close', 'code': WS_POLICY_VIOLATION})
            return
        assert reason is not None
        # Accepted then closed at once, so the client gets the close code and the reason (a refused
        # handshake is only an HTTP 403 that browsers hide); nothing is subscribed or sent.
        await send({'type': 'websocket.accept'})
        safe = reason.encode('ascii', 'replace')[:120].decode('ascii')  # a close reason is at most 123 bytes
        await send({'type': 'websocket.close', 'code': WS_POLICY_VIOLATION, 'reason': safe})

    # -- HTTP ------------------------------------------------------------------------------------------

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = _Request.of(scope)
        state = scope.setdefault('state', {})
        if await self._refused(request, scope, send):
            return
        if request.write and self.settings.read_only:
            audit.warning('%s %s refused from %s: read-only service', request.method, request.path, request.client or '?')
            await _reply(send, 403, 'this service takes no writes: it runs with --public-read and no token (serve --token)')
            return
        user = identify(self.settings, request.headers, _peer(scope))
        open_route = request.path == HEALTH_PATH or (not request.write and self.settings.public_read)
        if self.settings.auth_required and user is None and not open_route:
            if request.write:
                audit.warning('%s %s refused from %s: not authenticated', request.method, request.path, request.client or '?')
            await _reply(send, 401, 'authentication required: Authorization: Bearer <token>', [(b'www-authenticate', b'Bearer')])
            return
        user = user or ANONYMOUS
        state['user'] = user
        if request.method == 'HEAD':  # answered as GET without the body (FastAPI's GET routes know no HEAD)
            await self.app({**scope, 'method': 'GET'}, receive, _without_body(send))
            return
        if not request.write or not _route_takes(scope):
            # a read, or a write no route takes: the router answers (405 naming the allowed methods, or 404)
            await self.app(scope, receive, send)
            return
        body = await self._write_body(request, user, scope, receive, send)
        if body is not None:
            await self._forward(request, user, body, scope, receive, send)

    async def _refused(self, request: _Request, scope: Scope, send: Send) -> bool:
        """Refuse (and answer) a request for a host not served, with a NUL in its URL, or a write from a
        foreign origin."""
        method, path, client = request.method, request.path, request.client or '?'
        host = request.headers.get('host')
        if not host_allowed(host, self.settings.allowed_hosts):
            audit.warning('%s %s refused from %s: host %.100s is not allowed', method, path, client, host)
            await _reply(send, 400, f'host {(host or "(none)")[:100]!r} is not allowed (serve --allowed-hosts)')
            return True
        if '\x00' in path or b'%00' in bytes(scope.get('query_string', b'')).lower():
            await _reply(send, 400, 'a NUL character is not allowed in the URL')
            return True
        origin = request.headers.get('origin')
        settings = self.settings
        if (
            request.write
            and origin is not None
            and not origin_allowed(origin, host, settings.allowed_origins, settings.allowed_hosts)
        ):
            audit.warning('%s %s refused from %s: origin %.100s is not allowed', method, path, client, origin)
            await _reply(send, 403, f'cross-origin request refused: origin {origin[:100]} is not allowed')
            return True
        return False

    async def _write_body(self, request: _Request, user: str, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """A write's body, read within the limit and sanitised; None when refused (and answered): a content
        type other than JSON (or OTLP protobuf on its path), a body over the limit or not readable."""
        media = request.headers.get('content-type', '').split(';', 1)[0].strip().lower()
        otlp = request.method == 'POST' and request.path in OTLP_PATHS
        if media != 'application/json' and not (otlp and media == _PROTOBUF):
            audit.warning(
                '%s %s refused from %s (%s): content type %r', request.method, request.path, request.client or '?', user, media
            )
            await _reply(send, 415, 'write requests need Content-Type: application/json (the body may be empty)')
            return None
        try:
            body = await _read_body(receive)
        except HTTPException as e:  # the body limit, raised while the body streamed in
            audit.warning('%s %s refused from %s (%s): %s', request.method, request.path, request.client or '?', user, e.detail)
            await _reply(send, e.status_code, str(e.detail))
            return None
        scope.setdefault('state', {})['sanitized'] = []
        encoded = request.headers.get('content-encoding', 'identity').strip().lower() not in ('', 'identity')
        if not body.strip() or otlp or encoded:  # measured, inflated, parsed and cleaned by the route
            return body
        return await self._sanitised(request, user, body, scope, send)

    async def _sanitised(self, request: _Request, user: str, body: bytes, scope: Scope, send: Send) -> bytes | None:
        """A JSON body within its budget, cleaned (`clean_value`; what changed goes in the request's state);
        None when refused (audited and answered). A body that is not JSON goes on as is: the route's own
        validation answers (422 naming the problem)."""
        budget = BodyBudget.of(self.settings)
        cleaned = await self.parsing.run(lambda: _clean_json(body, budget), inline=len(body) <= INLINE_BYTES)
        if cleaned.status:
            what = cleaned.detail if isinstance(cleaned.detail, str) else 'not valid UTF-8'
            audit.warning(
                '%s %s refused from %s (%s): %d %s',
                request.method,
                request.path,
                request.client or '?',
                user,
                cleaned.status,
                what,
            )
            if isinstance(cleaned.detail, list):
                await _reply_json(send, cleaned.status, {'detail': cleaned.detail})
            else:
                await _reply(send, cleaned.status, f'request body refused: {cleaned.detail}')
            return None
        if cleaned.changed:
            scope.setdefault('state', {})['sanitized'] = cleaned.changed
            scope['headers'] = [(k, v) for k, v in scope.get('headers', ()) if k.lower() != b'content-length']
            scope['headers'].append((b'content-length', str(len(cleaned.body)).encode()))
        return cleaned.body

    async def _forward(self, request: _Request, user: str, body: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand a write to the app with its (read, maybe cleaned) body replayed; the answer's status is audited."""
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
            audit.info('%s %s by %s from %s: %d', request.method, request.path, user, request.client or '?', status)


@dataclass(frozen=True)
class _Request:
    """What the guard reads of an HTTP request's scope."""

    method: str
    path: str
    headers: dict[str, str]
    client: str | None
    write: bool

    @classmethod
    def of(cls, scope: Scope) -> _Request:
        method = str(scope.get('method', 'GET')).upper()
        return cls(method, str(scope.get('path', '')), _headers(scope), _client(scope), method not in _READS)


@dataclass(frozen=True)
class _Cleaned:
    """What `_clean_json` made of a body: a refusal (`status`, `detail`: text, or a 422's list of fields), or
    the body to hand on (re-encoded when text was replaced, `changed` naming where)."""

    status: int = 0
    detail: str | list[dict[str, Any]] | None = None
    body: bytes = b''
    changed: list[str] | None = None


def _clean_json(body: bytes, budget: BodyBudget) -> _Cleaned:
    """Measure, parse and clean a JSON write body (on the loop or in a worker thread: `Parsing`)."""
    meter = budget.meter()
    try:
        meter.measure(body)
        value = loads_limited(body)
        meter.check_cpu('parsing')
    except BodyRefusedError as e:
        return _Cleaned(e.status, f'{e.message}; send smaller requests' if e.status == 413 else e.message)
    except JsonRefusedError as e:
        return _Cleaned(422, str(e))
    except UnicodeDecodeError:
        return _Cleaned(422, _invalid_utf8(body))
    except ValueError:
        return _Cleaned(body=body)  # not JSON: the route's validation answers
    cleaned, changed = clean_value(value)
    if not changed:
        return _Cleaned(body=body)
    return _Cleaned(body=json.dumps(cleaned).encode(), changed=changed)


def _route_takes(scope: Scope) -> bool:
    """Whether a route of the app (not a mount: the dashboard's static files take no writes) matches
    this request's path and method."""
    from starlette.routing import Match, Mount

    router = getattr(scope.get('app'), 'router', None)
    return any(not isinstance(r, Mount) and r.matches(scope)[0] == Match.FULL for r in getattr(router, 'routes', ()))


def _without_body(send: Send) -> Send:
    """`send` for a HEAD request answered as GET: the status and headers (Content-Length included) go
    out, the body does not."""

    async def head_send(message: Message) -> None:
        if message['type'] == 'http.response.body':
            message = {'type': 'http.response.body', 'body': b'', 'more_body': bool(message.get('more_body', False))}
        await send(message)

    return head_send


def _client(scope: Scope) -> str | None:
    """The client's address: for a trusted proxy's connection, the one its `X-Forwarded-For` names."""
    client = scope.get('client')
    return str(client[0]) if client else None


def _peer(scope: Scope) -> str | None:
    """The address that opened the connection (`ProxyPeer`), whatever `X-Forwarded-For` says."""
    peer = scope.get('state', {}).get('peer')
    return str(peer) if peer is not None else _client(scope)


class ProxyPeer:
    """Outermost middleware: remembers the connection's own address in `scope['state']['peer']`, then,
    with `trusted_proxies`, lets uvicorn's `ProxyHeadersMiddleware` name the client from
    `X-Forwarded-For` (only on connections from those addresses, as uvicorn's docs describe)."""

    def __init__(self, app: ASGIApp, trusted_proxies: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.inner: ASGIApp = app
        if trusted_proxies:
            from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

            self.inner = ProxyHeadersMiddleware(app, trusted_hosts=sorted(trusted_proxies))  # type: ignore[arg-type, assignment]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] in ('http', 'websocket'):
            client = scope.get('client')
            scope.setdefault('state', {})['peer'] = str(client[0]) if client else None
        await self.inner(scope, receive, send)


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


def _invalid_utf8(body: bytes) -> list[dict[str, Any]]:
    """A 422's `detail` for a body that is not UTF-8: each field (`loc`, as validation errors name them)
    holding bytes that are not, or the whole body when it does not parse even with them set aside."""
    msg = 'not valid UTF-8 (JSON text must be UTF-8)'
    try:
        value = json.loads(body.decode('utf-8', 'surrogateescape'))
    except (ValueError, RecursionError):
        return [{'loc': ['body'], 'msg': msg, 'type': 'unicode_decode'}]
    _, paths = clean_value(value)
    if not paths:
        return [{'loc': ['body'], 'msg': msg, 'type': 'unicode_decode'}]
    return [
        {
            'loc': ['body', *(int(p[1:-1]) if p.startswith('[') else p for p in _PATH_PART.findall(path))],
            'msg': msg,
            'type': 'unicode_decode',
        }
        for path in paths[:20]
    ]


_PATH_PART = re.compile(r'\[\d+\]|[^.\[\]]+')


async def _reply_json(send: Send, status: int, content: dict[str, Any]) -> None:
    body = json.dumps(content).encode()
    headers = [(b'content-type', b'application/json'), (b'content-length', str(len(body)).encode())]
    await send({'type': 'http.response.start', 'status': status, 'headers': headers})
    await send({'type': 'http.response.body', 'body': body})


async def _reply(send: Send, status: int, detail: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({'detail': detail}).encode()
    headers = [(b'content-type', b'application/json'), (b'content-length', str(len(body)).encode()), *(extra or [])]
    await send({'type': 'http.response.start', 'status': status, 'headers': headers})
    await send({'type': 'http.response.body', 'body': body})
