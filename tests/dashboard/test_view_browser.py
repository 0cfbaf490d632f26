"""The `sensei-eval view` file in a real browser (Debian's Chromium, Playwright): it opens from disk with
no network request at all, shows every failed verdict's full reason, and with two runs lists the
regressions. Run folders are written by `tests/test_view.py`'s helper (the library's own writers)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sensei_eval.judging.run_folder import load_reports
from sensei_eval.judging.view import write_view
from tests.test_view import LONG_REASON, NEW, OLD, make_run

from .seed import CHROMIUM

if not os.path.exists(CHROMIUM):
    pytest.skip(f'{CHROMIUM} is absent: apt-get install -y chromium to run the browser tests', allow_module_level=True)

from playwright.sync_api import Browser, Page, Request, expect


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={'width': 1280, 'height': 800})
    context.set_default_timeout(15_000)
    pg = context.new_page()
    yield pg
    context.close()


def _open(page: Page, path: Path) -> list[str]:
    """Open the file and return every URL the page requested (the file itself included)."""
    requests: list[str] = []

    def on_request(request: Request) -> None:
        requests.append(request.url)

    page.on('request', on_request)
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state('networkidle')
    return requests


def test_one_run_opens_offline_with_every_failed_reason(page: Page, tmp_path: Path) -> None:
    run = make_run(tmp_path, 'run-new', NEW)
    path = write_view([run])
    requests = _open(page, path)
    assert requests == [path.resolve().as_uri()], requests  # the file, and nothing else

    failed = [(r.query_id, n) for r in load_reports(run) for n, j in r.judges.items() if j.status == 'ok' and j.passed is False]
    shown = page.locator('.verdict[data-verdict=fail]')
    expect(shown).to_have_count(len(failed))
    for i in range(len(failed)):
        verdict = shown.nth(i)
        expect(verdict.locator('.reasoning')).to_contain_text(LONG_REASON)
        expect(verdict.locator('.reasoning')).to_be_visible()
    expect(page.locator('.verdict[data-verdict=error]')).to_have_count(0)  # NEW has no error, one inconclusive
    expect(page.locator('.verdict[data-verdict=inconclusive]')).to_have_count(1)
    # a cited step link lands on the marked step of the transcript
    shown.first.locator('.cites a').first.click()
    assert page.url.endswith('-s3')
    expect(page.locator('li.step.cited').first).to_be_visible()


def test_two_runs_list_the_regressions(page: Page, tmp_path: Path) -> None:
    old, new = make_run(tmp_path, 'run-old', OLD), make_run(tmp_path, 'run-new', NEW)
    path = write_view([old, new], tmp_path / 'compare.html')
    requests = _open(page, path)
    assert requests == [path.resolve().as_uri()], requests
    regressed = page.locator('#changes tr[data-kind=regressed]')
    expect(regressed).to_have_count(1)
    expect(regressed).to_contain_text('q1')
    expect(regressed).to_contain_text('hallucination')
    expect(regressed).to_contain_text('pass → fail')
    expect(page.locator('#changes tr[data-kind=fixed]')).to_contain_text('q2')
    expect(page.locator('#change-counts')).to_have_text('1 regressed · 1 fixed · 1 changed status')
    expect(page.locator('#judges tr[data-judge=hallucination]')).to_contain_text('67% (2/3)')
