"""A judge run spread over worker processes through the queue table: every report once, a SIGKILLed
worker loses nothing, enqueueing is idempotent, and `judge --queue` ends like a local run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

from sensei_eval import judge as judge_cli
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.models import JudgeModel
from sensei_eval.profiles import DEFAULT_PROFILE
from sensei_eval.records import QueryRecord
from sensei_eval.reports import EvaluationReport, RunSummary
from sensei_eval.run_folder import RunFolder
from sensei_eval.work_queue import QueueError, QueueRun, WorkerStopped, WorkQueue, collect_run, profile_data, run_worker

from .helpers import about, openai_record, user_prompt
from .service.conftest import pg_server, pg_url  # noqa: F401  (the throwaway PostgreSQL server)

ROOT = Path(__file__).resolve().parents[1]
JUDGES = ['hallucination', 'repeated_call_check']


# ---------------------------------------------------------------------------------------------------
# The scripted judge model (also what the worker subprocesses load with --model-factory)


def _answer(prompt: str, same: bool) -> str:
    reasoning = 'Nothing wrong at [2].' if same else f'Nothing wrong at [2] ({about(prompt)}).'
    return json.dumps({'reasoning': reasoning, 'issues': []})


def scripted_model(delay_s: float | None = None, calls: str | None = None, same: bool = False) -> JudgeModel:
    """A judge model answering after `delay_s` (env `SENSEI_TEST_DELAY`), appending one line per call to
    the file `calls` (env `SENSEI_TEST_CALLS`): the worker subprocesses' model."""
    delay = float(os.environ.get('SENSEI_TEST_DELAY', '0')) if delay_s is None else delay_s
    log = calls or os.environ.get('SENSEI_TEST_CALLS')

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = user_prompt(messages)
        if log:
            with open(log, 'a', encoding='utf-8') as f:
                f.write(f'{os.getpid()} {about(prompt)}\n')
        await asyncio.sleep(delay)
        return ModelResponse(parts=[TextPart(content=_answer(prompt, same))])

    return JudgeModel(FunctionModel(answer, model_name='scripted'), 'function:scripted')


def _records(n: int) -> list[QueryRecord]:
    return [openai_record(f'q{i:02d}', answer=f'Use `Depends()` ({i}).') for i in range(n)]


def _run_config(**extra: Any) -> QueueRun:
    return QueueRun(judges=JUDGES, profile=profile_data(DEFAULT_PROFILE), **extra)


