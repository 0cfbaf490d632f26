"""The judge cache at a million entries: size on disk, memory to open it, lookup latency, and a judge
run with a cold and a warm cache on top of it.

1. Fills `<tmp>/judge/cache.sqlite3` with `--entries` (default 1,000,000) realistic results (one
   model judge's verdict with an issue, ~0.9 KB of JSON each), through the cache's own schema and
   insert statement in large transactions (the same rows `JudgeCache.put` writes, faster to fill).
2. In a fresh child process: resident memory before and after opening the cache and looking up one
   key (`/proc/self/status` VmRSS; target < 100 MiB for opening it), then `--lookups` random gets
   (hits, half as many misses) timed one by one: p50/p99/max.
3. A judge run over `--records` records (checks + one model judge answered instantly by a scripted
   `FunctionModel`) against that big cache: cold (every verdict a miss, then written) and warm (every
   verdict a hit; no model call).

    python benchmarks/cache_scale.py [--entries 1000000] [--lookups 20000] [--records 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _key(i: int) -> str:
    from sensei_eval.judging.cache import JudgeCache

    return JudgeCache.key('c' * 64, 'openai:gpt-5.2', {'temperature': 0.0}, f'{i:064x}', 1)


def fill(directory: Path, n: int) -> float:
    from sensei_eval.core.reports import JudgeResult
    from sensei_eval.judging import cache

    template = JudgeResult(
        judge='completeness', failure_mode='incomplete_answer', category='answer', criteria_hash='c' * 64,
        model='openai:gpt-5.2', status='ok', score=0.5, passed=False, input_tokens=4123, output_tokens=212,
        requests=1, latency_s=3.2,
        reasoning='The answer addresses the first part of the question at [4] but never says how to retry. ' * 2,
        issues=[{'description': 'The retry policy the user asked about is never given.', 'steps': [4], 'severity': 'major'}],
    )  # fmt: skip
    text = template.model_dump_json(exclude_defaults=True)  # as `JudgeCache.put` stores it
    path = directory / 'judge' / cache.DB_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with sqlite3.connect(path) as conn:
        conn.execute('PRAGMA journal_mode=WAL')
        conn.executescript(cache._SCHEMA)
        batch = []
        for i in range(n):
            entry = text.replace('"score":0.5', f'"score":{(i % 100) / 100}')
            assert entry != text or i % 100 == 50
            batch.append((_key(i), entry, 'ok', 'openai:gpt-5.2', time.time()))
            if len(batch) == 50_000:
                conn.executemany(cache._INSERT, batch)
                conn.commit()
                batch.clear()
        conn.executemany(cache._INSERT, batch)
        conn.commit()
        conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')  # the size on disk is the database's, not a WAL's
    return time.perf_counter() - started


def _rss_mib() -> float:
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
    return float('nan')


def probe(directory: str, n: int, lookups: int) -> None:
    """Child process: memory to open, lookup latency. Prints one JSON line."""
    from sensei_eval.core.reports import JudgeResult  # noqa: F401  (imported before measuring: not the cache's cost)
    from sensei_eval.judging.cache import JudgeCache

    keys = [_key(random.randrange(n)) for _ in range(lookups)] + [_key(n + i) for i in range(lookups // 2)]
    random.shuffle(keys)
    before = _rss_mib()
    cache = JudgeCache(directory)
    assert cache.get(_key(0)) is not None
    opened = _rss_mib()
    times = []
    for k in keys:
        t0 = time.perf_counter()
        cache.get(k)
        times.append(time.perf_counter() - t0)
    times.sort()
    after = _rss_mib()
    print(json.dumps({
        'rss_before_mib': before, 'rss_opened_mib': opened, 'rss_after_mib': after, 'hits': cache.hits,
        'misses': cache.misses, 'p50_us': times[len(times) // 2] * 1e6, 'p99_us': times[int(len(times) * 0.99)] * 1e6,
        'max_us': times[-1] * 1e6,
    }))  # fmt: skip


def judge_run(directory: str, records: int) -> None:
    """Child process: a cold then a warm judge run against the cache in `directory`."""
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    from cache_io import _record, _run

    from sensei_eval.judging.cache import JudgeCache

    rows = [_record(i) for i in range(records)]
    _run(rows[:20], None)  # imports, agent construction
    cold = _run(rows, JudgeCache(directory))
    warm_cache = JudgeCache(directory)
    warm = _run(rows, warm_cache)
    print(json.dumps({'cold_s': cold, 'warm_s': warm, 'warm_hits': warm_cache.hits, 'rss_mib': _rss_mib()}))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == '_probe':
        probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == '_run':
        judge_run(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--entries', type=int, default=1_000_000)
    parser.add_argument('--lookups', type=int, default=20_000)
    parser.add_argument('--records', type=int, default=1000)
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.entries, args.lookups, args.records = 2_000, 500, 50
    with tempfile.TemporaryDirectory(prefix='cache-scale-') as tmp:
        filled = fill(Path(tmp), args.entries)
        size = sum(p.stat().st_size for p in (Path(tmp) / 'judge').iterdir()) / 2**20
        child = [sys.executable, __file__]
        probe_args = ['_probe', tmp, str(args.entries), str(args.lookups)]
        out = subprocess.run([*child, *probe_args], check=True, capture_output=True, text=True)
        p = json.loads(out.stdout.splitlines()[-1])
        out = subprocess.run([*child, '_run', tmp, str(args.records)], check=True, capture_output=True, text=True)
        r = json.loads(out.stdout.splitlines()[-1])
    load = ' '.join(f'{x:.2f}' for x in os.getloadavg())
    print(f'judge cache, {args.entries:,} entries ({size:,.0f} MiB on disk, filled in {filled:.0f} s); load average {load}')
    opened = p['rss_opened_mib'] - p['rss_before_mib']
    print(f'open + first lookup: +{opened:.1f} MiB resident ({p["rss_opened_mib"]:.0f} MiB process; target: < 100 MiB to open)')
    print(f'after {p["hits"] + p["misses"]:,} lookups: {p["rss_after_mib"]:.0f} MiB process')
    print(f'lookup ({p["hits"]:,} hits, {p["misses"]:,} misses): ', end='')
    print(f'p50 {p["p50_us"]:.0f} µs, p99 {p["p99_us"]:.0f} µs, max {p["max_us"]:.0f} µs')
    print(f'judge run, {args.records:,} records x (checks + 1 instant model judge) on this cache:')
    print(f'  cold {r["cold_s"]:.2f} s, warm {r["warm_s"]:.2f} s ({r["warm_hits"]:,} hits); process {r["rss_mib"]:.0f} MiB')


if __name__ == '__main__':
    main()
