"""The harness of the hostile-input benchmarks (`hostile.py`, issue 41; `hostile_round3.py`, issue 32).

Everything an item needs to replay an attack against the real thing: `sensei-eval serve` in a child process on a
free loopback port (`service`, its peak memory read from /proc), the CLI in a child process (`cli`,
`run_measured`), an OpenAI-compatible stub judge model on loopback (`Stub`), a throwaway PostgreSQL from the
Debian binaries (`throwaway_postgres`), and the runner both scripts share (`run_items`): each item prints
`held` or `FAILED` with what it measured, the list and read items also on PostgreSQL in full mode, and the
script exits 1 when an item failed. Only 127.0.0.1 is ever addressed; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import glob
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
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


class HealthProbe:
    """`GET /api/v1/health` every `interval` seconds in a thread while the block runs: `asked`, `failed` (an
    error counts as failed) and `slowest`, the longest answer (or wait) seen."""

    def __init__(self, url: str, interval: float = 0.1) -> None:
        self.url, self.interval = url, interval
        self.slowest, self.asked, self.failed = 0.0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as c:
            while not self._stop.is_set():
                t = time.monotonic()
                try:
                    ok = c.get('/api/v1/health').status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.asked += 1
                self.failed += not ok
                self.slowest = max(self.slowest, time.monotonic() - t)
                self._stop.wait(self.interval)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(20)


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


_CACHE_DIR: list[str] = []


def _cache_dir() -> str:
    """One judge-cache folder for the children of this run, removed at exit."""
    if not _CACHE_DIR:
        _CACHE_DIR.append(tempfile.mkdtemp(prefix='hostile-cache-'))
        atexit.register(shutil.rmtree, _CACHE_DIR[0], True)
    return _CACHE_DIR[0]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _ENV_CLEAN}
    env['PYTHONPATH'] = str(ROOT) + os.pathsep + env.get('PYTHONPATH', '')
    env['SENSEI_EVAL_CACHE'] = env.get('SENSEI_EVAL_CACHE_TEST') or _cache_dir()
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
        log.unlink(missing_ok=True)


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


@dataclass
class Ctx:
    quick: bool
    tmp: Path
    db_url: str
    backend: str = 'sqlite'


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


Item = Callable[[Ctx], Outcome]


def run_item(items: dict[int, Item], number: int, quick: bool, db_url: str | None = None, backend: str = 'sqlite') -> Outcome:
    """One item in a fresh temp directory (a fresh SQLite store unless `db_url`)."""
    with tempfile.TemporaryDirectory(prefix=f'hostile-{number}-') as tmp:
        ctx = Ctx(quick, Path(tmp), db_url or _sqlite_url(Path(tmp)), backend)
        try:
            return items[number](ctx)
        except Exception as e:
            return Outcome(number, items[number].__name__, False, f'the check itself failed: {type(e).__name__}: {e}', backend)


def run_items(items: dict[int, Item], pg_items: tuple[int, ...], description: str) -> None:
    """The command line of a hostile-input benchmark: run `items` (the list and read ones, `pg_items`, also on
    PostgreSQL in full mode), print a line each and the tally, exit 1 when one failed."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true', help='smaller reproductions (seconds to a minute), SQLite only')
    parser.add_argument('--items', default='', help='comma-separated item numbers (default: all)')
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
    wanted = [int(i) for i in args.items.split(',') if i.strip()] or sorted(items)
    outcomes: list[Outcome] = []
    started = time.monotonic()
    for number in wanted:
        t = time.monotonic()
        outcome = run_item(items, number, args.quick)
        outcomes.append(outcome)
        print(
            _line(outcome, time.monotonic() - t),
            flush=True,
        )
    pg_wanted = [n for n in wanted if n in pg_items]
    if pg_wanted and not args.quick:
        ctx_pg = contextlib.nullcontext(args.pg_url) if args.pg_url else throwaway_postgres()
        with ctx_pg as server:
            if server is None:
                print('   PostgreSQL: no server (give --pg-url, or install the Debian postgresql binaries): skipped')
            for number in pg_wanted if server else []:
                t = time.monotonic()
                db = _fresh_pg_db(server, f'hostile_{number}')
                outcome = run_item(items, number, args.quick, db, 'postgresql')
                outcomes.append(outcome)
                print(
                    _line(outcome, time.monotonic() - t),
                    flush=True,
                )
    held = sum(o.held for o in outcomes)
    items_held = len({o.item for o in outcomes if all(p.held for p in outcomes if p.item == o.item)})
    print(f'\n{held} of {len(outcomes)} held ({items_held} of {len(set(wanted))} items) in {time.monotonic() - started:.0f} s')
    sys.exit(0 if held == len(outcomes) else 1)
