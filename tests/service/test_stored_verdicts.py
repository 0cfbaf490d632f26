"""Evaluations stored before the verdict model stay readable, and read by it (SQLite and PostgreSQL).

The rows below are written as the service stored them before: a report without `coverage`, and an
`overall_score` column computed by the old rules. Under those rules a run that only the embedded model
answered stored 1.0, and a run whose LLM verdicts were all inconclusive stored the checks' 1.0 with nothing
saying the LLM judges did not judge. After migration 0008 and through the API, the dashboard and Patterns,
the first is "not judged" and the second shows its coverage beside the score.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy import select

from sensei_eval.evaluators.registry import JUDGES
from sensei_eval.service.migrate import HEAD, current_revision, upgrade
from sensei_eval.service.store import EvaluationRow, SessionRow, Store, new_id, now_us
from sensei_eval.service.verdict_cache import rules_fingerprint

from .conftest import ScriptedScorer, fast_settings, live_server

_JSON = {'Content-Type': 'application/json'}
_RECORD: dict[str, Any] = {
    'query_id': 'old-1',
    'query': 'Refund my order 42.',
    'message_format': 'openai',
    'messages': [
        {'role': 'user', 'content': 'Refund my order 42.'},
        {'role': 'assistant', 'content': 'Your order 42 has been refunded.'},
    ],
}


def _hash(judge: str) -> str:
    """Today's criteria hash of a judge (Patterns counts only verdicts under today's criteria)."""
    return JUDGES[judge]().criteria_hash()


def _old_result(judge: str, mode: str, model: str | None, status: str, passed: bool | None) -> dict[str, Any]:
    """A judge result as the service stored it before the verdict model."""
    return {
        'judge': judge, 'failure_mode': mode, 'category': 'output', 'criteria_hash': _hash(judge), 'model': model,
        'status': status, 'error': None if status == 'ok' else 'the reasoning is empty',
        'reasoning': 'fine' if status == 'ok' else '',
        'issues': [], 'score': 1.0 if status == 'ok' else None, 'mode_scores': {}, 'passed': passed,
        'input_tokens': 10, 'output_tokens': 5, 'requests': 1, 'latency_s': 0.1, 'cached': False, 'truncation': None,
        'warnings': [], 'raw_output': None, 'details': {},
    }  # fmt: skip


def _old_report(qid: str, judges: list[dict[str, Any]], overall: float | None) -> dict[str, Any]:
    return {
        'query_id': qid, 'run_id': 'service-old', 'repeat': 1, 'evaluated_at': '2026-11-20T10:00:00Z',
        'query': _RECORD['query'], 'messages': [], 'message_format': 'openai', 'agent_rating': None,
        'prompt_version': None, 'issues': {}, 'overall_score': overall, 'category_scores': {'output': 1.0},
        'primary_failure_mode': None, 'failure_modes': [], 'decisive_step': None, 'decisive_agent': None,
        'profile': 'default', 'inconclusive': [j['judge'] for j in judges if j['status'] == 'inconclusive'],
        'model': judges[0]['model'], 'criteria_hashes': {j['judge']: j['criteria_hash'] for j in judges},
        'judges': {j['judge']: j for j in judges}, 'skipped': {}, 'errors': [], 'input_warnings': [],
        'truncation': None, 'transcript_sha256': None, 'input_tokens': 0, 'output_tokens': 0, 'latency_s': 0.0,
    }  # fmt: skip


def _insert(store: Store, qid: str, report: dict[str, Any], *, smoke: bool) -> str:
    session_id, now = new_id(), now_us()
    with store.write() as db:
        db.add(
            SessionRow(
                session_id=session_id, query_id=qid, agent='old', status='completed', record={**_RECORD, 'query_id': qid},
                created_by=None, warnings=None, created_at_us=now, updated_at_us=now,
            )
        )  # fmt: skip
        db.flush()
        # the evaluation as revision 0007 stored it (its columns of then: `evaluators`, no verdict summary)
        old = sa.table(
            'session_evaluations', *(sa.column(c) for c in ('evaluation_id', 'session_id', 'status', 'triggered_by')),
            *(sa.column(c) for c in ('started_at_us', 'completed_at_us', 'overall_score', 'model', 'smoke')),
            sa.column('evaluators', sa.JSON()), sa.column('report', sa.JSON()),
        )  # fmt: skip
        db.execute(
            sa.insert(old).values(
                evaluation_id=new_id(), session_id=session_id, evaluators=sorted(report['judges']), status='completed',
                triggered_by='old', started_at_us=now - 1000, completed_at_us=now, overall_score=report['overall_score'],
                model=report['model'], smoke=smoke, report=report,
            )
        )  # fmt: skip
    return session_id


@pytest.fixture
def old_db(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A database at revision 0007 (before the verdict model), SQLite or PostgreSQL."""
    if request.param == 'sqlite':
        url = f'sqlite:///{tmp_path / "old.db"}'
        upgrade(url, '0007')
        yield url
    else:
        from .conftest import _pg_database

        for url in _pg_database(request.getfixturevalue('pg_server')):
            upgrade(url, '0007')
            yield url


