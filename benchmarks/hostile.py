"""Hostile input, round three (issue 32): the 16 reproductions replayed against the real service and CLI.

Every item runs `sensei-eval serve` (uvicorn on a free loopback port, its judge model an OpenAI-compatible
stub on another loopback port, `Stub` below) or the `sensei-eval` CLI in a child process, sends what the
reproduction sent, and prints `held` or `FAILED` with what it saw. Every loop is bounded in count and in time;
only 127.0.0.1 is ever addressed. Peak service memory for items 1-2 is the service process's own high-water
mark (`VmHWM` in /proc), which must stay under 500 MB; `view` of 100,000 records must stay under 1 GB.

    python benchmarks/hostile.py --quick            # seconds to a minute; what CI runs (SQLite)
    python benchmarks/hostile.py                    # the reproductions' own sizes (minutes), SQLite and PostgreSQL
    python benchmarks/hostile.py --items 1,2,13 --pg-url postgresql+psycopg://postgres@127.0.0.1:5432/db

Full mode starts a throwaway PostgreSQL from the Debian binaries (`/usr/lib/postgresql/*/bin`) for the list
and read items (2, 6, 13) when no `--pg-url` is given and the binaries exist; otherwise those run on SQLite only.
`.ci/run` runs `--quick`; `tests/service/test_hostile_limits.py` runs the list and read items on PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import re
import resource
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-m', 'sensei_eval']
MEMORY_LIMIT_MB = 500.0
# `view` keeps a few KB per record past its first page (verdicts, no transcripts or texts): 100,000 records
# stay under this (the reproduction took 2.37 GB).
VIEW_MEMORY_LIMIT_MB = 1000.0
_ENV_CLEAN = ('SENSEI_EVAL_TOKEN', 'SENSEI_EVAL_MODEL', 'SENSEI_EVAL_BASE_URL', 'SENSEI_EVAL_DB', 'OTEL_EXPORTER_OTLP_ENDPOINT')


@dataclass
class Outcome:
    item: int
    title: str
    held: bool
    detail: str
    backend: str = 'sqlite'


# ---------------------------------------------------------------------------------------------------
# An OpenAI-compatible stub (the judge model), on loopback


@dataclass
class Seen:
    method: str
    path: str
    query: str
    body_bytes: int
    body: bytes = b''


@dataclass
class Stub:
    """`GET {prefix}/models` and `POST {prefix}/chat/completions`; `chat` decides each completion's answer:
    `('ok', text)`, `('429', seconds)`, or `('big', n_bytes)` (200 with an answer of n bytes that is no verdict)."""

    prefix: str = '/v1'
    chat: tuple[str, Any] = ('ok', 'OK')
    keep_bodies: bool = False
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f'http://127.0.0.1:{self.port}{self.prefix}'

    def __enter__(self) -> Stub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _record(self, body: bytes) -> tuple[str, str]:
                path, _, query = self.path.partition('?')
                stub.seen.append(Seen(self.command, path, query, len(body), body if stub.keep_bodies else b''))
                return path, query

            def do_GET(self) -> None:
                path, _ = self._record(b'')
                if path.rstrip('/') == f'{stub.prefix}/models':
                    self._send(200, json.dumps({'object': 'list', 'data': [{'id': 'default', 'object': 'model'}]}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
                path, _ = self._record(body)
                if path != f'{stub.prefix}/chat/completions':
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                kind, arg = stub.chat
                if kind == '429':
                    self._send(429, b'{"error": {"message": "rate limited"}}', {'Retry-After': str(arg)})
                    return
                text = 'x' * int(arg) if kind == 'big' else str(arg)
                answer = {
                    'id': 'c1',
                    'object': 'chat.completion',
                    'created': int(time.time()),
                    'model': 'default',
                    'choices': [{'index': 0, 'message': {'role': 'assistant', 'content': text}, 'finish_reason': 'stop'}],
                    'usage': {'prompt_tokens': 1, 'completion_tokens': 1, 'total_tokens': 2},
                }
                self._send(200, json.dumps(answer).encode())

        self._server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


# ---------------------------------------------------------------------------------------------------
# The service and the CLI in child processes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _ENV_CLEAN}
    env['PYTHONPATH'] = str(ROOT) + os.pathsep + env.get('PYTHONPATH', '')
    env['SENSEI_EVAL_CACHE'] = env.get('SENSEI_EVAL_CACHE_TEST', tempfile.mkdtemp(prefix='hostile-cache-'))
    env.update(extra)
    return env


@dataclass
class Service:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    db_url: str

    def log_text(self) -> str:
        return self.log.read_text(errors='replace')

    def peak_mb(self) -> float:
        """The process's peak resident memory so far (VmHWM), MB."""
        status = Path(f'/proc/{self.proc.pid}/status').read_text()
        return int(re.search(r'VmHWM:\s+(\d+) kB', status).group(1)) / 1024  # type: ignore[union-attr]

    def rss_mb(self) -> float:
        status = Path(f'/proc/{self.proc.pid}/status').read_text()
        return int(re.search(r'VmRSS:\s+(\d+) kB', status).group(1)) / 1024  # type: ignore[union-attr]


@contextlib.contextmanager
def service(
    db_url: str, stub: Stub, *args: str, env: dict[str, str] | None = None, nofile: int | None = None, start_s: float = 60
) -> Iterator[Service]:
    """`sensei-eval serve` on a free loopback port, its log in a file; stopped (SIGTERM, then kill) on exit."""
    port = _free_port()
    log = Path(tempfile.mkstemp(prefix='hostile-serve-', suffix='.log')[1])

    def limits() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    command = [*CLI, 'serve', '--db', db_url, '--host', '127.0.0.1', '--port', str(port), '--base-url', stub.url, *args]
    with log.open('wb') as out:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env or _env(), preexec_fn=limits)
    svc = Service(f'http://127.0.0.1:{port}', proc, log, db_url)
    try:
        deadline = time.monotonic() + start_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f'serve exited {proc.returncode}: {svc.log_text()[-2000:]}')
            try:
                if httpx.get(f'{svc.url}/api/v1/health', timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise RuntimeError(f'serve did not answer within {start_s:g} s: {svc.log_text()[-2000:]}')
        yield svc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, env=env or _env(), timeout=timeout)


