"""Agent-trace ingestion over OTLP/HTTP, on SQLite and PostgreSQL, and the sampler's cost per run.

1. **Ingest**: a real service process (uvicorn, `create_app`, API only: `concurrency=0`, so no judging
   competes) receives protobuf `ExportTraceServiceRequest`s on `POST /v1/traces` from `--clients`
   concurrent senders, each request holding `--traces-per-request` complete traces. The traces are one
   real pydantic-ai agent run (5 spans: request, agent run, two model requests, one tool call, captured
   with the OpenTelemetry SDK) cloned under fresh trace ids. Every trace is buffered, built into a
   session and sampled (rate 10%). Prints spans/s and runs/s from the first request to the last answer,
   and checks that every run became a session.
2. **Sampler overhead**: `Sampler.decide` per run, in process, on the same records: a run out of the
   sample (a hash and a comparison), and a run in it (plus counting its judge calls and the budget),
   in µs per run; and `build_trace` (spans to record) per run for scale.

PostgreSQL: `--pg-url postgresql+psycopg://…/db`, else a throwaway server from the Debian binaries
(the one `benchmarks/service.py` starts); otherwise that backend is skipped.

    python benchmarks/ingest.py [--backends sqlite postgresql] [--traces 2000] [--traces-per-request 20]
                                [--clients 4]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service import _throwaway_postgres, serve_script

ROOT = Path(__file__).resolve().parents[1]


def _serve(db_url: str, port: int) -> None:
    import uvicorn
    from pydantic_ai.models.test import TestModel

    from sensei_eval.models.judge_model import JudgeModel
    from sensei_eval.production.sampler import SamplerConfig
    from sensei_eval.service import ServiceSettings, create_app

    settings = ServiceSettings(db_url=db_url, concurrency=0, sampler=SamplerConfig(rate=0.1))
    app = create_app(settings, JudgeModel(TestModel(), 'test'))
    uvicorn.run(app, host='127.0.0.1', port=port, log_level='warning', access_log=False)


@contextmanager
def _server(db_url: str) -> Iterator[str]:
    with serve_script(__file__, db_url) as url:
        yield url


def _agent_spans() -> list[Any]:
    """One real traced agent run: the request span around it, the run, two model requests, a tool call."""
    sys.path.insert(0, str(ROOT))
    from tests.test_traces import run_traced

    return run_traced([('How do I pin a dependency version?', {'sensei_eval.prompt_version': 'v1'})])


def _requests(template: list[Any], traces: int, per_request: int) -> list[bytes]:
    """Protobuf requests of `per_request` traces each: the template's spans under fresh trace ids."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    base = encode_spans(template)
    rng = random.Random(1)
    bodies: list[bytes] = []
    for start in range(0, traces, per_request):
        request = type(base)()
        for _ in range(min(per_request, traces - start)):
            trace_id = rng.getrandbits(128).to_bytes(16, 'big')
            clone = request.resource_spans.add()
            clone.CopyFrom(base.resource_spans[0])
            for scope in clone.scope_spans:
                for span in scope.spans:
                    span.trace_id = trace_id
        bodies.append(request.SerializeToString())
    return bodies


def _ingest(url: str, bodies: list[bytes], clients: int) -> float:
    headers = {'Content-Type': 'application/x-protobuf'}

    def send(chunk: list[bytes]) -> None:
        with httpx.Client(base_url=url, timeout=120) as c:
            for body in chunk:
                r = c.post('/v1/traces', content=body, headers=headers)
                r.raise_for_status()

    chunks = [bodies[i::clients] for i in range(clients)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(send, chunks))
    return time.perf_counter() - start


def _run_backend(name: str, db_url: str, bodies: list[bytes], spans: int, traces: int, clients: int) -> dict[str, Any]:
    from sensei_eval.service.migrate import upgrade

    upgrade(db_url)
    with _server(db_url) as url:
        seconds = _ingest(url, bodies, clients)
        total = httpx.get(f'{url}/api/v1/sessions', params={'limit': 1}).json()['total']
    if total != traces:
        raise SystemExit(f'{name}: {total} sessions for {traces} traces')
    return {'backend': name, 'seconds': seconds, 'spans_per_s': spans / seconds, 'runs_per_s': traces / seconds}


def _sampler_overhead(template: list[Any], n: int) -> dict[str, float]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from sensei_eval.core.traces import build_trace, spans_from_protobuf
    from sensei_eval.production.sampler import Sampler, SamplerConfig

    spans, _ = spans_from_protobuf(encode_spans(template).SerializeToString())
    start = time.perf_counter()
    for _ in range(200):
        build_trace(spans)
    build_us = (time.perf_counter() - start) / 200 * 1e6
    base = build_trace(spans).records[0]
    records = [
        base.model_copy(update={'query_id': f'{i:032x}', 'metadata': {**base.metadata, 'trace_id': f'{i:032x}'}})
        for i in range(n)
    ]
    out: dict[str, float] = {'build_trace_us': build_us}
    for label, rate, budget in (('not_sampled_us', 0.0, None), ('sampled_us', 1.0, None), ('sampled_budget_us', 1.0, 10**9)):
        sampler = Sampler(SamplerConfig(rate=rate, budget_per_hour=budget))
        sampler.decide(records[0])  # the judges are made once per sampler
        start = time.perf_counter()
        for i, record in enumerate(records):
            sampler.decide(record, at=1_700_000_000 + i)
        out[label] = (time.perf_counter() - start) / n * 1e6
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == '_serve':
        _serve(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--backends', nargs='+', default=['sqlite', 'postgresql'], choices=['sqlite', 'postgresql'])
    parser.add_argument('--traces', type=int, default=2000)
    parser.add_argument('--traces-per-request', type=int, default=20)
    parser.add_argument('--clients', type=int, default=4)
    parser.add_argument('--decisions', type=int, default=5000)
    parser.add_argument('--pg-url', default=None)
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.backends, args.traces, args.traces_per_request, args.clients, args.decisions = ['sqlite'], 40, 10, 2, 200

    template = _agent_spans()
    bodies = _requests(template, args.traces, args.traces_per_request)
    spans = args.traces * len(template)
    print(f'{args.traces} traces x {len(template)} spans = {spans} spans in {len(bodies)} requests', end='')
    print(f', {args.clients} clients; cores: {os.cpu_count()}')
    results = []
    if 'sqlite' in args.backends:
        with tempfile.TemporaryDirectory() as tmp:
            results.append(_run_backend('sqlite', f'sqlite:///{tmp}/ingest.db', bodies, spans, args.traces, args.clients))
    if 'postgresql' in args.backends:
        if args.pg_url:
            results.append(_run_backend('postgresql', args.pg_url, bodies, spans, args.traces, args.clients))
        else:
            with _throwaway_postgres() as pg:
                if pg is None:
                    print('postgresql: skipped (no server binaries)')
                else:
                    results.append(_run_backend('postgresql', pg, bodies, spans, args.traces, args.clients))
    for r in results:
        print(f'{r["backend"]:>10}: {r["spans_per_s"]:8.0f} spans/s  {r["runs_per_s"]:6.0f} runs/s  ({r["seconds"]:.1f} s)')
    overhead = _sampler_overhead(template, args.decisions)
    print(
        f'sampler per run: {overhead["not_sampled_us"]:.1f} µs out of the sample, {overhead["sampled_us"]:.1f} µs sampled '
        f'(counting judge calls), {overhead["sampled_budget_us"]:.1f} µs sampled with a budget; '
        f'spans to record: {overhead["build_trace_us"]:.0f} µs per run'
    )


if __name__ == '__main__':
    main()
