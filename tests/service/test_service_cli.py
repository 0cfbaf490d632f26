"""`python -m sensei_eval serve`: starts, migrates a fresh database, serves, stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
from sqlalchemy import select

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
