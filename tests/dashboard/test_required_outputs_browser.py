"""The session page shows a run's required outputs (issue 39, item 2): Debian's Chromium (headless) on a live
service; a run without them shows no such card, and no page logs a console error."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .seed import CHROMIUM, CHROMIUM_ARGS, DashboardServer, ScriptedScorer, dashboard_server, ingest, plain_record

if not os.path.exists(CHROMIUM):
    pytest.skip(f'{CHROMIUM} is absent: apt-get install -y chromium to run the browser tests', allow_module_level=True)

from playwright.sync_api import Page, expect, sync_playwright

TIMEOUT_MS = 15_000


@pytest.fixture(scope='module')
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardServer]:
    with dashboard_server(tmp_path_factory.mktemp('dash') / 'dash.db', ScriptedScorer().model()) as s:
        yield s


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={'width': 1280, 'height': 800})
        context.set_default_timeout(TIMEOUT_MS)
        pg = context.new_page()
        errors: list[str] = []
        pg.on('console', lambda m: errors.append(m.text) if m.type == 'error' and 'WebSocket' not in m.text else None)
        pg.on('pageerror', lambda e: errors.append(str(e)))
        expect.set_options(timeout=TIMEOUT_MS)
        yield pg
        context.close()
        browser.close()
        assert not errors, f'console errors: {errors}'


def test_the_session_page_shows_what_the_agent_had_to_say(page: Page, server: DashboardServer) -> None:
    with_outputs = ingest(server, plain_record('q-outputs', expected_outputs=['3', 'HTTPTransport']))
    without = ingest(server, plain_record('q-none'))
    page.goto(f'{server.url}/#/session/{with_outputs}')
    card = page.locator('[data-testid=expected-outputs]')
    expect(card).to_have_text('"3", "HTTPTransport"')
    page.goto(f'{server.url}/#/session/{without}')
    expect(page.locator('main')).to_contain_text('query id: q-none')  # the second run's page is drawn
    expect(page.locator('[data-testid=final-answer]')).to_be_visible()
    expect(page.locator('[data-testid=expected-outputs]')).to_have_count(0)
