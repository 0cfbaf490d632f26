"""The scoring API over a real SQLite file and a real PostgreSQL: seed 000's status table row by row,
sessions, history, auth, body limits, auto-scoring, evaluation."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from sensei_eval.evaluators.investigation_answers import RESULT_DETAIL
from sensei_eval.evaluators.investigation_prompts import PROMPT_HASH
from sensei_eval.service import repository
from sensei_eval.service.store import EvaluationRow, Store

from .conftest import ScriptedScorer, alert_record, fast_settings, live_server, wait_for


def _create(client: httpx.Client, status: str = 'completed', **extra: Any) -> str:
    r = client.post('/api/v1/sessions', json={**alert_record(), 'status': status, **extra})
    assert r.status_code == 201, r.text
    session_id: str = r.json()['session_id']
    return session_id


def _score(client: httpx.Client, session_id: str, force: bool | None = None) -> httpx.Response:
    body = {} if force is None else {'force_rescore': force}
    return client.post(f'/api/v1/scoring/sessions/{session_id}/score', json=body)


def _status(client: httpx.Client, session_id: str) -> str:
    status: str = client.get(f'/api/v1/scoring/sessions/{session_id}/score').json()['status']
    return status


def test_status_table(db_url: str) -> None:
    """Every row of seed 000's status table, plus 400 and 404."""
    gate = threading.Event()
    scorer = ScriptedScorer(gate=gate)
    with live_server(fast_settings(db_url, concurrency=1), scorer.model()) as srv, httpx.Client(base_url=srv.url) as c:
        # 404: no such session (POST and GET); GET of an unscored session is 404 too
        assert _score(c, 'nope').status_code == 404
        assert c.get('/api/v1/scoring/sessions/nope/score').status_code == 404
        # 400: the session is not in a terminal state
        running = _create(c, status='in_progress')
        r = _score(c, running)
        assert r.status_code == 400 and 'in_progress' in r.json()['detail']
        first, second = _create(c), _create(c)
        assert c.get(f'/api/v1/scoring/sessions/{first}/score').status_code == 404

        # no existing score -> 202 pending (new scoring)
        r = _score(c, first)
        assert r.status_code == 202 and r.json()['status'] == 'pending'
        first_id = r.json()['score_id']
        wait_for(lambda: _status(c, first) == 'in_progress', what='first scoring claimed')
        # the only slot is busy: the second session's scoring stays pending
        r = _score(c, second, force=False)
        assert r.status_code == 202 and r.json()['status'] == 'pending'
        second_id = r.json()['score_id']

        # existing pending, force false -> 202 pending, same row; force true -> 409
        r = _score(c, second)
        assert (r.status_code, r.json()['status'], r.json()['score_id']) == (202, 'pending', second_id)
        r = _score(c, second, force=True)
        assert r.status_code == 409 and r.json()['active_id'] == second_id
        # existing in_progress, force false -> 202 in_progress; force true -> 409
        r = _score(c, first)
        assert (r.status_code, r.json()['status'], r.json()['score_id']) == (202, 'in_progress', first_id)
        assert _score(c, first, force=True).status_code == 409

        gate.set()
        wait_for(lambda: _status(c, first) == 'completed' and _status(c, second) == 'completed', what='both completed')
        # existing completed, force omitted/false -> 200 with the score and every response field
        r = _score(c, first)
        body = r.json()
        assert r.status_code == 200 and body['score_id'] == first_id and body['status'] == 'completed'
        assert body['total_score'] == 45
        assert 'Logical Flow: 12/25' in body['score_analysis'] and not body['score_analysis'].rstrip().endswith('45')
        assert body['missing_tools_analysis'].startswith('1. read-file')
        assert body['prompt_hash'] == PROMPT_HASH and body['current_prompt_used'] is True
        assert body['error_message'] is None and body['score_triggered_by'] == 'anonymous'
        assert body['completed_at_us'] >= body['started_at_us'] > 0
        assert _score(c, first, force=False).status_code == 200

        # existing completed, force true -> 202 pending, a new row; history keeps both
        r = _score(c, first, force=True)
        assert r.status_code == 202 and r.json()['status'] == 'pending' and r.json()['score_id'] != first_id
        wait_for(lambda: _status(c, first) == 'completed', what='rescore completed')
        history = c.get(f'/api/v1/scoring/sessions/{first}/scores').json()
        assert [h['status'] for h in history] == ['completed', 'completed'] and history[1]['score_id'] == first_id

        # existing failed -> 200 failed (error, never a score); force true -> 202 new scoring
        scorer.score_text = 'The investigation was weak but I will not give a number.'
        third = _create(c)
        _score(c, third)
        wait_for(lambda: _status(c, third) == 'failed', what='scoring failed')
        r = _score(c, third)
        body = r.json()
        assert r.status_code == 200 and body['status'] == 'failed' and body['total_score'] is None
        assert 'no valid total score' in body['error_message']
        scorer.score_text = 'Fine.\n80'
        r = _score(c, third, force=True)
        assert r.status_code == 202 and r.json()['status'] == 'pending'
        wait_for(lambda: _status(c, third) == 'completed', what='rescore after failure')
        assert c.get(f'/api/v1/scoring/sessions/{third}/score').json()['total_score'] == 80


