"""The scoring service's HTTP and WebSocket API: `create_app(settings, judge_model)` builds the FastAPI app.

Endpoints (OpenAPI docs at `/docs`):

* `POST /api/v1/sessions` — ingest a session: a `QueryRecord`'s fields plus `status` (default
  `completed`) and `agent`. A completed session of an agent listed in `auto_score_agents` is scored at
  once (seed 001); that is fail-open: if the scoring cannot be queued the session is still stored and
  the answer says why in `auto_score_error`. `PATCH /api/v1/sessions/{id}` changes the status (a
  session turning `completed` is auto-scored the same way).
* `GET /api/v1/sessions` (paged, filter by `agent` / `status`, each with its latest completed score and
  its scoring state) and `GET /api/v1/sessions/{id}` (with the record, latest scoring and evaluation).
* `POST /api/v1/scoring/sessions/{id}/score` (body `{"force_rescore": bool}`, optional) — seed 000's
  status table, implemented in `repository.request_score`: 202 when a scoring is created or still
  active, 200 with an existing finished one, 400 for a session not yet finished, 404, 409 for
  `force_rescore` while one is active. `GET …/score` returns the latest scoring (any status), `GET
  …/scores` the history, newest first. `POST /api/v1/sessions/{id}/score` is seed 001's alias.
* `POST /api/v1/sessions/{id}/evaluate` (body `{"evaluators": [...], "force": bool}`) — the
  failure-mode judges, same async pattern; `GET /api/v1/sessions/{id}/evaluation` reads the latest.
* `GET /api/v1/health`, and the WebSocket `/api/v1/ws` (see `events`).

Who is asking, from where, with what: `guard.Guard` (token, trusted proxy, `public_read`, the
WebSocket's `Origin`, `Content-Type: application/json` on writes, text sanitising, the audit log; see
its docstring). Request bodies over `max_body_bytes` get 413; a malformed body gets 422 whose `detail`
names each bad field (`loc`) without echoing the input. Ids (path and `query_id`) are at most
`sanitize.MAX_ID_LENGTH` characters and `offset` at most `schemas.MAX_OFFSET` (422 past either), and a
database error a request could still cause is a 422, so a bad request gets the same 4xx on SQLite and
PostgreSQL, never a 500.

Handlers that touch the store are plain `def`s: FastAPI runs them in its thread pool, so the event loop
stays free for the background worker and WebSocket fan-out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import select
from sqlalchemy.exc import DataError, SQLAlchemyError

from ..evaluators.registry import UnknownJudgeError, resolve_names
from ..models import JudgeModel, resolve_model
from . import repository
from .config import ServiceSettings
from .dashboard import mount_dashboard
from .events import GLOBAL_CHANNEL, EventHub, PgEventRelay, Subscriber
from .guard import ANONYMOUS, Guard, JsonRefusedError, JsonTooDeepError, loads_bounded
from .migrate import upgrade
from .repository import ConflictError, SessionNotFoundError, SessionNotTerminalError
from .schemas import (
    EvaluateRequest,
    EvaluationOut,
    Limit,
    Offset,
    ScoreOut,
    ScoreRequest,
    SessionCreate,
    SessionCreated,
    SessionDetail,
    SessionId,
    SessionPage,
    SessionUpdate,
    evaluation_out,
)
from .scoring import ScoringWorker
from .store import EvaluationRow, SessionStatus, Store, normalise_url

__all__ = ('ServiceState', 'create_app')

log = logging.getLogger(__name__)

_Scope = MutableMapping[str, Any]
_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]
_ASGIApp = Callable[[_Scope, _Receive, _Send], Awaitable[None]]

# Who triggered a scoring when the service itself did.
_AUTO = 'auto-score'
# A WebSocket message is one small JSON object: longer or deeper ones close the socket (1009 / 1007).
_WS_MAX_CHARS = 1024 * 1024
_WS_MAX_DEPTH = 8


def _writer(request: Request) -> str:
    """Who is writing (the dependency of every write endpoint): decided by `Guard`, which ran first."""
    return str(getattr(request.state, 'user', ANONYMOUS))


Writer = Annotated[str, Depends(_writer)]


class ServiceState:
    """What the handlers share: settings, store, event hub and (once started) the worker."""

    def __init__(self, settings: ServiceSettings, judge_model: JudgeModel | None) -> None:
        self.settings = settings
        self.store = Store(settings.db_url)
        self.hub = EventHub()
        self.judge_model = judge_model
        self.worker: ScoringWorker | None = None

    def wake(self) -> None:
        if self.worker is not None:
            self.worker.wake()


def create_app(settings: ServiceSettings, judge_model: JudgeModel | None = None, *, migrate: bool = True) -> FastAPI:
    """The service app. `judge_model` None resolves the model at start-up (flag, env, embedded)."""
    state = ServiceState(settings, judge_model)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
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
        try:
            yield
        finally:
            await state.worker.stop()
            if relay is not None:
                await asyncio.to_thread(relay.stop)
            await state.store.adispose()
            if owns_model:
                state.judge_model.close()

    app = FastAPI(
        title='sensei-eval scoring service',
        version='1.0',
        description='Scores TARSy sessions with the investigation judge (EP-0028) and runs the failure-mode judges.',
        lifespan=lifespan,
    )
    app.state.service = state
    # Outermost first: the body limit, then the guard (which reads the body), then the routes.
    app.add_middleware(Guard, settings=settings)
    app.add_middleware(_BodyLimit, max_bytes=settings.max_body_bytes)
    _install_error_handlers(app)

    # -- sessions --------------------------------------------------------------------------------------

    @app.post('/api/v1/sessions', status_code=201, response_model=SessionCreated, tags=['sessions'])
    def create_session(body: SessionCreate, user: Writer, request: Request) -> SessionCreated:
        warnings = _sanitize_warnings(getattr(request.state, 'sanitized', []))
        row = repository.create_session(state.store, body.record(), body.status, body.agent, user, warnings)
        auto, error = _auto_score(state, row.session_id, row.status, row.agent)
        return SessionCreated(
            session_id=row.session_id,
            status=SessionStatus(row.status),
            auto_score=auto,
            auto_score_error=error,
            warnings=warnings,
        )

    @app.patch('/api/v1/sessions/{session_id}', response_model=SessionCreated, tags=['sessions'])
    def update_session(session_id: SessionId, body: SessionUpdate, user: Writer) -> SessionCreated:
        row, before = repository.update_session_status(state.store, session_id, body.status)
        auto, error = (None, None)
        if before != row.status:
            auto, error = _auto_score(state, row.session_id, row.status, row.agent)
        return SessionCreated(
            session_id=row.session_id, status=SessionStatus(row.status), auto_score=auto, auto_score_error=error
        )

    @app.get('/api/v1/sessions', response_model=SessionPage, tags=['sessions'])
    def list_sessions(
        limit: Limit = 50,
        offset: Offset = 0,
        agent: Annotated[str | None, Query(max_length=255)] = None,
        status: SessionStatus | None = None,
    ) -> SessionPage:
        return repository.list_sessions(
            state.store, limit=limit, offset=offset, agent=agent, status=status.value if status else None
        )

    @app.get('/api/v1/sessions/{session_id}', response_model=SessionDetail, tags=['sessions'])
    def get_session(session_id: SessionId) -> SessionDetail:
        return repository.get_session(state.store, session_id)

    # -- scoring ---------------------------------------------------------------------------------------

    def score(session_id: str, response: Response, user: str, body: ScoreRequest | None) -> ScoreOut:
        result = repository.request_score(
            state.store,
            session_id,
            force=bool(body and body.force_rescore),
            user=user,
            variant=settings.scorer,
            owner=settings.worker_id,
        )
        if result.created:
            state.wake()
        response.status_code = result.http_status
        assert result.score is not None
        return result.score

    @app.post(
        '/api/v1/scoring/sessions/{session_id}/score',
        response_model=ScoreOut,
        status_code=202,
        tags=['scoring'],
        responses={
            200: {'description': 'An existing finished scoring (completed, failed, timed_out, cancelled)'},
            400: {'description': 'The session is not finished'},
            404: {'description': 'No such session'},
            409: {'description': 'force_rescore while a scoring is pending or in progress'},
        },
    )
    def score_session(session_id: SessionId, response: Response, user: Writer, body: ScoreRequest | None = None) -> ScoreOut:
        return score(session_id, response, user, body)

    @app.post('/api/v1/sessions/{session_id}/score', response_model=ScoreOut, status_code=202, tags=['scoring'])
    def score_session_alias(
        session_id: SessionId, response: Response, user: Writer, body: ScoreRequest | None = None
    ) -> ScoreOut:
        """Seed 001's path for the same operation."""
        return score(session_id, response, user, body)

    @app.get(
        '/api/v1/scoring/sessions/{session_id}/score',
        response_model=ScoreOut,
        tags=['scoring'],
        responses={404: {'description': 'No such session, or it has not been scored'}},
    )
    async def get_score(session_id: SessionId) -> Response:
        # The hot read path (dashboards poll it): one indexed single-row read, run on the event loop
        # rather than hopping to the thread pool, and serialised once (no response_model re-validation).
        if state.store.async_read_engine is not None:
            score = await repository.get_latest_score_async(state.store, session_id)
        else:  # SQLite: an in-process read of a few microseconds; a thread hop would cost more
            score = repository.get_latest_score(state.store, session_id)
        return Response(score.model_dump_json(), media_type='application/json')

    @app.get('/api/v1/scoring/sessions/{session_id}/scores', response_model=list[ScoreOut], tags=['scoring'])
    def get_scores(session_id: SessionId) -> list[ScoreOut]:
        return repository.list_scores(state.store, session_id)

    # -- failure-mode evaluation -----------------------------------------------------------------------

    @app.post('/api/v1/sessions/{session_id}/evaluate', response_model=EvaluationOut, status_code=202, tags=['evaluation'])
    def evaluate_session(
        session_id: SessionId, response: Response, user: Writer, body: EvaluateRequest | None = None
    ) -> EvaluationOut:
        spec = (body.evaluators if body and body.evaluators else None) or list(settings.default_evaluators)
        try:
            names = resolve_names(spec)
        except UnknownJudgeError as e:
            raise HTTPException(422, detail=[{'loc': ['body', 'evaluators'], 'msg': str(e), 'type': 'value_error'}]) from None
        result = repository.request_evaluation(
            state.store, session_id, force=bool(body and body.force), user=user, evaluators=names, owner=settings.worker_id
        )
        if result.created:
            state.wake()
        response.status_code = result.http_status
        assert result.evaluation is not None
        return result.evaluation

    @app.get('/api/v1/sessions/{session_id}/evaluation', response_model=EvaluationOut, tags=['evaluation'])
    def get_evaluation(session_id: SessionId) -> EvaluationOut:
        with state.store.read() as db:
            row = db.scalars(
                select(EvaluationRow)
                .where(EvaluationRow.session_id == session_id)
                .order_by(EvaluationRow.started_at_us.desc())
                .limit(1)
            ).first()
            if row is None:
                raise SessionNotFoundError(f'session {session_id} not found or not evaluated')
            return evaluation_out(row)

    # -- health and events -----------------------------------------------------------------------------

    @app.get('/api/v1/health', tags=['service'])
    def health() -> dict[str, Any]:
        worker = state.worker
        return {
            'status': 'ok',
            'worker_id': settings.worker_id,
            'in_flight': worker.in_flight if worker else 0,
            'breaker': worker.breaker.state if worker else None,
            'model': state.judge_model.name if state.judge_model else None,
            'websocket_subscribers': state.hub.subscriber_count(),
        }

    @app.websocket('/api/v1/ws')
    async def events(websocket: WebSocket, channels: str | None = None) -> None:
        await websocket.accept()
        sub = Subscriber()

        async def confirm(action: str, channel: str) -> None:
            if not _valid_channel(channel):
                error = f'unknown channel {channel!r}: use sessions or session:<id>'
                await websocket.send_json({'type': 'error', 'message': error})
                return
            if action == 'subscribe':
                state.hub.subscribe(sub, channel)
                await websocket.send_json({'type': 'subscription.confirmed', 'channel': channel})
            else:
                state.hub.unsubscribe(sub, channel)
                await websocket.send_json({'type': 'subscription.removed', 'channel': channel})

        async def pump() -> None:
            while True:
                event = await sub.queue.get()
                if event is None:
                    await websocket.close(code=1013, reason='subscriber too slow; reconnect and re-read state')
                    return
                await websocket.send_json(event)

        sender = asyncio.create_task(pump())
        try:
            for channel in (c.strip() for c in (channels or '').split(',') if c.strip()):
                await confirm('subscribe', channel)
            while True:
                frame = await websocket.receive()
                if frame['type'] == 'websocket.disconnect':
                    break
                raw_text = frame.get('text')
                # a binary frame is read as UTF-8 text like any other message
                text = str(raw_text) if raw_text is not None else bytes(frame.get('bytes') or b'').decode('utf-8', 'replace')
                if len(text) > _WS_MAX_CHARS:
                    await websocket.close(code=1009, reason=f'message longer than {_WS_MAX_CHARS} characters')
                    return
                try:
                    message = loads_bounded(text, _WS_MAX_DEPTH)
                except JsonTooDeepError:
                    await websocket.close(code=1007, reason=f'message nested deeper than {_WS_MAX_DEPTH} levels')
                    return
                except (JsonRefusedError, ValueError):
                    message = None
                if not isinstance(message, dict):
                    await websocket.send_json({'type': 'error', 'message': 'send {"action": "subscribe", "channel": "..."}'})
                    continue
                action, wanted = message.get('action'), message.get('channel')
                if action not in ('subscribe', 'unsubscribe') or not isinstance(wanted, str):
                    error = 'action must be subscribe or unsubscribe, with a channel'
                    await websocket.send_json({'type': 'error', 'message': error})
                    continue
                await confirm(str(action), wanted)
        except WebSocketDisconnect:
            pass
        except Exception:  # never drop the socket without a close frame
            log.exception('websocket handler failed')
            with contextlib.suppress(Exception):
                await websocket.close(code=1011, reason='internal error')
        finally:
            state.hub.remove(sub)
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender

    mount_dashboard(app)
    return app


