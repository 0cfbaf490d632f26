"""Live events: an in-process hub of WebSocket channels, and the event payloads the scorer publishes.

Channels are named as in TARSy: `sessions` (every session's scoring lifecycle, for list views) and
`session:{session_id}` (one session's detail view); `alerts` carries degradation alerts
(`service.alerting`). The scoring worker publishes each event to both.
Every event carries `type`, `score_id` (or `evaluation_id`), `session_id` and `timestamp_us`;
`scoring.completed` adds `total_score`, `scoring.failed` adds `error_message` and the final `status`
(failed, timed_out or cancelled), `scoring.progress` adds `phase`.

WebSocket protocol (`/api/v1/ws`): subscribe on connect with `?channels=sessions,session:ID`, or send
`{"action": "subscribe" | "unsubscribe", "channel": "..."}` at any time; each (un)subscription is
confirmed with `{"type": "subscription.confirmed" | "subscription.removed", "channel": ...}`. Events
arrive as JSON objects with a `channel` field added.

Delivery: each subscriber has a bounded queue. A subscriber too slow to drain it is disconnected
(close code 1013, "try again later") rather than losing events silently; a client that reconnects
reads the current state over REST.

Several processes: with SQLite, events stay in the process that runs the scoring. With PostgreSQL,
`PgEventRelay` sends every event through `NOTIFY sensei_eval_events` (from a sender thread, so the
event loop never waits on the network) and a listener thread in each process hands what arrives to
its local hub, so a WebSocket client connected to any process sees every scoring. Events of one
process arrive in the order it sent them. If the relay fails, events are delivered locally and the
failure is logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sensei_eval.service.store import now_us

__all__ = (
    'ALERTS_CHANNEL',
    'GLOBAL_CHANNEL',
    'EventHub',
    'PgEventRelay',
    'Subscriber',
    'evaluation_event',
    'score_event',
    'session_channel',
)

log = logging.getLogger(__name__)

GLOBAL_CHANNEL = 'sessions'
# Degradation alerts (`alerts.fired`, `alerts.updated`, `alerts.resolved`, each with the whole `alert`).
ALERTS_CHANNEL = 'alerts'

# Events queued per subscriber before it counts as too slow and is dropped (with a close frame).
_QUEUE_SIZE = 1000


def session_channel(session_id: str) -> str:
    return f'session:{session_id}'


def score_event(type_: str, score_id: str, session_id: str, **extra: Any) -> dict[str, Any]:
    return {'type': type_, 'score_id': score_id, 'session_id': session_id, 'timestamp_us': now_us(), **extra}


def evaluation_event(type_: str, evaluation_id: str, session_id: str, **extra: Any) -> dict[str, Any]:
    return {'type': type_, 'evaluation_id': evaluation_id, 'session_id': session_id, 'timestamp_us': now_us(), **extra}


@dataclass(eq=False)
class Subscriber:
    """One WebSocket connection's subscriptions and outgoing queue."""

    channels: set[str] = field(default_factory=set)
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=lambda: asyncio.Queue(_QUEUE_SIZE))
    overflowed: bool = False


class EventHub:
    """Fan-out of events to subscribers by channel. Call `publish` from the event loop's thread."""

    def __init__(self) -> None:
        self._by_channel: dict[str, set[Subscriber]] = defaultdict(set)
        self.published = 0
        self.relay: PgEventRelay | None = None

    def subscribe(self, sub: Subscriber, channel: str) -> None:
        sub.channels.add(channel)
        self._by_channel[channel].add(sub)

    def unsubscribe(self, sub: Subscriber, channel: str) -> None:
        sub.channels.discard(channel)
        subs = self._by_channel.get(channel)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._by_channel[channel]

    def remove(self, sub: Subscriber) -> None:
        for channel in list(sub.channels):
            self.unsubscribe(sub, channel)

    def publish(self, event: dict[str, Any], channels: list[str]) -> None:
        self.published += 1
        for channel in channels:
            for sub in list(self._by_channel.get(channel, ())):
                if sub.overflowed:
                    continue
                try:
                    sub.queue.put_nowait({**event, 'channel': channel})
                except asyncio.QueueFull:
                    sub.overflowed = True
                    log.warning('websocket subscriber too slow (%d events queued): disconnecting it', _QUEUE_SIZE)
                    self.remove(sub)
                    sub.queue = asyncio.Queue(1)
                    sub.queue.put_nowait(None)

    def publish_session(self, event: dict[str, Any]) -> None:
        """Publish to the global channel and the event's session channel (through the relay, if any)."""
        if self.relay is not None and self.relay.send(event):
            return
        self.deliver_session(event)

    def deliver_session(self, event: dict[str, Any]) -> None:
        if str(event.get('type', '')).startswith('alerts.'):  # an alert relayed from another process
            self.publish(event, [ALERTS_CHANNEL])
            return
        self.publish(event, [GLOBAL_CHANNEL, session_channel(str(event['session_id']))])

    def publish_alert(self, event: dict[str, Any]) -> None:
        """Publish an `alerts.*` event on the alerts channel of every process (through the relay, if any)."""
        if self.relay is not None and self.relay.send(event):
            return
        self.publish(event, [ALERTS_CHANNEL])

    def subscriber_count(self) -> int:
        return len({s for subs in self._by_channel.values() for s in subs})


# The PostgreSQL NOTIFY channel events travel on between service processes.
_PG_CHANNEL = 'sensei_eval_events'


class PgEventRelay:
    """Carries events between service processes over PostgreSQL LISTEN/NOTIFY (see the module docstring)."""

    def __init__(self, conninfo: str, hub: EventHub, loop: asyncio.AbstractEventLoop) -> None:
        self.conninfo = conninfo
        self.hub = hub
        self.loop = loop
        self._outbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, timeout: float = 10.0) -> None:
        self._threads = [
            threading.Thread(target=self._listen, name='pg-event-listener', daemon=True),
            threading.Thread(target=self._send_loop, name='pg-event-sender', daemon=True),
        ]
        for t in self._threads:
            t.start()
        if not self._listening.wait(timeout):
            raise RuntimeError('could not LISTEN for events on PostgreSQL')
        self.hub.relay = self

    def stop(self) -> None:
        self.hub.relay = None
        self._stop.set()
        self._outbox.put(None)
        for t in self._threads:
            t.join(timeout=5)

    def send(self, event: dict[str, Any]) -> bool:
        if self._stop.is_set():
            return False
        self._outbox.put(event)
        return True

    def _deliver(self, event: dict[str, Any]) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.hub.deliver_session, event)

    def _send_loop(self) -> None:
        import psycopg

        conn: psycopg.Connection[Any] | None = None
        while True:
            event = self._outbox.get()
            if event is None:
                break
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.conninfo, autocommit=True)
                conn.execute('SELECT pg_notify(%s, %s)', (_PG_CHANNEL, json.dumps(event)))
            except Exception as e:
                log.error('event relay could not NOTIFY (%s); delivering %s locally only', e, event.get('type'))
                self._deliver(event)
                conn = None
        if conn is not None:
            conn.close()

    def _listen(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(f'LISTEN {_PG_CHANNEL}')
                    self._listening.set()
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            try:
                                self._deliver(json.loads(note.payload))
                            except ValueError:
                                log.error('event relay got a payload that is not JSON: %.200s', note.payload)
            except Exception as e:
                if self._stop.is_set():
                    return
                log.error('event relay listener lost its connection (%s); reconnecting', e)
                self._stop.wait(1.0)
