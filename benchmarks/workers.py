"""Throughput of a judge run spread over 1, 2 and 4 worker processes (`sensei-eval worker`).

Each worker process judges with a fake model — a pydantic-ai `FunctionModel` that sleeps a fixed
`--latency` per call (0.2 s) and answers like a failure-mode judge, loaded by the worker with
`--model-factory workers:fake_model` — so what is measured is the queue: claims (`FOR UPDATE SKIP
LOCKED`), lease renewals, one transaction per finished job, and the collector writing the run folder.
Every worker judges `--concurrency` records at once (default 2), so one worker tops out at about
concurrency / latency records per second, and N workers should give N times that.

For each worker count: the workers are started and wait on an empty queue (their start-up is not
timed), then `--records` records (one model judge each, no cache) are enqueued and the clock runs
until the collector has written the last report. Prints records/s and the speed-up over one worker
(target: ≥ 1.8× with 2 workers).

Queue: `--queue URL`, else a throwaway PostgreSQL server from the Debian binaries
(`/usr/lib/postgresql/*/bin`), else a SQLite file (one machine; say so in the output).

    python benchmarks/workers.py [--workers 1 2 4] [--records 120] [--latency 0.2] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from service import _throwaway_postgres  # noqa: E402  (benchmarks/service.py: the same throwaway server)

from sensei_eval.models import JudgeModel  # noqa: E402
from sensei_eval.records import QueryRecord  # noqa: E402


def fake_model() -> JudgeModel:
    """The workers' judge model: sleeps `$SENSEI_BENCH_LATENCY` seconds, then finds nothing wrong (with a
    reasoning that differs per transcript, as a real judge's does)."""
    latency = float(os.environ.get('SENSEI_BENCH_LATENCY', '0.2'))

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = next(
            (p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)), ''
        )
        await asyncio.sleep(latency)
        digest = hashlib.sha256(str(prompt).encode()).hexdigest()[:8]
        return ModelResponse(parts=[TextPart(json.dumps({'reasoning': f'Nothing wrong at [2] ({digest}).', 'issues': []}))])

    return JudgeModel(FunctionModel(answer, model_name='bench'), 'function:bench')


def _records(n: int) -> list[QueryRecord]:
    return [
        QueryRecord.model_validate(
            {
                'query_id': f'bench-{i:05d}',
                'messages': [
                    {'role': 'user', 'content': f'How do I configure retries in client {i}?'},
                    {'role': 'assistant', 'content': f'Set `retries={i % 7}` on the transport.'},
                ],
            }
        )
        for i in range(n)
    ]


def _start_workers(url: str, n: int, args: argparse.Namespace, logs: Path) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, 'SENSEI_BENCH_LATENCY': str(args.latency)}
    env['PYTHONPATH'] = os.pathsep.join([str(HERE), str(ROOT), env.get('PYTHONPATH', '')])
    command = [sys.executable, '-m', 'sensei_eval', 'worker', '--queue', url, '--model-factory', 'workers:fake_model']
    command += ['--concurrency', str(args.concurrency), '--poll', str(args.poll), '--no-cache', '--quiet']
    procs = []
    for i in range(n):
        log = (logs / f'worker-{n}-{i}.log').open('w')
        procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log))
    deadline = time.monotonic() + 120
    while not all('worker ' in (logs / f'worker-{n}-{i}.log').read_text() for i in range(n)):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError(f'workers did not start; see {logs}')
        time.sleep(0.05)
    return procs


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()


def measure(url: str, workers: int, args: argparse.Namespace, tmp: Path) -> float:
    """Seconds from enqueueing the run to the last report written by the collector."""
    from sensei_eval.evaluators.registry import make_judges
    from sensei_eval.run_folder import RunFolder
    from sensei_eval.work_queue import QueueRun, WorkQueue, collect_run

    queue = WorkQueue(url)
    procs = _start_workers(url, workers, args, tmp)
    try:
        run_id = f'bench-{workers}w-{os.urandom(3).hex()}'
        judges = ['hallucination']
        start = time.perf_counter()
        queue.enqueue(run_id, _records(args.records), QueueRun(judges=judges, cache=False))
        run = collect_run(queue, run_id, RunFolder.create(tmp / 'out', run_id), make_judges(judges), poll_s=0.1)
        elapsed = time.perf_counter() - start
        if run.reports != args.records:
            raise RuntimeError(f'{run.reports} reports for {args.records} records')
        return elapsed
    finally:
        _stop(procs)
        queue.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--workers', type=int, nargs='+', default=[1, 2, 4])
    parser.add_argument('--records', type=int, default=120)
    parser.add_argument('--latency', type=float, default=0.2, help='seconds per model call')
    parser.add_argument('--concurrency', type=int, default=2, help='records at once per worker')
    parser.add_argument('--poll', type=float, default=0.05, help="workers' poll interval on an empty queue")
    parser.add_argument('--queue', help='queue URL (default: a throwaway PostgreSQL, else SQLite)')
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix='sensei-bench-workers-'))
    try:
        with _throwaway_postgres() if args.queue is None else _given(args.queue) as pg:
            url = pg or f'sqlite:///{tmp / "queue.db"}'
            backend = url.split(':', 1)[0]
            ideal = args.concurrency / args.latency
            print(
                f'{args.records} records, 1 model judge each, {args.latency:.2f} s per call, {args.concurrency} records at '
                f'once per worker (ideal {ideal:.1f} records/s per worker); queue: {backend}; {os.cpu_count()} CPU(s)'
            )
            print(f'{"workers":>7}  {"seconds":>8}  {"records/s":>9}  {"speed-up":>8}')
            base = None
            for n in args.workers:
                elapsed = measure(url, n, args, tmp)
                rate = args.records / elapsed
                base = base or rate
                print(f'{n:>7}  {elapsed:>8.2f}  {rate:>9.1f}  {rate / base:>7.2f}x', flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == '__main__':
    main()