def _worker_process(url: str, tmp_path: Path, name: str, *args: str, delay: float = 0.0) -> subprocess.Popen[str]:
    env = {**os.environ, 'SENSEI_TEST_DELAY': str(delay), 'SENSEI_TEST_CALLS': str(tmp_path / 'calls.log')}
    env['PYTHONPATH'] = os.pathsep.join([str(ROOT), env.get('PYTHONPATH', '')])
    return subprocess.Popen(
        [sys.executable, '-m', 'sensei_eval', 'worker', '--queue', url, '--model-factory', 'tests.test_work_queue:scripted_model',
         '--poll', '0.1', '--no-cache', *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=open(tmp_path / f'{name}.log', 'w'), text=True,
    )  # fmt: skip


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out waiting for {what}')
        time.sleep(0.05)
    return value


def _completed_lines(log: Path) -> Counter[str]:
    """query id (repeat) -> how many times a worker wrote it, from the workers' per-job lines."""
    done: Counter[str] = Counter()
    for line in log.read_text().splitlines():
        parts = line.split(' · ')
        if len(parts) >= 3 and parts[2].startswith('completed'):
            done[parts[1]] += 1
    return done


class _Writes:
    """Counts the collector's writes per report file."""

    def __init__(self) -> None:
        self.writes: Counter[Path] = Counter()
        self.reports: list[EvaluationReport] = []

    def __call__(self, report: EvaluationReport, path: Path | None) -> None:
        self.reports.append(report)
        if path is not None:
            self.writes[path] += 1


# ---------------------------------------------------------------------------------------------------
# PostgreSQL: two worker processes, a killed worker, idempotent enqueue


def test_two_worker_processes_write_every_report_once(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    queue = WorkQueue(pg_url)
    workers = [_worker_process(pg_url, tmp_path, f'w{i}', '--concurrency', '3', delay=0.2) for i in (1, 2)]
    try:
        # both are up and polling before the jobs arrive, so both take a share
        _wait_for(lambda: all('worker ' in (tmp_path / f'w{i}.log').read_text() for i in (1, 2)), 90, 'two workers')
        assert queue.enqueue('run-1', _records(10), _run_config(), repeat=2) == 20
        writes = _Writes()
        folder = RunFolder.create(tmp_path / 'out', 'run-1')
        run = collect_run(queue, 'run-1', folder, make_judges(JUDGES), on_report=writes, poll_s=0.05, timeout_s=120)
        for w in workers:  # SIGTERM: a worker finishes the jobs in hand and leaves
            w.send_signal(signal.SIGTERM)
        for w in workers:
            assert w.wait(timeout=60) == 0
    finally:
        for w in workers:
            w.kill()
        queue.close()

    expected = {f'q{i:02d}' + ('' if rep == 1 else ' (r2)') for i in range(10) for rep in (1, 2)}
    per_worker = [_completed_lines(tmp_path / f'w{i}.log') for i in (1, 2)]
    assert all(per_worker), 'both workers judged some records'
    together = per_worker[0] + per_worker[1]
    assert set(together) == expected and set(together.values()) == {1}  # none twice, none missing
    # one model call per job (the hallucination judge; the other is deterministic), none repeated
    calls = (tmp_path / 'calls.log').read_text().splitlines()
    assert len(calls) == 20
    # the collector wrote each report file once, and the folder holds exactly the 20 reports
    assert len(writes.writes) == 20 and set(writes.writes.values()) == {1}
    loaded = RunFolder(tmp_path / 'out' / 'run-1').load_reports(require=True)
    assert sorted((r.query_id, r.repeat) for r in loaded) == sorted((f'q{i:02d}', rep) for i in range(10) for rep in (1, 2))
    assert all(r.judges['hallucination'].status == 'ok' for r in loaded)
    assert run.reports == 20 and run.same_text == {}
    summary = run.tally.summary('run-1', started_at=loaded[0].evaluated_at)
    assert summary.exit_code == 0 and summary.per_judge['hallucination'].ok == 20


def test_a_sigkilled_worker_loses_nothing(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    queue = WorkQueue(pg_url)
    queue.enqueue('run-k', _records(6), _run_config())
    # this worker takes two jobs and hangs in its model calls until it is killed
    doomed = _worker_process(pg_url, tmp_path, 'doomed', '--concurrency', '2', '--lease', '2', delay=600)
    try:
        _wait_for(lambda: queue.counts('run-k').get('in_progress') == 2, 90, 'the doomed worker to hold two jobs')
        held = _held(pg_url, 'run-k')
        assert len(held) == 2 and len({owner for owner, _ in held.values()}) == 1
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=30)
    finally:
        doomed.kill()

    # another worker drains the queue: the four pending jobs at once, the two dead ones once their lease ran out
    outcomes: list[tuple[str, str]] = []
    stats = asyncio.run(
        run_worker(
            WorkQueue(pg_url), model=scripted_model(0.01), lease_s=2, poll_s=0.05, exit_when_idle=True,
            on_job=lambda job, report, outcome: outcomes.append((job.query_id, outcome)),
        )
    )  # fmt: skip
    assert stats.completed == 6 and stats.failed == stats.lost == 0
    assert sorted(q for q, outcome in outcomes if outcome == 'completed') == [f'q{i:02d}' for i in range(6)]
    after = _held(pg_url, 'run-k', status='completed')
    assert len(after) == 6
    for job_id, (_owner, attempts) in after.items():
        assert attempts == (2 if job_id in held else 1)  # the killed worker's jobs were claimed twice

    writes = _Writes()
    run = collect_run(queue, 'run-k', RunFolder.create(tmp_path / 'out', 'run-k'), make_judges(JUDGES), on_report=writes)
    queue.close()
    assert run.reports == 6 and len(writes.writes) == 6 and set(writes.writes.values()) == {1}
    assert all(r.judges['hallucination'].status == 'ok' for r in writes.reports)


def _held(url: str, run_id: str, status: str = 'in_progress') -> dict[str, tuple[str | None, int]]:
    from sqlalchemy import select

    from sensei_eval.service.store import JudgeJobRow, Store

    store = Store(url)
    try:
        with store.read() as db:
            rows = db.execute(
                select(JudgeJobRow.job_id, JudgeJobRow.owner, JudgeJobRow.attempts).where(
                    JudgeJobRow.run_id == run_id, JudgeJobRow.status == status
                )
            ).all()
    finally:
        store.dispose()
    return {job_id: (owner, attempts) for job_id, owner, attempts in rows}


def test_enqueue_is_idempotent_and_refuses_another_configuration(pg_url: str) -> None:  # noqa: F811
    queue = WorkQueue(pg_url)
    try:
        records = _records(5)
        assert queue.enqueue('run-e', records, _run_config(), repeat=2) == 10
        assert queue.enqueue('run-e', records, _run_config(), repeat=2) == 0
        # two processes enqueueing the same run at once still make one job per record and repeat
        more = _records(40)
        added: list[int] = []
        start = threading.Barrier(2)
        others = [WorkQueue(pg_url, migrate=False) for _ in range(2)]

        def enqueue(other: WorkQueue) -> None:
            start.wait()
            added.append(other.enqueue('run-e', more, _run_config(), repeat=2, batch=7))

        threads = [threading.Thread(target=enqueue, args=(other,)) for other in others]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for other in others:
            other.close()
        assert len(added) == 2 and sum(added) == 70  # the 35 new records × 2 repeats, once
        assert queue.counts('run-e') == {'pending': 80}
        with pytest.raises(QueueError, match=r'another configuration.*judges'):
            queue.enqueue('run-e', records, QueueRun(judges=['completeness'], profile=profile_data(DEFAULT_PROFILE)))
        assert queue.enqueue('run-other', records[:2], _run_config()) == 2  # another run id is another run
    finally:
        queue.close()


# ---------------------------------------------------------------------------------------------------
# Leases, failures and the run-wide rule (SQLite: one machine)


def test_an_expired_lease_is_reclaimed_then_failed_after_max_attempts(tmp_path: Path) -> None:
    queue = WorkQueue(f'sqlite:///{tmp_path / "q.db"}', max_attempts=2)
    queue.reclaim_every_s = 0.0  # look for expired leases on every claim
    try:
        queue.enqueue('run-f', _records(1), _run_config())
        first = queue.claim('dead-1', 5, lease_s=0.05)
        assert [j.attempts for j in first] == [1] and queue.claim('other', 5, lease_s=10) == []  # held: not claimable
        time.sleep(0.1)
        second = queue.claim('dead-2', 5, lease_s=0.05)  # the lease ran out: back to the queue, claimed again
        assert [j.attempts for j in second] == [2]
        assert not queue.complete(first[0], 'dead-1', _report(first[0].record))  # the first holder cannot write
        time.sleep(0.1)
        assert queue.claim('other', 5, lease_s=10) == []  # claimed twice, died twice: failed
        assert queue.counts('run-f') == {'failed': 1}
        writes = _Writes()
        run = collect_run(queue, 'run-f', RunFolder.create(tmp_path / 'out', 'run-f'), make_judges(JUDGES), on_report=writes)
        [report] = writes.reports
        assert {r.status for r in report.judges.values()} == {'error'}  # a job no worker finished is an error, never a pass
        assert 'lease expired; last held by dead-2' in (report.judges['hallucination'].error or '')
        assert run.tally.summary('run-f', started_at=report.evaluated_at).exit_code == 1
    finally:
        queue.close()


def _report(record: QueryRecord) -> EvaluationReport:
    from sensei_eval.reports import build_report

    return build_report(record, [], run_id='run-f')


def test_the_same_reasoning_everywhere_is_inconclusive_across_workers(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "q.db"}'
    queue = WorkQueue(url)
    try:
        queue.enqueue('run-s', _records(4), _run_config())
        asyncio.run(run_worker(queue, model=scripted_model(0.0, same=True), poll_s=0.02, exit_when_idle=True, concurrency=2))
        writes = _Writes()
        folder = RunFolder.create(tmp_path / 'out', 'run-s')
        run = collect_run(queue, 'run-s', folder, make_judges(JUDGES), on_report=writes)
    finally:
        queue.close()
    assert run.same_text == {'hallucination': 4}
    for report in folder.load_reports():
        assert report.judges['hallucination'].status == 'inconclusive'
        assert report.judges['repeated_call_check'].status == 'ok'  # deterministic checks are not touched


def test_a_worker_that_cannot_judge_gives_its_jobs_back(tmp_path: Path) -> None:
    queue = WorkQueue(f'sqlite:///{tmp_path / "q.db"}')
    try:
        # a model spec no worker can resolve: the worker stops (a usage error), the job is untouched
        queue.enqueue('run-bad', _records(2), _run_config(model='gpt-without-provider'))
        with pytest.raises(WorkerStopped, match='no provider prefix') as stopped:
            asyncio.run(run_worker(queue, poll_s=0.02, exit_when_idle=True, concurrency=1))
        assert stopped.value.exit_code == 2
        assert queue.counts('run-bad') == {'pending': 2}
        assert {attempts for _, attempts in _held(queue.url, 'run-bad', status='pending').values()} == {0}

        # a model that stopped answering (the "first failure" rule): its jobs go back, none is written as errors
        queue.enqueue('run-down', _records(3), _run_config())
        down = scripted_model(0.0)
        down.connection.stopped = 'stopped calling the judge model: http://127.0.0.1:9 could not be reached 3 times in a row'
        outcomes: list[str] = []
        with pytest.raises(WorkerStopped, match='could not be reached'):
            asyncio.run(
                run_worker(
                    queue, model=down, poll_s=0.02, exit_when_idle=True, concurrency=2,
                    on_job=lambda job, report, outcome: outcomes.append(outcome),
                )
            )  # fmt: skip
        assert outcomes and set(outcomes) == {'released'}
        assert queue.counts('run-down') == {'pending': 3}
        # a working worker then judges all of them
        stats = asyncio.run(run_worker(queue, model=scripted_model(0.0), poll_s=0.02, concurrency=2, exit_when_idle=True))
        assert stats.completed == 5 and queue.counts('run-down') == {'completed': 3}
    finally:
        queue.close()


# ---------------------------------------------------------------------------------------------------
# The command line: judge --queue ends like a local run, resumes collecting, writes each report once


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(judge_cli.app, list(args))


def test_judge_queue_matches_a_local_run_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = tmp_path / 'data.jsonl'
    dataset.write_text(''.join(r.model_dump_json() + '\n' for r in _records(5)) + '{"query_id": "bad"}\n', encoding='utf-8')
    url = f'sqlite:///{tmp_path / "q.db"}'
    monkeypatch.setattr(judge_cli, 'resolve_model', lambda *a, **k: scripted_model(0.0))
    common = ['--dataset', str(dataset), '--judges', ','.join(JUDGES), '--out', str(tmp_path / 'out'), '--no-cache']
    local = _invoke(*common, '--run-id', 'local', '--model', 'test')
    assert local.exit_code == 1, local.output  # the bad line: exit 1, the rest judged

    queued = _invoke(*common, '--run-id', 'q', '--queue', url, '--no-wait')
    assert queued.exit_code == 0, queued.output
    assert '5 job(s) enqueued' in queued.output
    assert not (tmp_path / 'out' / 'q' / 'summary.json').exists()
    queue = WorkQueue(url)
    asyncio.run(run_worker(queue, model=scripted_model(0.0), poll_s=0.02, exit_when_idle=True, stop=None, concurrency=1))
    # collect part of the run, as a collection interrupted half-way would have
    partial = _Writes()
    queue.collect('q', lambda report, seq: partial(report, RunFolder(tmp_path / 'out' / 'q').write_report(report)), limit=2)
    queue.close()
    first = {p: p.stat().st_mtime_ns for p in partial.writes}
    time.sleep(0.01)

    collected = _invoke(*common, '--run-id', 'q', '--queue', url)
    assert collected.exit_code == 1, collected.output  # as the local run: the bad line
    assert '0 job(s) enqueued (5 already queued)' in collected.output
    assert all(p.stat().st_mtime_ns == t for p, t in first.items())  # collected before: not written again
    mine, theirs = (RunSummary.model_validate_json((tmp_path / 'out' / r / 'summary.json').read_text()) for r in ('q', 'local'))
    same = ('records_loaded', 'records_judged', 'load_errors', 'per_judge', 'exit_code', 'mean_overall_score', 'judges', 'model')
    for field in (*same, 'model_requests'):
        assert getattr(mine, field) == getattr(theirs, field), field
    q_reports = {(r.query_id, r.repeat): r for r in RunFolder(tmp_path / 'out' / 'q').load_reports()}
    local_reports = {(r.query_id, r.repeat): r for r in RunFolder(tmp_path / 'out' / 'local').load_reports()}
    assert q_reports.keys() == local_reports.keys() and len(q_reports) == 5
    for key, report in q_reports.items():
        assert report.judges['hallucination'].reasoning == local_reports[key].judges['hallucination'].reasoning


def test_judge_queue_refuses_batch_and_another_configuration(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "q.db"}'
    args = ['--judges', 'checks', '--out', str(tmp_path / 'out'), '--run-id', 'r', '--queue', url]
    assert _invoke(*args, '--no-wait').exit_code == 0
    again = _invoke(*args[:1], 'greeting_check', *args[2:], '--no-wait')
    assert again.exit_code == 2 and 'already queued with another configuration' in ' '.join(again.output.split())
    batch = _invoke(*args, '--batch')
    assert batch.exit_code == 2 and '--batch and --queue' in batch.output
