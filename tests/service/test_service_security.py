"""The tester's findings against the service, each reproduced as it was reported, then held fixed.

1. a lone surrogate (or a NUL) in posted text was stored, then every list page holding it returned 500;
3. `--behind-proxy --token` trusted any X-Forwarded-User and refused the token; reads stayed open;
4. any web page could drive the service: foreign-Origin WebSockets, CORS-simple text/plain POSTs;
5. 500s for bad requests, different per backend: offset 2**63, NULs in the URL, 300-character ids, a
   WebSocket frame of 100,000 nested `[`;
7. a failed scoring's raw model output was not in the API; embedded-model scores were not marked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from sensei_eval.core.sanitize import MAX_ID_LENGTH, REPLACEMENT
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.service import ServiceSettings
from sensei_eval.service.migrate import HEAD, current_revision, downgrade, upgrade
from sensei_eval.service.store import Store

from .conftest import ScriptedScorer, alert_record, fast_settings, live_server, wait_for

JSON = {'Content-Type': 'application/json'}


def _sqlite(tmp_path: Path) -> str:
    url = f'sqlite:///{tmp_path / "s.db"}'
    upgrade(url)
    return url


def _post_raw(c: httpx.Client, path: str, text: str, **headers: str) -> httpx.Response:
    """POST a JSON text as written (json.dumps would not let a lone surrogate through as an escape)."""
    return c.post(path, content=text.encode(), headers={**JSON, **headers})


async def _ws_close(url: str, send: str | None = None, **kwargs: Any) -> tuple[int | None, str, list[str]]:
    """Connect, optionally send one frame, read until the server closes; (code, reason, frames read)."""
    frames: list[str] = []
    async with connect(url, open_timeout=10, close_timeout=5, max_size=None, **kwargs) as ws:
        if send is not None:
            await ws.send(send)
        try:
            while True:
                frames.append(str(await asyncio.wait_for(ws.recv(), timeout=10)))
        except ConnectionClosed:
            pass
        code = ws.close_code
        reason = ws.close_reason or ''
    return code, reason, frames


async def _ws_confirms(url: str, **kwargs: Any) -> dict[str, Any]:
    async with connect(url, open_timeout=10, **kwargs) as ws:
        event: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
        return event


# ---------------------------------------------------------------------------------------------------
# 1. Lone surrogates and NULs in posted text


def test_lone_surrogate_and_nul_are_replaced_on_ingest_and_every_page_still_renders(db_url: str) -> None:
    record = alert_record('surrogate-1')
    text = json.dumps({**record, 'agent': 'fuzz'})
    # the tester's payload: a lone surrogate (as a JSON escape, the only way it travels) and a NUL
    text = text.replace('Investigate the alert', 'Investigate \\ud800 the \\u0000 alert', 1)
    text = text.replace('"alert_type"', '"alert\\udfff_type"', 1)
    with live_server(fast_settings(db_url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        r = _post_raw(c, '/api/v1/sessions', text)
        assert r.status_code == 201, r.text
        body = r.json()
        assert len(body['warnings']) == 1 and 'U+FFFD' in body['warnings'][0]
        assert 'messages[0].content' in body['warnings'][0] and 'alert_data.alert' in body['warnings'][0]
        session_id = body['session_id']
        # every page that holds it answers (before the fix: 500 on the list and the dashboard)
        page = c.get('/api/v1/sessions')
        assert page.status_code == 200 and page.json()['total'] == 1
        detail = c.get(f'/api/v1/sessions/{session_id}')
        assert detail.status_code == 200
        content = detail.json()['record']['messages'][0]['content']
        assert content.startswith(f'Investigate {REPLACEMENT} the {REPLACEMENT} alert')
        assert f'alert{REPLACEMENT}_type' in detail.json()['record']['alert_data']
        assert detail.json()['warnings'] == body['warnings']
        assert c.get('/api/v1/dashboard/sessions').status_code == 200
        assert c.get(f'/api/v1/dashboard/sessions/{session_id}').status_code == 200
        assert c.get('/').status_code == 200
        # a clean record has no warnings
        clean = c.post('/api/v1/sessions', json=alert_record('clean-1'))
        assert clean.status_code == 201 and clean.json()['warnings'] == []
        assert c.get(f'/api/v1/sessions/{clean.json()["session_id"]}').json()['warnings'] == []


# ---------------------------------------------------------------------------------------------------
# 5. Bad requests are 4xx, the same on SQLite and PostgreSQL


def test_bad_ids_offsets_and_nuls_are_4xx_with_one_message_on_both_backends(db_url: str) -> None:
    with live_server(fast_settings(db_url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        session_id = c.post('/api/v1/sessions', json=alert_record()).json()['session_id']
        answers: dict[str, tuple[int, Any]] = {}

        def check(name: str, response: httpx.Response, status: int) -> None:
            assert response.status_code == status, (name, response.status_code, response.text)
            answers[name] = (response.status_code, response.json())

        huge = str(2**63)
        check('offset', c.get('/api/v1/sessions', params={'offset': huge}), 422)
        check('dash-offset', c.get('/api/v1/dashboard/sessions', params={'offset': huge}), 422)
        check('limit', c.get('/api/v1/sessions', params={'limit': huge}), 422)
        check('nul-path', c.get('/api/v1/sessions/a%00b'), 400)
        check('nul-score', c.get('/api/v1/scoring/sessions/a%00b/score'), 400)
        check('nul-query', c.get('/api/v1/sessions', params={'agent': 'a\x00b'}), 400)
        check('nul-post-path', c.post('/api/v1/scoring/sessions/a%00b/score', json={}), 400)
        check('long-query-id', c.post('/api/v1/sessions', json=alert_record('q' * 300)), 422)
        check('long-path-id', c.get(f'/api/v1/sessions/{"s" * 300}'), 422)
        check('long-score-id', c.post(f'/api/v1/scoring/sessions/{"s" * 300}/score', json={}), 422)
        check('long-agent', c.post('/api/v1/sessions', json={**alert_record(), 'agent': 'a' * 300}), 422)
        # a NUL inside a posted id is text like any other: replaced, stored, reported
        r = c.post('/api/v1/sessions', json=alert_record('id\x00with-nul'))
        assert r.status_code == 201 and r.json()['warnings']
        assert c.get(f'/api/v1/sessions/{r.json()["session_id"]}').json()['query_id'] == f'id{REPLACEMENT}with-nul'
        # the longest id allowed is stored on both backends
        ok = c.post('/api/v1/sessions', json=alert_record('q' * MAX_ID_LENGTH))
        assert ok.status_code == 201, ok.text
        assert c.get('/api/v1/sessions', params={'offset': 10**9}).json()['items'] == []
        assert c.get(f'/api/v1/sessions/{session_id}').status_code == 200
    messages = {name: body for name, (_, body) in answers.items()}
    assert messages['nul-path'] == {'detail': 'a NUL character is not allowed in the URL'}
    assert 'at most 255' in json.dumps(messages['long-query-id'])
    # the exact answers are pinned per backend run: compare them with the other backend's run
    _ANSWERS.setdefault('runs', []).append(messages)
    if len(_ANSWERS['runs']) == 2:
        sqlite, postgres = _ANSWERS['runs']
        assert sqlite == postgres


_ANSWERS: dict[str, list[dict[str, Any]]] = {}


def test_deep_json_is_refused_cleanly_over_http_and_websocket(tmp_path: Path) -> None:
    url = _sqlite(tmp_path)
    with live_server(fast_settings(url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        deep = '[' * 100_000 + ']' * 100_000
        r = _post_raw(c, '/api/v1/sessions', deep)
        assert r.status_code == 422 and 'nested deeper' in r.json()['detail']
        nested_metadata = json.dumps({**alert_record(), 'metadata': {'a': json.loads('[' * 80 + ']' * 80)}})
        assert _post_raw(c, '/api/v1/sessions', nested_metadata).status_code == 422
        # the tester's frame: before the fix, an uncaught RecursionError dropped the socket without a close frame
        code, reason, _ = asyncio.run(_ws_close(f'{srv.ws_url}/api/v1/ws', send='[' * 100_000))
        assert code == 1007 and 'nested deeper' in reason
        code, reason, _ = asyncio.run(_ws_close(f'{srv.ws_url}/api/v1/ws', send='x' * (2 * 1024 * 1024)))
        assert code == 1009
        # NaN and Infinity are not JSON: PostgreSQL would refuse them and no response could carry them
        for constant in ('NaN', 'Infinity', '1e400'):
            text = json.dumps(alert_record()).replace('{', '{"metadata": {"x": ' + constant + '}, ', 1)
            r = _post_raw(c, '/api/v1/sessions', text)
            assert r.status_code == 422 and 'request body refused' in r.json()['detail'], (constant, r.text)
        # a bad but shallow frame still gets an error event and the socket stays usable
        assert c.get('/api/v1/health').json()['status'] == 'ok'

        async def still_usable() -> list[dict[str, Any]]:
            async with connect(f'{srv.ws_url}/api/v1/ws', open_timeout=10) as ws:
                await ws.send('[1, 2]')
                first = json.loads(await ws.recv())
                await ws.send(json.dumps({'action': 'subscribe', 'channel': 'sessions'}))
                return [first, json.loads(await ws.recv())]

        error, confirmed = asyncio.run(still_usable())
        assert error['type'] == 'error' and confirmed['type'] == 'subscription.confirmed'


# ---------------------------------------------------------------------------------------------------
# 3. Token, proxy, public reads


def test_behind_proxy_needs_the_token_and_names_the_proxy_user(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger='sensei_eval.service.audit')
    url = _sqlite(tmp_path)
    settings = fast_settings(url, behind_proxy=True, token='s3cret')
    with live_server(settings, ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        # the tester's finding: the header alone was enough (201) and the token alone was refused (401)
        r = c.post('/api/v1/sessions', json=alert_record(), headers={'X-Forwarded-User': 'mallory'})
        assert r.status_code == 401
        assert c.post('/api/v1/sessions', json=alert_record()).status_code == 401
        token_only = c.post('/api/v1/sessions', json=alert_record(), headers={'Authorization': 'Bearer s3cret'})
        assert token_only.status_code == 201
        proxied = {'Authorization': 'Bearer s3cret', 'X-Forwarded-User': 'alice'}
        session_id = c.post('/api/v1/sessions', json=alert_record(), headers=proxied).json()['session_id']
        assert c.get(f'/api/v1/sessions/{session_id}', headers=proxied).json()['created_by'] == 'alice'
        r = c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={}, headers=proxied)
        assert r.status_code == 202 and r.json()['score_triggered_by'] == 'alice'
        email = {'Authorization': 'Bearer s3cret', 'X-Forwarded-Email': 'bob@example.com'}
        other = c.post('/api/v1/sessions', json=alert_record(), headers=email).json()['session_id']
        assert c.get(f'/api/v1/sessions/{other}', headers=email).json()['created_by'] == 'bob@example.com'
    lines = [r.getMessage() for r in caplog.records if r.name == 'sensei_eval.service.audit']
    assert any(f'POST /api/v1/scoring/sessions/{session_id}/score by alice' in line and line.endswith(': 202') for line in lines)
    assert any('POST /api/v1/sessions by token' in line and line.endswith(': 201') for line in lines)
    assert any('refused' in line and 'not authenticated' in line for line in lines)


def test_proxy_user_header_without_token_or_trusted_address_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match='behind_proxy needs a token'):
        ServiceSettings(behind_proxy=True)
    with pytest.raises(ValueError, match='only means something with behind_proxy'):
        ServiceSettings(trusted_proxies=frozenset({'127.0.0.1'}))


def test_trusted_proxy_address_may_name_the_user_without_the_token(tmp_path: Path) -> None:
    url = _sqlite(tmp_path)
    trusted = fast_settings(url, behind_proxy=True, trusted_proxies=frozenset({'127.0.0.1'}))
    with live_server(trusted, ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        r = c.post('/api/v1/sessions', json=alert_record(), headers={'X-Forwarded-User': 'carol'})
        assert r.status_code == 201
        assert c.get('/api/v1/sessions').status_code == 401  # a request without the proxy's header proves nothing
        assert c.get('/api/v1/sessions', headers={'X-Forwarded-User': 'carol'}).status_code == 200
    elsewhere = fast_settings(url, behind_proxy=True, trusted_proxies=frozenset({'10.9.9.9'}))
    with live_server(elsewhere, ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        assert c.post('/api/v1/sessions', json=alert_record(), headers={'X-Forwarded-User': 'carol'}).status_code == 401


def test_with_a_token_reads_need_it_unless_public_read(tmp_path: Path) -> None:
    url = _sqlite(tmp_path)
    auth = {'Authorization': 'Bearer s3cret'}
    with (
        live_server(fast_settings(url, token='s3cret'), ScriptedScorer().model()) as srv,
        httpx.Client(base_url=srv.url) as c,
    ):
        session_id = c.post('/api/v1/sessions', json=alert_record(), headers=auth).json()['session_id']
        for path in (
            '/api/v1/sessions',
            f'/api/v1/sessions/{session_id}',
            f'/api/v1/scoring/sessions/{session_id}/scores',
            '/api/v1/dashboard/sessions',
            '/api/v1/dashboard/patterns',
            '/',
            '/static/dashboard/app.js',
            '/docs',
            '/openapi.json',
        ):
            assert c.get(path).status_code == 401, path
            assert c.get(path, headers=auth).status_code == 200, path
        assert c.get('/api/v1/health').status_code == 200  # the one open route
        code, reason, frames = asyncio.run(_ws_close(f'{srv.ws_url}/api/v1/ws?channels=sessions'))
        assert code == 1008 and 'authentication' in reason and frames == []
        event = asyncio.run(_ws_confirms(f'{srv.ws_url}/api/v1/ws?channels=sessions', additional_headers=auth))
        assert event['type'] == 'subscription.confirmed'

    with (
        live_server(fast_settings(url, token='s3cret', public_read=True), ScriptedScorer().model()) as srv,
        httpx.Client(base_url=srv.url) as c,
    ):
        for path in ('/api/v1/sessions', f'/api/v1/sessions/{session_id}', '/api/v1/dashboard/sessions', '/', '/docs'):
            assert c.get(path).status_code == 200, path
        event = asyncio.run(_ws_confirms(f'{srv.ws_url}/api/v1/ws?channels=sessions'))
        assert event['type'] == 'subscription.confirmed'
        # writes still need it
        assert c.post('/api/v1/sessions', json=alert_record()).status_code == 401
        assert c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={}).status_code == 401
        assert c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={}, headers=auth).status_code == 202


# ---------------------------------------------------------------------------------------------------
# 4. Other origins


def test_foreign_origin_websocket_and_simple_posts_are_refused(tmp_path: Path) -> None:
    url = _sqlite(tmp_path)
    gate = threading.Event()
    scorer = ScriptedScorer(gate=gate)
    settings = fast_settings(url, allowed_origins=frozenset({'https://dash.example.com'}))
    with live_server(settings, scorer.model()) as srv, httpx.Client(base_url=srv.url) as c:
        session_id = c.post('/api/v1/sessions', json=alert_record()).json()['session_id']
        ws = f'{srv.ws_url}/api/v1/ws?channels=sessions'
        # the tester's page read live events from another origin: now its handshake is refused (403)
        for origin in ('http://evil.example', 'null'):
            with pytest.raises(InvalidStatus) as refused:
                asyncio.run(_ws_close(ws, origin=origin))
            assert refused.value.response.status_code == 403, origin
        # its own origin, an allowed one, and a client without Origin (not a browser) are served
        own = srv.url
        for origin in (own, 'https://dash.example.com', None):
            kwargs = {'origin': origin} if origin else {}
            assert asyncio.run(_ws_confirms(ws, **kwargs))['type'] == 'subscription.confirmed', origin

        # the tester's CORS-simple POSTs: body-less and text/plain
        score = f'/api/v1/scoring/sessions/{session_id}/score'
        evaluate = f'/api/v1/sessions/{session_id}/evaluate'
        for path in (score, evaluate, f'/api/v1/sessions/{session_id}/score'):
            assert c.post(path).status_code == 415
            assert c.post(path, content=b'{}', headers={'Content-Type': 'text/plain'}).status_code == 415
            assert c.post(path, content=b'x=1', headers={'Content-Type': 'application/x-www-form-urlencoded'}).status_code == 415
        assert c.patch(f'/api/v1/sessions/{session_id}', content=b'{"status": "failed"}').status_code == 415
        # a JSON write carrying a foreign Origin is refused too (a browser would have asked first)
        r = c.post(score, json={}, headers={'Origin': 'http://evil.example'})
        assert r.status_code == 403 and 'origin' in r.json()['detail']
        assert c.get(f'/api/v1/scoring/sessions/{session_id}/scores').json() == []
        assert c.get(f'/api/v1/sessions/{session_id}/evaluation').status_code == 404
        # a same-origin JSON write (what the dashboard sends) is served
        r = c.post(score, json={}, headers={'Origin': own})
        assert r.status_code == 202
        gate.set()


def test_openapi_still_describes_the_routes(tmp_path: Path) -> None:
    url = _sqlite(tmp_path)
    with live_server(fast_settings(url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        spec = c.get('/openapi.json').json()
    assert '/api/v1/sessions' in spec['paths']
    params = {p['name']: p for p in spec['paths']['/api/v1/sessions']['get']['parameters']}
    assert params['offset']['schema']['maximum'] == 1_000_000_000


# ---------------------------------------------------------------------------------------------------
# 7. Raw output of a failed scoring; the smoke mark


def test_failed_scoring_keeps_the_raw_model_output(db_url: str) -> None:
    scorer = ScriptedScorer(score_text='I think it went fine overall, roughly ninety-ish.')
    with live_server(fast_settings(db_url), scorer.model()) as srv, httpx.Client(base_url=srv.url) as c:
        session_id = c.post('/api/v1/sessions', json=alert_record()).json()['session_id']
        c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={})
        body = wait_for(
            lambda: (b := c.get(f'/api/v1/scoring/sessions/{session_id}/score').json())['status'] == 'failed' and b,
            what='failed scoring',
        )
        assert body['total_score'] is None and 'no valid total score' in body['error_message']
        assert body['raw_output'] == 'I think it went fine overall, roughly ninety-ish.'
        assert body['smoke'] is False
        history = c.get(f'/api/v1/scoring/sessions/{session_id}/scores').json()
        assert history[0]['raw_output'] == body['raw_output']
        assert c.get(f'/api/v1/sessions/{session_id}').json()['latest_scoring']['raw_output'] == body['raw_output']
        view = c.get(f'/api/v1/dashboard/sessions/{session_id}').json()
        assert view['latest_scoring']['raw_output'] == body['raw_output']


def test_embedded_model_scores_are_marked_smoke_and_left_out_of_patterns(db_url: str) -> None:
    scorer = ScriptedScorer()
    embedded = JudgeModel(scorer.model().model, 'embedded:SmolLM2-135M-Instruct', embedded=True)
    with live_server(fast_settings(db_url), embedded) as srv, httpx.Client(base_url=srv.url) as c:
        session_id = c.post('/api/v1/sessions', json=alert_record()).json()['session_id']
        c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={})
        body = wait_for(
            lambda: (b := c.get(f'/api/v1/scoring/sessions/{session_id}/score').json())['status'] == 'completed' and b,
            what='embedded scoring',
        )
        assert body['smoke'] is True and body['total_score'] == 45
        assert c.get(f'/api/v1/scoring/sessions/{session_id}/scores').json()[0]['smoke'] is True
        summary = c.get('/api/v1/sessions').json()['items'][0]
        assert summary['score']['smoke'] is True and summary['score']['raw_output'] is None  # lists stay small
        row = c.get('/api/v1/dashboard/sessions').json()['items'][0]
        assert row['smoke'] is True and row['total_score'] == 45
        view = c.get(f'/api/v1/dashboard/sessions/{session_id}').json()
        assert view['score']['score']['smoke'] is True and view['history'][0]['score']['smoke'] is True
        patterns = c.get('/api/v1/dashboard/patterns').json()
        assert patterns['scored_sessions'] == 0 and patterns['smoke_left_out'] == 1
        assert sum(b['count'] for b in patterns['histogram']) == 0
        included = c.get('/api/v1/dashboard/patterns', params={'include_smoke': 'true'}).json()
        assert included['scored_sessions'] == 1 and included['include_smoke'] is True
        # the failure-mode judges' evaluations by the embedded model are smoke too
        c.post(f'/api/v1/sessions/{session_id}/evaluate', json={'evaluators': ['completeness']})
        evaluation = wait_for(
            lambda: (
                (e := c.get(f'/api/v1/sessions/{session_id}/evaluation').json())['status'] not in ('pending', 'in_progress') and e
            ),
            what='embedded evaluation',
        )
        assert evaluation['smoke'] is True


def test_migration_0002_goes_down_and_up(tmp_path: Path) -> None:
    url = _sqlite(tmp_path)
    from sqlalchemy import inspect as sa_inspect

    def columns(table: str) -> set[str]:
        store = Store(url)
        try:
            return {c['name'] for c in sa_inspect(store.read_engine).get_columns(table)}
        finally:
            store.dispose()

    downgrade(url, '0008')  # the scorings' own table, before 0009 moved them into the job table
    assert {'smoke', 'raw_output'} <= columns('session_scores') and 'warnings' in columns('sessions')
    downgrade(url, '0001')
    assert current_revision(url) == '0001' and 'smoke' not in columns('session_scores')
    assert 'smoke' not in columns('session_evaluations') and 'warnings' not in columns('sessions')
    upgrade(url, '0008')
    assert {'smoke', 'raw_output'} <= columns('session_scores') and 'smoke' in columns('session_evaluations')
    upgrade(url)
    assert {'smoke', 'raw_output', 'scoring'} <= columns('session_evaluations')


def test_migration_0003_moves_the_breakdown_to_columns_and_goes_down_and_up(tmp_path: Path) -> None:
    """0003 adds the breakdown columns and carries rows over (structured from JSON, freeform from its
    text, whose listed tools become rows); down puts the points back in JSON; up again is clean."""
    import sqlalchemy as sa
    from sqlalchemy import inspect as sa_inspect

    url = _sqlite(tmp_path)
    downgrade(url, '0002')
    engine = sa.create_engine(url)
    columns = [f'breakdown_{k}' for k in ('logical_flow', 'consistency', 'tool_relevance', 'synthesis_quality')]

    def names() -> set[str]:
        return {c['name'] for c in sa_inspect(engine).get_columns('session_scores')}

    assert 'score_breakdown' in names() and not set(columns) & names()
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                'INSERT INTO sessions (session_id, query_id, status, record, created_at_us, updated_at_us) '
                "VALUES ('s1', 'q', 'completed', '{}', 1, 1)"
            )
        )
        insert = sa.text(
            'INSERT INTO session_scores (score_id, session_id, status, started_at_us, variant, prompt_hash, '
            'score_triggered_by, score_analysis, missing_tools_analysis, score_breakdown) '
            "VALUES (:id, 's1', 'completed', :started, :variant, 'h', 't', :analysis, :missing, :breakdown)"
        )
        conn.execute(
            insert,
            [
                {'id': 'free', 'started': 1, 'variant': 'freeform', 'breakdown': None,
                 'analysis': 'Weak.\nLogical Flow: 12/25\nConsistency: 14/25\nTool Relevance: 10/25\nSynthesis Quality: 9/25',
                 'missing': '1. read-file: would show it\n2. kubectl-logs: the crash'},
                {'id': 'typed', 'started': 2, 'variant': 'structured', 'analysis': 'x', 'missing': '1. netstat: y',
                 'breakdown': '{"logical_flow": 20, "consistency": 5, "tool_relevance": 6, "synthesis_quality": 7}'},
            ],
        )  # fmt: skip
        conn.execute(sa.text("INSERT INTO score_missing_tools (score_id, tool_name, rationale) VALUES ('typed', 'netstat', 'y')"))
    upgrade(url, '0008')  # the scorings' own table, before 0009 moved them into the job table
    assert set(columns) <= names() and 'score_breakdown' not in names()
    with engine.connect() as conn:
        points = {r[0]: tuple(r[1:]) for r in conn.execute(sa.text(f'SELECT score_id, {", ".join(columns)} FROM session_scores'))}
        tools = sorted(conn.execute(sa.text('SELECT score_id, tool_name, rationale FROM score_missing_tools')).all())
    assert points == {'free': (12, 14, 10, 9), 'typed': (20, 5, 6, 7)}
    assert tools == [('free', 'kubectl-logs', 'the crash'), ('free', 'read-file', 'would show it'), ('typed', 'netstat', 'y')]
    downgrade(url, '0002')
    assert current_revision(url) == '0002' and 'score_breakdown' in names() and not set(columns) & names()
    with engine.connect() as conn:
        back = dict(conn.execute(sa.text('SELECT score_id, score_breakdown FROM session_scores')).all())
    assert json.loads(back['typed']) == {'logical_flow': 20, 'consistency': 5, 'tool_relevance': 6, 'synthesis_quality': 7}
    assert json.loads(back['free'])['logical_flow'] == 12
    upgrade(url, '0008')
    assert set(columns) <= names() and current_revision(url) == '0008'
    upgrade(url)
    assert current_revision(url) == HEAD
    engine.dispose()


def test_websocket_refusals_foreign_origin_403_missing_token_close_frame(tmp_path: Path) -> None:
    """A foreign origin's handshake is refused outright (403: nothing accepted, on every path); a client
    of the service's own origin without the token learns why from a 1008 close frame."""
    url = _sqlite(tmp_path)
    with live_server(fast_settings(url, token='s3cret'), ScriptedScorer().model()) as srv:
        for path in ('/api/v1/ws', '/nope'):
            with pytest.raises(InvalidStatus) as refused:
                asyncio.run(_ws_close(f'{srv.ws_url}{path}', origin='http://127.0.0.1:1'))
            assert refused.value.response.status_code == 403, path
        code, reason, _ = asyncio.run(_ws_close(f'{srv.ws_url}/api/v1/ws', origin=srv.url))
        assert code == 1008 and reason.startswith('authentication required')
