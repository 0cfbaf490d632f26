"""Fixtures for the scoring-service tests: real SQLite files, a throwaway PostgreSQL, scripted judges, a live server.

PostgreSQL: one server per test session, from the Debian binaries (`/usr/lib/postgresql/*/bin`):
`initdb` into a temp dir and `pg_ctl start` on a free loopback port, run as the `postgres` OS user
when we are root. Each test gets its own database. Tests needing it skip only when no server can start.

Judges are scripted with pydantic-ai `FunctionModel` (async, so a scripted judge can wait on a gate
without blocking the server's event loop).
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.evaluators.investigation_prompts import FOLLOWUP_MISSING_TOOLS_PROMPT
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.service import ServiceSettings, create_app
from sensei_eval.service.migrate import upgrade
from tests.helpers import member_prompts

ALERT_RECORD: dict[str, Any] = {
    'query_id': 'alert-1',
    'message_format': 'openai',
    'alert_data': {'alert_type': 'SuspiciousCPU', 'pod': 'miner-7f', 'namespace': 'prod', 'timestamp': '2025-12-01T10:00:00Z'},
    'messages': [
        {'role': 'user', 'content': 'Investigate the alert: pod miner-7f uses 100% CPU.'},
        {
            'role': 'assistant',
            'content': None,
            'tool_calls': [
                {'id': 'c1', 'type': 'function', 'function': {'name': 'kubectl-top', 'arguments': '{"pod": "miner-7f"}'}}
            ],
        },
        {'role': 'tool', 'tool_call_id': 'c1', 'content': 'miner-7f cpu=3980m'},
        {'role': 'assistant', 'content': 'The pod is mining crypto. Confidence: HIGH. Recommend BAN.'},
    ],
}

SCORE_TEXT = (
    'However, the agent never read the files.\n'
    'Logical Flow: 12/25\nConsistency: 14/25\nTool Relevance: 10/25\nSynthesis Quality: 9/25\n45'
)
MISSING_TOOLS_TEXT = '1. read-file: would have shown whether the binary ran.'


def alert_record(query_id: str = 'alert-1', **extra: Any) -> dict[str, Any]:
    return {**ALERT_RECORD, 'query_id': query_id, **extra}


def _last_user_prompt(messages: list[ModelMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, ModelRequest):
            for p in reversed(m.parts):
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    return p.content
    return ''


@dataclass
class ScriptedScorer:
    """The freeform investigation scorer's model, scripted.

    `gate` (a threading.Event) holds every call until set; `fail_first` makes that many calls raise a
    transient error; `delay_s` sleeps before answering; `score_text` / `missing_text` are the answers.
    """

    gate: threading.Event | None = None
    fail_first: int = 0
    fail_with: Callable[[], Exception] = lambda: ConnectionError('connection reset by peer')
    delay_s: float = 0.0
    score_text: str = SCORE_TEXT
    missing_text: str = MISSING_TOOLS_TEXT
    answer: Callable[[str], str] | None = None
    calls: int = 0
    prompts: list[str] = field(default_factory=list)

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        prompt = _last_user_prompt(messages)
        self.prompts.append(prompt)
        if self.gate is not None:
            while not self.gate.is_set():
                await asyncio.sleep(0.01)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.calls <= self.fail_first:
            raise self.fail_with()
        if self.answer is not None:
            text = _answered(self.answer, prompt)
        elif prompt == FOLLOWUP_MISSING_TOOLS_PROMPT:
            text = self.missing_text
        else:
            text = self.score_text
        return ModelResponse(parts=[TextPart(content=text)])

    def model(self) -> JudgeModel:
        return JudgeModel(FunctionModel(self, model_name='scripted'), 'function:scripted')


def _answered(answer: Callable[[str], str], prompt: str) -> str:
    """`answer`'s text, or for a fused call (several failure modes in one prompt, the service's default) one
    JSON object with each member's answer to its own single prompt under its name."""
    members = member_prompts(prompt)
    if members is None:
        return answer(prompt)
    parts: dict[str, Any] = {}
    for name, single in members.items():
        text = answer(single)
        try:
            parts[name] = json.loads(text)
        except ValueError:  # not JSON: left out, so the fused judge judges that member alone
            continue
    return json.dumps(parts) if parts else text


def fast_settings(db_url: str, **overrides: Any) -> ServiceSettings:
    """Settings with reliability timings shrunk for tests."""
    base: dict[str, Any] = {
        'db_url': db_url,
        'retry_backoff_s': 0.01,
        'breaker_reset_s': 60.0,
        'scoring_timeout_s': 20.0,
        'shutdown_grace_s': 2.0,
        'heartbeat_s': 0.5,
        'poll_s': 0.1,
    }
    base.update(overrides)
    return ServiceSettings(**base)


