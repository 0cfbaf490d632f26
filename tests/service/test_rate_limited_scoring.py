"""A 429 during a service scoring is reported as rate-limited, with the wait the server asked for, and a
`Retry-After` the scoring's deadline cannot honour is not waited out.

The service runs under uvicorn on loopback (`live_server`) and its judge model is the OpenAI-compatible test
server (`tests/openai_server.py`) over real HTTP, answering every completion with 429 and `Retry-After: 120`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from sensei_eval.models.judge_model import resolve_model
from sensei_eval.models.retry import RATE_LIMITED, rate_limit_note
from tests.openai_server import OpenAIServer
from tests.service.conftest import alert_record, fast_settings, live_server, wait_for

pytestmark = pytest.mark.usefixtures('loopback_model_requests')


@pytest.fixture
def loopback_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_ai import models

    monkeypatch.setattr(models, 'ALLOW_MODEL_REQUESTS', True)  # the model is the loopback test server


def _finished(client: httpx.Client, session_id: str) -> Any:
    body = client.get(f'/api/v1/scoring/sessions/{session_id}/score').json()
    return body if body.get('status') not in ('pending', 'in_progress') else None


def test_a_429_past_the_deadline_is_rate_limited_not_timed_out(tmp_path: Path) -> None:
    settings = fast_settings(f'sqlite:///{tmp_path / "s.db"}', scoring_timeout_s=30.0, retry_backoff_s=0.01)
    with OpenAIServer(default=('429', 120)) as model_server:
        judge = resolve_model('m', base_url=model_server.base_url)
        with live_server(settings, judge, migrate=True) as server, httpx.Client(base_url=server.url, timeout=30) as c:
            session_id = c.post('/api/v1/sessions', json=alert_record('rated-429')).json()['session_id']
            started = time.monotonic()
            assert c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={}).status_code == 202
            body = wait_for(lambda: _finished(c, session_id), timeout=25, what='the scoring to finish')
            took = time.monotonic() - started
        calls = len(model_server.completions())
    error = body['error_message'] or ''
    assert body['status'] == 'failed', body
    assert f'{RATE_LIMITED} (429)' in error and '120 s' in error and 'Retry-After' in error, error
    assert 'timed out' not in error and 'no answer' not in error, error
    assert took < 10, f'waited {took:.1f} s on a Retry-After the 30 s deadline could not honour'
    assert calls == 1  # the 429 ended the call: no second attempt after a wait past the deadline


def test_a_429_within_the_deadline_is_waited_and_named_when_it_persists(tmp_path: Path) -> None:
    settings = fast_settings(f'sqlite:///{tmp_path / "s.db"}', scoring_timeout_s=30.0, model_attempts=2)
    with OpenAIServer(default=('429', 1)) as model_server:
        judge = resolve_model('m', base_url=model_server.base_url)
        with live_server(settings, judge, migrate=True) as server, httpx.Client(base_url=server.url, timeout=30) as c:
            session_id = c.post('/api/v1/sessions', json=alert_record('rated-429-short')).json()['session_id']
            c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={})
            body = wait_for(lambda: _finished(c, session_id), timeout=25, what='the scoring to finish')
        first, second = model_server.completions()[:2]
    error = body['error_message'] or ''
    assert body['status'] == 'failed' and f'{RATE_LIMITED} (429) after 2 attempts' in error, error
    assert 'wait 1 s' in error and 'timed out' not in error, error
    assert second.at - first.at >= 0.9  # the Retry-After it could honour was honoured


def test_the_note_is_only_for_429() -> None:
    import httpx2

    request = httpx2.Request('POST', 'http://127.0.0.1:9/v1/chat/completions')

    def error(status: int) -> httpx2.HTTPStatusError:
        response = httpx2.Response(status, headers={'retry-after': '7'}, request=request)
        return httpx2.HTTPStatusError('refused', request=request, response=response)

    assert rate_limit_note(error(503)) is None
    assert (
        rate_limit_note(error(429), attempts=3)
        == f'{RATE_LIMITED} (429) after 3 attempts; the server asked to wait 7 s before another attempt (Retry-After)'
    )
    assert 'longer than the 5 s left' in (rate_limit_note(error(429), left_s=5.2) or '')
