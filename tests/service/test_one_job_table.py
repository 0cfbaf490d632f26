"""Migration 0009, on SQLite and PostgreSQL: scorings stored in `session_scores` (and their missing tools in
`score_missing_tools`) before the service ran one kind of job read back through today's API as they did,
beside the session's evaluations, and go back where they were on downgrade.

The old rows are written as revision 0008 stored them (its tables and columns, raw SQL), then the database is
upgraded and read through the service's own API (`GET …/score`, `…/scores`, the session, `…/evaluation`), the
dashboard's session page, and the worker, which can score the session again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from sensei_eval.evaluators.investigation_prompts import PROMPT_HASH
from sensei_eval.service.migrate import HEAD, current_revision, downgrade, upgrade
from sensei_eval.service.store import EvaluationRow, Store, now_us

from .conftest import ALERT_RECORD, ScriptedScorer, fast_settings, live_server, wait_for


@pytest.fixture(params=['sqlite', 'postgresql'])
def old_db(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A database at revision 0008 (scorings in their own table), SQLite or PostgreSQL."""
    if request.param == 'sqlite':
        url = f'sqlite:///{tmp_path / "old.db"}'
        upgrade(url, '0008')
        yield url
    else:
        from .conftest import _pg_database

        for url in _pg_database(request.getfixturevalue('pg_server')):
            upgrade(url, '0008')
            yield url


_SESSION = sa.table(
    'sessions', *(sa.column(c) for c in ('session_id', 'query_id', 'agent', 'status', 'created_at_us', 'updated_at_us')),
    sa.column('record', sa.JSON()),
)  # fmt: skip
_SCORES = sa.table(
    'session_scores',
    *(sa.column(c) for c in ('score_id', 'session_id', 'variant', 'prompt_hash', 'total_score', 'score_analysis')),
    *(sa.column(c) for c in ('missing_tools_analysis', 'score_triggered_by', 'status', 'started_at_us', 'completed_at_us')),
    *(sa.column(c) for c in ('error_message', 'model', 'input_tokens', 'output_tokens', 'raw_output')),
    *(sa.column(f'breakdown_{c}') for c in ('logical_flow', 'consistency', 'tool_relevance', 'synthesis_quality')),
    sa.column('alternative_approaches', sa.JSON()), sa.column('smoke', sa.Boolean()),
)  # fmt: skip
_TOOLS = sa.table('score_missing_tools', sa.column('score_id'), sa.column('tool_name'), sa.column('rationale'))
_EVALUATIONS = sa.table(
    'session_evaluations', *(sa.column(c) for c in ('evaluation_id', 'session_id', 'status', 'triggered_by', 'started_at_us')),
    *(sa.column(c) for c in ('completed_at_us', 'overall_score', 'model')), sa.column('smoke', sa.Boolean()),
    sa.column('evaluators', sa.JSON()), sa.column('report', sa.JSON()), sa.column('verdict', sa.JSON()),
)  # fmt: skip


def _write_old_rows(url: str) -> dict[str, Any]:
    """One session with two scorings (a failed one, then a completed one with a breakdown and two missing
    tools) and a pending evaluation, as revision 0008 stored them; what the score API returned for them."""
    now = now_us()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.insert(_SESSION).values(session_id='s-1', query_id='alert-1', agent='sre', status='completed',
                                       created_at_us=now, updated_at_us=now, record=ALERT_RECORD)
        )  # fmt: skip
        common = {'session_id': 's-1', 'variant': 'freeform', 'prompt_hash': PROMPT_HASH, 'score_triggered_by': 'tarsy',
                  'model': 'openai:gpt-x', 'input_tokens': 900, 'output_tokens': 90, 'alternative_approaches': None}  # fmt: skip
        conn.execute(
            sa.insert(_SCORES),
            [
                {**common, 'score_id': 'old-failed', 'status': 'failed', 'started_at_us': now - 3000,
                 'completed_at_us': now - 2500, 'error_message': 'judge error: no score line', 'raw_output': 'no number',
                 'total_score': None, 'score_analysis': None, 'missing_tools_analysis': None, 'smoke': False,
                 **dict.fromkeys(('breakdown_logical_flow', 'breakdown_consistency', 'breakdown_tool_relevance',
                                  'breakdown_synthesis_quality'))},
                {**common, 'score_id': 'old-done', 'status': 'completed', 'started_at_us': now - 2000,
                 'completed_at_us': now - 1000, 'error_message': None, 'raw_output': 'Logical Flow: 12/25 ...\n45',
                 'total_score': 45, 'score_analysis': 'The agent stopped early.', 'missing_tools_analysis': '1. read-file: x',
                 'smoke': False, 'breakdown_logical_flow': 12, 'breakdown_consistency': 14, 'breakdown_tool_relevance': 10,
                 'breakdown_synthesis_quality': 9},
            ],
        )  # fmt: skip
        conn.execute(
            sa.insert(_TOOLS),
            [{'score_id': 'old-done', 'tool_name': 'read-file', 'rationale': 'x'},
             {'score_id': 'old-done', 'tool_name': 'kubectl-logs', 'rationale': 'the crash'}],
        )  # fmt: skip
        conn.execute(
            sa.insert(_EVALUATIONS).values(evaluation_id='ev-1', session_id='s-1', status='pending', triggered_by='u',
                                           started_at_us=now - 500, evaluators=['checks'], smoke=False)
        )  # fmt: skip
    engine.dispose()
    return {
        'score_id': 'old-done', 'session_id': 's-1', 'status': 'completed', 'prompt_hash': PROMPT_HASH, 'total_score': 45,
        'score_analysis': 'The agent stopped early.', 'missing_tools_analysis': '1. read-file: x', 'error_message': None,
        'score_triggered_by': 'tarsy', 'started_at_us': now - 2000, 'completed_at_us': now - 1000,
        'current_prompt_used': True, 'variant': 'freeform', 'model': 'openai:gpt-x', 'smoke': False,
        'raw_output': 'Logical Flow: 12/25 ...\n45',
        'score_breakdown': {'logical_flow': 12, 'consistency': 14, 'tool_relevance': 10, 'synthesis_quality': 9},
        'missing_tools': [{'tool_name': 'read-file', 'rationale': 'x'}, {'tool_name': 'kubectl-logs', 'rationale': 'the crash'}],
        'alternative_approaches': None,
    }  # fmt: skip


