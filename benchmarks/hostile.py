"""Hostile input, round four (issue 41): the reproductions replayed against the real service and CLI.

Each item runs `sensei-eval serve` (uvicorn on a free loopback port, its judge model the OpenAI-compatible stub
of `hostile_harness`) or the CLI in a child process, sends what the reproduction sent, and prints `held` or
`FAILED` with the figures it measured. The service's peak memory is its own high-water mark (`VmHWM`); the
health check is asked every 100 ms throughout item 1 and its slowest answer reported. Only 127.0.0.1 is ever
addressed (item 6 decides on `--host 0.0.0.0` with uvicorn replaced by a stub: nothing is bound).

    python benchmarks/hostile.py --quick            # what CI runs (SQLite; item 4 with 8 sessions)
    python benchmarks/hostile.py                    # the reproductions' sizes; item 4 also on PostgreSQL
    python benchmarks/hostile.py --items 1 --root /work/main   # watch an item fail on another checkout

Must show: under the 1.9M-scalar body, peak service memory < 500 MB and health answered within 1 s throughout
(item 1); a 10,000-span chain judged in under 10 s by `judge` and by the service (item 2); `view` of 100,000
realistic reports under 500 MB (item 5). Round three's items are `hostile_round3.py`.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import sqlite3
import subprocess
import sys
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/hostile.py` finds its sibling

from benchmarks import hostile_harness as harness
from benchmarks.hostile_harness import (
    CLI,
    MEMORY_LIMIT_MB,
    Ctx,
    Item,
    Outcome,
    Stub,
    _env,
    _fresh_pg_db,
    _record,
    cli,
    run_items,
    run_measured,
    service,
)
from benchmarks.hostile_harness import run_item as _run_item

__all__ = ('ITEMS', 'PG_ITEMS', '_fresh_pg_db', 'run_item')

JSON = {'Content-Type': 'application/json'}
MiB = 2**20
# The health check must answer within this, whatever else the service is reading.
HEALTH_LIMIT_S = 1.0


def _alert(query_id: str, **extra: Any) -> dict[str, Any]:
    return _record(query_id, alert_data={'alert_type': 'SuspiciousCPU', 'pod': 'miner-7f'}, **extra)


def _gzip_of_parts(*parts: bytes, repeat: bytes = b'', times: int = 0) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [c.compress(parts[0])]
    out += [c.compress(repeat) for _ in range(times)]
    out += [c.compress(p) for p in parts[1:]]
    return b''.join([*out, c.flush()])


def item1_costly_bodies(ctx: Ctx) -> Outcome:
    """1.9M scalars (plain and gzip, and four at once), 95 KiB of gzip holding one 100 MiB string, a gzip protobuf
    of 2.6M empty messages, an unterminated string of escaped quotes; health asked throughout."""
    scalars = b'{"resourceSpans":[' + b','.join([b'1'] * 1_900_000) + b']}'
    zipped = gzip.compress(scalars)
    one_string = _gzip_of_parts(b'{"resourceSpans":[],"x":"', b'"}', repeat=b'a' * MiB, times=100)
    protobuf = gzip.compress(b'\x0a\x00' * 2_600_000)
    quotes = b'{"query_id": "q", "x": "' + b'\\"' * (100_000 if ctx.quick else 2_500_000)
    gz = {**JSON, 'Content-Encoding': 'gzip'}
    sends = [
        ('1.9M scalars', '/v1/traces', scalars, JSON),
        ('the same as gzip', '/v1/traces', zipped, gz),
        ('one long string', '/v1/traces', one_string, gz),
        (
            'empty protobuf messages',
            '/v1/traces',
            protobuf,
            {'Content-Type': 'application/x-protobuf', 'Content-Encoding': 'gzip'},
        ),
        ('escaped quotes', '/api/v1/sessions', quotes, JSON),
    ]
    answers: list[str] = []
    statuses: list[int] = []
    with Stub() as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=120) as c:
        base = svc.rss_mb()
        with harness.HealthProbe(svc.url) as probe:
            for name, path, body, headers in sends:
                t = time.monotonic()
                try:
                    status = c.post(path, content=body, headers=headers).status_code
                except httpx.HTTPError as e:
                    status = 0
                    name += f' ({type(e).__name__})'
                statuses.append(status)
                answers.append(f'{name} ({len(body) / 1024:,.0f} KiB): {status} in {time.monotonic() - t:.1f} s')

            async def four() -> list[int]:
                async with httpx.AsyncClient(base_url=svc.url, timeout=120) as ac:
                    rs = await asyncio.gather(*(ac.post('/v1/traces', content=scalars, headers=JSON) for _ in range(4)))
                return [r.status_code for r in rs]

            t = time.monotonic()
            at_once = asyncio.run(four())
            answers.append(f'four 1.9M bodies at once: {at_once} in {time.monotonic() - t:.1f} s')
        peak = svc.peak_mb()
        still = c.post('/api/v1/sessions', json=_record('after')).status_code
    refused = all(400 <= s < 500 for s in statuses + at_once)
    healthy = probe.failed == 0 and probe.slowest < HEALTH_LIMIT_S
    held = refused and healthy and peak < MEMORY_LIMIT_MB and still == 201
    detail = (
        '; '.join(answers) + f'; service memory {base:.0f} MB -> peak {peak:.0f} MB (limit {MEMORY_LIMIT_MB:.0f}); '
        f'health: {probe.asked} asked, {probe.failed} failed, slowest {probe.slowest:.2f} s (limit {HEALTH_LIMIT_S:g} s)'
    )
    return Outcome(1, 'small bodies that cost gigabytes', held, detail)


def _seed_long_queries(db_url: str, n: int, chars: int) -> None:
    """`n` stored sessions whose query is `chars` characters long, written straight into the table (as a store
    filled by ingest, another writer or an older version holds them)."""
    query = ('Why did the checkout service time out for EU customers? ' * (chars // 56 + 1))[:chars]
    now = int(time.time() * 1e6)
    sql = (
        'INSERT INTO sessions (session_id, query_id, agent, status, record, created_at_us, updated_at_us) '
        'VALUES ({0}, {0}, {0}, {0}, {0}, {0}, {0})'
    )

    def row(i: int) -> tuple[Any, ...]:
        record = json.dumps(_record(f'long-{i}', query=query), separators=(',', ':'))
        return (str(uuid.uuid4()), f'long-{i}', 'seed', 'completed', record, now + i, now + i)

    if db_url.startswith('sqlite'):
        conn = sqlite3.connect(db_url.split(':///', 1)[1])
        with conn:
            for i in range(n):
                conn.execute(sql.format('?'), row(i))
        conn.close()
    else:
        import psycopg

        with psycopg.connect(db_url.replace('postgresql+psycopg://', 'postgresql://')) as conn:
            for i in range(n):
                conn.execute(sql.format('%s'), row(i))


def item4_list_previews(ctx: Ctx) -> Outcome:
    """Sessions with 4.7 MB queries (60; 30 on PostgreSQL; 8 in quick mode), then both session lists and one detail."""
    n = 8 if ctx.quick else (30 if ctx.backend == 'postgresql' else 60)
    chars = 4_700_000
    with Stub() as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=300) as c:
        _seed_long_queries(ctx.db_url, n, chars)
        base = svc.rss_mb()
        t = time.monotonic()
        api = c.get('/api/v1/sessions', params={'limit': 100})
        api_s = time.monotonic() - t
        t = time.monotonic()
        dash = c.get('/api/v1/dashboard/sessions', params={'limit': 100})
        dash_s = time.monotonic() - t
        peak = svc.peak_mb()
        first = api.json()['items'][0]['session_id'] if api.status_code == 200 and api.json()['items'] else None
        detail = c.get(f'/api/v1/sessions/{first}').json() if first else {}
    items = api.json().get('items', []) if api.status_code == 200 else []
    rows = dash.json().get('items', []) if dash.status_code == 200 else []
    longest = max((len(i['query']) for i in items + rows), default=-1)
    full = len(detail.get('query', '')) == chars
    small = len(api.content) < MiB and len(dash.content) < MiB
    held = len(items) == len(rows) == n and small and peak < MEMORY_LIMIT_MB and full
    out = (
        f'{n} sessions of {chars / 1e6:.1f} MB queries: API list {api.status_code} {len(api.content) / 1024:,.0f} KB in '
        f'{api_s:.2f} s, dashboard list {dash.status_code} {len(dash.content) / 1024:,.0f} KB in {dash_s:.2f} s, '
        f'longest query shown {longest:,} chars; detail has the full query: {full}; '
        f'memory {base:.0f} MB -> peak {peak:.0f} MB (limit {MEMORY_LIMIT_MB:.0f})'
    )
    return Outcome(4, 'list pages carry each full query', held, out, ctx.backend)


# Runs `serve` with uvicorn replaced by a stub that says where it would listen: the start-up decision without
# binding anything (item 6 asks about 0.0.0.0).
_DECIDE_ONLY = (
    'import sys, uvicorn; uvicorn.run = lambda app, **kw: print("WOULD SERVE on", kw.get("host"), flush=True); '
    'from sensei_eval.__main__ import main; sys.argv = ["sensei-eval", *sys.argv[1:]]; main()'
)


def item6_empty_token(ctx: Ctx) -> Outcome:
    """`SENSEI_EVAL_TOKEN=''` on 0.0.0.0 (refused unless --public-read), and a --public-read service's answers."""

    def decide(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, '-c', _DECIDE_ONLY, 'serve', '--db', ctx.db_url, '--model', 'test', *args]
        return subprocess.run(
            command, cwd=harness.ROOT, capture_output=True, text=True, timeout=120, env=_env(SENSEI_EVAL_TOKEN='')
        )

    refused = decide('--host', '0.0.0.0', '--port', '8000')
    chosen = decide('--host', '0.0.0.0', '--port', '8000', '--public-read')
    with Stub() as stub, service(ctx.db_url, stub, '--public-read', env=_env(SENSEI_EVAL_TOKEN='')) as svc:
        write = httpx.post(f'{svc.url}/api/v1/sessions', json=_record('anonymous-write'), timeout=10).status_code
        read = httpx.get(f'{svc.url}/api/v1/sessions', timeout=10).status_code
    said = 'set but empty' in refused.stderr
    held = refused.returncode == 2 and said and 'WOULD SERVE' not in refused.stdout and chosen.returncode == 0
    held = held and write == 403 and read == 200
    detail = (
        f"SENSEI_EVAL_TOKEN='' on 0.0.0.0: exit {refused.returncode}, served: {'WOULD SERVE' in refused.stdout}, "
        f'says why: {said}; with --public-read: exit {chosen.returncode}; a --public-read service without a token '
        f'answers a write {write}, a read {read}'
    )
    return Outcome(6, 'an empty token turns authentication off', held, detail)


