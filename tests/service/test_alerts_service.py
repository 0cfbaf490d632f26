"""Degradation alerts in the service: finished evaluations in the store → one stored alert, an `alerts.fired`
event on the WebSocket channel, a webhook POST (retried), the REST list; a restart replays without re-firing."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import httpx

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, build_report
from sensei_eval.production.alerts import AlertRule
from sensei_eval.service.alerting import AlertWatcher, deliver_webhook
from sensei_eval.service.events import ALERTS_CHANNEL, EventHub, Subscriber
from sensei_eval.service.migrate import upgrade
from sensei_eval.service.store import AlertRow, EvaluationRow, SessionRow, Store

from .conftest import ScriptedScorer, fast_settings, live_server, wait_for

RULE = AlertRule(baseline_size=40, window_size=30, min_runs=20, resolve_after=5)


def _report(i: int, version: str, failed: bool) -> dict[str, Any]:
    record = QueryRecord(query_id=f'q{i}', query='q', messages=[{'role': 'user', 'content': 'q'}], prompt_version=version)
    result = JudgeResult(
        judge='citation', failure_mode='citation', category='output', criteria_hash='h', model='m',
        status='ok', passed=not failed, score=0.0 if failed else 1.0,
    )  # fmt: skip
    return build_report(record, [result], run_id='service').model_dump(mode='json')


def seed_evaluations(store: Store, n_good: int, n_bad: int, *, start: int = 0, smoke: bool = False) -> None:
    """v1 runs failing citation 5% of the time, then v2 runs failing it 60% of the time."""
    rng = random.Random(start)
    ids = range(start, start + n_good + n_bad)
    with store.write() as db:
        for i in ids:
            db.add(SessionRow(session_id=f's{i:05d}', query_id=f'q{i}', agent='docs', status='completed', record={},
                              created_at_us=i, updated_at_us=i))  # fmt: skip
        db.flush()
        for i in ids:
            version, rate = ('v1', 0.05) if i < start + n_good else ('v2', 0.6)
            sid = f's{i:05d}'
            db.add(EvaluationRow(evaluation_id=f'e{i:05d}', session_id=sid, status='completed', judges=['citation'],
                                 triggered_by='test', started_at_us=i, completed_at_us=1_000_000 + i, smoke=smoke,
                                 report=_report(i, version, rng.random() < rate)))  # fmt: skip


class _Hook(BaseHTTPRequestHandler):
    """A webhook receiver that fails its first request with 503, then accepts."""

    received: ClassVar[list[dict[str, Any]]] = []
    calls: ClassVar[int] = 0

    def do_POST(self) -> None:
        type(self).calls += 1
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        if type(self).calls == 1:
            self.send_response(503)
        else:
            type(self).received.append(body)
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def test_a_regression_fires_one_stored_alert_an_event_and_a_retried_webhook(tmp_path: Any) -> None:
    url = f'sqlite:///{tmp_path}/s.db'
    upgrade(url)
    store = Store(url)
    seed_evaluations(store, 60, 60)
    hook = HTTPServer(('127.0.0.1', 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    settings = fast_settings(
        url, alert_rule=RULE, alert_lag_s=0.0, alert_webhook_url=f'http://127.0.0.1:{hook.server_port}/hook',
        alert_webhook_backoff_s=0.01,
    )  # fmt: skip
    hub = EventHub()
    sub = Subscriber()
    hub.subscribe(sub, ALERTS_CHANNEL)
    watcher = AlertWatcher(store, hub, settings)
    events = await watcher.poll()
    assert [e.kind for e in events] == ['fired']
    await watcher.stop()  # waits for the webhook
    hook.shutdown()
    event = sub.queue.get_nowait()
    assert event['type'] == 'alerts.fired' and event['alert']['prompt_version'] == 'v2'
    assert event['alert']['baseline_version'] == 'v1'
    assert _Hook.calls == 2 and _Hook.received[0]['alert']['id'] == event['alert']['id']
    with store.read() as db:
        rows = db.query(AlertRow).all()
        assert [(r.status, r.agent, r.metrics[0]['metric']) for r in rows] == [('firing', 'docs', 'failure_rate:citation')]
        assert rows[0].webhook_status is not None and rows[0].webhook_status.startswith('alerts.fired: delivered')

    # a restart replays the same evaluations: the same alert, already stored, nothing announced again
    again = AlertWatcher(store, EventHub(), settings)
    await again.start()
    assert await again.poll() == []
    assert [a.prompt_version for a in again.monitor.firing] == ['v2']
    await again.stop()
    with store.read() as db:
        assert db.query(AlertRow).count() == 1
    store.dispose()


async def test_smoke_evaluations_raise_no_alert(tmp_path: Any) -> None:
    url = f'sqlite:///{tmp_path}/s.db'
    upgrade(url)
    store = Store(url)
    seed_evaluations(store, 60, 60, smoke=True)
    watcher = AlertWatcher(store, EventHub(), fast_settings(url, alert_rule=RULE, alert_lag_s=0.0))
    assert await watcher.poll() == []
    store.dispose()


async def test_webhook_gives_up_on_a_refusal_and_reports_it() -> None:
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    status = await deliver_webhook('http://127.0.0.1:9/nothing', {'type': 'alerts.fired'}, attempts=3, backoff_s=0.5, sleep=sleep)
    # three attempts, two waits under the one policy: full jitter below 0.5 s, then below 1 s
    assert status.startswith('failed: ConnectError') and len(slept) == 2
    assert 0 <= slept[0] <= 0.5 and 0 <= slept[1] <= 1.0


def test_the_running_service_lists_alerts(db_url: str) -> None:
    settings = fast_settings(db_url, alert_rule=RULE, alert_lag_s=0.0, alert_poll_s=0.05)
    with live_server(settings, ScriptedScorer().model()) as server:
        seed_evaluations(server.state.store, 60, 60)
        with httpx.Client(base_url=server.url) as client:
            alerts = wait_for(lambda: client.get('/api/v1/alerts').json(), what='an alert')
            assert [(a['agent'], a['prompt_version'], a['status']) for a in alerts] == [('docs', 'v2', 'firing')]
            assert client.get('/api/v1/alerts', params={'status': 'resolved'}).json() == []


async def test_two_processes_watching_one_store_announce_an_alert_once(db_url: str) -> None:
    """Every process runs a watcher over the same evaluations; the alert row is written once and only the
    process that wrote it announces it."""
    store = Store(db_url)
    seed_evaluations(store, 60, 60)
    settings = fast_settings(db_url, alert_rule=RULE, alert_lag_s=0.0)
    first, second = AlertWatcher(store, EventHub(), settings), AlertWatcher(Store(db_url), EventHub(), settings)
    announced = [e.kind for w in (first, second) for e in await w.poll()]
    assert announced == ['fired']
    assert [a.prompt_version for a in second.monitor.firing] == ['v2']  # both know it; one said it
    with store.read() as db:
        assert db.query(AlertRow).count() == 1
    store.dispose()
    second.store.dispose()
