"""Tests are offline: no test may reach a network model."""

from __future__ import annotations

import os

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
