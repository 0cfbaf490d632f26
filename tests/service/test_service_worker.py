"""Background scoring: crash recovery, retries, circuit breaker, timeout, shutdown, events, many workers,
status transitions and migrations."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select
from websockets.asyncio.client import connect

from sensei_eval.core.records import QueryRecord
from sensei_eval.service import repository
from sensei_eval.service.events import EventHub
from sensei_eval.service.migrate import HEAD, current_revision, downgrade, upgrade
from sensei_eval.service.reliability import CircuitBreaker, CircuitOpenError
from sensei_eval.service.scoring import ScoringWorker
from sensei_eval.service.store import (
    EvaluationRow,
    InvalidTransitionError,
    JobStatus,
    SessionStatus,
    Store,
    WorkerRow,
    check_transition,
    now_us,
)

from .conftest import ScriptedScorer, _free_port, alert_record, fast_settings, live_server, wait_for, wait_until_up

ROOT = Path(__file__).resolve().parents[2]


def _create_and_score(c: httpx.Client, query_id: str = 'alert-1') -> tuple[str, str]:
    session_id = c.post('/api/v1/sessions', json=alert_record(query_id)).json()['session_id']
    r = c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={})
    assert r.status_code == 202, r.text
    return session_id, r.json()['score_id']


def _score(c: httpx.Client, session_id: str) -> dict[str, Any]:
    body: dict[str, Any] = c.get(f'/api/v1/scoring/sessions/{session_id}/score').json()
    return body


def _finished(c: httpx.Client, session_id: str) -> dict[str, Any] | None:
    body = _score(c, session_id)
    return body if body['status'] not in ('pending', 'in_progress') else None


# ---------------------------------------------------------------------------------------------------
# Crash recovery and shutdown


def test_killed_process_leaves_a_row_the_next_start_marks_failed(db_url: str) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, '-m', 'tests.service.hang_server', db_url, str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with httpx.Client(base_url=f'http://127.0.0.1:{port}', timeout=5) as c:
            wait_until_up(c, what='hanging server up')
            session_id, score_id = _create_and_score(c)
            wait_for(lambda: _score(c, session_id)['status'] == 'in_progress', what='scoring in progress')
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    store = Store(db_url)
    with store.read() as db:
        row = db.get(EvaluationRow, score_id)
        assert row is not None and row.status == 'in_progress'  # the dead process left it active
    store.dispose()
    with live_server(fast_settings(db_url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        body = _score(c, session_id)
        assert body['status'] == 'failed' and body['score_id'] == score_id
        assert 'orphaned' in body['error_message'] and f'process {proc.pid}' in body['error_message']
        assert body['completed_at_us'] is not None and body['total_score'] is None
        # the session can be scored again
        assert c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={'force_rescore': True}).status_code == 202
        wait_for(lambda: _score(c, session_id)['status'] == 'completed', what='rescore after crash')


def test_stale_heartbeat_of_another_host_makes_its_rows_orphans(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    upgrade(url)
    store = Store(url)
    session = repository.create_session(store, QueryRecord.model_validate(alert_record()), SessionStatus.COMPLETED, None, None)
    result = repository.request_score(store, session.session_id, force=False, user='u', variant='freeform', owner='elsewhere:1:x')
    assert result.score is not None
    old = now_us() - 3_600_000_000
    with store.write() as db:
        db.add(WorkerRow(worker_id='elsewhere:1:x', host='another-host', pid=1, started_at_us=old, heartbeat_at_us=old))
        row = db.get(EvaluationRow, result.score.score_id)
        assert row is not None
        row.status = 'in_progress'
    hub = EventHub()
    worker = ScoringWorker(store, hub, ScriptedScorer().model(), fast_settings(url))
    orphans = asyncio.run(worker.recover_orphans())
    assert [j.job_id for j in orphans] == [result.score.score_id]
    with store.read() as db:
        row = db.get(EvaluationRow, result.score.score_id)
        assert row is not None and row.status == 'failed'
        assert row.error_message is not None and 'last heartbeat was 3600 s ago' in row.error_message
        assert db.get(WorkerRow, 'elsewhere:1:x') is None
    store.dispose()


def test_shutdown_grace_then_cancel(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    never = ScriptedScorer(gate=threading.Event())
    with (
        live_server(fast_settings(url, concurrency=1, shutdown_grace_s=0.3), never.model(), migrate=True) as srv,
        httpx.Client(base_url=srv.url) as c,
    ):
        running, _ = _create_and_score(c, 'a')
        wait_for(lambda: _score(c, running)['status'] == 'in_progress', what='in progress')
        queued, _ = _create_and_score(c, 'b')
        assert _score(c, queued)['status'] == 'pending'
    quick = ScriptedScorer(delay_s=0.2)
    with live_server(fast_settings(url, shutdown_grace_s=10), quick.model()) as srv, httpx.Client(base_url=srv.url) as c:
        for session_id in (running, queued):
            body = _score(c, session_id)
            assert body['status'] == 'cancelled' and 'shut down' in body['error_message']
        finishing, _ = _create_and_score(c, 'c')
        wait_for(lambda: _score(c, finishing)['status'] == 'in_progress', what='in progress')
    # stopped while the scoring was in flight: it finished within the grace period
    with live_server(fast_settings(url), quick.model()) as srv, httpx.Client(base_url=srv.url) as c:
        assert _score(c, finishing)['status'] == 'completed'


# ---------------------------------------------------------------------------------------------------
# Retries, breaker, timeout


def test_model_calls_are_retried_with_backoff(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    flaky = ScriptedScorer(fail_first=2)
    with live_server(fast_settings(url), flaky.model(), migrate=True) as srv, httpx.Client(base_url=srv.url) as c:
        session_id, _ = _create_and_score(c)
        body = wait_for(lambda: _finished(c, session_id), what='retried scoring')
        assert body['status'] == 'completed' and body['total_score'] == 45
        assert flaky.calls == 4  # two failures, the scoring turn, the missing-tools turn

        dead = ScriptedScorer(fail_first=10**6)
        srv.state.worker.judge_model = dead.model()
        session_id, _ = _create_and_score(c, 'b')
        body = wait_for(lambda: _finished(c, session_id), what='failed scoring')
        assert body['status'] == 'failed' and body['total_score'] is None
        assert 'after 3 attempts' in body['error_message'] and 'ConnectionError' in body['error_message']
        assert dead.calls == 3


def test_circuit_breaker_opens_fails_fast_and_half_opens(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    scorer = ScriptedScorer(fail_first=10**6)
    settings = fast_settings(url, concurrency=1, breaker_threshold=5, breaker_reset_s=0.5)
    with live_server(settings, scorer.model(), migrate=True) as srv, httpx.Client(base_url=srv.url) as c:
        for i in range(5):
            session_id, _ = _create_and_score(c, f'f{i}')
            assert wait_for(lambda: _finished(c, session_id), what='failure')['status'] == 'failed'  # noqa: B023
        assert scorer.calls == 15 and srv.state.worker.breaker.state == 'open'
        session_id, _ = _create_and_score(c, 'fast')
        body = wait_for(lambda: _finished(c, session_id), what='fast failure')
        assert body['status'] == 'failed'
        assert 'circuit breaker open after 5 consecutive failed model calls' in body['error_message']
        assert scorer.calls == 15  # failed fast: the model was not called
        assert c.get('/api/v1/health').json()['breaker'] == 'open'
        wait_for(lambda: srv.state.worker.breaker.state == 'half_open', what='half-open')
        scorer.fail_first = 0  # the model recovers: the trial call succeeds and closes the breaker
        session_id, _ = _create_and_score(c, 'trial')
        body = wait_for(lambda: _finished(c, session_id), what='trial scoring')
        assert body['status'] == 'completed' and srv.state.worker.breaker.state == 'closed'


def test_circuit_breaker_states() -> None:
    now = [0.0]
    breaker = CircuitBreaker(threshold=2, reset_s=10, clock=lambda: now[0])
    assert breaker.before_call() is False
    breaker.record_failure()
    assert breaker.state == 'closed'
    breaker.record_failure()
    assert breaker.state == 'open'
    with pytest.raises(CircuitOpenError, match=r'next trial call in 10\.0 s'):
        breaker.before_call()
    now[0] = 10.0
    assert breaker.state == 'half_open' and breaker.before_call() is True
    with pytest.raises(CircuitOpenError, match='a trial call is in flight'):
        breaker.before_call()
    breaker.record_failure(trial=True)  # the trial failed: open again for another reset period
    assert breaker.state == 'open'
    now[0] = 20.0
    assert breaker.before_call() is True
    breaker.record_success()
    assert breaker.state == 'closed' and breaker.failures == 0


def test_scoring_timeout_gives_timed_out(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    slow = ScriptedScorer(delay_s=30)
    with (
        live_server(fast_settings(url, scoring_timeout_s=0.3), slow.model(), migrate=True) as srv,
        httpx.Client(base_url=srv.url) as c,
    ):
        session_id, _ = _create_and_score(c)
        body = wait_for(lambda: _finished(c, session_id), what='timeout')
        assert body['status'] == 'timed_out' and body['error_message'] == 'timed out after 0.3 s'
        assert c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={}).status_code == 200  # terminal: returned as is


def test_status_transitions_are_checked() -> None:
    assert check_transition('pending', 'in_progress') == JobStatus.IN_PROGRESS
    assert check_transition('in_progress', 'timed_out') == JobStatus.TIMED_OUT
    for terminal in ('completed', 'failed', 'timed_out', 'cancelled'):
        with pytest.raises(InvalidTransitionError, match=f'{terminal} -> in_progress'):
            check_transition(terminal, 'in_progress')
    with pytest.raises(InvalidTransitionError):
        check_transition('pending', 'completed')  # it never ran


# ---------------------------------------------------------------------------------------------------
# WebSocket events


async def _collect(url: str, channel: str, until: str, ready: asyncio.Event, out: list[dict[str, Any]]) -> None:
    async with connect(f'{url}/api/v1/ws?channels={channel}') as ws:
        confirmed = json.loads(await ws.recv())
        assert confirmed == {'type': 'subscription.confirmed', 'channel': channel}
        ready.set()
        while True:
            event = json.loads(await asyncio.wait_for(ws.recv(), timeout=15))
            out.append(event)
            if event['type'] == until:
                return


def _events_for(srv: Any, session_id: str, until: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    async def run() -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
        global_events: list[dict[str, Any]] = []
        session_events: list[dict[str, Any]] = []
        ready = [asyncio.Event(), asyncio.Event()]
        tasks = [
            asyncio.create_task(_collect(srv.ws_url, 'sessions', until, ready[0], global_events)),
            asyncio.create_task(_collect(srv.ws_url, f'session:{session_id}', until, ready[1], session_events)),
        ]
        await asyncio.gather(*(r.wait() for r in ready))
        async with httpx.AsyncClient(base_url=srv.url) as ac:
            score_id = (await ac.post(f'/api/v1/scoring/sessions/{session_id}/score', json={})).json()['score_id']
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
        return global_events, session_events, score_id

    return asyncio.run(run())


def test_websocket_clients_get_the_four_event_types_in_order_on_both_channels(db_url: str) -> None:
    with live_server(fast_settings(db_url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        session_id = c.post('/api/v1/sessions', json=alert_record()).json()['session_id']
        global_events, session_events, score_id = _events_for(srv, session_id, 'scoring.completed')
    for channel, events in (('sessions', global_events), (f'session:{session_id}', session_events)):
        assert [e['type'] for e in events] == ['scoring.started', 'scoring.progress', 'scoring.progress', 'scoring.completed']
        assert [e.get('phase') for e in events[1:3]] == ['analyzing_methodology', 'identifying_missing_tools']
        assert events[-1]['total_score'] == 45
        for e in events:
            assert e['score_id'] == score_id and e['session_id'] == session_id and e['channel'] == channel
            assert isinstance(e['timestamp_us'], int)
        assert [e['timestamp_us'] for e in events] == sorted(e['timestamp_us'] for e in events)


def test_websocket_failed_event_carries_the_error(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    scorer = ScriptedScorer(score_text='no number here')
    with live_server(fast_settings(url), scorer.model(), migrate=True) as srv, httpx.Client(base_url=srv.url) as c:
        session_id = c.post('/api/v1/sessions', json=alert_record()).json()['session_id']
        global_events, session_events, _ = _events_for(srv, session_id, 'scoring.failed')
    for events in (global_events, session_events):
        assert [e['type'] for e in events] == ['scoring.started', 'scoring.progress', 'scoring.failed']
        assert events[-1]['status'] == 'failed' and 'no valid total score' in events[-1]['error_message']


# ---------------------------------------------------------------------------------------------------
# Many workers (PostgreSQL)


def test_events_reach_clients_of_another_process_over_postgres(pg_url: str) -> None:
    """An API-only process (concurrency 0) queues the scoring, a peer runs it; the first one's
    WebSocket clients still get the four events in order, relayed by LISTEN/NOTIFY."""
    upgrade(pg_url)
    api_only = fast_settings(pg_url, concurrency=0, worker_id='api-only')
    runner = fast_settings(pg_url, worker_id='runner')
    with (
        live_server(api_only, ScriptedScorer().model()) as front,
        live_server(runner, ScriptedScorer().model()),
        httpx.Client(base_url=front.url) as c,
    ):
        session_id = c.post('/api/v1/sessions', json=alert_record()).json()['session_id']
        global_events, session_events, score_id = _events_for(front, session_id, 'scoring.completed')
    for events in (global_events, session_events):
        assert [e['type'] for e in events] == ['scoring.started', 'scoring.progress', 'scoring.progress', 'scoring.completed']
        assert {e['score_id'] for e in events} == {score_id}
    store = Store(pg_url)
    with store.read() as db:
        row = db.get(EvaluationRow, score_id)
        assert row is not None and row.owner == 'runner'
    store.dispose()


def test_many_workers_share_pending_scorings_each_runs_once(pg_url: str) -> None:
    upgrade(pg_url)
    setup = Store(pg_url)
    record = QueryRecord.model_validate(alert_record())
    score_ids = []
    for _ in range(24):
        session = repository.create_session(setup, record, SessionStatus.COMPLETED, None, None)
        result = repository.request_score(setup, session.session_id, force=False, user='u', variant='freeform', owner='setup')
        assert result.score is not None
        score_ids.append(result.score.score_id)
    scorer = ScriptedScorer(delay_s=0.05)

    async def run() -> list[ScoringWorker]:
        workers = []
        for i in range(3):
            settings = fast_settings(pg_url, concurrency=4, worker_id=f'w{i}:{os.getpid()}')
            workers.append(ScoringWorker(Store(pg_url), EventHub(), scorer.model(), settings))
        # the 'setup' owner is not a registered process: the first worker to start would fail its rows as
        # orphans; register it as a live peer first, as a real API process would be
        with setup.write() as db:
            db.add(WorkerRow(worker_id='setup', host='h', pid=os.getpid(), started_at_us=now_us(), heartbeat_at_us=now_us()))
        await asyncio.gather(*(w.start() for w in workers))

        def done() -> bool:
            with setup.read() as db:
                statuses = list(db.scalars(select(EvaluationRow.status)))
            return all(s == 'completed' for s in statuses)

        for _ in range(600):
            if await asyncio.to_thread(done):
                break
            await asyncio.sleep(0.05)
        await asyncio.gather(*(w.stop() for w in workers))
        return workers

    workers = asyncio.run(run())
    with setup.read() as db:
        rows = list(db.scalars(select(EvaluationRow)))
    assert {r.status for r in rows} == {'completed'}
    runs: dict[str, int] = {}
    for w in workers:
        for job_id, n in w.runs.items():
            runs[job_id] = runs.get(job_id, 0) + n
    assert runs == dict.fromkeys(score_ids, 1)  # every scoring ran exactly once
    assert scorer.calls == 2 * len(score_ids)
    assert sum(1 for w in workers if w.runs) >= 2  # the work was shared
    assert {r.owner for r in rows} <= {w.worker_id for w in workers}
    setup.dispose()
    for w in workers:
        w.store.dispose()


# ---------------------------------------------------------------------------------------------------
# Migrations


def _tables(url: str) -> set[str]:
    store = Store(url)
    try:
        return set(sa_inspect(store.read_engine).get_table_names()) - {'alembic_version'}
    finally:
        store.dispose()


@pytest.mark.parametrize('backend', ['sqlite', 'postgresql'])
def test_migrations_up_down_and_up_again(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = f'sqlite:///{tmp_path / "m.db"}' if backend == 'sqlite' else request.getfixturevalue('pg_url')
    expected = {
        'sessions', 'session_evaluations', 'service_workers', 'traces', 'trace_spans', 'session_sampling', 'alerts',
    }  # fmt: skip
    upgrade(url)
    assert current_revision(url) == HEAD and _tables(url) == expected
    store = Store(url)
    indexes = {ix['name']: ix for ix in sa_inspect(store.read_engine).get_indexes('session_evaluations')}
    store.dispose()
    assert {
        'ix_session_evaluations_session_id', 'ix_session_evaluations_status_started', 'ix_session_evaluations_prompt_hash',
        'ix_session_evaluations_total_score', 'uq_session_evaluations_one_active',
        'uq_session_evaluations_one_active_scoring',
    } <= set(indexes)  # fmt: skip
    assert indexes['uq_session_evaluations_one_active']['unique']
    assert indexes['uq_session_evaluations_one_active_scoring']['unique']
    downgrade(url)
    assert current_revision(url) is None and _tables(url) == set()
    upgrade(url)
    assert current_revision(url) == HEAD and _tables(url) == expected
    # the partial unique index works after the round trip: a second active scoring is refused
    store = Store(url)
    session = repository.create_session(store, QueryRecord.model_validate(alert_record()), SessionStatus.COMPLETED, None, None)
    from sqlalchemy.exc import IntegrityError

    def scoring(status: str) -> EvaluationRow:
        return EvaluationRow(
            evaluation_id=os.urandom(8).hex(), session_id=session.session_id, judges=['investigation_score'],
            scoring='freeform', prompt_hash='h', triggered_by='u', status=status, started_at_us=now_us(),
        )  # fmt: skip

    with pytest.raises(IntegrityError), store.write() as db:
        for _ in range(2):
            db.add(scoring('pending'))
            db.flush()
    with store.write() as db:  # completed rows are not limited: history is kept
        for _ in range(2):
            db.add(scoring('completed'))
    with store.write() as db:  # an active scoring and an active evaluation of one session may run side by side
        db.add(scoring('pending'))
        db.add(EvaluationRow(evaluation_id=os.urandom(8).hex(), session_id=session.session_id, judges=['checks'],
                             triggered_by='u', status='pending', started_at_us=now_us()))  # fmt: skip
    store.dispose()


def test_shutdown_hands_pending_rows_to_a_live_peer(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    upgrade(url)
    store = Store(url)
    settings = fast_settings(url, concurrency=0, worker_id='api-only')  # queues work, runs none
    session = repository.create_session(store, QueryRecord.model_validate(alert_record()), SessionStatus.COMPLETED, None, None)
    result = repository.request_score(store, session.session_id, force=False, user='u', variant='freeform', owner='api-only')
    assert result.score is not None

    async def run() -> None:
        worker = ScoringWorker(store, EventHub(), ScriptedScorer().model(), settings)
        await worker.start()
        with store.write() as db:  # a live peer, heartbeat fresh
            db.add(WorkerRow(worker_id='peer', host='h', pid=os.getpid(), started_at_us=now_us(), heartbeat_at_us=now_us()))
        await worker.stop()

    asyncio.run(run())
    with store.read() as db:
        row = db.get(EvaluationRow, result.score.score_id)
        assert row is not None and (row.status, row.owner) == ('pending', 'peer')
    store.dispose()


def test_client_errors_are_not_retried_and_non_alert_sessions_fail_clearly(tmp_path: Path) -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    url = f'sqlite:///{tmp_path / "s.db"}'
    scorer = ScriptedScorer(fail_first=10**6, fail_with=lambda: ModelHTTPError(400, 'scripted', {'error': 'bad request'}))
    with live_server(fast_settings(url), scorer.model(), migrate=True) as srv, httpx.Client(base_url=srv.url) as c:
        session_id, _ = _create_and_score(c)
        body = wait_for(lambda: _finished(c, session_id), what='failure')
        assert (
            body['status'] == 'failed'
            and 'cannot be retried' in body['error_message']
            and 'status_code: 400' in body['error_message']
        )
        assert scorer.calls == 1
        record = {**alert_record('docs'), 'alert_data': None}
        session_id = c.post('/api/v1/sessions', json=record).json()['session_id']
        c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={})
        body = wait_for(lambda: _finished(c, session_id), what='failure')
        assert body['status'] == 'failed' and 'no alert_data' in body['error_message']
        assert scorer.calls == 1  # refused before any model call