# ---------------------------------------------------------------------------------------------------
# Databases


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port: int = s.getsockname()[1]
        return port


def _as_postgres(cmd: list[str]) -> list[str]:
    return ['runuser', '-u', 'postgres', '--', *cmd] if os.geteuid() == 0 else cmd


def _no_server(reason: str) -> None:
    """Skip, except in CI (`CI=true`), where `.ci/run` installs PostgreSQL: there a missing server fails."""
    if os.environ.get('CI', '').lower() == 'true':
        pytest.fail(f'PostgreSQL tests cannot run in CI: {reason}')
    pytest.skip(reason)


@pytest.fixture(scope='session')
def pg_server() -> Iterator[str]:
    """A throwaway PostgreSQL server; yields a base URL without a database name.

    `SENSEI_EVAL_TEST_PG` (e.g. `postgresql+psycopg://postgres@127.0.0.1:5432`) uses a running server
    instead; its user must be allowed to create databases.
    """
    given = os.environ.get('SENSEI_EVAL_TEST_PG')
    if given:
        yield given.rstrip('/')
        return
    bins = sorted(glob.glob('/usr/lib/postgresql/*/bin/initdb'))
    initdb = bins[-1] if bins else shutil.which('initdb')
    if not initdb:
        _no_server('no PostgreSQL server binaries (apt-get install postgresql)')
        return
    bindir = os.path.dirname(initdb)
    tmp = tempfile.mkdtemp(prefix='sensei-pg-')
    data = os.path.join(tmp, 'data')
    port = _free_port()
    if os.geteuid() == 0:
        shutil.chown(tmp, 'postgres', 'postgres')
    try:
        subprocess.run(
            _as_postgres([initdb, '-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']),
            check=True,
            capture_output=True,
            timeout=120,
        )
        opts = f'-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300 -c full_page_writes=off'
        subprocess.run(
            _as_postgres([os.path.join(bindir, 'pg_ctl'), '-D', data, '-o', opts, '-l', os.path.join(tmp, 'log'), '-w', 'start']),
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (subprocess.SubprocessError, OSError) as e:
        detail = getattr(e, 'stderr', b'') or b''
        shutil.rmtree(tmp, ignore_errors=True)
        _no_server(f'PostgreSQL server could not start: {e} {detail.decode(errors="replace")[:300]}')
        return
    try:
        yield f'postgresql+psycopg://postgres@127.0.0.1:{port}'
    finally:
        subprocess.run(_as_postgres([os.path.join(bindir, 'pg_ctl'), '-D', data, '-m', 'immediate', 'stop']), capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def _pg_database(base: str) -> Iterator[str]:
    import psycopg

    name = f't_{uuid.uuid4().hex[:12]}'
    plain = base.replace('postgresql+psycopg://', 'postgresql://')
    with psycopg.connect(f'{plain}/postgres', autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE {name}')
    try:
        yield f'{base}/{name}'
    finally:
        with psycopg.connect(f'{plain}/postgres', autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS {name} WITH (FORCE)')


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    yield from _pg_database(pg_server)


@pytest.fixture(params=['sqlite', 'postgresql'])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A fresh, migrated database: a SQLite file, or a database on the throwaway PostgreSQL server."""
    if request.param == 'sqlite':
        url = f'sqlite:///{tmp_path / "service.db"}'
        upgrade(url)
        yield url
    else:
        base = request.getfixturevalue('pg_server')
        for url in _pg_database(base):
            upgrade(url)
            yield url


# ---------------------------------------------------------------------------------------------------
# A live server


@dataclass
class LiveServer:
    url: str
    ws_url: str
    app: Any
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def state(self) -> Any:
        return self.app.state.service


@contextmanager
def live_server(settings: ServiceSettings, judge_model: JudgeModel, *, migrate: bool = False) -> Iterator[LiveServer]:
    """Run the app under uvicorn in a thread on a free loopback port; stop it (with lifespan) on exit."""
    app = create_app(settings, judge_model, migrate=migrate)
    port = _free_port()
    # as `serve` runs it: X-Forwarded-For is the app's to read, from --trusted-proxy addresses only
    config = uvicorn.Config(
        app, host='127.0.0.1', port=port, log_level='warning', lifespan='on', ws='websockets-sansio', proxy_headers=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError('test server did not start')
        time.sleep(0.01)
    try:
        yield LiveServer(f'http://127.0.0.1:{port}', f'ws://127.0.0.1:{port}', app, server, thread)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def wait_until_up(client: httpx.Client, what: str = 'server up') -> None:
    """Wait for a server started in another process to answer its health check."""

    def up() -> bool:
        try:
            return client.get('/api/v1/health').status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, timeout=60, what=what)


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, what: str = 'condition') -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out waiting for {what}')
        time.sleep(0.02)
