"""The dashboard's read endpoints and pages over a live service: filters, sort, paging, the session view,
the patterns aggregate (current criteria only), and the security headers on the pages."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sensei_eval.core.reports import MODEL_CONFIDENCE
from sensei_eval.evaluators.investigation_answers import CATEGORIES
from sensei_eval.service.dashboard import CSP, latest, queries
from sensei_eval.service.dashboard import patterns as patterns_module
from sensei_eval.service.store import EvaluationRow
from sensei_eval.service.verdict_cache import stored_results, summarise

from .seed import (
    DashboardServer,
    ScriptedScorer,
    alert_record,
    dashboard_server,
    ingest,
    insert_evaluation,
    insert_score,
    plain_record,
    set_created,
)

HALLUCINATION = {
    'hallucinated_claim': 'the pod is mining',
    'what_tools_actually_said': 'only CPU usage',
    'severity': 'major',
    'steps': [3, 4],
    'source': 'judge',
}

# a run whose LLM hallucination verdict fails (mode score 0.5) and every other mode passes: the band of runs an
# LLM judge failed, 0.25 + 0.25 * (1 - confidence * 0.5) (docs: the overall score)
FAILED_OVERALL = pytest.approx(0.25 + 0.25 * (1 - MODEL_CONFIDENCE * 0.5))


@pytest.fixture(params=['sqlite', 'postgresql'])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DashboardServer]:
    """The service with the dashboard, on a SQLite file and on the throwaway PostgreSQL server."""
    db: Path | str = tmp_path / 'dash.db'
    if request.param == 'postgresql':
        db = request.getfixturevalue('pg_url')
    with dashboard_server(db, ScriptedScorer().model()) as s:
        yield s


def _page(server: DashboardServer, **params: Any) -> dict[str, Any]:
    response = server.client.get('/api/v1/dashboard/sessions', params=params)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def _seed(server: DashboardServer) -> dict[str, str]:
    ids = {}
    for name, total, agent, days in [('low', 30, 'sre', 3), ('mid', 60, 'sre', 2), ('high', 90, 'docs', 1)]:
        ids[name] = ingest(server, alert_record(f'q-{name}'), agent=agent)
        insert_score(server.store, ids[name], total, days_ago=days)
    ids['none'] = ingest(server, alert_record('q-none'), agent='docs')
    insert_evaluation(server.store, ids['low'], {'hallucination': [HALLUCINATION]})
    return ids


def test_list_filters_sort_and_paging(server: DashboardServer) -> None:
    ids = _seed(server)
    everything = _page(server)
    assert everything['total'] == 4
    assert everything['agents'] == ['docs', 'sre']
    assert 'hallucination' in everything['failure_modes']

    by_score = _page(server, sort='score', order='desc')
    assert [i['total_score'] for i in by_score['items']] == [90, 60, 30, None]  # unscored last
    assert [i['total_score'] for i in _page(server, sort='score', order='asc')['items']] == [30, 60, 90, None]

    assert {i['session_id'] for i in _page(server, min_score=50, max_score=74)['items']} == {ids['mid']}
    assert {i['session_id'] for i in _page(server, agent='docs')['items']} == {ids['high'], ids['none']}
    assert [i['session_id'] for i in _page(server, scored='false')['items']] == [ids['none']]
    only = _page(server, failure_mode='hallucination')
    assert [i['session_id'] for i in only['items']] == [ids['low']]
    assert only['items'][0]['failure_modes'] == ['hallucination']

    first = _page(server, limit=3, offset=0)
    second = _page(server, limit=3, offset=3)
    assert first['total'] == second['total'] == 4
    assert len(first['items']) == 3 and len(second['items']) == 1
    assert {i['session_id'] for i in first['items'] + second['items']} == set(ids.values())

    row = next(i for i in everything['items'] if i['session_id'] == ids['none'])
    assert row['scoring_status'] == 'not_scored' and row['total_score'] is None


def test_unknown_failure_mode_is_rejected(server: DashboardServer) -> None:
    response = server.client.get('/api/v1/dashboard/sessions', params={'failure_mode': 'nope'})
    assert response.status_code == 422
    assert server.client.get('/api/v1/dashboard/sessions', params={'min_score': 101}).status_code == 422


def test_session_view_has_steps_breakdown_and_cited_issues(server: DashboardServer) -> None:
    ids = _seed(server)
    view = server.client.get(f'/api/v1/dashboard/sessions/{ids["low"]}').json()
    assert [s['kind'] for s in view['steps']] == ['user', 'tool_call', 'tool_result', 'assistant']
    assert [s['number'] for s in view['steps']] == [1, 2, 3, 4]
    assert view['final_answer'].startswith('The pod is mining crypto')
    assert view['alert_data']['pod'] == 'miner-7f'
    assert view['score']['score']['total_score'] == 30
    assert view['score']['breakdown'] == {'logical_flow': 7, 'consistency': 7, 'tool_relevance': 7, 'synthesis_quality': 9}
    # the rubric's categories are served with the session: the page draws the breakdown from them
    assert [(c['key'], c['label'], c['points']) for c in view['categories']] == [(k, label, 25) for k, label in CATEGORIES]
    assert view['score']['missing_tools'] == ['read-file']
    assert len(view['history']) == 1
    assert view['failure_modes'] == ['hallucination']
    assert view['issues'][0]['failure_mode'] == 'hallucination'
    assert view['issues'][0]['steps'] == [3, 4]
    assert view['issues'][0]['fields']['severity'] == 'major'
    assert server.client.get('/api/v1/dashboard/sessions/nope').status_code == 404


def test_patterns_count_only_current_criteria(server: DashboardServer) -> None:
    ids = _seed(server)
    old = ingest(server, alert_record('q-old'), agent='sre')
    insert_score(server.store, old, 10, prompt_hash='0' * 64, missing='1. old-tool: from older criteria')
    patterns = server.client.get('/api/v1/dashboard/patterns').json()
    assert patterns['scored_sessions'] == 3
    histogram = {b['label']: b['count'] for b in patterns['histogram']}
    assert histogram['30-39'] == 1 and histogram['60-69'] == 1 and histogram['90-100'] == 1 and histogram['10-19'] == 0
    assert patterns['missing_tools'] == [{'label': 'read-file', 'count': 3}]
    assert patterns['failure_modes'] == [{'label': 'hallucination', 'count': 1}]
    assert len(patterns['trend']) == 3 and [p['mean_score'] for p in patterns['trend']] == [30, 60, 90]
    # a re-score replaces the session's score in every aggregate (latest completed only)
    insert_score(server.store, ids['low'], 80)
    patterns = server.client.get('/api/v1/dashboard/patterns').json()
    assert {b['label']: b['count'] for b in patterns['histogram']}['30-39'] == 0


def test_pages_carry_a_strict_csp(server: DashboardServer) -> None:
    page = server.client.get('/')
    assert page.status_code == 200 and 'text/html' in page.headers['content-type']
    assert page.headers['content-security-policy'] == CSP
    assert "script-src 'self'" in CSP and 'unsafe-inline' not in CSP
    assert '/static/dashboard/app.js' in page.text
    script = server.client.get('/static/dashboard/app.js')
    assert script.status_code == 200 and script.headers['content-security-policy'] == CSP
    for name in ('app.js', 'dom.js', 'charts.js', 'live.js', 'api.js'):
        code = server.client.get(f'/static/dashboard/{name}').text
        for sink in ('.innerHTML', '.outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function'):
            assert sink not in code, (name, sink)


def test_mounting_keeps_the_service_api(server: DashboardServer) -> None:
    assert server.client.get('/api/v1/health').json()['status'] == 'ok'
    paths = server.client.get('/openapi.json').json()['paths']
    assert '/api/v1/sessions' in paths and '/api/v1/dashboard/sessions' in paths and '/api/v1/dashboard/patterns' in paths
    assert '/' not in paths  # the page is not part of the API schema
    assert server.client.get('/static/dashboard/nope.js').status_code == 404


def test_breakdown_and_missing_tools_are_read_from_the_typed_result_not_text(server: DashboardServer) -> None:
    """What the page and the patterns show is what the worker kept of the typed result (`score_detail`):
    the text analyses say otherwise here, and are not read."""
    sid = ingest(server, alert_record('q-typed'), agent='sre')
    score_id = insert_score(
        server.store, sid, 40, missing='1. text-only-tool: listed only in the text', tools=[('stored-tool', 'from the result')]
    )
    with server.store.write() as db:
        row = db.get(EvaluationRow, score_id)
        assert row is not None and row.score_detail is not None
        row.score_detail = {
            **row.score_detail,
            'score_analysis': 'Logical Flow: 1/25\nConsistency: 1/25\nTool Relevance: 1/25\nSynthesis Quality: 1/25\n40',
            'score_breakdown': {'logical_flow': 20, 'consistency': 5, 'synthesis_quality': 15},
        }
    view = server.client.get(f'/api/v1/dashboard/sessions/{sid}').json()
    assert view['score']['breakdown'] == {'logical_flow': 20, 'consistency': 5, 'synthesis_quality': 15}
    assert view['score']['missing_tools'] == ['stored-tool']
    assert view['score']['score']['missing_tools'] == [{'tool_name': 'stored-tool', 'rationale': 'from the result'}]
    patterns = server.client.get('/api/v1/dashboard/patterns').json()
    assert patterns['missing_tools'] == [{'label': 'stored-tool', 'count': 1}]
    # the dashboard's reads hold no text parser any more
    for module in (queries, latest, patterns_module):
        assert not hasattr(module, 'parse_breakdown') and not hasattr(module, 'parse_missing_tools')
        assert '\nimport re\n' not in Path(module.__file__ or '').read_text()


def test_judgements_in_the_list_and_the_patterns_rates(server: DashboardServer) -> None:
    """Each row carries its latest evaluation; the patterns give rates with their denominators; the list
    takes the filters a click from a bar sets (failed judge, overall range, prompt version, dates)."""
    missed = {'missed_aspects': ['the retry policy'], 'reasoning': 'left out', 'steps': [4]}
    ids = {}
    for name, version, days, fails in [('a', 'v1', 9, True), ('b', 'v1', 8, False), ('c', 'v2', 1, True), ('d', 'v2', 0, False)]:
        ids[name] = sid = ingest(server, plain_record(f'j-{name}', prompt_version=version), agent='judged')
        set_created(server.store, sid, days)
        insert_evaluation(server.store, sid, {'completeness': [missed] if fails else []}, passed=('hallucination',))
    rows = {i['session_id']: i for i in _page(server, agent='judged')['items']}
    assert rows[ids['a']]['overall_score'] == FAILED_OVERALL and rows[ids['b']]['overall_score'] == 1.0
    assert rows[ids['a']]['failed_judges'] == ['completeness'] and rows[ids['a']]['is_alert'] is False
    assert rows[ids['a']]['evaluation_status'] == 'completed' and rows[ids['a']]['prompt_version'] == 'v1'

    p = server.client.get('/api/v1/dashboard/patterns', params={'agent': 'judged'}).json()
    rates = {r['label']: (r['count'], r['total']) for r in p['judge_pass_rates']}
    assert rates == {'completeness': (2, 4), 'hallucination': (4, 4)}
    assert [(r['label'], r['count'], r['total']) for r in p['mode_failure_rates']] == [
        ('completeness', 2, 4),
        ('hallucination', 0, 4),
    ]
    assert sum(b['count'] for b in p['overall_histogram']) == 4
    assert {b['label']: b['count'] for b in p['overall_histogram']}['0.4-0.5'] == 2  # 0.40: an LLM judge failed them
    weekly = server.client.get('/api/v1/dashboard/patterns', params={'agent': 'judged', 'group': 'prompt_version'}).json()
    by_version = {s['group']: s['points'] for s in weekly['failure_trend']}
    assert sorted(by_version) == ['v1', 'v2']
    assert [(pt['failed'], pt['evaluated']) for pt in by_version['v1']] == [(1, 1), (0, 1)]  # two days
    v2 = server.client.get('/api/v1/dashboard/patterns', params={'agent': 'judged', 'prompt_version': 'v2'}).json()
    assert {r['label']: (r['count'], r['total']) for r in v2['judge_pass_rates']}['completeness'] == (1, 2)

    def listed(**params: Any) -> set[str]:
        return {i['session_id'] for i in _page(server, agent='judged', **params)['items']}

    assert listed(judge='completeness') == {ids['a'], ids['c']}
    assert listed(failed='false') == {ids['b'], ids['d']}
    assert listed(min_overall=0.4, max_overall=0.4999) == {ids['a'], ids['c']}
    assert listed(prompt_version='v2') == {ids['c'], ids['d']}
    today = datetime.now(UTC).strftime('%Y-%m-%d')
    assert listed(since=today) == {ids['d']}
    assert server.client.get('/api/v1/dashboard/sessions', params={'since': 'yesterday'}).status_code == 422


def test_judgement_filters_read_stored_and_recomputed_verdicts_alike(server: DashboardServer) -> None:
    """The list's judgement filters run in SQL over a verdict summary stored under today's rules, and over the
    recomputed verdict of an evaluation without one (or with one made under other rules): same runs, same answer.
    Patterns, narrowed to an agent in SQL, counts both kinds."""
    missed = {'missed_aspects': ['the retry policy'], 'reasoning': 'left out', 'steps': [4]}
    ids = {}
    for name, fails, stored in [('fs', True, 'today'), ('fr', True, None), ('fo', True, 'other'), ('ps', False, 'today')]:
        ids[name] = sid = ingest(server, plain_record(f'v-{name}'), agent='verdicts')
        eid = insert_evaluation(server.store, sid, {'completeness': [missed] if fails else []}, passed=('hallucination',))
        if stored is not None:
            with server.store.write() as db:
                row = db.get(EvaluationRow, eid)
                assert row is not None and row.report is not None
                summary = summarise(stored_results(row.report['judges'])).model_dump(mode='json')
                row.verdict_cache = summary if stored == 'today' else {**summary, 'rules': 'older-rules', 'failed': False}
    ingest(server, plain_record('v-other'), agent='elsewhere')

    def listed(**params: Any) -> set[str]:
        return {i['session_id'] for i in _page(server, agent='verdicts', **params)['items']}

    failing = {ids['fs'], ids['fr'], ids['fo']}
    assert listed(failure_mode='completeness') == failing
    assert listed(judge='completeness') == failing
    assert listed(failed='true') == failing  # the summary under other rules (failed: false) is not read
    assert listed(failed='false') == {ids['ps']}
    assert listed(min_overall=0.9) == {ids['ps']}
    assert listed(max_overall=0.6) == failing
    assert listed(failure_mode='hallucination') == set() and listed(judge='hallucination') == set()
    assert listed(judge='x"y') == set()

    p = server.client.get('/api/v1/dashboard/patterns', params={'agent': 'verdicts'}).json()
    assert p['evaluated_sessions'] == 4
    assert {r['label']: (r['count'], r['total']) for r in p['judge_pass_rates']}['completeness'] == (1, 4)


def test_session_view_carries_the_judgement_with_each_verdict(server: DashboardServer) -> None:
    sid = ingest(server, plain_record('j-view'), agent='judged')
    claim = {
        'hallucinated_claim': 'retries HTTP 500s',
        'what_tools_actually_said': 'connections only',
        'severity': 'major',
        'steps': [3],
    }
    insert_evaluation(server.store, sid, {'hallucination': [claim]}, passed=('completeness',))
    view = server.client.get(f'/api/v1/dashboard/sessions/{sid}').json()
    assert view['is_alert'] is False and view['prompt_version'] == 'v1'
    judgement = view['judgement']
    assert judgement['overall_score'] == FAILED_OVERALL and judgement['failure_modes'] == ['hallucination']
    first, second = judgement['verdicts']  # failed verdicts first
    assert (first['judge'], first['passed'], first['status']) == ('hallucination', False, 'fail')  # the verdict model's
    assert first['reasoning'].startswith('hallucination: the run falls short')
    assert first['issues'][0]['steps'] == [3] and first['issues'][0]['fields']['severity'] == 'major'
    assert (second['judge'], second['passed'], second['status']) == ('completeness', True, 'pass')
    assert judgement['coverage']['label'] == 'all 2 judges' and judgement['judges_run'] == ['hallucination', 'completeness']


def test_the_session_view_carries_the_required_outputs(tmp_path: Path) -> None:
    """What the agent had to tell the user (`expected_outputs`) is in the session view the page draws; a run
    without them says null (SQLite: the field is read from the stored record, whatever the backend)."""
    with dashboard_server(tmp_path / 'dash.db', ScriptedScorer().model()) as s:
        with_outputs = ingest(s, plain_record('q-out', expected_outputs=['3', 'HTTPTransport']))
        without = ingest(s, plain_record('q-plain'))
        assert s.client.get(f'/api/v1/dashboard/sessions/{with_outputs}').json()['expected_outputs'] == ['3', 'HTTPTransport']
        assert s.client.get(f'/api/v1/dashboard/sessions/{without}').json()['expected_outputs'] is None