def _record(query_id: str, **extra: Any) -> dict[str, Any]:
    return {
        'query_id': query_id,
        'query': f'what happened to {query_id}?',
        'message_format': 'openai',
        'messages': [{'role': 'user', 'content': f'what happened to {query_id}?'}, {'role': 'assistant', 'content': 'Nothing.'}],
        **extra,
    }


def _sqlite_url(tmp: Path) -> str:
    return f'sqlite:///{tmp / "service.db"}'


# ---------------------------------------------------------------------------------------------------
# The items


@dataclass
class Ctx:
    quick: bool
    tmp: Path
    db_url: str
    backend: str = 'sqlite'


def item1_json_volume(ctx: Ctx) -> Outcome:
    """94 KiB of gzip inflating to 94 MiB of `{}`; 4.87 MiB of `{}` in metadata, once and six at once."""
    n_inflated = 94 * 2**20 if not ctx.quick else 40 * 2**20
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = b'{"resourceSpans":[],"junk":['
    chunk = b'{},' * (2**20 // 3)
    parts = [compressor.compress(head)]
    written = len(head)
    while written < n_inflated:
        parts.append(compressor.compress(chunk))
        written += len(chunk)
    parts.append(compressor.compress(b'{}]}') + compressor.flush())
    gz = b''.join(parts)
    dense = json.dumps(_record('dense', metadata={'junk': [{}] * 1_700_000}), separators=(',', ':')).encode()
    with Stub() as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=300) as c:
        base = svc.rss_mb()
        t = time.monotonic()
        r1 = c.post('/v1/traces', content=gz, headers={'Content-Type': 'application/json', 'Content-Encoding': 'gzip'})
        gz_s = time.monotonic() - t
        r2 = c.post('/api/v1/sessions', content=dense, headers={'Content-Type': 'application/json'})

        async def six() -> list[int]:
            async with httpx.AsyncClient(base_url=svc.url, timeout=300) as ac:
                rs = await asyncio.gather(
                    *(ac.post('/api/v1/sessions', content=dense, headers={'Content-Type': 'application/json'}) for _ in range(6))
                )
            return [r.status_code for r in rs]

        r3 = asyncio.run(six())
        peak = svc.peak_mb()
    held = r1.status_code == 413 and r2.status_code == 413 and set(r3) == {413} and peak < MEMORY_LIMIT_MB
    detail = (
        f'gzip {len(gz) / 1024:.0f} KiB -> {n_inflated / 2**20:.0f} MiB: {r1.status_code} in {gz_s:.1f} s; '
        f'{len(dense) / 2**20:.2f} MiB of {{}}: {r2.status_code}; six at once: {r3}; '
        f'service memory {base:.0f} MB -> peak {peak:.0f} MB (limit {MEMORY_LIMIT_MB:.0f})'
    )
    return Outcome(1, 'memory DoS through JSON volume', held, detail)


def _seed_dense_sessions(db_url: str, n: int) -> None:
    """`n` stored sessions of 4.9 MB each (1.7M `{}` in metadata): rows written straight into the table, as a
    store filled before the value cap, or by another writer, holds them."""
    record = json.dumps(_record('dense', metadata={'junk': [{}] * 1_700_000}), separators=(',', ':'))
    now = int(time.time() * 1e6)
    rows = [
        (str(uuid.uuid4()), f'dense-{i}', 'seed', 'completed', record.replace('"dense"', f'"dense-{i}"', 1), now + i, now + i)
        for i in range(n)
    ]
    sql = (
        'INSERT INTO sessions (session_id, query_id, agent, status, record, created_at_us, updated_at_us) '
        'VALUES ({0}, {0}, {0}, {0}, {0}, {0}, {0})'
    )
    if db_url.startswith('sqlite'):
        conn = sqlite3.connect(db_url.split(':///', 1)[1])
        with conn:
            conn.executemany(sql.format('?'), rows)
        conn.close()
    else:
        import psycopg

        with psycopg.connect(db_url.replace('postgresql+psycopg://', 'postgresql://')) as conn:
            conn.cursor().executemany(sql.format('%s'), rows)


def item2_memory_on_reads(ctx: Ctx) -> Outcome:
    """31 stored sessions of 4.9 MB each, then the API's and the dashboard's session lists."""
    n = 31 if not ctx.quick else 8
    with Stub() as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=300) as c:
        _seed_dense_sessions(ctx.db_url, n)
        base = svc.rss_mb()
        t = time.monotonic()
        api = c.get('/api/v1/sessions', params={'limit': 50})
        api_s = time.monotonic() - t
        t = time.monotonic()
        dash = c.get('/api/v1/dashboard/sessions', params={'limit': 50})
        dash_s = time.monotonic() - t
        peak = svc.peak_mb()
    listed = len(api.json().get('items', [])) if api.status_code == 200 else -1
    dash_listed = len(dash.json().get('items', [])) if dash.status_code == 200 else -1
    held = api.status_code == 200 and dash.status_code == 200 and listed == n == dash_listed and peak < MEMORY_LIMIT_MB
    detail = (
        f'{n} sessions of 4.9 MB: API list {api.status_code} ({listed} items, {len(api.content) / 1024:.0f} KB) '
        f'in {api_s:.2f} s, '
        f'dashboard list {dash.status_code} in {dash_s:.2f} s; memory {base:.0f} MB -> peak {peak:.0f} MB'
    )
    return Outcome(2, 'memory DoS on reads', held, detail, ctx.backend)