def item8_rate_limited_scoring(ctx: Ctx) -> Outcome:
    """A scoring whose model answers 429 with Retry-After: 120."""
    with Stub(chat=('429', 120)) as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=30) as c:
        session_id = c.post('/api/v1/sessions', json=_alert('rated')).json()['session_id']
        t = time.monotonic()
        c.post(f'/api/v1/scoring/sessions/{session_id}/score', json={})
        body: dict[str, Any] = {}
        deadline = t + (60 if ctx.quick else 200)
        while time.monotonic() < deadline:
            body = c.get(f'/api/v1/scoring/sessions/{session_id}/score').json()
            if body.get('status') not in ('pending', 'in_progress'):
                break
            time.sleep(0.2)
        elapsed = time.monotonic() - t
        calls = sum(s.method == 'POST' for s in stub.seen)
    error = body.get('error_message') or ''
    named = 'rate-limited (429)' in error and '120 s' in error
    held = body.get('status') == 'failed' and named and 'timed out' not in error and elapsed < 20
    detail = (
        f'status {body.get("status")} after {elapsed:.1f} s, {calls} model request(s); '
        f'error names rate-limited and the 120 s wait: {named}; says "timed out": {"timed out" in error}'
    )
    return Outcome(8, 'a 429 during scoring reported as timed out', held, detail)


