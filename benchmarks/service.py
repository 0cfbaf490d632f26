"""Scoring service under load, on loopback, for SQLite and PostgreSQL.

For each backend this starts a real service process (uvicorn, `create_app`) whose judge is a fake model
(a pydantic-ai `FunctionModel`) that sleeps a fixed `latency` per call and answers like the freeform
scorer (two calls per scoring: the score turn and the missing-tools turn), then measures:

1. **GET score latency**: `--clients` concurrent clients (default 100), each on its own keep-alive
   connection, issuing GET `/api/v1/scoring/sessions/{id}/score` for random scored sessions, closed
   loop; prints p50/p95/p99 and throughput (target p95 ≤ 100 ms). The same load is also sent to a
   **minimal route**: a bare FastAPI app (no middleware, no dependency) in its own process answering
   the same path from the same database with one hand-written SQL statement on the raw driver
   (`sqlite3`, or psycopg's asyncio connections for PostgreSQL, four as the service uses) and
   `json.dumps` — the floor the service is held to (target: within 1.5× its p95). The two are
   measured in alternating rounds (`--rounds`, median shown), so a change in machine load hits both.
   The client (and, for PostgreSQL, the database server) run on the same machine as the service, so
   they share its CPU.
2. **Concurrent scorings**: one scoring alone, then `--scorings` (default 10) triggered at once, timed
   from the first POST to the last `scoring.completed` event on the `sessions` WebSocket channel. With
   concurrency 10 they should take about as long as one (≈ 2 × latency).

PostgreSQL: `--pg-url postgresql+psycopg://…/db`, else a throwaway server is started from the Debian
binaries (`/usr/lib/postgresql/*/bin`) when they exist; otherwise that backend is skipped.

    python benchmarks/service.py [--backends sqlite postgresql] [--clients 100] [--requests 3000]
                                 [--sessions 200] [--latency 0.5] [--scorings 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]

_ALERT_RECORD: dict[str, Any] = {
    'message_format': 'openai',
    'alert_data': {'alert_type': 'SuspiciousCPU', 'pod': 'miner-7f', 'namespace': 'prod'},
    'messages': [
        {'role': 'user', 'content': 'Investigate: pod miner-7f uses 100% CPU.'},
        {
            'role': 'assistant',
            'content': None,
            'tool_calls': [
                {'id': 'c1', 'type': 'function', 'function': {'name': 'kubectl-top', 'arguments': '{"pod": "miner-7f"}'}}
            ],
        },
        {'role': 'tool', 'tool_call_id': 'c1', 'content': 'miner-7f cpu=3980m'},
        {'role': 'assistant', 'content': 'The pod is mining crypto. Confidence: HIGH.'},
    ],
}


# ---------------------------------------------------------------------------------------------------
# The server process (run as `service.py _serve DB_URL PORT LATENCY`)


def _serve(db_url: str, port: int, latency: float) -> None:
    import uvicorn
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from sensei_eval.evaluators.investigation_prompts import FOLLOWUP_MISSING_TOOLS_PROMPT
    from sensei_eval.models.judge_model import JudgeModel
    from sensei_eval.service import ServiceSettings, create_app

    async def fake(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(latency)
        last = ''
        for m in messages:
            if isinstance(m, ModelRequest):
                for p in m.parts:
                    if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                        last = p.content
        text = '1. read-file: direct evidence.' if last == FOLLOWUP_MISSING_TOOLS_PROMPT else 'However, weak.\n61'
        return ModelResponse(parts=[TextPart(content=text)])

    model = JudgeModel(FunctionModel(fake, model_name='fixed-latency'), 'function:fixed-latency')
    app = create_app(ServiceSettings(db_url=db_url, concurrency=10), model)
    uvicorn.run(app, host='127.0.0.1', port=port, log_level='warning', access_log=False)


# The minimal route's statement: the newest scoring of a session (a job of the investigation judge), the
# columns the score API reads (its missing tools are in `score_detail`).
_MINIMAL_SQL = (
    'SELECT evaluation_id, session_id, status, prompt_hash, total_score, error_message, triggered_by, started_at_us, '
    'completed_at_us, scoring, model, smoke, raw_output, score_detail FROM session_evaluations '
    'WHERE session_id = {p} AND scoring IS NOT NULL ORDER BY started_at_us DESC, evaluation_id LIMIT 1'
)


def _serve_minimal(db_url: str, port: int) -> None:
    """A bare FastAPI route over the same database: one SQL statement on the raw driver, `json.dumps`."""
    import sqlite3

    import uvicorn
    from fastapi import FastAPI, Response

    app = FastAPI()

    def answer(columns: list[str], rows: list[tuple[Any, ...]]) -> Response:
        if not rows:
            return Response('{"detail": "not scored"}', status_code=404, media_type='application/json')
        body = dict(zip(columns, rows[0], strict=True))
        detail = body.pop('score_detail')
        body.update(json.loads(detail) if isinstance(detail, str) else detail or {})
        return Response(json.dumps(body, default=str), media_type='application/json')

    path = '/api/v1/scoring/sessions/{session_id}/score'
    if db_url.startswith('sqlite'):
        conn = sqlite3.connect(db_url.split(':///', 1)[1], check_same_thread=False, isolation_level=None)
        sql = _MINIMAL_SQL.format(p='?')

        @app.get(path)
        async def score(session_id: str) -> Response:
            cursor = conn.execute(sql, (session_id,))
            rows = cursor.fetchall()
            return answer([d[0] for d in cursor.description], rows)

    else:
        import psycopg

        dsn = db_url.replace('postgresql+psycopg://', 'postgresql://')
        sql = _MINIMAL_SQL.format(p='%s')
        pool: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()

        @app.on_event('startup')
        async def connect() -> None:
            for _ in range(4):
                pool.put_nowait(await psycopg.AsyncConnection.connect(dsn, autocommit=True))

        @app.get(path)
        async def score(session_id: str) -> Response:
            conn = await pool.get()
            try:
                cursor = await conn.execute(sql, (session_id,))
                rows = await cursor.fetchall()
            finally:
                pool.put_nowait(conn)
            return answer([d.name for d in cursor.description or ()], rows)

    @app.get('/api/v1/health')
    async def health() -> dict[str, str]:
        return {'status': 'ok'}

    uvicorn.run(app, host='127.0.0.1', port=port, log_level='warning', access_log=False)


@contextmanager
def _server(db_url: str, latency: float) -> Iterator[str]:
    with serve_script(__file__, db_url, str(latency)) as url:
        yield url


@contextmanager
def serve_script(script: str, *args: str) -> Iterator[str]:
    """Run `python SCRIPT _serve DB PORT ARGS...` (a benchmark's own service) on a free port in a child process,
    wait for its health check, stop it on exit."""
    port = _free_port()
    command = [sys.executable, script, '_serve', args[0], str(port), *args[1:]]
    proc = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE)
    url = f'http://127.0.0.1:{port}'
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f'{url}/api/v1/health', timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f'server did not start: {proc.stderr.read().decode() if proc.stderr else ""}')
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def _throwaway_postgres() -> Iterator[str | None]:
    bins = sorted(glob.glob('/usr/lib/postgresql/*/bin/initdb'))
    if not bins:
        yield None
        return
    bindir = os.path.dirname(bins[-1])
    tmp = tempfile.mkdtemp(prefix='sensei-bench-pg-')
    as_pg = ['runuser', '-u', 'postgres', '--'] if os.geteuid() == 0 else []
    if os.geteuid() == 0:
        shutil.chown(tmp, 'postgres', 'postgres')
    port = _free_port()
    data = os.path.join(tmp, 'data')
    pg_ctl = os.path.join(bindir, 'pg_ctl')
    try:
        subprocess.run(
            [*as_pg, bins[-1], '-D', data, '-U', 'postgres', '--auth=trust', '--no-sync'], check=True, capture_output=True
        )
        opts = f'-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c max_connections=300'
        subprocess.run(
            [*as_pg, pg_ctl, '-D', data, '-o', opts, '-l', f'{tmp}/log', '-w', 'start'], check=True, capture_output=True
        )
    except (subprocess.SubprocessError, OSError) as e:
        print(f'PostgreSQL could not start ({e}); skipping it', file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
        yield None
        return
    try:
        yield f'postgresql+psycopg://postgres@127.0.0.1:{port}/postgres'
    finally:
        subprocess.run([*as_pg, pg_ctl, '-D', data, '-m', 'fast', 'stop'], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# Measurements


async def _seed(url: str, n: int) -> list[str]:
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=20)) as c:
        sem = asyncio.Semaphore(20)

        async def one(i: int) -> str:
            async with sem:
                r = await c.post('/api/v1/sessions', json={**_ALERT_RECORD, 'query_id': f'bench-{i}'})
                session_id: str = r.json()['session_id']
                (await c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={})).raise_for_status()
                return session_id

        ids = await asyncio.gather(*(one(i) for i in range(n)))
        while True:  # wait until every seeded scoring is done
            page = (await c.get('/api/v1/sessions', params={'limit': 500})).json()
            if all(s['scoring_status'] == 'completed' for s in page['items']):
                return list(ids)
            await asyncio.sleep(0.2)


async def _get_latency(url: str, ids: list[str], clients: int, requests: int) -> dict[str, float]:
    """Closed-loop load: each client keeps one HTTP/1.1 keep-alive connection and sends its next GET
    when the previous answer is in. The client is a minimal asyncio one (not httpx), so that its own
    CPU use, on the same machine, disturbs the server's figures as little as possible."""
    host, port = url.split('//', 1)[1].split(':')
    latencies: list[float] = []
    errors = 0
    per_client = max(1, requests // clients)

    async def client() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for _ in range(per_client):
                request = f'GET /api/v1/scoring/sessions/{random.choice(ids)}/score HTTP/1.1\r\nHost: {host}\r\n\r\n'
                t0 = time.perf_counter()
                writer.write(request.encode())
                head = await reader.readuntil(b'\r\n\r\n')
                length = 0
                for line in head.split(b'\r\n')[1:]:
                    name, _, value = line.partition(b':')
                    if name.strip().lower() == b'content-length':
                        length = int(value)
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - t0)
                if not head.startswith(b'HTTP/1.1 200'):
                    errors += 1
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - start
    q = statistics.quantiles(latencies, n=100)
    rps = len(latencies) / wall
    return {'p50_ms': q[49] * 1000, 'p95_ms': q[94] * 1000, 'p99_ms': q[98] * 1000, 'rps': rps, 'errors': errors}


async def _scorings(url: str, n: int) -> float:
    """Seconds from the first POST until `n` new scorings have all completed (WebSocket events)."""
    from websockets.asyncio.client import connect

    ws_url = url.replace('http://', 'ws://') + '/api/v1/ws?channels=sessions'
    async with httpx.AsyncClient(base_url=url, timeout=60) as c, connect(ws_url) as ws:
        await ws.recv()  # subscription confirmed
        ids = []
        for i in range(n):
            r = await c.post('/api/v1/sessions', json={**_ALERT_RECORD, 'query_id': f'conc-{i}-{time.time_ns()}'})
            ids.append(r.json()['session_id'])
        wanted = set(ids)
        start = time.perf_counter()
        await asyncio.gather(*(c.post(f'/api/v1/scoring/sessions/{s}/score', json={}) for s in ids))
        while wanted:
            event = json.loads(await asyncio.wait_for(ws.recv(), timeout=120))
            if event.get('type') in ('scoring.completed', 'scoring.failed') and event['session_id'] in wanted:
                if event['type'] == 'scoring.failed':
                    raise RuntimeError(f'scoring failed: {event}')
                wanted.discard(event['session_id'])
        return time.perf_counter() - start


def _median_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}


