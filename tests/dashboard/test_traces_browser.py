"""The dashboard's rejected traces in a real browser (Debian's Chromium through Playwright): an OTLP trace that
gives no agent run is listed under Traces with the reason the service gave, and the page logs no console error."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..service.conftest import ScriptedScorer
from ..service.test_trace_producers_service import _request, _span
from .seed import CHROMIUM, CHROMIUM_ARGS, dashboard_server

if not os.path.exists(CHROMIUM):
    pytest.skip(f'{CHROMIUM} is absent: apt-get install -y chromium to run the browser tests', allow_module_level=True)

from playwright.sync_api import expect, sync_playwright


@pytest.fixture
def server_url(tmp_path: Path) -> Iterator[str]:
    with dashboard_server(tmp_path / 'traces.db', ScriptedScorer().model()) as server:
        health = _request(_span('d' * 32, '1' * 16, 'GET /health'))  # a trace with no model call or agent run
        answer = server.client.post('/v1/traces', json=health).json()
        assert answer['partialSuccess']['rejectedSpans'] == 1
        yield server.url


def test_rejected_traces_are_listed_with_their_reason(server_url: str) -> None:
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.on('console', lambda m: errors.append(m.text) if m.type == 'error' and 'WebSocket' not in m.text else None)
        page.on('pageerror', lambda e: errors.append(str(e)))
        page.goto(f'{server_url}/#/traces')
        item = page.locator('[data-testid="rejected-trace"]')
        expect(item).to_have_count(1, timeout=15_000)
        expect(item).to_have_attribute('data-trace-id', 'd' * 32)
        expect(item.locator('[data-testid="rejected-reason"]')).to_contain_text('no agent-run span')
        expect(page.locator('[data-nav="traces"]')).to_have_class('current')
        browser.close()
    assert errors == []
