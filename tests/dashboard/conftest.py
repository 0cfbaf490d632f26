"""The dashboard tests reuse the service tests' throwaway PostgreSQL server (one per test session), and the
browser tests share one headless Chromium per module (`browser`; each module skips itself when Debian's
Chromium is absent, before it asks for one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.service.conftest import pg_server, pg_url

from .seed import CHROMIUM, CHROMIUM_ARGS

if TYPE_CHECKING:
    from playwright.sync_api import Browser

__all__ = ('browser', 'pg_server', 'pg_url')


@pytest.fixture(scope='module')
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()
