"""Shared by the dashboard tests and `scripts/screenshots.py`: a live server with the dashboard mounted,
sessions ingested over the API, and scores/evaluations written straight into the store.

Scores and evaluations are inserted as rows (completed, with chosen totals, criteria hashes and dates)
where a test needs exact control over filters and aggregates; the browser flow test scores through the
real worker with the scripted judge instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from sensei_eval.evaluators.investigation_answers import parse_missing_tools
from sensei_eval.evaluators.investigation_prompts import PROMPT_HASH
from sensei_eval.evaluators.registry import JUDGES
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.service.migrate import upgrade
from sensei_eval.service.store import EvaluationRow, SessionRow, Store, new_id, now_us
from tests.service.conftest import ScriptedScorer, alert_record, fast_settings, live_server

__all__ = (
    'DashboardServer',
    'ScriptedScorer',
    'alert_record',
    'dashboard_server',
    'ingest',
    'insert_evaluation',
    'insert_score',
    'plain_record',
    'set_created',
)

DAY_US = 86_400 * 1_000_000
CHROMIUM = '/usr/bin/chromium'
CHROMIUM_ARGS = [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
]


# Every write to the service declares JSON (415 otherwise, even without a body): the shared client
# sends the header on every request, so callers such as scripts/screenshots.py need not.
_JSON = {'Content-Type': 'application/json'}


@dataclass
class DashboardServer:
    url: str
    app: Any
    client: httpx.Client

    @property
    def store(self) -> Store:
        store: Store = self.app.state.service.store
        return store


@contextmanager
def dashboard_server(db: Path | str, judge_model: JudgeModel, **settings: Any) -> Iterator[DashboardServer]:
    """The service app (its own factory, which mounts the dashboard), under uvicorn on a free loopback port.

    `db` is a SQLite file path or a database URL; it is migrated here."""
    url = f'sqlite:///{db}' if isinstance(db, Path) else db
    upgrade(url)
    with (
        live_server(fast_settings(url, **settings), judge_model) as live,
        httpx.Client(base_url=live.url, timeout=30, headers=_JSON) as client,
    ):
        yield DashboardServer(live.url, live.app, client)


def ingest(server: DashboardServer, record: dict[str, Any], *, agent: str | None = None, status: str = 'completed') -> str:
    response = server.client.post('/api/v1/sessions', json={**record, 'agent': agent, 'status': status})
    response.raise_for_status()
    session_id: str = response.json()['session_id']
    return session_id


def set_created(store: Store, session_id: str, days_ago: float) -> None:
    """Date a session `days_ago` in the past (the patterns and the date filters go by a run's ingest time)."""
    with store.write() as db:
        row = db.get(SessionRow, session_id)
        assert row is not None
        row.created_at_us = now_us() - int(days_ago * DAY_US)


def insert_score(
    store: Store,
    session_id: str,
    total: int,
    *,
    prompt_hash: str = PROMPT_HASH,
    days_ago: float = 0,
    missing: str = '1. read-file: would have shown whether the binary ran.',
    tools: list[tuple[str, str]] | None = None,
) -> str:
    """A completed freeform scoring job, as the worker keeps it from the investigation judge's typed result:
    the total, the analyses as text, the category points and the missing tools (`tools`, default: those
    `missing` lists) in its `score_detail`."""
    when = now_us() - int(days_ago * DAY_US)
    quarter, last = min(25, total // 4), min(25, total - 3 * min(25, total // 4))
    analysis = (
        f'The agent stopped early.\nLogical Flow: {quarter}/25\nConsistency: {quarter}/25\n'
        f'Tool Relevance: {quarter}/25\nSynthesis Quality: {last}/25\n{total}'
    )
    if tools is None:
        tools = [(t.tool_name, t.rationale) for t in parse_missing_tools(missing)]
    score_id = new_id()
    with store.write() as db:
        db.add(
            EvaluationRow(
                evaluation_id=score_id,
                session_id=session_id,
                judges=['investigation_score'],
                scoring='freeform',
                prompt_hash=prompt_hash,
                status='completed',
                started_at_us=when - 1_000_000,
                claimed_at_us=when - 900_000,
                completed_at_us=when,
                total_score=total,
                triggered_by='test',
                model='function:scripted',
                score_detail={
                    'score_analysis': analysis,
                    'missing_tools_analysis': missing,
                    'score_breakdown': {
                        'logical_flow': quarter,
                        'consistency': quarter,
                        'tool_relevance': quarter,
                        'synthesis_quality': last,
                    },
                    'missing_tools': [{'tool_name': name, 'rationale': why} for name, why in tools],
                    'alternative_approaches': None,
                },
            )
        )
    return score_id


def insert_evaluation(
    store: Store,
    session_id: str,
    issues: dict[str, list[dict[str, Any]]],
    *,
    passed: tuple[str, ...] = (),
    days_ago: float = 0,
) -> str:
    """A completed failure-mode evaluation of the session's record, as the worker stores one: a report
    built by the library (`build_report`) from a failed verdict per mode in `issues` that has items (a
    passed one when its list is empty) and a passed verdict per judge in `passed`. Each mode's score is
    its judge's own (`1 - Σ issue_weight`), so the overall score is the library's arithmetic."""
    from sensei_eval.core.modes import MODES
    from sensei_eval.core.records import QueryRecord
    from sensei_eval.core.reports import JudgeResult, build_report

    with store.read() as db:
        row = db.get(SessionRow, session_id)
        assert row is not None
        record = QueryRecord.model_validate(row.record)
    results = []
    for mode, items in [*issues.items(), *((name, []) for name in passed)]:
        judge = JUDGES[mode]()
        model = MODES[mode].issue_model
        score = max(0.0, 1.0 - sum(judge.issue_weight(model.model_validate(i)) for i in items))
        results.append(
            JudgeResult(
                judge=mode,
                failure_mode=mode,
                category=MODES[mode].category,
                criteria_hash=judge.criteria_hash(),
                model='function:scripted',
                status='ok',
                passed=not items,
                score=score,
                reasoning=f'{mode}: the run falls short here; see the cited steps.' if items else 'fine',
                issues=items,
            )
        )
    report = build_report(record, results, run_id='dashboard-test', model='function:scripted')
    when = now_us() - int(days_ago * DAY_US)
    evaluation_id = new_id()
    with store.write() as db:
        db.add(
            EvaluationRow(
                evaluation_id=evaluation_id,
                session_id=session_id,
                judges=sorted(report.judges),
                status='completed',
                triggered_by='test',
                started_at_us=when - 1000,
                completed_at_us=when,
                overall_score=report.overall_score,
                model='function:scripted',
                report=report.model_dump(mode='json'),
            )
        )
    return evaluation_id


def plain_record(query_id: str, **extra: Any) -> dict[str, Any]:
    """A run that is not an alert (no alert_data): a user question, one tool call, an answer."""
    record: dict[str, Any] = {
        'query_id': query_id,
        'message_format': 'openai',
        'prompt_version': 'v1',
        'messages': [
            {'role': 'user', 'content': 'How do I set a retry policy on an httpx client?'},
            {
                'role': 'assistant',
                'content': None,
                'tool_calls': [
                    {'id': 'c1', 'type': 'function', 'function': {'name': 'search_docs', 'arguments': '{"q": "httpx retries"}'}}
                ],
            },
            {'role': 'tool', 'tool_call_id': 'c1', 'content': 'httpx.HTTPTransport(retries=3) retries failed connections.'},
            {'role': 'assistant', 'content': 'Pass transport=httpx.HTTPTransport(retries=3) to httpx.Client.'},
        ],
    }
    return {**record, **extra}
