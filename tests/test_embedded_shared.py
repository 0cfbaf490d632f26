"""The embedded model server: started by the first request that needs it (never by resolving, the
preflight or a cache hit), shared by every client of the machine through the lock, port and lease files
under the cache directory, stopped by the last client (or its watchdog), restarted when it crashed.

A tiny HTTP server stands in for llama.cpp (injected as the server command): it answers `/v1/models`
and `/v1/chat/completions` with a verdict whose reasoning names the prompt it read, and logs each
request. One test, marked `integration`, starts the real llama.cpp server once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.direct import model_request
from pydantic_ai.exceptions import ModelConnectionError
from pydantic_ai.messages import ModelRequest, TextPart
from pydantic_ai.models import override_allow_model_requests
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.core.config import default_cache_dir
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import NO_FUSING, JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from sensei_eval.models import embedded
from sensei_eval.models.embedded import SharedServer
from sensei_eval.models.judge_model import (
    ModelChoice,
    ModelUsageError,
    embedded_model,
    open_judge_model,
    preflight,
    resolve_model,
)

from .helpers import openai_record

FAKE_SERVER = textwrap.dedent(
    """
    import hashlib, json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    port, log = int(sys.argv[1]), sys.argv[2]
    empty = sys.argv[4:] == ['empty']  # answer without judging: an empty reasoning (inconclusive)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            model = {'id': 'SmolLM2-135M-Instruct', 'object': 'model', 'created': 0, 'owned_by': 'test'}
            self._answer({'object': 'list', 'data': [model]})

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
            with open(log, 'a') as f:
                f.write(json.dumps({'threads': sys.argv[3], 'max_tokens': request.get('max_tokens')}) + '\\n')
            prompt = json.dumps(request['messages'][-1]['content'])
            reasoning = '' if empty else f'Nothing wrong at [2] ({hashlib.sha256(prompt.encode()).hexdigest()[:8]}).'
            message = {'role': 'assistant', 'content': json.dumps({'reasoning': reasoning, 'issues': []})}
            self._answer({
                'id': 'c1', 'object': 'chat.completion', 'created': 0, 'model': request['model'],
                'choices': [{'index': 0, 'finish_reason': 'stop', 'message': message}],
                'usage': {'prompt_tokens': 12, 'completion_tokens': 7, 'total_tokens': 19},
            })

    ThreadingHTTPServer(('127.0.0.1', port), Handler).serve_forever()
    """
)


def fake_command(log: Path, *extra: str) -> Callable[[int, int], list[str]]:
    return lambda port, threads: [sys.executable, '-c', FAKE_SERVER, str(port), str(log), str(threads), *extra]


def requests_served(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def spawns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[list[str]]]:
    """Every server start of the test (the real `_spawn`, recorded), with the fake server as llama.cpp."""
    started: list[list[str]] = []
    real = embedded._spawn

    def spy(argv: list[str], *args: Any) -> subprocess.Popen[bytes]:
        started.append(argv)
        return real(argv, *args)

    monkeypatch.setattr(embedded, '_spawn', spy)
    monkeypatch.setattr(embedded, 'llama_server_command', fake_command(tmp_path / 'served.log'))
    yield started
    # whatever a test left running goes away with it
    for info_file in (tmp_path / 'cache' / 'embedded' / 'server.json', tmp_path / 'shared' / 'server.json'):
        if info_file.exists():
            embedded._stop(embedded.ServerInfo(**json.loads(info_file.read_text())))


def ask(model: Any, text: str = 'Reply OK.') -> str:
    with override_allow_model_requests(True):
        response = asyncio.run(model_request(model, [ModelRequest.user_text_prompt(text)]))
    part = response.parts[0]
    assert isinstance(part, TextPart)
    return part.content


def wait_until(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


# ---------------------------------------------------------------------------------------------------
# Lazy start


def test_resolving_preflight_and_closing_start_no_server(spawns: list[list[str]]) -> None:
    model = resolve_model('embedded')
    assert model.embedded and model.name == 'embedded:SmolLM2-135M-Instruct'
    asyncio.run(preflight(model))
    assert 'not started' in model.where
    model.close()
    assert spawns == []
    assert not (default_cache_dir() / 'embedded' / 'server.json').exists()


@pytest.mark.parametrize('answer', ['verdict', 'inconclusive'])
def test_a_fully_cached_rerun_starts_no_server(
    spawns: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    """Also when the model answered without judging: an inconclusive answer is cached like a verdict."""
    if answer == 'inconclusive':
        monkeypatch.setattr(embedded, 'llama_server_command', fake_command(tmp_path / 'served.log', 'empty'))
    dataset = tmp_path / 'd.jsonl'
    dataset.write_text(
        openai_record('a').model_dump_json() + '\n' + openai_record('b', answer='Use `Client.retry`.').model_dump_json() + '\n'
    )

    def run(run_id: str) -> dict[str, Any]:
        # one call per judge (the fake server answers single verdicts; fused ones are cached alike: test_fused)
        args = ['--dataset', str(dataset), '--out', str(tmp_path / 'out'), '--run-id', run_id, '--judges', 'mvp']
        args += ['--fuse', 'none', '--model', 'embedded']
        with override_allow_model_requests(True):
            result = CliRunner().invoke(judge_cli.app, args)
        assert result.exit_code == 0, result.output
        summary: dict[str, Any] = json.loads((tmp_path / 'out' / run_id / 'summary.json').read_text())
        return summary

    first = run('cold')
    assert len(spawns) == 1 and first['model_requests'] == 6
    assert len(requests_served(tmp_path / 'served.log')) == 6
    # the CLI gave its lease back on the way out: it was the last client, so the server is gone
    assert not (default_cache_dir() / 'embedded' / 'server.json').exists()

    second = run('warm')
    assert len(spawns) == 1, 'a run answered from the cache started the model server'
    assert second['model_requests'] == 0 and second['cache_hits'] == 6
    report = json.loads((tmp_path / 'out' / 'warm' / 'records' / 'a.json').read_text())
    verdicts = [report['judges'][name] for name in ('tool_selection', 'hallucination', 'completeness')]
    if answer == 'verdict':
        # smoke: stored with passed null, what the model said kept apart (never read as a pass)
        assert all(v['status'] == 'ok' and v['cached'] and v['passed'] is None for v in verdicts)
        assert all(v['details']['smoke_answer']['passed'] is True for v in verdicts)
    else:
        assert all(v['status'] == 'inconclusive' and v['cached'] and v['error'] == 'empty reasoning' for v in verdicts)
        # the embedded model's answers are smoke, never verdicts: counted per judge, not listed as inconclusive
        assert second['inconclusive'] == [] and sum(j['smoke'] for j in second['per_judge'].values()) == 6
    assert len(requests_served(tmp_path / 'served.log')) == 6


def test_concurrent_first_requests_start_one_server(spawns: list[list[str]], tmp_path: Path) -> None:
    server = SharedServer(tmp_path / 'shared', threads=1)
    model = embedded_model(server, transcript_budget=1000)

    async def many() -> list[str]:
        with override_allow_model_requests(True):
            responses = await asyncio.gather(
                *(model_request(model.model, [ModelRequest.user_text_prompt(f'question {i}')]) for i in range(6))
            )
        return [str(r.parts[0].content) for r in responses if isinstance(r.parts[0], TextPart)]  # type: ignore[union-attr]

    answers = asyncio.run(many())
    assert len(spawns) == 1 and server.starts == 1
    assert len(set(answers)) == 6  # each answer read its own prompt
    assert server.info is not None and model.where.startswith(f'http://127.0.0.1:{server.info.port}/v1')
    model.close()
    assert not (tmp_path / 'shared' / 'server.json').exists()


def test_judges_through_the_lazy_model_and_the_cache(spawns: list[list[str]], tmp_path: Path) -> None:
    # one call per judge (`NO_FUSING`): the fake server answers single verdicts
    server = SharedServer(tmp_path / 'shared')
    model = embedded_model(server, transcript_budget=4000)
    cache = JudgeCache(tmp_path / 'c')
    try:
        with override_allow_model_requests(True):
            [report] = asyncio.run(
                judge_records(
                    [openai_record()], JudgeRunOptions(make_judges(['mvp']), model, cache=cache, fuse=NO_FUSING), run_id='r'
                )
            )
            assert {r.status for r in report.judges.values()} == {'ok'} and len(spawns) == 1
            [again] = asyncio.run(
                judge_records(
                    [openai_record()], JudgeRunOptions(make_judges(['mvp']), model, cache=cache, fuse=NO_FUSING), run_id='r2'
                )
            )
    finally:
        model.close()
    assert all(r.cached for r in again.judges.values()) and len(spawns) == 1


# ---------------------------------------------------------------------------------------------------
# Sharing


def test_two_clients_share_one_server_and_the_last_stops_it(spawns: list[list[str]], tmp_path: Path) -> None:
    directory = tmp_path / 'shared'
    a, b = SharedServer(directory), SharedServer(directory)
    first = a.acquire()
    second = b.acquire()
    assert first == second and a.starts == 1 and b.starts == 0 and len(spawns) == 1
    assert len(a.leases()) == 2
    assert json.loads((directory / 'server.json').read_text())['port'] == first.port
    a.release()
    assert b.running() == first and embedded._accepts(first.port)  # one client left: still serving
    b.release()
    assert not embedded._alive(first.pid, first.started)
    assert not (directory / 'server.json').exists() and a.leases() == []
    b.release()  # twice is harmless


def test_two_judge_models_share_one_server(spawns: list[list[str]], tmp_path: Path) -> None:
    one = embedded_model(SharedServer(tmp_path / 'shared'), 1000)
    two = embedded_model(SharedServer(tmp_path / 'shared'), 1000)
    ask(one.model)
    ask(two.model)
    assert len(spawns) == 1 and one.where == two.where
    one.close()
    assert ask(two.model)  # the other client keeps it
    two.close()
    assert not (tmp_path / 'shared' / 'server.json').exists()


CLIENT = """
import sys
from sensei_eval.models.embedded import SharedServer
server = SharedServer(sys.argv[1])
print(server.acquire().port, flush=True)
sys.stdin.readline()
"""


def test_another_process_joins_the_server_and_a_killed_client_is_cleaned(spawns: list[list[str]], tmp_path: Path) -> None:
    directory = tmp_path / 'shared'
    mine = SharedServer(directory)
    info = mine.acquire()
    other = subprocess.Popen(
        [sys.executable, '-c', CLIENT, str(directory)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None
        assert int(other.stdout.readline()) == info.port  # joined, did not start another
        assert len(mine.leases()) == 2
    finally:
        other.kill()  # no release: its lease is stale now
        other.wait()
    assert len(mine.leases()) == 1  # the stale lease is removed
    mine.release()
    assert not embedded._alive(info.pid, info.started)


def test_a_crashed_server_is_detected_and_restarted(spawns: list[list[str]], tmp_path: Path) -> None:
    server = SharedServer(tmp_path / 'shared')
    model = embedded_model(server, 1000)
    ask(model.model)
    before = server.info
    assert before is not None
    os.kill(before.pid, signal.SIGKILL)  # the watchdog; llama.cpp (here the fake) dies with it
    assert wait_until(lambda: not embedded._accepts(before.port))
    assert 'Nothing wrong' in ask(model.model, 'after the crash')
    assert server.starts == 2 and len(spawns) == 2 and server.info != before
    model.close()


def test_the_watchdog_stops_a_server_whose_clients_all_died(spawns: list[list[str]], tmp_path: Path) -> None:
    directory = tmp_path / 'shared'
    server = SharedServer(directory, idle_timeout_s=0.5)
    info = server.acquire()
    for lease in (directory / 'leases').iterdir():
        lease.unlink()  # as if the client had been killed before it could release
    assert wait_until(lambda: not embedded._alive(info.pid, info.started))
    assert not (directory / 'server.json').exists()
    assert 'no client for' in (directory / 'server.log').read_text()


def test_a_server_that_cannot_start_fails_once_not_per_request(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    starts: list[int] = []

    def broken(port: int, threads: int) -> list[str]:
        starts.append(port)
        return [sys.executable, '-c', 'import sys; print("model file is corrupt"); sys.exit(3)']

    model = embedded_model(SharedServer(tmp_path / 'shared', command=broken), 1000)
    for _ in range(2):
        with pytest.raises(ModelConnectionError) as info:  # the judges' "first failure" rule counts these
            ask(model.model)
        chain, error = [], info.value
        while error.__cause__ is not None:
            chain.append(str(error := error.__cause__))
        assert any('could not start' in c and 'model file is corrupt' in c for c in chain), chain
    assert len(starts) == 1
    # the reason is logged once, with the server's own output
    assert [r.message for r in caplog.records if 'model file is corrupt' in r.message] == [
        'the embedded model server exited with code 3: model file is corrupt\n'
    ]
    model.close()


# ---------------------------------------------------------------------------------------------------
# Threads


def test_thread_count_from_the_flag_or_the_environment(
    spawns: list[list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def no_check(model: Any) -> None:
        return None

    model = open_judge_model(ModelChoice('embedded', embedded_threads=3), check=no_check)  # `--embedded-threads 3`
    assert model is not None
    ask(model.model)
    model.close()
    monkeypatch.setenv('SENSEI_EMBEDDED_THREADS', '2')
    monkeypatch.setenv('SENSEI_EVAL_MODEL', 'embedded')
    model = resolve_model()
    ask(model.model)
    model.close()
    assert [r['threads'] for r in requests_served(tmp_path / 'served.log')] == ['3', '2']
    monkeypatch.setenv('SENSEI_EMBEDDED_THREADS', 'many')
    with pytest.raises(ModelUsageError, match='SENSEI_EMBEDDED_THREADS'):
        resolve_model()
    monkeypatch.delenv('SENSEI_EMBEDDED_THREADS')
    assert 1 <= embedded.default_threads() <= (os.cpu_count() or 1)
    # one thread per idle core: all of them on an idle machine, at least one on a busy one
    assert embedded.default_threads(cores=2, load=0.3) == 2
    assert embedded.default_threads(cores=2, load=1.2) == 1
    assert embedded.default_threads(cores=2, load=11.0) == 1
    assert embedded.default_threads(cores=8, load=3.5) == 4  # busy cores rounded: 3.5 of them busy leaves 4


# ---------------------------------------------------------------------------------------------------
# The service


def test_the_service_starts_no_server_until_a_request_needs_it(
    spawns: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip('fastapi')
    from fastapi.testclient import TestClient

    from sensei_eval.service import ServiceSettings, create_app

    settings = ServiceSettings(db_url=f'sqlite:///{tmp_path / "s.db"}', concurrency=0)
    monkeypatch.setenv('SENSEI_EVAL_MODEL', 'embedded')  # the embedded model only when named
    with TestClient(create_app(settings), base_url='http://localhost') as client:
        health = client.get('/api/v1/health').json()
        assert health['model'] == 'embedded:SmolLM2-135M-Instruct'
        assert spawns == []
    assert spawns == [] and not (default_cache_dir() / 'embedded' / 'leases').exists()


# ---------------------------------------------------------------------------------------------------
# The real server, once


@pytest.mark.integration
def test_the_real_embedded_server_is_shared_and_stopped(tmp_path: Path) -> None:
    a = embedded_model(SharedServer(tmp_path / 'real', threads=2), 1000)
    b = embedded_model(SharedServer(tmp_path / 'real', threads=2), 1000)
    try:
        a.settings['max_tokens'] = 4
        with override_allow_model_requests(True):
            for model in (a, b):
                asyncio.run(model_request(model.model, [ModelRequest.user_text_prompt('Say hi.')], model_settings=model.settings))
        assert a.where == b.where and a._server.starts == 1 and b._server.starts == 0
    finally:
        a.close()
        b.close()
    assert not (tmp_path / 'real' / 'server.json').exists()