def test_concurrent_posts_create_one_active_scoring(db_url: str) -> None:
    """50 concurrent POSTs for one session: exactly one scoring row, every answer names it."""
    gate = threading.Event()
    scorer = ScriptedScorer(gate=gate)
    with live_server(fast_settings(db_url), scorer.model()) as srv:
        with httpx.Client(base_url=srv.url) as c:
            session_id = _create(c)

        async def burst() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=50)
            async with httpx.AsyncClient(base_url=srv.url, limits=limits, timeout=30) as ac:
                url = f'/api/v1/scoring/sessions/{session_id}/score'
                return list(await asyncio.gather(*(ac.post(url, json={'force_rescore': False}) for _ in range(50))))

        responses = asyncio.run(burst())
        assert {r.status_code for r in responses} == {202}
        assert len({r.json()['score_id'] for r in responses}) == 1
        store = Store(db_url)
        with store.read() as db:
            assert db.scalar(select(func.count()).select_from(EvaluationRow)) == 1
        store.dispose()
        gate.set()
        with httpx.Client(base_url=srv.url) as c:
            wait_for(lambda: _status(c, session_id) == 'completed', what='completion')
        assert scorer.calls == 2  # one scoring turn + one missing-tools turn: it ran once


def test_sessions_list_detail_and_auto_score(db_url: str) -> None:
    scorer = ScriptedScorer()
    settings = fast_settings(db_url, auto_score_agents=frozenset({'sre-chain'}))
    with live_server(settings, scorer.model()) as srv, httpx.Client(base_url=srv.url) as c:
        r = c.post('/api/v1/sessions', json={**alert_record('a1'), 'agent': 'sre-chain'})
        auto = r.json()
        assert r.status_code == 201 and auto['auto_score']['status'] == 'pending' and auto['auto_score_error'] is None
        assert auto['auto_score']['score_triggered_by'] == 'auto-score'
        other = c.post('/api/v1/sessions', json={**alert_record('a2'), 'agent': 'other'}).json()
        assert other['auto_score'] is None
        # an in-progress session of an auto-scored chain is scored when it turns completed
        later = c.post('/api/v1/sessions', json={**alert_record('a3'), 'agent': 'sre-chain', 'status': 'in_progress'}).json()
        assert later['auto_score'] is None
        patched = c.patch(f'/api/v1/sessions/{later["session_id"]}', json={'status': 'completed'}).json()
        assert patched['auto_score']['status'] == 'pending'
        wait_for(lambda: _status(c, auto['session_id']) == 'completed', what='auto score')
        wait_for(lambda: _status(c, later['session_id']) == 'completed', what='auto score on completion')

        page = c.get('/api/v1/sessions', params={'limit': 2}).json()
        assert page['total'] == 3 and len(page['items']) == 2 and page['limit'] == 2
        rest = c.get('/api/v1/sessions', params={'limit': 2, 'offset': 2}).json()['items']
        by_id = {s['session_id']: s for s in page['items'] + rest}
        assert by_id[auto['session_id']]['score']['total_score'] == 45
        assert by_id[auto['session_id']]['scoring_status'] == 'completed'
        assert by_id[other['session_id']]['scoring_status'] == 'not_scored' and by_id[other['session_id']]['score'] is None
        assert c.get('/api/v1/sessions', params={'agent': 'other'}).json()['total'] == 1

        detail = c.get(f'/api/v1/sessions/{auto["session_id"]}').json()
        assert detail['record']['query_id'] == 'a1' and detail['agent'] == 'sre-chain'
        assert detail['latest_scoring']['status'] == 'completed' and detail['score']['total_score'] == 45
        assert c.get('/api/v1/sessions/missing').status_code == 404


