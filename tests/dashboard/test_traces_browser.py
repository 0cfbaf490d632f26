"""The dashboard's Traces page in a real browser (Debian's Chromium through Playwright): every OTLP trace sent is
listed, an accepted one with the run it gave (a link to its session), one that gives no agent run with the
reason the service gave; the page logs no console error."""

from __future__ import annotations

import json
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
        say = [{'role': 'user', 'parts': [{'type': 'text', 'content': 'hi'}]}]
        said = [{'role': 'assistant', 'parts': [{'type': 'text', 'content': 'hello'}]}]
        run = _span('e' * 32, '2' * 16, 'chat m', gen_ai__operation__name='chat', gen_ai__input__messages=json.dumps(say),
                    gen_ai__output__messages=json.dumps(said))  # fmt: skip
        assert 'partialSuccess' not in server.client.post('/v1/traces', json=_request(run)).json()
        yield server.url


def test_accepted_and_rejected_traces_are_listed(server_url: str) -> None:
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
        accepted = page.locator('[data-testid="trace"]')
        expect(accepted).to_have_count(1)
        expect(accepted).to_have_attribute('data-trace-id', 'e' * 32)
        expect(accepted).to_have_attribute('data-status', 'ingested')
        expect(accepted.locator('[data-testid="trace-runs"] a')).to_have_count(1)
        expect(page.locator('[data-nav="traces"]')).to_have_class('current')
        browser.close()
    assert errors == []
