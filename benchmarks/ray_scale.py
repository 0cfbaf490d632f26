"""Judging on Ray vs a local run: the same records, a fake judge model of fixed latency.

Throughput: N records (default 2,000) judged by one model judge whose model (a pydantic-ai
`FunctionModel`) sleeps `--latency` seconds (default 0.2) and answers a valid verdict: first a local
run (`runner.judge_stream`, `--concurrency` calls in flight), then `judge_on_ray` with 1, 2 and 4
workers on a local Ray on this machine, each worker with `--concurrency` calls in flight. Judging is
IO-bound: W workers should judge about W times as fast as one, and every run writes the same reports
(compared file by file, times aside).

Driver memory: in a fresh process per size (default 10,000 and 100,000 records), a dataset file is
judged on Ray as `judge --ray` does (streamed from the file, reports written, summary counted) and the
driver's peak resident memory is read from the OS: it should not grow with the records.

    python benchmarks/ray_scale.py [--records 2000] [--latency 0.2] [--workers 1 2 4] [--concurrency 8]
                                   [--memory 10000 100000] [--memory-latency 0.01]

Figures taken on a loaded machine are provisional; the table says what ran.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

HERE = Path(__file__).resolve().parent
LATENCY_ENV = 'RAY_SCALE_LATENCY'  # the fake model's latency on the workers (they import this module)


# ---------------------------------------------------------------------------------------------------
# The fake model and the records


async def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    await asyncio.sleep(float(os.environ.get(LATENCY_ENV, '0.2')))
    # one reasoning per transcript (the same text on every record would be marked inconclusive), from
    # the prompt's text only: a message's repr carries its timestamp, which differs between two runs
    parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
    prompt = ''.join(str(p.content) for p in parts if isinstance(p, UserPromptPart))
    seen = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    return ModelResponse(parts=[TextPart(json.dumps({'reasoning': f'Nothing wrong at [3] ({seen}).', 'issues': []}))])


def fake_model() -> Any:
    """The fake judge model (built by name on each Ray worker: `ray_scale:fake_model`)."""
    from sensei_eval.models.judge_model import JudgeModel

    return JudgeModel(FunctionModel(_answer, model_name='fake'), 'function:fake', 60_000)


def _record(i: int) -> dict[str, Any]:
    return {
        'query_id': f'bench-{i}',
        'messages': [
            {'role': 'user', 'content': f'Question {i}: how do FastAPI dependencies work?'},
            {
                'role': 'assistant',
                'content': None,
                'tool_calls': [
                    {
                        'id': 'c1',
                        'type': 'function',
                        'function': {'name': 'context7_get_docs', 'arguments': '{"library_id": "/fastapi/fastapi"}'},
                    }
                ],
            },
            {'role': 'tool', 'tool_call_id': 'c1', 'content': f'Depends() declares dependency {i}. ' * 20},
            {'role': 'assistant', 'content': f'Use `Depends()` ({i}).'},
        ],
    }


def _records(n: int) -> Iterator[Any]:
    from sensei_eval.core.records import QueryRecord

    for i in range(n):
        yield QueryRecord.model_validate(_record(i))


def _digests(folder: Path) -> dict[str, str]:
    """Each report's digest, without what differs between two runs of the same judging (times, run id)."""
    drop = {'evaluated_at', 'run_id', 'latency_s'}

    def timeless(d: Any) -> Any:
        return {k: timeless(v) for k, v in d.items() if k not in drop} if isinstance(d, dict) else d

    return {
        p.name: hashlib.sha256(json.dumps(timeless(json.loads(p.read_text())), sort_keys=True).encode()).hexdigest()
        for p in (folder / 'records').glob('*.json')
    }


def _judges() -> list[Any]:
    from sensei_eval.evaluators.registry import make_judges

    return make_judges(['hallucination'])


# ---------------------------------------------------------------------------------------------------
# Throughput


def throughput(records: int, latency: float, workers: list[int], concurrency: int) -> list[tuple[str, float, int, int]]:
    import ray

    from sensei_eval.judging.options import JudgeRunOptions
    from sensei_eval.judging.ray_engine import ModelSpec, RayCluster, judge_on_ray
    from sensei_eval.judging.runner import judge_stream

    os.environ[LATENCY_ENV] = str(latency)
    rows: list[tuple[str, float, int, int]] = []  # (what, seconds, reports, differing reports)
    with tempfile.TemporaryDirectory(prefix='ray-scale-') as tmp:
        out = Path(tmp)
        start = time.perf_counter()
        asyncio.run(
            judge_stream(
                _records(records), JudgeRunOptions(_judges(), fake_model(), concurrency=concurrency), run_dir=out / 'local'
            )
        )
        rows.append(('local (1 process)', time.perf_counter() - start, records, 0))
        reference = _digests(out / 'local')
        # logical CPUs for the workers: they wait on the model, so more of them than cores is the point
        ray.init(
            num_cpus=max(workers), include_dashboard=False, configure_logging=False, log_to_driver=False,
            runtime_env={'env_vars': {'PYTHONPATH': os.pathsep.join([str(HERE), *sys.path[1:]]), LATENCY_ENV: str(latency)}},
        )  # fmt: skip
        try:
            for w in workers:
                start = time.perf_counter()
                asyncio.run(
                    judge_on_ray(
                        _records(records), JudgeRunOptions(_judges(), concurrency=concurrency),
                        ModelSpec(factory='ray_scale:fake_model'), run_dir=out / f'ray{w}',
                        cluster=RayCluster(workers=w, cpus_per_worker=1.0),
                    )
                )  # fmt: skip
                seconds = time.perf_counter() - start
                got = _digests(out / f'ray{w}')
                differing = sum(1 for k, v in reference.items() if got.get(k) != v) + len(set(got) - set(reference))
                rows.append((f'ray, {w} worker(s)', seconds, len(got), differing))
        finally:
            ray.shutdown()
    return rows


