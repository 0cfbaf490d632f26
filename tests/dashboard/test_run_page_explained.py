"""The dashboard's run page explains its score: each judge listed once (the reference check reports two
failure modes and was listed twice, "Verdicts (8)" for 7 judges), the findings that cost points (a pass's
minor finding too) with their reason, the judges skipped and why, and one colour rule: a badge is coloured by
the verdict, never by a score threshold (a pass with a minor finding is green, a run a check failed is red).
Served by the real service (SQLite store), read by Debian's Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from sensei_eval.core.modes import MODES
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, build_report
from sensei_eval.evaluators.registry import JUDGES
from sensei_eval.service.store import EvaluationRow, SessionRow, new_id, now_us

from .seed import CHROMIUM, DashboardServer, ScriptedScorer, dashboard_server, ingest, plain_record

ADVISORY = 'search_docs was expected with q="retry policy" (advisory: read-only call)'


def _result(judge: str, *, passed: bool, score: float, issues: list[dict[str, Any]], **extra: Any) -> JudgeResult:
    mode = JUDGES[judge].failure_mode
    return JudgeResult(
        judge=judge,
        failure_mode=mode,
        category=MODES[mode].category if mode in MODES else None,
        criteria_hash=JUDGES[judge]().criteria_hash(),
        model=None,
        status='ok',
        passed=passed,
        score=score,
        reasoning=f'{judge}: read the run.',
        issues=issues,
        **extra,
    )


def _store(server: DashboardServer, session_id: str, results: list[JudgeResult], skipped: dict[str, str]) -> float | None:
    """A completed evaluation of the session, stored as the worker stores one (a library-built report)."""
    with server.store.read() as db:
        row = db.get(SessionRow, session_id)
        assert row is not None
        record = QueryRecord.model_validate(row.record)
    report = build_report(record, results, run_id='explained', skipped=skipped)
    with server.store.write() as db:
        db.add(
            EvaluationRow(
                evaluation_id=new_id(),
                session_id=session_id,
                judges=sorted([*report.judges, *skipped]),
                status='completed',
                triggered_by='test',
                started_at_us=now_us() - 1000,
                completed_at_us=now_us(),
                overall_score=report.overall_score,
                model=None,
                report=report.model_dump(mode='json'),
            )
        )
    return report.overall_score


def _reference(minor: bool) -> JudgeResult:
    """The reference check: two failure modes, tool_parameters half-scored by one finding (minor or not)."""
    issue = {
        'tool_name': 'search_docs',
        'parameter': 'q',
        'actual_value': 'httpx retries',
        'suggested_value': 'retry policy',
        'reasoning': ADVISORY,
        'failure_mode': 'tool_parameters',
        'severity': 'minor' if minor else 'major',
        'steps': [2],
    }
    return _result(
        'reference_check',
        passed=minor,
        score=0.5,
        issues=[issue],
        mode_scores={'tool_selection': 1.0, 'tool_parameters': 0.5},
    )


@pytest.fixture(scope='module')
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardServer]:
    with dashboard_server(tmp_path_factory.mktemp('explained') / 'dash.db', ScriptedScorer().model()) as s:
        yield s


@pytest.fixture(scope='module')
def runs(server: DashboardServer) -> dict[str, str]:
    """Two runs whose reference check scored its mode 0.50: one passed with a minor finding (overall 0.75, the
    passing band), one failed by a major one (overall 0.125, the band of runs a check failed: `core.verdicts`)."""
    ids = {}
    for name, minor in (('minor', True), ('major', False)):
        ids[name] = ingest(server, plain_record(f'explained-{name}'), agent='explained')
        others = [_result(j, passed=True, score=1.0, issues=[]) for j in ('error_recovery_check', 'repeated_call_check')]
        score = _store(server, ids[name], [_reference(minor), *others], {'citation_check': "not in profile 'default'"})
        assert score == (0.75 if minor else 0.125)
    return ids


def test_the_session_view_explains_the_score_one_judge_at_a_time(server: DashboardServer, runs: dict[str, str]) -> None:
    judgement = server.client.get(f'/api/v1/dashboard/sessions/{runs["minor"]}').json()['judgement']
    assert len(judgement['verdicts']) == 4  # the reference check's two modes, and one each for the others
    assert judgement['judge_statuses'] == {
        'reference_check': 'pass',
        'error_recovery_check': 'pass',
        'repeated_call_check': 'pass',
    }
    why = judgement['why']
    assert why['overall_score'] == 0.75 and why['not_counted'] == []
    [cost] = why['costs']
    assert (cost['judge'], cost['failure_mode'], cost['status'], cost['score']) == (
        'reference_check',
        'tool_parameters',
        'pass',
        0.5,
    )
    assert cost['findings'] == [{'severity': 'minor', 'text': ADVISORY, 'steps': [2]}]
    assert why['skipped'] == {'citation_check': "not in profile 'default'"}


if not os.path.exists(CHROMIUM):
    pytest.skip(f'{CHROMIUM} is absent: apt-get install -y chromium to run the browser tests', allow_module_level=True)

from playwright.sync_api import Browser, Page, expect  # noqa: E402


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={'width': 1280, 'height': 900})
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def test_the_run_page_lists_each_judge_once_and_says_why(page: Page, server: DashboardServer, runs: dict[str, str]) -> None:
    page.goto(f'{server.url}/#/session/{runs["minor"]}/judgement')
    panel = page.locator('[data-testid=judgement-panel]')
    expect(panel.locator('h3', has_text='Verdicts')).to_have_text('Verdicts (3 judges)')
    verdicts = panel.locator('[data-testid=verdict]')
    expect(verdicts).to_have_count(3)
    reference = panel.locator('[data-testid=verdict][data-judge=reference_check]')
    expect(reference).to_have_count(1)
    expect(reference.locator('.mode-line')).to_have_count(2)
    why = panel.locator('[data-testid=why]')
    expect(why.locator('h3')).to_have_text('Why 0.75:')
    expect(why.locator('[data-testid=cost]')).to_contain_text('reference_check · tool parameters 0.50')
    expect(why.locator('[data-testid=cost]')).to_contain_text(f'minor {ADVISORY}')
    expect(why.locator('[data-testid=skipped]')).to_have_text("skipped citation_check: not in profile 'default'")
    # one colour rule: green when every verdict passed, red when one failed, whatever the score
    expect(page.locator('.session-head [data-testid=judgement-badge]')).to_have_class('badge judgement-badge good')
    page.goto(f'{server.url}/#/session/{runs["major"]}/judgement')
    expect(page.locator('.session-head [data-testid=judgement-badge]')).to_have_text('0.13')  # 0.125, toFixed(2)
    expect(page.locator('.session-head [data-testid=judgement-badge]')).to_have_class('badge judgement-badge bad')
    expect(page.locator('[data-testid=verdict][data-judge=reference_check]')).to_have_attribute('data-verdict', 'fail')