def test_auto_score_is_fail_open(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError('judge queue unavailable')

    with live_server(fast_settings(url, auto_score_agents=frozenset({'*'})), ScriptedScorer().model(), migrate=True) as srv:
        monkeypatch.setattr(repository, 'request_score', broken)
        with httpx.Client(base_url=srv.url) as c:
            r = c.post('/api/v1/sessions', json=alert_record())
            assert r.status_code == 201
            body = r.json()
            assert body['auto_score'] is None and 'judge queue unavailable' in body['auto_score_error']
            assert c.get(f'/api/v1/sessions/{body["session_id"]}').json()['status'] == 'completed'


def test_malformed_body_names_the_field_and_oversized_body_is_413(tmp_path: Any) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    with (
        live_server(fast_settings(url, max_body_bytes=20_000), ScriptedScorer().model(), migrate=True) as srv,
        httpx.Client(base_url=srv.url) as c,
    ):
        record = alert_record()
        del record['query_id']
        r = c.post('/api/v1/sessions', json=record)
        assert r.status_code == 422
        assert ['body', 'query_id'] in [e['loc'] for e in r.json()['detail']] and 'query_id' in r.json()['message']
        r = c.post('/api/v1/sessions', json={**alert_record(), 'status': 'sleeping'})
        assert r.status_code == 422 and ['body', 'status'] in [e['loc'] for e in r.json()['detail']]
        bad_args = alert_record()
        bad_args['messages'] = [dict(m) for m in bad_args['messages']]
        bad_args['messages'][1] = {**bad_args['messages'][1], 'tool_calls': [
            {'id': 'c1', 'type': 'function', 'function': {'name': 'kubectl-top', 'arguments': '{not json'}}
        ]}  # fmt: skip
        r = c.post('/api/v1/sessions', json=bad_args)
        assert r.status_code == 422 and 'messages[1].tool_calls[0].function.arguments' in r.text
        r = c.post('/api/v1/scoring/sessions/x/score', json={'force_rescore': 'maybe'})
        assert r.status_code == 422 and ['body', 'force_rescore'] in [e['loc'] for e in r.json()['detail']]
        big = {**alert_record(), 'metadata': {'blob': 'x' * 30_000}}
        r = c.post('/api/v1/sessions', json=big)
        assert r.status_code == 413 and 'limit' in r.json()['detail']

        def chunks() -> Any:  # no Content-Length: the limit applies while the body streams in
            for _ in range(30):
                yield b'x' * 1000

        r = c.post('/api/v1/sessions', content=chunks(), headers={'content-type': 'application/json'})
        assert r.status_code == 413


def test_bearer_token_names_the_writer_and_ignores_forged_user_headers(tmp_path: Any) -> None:
    """A token without --behind-proxy: a forwarded-user header proves nothing and names nobody."""
    url = f'sqlite:///{tmp_path / "s.db"}'
    with (
        live_server(fast_settings(url, token='s3cret'), ScriptedScorer().model(), migrate=True) as srv,
        httpx.Client(base_url=srv.url) as c,
    ):
        r = c.post('/api/v1/sessions', json=alert_record(), headers={'X-Forwarded-User': 'mallory'})
        assert r.status_code == 401 and r.headers['www-authenticate'] == 'Bearer'
        assert c.post('/api/v1/sessions', json=alert_record(), headers={'Authorization': 'Bearer wrong'}).status_code == 401
        auth = {'Authorization': 'Bearer s3cret', 'X-Forwarded-User': 'mallory'}
        session_id = c.post('/api/v1/sessions', json=alert_record(), headers=auth).json()['session_id']
        r = c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={}, headers=auth)
        assert r.status_code == 202 and r.json()['score_triggered_by'] == 'token'  # the forged header is ignored


