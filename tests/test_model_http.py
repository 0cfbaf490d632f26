"""The real CLI against a real OpenAI-compatible server over HTTP/1.1 keep-alive (`tests/openai_server.py`).

Each test runs `sensei-eval judge` as a subprocess (the in-process tests forbid model requests), with the
hallucination judge on sample records, and asserts the exit code, the verdicts in the reports and the
requests the server saw: one `GET /models` (the preflight) and one chat completion per judge call,
unless the policy of `sensei_eval.models.retry` says to try again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .openai_server import Behaviour, OpenAIServer

pytestmark = pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')

# A run that hangs past this is a failure of the deadline, not a slow machine (starting the CLI alone
# can take a minute on a busy two-core machine; the deadlines are measured from the first model call).
RUN_LIMIT_S = 300


def run_cli(
    server: OpenAIServer, out: Path, *args: str, query_ids: tuple[str, ...] = ('docs-001',), env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    ids = [a for q in query_ids for a in ('--query-id', q)]
    command = [sys.executable, '-m', 'sensei_eval', 'judge', '--base-url', server.base_url, '--model', 'm']
    command += ['--judges', 'hallucination', '--no-cache', '--out', str(out), *ids, *args]
    environment = {**os.environ, 'COLUMNS': '200', **(env or {})}
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=environment)
    calls = server.completions()
    # from the first judge call to the end of the run: what the deadline governs (not the CLI's start-up)
    return done, time.monotonic() - calls[0].at if calls else 0.0


def verdicts(out: Path) -> dict[str, dict[str, Any]]:
    """query id → the hallucination judge's result, from the run's reports."""
    found = {}
    for path in out.glob('*/records/*.json'):
        report = json.loads(path.read_text())
        found[report['query_id']] = report['judges']['hallucination']
    return found


def serve(*script: Behaviour, default: Behaviour = 'ok') -> OpenAIServer:
    return OpenAIServer(script=list(script), default=default)


def test_keep_alive_server_every_call_answered_once(tmp_path: Path) -> None:
    ids = ('docs-001', 'docs-002', 'docs-003')
    with serve() as server:
        done, _ = run_cli(server, tmp_path, '--concurrency', '1', query_ids=ids)
    assert done.returncode == 0, done.stderr
    assert 'Event loop is closed' not in done.stderr + done.stdout
    # the header names the model, its URL, the dataset and the judges; without a TTY progress lines appear
    assert f'judge model: {server.base_url} (model m)' in done.stderr and 'judges (1): hallucination' in done.stderr
    assert 'sample.jsonl' in done.stderr and 'progress: 3/3 records · 0 error(s) · 3 model call(s)' in done.stderr
    results = verdicts(tmp_path)
    assert set(results) == set(ids)
    assert all(r['status'] == 'ok' and r['passed'] is True for r in results.values()), results
    paths = [(r.method, r.path.split('?')[0]) for r in server.requests]
    assert paths.count(('GET', '/v1/models')) == 1 and paths[0] == ('GET', '/v1/models')
    assert len(server.completions()) == len(ids)  # one request per judge call, none lost, none repeated
    assert len({r.port for r in server.completions()}) == 1  # one call at a time: one kept-alive connection


def test_rate_limit_waits_for_retry_after(tmp_path: Path) -> None:
    with serve(('429', 4)) as server:
        done, _ = run_cli(server, tmp_path)
    assert done.returncode == 0, done.stderr
    first, second = server.completions()
    assert second.at - first.at >= 4.0  # Retry-After: 4 honoured (the old backoff came back after 0.5 s)
    assert verdicts(tmp_path)['docs-001']['status'] == 'ok'


def test_server_that_never_answers_is_cut_by_the_timeout(tmp_path: Path) -> None:
    with serve(default='hang') as server:
        done, elapsed = run_cli(server, tmp_path, '--timeout', '10')
    assert elapsed < 60  # the run ended within a minute of its judge call, not after the SDK's 600 s
    assert done.returncode == 1
    result = verdicts(tmp_path)['docs-001']
    assert result['status'] == 'error' and 'timed out' in result['error'] and '10 s' in result['error']
    assert 'timed out' in done.stderr
    assert 'deadline 10 s per judge call' in done.stderr  # the header names it
    assert len(server.completions()) == 1  # the deadline covers the attempts: no second one after it


def test_dripping_answer_is_cut_by_the_timeout(tmp_path: Path) -> None:
    with serve(default='drip') as server:
        done, elapsed = run_cli(server, tmp_path, env={'SENSEI_EVAL_TIMEOUT': '3'})
    assert done.returncode == 1
    assert elapsed < 60
    result = verdicts(tmp_path)['docs-001']
    assert result['status'] == 'error' and 'within 3 s' in result['error']


def test_server_error_is_retried_then_reported(tmp_path: Path) -> None:
    with serve(default='500') as server:
        done, _ = run_cli(server, tmp_path)
    assert done.returncode == 1
    assert len(server.completions()) == 3  # the policy's three attempts
    result = verdicts(tmp_path)['docs-001']
    assert result['status'] == 'error' and 'after 3 attempts' in result['error'] and '500' in result['error']


def test_server_error_then_answer_is_ok(tmp_path: Path) -> None:
    with serve('500') as server:
        done, _ = run_cli(server, tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(server.completions()) == 2
    assert verdicts(tmp_path)['docs-001']['status'] == 'ok'


def test_invalid_json_body_is_an_error_not_a_verdict(tmp_path: Path) -> None:
    with serve(default='invalid') as server:
        done, _ = run_cli(server, tmp_path)
    assert done.returncode == 1
    result = verdicts(tmp_path)['docs-001']
    assert result['status'] == 'error' and 'JSON' in result['error'] and result['passed'] is None
    assert len(server.completions()) == 1  # a 200 that is not JSON is not a transient failure


def test_preflight_against_a_closed_port_exits_1_naming_the_url(tmp_path: Path) -> None:
    with serve() as server:
        url = server.base_url
    done = subprocess.run(
        [sys.executable, '-m', 'sensei_eval', 'judge', '--base-url', url, '--model', 'm', '--judges', 'hallucination',
         '--no-cache', '--out', str(tmp_path), '--query-id', 'docs-001'],
        capture_output=True, text=True, timeout=RUN_LIMIT_S,
    )  # fmt: skip
    assert done.returncode == 1
    assert url.split('//')[1].split('/')[0] in done.stderr


def test_batch_against_a_server_without_the_batch_api_is_one_message(tmp_path: Path) -> None:
    with serve() as server:
        done, _ = run_cli(server, tmp_path, '--batch')
    assert done.returncode == 2
    assert 'offers no Batch API (GET /batches answered 404); run without --batch' in done.stderr
    assert server.completions() == []  # nothing judged, nothing paid


_LIBRARY_RUN = """
import json, sys
from pathlib import Path
import sensei_eval
from sensei_eval.models.judge_model import ModelChoice

