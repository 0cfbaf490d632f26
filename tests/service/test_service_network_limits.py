"""Hostile networks and hostile requests against the service, on SQLite and
PostgreSQL where the store is involved. Each test reproduces the finding as it was reported first:

3. DNS rebinding: `Host`/`Origin: evil.example:PORT` created sessions and read transcripts;
4. `--trusted-proxy` bypass: a loopback client's `X-Forwarded-For: <trusted ip>` let `mallory` in,
   while a sidecar proxy adding `X-Forwarded-For` got 401;
5. a foreign-origin WebSocket completed its handshake (101), on an unknown path too;
6. `GET /api/v1/health` (no token) showed `--base-url` with its password, stored in every score too;
2/7/8. OTLP: deep JSON in an attribute or a gzip body was a 500; no cap on spans; NaN attributes
   answered 422 on PostgreSQL and 200 on SQLite;
9. a restart failed pending work that had never started;
and the smaller ones: HEAD 405, DELETE 415.
"""

from __future__ import annotations

import gzip
import json
import logging
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text

from sensei_eval.models.judge_model import JudgeModel, redact_url, resolve_model
from sensei_eval.service.store import EvaluationRow, Store, TraceSpanRow

from .conftest import ScriptedScorer, alert_record, fast_settings, live_server, wait_for

TOKEN = 's3cret'
AUTH = {'Authorization': f'Bearer {TOKEN}'}


def _port(url: str) -> int:
    return int(url.rsplit(':', 1)[1])


def _ws_status(port: int, path: str, host: str, origin: str | None = None) -> int:
    """The HTTP status a WebSocket handshake gets (101 accepted), sent byte by byte as a browser would."""
    lines = [
        f'GET {path} HTTP/1.1', f'Host: {host}', 'Upgrade: websocket', 'Connection: Upgrade',
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13',
    ]  # fmt: skip
    if origin is not None:
        lines.append(f'Origin: {origin}')
    with socket.create_connection(('127.0.0.1', port), timeout=10) as s:
        s.sendall(('\r\n'.join(lines) + '\r\n\r\n').encode())
        head = s.recv(4096)
    return int(head.split(b'\r\n', 1)[0].split()[1])


# ---------------------------------------------------------------------------------------------------
# 3 + 5. DNS rebinding, Origin, WebSocket handshakes