def item10_access_log(ctx: Ctx) -> Outcome:
    secrets = ('k-s3cr3t-1', 't-s3cr3t-2', 's-s3cr3t-3')
    with Stub() as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=10) as c:
        c.get('/api/v1/health', params={'api_key': secrets[0]})
        c.get('/api/v1/sessions', params={'access_token': secrets[1], 'limit': 5})
        c.get(f'/api/v1/sessions?api%5Fkey={secrets[2]}')
        time.sleep(0.3)
        log = svc.log_text()
    access = len(re.findall(r'"GET /api/v1/(?:health|sessions)\?', log))
    leaked = [s for s in secrets if s in log]
    held = access >= 3 and not leaked
    return Outcome(
        10, 'query-string secrets in the access log', held, f'{access} access lines; secrets in the log: {leaked or "none"}'
    )


def item11_infinite_rating(ctx: Ctx) -> Outcome:
    ratings = [{'score': 'Infinity', 'max': 'Infinity'}, {'score': 'NaN', 'max': 'NaN'}, {'thumbs_up': True, 'max': '-Infinity'}]
    with Stub() as stub, service(ctx.db_url, stub) as svc, httpx.Client(base_url=svc.url, timeout=10) as c:
        answers = [c.post('/api/v1/sessions', json=_record(f'r{i}', rating=r)) for i, r in enumerate(ratings)]
        stored = c.get('/api/v1/sessions').json()['total']
    located = [a.status_code == 422 and 'rating.' in a.json().get('message', '') for a in answers]
    held = all(located) and stored == 0
    return Outcome(
        11,
        'an infinite rating stored as empty',
        held,
        f'answers {[a.status_code for a in answers]}, located {located}; stored {stored}',
    )


