"""The dashboard's "Judge run", in Debian's Chromium, gives every run of the packaged sample the overall score
`sensei-eval judge` gives it with the same scripted model, shows the coverage beside a score that not every
judge gave, and shows "Not judged" for a run no judge judged (never a score).

The scripted model (`tests/service/conformance.py`) answers from the prompt alone: some runs fail an LLM judge,
some fail a check, and on some every LLM verdict is inconclusive, so only the checks judge them. The button is
pressed in the page (no API call in between); the badge updates from the service's events, no reload.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from sensei_eval.core.reports import RecordReport
from tests.service.conformance import conformance_judge, judge_dataset

from .seed import CHROMIUM, DashboardServer, dashboard_server, ingest

if not os.path.exists(CHROMIUM):
    pytest.skip(f'{CHROMIUM} is absent: apt-get install -y chromium to run the browser tests', allow_module_level=True)

from playwright.sync_api import Browser, ConsoleMessage, Page, expect

SAMPLE = Path(__file__).parents[2] / 'sensei_eval' / 'data' / 'sample.jsonl'
TIMEOUT_MS = 20_000


@pytest.fixture(scope='module')
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardServer]:
    with dashboard_server(tmp_path_factory.mktemp('judge-run') / 'dash.db', conformance_judge().model()) as s:
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
    assert not errors, f'console errors: {errors}'


def _open(page: Page, server: DashboardServer, hash_: str) -> None:
    page.goto(f'{server.url}/{hash_}')
    expect(page.locator('#live')).to_have_attribute('data-state', 'live')


def _badge_text(report: RecordReport) -> str:
    """What the badge shows: JavaScript's `toFixed(2)` (exact binary value, ties up: 0.125 is "0.13")."""
    if report.overall_score is None:
        return 'Not judged'
    return str(Decimal(report.overall_score).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP))


def _overall_attr(report: RecordReport) -> str:
    """The badge's `data-overall`: the score itself (JavaScript and Python print a float's shortest round trip)."""
    return '' if report.overall_score is None else repr(report.overall_score).removesuffix('.0')


def test_judge_run_gives_the_cli_scores_on_the_sample(page: Page, server: DashboardServer, tmp_path: Path) -> None:
    cli = judge_dataset(SAMPLE, tmp_path / 'reports', conformance_judge())
    records = [json.loads(line) for line in SAMPLE.read_text(encoding='utf-8').splitlines() if line.strip()]
    assert sorted(cli) == sorted(r['query_id'] for r in records)
    partly = [q for q, r in cli.items() if r.coverage is not None and not r.coverage.complete]
    assert partly and any(cli[q].coverage.label.startswith('checks only') for q in partly)  # type: ignore[union-attr]

    ids = {r['query_id']: ingest(server, r, agent='sample') for r in records}
    for qid, sid in ids.items():
        _open(page, server, f'#/session/{sid}')
        badge = page.locator('.session-head [data-testid=judgement-badge]')
        expect(badge).to_have_text('Not judged')
        button = page.locator('[data-testid=judge-button]')
        core = 'tool_selection, tool_parameters, hallucination, completeness, instruction_following'
        says = re.compile(rf': {core}, .*reference_check$')  # the default: core, then the checks
        expect(button).to_have_attribute('title', says)
        button.click()
        expect(badge).to_have_attribute('data-state', 'completed')
        expect(badge).to_have_attribute('data-overall', _overall_attr(cli[qid]))  # the very same score
        expect(badge).to_have_text(_badge_text(cli[qid]))
        coverage = cli[qid].coverage
        assert coverage is not None
        note = page.locator('.session-head [data-testid=coverage]')
        if coverage.complete:
            expect(note).to_have_count(0)
        else:
            expect(note).to_have_text(coverage.label)  # e.g. "checks only, 8 of 11 judges", beside the score

    # the list shows the same scores, and the coverage of the runs not every judge judged
    page.goto(f'{server.url}/#/?agent=sample')
    for qid, sid in ids.items():
        row = page.locator(f'tr[data-session="{sid}"]')
        expect(row.locator('[data-testid=judgement-badge]')).to_have_text(_badge_text(cli[qid]))
        if qid in partly:
            expect(row.locator('[data-testid=coverage]')).to_have_text(cli[qid].coverage.label)  # type: ignore[union-attr]
        else:
            expect(row.locator('[data-testid=coverage]')).to_have_count(0)

    # the judgement tab says what ran and how much of it judged
    qid = next(q for q in partly if cli[q].coverage.label.startswith('checks only'))  # type: ignore[union-attr]
    _open(page, server, f'#/session/{ids[qid]}/judgement')
    panel = page.locator('[data-testid=judgement-panel]')
    expect(panel.locator('[data-testid=judgement-coverage]')).to_have_text(f'Judged by {cli[qid].coverage.label}.')  # type: ignore[union-attr]
    # the default: core, then the checks
    asked = 'Judges asked: tool_selection, tool_parameters, hallucination, completeness, instruction_following,'
    expect(panel.locator('[data-testid=judges-run]')).to_contain_text(asked)
    inconclusive = [n for n, j in cli[qid].judges.items() if j.status == 'inconclusive']
    for name in inconclusive:
        expect(panel.locator(f'[data-testid=verdict][data-judge="{name}"]')).to_have_attribute('data-verdict', 'inconclusive')


def test_a_run_no_judge_judged_shows_not_judged(page: Page, server: DashboardServer, tmp_path: Path) -> None:
    """Judged by the LLM judges alone, a run whose every LLM verdict is inconclusive has no score: "Not judged"."""
    cli = judge_dataset(SAMPLE, tmp_path / 'reports', conformance_judge(), 'mvp')
    qid = next(q for q, r in cli.items() if r.overall_score is None)
    assert cli[qid].coverage is not None and cli[qid].coverage.label == 'not judged'
    record = next(json.loads(line) for line in SAMPLE.read_text(encoding='utf-8').splitlines() if f'"{qid}"' in line)
    sid = ingest(server, record, agent='mvp-only')  # the same run again (the first test judged it with the checks too)
    response = server.client.post(f'/api/v1/sessions/{sid}/evaluate', json={'judges': ['mvp']})
    assert response.status_code == 202, response.text
    _open(page, server, f'#/session/{sid}/judgement')
    badge = page.locator('.session-head [data-testid=judgement-badge]')
    expect(badge).to_have_attribute('data-state', 'completed')
    expect(badge).to_have_text('Not judged')
    expect(badge).to_have_attribute('data-overall', '')
    why = 'Not judged: no judge gave a verdict (3 ran: 3 inconclusive'
    expect(page.locator('[data-testid=judgement-coverage]')).to_contain_text(why)
    expect(page.locator('[data-testid=verdict][data-verdict=inconclusive]')).to_have_count(3)
    page.goto(f'{server.url}/#/?agent=mvp-only')
    expect(page.locator(f'tr[data-session="{sid}"] [data-testid=judgement-badge]')).to_have_text('Not judged')
