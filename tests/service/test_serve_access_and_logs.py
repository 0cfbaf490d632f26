"""Who may write, what the logs keep, and how `serve` takes its flags, reproduced against the real server.

* An empty `SENSEI_EVAL_TOKEN=''` (or `--token ''`, or only spaces) used to start the service with
  authentication off and no warning; on `0.0.0.0` an unauthenticated POST got 201. On a non-loopback address
  it is a usage error unless `--public-read` is chosen, which makes the service read-only (reads open to
  all, every write 403); on loopback it starts without authentication, with a warning.
* A secret a client puts in a query string (`?api_key=`) reached uvicorn's access log in clear.
* `--log-level nope` printed a traceback; a write refused with 413 before its route was not audited.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from sensei_eval.service.migrate import upgrade

from .conftest import ScriptedScorer, _free_port, alert_record, fast_settings, live_server, wait_until_up

ROOT = Path(__file__).resolve().parents[2]
JSON = {'Content-Type': 'application/json'}


def _serve_decision(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str, env_token: str | None = None
) -> tuple[int, Any, str]:
    """`sensei-eval serve <args>` in this process up to the point it would start uvicorn (nothing is bound):
    exit code, the settings it would serve with, and what it printed and logged."""
    import uvicorn
    from typer.testing import CliRunner

    from sensei_eval.cli.app import app

    if env_token is None:
        monkeypatch.delenv('SENSEI_EVAL_TOKEN', raising=False)
    else:
        monkeypatch.setenv('SENSEI_EVAL_TOKEN', env_token)
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, 'run', lambda asgi, **kw: seen.update(kw, settings=asgi.state.service.settings))
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger('sensei_eval.service').addHandler(handler)
    try:
        result = CliRunner().invoke(app, ['serve', '--db', str(tmp_path / 's.db'), '--model', 'test', *args])
    finally:
        logging.getLogger('sensei_eval.service').removeHandler(handler)
    return result.exit_code, seen.get('settings'), result.output + '\n'.join(records)


@pytest.mark.parametrize('given', [('',), ('   ',), ('--token', '')])
def test_an_empty_token_on_a_non_loopback_host_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, given: tuple[str, ...]
) -> None:
    flag = list(given) if given[0] == '--token' else []
    env = None if flag else given[0]
    code, settings, out = _serve_decision(monkeypatch, tmp_path, '--host', '0.0.0.0', *flag, env_token=env)
    assert code == 2 and settings is None, out
    assert 'set but empty' in out and '--public-read' in out


def test_public_read_is_the_explicit_choice_and_makes_the_service_read_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, settings, out = _serve_decision(monkeypatch, tmp_path, '--host', '0.0.0.0', '--public-read', env_token='')
    assert code == 0, out
    assert settings.token is None and settings.public_read and settings.read_only


def test_on_loopback_an_empty_token_starts_without_authentication_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, settings, out = _serve_decision(monkeypatch, tmp_path, '--host', '127.0.0.1', env_token='')
    assert code == 0, out
    assert settings.token is None and not settings.read_only
    assert 'SENSEI_EVAL_TOKEN is set but empty' in out


def test_no_token_on_a_non_loopback_host_is_warned_about(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, settings, out = _serve_decision(monkeypatch, tmp_path, '--host', '0.0.0.0')
    assert code == 0, out
    assert 'anyone who can reach the service may read and write' in out
    code, settings, out = _serve_decision(monkeypatch, tmp_path, '--host', '0.0.0.0', '--token', 'tok-123456')
    assert code == 0 and settings.token == 'tok-123456' and 'anyone' not in out


def test_a_read_only_service_answers_reads_and_refuses_every_write(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    upgrade(url)
    settings = fast_settings(url, public_read=True)
    with live_server(settings, ScriptedScorer().model()) as server, httpx.Client(base_url=server.url) as c:
        with caplog.at_level(logging.WARNING, logger='sensei_eval.service.audit'):
            refused = c.post('/api/v1/sessions', json=alert_record('ro'))
            patched = c.patch('/api/v1/sessions/x', json={'status': 'completed'})
        listed = c.get('/api/v1/sessions')
        page = c.get('/')
    assert refused.status_code == 403 and 'takes no writes' in refused.json()['detail']
    assert patched.status_code == 403
    assert listed.status_code == 200 and listed.json()['total'] == 0 and page.status_code == 200
    assert any('POST /api/v1/sessions refused' in r.getMessage() and 'read-only' in r.getMessage() for r in caplog.records)


def _serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = _free_port()
    log = tmp_path / 'serve.log'
    out = log.open('wb')
    environment = {k: v for k, v in os.environ.items() if k != 'SENSEI_EVAL_TOKEN'} | (env or {})
    proc = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'sensei_eval',
            'serve',
            '--db',
            str(tmp_path / 's.db'),
            '--port',
            str(port),
            '--model',
            'test',
            *args,
        ],
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
        env=environment,
    )
    out.close()
    return proc, f'http://127.0.0.1:{port}', log


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_the_access_log_redacts_secrets_in_query_strings(tmp_path: Path) -> None:
    proc, url, log = _serve(tmp_path)
    try:
        with httpx.Client(base_url=url, timeout=10) as c:
            wait_until_up(c)
            c.get('/api/v1/health', params={'api_key': 'k-s3cr3t-1', 'verbose': 'yes'})
            c.get('/api/v1/sessions', params={'access_token': 't-s3cr3t-2', 'limit': '5'})
            c.get('/api/v1/sessions?api%5Fkey=k-s3cr3t-3&sig=s-s3cr3t-4')
    finally:
        _stop(proc)
    text = log.read_text()
    assert 'GET /api/v1/health?api_key=***&verbose=yes' in text, text[-2000:]  # uvicorn's access line, redacted
    assert 'GET /api/v1/sessions?access_token=***&limit=5' in text
    for secret in ('k-s3cr3t-1', 't-s3cr3t-2', 'k-s3cr3t-3', 's-s3cr3t-4'):
        assert secret not in text


def test_an_unknown_log_level_is_a_usage_error_listing_the_levels(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, '-m', 'sensei_eval', 'serve', '--db', str(tmp_path / 's.db'), '--log-level', 'nope'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "'nope' is not one of" in done.stderr and 'critical' in done.stderr and 'debug' in done.stderr
    assert 'Traceback' not in done.stderr + done.stdout


def test_writes_refused_413_before_their_route_are_audited(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    upgrade(url)
    settings = fast_settings(url, max_body_bytes=2000, max_json_values=50)
    with (
        live_server(settings, ScriptedScorer().model()) as server,
        caplog.at_level(logging.INFO, logger='sensei_eval.service.audit'),
    ):
        port = int(server.url.rsplit(':', 1)[1])
        by_length = httpx.post(f'{server.url}/api/v1/sessions', content=b'{' + b' ' * 5000 + b'}', headers=JSON)

        def chunks() -> Any:
            yield b'{"a": "'
            yield b'x' * 5000
            yield b'"}'

        streamed = httpx.post(f'{server.url}/api/v1/sessions', content=chunks(), headers=JSON)  # no Content-Length
        values = httpx.post(f'{server.url}/api/v1/sessions', content=b'[' + b'1,' * 100 + b'1]', headers=JSON)
        with socket.create_connection(('127.0.0.1', port), timeout=5) as s:  # a declared length the client never sends
            s.sendall(b'POST /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
                      b'Content-Length: 999999999\r\n\r\n')  # fmt: skip
            declared = int(s.recv(100).split()[1])
    assert [by_length.status_code, streamed.status_code, values.status_code, declared] == [413, 413, 413, 413]
    refusals = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum('POST /api/v1/sessions refused from 127.0.0.1' in m for m in refusals) == 4, refusals
    assert any('over the limit of 2000' in m for m in refusals) and any('999999999 bytes' in m for m in refusals)