def item12_cache_reporting(ctx: Ctx) -> Outcome:
    from sensei_eval.judging.cache import DB_NAME

    as_file = ctx.tmp / 'cache-file'
    as_file.write_text('a file where the cache folder goes')
    stats = cli('cache', 'stats', '--dir', str(as_file))
    folder_db = ctx.tmp / 'cache-dir'
    (folder_db / 'judge' / DB_NAME).mkdir(parents=True)
    clear = cli('cache', 'clear', '--dir', str(folder_db))
    binary = ctx.tmp / 'cache-binary'
    (binary / 'judge').mkdir(parents=True)
    with sqlite3.connect(binary / 'judge' / DB_NAME) as conn:
        conn.execute('CREATE TABLE judge_results (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, result TEXT NOT NULL, '
                     'status TEXT NOT NULL, model TEXT, written_at REAL NOT NULL)')  # fmt: skip
        conn.executemany(
            'INSERT INTO judge_results (key, result, status, model, written_at) VALUES (?, ?, ?, ?, ?)',
            [(f'k{i}', b'{"judge": "x"}', 'ok', 'm', 0.0) for i in range(3)],
        )
    binary_stats = cli('cache', 'stats', '--dir', str(binary))
    cases = [
        ('cache folder is a file: stats', stats, 'is a file'),
        ('cache.sqlite3 is a folder: clear', clear, 'is a folder'),
        ('entries stored as binary: stats', binary_stats, 'stored as binary'),
    ]
    ok = [r.returncode == 1 and want in r.stderr and 'new cache' not in r.stdout for _, r, want in cases]
    ok[0] = ok[0] and 'entries' not in stats.stdout
    detail = '; '.join(
        f'{name}: exit {r.returncode}, {"names it" if good else (r.stdout + r.stderr).strip()[-80:]}'
        for (name, r, _), good in zip(cases, ok, strict=True)
    )
    return Outcome(12, 'cache reporting', all(ok), detail)


def item13_flags_and_audit(ctx: Ctx) -> Outcome:
    level = subprocess.run([*CLI, 'serve', '--db', ctx.db_url, '--log-level', 'nope'], cwd=harness.ROOT, capture_output=True,
                           text=True, timeout=120, env=_env())  # fmt: skip
    with Stub() as stub, service(ctx.db_url, stub, '--max-body', '1000') as svc:
        big = httpx.post(f'{svc.url}/api/v1/sessions', content=b'{' + b' ' * 5000 + b'}', headers=JSON, timeout=10).status_code
        time.sleep(0.3)
        log = svc.log_text()
    audited = 'POST /api/v1/sessions refused from 127.0.0.1' in log and 'over the limit of 1000' in log
    usage = level.returncode == 2 and "'nope' is not one of" in level.stderr and 'Traceback' not in level.stderr
    held = usage and big == 413 and audited
    detail = (
        f'--log-level nope: exit {level.returncode}, traceback: {"Traceback" in level.stderr}; '
        f'413 before the route: {big}, audited: {audited}'
    )
    return Outcome(13, '--log-level and unaudited 413s', held, detail)


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


def item5_view_streams(ctx: Ctx) -> Outcome:
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
        5,
        'view streams realistic reports',
        held,
        f'{n:,} reports of {size / 1024:.1f} KB ({n * size / 2**30:.2f} GB): exit {code} in {elapsed:.0f} s, peak '
        f'{peak:.0f} MB (limit {MEMORY_LIMIT_MB:.0f}); main page {main / 2**20:.1f} MB {err[-200:]}',
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


def item2_span_chain(ctx: Ctx) -> Outcome:
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
    return Outcome(2, 'deep span trees in linear time', held, detail)


ITEMS: dict[int, Item] = {
    1: item1_costly_bodies,
    2: item2_span_chain,
    4: item4_list_previews,
    5: item5_view_streams,
    6: item6_empty_token,
    8: item8_rate_limited_scoring,
    10: item10_access_log,
    11: item11_infinite_rating,
    12: item12_cache_reporting,
    13: item13_flags_and_audit,
}
# The list and read items, also run on PostgreSQL (full mode; `tests/service/test_list_previews.py` in the tests).
PG_ITEMS = (4,)


def run_item(number: int, quick: bool, db_url: str | None = None, backend: str = 'sqlite') -> Outcome:
    """One item in a fresh temp directory (a fresh SQLite store unless `db_url`)."""
    return _run_item(ITEMS, number, quick, db_url, backend)


if __name__ == '__main__':
    run_items(ITEMS, PG_ITEMS, __doc__ or '')