def item3_slow_clients(ctx: Ctx) -> Outcome:
    """Connections trickling a header line every few seconds, and slow bodies, under a descriptor limit."""
    nofile, attackers, trickle_s, window_s, head_s, body_s = (
        (256, 300, 0.5, 8.0, 2.0, 2.0) if ctx.quick else (1024, 1100, 5.0, 30.0, 10.0, 10.0)
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, attackers + 200)), hard))
    args = ('--header-timeout', str(head_s), '--body-timeout', str(body_s))
    with Stub() as stub, service(ctx.db_url, stub, *args, nofile=nofile) as svc:
        port = int(svc.url.rsplit(':', 1)[1])

        async def attack() -> tuple[int, int, int, float]:
            stop = time.monotonic() + window_s
            writers: list[asyncio.StreamWriter] = []
            for _ in range(attackers):
                try:
                    _, w = await asyncio.wait_for(asyncio.open_connection('127.0.0.1', port), 2)
                    w.write(b'GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n')
                    writers.append(w)
                except (OSError, TimeoutError):
                    break
            # slow bodies: a head, then a byte of the body now and then
            bodies: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
            for _ in range(20):
                try:
                    r, w = await asyncio.wait_for(asyncio.open_connection('127.0.0.1', port), 2)
                    w.write(
                        b'POST /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
                        b'Content-Length: 1000\r\n\r\n{'
                    )
                    bodies.append((r, w))
                except (OSError, TimeoutError):
                    break
            probes_ok = probes = 0
            async with httpx.AsyncClient(timeout=2) as probe:
                while time.monotonic() < stop:
                    for w in writers:
                        if not w.is_closing():
                            w.write(b'X-Slow: 1\r\n')
                    for _, w in bodies:
                        if not w.is_closing():
                            w.write(b' ')
                    if time.monotonic() > stop - window_s + head_s + 1.5:  # once the deadline had time to act
                        probes += 1
                        try:
                            ok = (await probe.get(f'{svc.url}/api/v1/health')).status_code == 200
                        except httpx.HTTPError:
                            ok = False
                        probes_ok += ok
                    await asyncio.sleep(trickle_s)
            closed = 0
            for r, _ in bodies:
                try:
                    closed += (await asyncio.wait_for(r.read(1), 1)) == b''
                except (OSError, TimeoutError):
                    closed += 1
            for w in writers + [w for _, w in bodies]:
                w.close()
            return len(writers), probes_ok, probes, closed / max(1, len(bodies))

        opened, ok, probes, bodies_closed = asyncio.run(attack())
    held = probes > 0 and ok >= 0.8 * probes and bodies_closed == 1.0
    detail = (
        f'{opened} trickling connections (descriptor limit {nofile}), header deadline {head_s:g} s: '
        f'{ok}/{probes} health probes answered; slow bodies closed by the server: {bodies_closed:.0%}'
    )
    return Outcome(3, 'slow clients', held, detail)


def item4_credentials_in_log(ctx: Ctx) -> Outcome:
    with Stub() as stub:
        stub_port = stub.port
        secret_url = f'http://user:pw-s3cr3t@127.0.0.1:{stub_port}/v1?api_key=k-s3cr3t'

        class Secret(Stub):
            @property
            def url(self) -> str:
                return secret_url

        stub.__class__ = Secret
        with service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=30) as c:
            sid = c.post('/api/v1/sessions', json=_record('cred')).json()['session_id']
            c.post(f'/api/v1/scoring/sessions/{sid}/score', json={})
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not any(s.method == 'POST' for s in stub.seen):
                time.sleep(0.2)
            time.sleep(0.5)
            log = svc.log_text()
    requests_logged = log.count('HTTP Request')
    leaked = [s for s in ('pw-s3cr3t', 'k-s3cr3t') if s in log]
    held = not leaked and requests_logged > 0
    return Outcome(
        4,
        'credentials in the log',
        held,
        f'{requests_logged} model requests logged by httpx; secrets in the log: {leaked or "none"}',
    )


def item5_log_injection(ctx: Ctx) -> Outcome:
    forged = '2099-01-01 00:00:00,000 INFO sensei_eval.service.audit: POST /api/v1/sessions by admin from 10.0.0.1: 201'
    with Stub() as stub, service(ctx.db_url, stub, '--token', 'tok-0123456789') as svc:
        port = int(svc.url.rsplit(':', 1)[1])
        from urllib.parse import quote

        path = '/api/v1/sessions' + quote('\n' + forged, safe='')
        statuses = []
        for method in ('GET', 'POST'):
            with socket.create_connection(('127.0.0.1', port), timeout=5) as s:
                body = b'{}' if method == 'POST' else b''
                s.sendall(
                    f'{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
                    f'Content-Length: {len(body)}\r\nConnection: close\r\n\r\n'.encode()
                    + body
                )
                statuses.append(int(s.recv(100).split()[1]))
        time.sleep(0.3)
        lines = svc.log_text().splitlines()
    forged_lines = [ln for ln in lines if ln.startswith(forged[:40])]
    escaped = sum('\\n2099-01-01' in ln for ln in lines)
    held = statuses == [401, 401] and not forged_lines and escaped > 0
    return Outcome(
        5, 'log injection', held, f'answers {statuses}; forged lines in the log: {len(forged_lines)}; escaped: {escaped}'
    )


