"""`python -m sensei_eval serve`: starts, migrates a fresh database, serves, stops cleanly on SIGTERM; its
`--judges` (default mvp,checks, as `judge`) become the service's and the sampler's judges."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from sensei_eval.evaluators.registry import DEFAULT_JUDGES
from sensei_eval.service.store import Store, WorkerRow

from .conftest import _free_port, alert_record, wait_for, wait_until_up

ROOT = Path(__file__).resolve().parents[2]


def test_serve_command_runs_the_service(tmp_path: Path) -> None:
    port = _free_port()
    db = tmp_path / 'cli.db'
    proc = subprocess.Popen(
        [sys.executable, '-m', 'sensei_eval', 'serve', '--db', str(db), '--port', str(port), '--model', 'test',
         '--token', 'tok', '--log-level', 'warning'],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        with httpx.Client(base_url=f'http://127.0.0.1:{port}', timeout=5) as anonymous:
            wait_until_up(anonymous, what='serve up')  # the health check is open
            # without the token it says only that the service is up (issue 23: no model URL, no worker id)
            assert anonymous.get('/api/v1/health').json() == {'status': 'ok'}
            assert anonymous.get('/openapi.json').status_code == 401  # with a token, everything else needs it
        auth = {'Authorization': 'Bearer tok'}
        with httpx.Client(base_url=f'http://127.0.0.1:{port}', timeout=5, headers=auth) as c:
            assert c.get('/openapi.json').json()['info']['title'] == 'sensei-eval scoring service'
            assert c.get('/api/v1/health').json()['model'] == 'test'
            session_id = c.post('/api/v1/sessions', json=alert_record()).json()['session_id']
            assert c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={}).status_code == 202

            def finished() -> dict[str, object] | None:
                body: dict[str, object] = c.get(f'/api/v1/scoring/sessions/{session_id}/score').json()
                return body if body['status'] not in ('pending', 'in_progress') else None

            body = wait_for(finished, what='scoring finished')
            # pydantic-ai's TestModel writes no score line: an error, never a score of 0
            assert body['status'] == 'failed' and body['total_score'] is None
        proc.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal so the exit status reports it
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the lifespan ran to the end: the process unregistered itself from the store
    store = Store(f'sqlite:///{db}')
    with store.read() as session:
        assert list(session.scalars(select(WorkerRow))) == []
    store.dispose()


def _serve_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> tuple[int, Any, str]:
    """`sensei-eval serve <args>` in-process up to the point it would start uvicorn: exit code, settings, output."""
    import uvicorn
    from typer.testing import CliRunner

    from sensei_eval.cli.app import app

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, 'run', lambda asgi, **_: seen.setdefault('settings', asgi.state.service.settings))
    result = CliRunner().invoke(app, ['serve', '--db', str(tmp_path / 's.db'), '--model', 'test', *args])
    return result.exit_code, seen.get('settings'), result.output


def test_serve_judges_like_judge_by_default_and_takes_judges(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, settings, out = _serve_settings(monkeypatch, tmp_path)
    assert code == 0, out
    assert settings.judges == DEFAULT_JUDGES == ('core', 'checks') and settings.sampler.judges == DEFAULT_JUDGES
    code, settings, out = _serve_settings(monkeypatch, tmp_path, '--judges', 'checks,hallucination', '--judges', 'completeness')
    assert code == 0, out
    assert settings.judges == ('checks', 'hallucination', 'completeness')
    assert settings.sampler.judges == settings.judges  # no --sampling file: sampled traces use them too
    sampling = tmp_path / 'sampling.json'
    sampling.write_text('{"judges": ["mvp"]}')
    code, settings, out = _serve_settings(monkeypatch, tmp_path, '--judges', 'checks', '--sampling', str(sampling))
    assert code == 0, out
    assert settings.judges == ('checks',) and settings.sampler.judges == ('mvp',)  # the file's own judges win
    code, settings, out = _serve_settings(monkeypatch, tmp_path, '--judges', 'mvp,nonsense')
    assert code == 2 and settings is None
    assert 'nonsense' in out and 'judge --list' in out  # names the unknown one and where the known ones are listed