def test_evaluate_runs_failure_mode_judges(db_url: str) -> None:
    def answer(prompt: str) -> str:
        return '{"reasoning": "Nothing wrong at [2].", "issues": []}'

    scorer = ScriptedScorer(answer=answer)
    with live_server(fast_settings(db_url), scorer.model()) as srv, httpx.Client(base_url=srv.url) as c:
        session_id = _create(c)
        r = c.post(f'/api/v1/sessions/{session_id}/evaluate', json={'evaluators': ['tool_selection', 'completeness']})
        assert r.status_code == 202 and r.json()['evaluators'] == ['tool_selection', 'completeness']
        done = wait_for(
            lambda: (e := c.get(f'/api/v1/sessions/{session_id}/evaluation').json())['status'] == 'completed' and e,
            what='evaluation',
        )
        assert set(done['report']['judges']) == {'tool_selection', 'completeness'}
        assert done['overall_score'] == 1.0
        again = c.post(f'/api/v1/sessions/{session_id}/evaluate', json={})
        assert again.status_code == 200 and again.json()['evaluation_id'] == done['evaluation_id']
        assert c.post(f'/api/v1/sessions/{session_id}/evaluate', json={'evaluators': ['nonsense']}).status_code == 422
        assert c.post('/api/v1/sessions/none/evaluate', json={}).status_code == 404


def test_structured_variant_stores_seed_003_fields(tmp_path: Any) -> None:
    structured = {
        'total_score': 58,
        'score_breakdown': {'logical_flow': 15, 'consistency': 16, 'tool_relevance': 12, 'synthesis_quality': 15},
        'score_reasoning': 'However, the agent never read the binary.',
        'missing_tools': [{'tool_name': 'read-file', 'rationale': 'verify the binary'}],
        'alternative_approaches': [
            {'name': 'forensic first', 'description': 'read files first', 'steps': ['list-files', 'read-file']}
        ],
    }
    import json

    scorer = ScriptedScorer(answer=lambda prompt: json.dumps(structured))
    url = f'sqlite:///{tmp_path / "s.db"}'
    with (
        live_server(fast_settings(url, scorer='structured'), scorer.model(), migrate=True) as srv,
        httpx.Client(base_url=srv.url) as c,
    ):
        session_id = _create(c)
        _score(c, session_id)
        wait_for(lambda: _status(c, session_id) == 'completed', what='structured scoring')
        body = c.get(f'/api/v1/scoring/sessions/{session_id}/score').json()
    assert body['variant'] == 'structured' and body['total_score'] == 58 and body['current_prompt_used'] is True
    assert body['score_breakdown']['logical_flow'] == 15
    assert body['missing_tools'] == [{'tool_name': 'read-file', 'rationale': 'verify the binary'}]
    assert body['missing_tools_analysis'] == '1. read-file: verify the binary'
    assert body['alternative_approaches'][0]['name'] == 'forensic first'


def test_worker_stores_the_typed_result_with_the_job(db_url: str) -> None:
    """A scoring is a job of the investigation judge like any other: its report holds the judge's result, and
    the freeform scorer's breakdown and missing tools are kept with the job from its typed result; the API
    reads them back from there for the freeform variant too."""
    missing = '1. read-file: would have shown whether the binary ran.\n2. kubectl-logs: the container output'
    scorer = ScriptedScorer(missing_text=missing)
    with live_server(fast_settings(db_url), scorer.model()) as srv, httpx.Client(base_url=srv.url) as c:
        session_id = _create(c)
        _score(c, session_id)
        wait_for(lambda: _status(c, session_id) == 'completed', what='scoring')
        body = c.get(f'/api/v1/scoring/sessions/{session_id}/score').json()
        store: Store = srv.app.state.service.store
        with store.read() as db:
            row = db.scalars(select(EvaluationRow).where(EvaluationRow.session_id == session_id)).one()
            assert row.scoring == 'freeform' and row.judges == ['investigation_score'] and row.total_score == 45
            assert row.score_detail is not None and row.report is not None
            breakdown = row.score_detail['score_breakdown']
            tools = [(t['tool_name'], t['rationale']) for t in row.score_detail['missing_tools']]
            judged = row.report['judges']['investigation_score']
        assert breakdown == {'logical_flow': 12, 'consistency': 14, 'tool_relevance': 10, 'synthesis_quality': 9}
        assert tools == [
            ('read-file', 'would have shown whether the binary ran.'),
            ('kubectl-logs', 'the container output'),
        ]
        # the report's judge result: the score as every run gives it, with the typed result it was read from
        assert judged['score'] == 0.45 and judged['details'][RESULT_DETAIL]['total_score'] == 45
    assert body['variant'] == 'freeform' and body['total_score'] == 45
    assert body['score_breakdown'] == {'logical_flow': 12, 'consistency': 14, 'tool_relevance': 10, 'synthesis_quality': 9}
    assert [t['tool_name'] for t in body['missing_tools']] == ['read-file', 'kubectl-logs']
    assert body['missing_tools_analysis'] == missing
