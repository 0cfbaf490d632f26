"""Tests are offline: no test may reach a network model."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from pydantic_ai import models

models.ALLOW_MODEL_REQUESTS = False
os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Each test gets its own cache dir and no model configured from the environment."""
    monkeypatch.setenv('SENSEI_EVAL_CACHE', str(tmp_path / 'cache'))
    monkeypatch.delenv('SENSEI_EVAL_MODEL', raising=False)
    monkeypatch.delenv('SENSEI_EVAL_BASE_URL', raising=False)


@pytest.fixture(autouse=True)
def _log_records_as_they_were() -> Iterator[None]:
    """`serve` makes every log record of its process safe (`core.logsafe.install`, a record factory); a
    test that runs `serve` in this process must not leave that on for the tests after it."""
    factory = logging.getLogRecordFactory()
    yield
    if logging.getLogRecordFactory() is not factory:
        from sensei_eval.core import logsafe

        logging.setLogRecordFactory(factory)
        logsafe._installed = False