def test_old_scorings_read_back_through_the_api_after_the_upgrade(old_db: str) -> None:
    expected = _write_old_rows(old_db)
    upgrade(old_db)
    assert current_revision(old_db) == HEAD == '0009'
    engine = sa.create_engine(old_db)
    assert not {'session_scores', 'score_missing_tools'} & set(sa.inspect(engine).get_table_names())
    engine.dispose()
    store = Store(old_db)
    with store.read() as db:
        jobs = {r.evaluation_id: r for r in db.scalars(sa.select(EvaluationRow))}
    store.dispose()
    assert jobs['old-done'].scoring == 'freeform' and jobs['old-done'].judges == ['investigation_score']
    assert jobs['ev-1'].scoring is None and jobs['ev-1'].judges == ['checks']  # `evaluators` is `judges` now

    with live_server(fast_settings(old_db, concurrency=0), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        latest = c.get('/api/v1/scoring/sessions/s-1/score').json()
        assert latest == expected  # the old row, field by field, as the score API returned it
        history = c.get('/api/v1/scoring/sessions/s-1/scores').json()
        assert [s['score_id'] for s in history] == ['old-done', 'old-failed']
        assert history[1]['status'] == 'failed' and history[1]['raw_output'] == 'no number' and history[1]['total_score'] is None
        session = c.get('/api/v1/sessions/s-1').json()
        assert session['scoring_status'] == 'completed' and session['score']['total_score'] == 45
        assert session['latest_evaluation']['evaluation_id'] == 'ev-1'  # the evaluation is not taken for a scoring
        evaluation = c.get('/api/v1/sessions/s-1/evaluation').json()
        assert evaluation['judges'] == evaluation['evaluators'] == ['checks'] and evaluation['status'] == 'pending'
        page = c.get('/api/v1/dashboard/sessions/s-1').json()
        assert page['score']['breakdown'] == expected['score_breakdown']
        assert page['score']['missing_tools'] == ['read-file', 'kubectl-logs']
        # an active evaluation and a new scoring of one session side by side, as the two tables allowed
        again = c.post('/api/v1/scoring/sessions/s-1/score', json={'force_rescore': True})
        assert again.status_code == 202 and again.json()['status'] == 'pending'


def test_a_new_scoring_is_a_job_of_the_investigation_judge_and_goes_back_on_downgrade(old_db: str) -> None:
    _write_old_rows(old_db)
    upgrade(old_db)
    with live_server(fast_settings(old_db), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url) as c:
        assert c.post('/api/v1/scoring/sessions/s-1/score', json={'force_rescore': True}).status_code == 202
        done = wait_for(lambda: (b := c.get('/api/v1/scoring/sessions/s-1/score').json())['status'] == 'completed' and b,
                        what='the new scoring')  # fmt: skip
        assert done['total_score'] == 45 and done['score_id'] != 'old-done'
    downgrade(old_db, '0008')
    engine = sa.create_engine(old_db)
    with engine.connect() as conn:
        scores = dict(
            conn.execute(sa.select(sa.column('score_id'), sa.column('total_score')).select_from(sa.table('session_scores'))).all()
        )
        tools = conn.execute(sa.select(sa.column('tool_name')).select_from(sa.table('score_missing_tools'))).scalars().all()
        left = conn.execute(sa.select(sa.column('evaluation_id')).select_from(sa.table('session_evaluations'))).scalars().all()
    engine.dispose()
    assert scores == {'old-failed': None, 'old-done': 45, done['score_id']: 45}  # every scoring back in its table
    assert sorted(tools).count('read-file') == 2  # the old scoring's tools and the new one's
    assert left == ['ev-1']  # only the evaluation stays a job
    upgrade(old_db)
    assert current_revision(old_db) == HEAD