def _run_backend(name: str, db_url: str, args: argparse.Namespace) -> dict[str, Any]:
    with _server(db_url, args.latency) as url, serve_script(__file__, db_url, 'minimal') as minimal_url:
        ids = asyncio.run(_seed(url, args.sessions))
        service: list[dict[str, float]] = []
        minimal: list[dict[str, float]] = []
        for _ in range(args.rounds):  # alternating: a change in machine load hits both
            service.append(asyncio.run(_get_latency(url, ids, args.clients, args.requests)))
            minimal.append(asyncio.run(_get_latency(minimal_url, ids, args.clients, args.requests)))
        one = asyncio.run(_scorings(url, 1))
        many = asyncio.run(_scorings(url, args.scorings))
    return {
        'backend': name, 'service': _median_of(service), 'minimal': _median_of(minimal),
        'one_scoring_s': one, f'{args.scorings}_scorings_s': many,
    }  # fmt: skip


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == '_serve':
        if sys.argv[4] == 'minimal':
            _serve_minimal(sys.argv[2], int(sys.argv[3]))
        else:
            _serve(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--backends', nargs='+', default=['sqlite', 'postgresql'], choices=['sqlite', 'postgresql'])
    parser.add_argument('--clients', type=int, default=100)
    parser.add_argument('--requests', type=int, default=3000)
    parser.add_argument('--sessions', type=int, default=200)
    parser.add_argument('--latency', type=float, default=0.5, help='fake model latency per call (two calls per scoring)')
    parser.add_argument('--scorings', type=int, default=10)
    parser.add_argument('--rounds', type=int, default=3, help='alternating rounds of service and minimal route')
    parser.add_argument('--pg-url', default=None)
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.backends, args.clients, args.requests, args.sessions = ['sqlite'], 4, 40, 10
        args.latency, args.scorings, args.rounds = 0.01, 2, 1

    results = []
    tmp = tempfile.mkdtemp(prefix='sensei-bench-')
    try:
        if 'sqlite' in args.backends:
            results.append(_run_backend('sqlite', f'sqlite:///{tmp}/bench.db', args))
        if 'postgresql' in args.backends:
            if args.pg_url:
                results.append(_run_backend('postgresql', args.pg_url, args))
            else:
                with _throwaway_postgres() as pg:
                    if pg is not None:
                        results.append(_run_backend('postgresql', pg, args))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ideal = 2 * args.latency
    load = ' '.join(f'{x:.2f}' for x in os.getloadavg())
    print(f'\nGET score: {args.clients} concurrent clients, {args.requests} requests per round, median of {args.rounds} rounds')
    print(f'(load average {load}; figures under load are provisional)')
    print(f'{"backend":<11} {"route":<8} {"p50 ms":>7} {"p95 ms":>7} {"p99 ms":>7} {"req/s":>7} {"err":>4}')
    for r in results:
        for route in ('service', 'minimal'):
            m = r[route]
            print(
                f'{r["backend"]:<11} {route:<8} {m["p50_ms"]:7.1f} {m["p95_ms"]:7.1f} {m["p99_ms"]:7.1f} {m["rps"]:7.0f} '
                f'{m["errors"]:4.0f}'
            )
        ratio = r['service']['p95_ms'] / r['minimal']['p95_ms']
        print(f'{r["backend"]:<11} service p95 / minimal p95 = {ratio:.2f}× (target ≤ 1.5×; p95 ≤ 100 ms)')
    print(f'\nscorings: fake model {args.latency} s/call (ideal for one scoring, two model calls: {ideal:.2f} s)')
    for r in results:
        many = r[f'{args.scorings}_scorings_s']
        print(f'{r["backend"]:<11} 1 scoring {r["one_scoring_s"]:.2f} s, {args.scorings} scorings at once {many:.2f} s')


if __name__ == '__main__':
    main()