@pytest.mark.parametrize('old_db', ['sqlite', 'postgresql'], indirect=True)
def test_old_evaluations_read_through_the_verdict_model_after_the_upgrade(old_db: str) -> None:
    store = Store(old_db)
    smoke_answer = _old_result('hallucination', 'hallucination', 'embedded:smollm2-135m', 'ok', True)
    smoke_run = _insert(store, 'old-smoke', _old_report('old-smoke', [smoke_answer], 1.0), smoke=True)
    llm = [_old_result(n, n, 'openai:gpt-x', 'inconclusive', None) for n in ('hallucination', 'completeness', 'tool_selection')]
    check = _old_result('identifier_check', 'hallucination', None, 'ok', True)
    checks_only = _insert(store, 'old-checks', _old_report('old-checks', [*llm, check], 1.0), smoke=False)
    store.dispose()

    upgrade(old_db)  # 0007 -> 0008: the stored overall scores recomputed
    assert current_revision(old_db) == HEAD == '0009'
    store = Store(old_db)
    with store.read() as db:
        stored = {r.session_id: (r.overall_score, r.verdict_cache) for r in db.scalars(select(EvaluationRow))}
    assert {sid: overall for sid, (overall, _) in stored.items()} == {smoke_run: None, checks_only: 1.0}
    # each old row got the verdict model's summary, which the dashboard's list and Patterns read
    assert stored[smoke_run][1]['judges'] == {'hallucination': 'smoke'} and stored[smoke_run][1]['coverage']['judged'] == 0
    assert stored[checks_only][1]['coverage']['label'] == 'checks only, 1 of 4 judges'
    assert stored[checks_only][1]['rules'] == rules_fingerprint()
    # a summary made under other verdict rules is not trusted: the list recomputes it from the results
    with store.write() as db:
        row = db.scalars(select(EvaluationRow).where(EvaluationRow.session_id == checks_only)).one()
        row.verdict_cache = {**row.verdict_cache, 'rules': 'older-rules', 'overall_score': 0.0}
    store.dispose()

    with (
        live_server(fast_settings(old_db), ScriptedScorer().model()) as live,
        httpx.Client(base_url=live.url, timeout=30, headers=_JSON) as c,
    ):
        smoke = c.get(f'/api/v1/sessions/{smoke_run}/evaluation').json()
        assert smoke['overall_score'] is None  # it once read 1.00
        assert smoke['coverage']['label'] == 'not judged' and smoke['coverage']['smoke'] == 1
        partly = c.get(f'/api/v1/sessions/{checks_only}/evaluation').json()
        assert partly['overall_score'] == 1.0
        assert partly['coverage']['label'] == 'checks only, 1 of 4 judges' and partly['coverage']['inconclusive'] == 3

        rows = {r['session_id']: r for r in c.get('/api/v1/dashboard/sessions', params={'agent': 'old'}).json()['items']}
        assert rows[smoke_run]['overall_score'] is None and rows[smoke_run]['coverage']['label'] == 'not judged'
        assert rows[checks_only]['coverage']['label'] == 'checks only, 1 of 4 judges'
        assert rows[checks_only]['overall_score'] == 1.0  # not the 0.0 of the summary under other rules
        view = c.get(f'/api/v1/dashboard/sessions/{smoke_run}').json()['judgement']
        assert view['overall_score'] is None and [v['status'] for v in view['verdicts']] == ['smoke']
        view = c.get(f'/api/v1/dashboard/sessions/{checks_only}').json()['judgement']
        assert sorted(v['status'] for v in view['verdicts']) == ['inconclusive'] * 3 + ['pass']
        # Patterns: the smoke run is left out; the partly judged run counts the check's pass, not the LLM judges'
        patterns = c.get('/api/v1/dashboard/patterns', params={'agent': 'old', 'include_smoke': 'true'}).json()
        rates = {r['label']: r for r in patterns['judge_pass_rates']}
        assert rates['identifier_check']['total'] == 1 and rates['identifier_check']['count'] == 1
        assert rates['completeness']['total'] == 0 and rates['completeness']['inconclusive'] == 1
        assert rates['hallucination']['total'] == 0  # neither the smoke answer nor the inconclusive one is a verdict
        assert sum(b['count'] for b in patterns['overall_histogram']) == 1  # the run not judged has no score
        # narrowed to one judge: that judge's verdicts only
        one = c.get('/api/v1/dashboard/patterns', params={'agent': 'old', 'judge': 'identifier_check'}).json()
        assert [(r['label'], r['count'], r['total']) for r in one['judge_pass_rates']] == [('identifier_check', 1, 1)]
        assert one['evaluated_sessions'] == 1 and one['mode_failure_rates'][0]['label'] == 'hallucination'
        one = c.get('/api/v1/dashboard/patterns', params={'agent': 'old', 'judge': 'completeness'}).json()
        assert [(r['label'], r['total'], r['inconclusive']) for r in one['judge_pass_rates']] == [('completeness', 0, 1)]
        assert one['mode_failure_rates'] == [] and one['failure_trend'] == []  # an inconclusive run is in no rate
        odd = c.get('/api/v1/dashboard/patterns', params={'judge': 'x"y'})
        assert odd.status_code == 200 and odd.json()['evaluated_sessions'] == 0