# ---------------------------------------------------------------------------------------------------
# Driver memory (a child process per size)


def memory_child(n: int, latency: float, workers: int, concurrency: int) -> None:
    """Judge N records from a dataset file on Ray, as `judge --ray` does; print the driver's peak RSS."""
    import ray

    from sensei_eval.core.datasets import iter_datasets
    from sensei_eval.core.errors import LoadError
    from sensei_eval.judging.options import JudgeRunOptions
    from sensei_eval.judging.ray_engine import ModelSpec, RayCluster, judge_on_ray

    with tempfile.TemporaryDirectory(prefix='ray-scale-mem-') as tmp:
        data = Path(tmp) / 'data.jsonl'
        with data.open('w') as f:
            for i in range(n):
                f.write(json.dumps(_record(i)) + '\n')
        before = _peak_mib()
        ray.init(
            num_cpus=workers, include_dashboard=False, configure_logging=False, log_to_driver=False,
            runtime_env={'env_vars': {'PYTHONPATH': os.pathsep.join([str(HERE), *sys.path[1:]]), LATENCY_ENV: str(latency)}},
        )  # fmt: skip
        try:
            records = (r for r in iter_datasets([data]) if not isinstance(r, LoadError))
            start = time.perf_counter()
            run, _ = asyncio.run(
                judge_on_ray(
                    records, JudgeRunOptions(_judges(), concurrency=concurrency), ModelSpec(factory='ray_scale:fake_model'),
                    run_dir=Path(tmp) / 'run', cluster=RayCluster(workers=workers),
                )
            )  # fmt: skip
            seconds = time.perf_counter() - start
        finally:
            ray.shutdown()
    print(json.dumps({'records': n, 'reports': run.reports, 'seconds': seconds, 'peak_mib': _peak_mib(), 'before_mib': before}))


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def memory(sizes: list[int], latency: float, workers: int, concurrency: int) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        command = [sys.executable, __file__, '--memory-child', str(n), '--memory-latency', str(latency),
                   '--concurrency', str(concurrency), '--workers', str(workers)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith('{')]
        if done.returncode != 0 or not lines:
            print(f'memory run of {n} records failed ({done.returncode}):\n{done.stderr[-2000:]}', file=sys.stderr)
            continue
        rows.append(json.loads(lines[-1]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--records', type=int, default=2000)
    parser.add_argument('--latency', type=float, default=0.2, help='seconds per fake model call')
    parser.add_argument('--workers', type=int, nargs='+', default=[1, 2, 4])
    parser.add_argument('--concurrency', type=int, default=8, help='model calls in flight per worker (and locally)')
    parser.add_argument('--memory', type=int, nargs='*', default=[10_000, 100_000], help='record counts for the memory runs')
    parser.add_argument('--memory-latency', type=float, default=0.01)
    parser.add_argument('--memory-child', type=int, help=argparse.SUPPRESS)
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.records, args.workers, args.memory, args.latency = 40, [1], [], 0.01
    if args.memory_child is not None:
        memory_child(args.memory_child, args.memory_latency, max(args.workers), args.concurrency)
        return

    print(f'{args.records} records · 1 model judge · fake model {args.latency:g} s a call · '
          f'{args.concurrency} calls in flight per process · {os.cpu_count()} cores')  # fmt: skip
    rows = throughput(args.records, args.latency, args.workers, args.concurrency)
    one = next((s for what, s, _, _ in rows if what.startswith('ray, 1 ')), None)
    print(f'{"run":<22}{"seconds":>9}{"records/s":>11}{"vs 1 worker":>13}{"reports":>9}{"differ":>8}')
    for what, seconds, reports, differing in rows:
        ratio = f'{one / seconds:.2f}x' if one else '-'
        print(f'{what:<22}{seconds:>9.1f}{args.records / seconds:>11.1f}{ratio:>13}{reports:>9}{differing:>8}')
    ideal = args.concurrency / args.latency
    print(f'ideal per worker: {ideal:.0f} records/s (calls in flight / latency)')
    if args.memory:
        print(f'\ndriver memory, {max(args.workers)} workers, fake model {args.memory_latency:g} s a call:')
        print(f'{"records":>9}{"seconds":>9}{"records/s":>11}{"peak RSS MiB":>14}{"at start MiB":>14}')
        for row in memory(args.memory, args.memory_latency, max(args.workers), args.concurrency):
            print(f'{row["records"]:>9}{row["seconds"]:>9.1f}{row["reports"] / row["seconds"]:>11.1f}'
                  f'{row["peak_mib"]:>14.0f}{row["before_mib"]:>14.0f}')  # fmt: skip


if __name__ == '__main__':
    main()