# ---------------------------------------------------------------------------------------------------
# Helpers


def _auto_score(state: ServiceState, session_id: str, status: str, agent: str | None) -> tuple[ScoreOut | None, str | None]:
    """Seed 001's auto-trigger, fail-open: any problem is reported, never raised."""
    if status != SessionStatus.COMPLETED.value or not state.settings.auto_scores(agent):
        return None, None
    try:
        result = repository.request_score(
            state.store,
            session_id,
            force=False,
            user=_AUTO,
            variant=state.settings.scorer,
            owner=state.settings.worker_id,
        )
    except Exception as e:
        log.error('auto-scoring session %s failed to start: %s', session_id, e)
        return None, f'auto-scoring could not start: {type(e).__name__}: {e}'
    if result.created:
        state.wake()
    return result.score, None


def _sanitize_warnings(paths: list[str]) -> list[str]:
    """The session's warnings for text the guard replaced (lone surrogates, NULs → U+FFFD)."""
    if not paths:
        return []
    shown = ', '.join(p[:200] for p in paths[:20]) + (f' and {len(paths) - 20} more' if len(paths) > 20 else '')
    return [f'text replaced: lone surrogate or NUL characters became U+FFFD at {shown}']


def _libpq_url(url: str) -> str:
    """The store URL as psycopg itself takes it (no SQLAlchemy driver suffix)."""
    rest = normalise_url(url).split('://', 1)[1]
    return f'postgresql://{rest}'


def _valid_channel(channel: str) -> bool:
    return channel == GLOBAL_CHANNEL or (channel.startswith('session:') and len(channel) > len('session:'))


# One message for a value the database refused, whichever backend and whichever error it raised.
_REFUSED_VALUE = 'the database refused a value in the request (too long, out of range or not storable)'


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {'loc': list(err.get('loc', ())), 'msg': str(err.get('msg', '')), 'type': str(err.get('type', ''))}
            for err in exc.errors()
        ]
        summary = '; '.join(f'{".".join(str(p) for p in e["loc"])}: {e["msg"]}' for e in errors[:5])
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


class _BodyLimit:
    """413 for bodies over `max_bytes`: by Content-Length up front, else while the body streams in."""

    def __init__(self, app: _ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
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
                    await self._reject(send)
                    return
        received = 0

        async def limited() -> _Message:
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

    async def _reject(self, send: _Send) -> None:
        body = json.dumps({'detail': self._detail()}).encode()
        headers = [(b'content-type', b'application/json'), (b'content-length', str(len(body)).encode())]
        await send({'type': 'http.response.start', 'status': 413, 'headers': headers})
        await send({'type': 'http.response.body', 'body': body})