def test_an_unreadable_stored_result_is_an_error_verdict_never_dropped(caplog: pytest.LogCaptureFixture) -> None:
    from sensei_eval.service.verdict_cache import stored_summary, stored_verdict, summarise

    good = _old_result('identifier_check', 'hallucination', None, 'ok', True)
    broken = {**_old_result('completeness', 'completeness', 'openai:gpt-x', 'ok', True), 'status': 'maybe'}
    report = _old_report('x', [good, broken], 1.0)
    with caplog.at_level('WARNING', logger='sensei_eval.service.verdict_cache'):
        verdict = stored_verdict(report, where='evaluation e-1')
    assert verdict is not None
    statuses = {v.judge: v.status for v in verdict.verdicts}
    assert statuses == {'identifier_check': 'pass', 'completeness': 'error'}
    error = next(v.error for v in verdict.verdicts if v.judge == 'completeness')
    assert error is not None and 'judges.completeness.status' in error
    assert 'evaluation e-1' in caplog.text and 'judges.completeness.status' in caplog.text
    assert verdict.coverage.label == '1 of 2 judges' and verdict.coverage.errors == 1
    # a summary round-trips through the column; another rules fingerprint, or garbage, is not used
    from sensei_eval.service.verdict_cache import stored_results

    summary = summarise(stored_results(report['judges']))
    assert stored_summary(summary.model_dump(mode='json')) == summary
    assert stored_summary({**summary.model_dump(mode='json'), 'rules': 'other'}) is None
    assert stored_summary({'rules': summary.rules, 'overall_score': 'x'}) is None
    assert stored_verdict({'judges': None}) is None and stored_verdict(None) is None