def item6_bad_dates(ctx: Ctx) -> Outcome:
    cases = [
        ('/api/v1/dashboard/sessions', {'since': '2024-13-01'}, 422),
        ('/api/v1/dashboard/sessions', {'until': '2024-02-30'}, 422),
        ('/api/v1/dashboard/patterns', {'since': '2024-13-01'}, 422),
        ('/api/v1/dashboard/patterns', {'until': '2024-02-30'}, 422),
        ('/api/v1/dashboard/sessions', {'until': '9999-12-31'}, 200),
        ('/api/v1/dashboard/patterns', {'until': '9999-12-31'}, 200),
    ]
    seen = []
    with Stub() as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=30) as c:
        c.post('/api/v1/sessions', json=_record('dated'))
        for path, params, want in cases:
            r = c.get(path, params=params)
            named = want != 422 or any(next(iter(params)) in str(e.get('loc')) for e in r.json().get('detail', []))
            seen.append((r.status_code, want, named))
    held = all(got == want and named for got, want, named in seen)
    return Outcome(6, '500 on bad dates', held, 'answers ' + ', '.join(f'{g} (want {w})' for g, w, _ in seen), ctx.backend)


def _write_dataset(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text(''.join(json.dumps(r) + '\n' for r in records))
    return path


def _chat_prompts(stub: Stub) -> list[str]:
    out = []
    for s in stub.seen:
        if s.method == 'POST' and s.body:
            messages = json.loads(s.body).get('messages', [])
            out.append('\n'.join(str(m.get('content')) for m in messages))
    return out


def item7_transcript_cut(ctx: Ctx) -> Outcome:
    """One 165,000-character tool result, a 60k-token budget: the prompt keeps about the budget."""
    big = ''.join(f'row {i}: status=ok value={i * 7 % 1000}\n' for i in range(6000))[:165_000]
    record = {
        'query_id': 'big-tool',
        'query': 'summarise the table',
        'message_format': 'openai',
        'messages': [
            {'role': 'user', 'content': 'summarise the table'},
            {
                'role': 'assistant',
                'content': None,
                'tool_calls': [{'id': 't1', 'type': 'function', 'function': {'name': 'read_table', 'arguments': '{}'}}],
            },
            {'role': 'tool', 'tool_call_id': 't1', 'content': big},
            {'role': 'assistant', 'content': 'All rows are ok.'},
        ],
    }
    data = _write_dataset(ctx.tmp / 'big.jsonl', [record])
    with Stub(keep_bodies=True, chat=('ok', '{}')) as stub:
        r = cli(
            'judge',
            '--dataset',
            str(data),
            '--judges',
            'hallucination',
            '--base-url',
            stub.url,
            '--out',
            str(ctx.tmp / 'r7'),
            '--no-cache',
            '--max-transcript-tokens',
            '60000',
            '--timeout',
            '30',
        )
        prompts = _chat_prompts(stub)
    first = prompts[0] if prompts else ''
    kept = len(re.findall(r'row \d+: status', first))
    kept_chars = kept * 28
    held = bool(prompts) and kept_chars >= 100_000
    return Outcome(
        7,
        'a big tool result cut to nothing',
        held,
        f'exit {r.returncode}; first prompt {len(first):,} chars, of the tool result ~{kept_chars:,} chars '
        f'({kept} rows of 6000) kept',
    )


def item8_token_lockouts(ctx: Ctx) -> Outcome:
    env = _env(SENSEI_EVAL_TOKEN='tökén-s3cret\n')
    with Stub() as stub, service(ctx.db_url, stub, env=env) as svc:
        raw = 'Bearer tökén-s3cret'.encode()
        nfd = 'Bearer ' + __import__('unicodedata').normalize('NFD', 'tökén-s3cret')
        ok_utf8 = httpx.get(f'{svc.url}/api/v1/sessions', headers=[(b'Authorization', raw)], timeout=10).status_code
        ok_nfd = httpx.get(f'{svc.url}/api/v1/sessions', headers=[(b'Authorization', nfd.encode())], timeout=10).status_code
        wrong = httpx.get(f'{svc.url}/api/v1/sessions', headers={'Authorization': 'Bearer tokens3cret'}, timeout=10).status_code
        log = svc.log_text()
    warned = 'stripped' in log and 'non-ASCII' in log
    held = ok_utf8 == 200 and ok_nfd == 200 and wrong == 401 and warned
    return Outcome(
        8,
        'token lockouts',
        held,
        f'UTF-8 token: {ok_utf8}, NFD form: {ok_nfd}, wrong token: {wrong}; start-up warnings: {warned}',
    )


def _write_run(run: Path, n: int) -> None:
    """A judge run folder of `n` records (records/*.json as `judge` writes them; no summary.json, which
    `view` lists as missing): each a four-message transcript and one judge's verdict, a third of them failed."""
    records = run / 'records'
    records.mkdir(parents=True)
    messages = [
        {'role': 'user', 'content': 'Which flights leave Boston for Denver tomorrow morning, and which is cheapest?'},
        {
            'role': 'assistant',
            'content': None,
            'tool_calls': [
                {
                    'id': 't1',
                    'type': 'function',
                    'function': {'name': 'search_flights', 'arguments': '{"from": "BOS", "to": "DEN"}'},
                }
            ],
        },
        {'role': 'tool', 'tool_call_id': 't1', 'content': 'UA 1234 07:05 $212; DL 88 08:40 $198; B6 410 09:15 $205'},
        {'role': 'assistant', 'content': 'DL 88 at 08:40 is the cheapest at $198.'},
    ]
    for i in range(n):
        passed = i % 3 != 0
        result = {
            'judge': 'hallucination',
            'failure_mode': 'hallucination',
            'category': 'output',
            'criteria_hash': 'h' * 64,
            'model': 'stub',
            'status': 'ok',
            'passed': passed,
            'score': 1.0 if passed else 0.0,
            'reasoning': 'Every claim is in a tool result.' if passed else 'The answer states a price no tool result shows.',
            'issues': [] if passed else [{'claim': 'DL 88 costs $198', 'steps': [3], 'source': 'judge'}],
        }
        report = {
            'query_id': f'q{i:06d}',
            'run_id': run.name,
            'repeat': 1,
            'evaluated_at': '2026-01-01T00:00:00Z',
            'query': messages[0]['content'],
            'messages': messages,
            'message_format': 'openai',
            'judges': {'hallucination': result},
            'overall_score': 1.0 if passed else 0.0,
        }
        (records / f'q{i:06d}.json').write_text(json.dumps(report))


def run_measured(args: list[str], timeout: float) -> tuple[int, str, float]:
    """A CLI command's exit code, stderr and peak resident memory (its VmHWM, read until it exits), MB."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([*CLI, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, env=_env())
        peak_kb = 0
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError, AttributeError):
                status = Path(f'/proc/{proc.pid}/status').read_text()
                peak_kb = max(peak_kb, int(re.search(r'VmHWM:\s+(\d+) kB', status).group(1)))  # type: ignore[union-attr]
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        err.seek(0)
        return proc.returncode, err.read().decode(errors='replace'), peak_kb / 1024


def item9_view_large_run(ctx: Ctx) -> Outcome:
    """`view` of a run of 100,000 records: bounded memory, a main page of bounded size, the rest paged."""
    n = 100_000 if not ctx.quick else 5_000
    run = ctx.tmp / 'big-run'
    _write_run(run, n)
    out = ctx.tmp / 'view.html'
    t = time.monotonic()
    code, err, peak = run_measured(['view', str(run), '--out', str(out)], timeout=900)
    elapsed = time.monotonic() - t
    main = out.stat().st_size if out.exists() else 0
    pages = list(ctx.tmp.glob('view-*.html'))
    held = code == 0 and peak < VIEW_MEMORY_LIMIT_MB and main < 40 * 2**20 and len(pages) == -(-n // 500) - 1
    return Outcome(
        9,
        'view of a large run',
        held,
        f'{n:,} records: exit {code} in {elapsed:.1f} s, peak {peak:.0f} MB; main page {main / 2**20:.1f} MB, '
        f'{len(pages)} more pages of 500 records in full {err[-200:]}',
    )


def _write_realistic_run(run: Path, n: int) -> float:
    """A run folder of `n` reports as `judge` writes them on real runs (issue 41 item 5): the sample's records
    judged by the 8 checks through the library, plus the 3 MVP LLM judges' verdicts as a model writes them
    (reasoning, an issue on a third, tokens), each record written again under new ids. The mean report size."""
    from sensei_eval.core.datasets import load_datasets
    from sensei_eval.core.reports import JudgeResult, rebuild_report
    from sensei_eval.data import SAMPLE_DATASET
    from sensei_eval.evaluators.registry import make_judges
    from sensei_eval.judging.options import JudgeRunOptions
    from sensei_eval.judging.runner import judge_records

    records = load_datasets([Path(SAMPLE_DATASET)]).records
    reports = asyncio.run(judge_records(records, JudgeRunOptions(make_judges(['checks'])), run_id=run.name))
    templates = []
    for k, report in enumerate(reports):
        llm = []
        for j, mode in enumerate(('tool_selection', 'hallucination', 'completeness')):
            failed = (k + j) % 3 == 0
            issue: dict[str, Any] = {'steps': [3], 'source': 'judge', 'severity': 'major'}
            issue |= (
                {'hallucinated_claim': 'the limit is 30 requests a minute', 'what_tools_actually_said': 'no limit is given'}
                if mode == 'hallucination'
                else {'missed_aspects': ['the second question'], 'reasoning': 'The answer leaves the second part unanswered.'}
            )
            llm.append(
                JudgeResult(
                    judge=mode, failure_mode=mode, category='output', criteria_hash='c' * 64, model='openai:gpt-5.2',
                    status='ok', passed=not failed, score=0.5 if failed else 1.0,
                    reasoning=f'Step 3 returned the documentation the answer rests on; {mode} checked claim by claim '
                    'against the tool results and the user question, citing the steps it read.',
                    issues=[issue] if failed and mode != 'tool_selection' else [],
                    input_tokens=2400, output_tokens=180, requests=1, latency_s=2.1,
                )
            )  # fmt: skip
        full = rebuild_report(report, [*llm, *report.judges.values()])
        full.skipped = {}
        templates.append(full.model_dump_json(indent=2))
    records_dir = run / 'records'
    records_dir.mkdir(parents=True)
    total = 0
    for i in range(n):
        template, source = templates[i % len(templates)], reports[i % len(reports)].query_id
        text = template.replace(f'"query_id": "{source}"', f'"query_id": "r{i:06d}-{source}"', 1)
        (records_dir / f'r{i:06d}-{source}.json').write_text(text, encoding='utf-8')
        total += len(text)
    return total / n


def item17_view_realistic_reports(ctx: Ctx) -> Outcome:
    """Issue 41 item 5: `view` of 100,000 realistic reports (11 judges each, the sample's transcripts) streams:
    peak memory under `MEMORY_LIMIT_MB` (it kept ~29 KB per record: 3.0 GB for 1.09 GB of reports)."""
    n = 100_000 if not ctx.quick else 5_000
    run = ctx.tmp / 'realistic-run'
    size = _write_realistic_run(run, n)
    out = ctx.tmp / 'view.html'
    t = time.monotonic()
    code, err, peak = run_measured(['view', str(run), '--out', str(out)], timeout=1800)
    elapsed = time.monotonic() - t
    main = out.stat().st_size if out.exists() else 0
    held = code == 0 and peak < MEMORY_LIMIT_MB
    return Outcome(
        17,
        'view streams realistic reports',
        held,
        f'{n:,} reports of {size / 1024:.1f} KB ({n * size / 2**30:.2f} GB): exit {code} in {elapsed:.0f} s, peak '
        f'{peak:.0f} MB (limit {MEMORY_LIMIT_MB:.0f}); main page {main / 2**20:.1f} MB {err[-200:]}',
    )


def item10_corrupt_cache(ctx: Ctx) -> Outcome:
    cache = ctx.tmp / 'cache'
    (cache / 'judge').mkdir(parents=True)
    from sensei_eval.judging.cache import DB_NAME

    db = cache / 'judge' / DB_NAME
    db.write_bytes(b'this is not a database ' * 100)
    stats = cli('cache', 'stats', '--dir', str(cache))
    clear = cli('cache', 'clear', '--dir', str(cache))
    held = stats.returncode == 1 and 'cannot be read' in stats.stderr and clear.returncode == 0 and not db.exists()
    return Outcome(
        10,
        'a corrupt cache',
        held,
        f'stats exit {stats.returncode} ({(stats.stderr or stats.stdout).strip()[-90:]}); '
        f'clear exit {clear.returncode}, file left: {db.exists()}',
    )


def item11_flags(ctx: Ctx) -> Outcome:
    cases = [
        ('--port', '70001'),
        ('--grace', 'nan'),
        ('--grace', 'inf'),
        ('--timeout', '-1'),
        ('--max-body', '-1'),
        ('--port', '0'),
    ]
    from concurrent.futures import ThreadPoolExecutor

    def one(case: tuple[str, str]) -> tuple[str, str, int, bool]:
        flag, value = case
        port = [] if flag == '--port' else ['--port', str(_free_port())]  # a version that starts binds a free port
        try:
            r = cli('serve', '--db', ctx.db_url, *port, flag, value, timeout=60)
        except subprocess.TimeoutExpired:  # it started serving: the flag was accepted
            return flag, value, -1, False
        return flag, value, r.returncode, 'Traceback' in r.stderr

    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(one, cases))
    held = all(code == 2 and not tb for _, _, code, tb in got)
    return Outcome(11, 'flags', held, ', '.join(f'{f} {v}: exit {c}' + (' (traceback)' if tb else '') for f, v, c, tb in got))


def item12_retry_after(ctx: Ctx) -> Outcome:
    asked, timeout = (120, 30) if not ctx.quick else (40, 8)
    data = _write_dataset(ctx.tmp / 'one.jsonl', [_record('rated')])
    with Stub(chat=('429', asked)) as stub:
        t = time.monotonic()
        r = cli(
            'judge',
            '--dataset',
            str(data),
            '--judges',
            'hallucination',
            '--base-url',
            stub.url,
            '--out',
            str(ctx.tmp / 'r12'),
            '--no-cache',
            '--timeout',
            str(timeout),
            '--run-id',
            'r12',
        )
        elapsed = time.monotonic() - t
        calls = sum(s.method == 'POST' for s in stub.seen)
    text = ' '.join(p.read_text() for p in (ctx.tmp / 'r12' / 'r12').rglob('*.json')) + r.stdout + r.stderr
    said = 'Retry-After' in text and '429' in text
    held = said and 'no answer from' not in text and elapsed < timeout + 20
    return Outcome(
        12,
        'a 429 reported as no answer',
        held,
        f'{calls} request(s), {elapsed:.1f} s; error names the 429 and Retry-After: {said}; '
        f'"no answer": {"no answer from" in text}',
    )


def item13_search_wildcards(ctx: Ctx) -> Outcome:
    got = {}
    with Stub() as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=30) as c:
        for qid in ('alpha', 'beta', 'ga%mma', 'del_ta'):
            c.post('/api/v1/sessions', json=_record(qid))
        for q in ('%', '_', 'a', 'a%m', 'l_t'):
            r = c.get('/api/v1/dashboard/sessions', params={'q': q})
            got[q] = sorted(i['query_id'] for i in r.json()['items']) if r.status_code == 200 else r.status_code
    want = {'%': ['ga%mma'], '_': ['del_ta'], 'a': ['alpha', 'beta', 'del_ta', 'ga%mma'], 'a%m': ['ga%mma'], 'l_t': ['del_ta']}
    return Outcome(13, 'search wildcards', got == want, f'matches {got}', ctx.backend)


def item14_base_url_query(ctx: Ctx) -> Outcome:
    data = _write_dataset(ctx.tmp / 'q14.jsonl', [_record('azure')])
    with Stub(chat=('ok', '{}')) as stub:
        base = f'{stub.url}?api-version=2024-06-01'
        cli(
            'judge',
            '--dataset',
            str(data),
            '--judges',
            'hallucination',
            '--base-url',
            base,
            '--out',
            str(ctx.tmp / 'r14'),
            '--no-cache',
            '--timeout',
            '20',
        )
        paths = sorted({(s.method, s.path, s.query) for s in stub.seen})
        wrong = cli(
            'judge',
            '--dataset',
            str(data),
            '--judges',
            'hallucination',
            '--base-url',
            f'http://127.0.0.1:{stub.port}/nowhere',
            '--out',
            str(ctx.tmp / 'r14b'),
            '--no-cache',
        )
    good = (
        bool(paths)
        and all(p.startswith('/v1/') and q == 'api-version=2024-06-01' for _, p, q in paths)
        and any(p == '/v1/chat/completions' for _, p, _ in paths)
    )
    held = good and wrong.returncode == 2 and '404' in wrong.stderr
    return Outcome(14, '--base-url with a query', held, f'requests {paths}; a base URL answering 404: exit {wrong.returncode}')


def item15_retry_resends(ctx: Ctx) -> Outcome:
    size = 60 * 2**20 if not ctx.quick else 6 * 2**20
    data = _write_dataset(ctx.tmp / 'q15.jsonl', [_record('huge-answer')])
    with Stub(chat=('big', size)) as stub:
        r = cli(
            'judge',
            '--dataset',
            str(data),
            '--judges',
            'hallucination',
            '--base-url',
            stub.url,
            '--out',
            str(ctx.tmp / 'r15'),
            '--no-cache',
            '--timeout',
            '120',
            timeout=400,
        )
        sizes = [s.body_bytes for s in stub.seen if s.method == 'POST']
    held = len(sizes) >= 2 and max(sizes) < sizes[0] + 200_000
    return Outcome(
        15,
        'retries resend a giant invalid answer',
        held,
        f'answer {size / 2**20:.0f} MB; request sizes {[f"{b / 1024:.1f} KB" for b in sizes]}; exit {r.returncode}',
    )


def item16_minor(ctx: Ctx) -> Outcome:
    with Stub() as stub, service(ctx.db_url, stub) as svc:
        port = int(svc.url.rsplit(':', 1)[1])
        hosts = {}
        for host in ('evil@localhost', 'localhost/x', 'localhost:8000@evil', 'localhost'):
            with socket.create_connection(('127.0.0.1', port), timeout=5) as s:
                s.sendall(f'GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n'.encode())
                hosts[host] = int(s.recv(100).split()[1])
        body = json.dumps(_record('utf8')).encode().replace(b'Nothing.', b'Noth\xffing.')
        r = httpx.post(f'{svc.url}/api/v1/sessions', content=body, headers={'Content-Type': 'application/json'}, timeout=10)
        locs = [e.get('loc') for e in r.json().get('detail', [])] if r.status_code == 422 else []
    run_id = cli(
        'judge',
        '--dataset',
        str(_write_dataset(ctx.tmp / 'q16.jsonl', [_record('a')])),
        '--run-id',
        'CON',
        '--out',
        str(ctx.tmp / 'r16'),
        '--judges',
        'hallucination',
        '--base-url',
        'http://127.0.0.1:9/v1',  # nothing listens: a version that takes the run id stops at the model check
    )
    help_text = cli('judge', '--help').stdout
    hosts_ok = hosts == {'evil@localhost': 400, 'localhost/x': 400, 'localhost:8000@evil': 400, 'localhost': 200}
    utf8_ok = r.status_code == 422 and ['body', 'messages', 1, 'content'] in locs
    held = hosts_ok and utf8_ok and run_id.returncode == 2 and '--max-record-bytes' in help_text
    return Outcome(
        16,
        'Host check, invalid UTF-8, --run-id CON, record limit flag',
        held,
        f'Host answers {hosts}; invalid UTF-8: {r.status_code} at {locs}; --run-id CON: exit {run_id.returncode}; '
        f'--max-record-bytes in judge --help: {"--max-record-bytes" in help_text}',
    )


def _span_chain(n: int) -> dict[str, Any]:
    """One run of `n` spans, each the parent of the next, every one below the run a model call (the shape whose
    ancestor walks were quadratic)."""
    trace = 'ab' * 16
    q = json.dumps([{'role': 'user', 'parts': [{'type': 'text', 'content': 'q'}]}])
    a = json.dumps([{'role': 'assistant', 'parts': [{'type': 'text', 'content': 'a'}]}])
    spans = []
    for i in range(n):
        attrs = [{'key': 'gen_ai.operation.name', 'value': {'stringValue': 'invoke_agent' if i == 0 else 'chat'}}]
        if i:
            attrs += [
                {'key': 'gen_ai.input.messages', 'value': {'stringValue': q}},
                {'key': 'gen_ai.output.messages', 'value': {'stringValue': a}},
            ]
        span = {'traceId': trace, 'spanId': f'{i + 1:016x}', 'name': f's{i}', 'startTimeUnixNano': str(1000 + i),
                'endTimeUnixNano': str(10**9 - i), 'attributes': attrs}  # fmt: skip
        if i:
            span['parentSpanId'] = f'{i:016x}'
        spans.append(span)
    return {'resourceSpans': [{'scopeSpans': [{'spans': spans}]}]}


def item_span_chain(ctx: Ctx) -> Outcome:
    """Issue 41 item 2: a chain of 10,000 nested spans under one run (3,000 quick) judged by `judge` from a file
    (deterministic checks) and posted to the service in one request; each must take under 10 s."""
    n = 3_000 if ctx.quick else 10_000
    body = json.dumps(_span_chain(n), separators=(',', ':'))
    path = ctx.tmp / 'chain.otlp.jsonl'
    path.write_text(body + '\n')
    t = time.monotonic()
    run = cli('judge', '--dataset', str(path), '--judges', 'checks', '--no-cache', '--out', str(ctx.tmp / 'reports'), timeout=300)
    judge_s = time.monotonic() - t
    reports = len(list((ctx.tmp / 'reports').glob('*/records/*.json')))
    with Stub() as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=300) as c:
        t = time.monotonic()
        gz = zlib.compress(body.encode(), wbits=16 + zlib.MAX_WBITS)  # as exporters send it (OTEL_EXPORTER_OTLP_COMPRESSION)
        r = c.post('/v1/traces', content=gz, headers={'Content-Type': 'application/json', 'Content-Encoding': 'gzip'})
        service_s = time.monotonic() - t
        status = c.get('/api/v1/traces/' + 'ab' * 16).json().get('status')
    judged = run.returncode == 0 and reports == 1 and judge_s < 10
    held = judged and r.status_code == 200 and status == 'ingested' and service_s < 10
    detail = (
        f'{n:,}-span chain ({len(body) / 2**20:.1f} MiB, gzip to the service): '
        f'judge exit {run.returncode}, {reports} report in {judge_s:.1f} s; '
        f'service {r.status_code}, trace {status} in {service_s:.1f} s (limit 10 s each)'
    )
    return Outcome(4102, 'deep span trees in linear time', held, detail)


ITEMS: dict[int, Callable[[Ctx], Outcome]] = {
    1: item1_json_volume,
    2: item2_memory_on_reads,
    3: item3_slow_clients,
    4: item4_credentials_in_log,
    5: item5_log_injection,
    6: item6_bad_dates,
    7: item7_transcript_cut,
    8: item8_token_lockouts,
    9: item9_view_large_run,
    10: item10_corrupt_cache,
    11: item11_flags,
    12: item12_retry_after,
    13: item13_search_wildcards,
    14: item14_base_url_query,
    15: item15_retry_resends,
    16: item16_minor,
    17: item17_view_realistic_reports,
    4102: item_span_chain,  # issue 41 item 2 (span trees in linear time)
}
# The list and read items, also run on PostgreSQL.
PG_ITEMS = (2, 6, 13)


def run_item(number: int, quick: bool, db_url: str | None = None, backend: str = 'sqlite') -> Outcome:
    """One item in a fresh temp directory (a fresh SQLite store unless `db_url`)."""
    with tempfile.TemporaryDirectory(prefix=f'hostile-{number}-') as tmp:
        ctx = Ctx(quick, Path(tmp), db_url or _sqlite_url(Path(tmp)), backend)
        try:
            return ITEMS[number](ctx)
        except Exception as e:
            return Outcome(number, ITEMS[number].__name__, False, f'the check itself failed: {type(e).__name__}: {e}', backend)


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str | None]:
    """A PostgreSQL server in a temp dir on a free loopback port (None without the binaries)."""
    bins = sorted(glob.glob('/usr/lib/postgresql/*/bin/initdb'))
    if not bins:
        yield None
        return
    bindir = os.path.dirname(bins[-1])
    as_pg = ['runuser', '-u', 'postgres', '--'] if os.geteuid() == 0 else []
    tmp = tempfile.mkdtemp(prefix='hostile-pg-')
    if as_pg:
        shutil.chown(tmp, 'postgres', 'postgres')
    data, port = os.path.join(tmp, 'data'), _free_port()
    pg_ctl = os.path.join(bindir, 'pg_ctl')
    try:
        subprocess.run(
            [*as_pg, bins[-1], '-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'],
            check=True,
            capture_output=True,
            timeout=120,
        )
        opts = f'-p {port} -c listen_addresses=127.0.0.1 -k {tmp} -c fsync=off'
        subprocess.run(
            [*as_pg, pg_ctl, '-D', data, '-o', opts, '-l', os.path.join(tmp, 'log'), '-w', 'start'],
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (subprocess.SubprocessError, OSError):
        yield None
        return
    try:
        yield f'postgresql+psycopg://postgres@127.0.0.1:{port}/postgres'
    finally:
        subprocess.run([*as_pg, pg_ctl, '-D', data, '-m', 'immediate', 'stop'], capture_output=True, timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def _fresh_pg_db(server: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server.replace('postgresql+psycopg://', 'postgresql://'), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS {name}')
        conn.execute(f'CREATE DATABASE {name}')
    return server.rsplit('/', 1)[0] + f'/{name}'


def _line(outcome: Outcome, seconds: float) -> str:
    verdict = 'held' if outcome.held else 'FAILED'
    return f'{outcome.item:>2} {verdict:<6} [{outcome.backend}] {outcome.title} ({seconds:.1f} s): {outcome.detail}'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true', help='smaller reproductions (seconds to a minute), SQLite only')
    parser.add_argument('--items', default='', help='comma-separated item numbers (default: all 16)')
    parser.add_argument('--pg-url', default=None, help='a PostgreSQL server URL for the list/read items (full mode)')
    parser.add_argument(
        '--root',
        type=Path,
        default=None,
        help='run the service and CLI of another checkout (to see the items fail before the fixes)',
    )
    args = parser.parse_args()
    if args.root is not None:
        global ROOT
        ROOT = args.root.resolve()
    wanted = [int(i) for i in args.items.split(',') if i.strip()] or sorted(ITEMS)
    outcomes: list[Outcome] = []
    started = time.monotonic()
    for number in wanted:
        t = time.monotonic()
        outcome = run_item(number, args.quick)
        outcomes.append(outcome)
        print(
            _line(outcome, time.monotonic() - t),
            flush=True,
        )
    pg_wanted = [n for n in wanted if n in PG_ITEMS]
    if pg_wanted and not args.quick:
        ctx_pg = contextlib.nullcontext(args.pg_url) if args.pg_url else throwaway_postgres()
        with ctx_pg as server:
            if server is None:
                print('   PostgreSQL: no server (give --pg-url, or install the Debian postgresql binaries): skipped')
            for number in pg_wanted if server else []:
                t = time.monotonic()
                db = _fresh_pg_db(server, f'hostile_{number}')
                outcome = run_item(number, args.quick, db, 'postgresql')
                outcomes.append(outcome)
                print(
                    _line(outcome, time.monotonic() - t),
                    flush=True,
                )
    held = sum(o.held for o in outcomes)
    items_held = len({o.item for o in outcomes if all(p.held for p in outcomes if p.item == o.item)})
    print(f'\n{held} of {len(outcomes)} held ({items_held} of {len(set(wanted))} items) in {time.monotonic() - started:.0f} s')
    sys.exit(0 if held == len(outcomes) else 1)


if __name__ == '__main__':
    main()
