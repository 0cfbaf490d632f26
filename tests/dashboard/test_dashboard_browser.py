"""The dashboard in a real browser: Debian's Chromium driven by Playwright for Python (headless, no
browser download), against a live service with a scripted judge.

Covers the flow list → session → Score → live progress (WebSocket phases) → badge update, the list's
own live badges, filters, the patterns charts, issue links to transcript steps, errors shown, and a
session full of markup that must stay text (`window.__pwned` never set). Every page must also load
without a console error, which is how a Content-Security-Policy violation by our own code would show.
Waits are Playwright's (`expect`), never sleeps or timing assertions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sensei_eval.core.reports import MODEL_CONFIDENCE

from .seed import (
    CHROMIUM,
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

if not os.path.exists(CHROMIUM):
    pytest.skip(f'{CHROMIUM} is absent: apt-get install -y chromium to run the browser tests', allow_module_level=True)

from playwright.sync_api import Browser, ConsoleMessage, Page, expect

XSS_SCRIPT = '<script>window.__pwned=1</script>'
XSS_IMG = '<img src=x onerror="window.__pwned=1">'
TIMEOUT_MS = 15_000


@pytest.fixture(scope='module')
def gate() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


@pytest.fixture(scope='module')
def server(tmp_path_factory: pytest.TempPathFactory, gate: threading.Event) -> Iterator[DashboardServer]:
    scorer = ScriptedScorer(gate=gate)
    with dashboard_server(tmp_path_factory.mktemp('dash') / 'dash.db', scorer.model()) as s:
        yield s


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={'width': 1280, 'height': 800})
    context.set_default_timeout(TIMEOUT_MS)
    pg = context.new_page()
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == 'error' and 'WebSocket' not in message.text:
            errors.append(message.text)

    pg.on('console', on_console)
    pg.on('pageerror', lambda e: errors.append(str(e)))
    expect.set_options(timeout=TIMEOUT_MS)
    yield pg
    context.close()
    allowed = getattr(pg, 'allowed_errors', ())
    unexpected = [e for e in errors if not any(a in e for a in allowed)]
    assert not unexpected, f'console errors: {unexpected}'


def _open(page: Page, server: DashboardServer, hash_: str = '#/') -> None:
    page.goto(f'{server.url}/{hash_}')
    expect(page.locator('#live')).to_have_attribute('data-state', 'live')  # subscribed before anything else happens


def _row(page: Page, session_id: str) -> Any:
    return page.locator(f'tr[data-session="{session_id}"]')


def test_score_flow_with_live_progress(page: Page, server: DashboardServer, gate: threading.Event) -> None:
    sid = ingest(server, alert_record('flow-1'), agent='flow')
    _open(page, server, '#/?agent=flow')
    expect(_row(page, sid).locator('[data-testid=score-badge]')).to_have_text('Not scored')
    _row(page, sid).locator('a.query-link').click()
    expect(page.locator('[data-testid=session-query]')).to_contain_text('Investigate the alert')
    expect(page.locator('#live')).to_have_attribute('data-state', 'live')
    expect(page.locator('[data-testid=transcript] li')).to_have_count(4)
    expect(page.locator('[data-testid=alert]')).to_contain_text('miner-7f')
    expect(page.locator('[data-testid=final-answer]')).to_contain_text('Recommend BAN')
    page.locator('[data-tab=score]').click()
    expect(page.locator('[data-testid=score-panel]')).to_contain_text('not been scored')

    gate.clear()  # the scripted judge holds every call until the gate opens
    try:
        button = page.locator('[data-testid=score-button]')
        expect(button).to_have_text('Score session')
        button.click()
        # the phase only arrives as a WebSocket event (scoring.progress), never from a REST read
        expect(page.locator('[data-testid=progress]')).to_have_attribute('data-phase', 'analyzing_methodology')
        expect(page.locator('[data-testid=progress]')).to_contain_text('analysing the methodology')
        expect(page.locator('.session-head [data-testid=score-badge]')).to_have_text('Scoring…')
        expect(button).to_be_disabled()
    finally:
        gate.set()
    badge = page.locator('.session-head [data-testid=score-badge]')
    expect(badge).to_have_text('45/100')
    expect(badge).to_have_class('badge score-badge scored')  # a score has no colour: colours are verdicts'
    expect(page.locator('[data-testid=progress]')).to_have_text('Scored: 45/100')
    panel = page.locator('[data-testid=score-panel]')
    expect(panel.locator('[data-testid=breakdown]')).to_contain_text('12/25')
    expect(panel.locator('[data-testid=breakdown]')).to_contain_text('9/25')
    expect(panel.locator('[data-testid=missing-tools]')).to_contain_text('read-file')
    expect(panel.locator('[data-testid=score-analysis]')).to_contain_text('never read the files')
    expect(panel.locator('[data-testid=history] tbody tr')).to_have_count(1)
    expect(page.locator('[data-testid=score-button]')).to_have_text('Re-score')

    page.locator('a', has_text='All sessions').click()
    expect(_row(page, sid).locator('[data-testid=score-badge]')).to_have_text('45/100')


def test_list_badges_follow_scoring_live(page: Page, server: DashboardServer, gate: threading.Event) -> None:
    sid = ingest(server, alert_record('live-1'), agent='live')
    _open(page, server, '#/?agent=live')
    badge = _row(page, sid).locator('[data-testid=score-badge]')
    expect(badge).to_have_text('Not scored')
    gate.clear()
    try:
        assert server.client.post(f'/api/v1/scoring/sessions/{sid}/score', json={}).status_code == 202
        expect(badge).to_have_text('Scoring…')
        expect(badge).to_have_attribute('data-state', 'in_progress')
    finally:
        gate.set()
    expect(badge).to_have_text('45/100')


def test_filters_sort_and_paging(page: Page, server: DashboardServer) -> None:
    ids = {}
    for name, total in [('f-low', 20), ('f-mid', 65), ('f-high', 88)]:
        ids[name] = ingest(server, alert_record(name), agent='filters')
        insert_score(server.store, ids[name], total)
    ids['f-none'] = ingest(server, alert_record('f-none'), agent='filters')
    insert_evaluation(
        server.store,
        ids['f-low'],
        {'completeness': [{'missed_aspects': ['the cause'], 'reasoning': 'the answer leaves this out', 'steps': [4]}]},
    )
    _open(page, server)
    page.locator('select[name=agent]').select_option('filters')
    rows = page.locator('[data-testid=session-row]')
    expect(rows).to_have_count(4)
    expect(page.locator('[data-testid=page-info]')).to_have_text('1–4 of 4')

    page.locator('select[name=sort]').select_option('score')
    expect(rows.locator('[data-testid=score-badge]')).to_have_text(['88/100', '65/100', '20/100', 'Not scored'])
    for n in range(3):  # one colour rule, by verdict: no score band gets a colour of its own
        expect(rows.nth(n).locator('.score-badge')).to_have_class('badge score-badge scored')

    page.locator('input[name=min_score]').fill('50')
    page.locator('input[name=min_score]').dispatch_event('change')
    expect(rows.locator('[data-testid=score-badge]')).to_have_text(['88/100', '65/100'])
    page.locator('input[name=max_score]').fill('74')
    page.locator('input[name=max_score]').dispatch_event('change')
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute('data-session', ids['f-mid'])

    page.locator('input[name=min_score]').fill('')
    page.locator('input[name=min_score]').dispatch_event('change')
    page.locator('input[name=max_score]').fill('')
    page.locator('input[name=max_score]').dispatch_event('change')
    page.locator('select[name=failure_mode]').select_option('completeness')
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute('data-session', ids['f-low'])
    expect(rows.first).to_contain_text('completeness')

    page.locator('select[name=failure_mode]').select_option('')
    page.locator('select[name=scored]').select_option('false')
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute('data-session', ids['f-none'])
    # the filters live in the address, so a filtered list can be linked and reloaded
    assert 'agent=filters' in page.url and 'scored=false' in page.url
    page.reload()
    expect(rows).to_have_count(1)


def test_paging_through_many_sessions(page: Page, server: DashboardServer) -> None:
    for i in range(30):
        ingest(server, alert_record(f'page-{i:02d}'), agent='paging')
    _open(page, server, '#/?agent=paging')
    rows = page.locator('[data-testid=session-row]')
    expect(page.locator('[data-testid=page-info]')).to_have_text('1–25 of 30')
    expect(rows).to_have_count(25)
    page.locator('button', has_text='Next').click()
    expect(page.locator('[data-testid=page-info]')).to_have_text('26–30 of 30')
    expect(rows).to_have_count(5)
    expect(page.locator('button', has_text='Next')).to_be_disabled()


def test_issue_links_jump_to_cited_steps(page: Page, server: DashboardServer) -> None:
    sid = ingest(server, alert_record('cited-1'), agent='cited')
    insert_score(server.store, sid, 80, prompt_hash='f' * 64)
    insert_evaluation(
        server.store,
        sid,
        {
            'hallucination': [
                {'hallucinated_claim': 'mining', 'what_tools_actually_said': 'cpu only', 'severity': 'major', 'steps': [3, 4]}
            ]
        },
    )
    _open(page, server, f'#/session/{sid}/score')
    panel = page.locator('[data-testid=score-panel]')
    expect(panel.locator('[data-testid=outdated]')).to_have_text('outdated criteria')
    expect(panel.locator('.issue[data-mode=hallucination]')).to_contain_text('cpu only')
    panel.locator('a.step-link[data-step="3"]').click()
    step = page.locator('#step-3')
    expect(step).to_have_class('step tool_result flagged cited')  # flagged: a failed verdict cites it
    expect(step.locator('details')).to_have_attribute('open', '')
    expect(step.locator('pre')).to_contain_text('miner-7f cpu=3980m')


def test_errors_are_shown(page: Page, server: DashboardServer) -> None:
    page.allowed_errors = ('status of 400',)  # type: ignore[attr-defined]  # the refused request, logged by Chromium
    running = ingest(server, alert_record('err-running'), agent='errors', status='in_progress')
    _open(page, server, f'#/session/{running}/score')
    page.locator('[data-testid=score-button]').click()
    expect(page.locator('[data-testid=error]')).to_contain_text('400')
    expect(page.locator('[data-testid=error]')).to_contain_text('only a finished session')

    # no alert_data: the investigation scorer does not apply. Scored anyway through the API, the run is
    # still not shown as a failed scoring: it has no score button and a dash for the alert score
    sid = ingest(server, plain_record('err-plain'), agent='errors-plain')
    assert server.client.post(f'/api/v1/scoring/sessions/{sid}/score', json={}).status_code == 202
    _wait(lambda: server.client.get(f'/api/v1/scoring/sessions/{sid}/score').json()['status'] == 'failed')
    _open(page, server, '#/?agent=errors-plain')
    row = _row(page, sid)
    expect(row.locator('[data-testid=judgement-badge]')).to_have_text('Not judged')
    expect(row).not_to_contain_text('Scoring failed')
    expect(row).not_to_contain_text('Not scored')
    row.locator('a.query-link').click()
    expect(page.locator('[data-testid=judge-button]')).to_have_text('Judge run')
    expect(page.locator('.session-head')).not_to_contain_text('Scoring failed')
    expect(page.locator('[data-testid=score-button]')).to_have_count(0)


def _wait(done: Any, timeout_s: float = 30) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.05)


def test_a_non_alert_run_judged_with_checks_shows_its_overall_score(page: Page, server: DashboardServer) -> None:
    """Must show: a run that is not an alert, evaluated with the checks through the API, shows its overall
    score in its list row (arriving live), and neither "Not scored" nor "Scoring failed"."""
    sid = ingest(server, plain_record('plain-checks'), agent='plain')
    _open(page, server, '#/?agent=plain')
    row = _row(page, sid)
    badge = row.locator('[data-testid=judgement-badge]')
    expect(badge).to_have_text('Not judged')
    response = server.client.post(f'/api/v1/sessions/{sid}/evaluate', json={'evaluators': ['checks']})
    assert response.status_code == 202, response.text
    _wait(lambda: server.client.get(f'/api/v1/sessions/{sid}/evaluation').json()['status'] not in ('pending', 'in_progress'))
    evaluation = server.client.get(f'/api/v1/sessions/{sid}/evaluation').json()
    assert evaluation['status'] == 'completed', evaluation
    overall = evaluation['overall_score']
    assert overall is not None
    expect(badge).to_have_text(f'{overall:.2f}')  # pushed by the evaluation.completed event, no reload
    expect(badge).to_have_attribute('data-state', 'completed')
    for text in ('Not scored', 'Scoring failed'):
        expect(row).not_to_contain_text(text)
    expect(row.locator('[data-testid=no-tarsy]')).to_have_text('—')

    badge.click()  # the badge leads to the judgement: every judge's verdict
    panel = page.locator('[data-testid=judgement-panel]')
    expect(panel).to_contain_text(f'{overall:.2f}')
    judges = set(evaluation['report']['judges'])
    expect(panel.locator('[data-testid=verdict]')).to_have_count(len(judges))
    for name in judges:
        expect(panel.locator(f'[data-testid=verdict][data-judge="{name}"]')).to_be_visible()
    for text in ('Not scored', 'Scoring failed', 'not been scored'):
        expect(page.locator('main')).not_to_contain_text(text)


def test_judgement_verdicts_link_to_cited_steps(page: Page, server: DashboardServer) -> None:
    sid = ingest(server, plain_record('plain-cited'), agent='plain-cited')
    claim = {
        'hallucinated_claim': 'retries=3 also retries HTTP 500s',
        'what_tools_actually_said': 'failed connections only',
        'severity': 'major',
        'steps': [3],
    }
    insert_evaluation(server.store, sid, {'hallucination': [claim]}, passed=('completeness',))
    _open(page, server, f'#/session/{sid}/judgement')
    failed = page.locator('[data-testid=verdict][data-verdict=fail]')
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text('hallucination: the run falls short here')
    expect(failed).to_contain_text('failed connections only')
    expect(page.locator('[data-testid=verdict][data-verdict=pass]')).to_have_attribute('data-judge', 'completeness')
    failed_overall = 0.25 + 0.25 * (1 - MODEL_CONFIDENCE * 0.5)  # an LLM judge failed the run (`core.verdicts`)
    expect(page.locator('.session-head [data-testid=judgement-badge]')).to_have_text(f'{failed_overall:.2f}')
    failed.locator('a.step-link[data-step="3"]').click()
    step = page.locator('#step-3')
    expect(step).to_have_class('step tool_result flagged cited')
    expect(step.locator('.flag')).to_have_text('cited by hallucination')


def test_patterns_page_renders_charts(page: Page, server: DashboardServer) -> None:
    for name, total, days in [('p-1', 35, 2), ('p-2', 70, 1), ('p-3', 92, 0)]:
        sid = ingest(server, alert_record(name), agent='patterns')
        insert_score(server.store, sid, total, days_ago=days, missing='1. read-file: x\n2. kubectl-logs: y')
        insert_evaluation(
            server.store,
            sid,
            {'tool_selection': [{'missed_tools': ['logs'], 'unnecessary_tools': [], 'reasoning': 'r', 'steps': [2]}]},
        )
    _open(page, server, '#/patterns?agent=patterns')
    expect(page.locator('section.patterns')).to_have_attribute('data-loaded', 'true')
    for chart in (
        'judge-pass-rates',
        'mode-failure-rates',
        'failure-trend',
        'overall-histogram',
        'failure-modes',
        'missing-tools',
        'histogram',
        'trend',
    ):
        expect(page.locator(f'svg[data-chart={chart}]')).to_be_visible()
    expect(page.locator('svg[data-chart=failure-modes]')).to_contain_text('tool selection')
    expect(page.locator('svg[data-chart=missing-tools]')).to_contain_text('kubectl-logs')
    expect(page.locator('svg[data-chart=histogram] rect.bar')).to_have_count(10)
    expect(page.locator('svg[data-chart=mode-failure-rates]')).to_contain_text('100% (3/3)')
    assert page.locator('svg[data-chart=trend] circle.dot').count() >= 1


def test_patterns_answer_questions_and_lead_to_the_runs(page: Page, server: DashboardServer) -> None:
    """Rates with their denominators, filters, and a click from a bar to the runs behind it."""
    runs = [('pq-1', 'v1', 3, True), ('pq-2', 'v1', 3, False), ('pq-3', 'v2', 1, True), ('pq-4', 'v2', 0, False)]
    ids = {}
    for name, version, days, fails in runs:
        ids[name] = sid = ingest(server, plain_record(name, prompt_version=version), agent='pq')
        set_created(server.store, sid, days)
        issue = {'missed_aspects': ['the version'], 'reasoning': 'the answer leaves this out', 'steps': [4]}
        insert_evaluation(
            server.store,
            sid,
            {'completeness': [issue] if fails else []},
            passed=('hallucination',),
        )
    _open(page, server, '#/patterns?agent=pq')
    expect(page.locator('section.patterns')).to_have_attribute('data-loaded', 'true')
    rates = page.locator('svg[data-chart=judge-pass-rates]')
    expect(rates).to_contain_text('50% (2/4)')  # completeness passed 2 of 4
    expect(rates).to_contain_text('100% (4/4)')  # hallucination
    expect(rates.locator('rect[data-label=completeness] title')).to_have_text('completeness: 50% (2 of 4)')
    expect(page.locator('svg[data-chart=failure-trend] circle.dot')).to_have_count(3)  # three distinct days

    page.locator('select[name=prompt_version]').select_option('v2')
    expect(rates).to_contain_text('50% (1/2)')
    page.locator('select[name=group]').select_option('prompt_version')
    expect(page.locator('svg[data-chart=failure-trend]')).to_contain_text('v2')
    page.locator('select[name=prompt_version]').select_option('')
    expect(page.locator('svg[data-chart=failure-trend] circle.dot[data-group=v1]')).to_have_count(1)

    page.locator('svg[data-chart=judge-pass-rates] a', has=page.locator('rect[data-label=completeness]')).click()
    rows = page.locator('[data-testid=session-row]')
    expect(rows).to_have_count(2)
    assert {rows.nth(i).get_attribute('data-session') for i in range(2)} == {ids['pq-1'], ids['pq-3']}
    expect(page.locator('[data-testid=extra-filters]')).to_contain_text('judge failed completeness')

    page.goto(f'{server.url}/#/patterns?agent=pq')
    expect(page.locator('section.patterns')).to_have_attribute('data-loaded', 'true')
    # the failed runs (an LLM judge failed them) score 0.25 + 0.25 * (1 - 0.8 * 0.5) = 0.40 overall
    page.locator('svg[data-chart=overall-histogram] a', has=page.locator('rect[data-label="0.4-0.5"]')).click()
    expect(rows).to_have_count(2)
    expect(rows.locator('[data-testid=judgement-badge]')).to_have_text([f'{0.25 + 0.25 * (1 - MODEL_CONFIDENCE * 0.5):.2f}'] * 2)


def test_markup_in_a_session_is_never_executed(page: Page, server: DashboardServer) -> None:
    payload = f'{XSS_SCRIPT} and {XSS_IMG}'
    record = alert_record('xss-1')
    record['messages'] = [
        {'role': 'user', 'content': f'Investigate {XSS_IMG}'},
        {
            'role': 'assistant',
            'content': None,
            'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'kubectl-logs', 'arguments': '{"pod": "x"}'}}],
        },
        {'role': 'tool', 'tool_call_id': 'c1', 'content': f'log line {payload}'},
        {'role': 'assistant', 'content': f'Final: {payload}'},
    ]
    record['alert_data'] = {'pod': XSS_IMG}
    sid = ingest(server, record, agent='xss')
    insert_score(server.store, sid, 40, missing=f'1. {XSS_IMG}: tool name with markup', tools=[(XSS_IMG, 'markup')])
    insert_evaluation(
        server.store,
        sid,
        {'completeness': [{'missed_aspects': [XSS_SCRIPT], 'reasoning': 'the answer leaves this out', 'steps': [3]}]},
    )

    _open(page, server, '#/?agent=xss')
    expect(page.locator('[data-testid=session-row]')).to_contain_text(XSS_IMG)
    page.locator('a.query-link').click()
    expect(page.locator('[data-testid=final-answer]')).to_have_text(f'Final: {payload}')
    page.locator('#step-3 summary').click()
    expect(page.locator('#step-3 pre')).to_have_text(f'log line {payload}')
    expect(page.locator('[data-testid=alert]')).to_contain_text(XSS_IMG)
    page.locator('[data-tab=score]').click()
    expect(page.locator('.issue[data-mode=completeness]')).to_contain_text(XSS_SCRIPT)
    expect(page.locator('[data-testid=missing-tools]')).to_contain_text(XSS_IMG)
    page.goto(f'{server.url}/#/patterns')
    expect(page.locator('section.patterns')).to_have_attribute('data-loaded', 'true')
    assert page.evaluate('window.__pwned') is None
    assert page.locator('script:not([src])').count() == 0
    assert page.locator('img[src=x]').count() == 0


def test_screenshot_script_writes_the_four_pages(tmp_path: Path) -> None:
    """`scripts/screenshots.py` (what made docs/screenshots/) still runs end to end."""
    script = Path(__file__).resolve().parents[2] / 'scripts' / 'screenshots.py'
    done = subprocess.run([sys.executable, str(script), '--out', str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ('sessions.png', 'session.png', 'patterns.png', 'view.png'):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b'\x89PNG') and len(data) > 10_000, name


def test_alerts_page_shows_a_degradation_as_it_fires(page: Page, tmp_path: Path) -> None:
    """The Alerts page is empty, then the watcher raises an alert from finished evaluations and the page shows it
    without a reload (pushed on the `alerts` channel)."""
    from tests.service.test_alerts_service import RULE, seed_evaluations

    settings = {'alert_rule': RULE, 'alert_lag_s': 0.0, 'alert_poll_s': 0.1}
    with dashboard_server(tmp_path / 'alerts.db', ScriptedScorer().model(), **settings) as s:
        page.goto(f'{s.url}/#/alerts')
        expect(page.locator('[data-testid=no-alerts]')).to_be_visible()
        expect(page.locator('#live')).to_have_attribute('data-state', 'live')
        seed_evaluations(s.store, 60, 60)
        alert = page.locator('[data-testid=degradation-alert]')
        expect(alert).to_have_attribute('data-status', 'firing')
        expect(alert).to_contain_text('docs · v2')
        expect(alert).to_contain_text('citation failure rate')
        expect(alert).to_contain_text('Baseline: version v1.')