def test_dns_rebinding_is_refused_on_every_request_and_websocket(db_url: str) -> None:
    with live_server(fast_settings(db_url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        port = _port(srv.url)
        evil = {'Host': f'evil.example:{port}', 'Origin': f'http://evil.example:{port}'}
        # the tester's requests: 201/202/200 before
        r = c.post('/api/v1/sessions', json=alert_record(), headers=evil)
        assert r.status_code == 400 and 'evil.example' in r.json()['detail'] and '--allowed-hosts' in r.json()['detail']
        assert c.get('/api/v1/sessions', headers={'Host': f'evil.example:{port}'}).status_code == 400
        assert c.get('/api/v1/health', headers={'Host': 'evil.example'}).status_code == 400
        assert c.get('/', headers={'Host': 'evil.example'}).status_code == 400
        # the service's own names work
        for host in (f'127.0.0.1:{port}', f'localhost:{port}', 'localhost'):
            assert c.get('/api/v1/sessions', headers={'Host': host}).status_code == 200, host
        session = c.post('/api/v1/sessions', json=alert_record(), headers={'Origin': srv.url}).json()['session_id']
        assert c.get(f'/api/v1/sessions/{session}').status_code == 200
        # WebSockets: a foreign Host or Origin is refused at the handshake (403), on every path
        own = f'127.0.0.1:{port}'
        assert _ws_status(port, '/api/v1/ws', own, srv.url) == 101
        assert _ws_status(port, '/api/v1/ws', own) == 101  # no Origin: not a browser
        for path in ('/api/v1/ws', '/nope', '/api/v1/ws?channels=sessions'):
            assert _ws_status(port, path, f'evil.example:{port}', f'http://evil.example:{port}') == 403, path
            assert _ws_status(port, path, own, 'http://evil.example') == 403, path
            assert _ws_status(port, path, own, 'null') == 403, path
        assert _ws_status(port, '/nope', own, srv.url) == 403  # an unknown path, own origin: the router's 403


def test_allowed_hosts_take_names_and_wildcards(tmp_path: Path) -> None:
    from sensei_eval.service.migrate import upgrade

    url = f'sqlite:///{tmp_path / "s.db"}'
    upgrade(url)
    settings = fast_settings(url, allowed_hosts=frozenset({'scoring.example.com', '*.internal.example'}))
    with live_server(settings, ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        port = _port(srv.url)
        assert c.get('/api/v1/health').status_code == 400  # 127.0.0.1 is no longer listed
        assert c.get('/api/v1/health', headers={'Host': 'scoring.example.com'}).status_code == 200
        assert c.get('/api/v1/health', headers={'Host': f'a.internal.example:{port}'}).status_code == 200
        assert c.get('/api/v1/health', headers={'Host': 'internal.example.evil'}).status_code == 400
        own = {'Host': 'scoring.example.com', 'Origin': 'https://scoring.example.com'}
        assert c.post('/api/v1/sessions', json=alert_record(), headers=own).status_code == 201
        # an origin whose host is not the request's own is still foreign
        mixed = {'Host': 'scoring.example.com', 'Origin': 'https://a.internal.example'}
        assert c.post('/api/v1/sessions', json=alert_record(), headers=mixed).status_code == 403


# ---------------------------------------------------------------------------------------------------
# 4. Trusted proxies


def test_x_forwarded_for_from_loopback_does_not_pass_for_a_trusted_proxy(db_url: str) -> None:
    settings = fast_settings(db_url, behind_proxy=True, trusted_proxies=frozenset({'10.0.0.5'}))
    with live_server(settings, ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        spoof = {'X-Forwarded-For': '10.0.0.5', 'X-Forwarded-User': 'mallory'}
        assert c.post('/api/v1/sessions', json=alert_record(), headers=spoof).status_code == 401
        assert c.get('/api/v1/sessions', headers=spoof).status_code == 401


def test_a_sidecar_proxy_adding_x_forwarded_for_is_served_and_audited(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger='sensei_eval.service.audit')
    settings = fast_settings(db_url, behind_proxy=True, trusted_proxies=frozenset({'127.0.0.1'}))
    with live_server(settings, ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        sidecar = {'X-Forwarded-For': '203.0.113.9', 'X-Forwarded-User': 'carol'}
        r = c.post('/api/v1/sessions', json=alert_record(), headers=sidecar)
        assert r.status_code == 201, r.text  # 401 before: the forwarded address was checked, not the proxy's
        assert c.get(f'/api/v1/sessions/{r.json()["session_id"]}', headers=sidecar).json()['created_by'] == 'carol'
    lines = [r.getMessage() for r in caplog.records if r.name == 'sensei_eval.service.audit']
    assert any('POST /api/v1/sessions by carol from 203.0.113.9: 201' in line for line in lines), lines


def test_serve_runs_uvicorn_without_its_own_proxy_headers_and_with_a_host_allowlist(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import uvicorn
    from typer.testing import CliRunner

    from sensei_eval.cli import app as entry
    from sensei_eval.models import judge_model as models

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, 'run', lambda app, **kw: seen.update(kw, settings=app.state.service.settings))
    monkeypatch.setattr(models, 'resolve_model', lambda *a, **k: ScriptedScorer().model())
    model = ['--model', 'test']  # a judge model named, as serve requires (resolved by the stub above)
    result = CliRunner().invoke(entry.app, ['serve', '--host', '127.0.0.2', '--db', str(tmp_path / 's.db'), *model])
    assert result.exit_code == 0, result.output
    assert seen['proxy_headers'] is False
    assert {'127.0.0.2', 'localhost', '127.0.0.1'} <= seen['settings'].allowed_hosts
    hosts = ['--allowed-hosts', 'a.example,b.example']
    result = CliRunner().invoke(entry.app, ['serve', *hosts, '--db', str(tmp_path / 's.db'), *model])
    assert result.exit_code == 0 and seen['settings'].allowed_hosts == {'a.example', 'b.example'}


# ---------------------------------------------------------------------------------------------------
# 6. Credentials in URLs


def test_redact_url() -> None:
    assert redact_url('http://user:pw@host:8080/v1') == 'http://user:***@host:8080/v1'
    assert redact_url('https://sk-TOKEN@host/v1') == 'https://***@host/v1'
    assert redact_url('https://host/v1?api-key=abc&x=1') == 'https://host/v1?api-key=***&x=1'
    assert redact_url('http://host:8000/v1') == 'http://host:8000/v1'
    assert redact_url('http://[::1:8000/v1') == '***'


def test_health_and_stored_rows_never_show_the_base_url_password(db_url: str) -> None:
    model = resolve_model('m', base_url='http://judge:hunter2@127.0.0.1:9/v1')
    assert 'hunter2' not in model.name and 'judge:***@127.0.0.1:9' in model.name and 'hunter2' not in model.where
    scripted = ScriptedScorer().model()
    shown = JudgeModel(scripted.model, model.name, scripted.transcript_budget)
    with live_server(fast_settings(db_url, token=TOKEN), shown) as srv, httpx.Client(base_url=srv.url) as c:
        assert c.get('/api/v1/health').json() == {'status': 'ok'}  # no token: only that it is up
        full = c.get('/api/v1/health', headers=AUTH).json()
        assert full['model'] == model.name and 'worker_id' in full
        sid = c.post('/api/v1/sessions', json=alert_record(), headers=AUTH).json()['session_id']
        assert c.post(f'/api/v1/scoring/sessions/{sid}/score', json={}, headers=AUTH).status_code == 202
        assert c.post(f'/api/v1/sessions/{sid}/evaluate', json={'evaluators': ['tool_selection']}, headers=AUTH).status_code in (
            200,
            202,
        )
        wait_for(lambda: c.get(f'/api/v1/scoring/sessions/{sid}/score', headers=AUTH).json()['status'] == 'completed')
        wait_for(
            lambda: c.get(f'/api/v1/sessions/{sid}/evaluation', headers=AUTH).json().get('status') in ('completed', 'failed')
        )
        store = Store(db_url)
        with store.read() as db:
            rows = list(db.scalars(select(EvaluationRow)))
            assert rows and all('hunter2' not in json.dumps(r.model) for r in rows)
            assert all('hunter2' not in json.dumps(r.report or {}) for r in rows if isinstance(r, EvaluationRow))
        store.dispose()


# ---------------------------------------------------------------------------------------------------
# 2, 7, 8. OTLP


def _span(trace: str, span: str, parent: str | None, name: str, attrs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        'traceId': trace, 'spanId': span, 'parentSpanId': parent or '', 'name': name,
        'startTimeUnixNano': '1700000000000000000', 'endTimeUnixNano': '1700000001000000000', 'attributes': attrs,
    }  # fmt: skip


def _request(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {'resourceSpans': [{'resource': {'attributes': []}, 'scopeSpans': [{'spans': spans}]}]}


def test_otlp_caps_deep_json_and_non_finite_numbers(db_url: str) -> None:
    settings = fast_settings(db_url, token=TOKEN, otlp_max_spans=20, otlp_max_attributes=40)
    gz = {**AUTH, 'Content-Type': 'application/json', 'Content-Encoding': 'gzip'}
    with live_server(settings, ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url, timeout=60) as c:
        # caps: 413 naming the cap, before any span is stored
        many = _request([_span('a' * 32, f'{n + 1:016x}', 'f' * 16, 'x', []) for n in range(21)])
        r = c.post('/v1/traces', json=many, headers=AUTH)
        assert r.status_code == 413 and 'cap of 20 spans per request' in r.json()['detail']
        attrs = [{'key': f'k{n}', 'value': {'intValue': n}} for n in range(41)]
        r = c.post(
            '/v1/traces',
            content=gzip.compress(json.dumps(_request([_span('a' * 32, '1' * 16, 'f' * 16, 'x', attrs)])).encode()),
            headers=gz,
        )
        assert r.status_code == 413 and 'cap of 40 attributes per request' in r.json()['detail']
        assert c.get('/api/v1/traces', headers=AUTH).json()['total'] == 0

        # a gzip body nested 100k levels: 422 naming the limit (a RecursionError and a 500 before)
        deep_body = gzip.compress(('[' * 100_000 + ']' * 100_000).encode())
        r = c.post('/v1/traces', content=deep_body, headers=gz)
        assert r.status_code == 422 and 'nested deeper than' in r.json()['detail']

        # message history nested 100k levels in an attribute: this run is refused with its field, nothing else
        deep = '[' * 100_000 + ']' * 100_000
        root = _span('b' * 32, '2' * 16, None, 'invoke_agent a', [
            {'key': 'gen_ai.operation.name', 'value': {'stringValue': 'invoke_agent'}},
            {'key': 'pydantic_ai.all_messages', 'value': {'stringValue': deep}},
        ])  # fmt: skip
        for body, headers in ((json.dumps(_request([root])).encode(), {**AUTH, 'Content-Type': 'application/json'}),):
            r = c.post('/v1/traces', content=body, headers=headers)
            assert r.status_code == 200, r.text
        trace = c.get(f'/api/v1/traces/{"b" * 32}', headers=AUTH).json()
        assert (
            trace['status'] == 'rejected' and 'pydantic_ai.all_messages' in trace['error'] and 'nested deeper' in trace['error']
        )
        again = json.dumps(_request([{**root, 'traceId': 'c' * 32}])).encode()
        assert c.post('/v1/traces', content=gzip.compress(again), headers=gz).status_code == 200
        assert c.get(f'/api/v1/traces/{"c" * 32}', headers=AUTH).json()['status'] == 'rejected'

        # NaN / ±Infinity doubles (OTLP JSON writes them as strings): the same 200 and the same stored text on both stores
        odd = [
            {'key': k, 'value': {'doubleValue': v}} for k, v in (('n', 'NaN'), ('p', 'Infinity'), ('m', '-Infinity'), ('f', 1.5))
        ]
        r = c.post('/v1/traces', json=_request([_span('d' * 32, '3' * 16, 'e' * 16, 'child', odd)]), headers=AUTH)
        assert r.status_code == 200 and r.json() == {}, r.text
        store = Store(db_url)
        with store.read() as db:
            [stored] = db.scalars(select(TraceSpanRow.span).where(TraceSpanRow.trace_id == 'd' * 32))
        store.dispose()
        assert stored['attributes'] == {'n': 'NaN', 'p': 'Infinity', 'm': '-Infinity', 'f': 1.5}

        # and as protobuf, where they are real doubles
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        pb = ExportTraceServiceRequest()
        span = pb.resource_spans.add().scope_spans.add().spans.add()
        span.trace_id, span.span_id, span.parent_span_id, span.name = (
            bytes.fromhex('9' * 32),
            bytes.fromhex('4' * 16),
            bytes.fromhex('e' * 16),
            'child',
        )
        for key, value in (('n', float('nan')), ('p', float('inf'))):
            kv = span.attributes.add()
            kv.key, kv.value.double_value = key, value
        r = c.post('/v1/traces', content=pb.SerializeToString(), headers={**AUTH, 'Content-Type': 'application/x-protobuf'})
        assert r.status_code == 200
        store = Store(db_url)
        with store.read() as db:
            [stored] = db.scalars(select(TraceSpanRow.span).where(TraceSpanRow.trace_id == '9' * 32))
        store.dispose()
        assert stored['attributes'] == {'n': 'NaN', 'p': 'Infinity'}


def test_a_large_otlp_request_is_written_in_batches(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One trace over several batches: earlier batches only buffer, its root (sent first!) is written last."""
    from sensei_eval.service import trace_ingest

    monkeypatch.setattr(trace_ingest, 'BATCH_SPANS', 7)
    batches: list[int] = []
    real = trace_ingest._ingest

    def counting(store: Any, by_trace: Any, *args: Any) -> Any:
        batches.append(sum(len(s) for s in by_trace.values()))
        return real(store, by_trace, *args)

    monkeypatch.setattr(trace_ingest, '_ingest', counting)
    settings = fast_settings(db_url, token=TOKEN)
    root = _span('7' * 32, '1' * 16, None, 'wrapper', [])
    children = [_span('7' * 32, f'{n + 2:016x}', '1' * 16, 'child', []) for n in range(20)]
    with live_server(settings, ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        r = c.post('/v1/traces', json=_request([root, *children]), headers=AUTH)
        assert r.status_code == 200
        assert batches == [7, 7, 7] and sum(batches) == 21
        trace = c.get(f'/api/v1/traces/{"7" * 32}', headers=AUTH).json()
        assert trace['span_count'] == 21 and trace['root_seen'] and trace['status'] in ('ingested', 'rejected')


# ---------------------------------------------------------------------------------------------------
# 9. Restart: pending work is requeued


def test_restart_requeues_pending_work_and_fails_only_what_was_running(db_url: str) -> None:
    # an API-only process (it runs nothing) queues 5 scorings; no heartbeat recovers anything meanwhile
    settings = fast_settings(db_url, concurrency=0, heartbeat_s=3600)
    with live_server(settings, ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        ids = [c.post('/api/v1/sessions', json=alert_record(f'q{n}')).json()['session_id'] for n in range(5)]
        for sid in ids:
            assert c.post(f'/api/v1/scoring/sessions/{sid}/score', json={}).status_code == 202
        store = Store(db_url)
        with store.write() as db:  # owned by a process that will die (so this one's clean stop leaves them)
            db.execute(text("UPDATE session_evaluations SET owner = 'dead-host:1:000000'"))
        store.dispose()
    # kill -9 with 2 of them running and 3 pending: the rows stay as the dead process left them
    store = Store(db_url)
    with store.write() as db:
        for sid in ids[:2]:
            db.execute(
                text("UPDATE session_evaluations SET status = 'in_progress' WHERE session_id = :s AND scoring IS NOT NULL"),
                {'s': sid},
            )
    store.dispose()
    with live_server(fast_settings(db_url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:

        def statuses() -> dict[str, str]:
            return {sid: c.get(f'/api/v1/scoring/sessions/{sid}/score').json()['status'] for sid in ids}

        def finished() -> dict[str, str] | None:
            now = statuses()
            return now if all(v in ('completed', 'failed') for v in now.values()) else None

        done = wait_for(finished, what='recovery')
        assert [done[sid] for sid in ids] == ['failed', 'failed', 'completed', 'completed', 'completed']
        error = c.get(f'/api/v1/scoring/sessions/{ids[0]}/score').json()['error_message']
        assert 'orphaned' in error


# ---------------------------------------------------------------------------------------------------
# Smaller: 405s


def test_head_is_answered_like_get_and_a_wrong_method_is_405(db_url: str) -> None:
    with live_server(fast_settings(db_url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        for path in ('/api/v1/health', '/api/v1/sessions', '/'):
            get, head = c.get(path), c.head(path)
            assert head.status_code == get.status_code == 200, path
            assert head.content == b'' and head.headers.get('content-length') == get.headers.get('content-length'), path
        sid = c.post('/api/v1/sessions', json=alert_record()).json()['session_id']
        for headers in ({}, {'Content-Type': 'application/json'}, {'Content-Type': 'text/plain'}):
            r = c.delete(f'/api/v1/sessions/{sid}', headers=headers)
            assert r.status_code == 405 and 'DELETE' not in r.headers['allow'], (headers, r.status_code)
        assert c.put('/api/v1/health', headers={'Content-Type': 'text/plain'}).status_code == 405
        # a write a route takes still needs JSON
        assert c.post('/api/v1/sessions', content=b'{}', headers={'Content-Type': 'text/plain'}).status_code == 415
