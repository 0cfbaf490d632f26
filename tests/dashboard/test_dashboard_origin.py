"""Finding 4 in a real browser: a page on another origin can neither read the service's events nor
start a scoring (the tester's page read live events over the WebSocket, took session ids from them and
POSTed body-less CORS "simple" requests to /score and /evaluate).

A tiny page is served on a second loopback port (another origin), opened in Chromium, and made to try
everything a hostile page could: text/plain and body-less POSTs (sent by the browser without asking,
`no-cors`), a JSON POST (needs a CORS preflight the service never grants), a cross-origin read, and a
WebSocket. Afterwards the service has no scoring and no evaluation for the session.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .seed import CHROMIUM, CHROMIUM_ARGS, DashboardServer, ScriptedScorer, alert_record, dashboard_server, ingest

if not os.path.exists(CHROMIUM):
    pytest.skip(f'{CHROMIUM} is absent: apt-get install -y chromium to run the browser tests', allow_module_level=True)

from playwright.sync_api import sync_playwright

PAGE = b'<!doctype html><html><head><title>elsewhere</title></head><body><p>another origin</p></body></html>'

ATTACK = """
async ([service, ws, sessionId]) => {
  const out = {};
  const score = `${service}/api/v1/scoring/sessions/${sessionId}/score`;
  const evaluate = `${service}/api/v1/sessions/${sessionId}/evaluate`;
  const attempt = async (name, url, init) => {
    try {
      const r = await fetch(url, init);
      out[name] = r.type === 'opaque' ? 'sent (opaque answer)' : `read status ${r.status}`;
    } catch (e) {
      out[name] = `blocked: ${e.name}`;
    }
  };
  // CORS "simple" requests: the browser sends them without asking; only the service can refuse them
  await attempt('simple_text', score, { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: '{}' });
  await attempt('simple_empty', score, { method: 'POST', mode: 'no-cors' });
  const text = { 'Content-Type': 'text/plain' };
  await attempt('simple_evaluate', evaluate, { method: 'POST', mode: 'no-cors', headers: text, body: '{}' });
  await attempt('simple_form', evaluate, { method: 'POST', mode: 'no-cors', body: new URLSearchParams({ force: 'true' }) });
  // a JSON write needs a preflight; a cross-origin read needs CORS headers: the service sends none
  await attempt('json_post', score, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
  await attempt('read_list', `${service}/api/v1/sessions`, {});
  // the live events
  out.ws = await new Promise((resolve) => {
    const seen = [];
    let socket;
    try {
      socket = new WebSocket(`${ws}/api/v1/ws?channels=sessions,session:${sessionId}`);
    } catch (e) {
      resolve({ code: -1, messages: seen, error: String(e) });
      return;
    }
    socket.onmessage = (m) => seen.push(String(m.data));
    socket.onclose = (e) => resolve({ code: e.code, reason: e.reason, messages: seen });
    setTimeout(() => resolve({ code: 0, messages: seen, error: 'still open after 10 s' }), 10000);
  });
  return out;
}
"""


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Content-Length', str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def elsewhere() -> Iterator[str]:
    """The other origin: a tiny page on a second loopback port."""
    httpd = ThreadingHTTPServer(('127.0.0.1', 0), _Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{httpd.server_address[1]}'
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DashboardServer]:
    with dashboard_server(tmp_path / 'origin.db', ScriptedScorer().model()) as s:
        yield s


def test_page_on_another_origin_can_neither_read_events_nor_start_a_scoring(server: DashboardServer, elsewhere: str) -> None:
    sid = ingest(server, alert_record('origin-1'), agent='origin')
    ws_url = server.url.replace('http://', 'ws://')
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f'{elsewhere}/')
            assert page.title() == 'elsewhere'
            out = page.evaluate(ATTACK, [server.url, ws_url, sid])
        finally:
            browser.close()
    # the simple requests left the browser, and the service refused them (nothing was created, below)
    for name in ('simple_text', 'simple_empty', 'simple_evaluate', 'simple_form'):
        assert out[name] == 'sent (opaque answer)', (name, out)
    assert out['json_post'].startswith('blocked'), out
    assert out['read_list'].startswith('blocked'), out
    # the handshake is refused (403): a browser reports that as close code 1006, with nothing received
    assert out['ws']['messages'] == [] and out['ws']['code'] == 1006, out['ws']
    assert server.client.get(f'/api/v1/scoring/sessions/{sid}/scores').json() == []
    assert server.client.get(f'/api/v1/sessions/{sid}/evaluation').status_code == 404
    assert server.client.get(f'/api/v1/sessions/{sid}').json()['scoring_status'] == 'not_scored'