run = sensei_eval.run_dataset(sensei_eval.RunSpec(
    query_ids=['docs-001', 'docs-002'], judges=['hallucination', 'checks'], cache=False,
    model=ModelChoice('m', base_url=sys.argv[1]), out_dir=Path(sys.argv[2]), run_id='lib',
))
print(json.dumps({'exit_code': run.summary.exit_code, 'reports': run.reports, 'requests': run.summary.model_requests}))
"""


def test_a_library_run_judges_over_http_as_the_command_does(tmp_path: Path) -> None:
    """`sensei_eval.run_dataset(RunSpec(...))` (what `sensei-eval judge` runs) against the server: the preflight,
    one call per record, the reports written (in a subprocess: in-process tests forbid model requests)."""
    with serve() as server:
        done = subprocess.run(
            [sys.executable, '-c', _LIBRARY_RUN, server.base_url, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=RUN_LIMIT_S,
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {'exit_code': 0, 'reports': 2, 'requests': 2}
    results = verdicts(tmp_path)
    assert set(results) == {'docs-001', 'docs-002'}
    assert all(r['status'] == 'ok' and r['passed'] is True for r in results.values()), results
    paths = [(r.method, r.path.split('?')[0]) for r in server.requests]
    assert paths[0] == ('GET', '/v1/models') and paths.count(('GET', '/v1/models')) == 1
    assert len(server.completions()) == 2
