"""The WebSocket `/api/v1/ws`: subscribe to `sessions` (every scoring's events), `session:<id>` or `alerts`.

Channels come from the `channels` query parameter (comma-separated) or from messages
`{"action": "subscribe" | "unsubscribe", "channel": "..."}`. A message is one small JSON object:
longer or deeper ones close the socket (1009 / 1007). A subscriber too slow to keep up is closed with
1013 and re-reads the state after reconnecting. See `events` for the event shapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from sensei_eval.service.events import ALERTS_CHANNEL, GLOBAL_CHANNEL, Subscriber
from sensei_eval.service.guard import JsonRefusedError, JsonTooDeepError, loads_bounded
from sensei_eval.service.state import ServiceState, State

__all__ = ('router',)

log = logging.getLogger(__name__)

router = APIRouter(tags=['events'])

_WS_MAX_CHARS = 1024 * 1024
_WS_MAX_DEPTH = 8


@router.websocket('/api/v1/ws')
async def events(websocket: WebSocket, state: State, channels: str | None = None) -> None:
    await websocket.accept()
    sub = Subscriber()
    sender = asyncio.create_task(_pump(websocket, sub))
    try:
        for channel in (c.strip() for c in (channels or '').split(',') if c.strip()):
            await _confirm(websocket, state, sub, 'subscribe', channel)
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
                await websocket.send_json({'type': 'error', 'message': 'action must be subscribe or unsubscribe, with a channel'})
                continue
            await _confirm(websocket, state, sub, str(action), wanted)
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


async def _confirm(websocket: WebSocket, state: ServiceState, sub: Subscriber, action: str, channel: str) -> None:
    if not _valid_channel(channel):
        message = f'unknown channel {channel!r}: use sessions, alerts or session:<id>'
        await websocket.send_json({'type': 'error', 'message': message})
        return
    if action == 'subscribe':
        state.hub.subscribe(sub, channel)
        await websocket.send_json({'type': 'subscription.confirmed', 'channel': channel})
    else:
        state.hub.unsubscribe(sub, channel)
        await websocket.send_json({'type': 'subscription.removed', 'channel': channel})


async def _pump(websocket: WebSocket, sub: Subscriber) -> None:
    while True:
        event = await sub.queue.get()
        if event is None:
            await websocket.close(code=1013, reason='subscriber too slow; reconnect and re-read state')
            return
        await websocket.send_json(event)


def _valid_channel(channel: str) -> bool:
    return channel in (GLOBAL_CHANNEL, ALERTS_CHANNEL) or (channel.startswith('session:') and len(channel) > len('session:'))
