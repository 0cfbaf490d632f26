"""Hostile input, round three (issue 32): the 16 reproductions replayed against the real service and CLI
(round four, issue 41, is `hostile.py`; both run on `hostile_harness`).

Every item runs `sensei-eval serve` (uvicorn on a free loopback port, its judge model an OpenAI-compatible
stub on another loopback port, `hostile_harness.Stub`) or the `sensei-eval` CLI in a child process, sends what the
reproduction sent, and prints `held` or `FAILED` with what it saw. Every loop is bounded in count and in time;
only 127.0.0.1 is ever addressed. Peak service memory for items 1-2 is the service process's own high-water
mark (`VmHWM` in /proc), which must stay under 500 MB; `view` of 100,000 records must stay under 1 GB.

    python benchmarks/hostile_round3.py --quick     # seconds to a minute; what CI runs (SQLite)
    python benchmarks/hostile_round3.py             # the reproductions' own sizes (minutes), SQLite and PostgreSQL
    python benchmarks/hostile_round3.py --items 1,2,13 --pg-url postgresql+psycopg://postgres@127.0.0.1:5432/db

Full mode starts a throwaway PostgreSQL from the Debian binaries (`/usr/lib/postgresql/*/bin`) for the list
and read items (2, 6, 13) when no `--pg-url` is given and the binaries exist; otherwise those run on SQLite only.
`.ci/run` runs `--quick`; `tests/service/test_hostile_limits.py` runs the list and read items on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import resource
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
import zlib
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/hostile_round3.py` finds its sibling

from benchmarks.hostile_harness import (
    MEMORY_LIMIT_MB,
    VIEW_MEMORY_LIMIT_MB,
    Ctx,
    Item,
    Outcome,
    Stub,
    _chat_prompts,
    _env,
    _free_port,
    _fresh_pg_db,
    _record,
    _write_dataset,
    _write_run,
    cli,
    run_items,
    run_measured,
    service,
)
from benchmarks.hostile_harness import run_item as _run_item

# ---------------------------------------------------------------------------------------------------
# The items


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


ITEMS: dict[int, Item] = {
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
}
# The list and read items, also run on PostgreSQL.
PG_ITEMS = (2, 6, 13)
__all__ = ('ITEMS', 'PG_ITEMS', '_fresh_pg_db', 'run_item')


def run_item(number: int, quick: bool, db_url: str | None = None, backend: str = 'sqlite') -> Outcome:
    """One item in a fresh temp directory (a fresh SQLite store unless `db_url`)."""
    return _run_item(ITEMS, number, quick, db_url, backend)


if __name__ == '__main__':
    run_items(ITEMS, PG_ITEMS, __doc__ or '')
