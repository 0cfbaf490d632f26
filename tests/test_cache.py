"""The judge cache (SQLite, WAL): entries visible at once in the process, committed off the event loop
in batches, durable at exit without the caller closing anything, shared by processes, inconclusive
answers kept and errors not, a bad entry a miss with one warning, the former journal imported once,
and `sensei-eval cache stats|clear|prune`."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sensei_eval.cli.app import app as main_app
from sensei_eval.cli.cache import parse_duration
from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.reports import JudgeResult
from sensei_eval.judging import cache as cache_module
from sensei_eval.judging.cache import JudgeCache

Row = tuple[str, str, str, str | None]


def result(n: int, status: str = 'ok', model: str = 'function:scripted') -> JudgeResult:
    return JudgeResult(
        judge='completeness', failure_mode='incomplete_answer', category='answer', criteria_hash='c' * 12,
        model=model, status=status, score=1.0 if status == 'ok' else None, passed=True if status == 'ok' else None,
        reasoning=f'reasoning {n}', error='copied from the schema' if status == 'inconclusive' else None,
    )  # fmt: skip


def key(n: int, model: str = 'function:scripted') -> str:
    return JudgeCache.key('c' * 12, model, {'temperature': 0.0}, f'sha{n}', 1)


def rows(cache: JudgeCache) -> dict[str, str]:
    if not cache.db_path.exists():
        return {}
    with sqlite3.connect(cache.db_path) as conn:
        return dict(conn.execute('SELECT key, status FROM judge_results').fetchall())


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    cache_module._warned.clear()


def test_entries_are_seen_at_once_and_survive_close(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    for n in range(3):
        cache.put(key(n), result(n))
    cache.put(key(9), result(9, status='error'))  # errors are never stored
    # the same run sees them before any write, through this cache and any other of the directory
    assert cache.get(key(1)) is not None and JudgeCache(tmp_path).get(key(2)) is not None
    assert cache.get(key(9)) is None
    cache.close()
    assert rows(cache) == {key(n): 'ok' for n in range(3)}
    fresh = JudgeCache(tmp_path)
    hit = fresh.get(key(0))
    assert hit is not None and hit.cached and hit.reasoning == 'reasoning 0'
    assert fresh.get(key(5)) is None and (fresh.hits, fresh.misses) == (1, 1)


def test_inconclusive_answers_are_cached_per_model(tmp_path: Path) -> None:
    with JudgeCache(tmp_path) as cache:
        cache.put(key(0), result(0, status='inconclusive'))
    again = JudgeCache(tmp_path)
    hit = again.get(key(0))
    assert hit is not None and hit.status == 'inconclusive' and hit.error == 'copied from the schema' and hit.cached
    assert again.get(key(0, model='openai:other')) is None  # another model judges again


def test_pending_entries_are_dropped_from_memory_once_committed(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    for n in range(100):
        cache.put(key(n), result(n))
    cache.flush()
    assert cache._store._pending == {}  # memory does not grow with the entries written
    assert all(cache.get(key(n)) is not None for n in range(100))
    cache.close()


def test_a_bad_entry_is_a_miss_with_one_warning_and_the_fresh_result_replaces_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with JudgeCache(tmp_path) as cache:
        cache.put(key(0), result(0))
    deep = '[' * 100_000 + ']' * 100_000
    bad = {key(1): 'not json', key(2): '{"judge": 1}', key(3): deep, key(4): json.dumps({'a': json.loads('[' * 500 + ']' * 500)})}
    with sqlite3.connect(cache.db_path) as conn:
        conn.executemany(cache_module._INSERT, [(k, v, 'ok', 'm', 0.0) for k, v in bad.items()])
        conn.execute(
            "INSERT INTO judge_results (key, result, status, model, written_at) VALUES (?, CAST(x'fffe' AS TEXT), 'ok', 'm', 0)",
            (key(5),),
        )
    caplog.set_level(logging.WARNING, logger='sensei_eval.judging.cache')
    reader = JudgeCache(tmp_path)
    for _ in range(6):  # six judges asking for the same entries: still one warning each
        assert reader.get(key(0)) is not None
        assert all(reader.get(key(n)) is None for n in range(1, 6))
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 5 and all('unreadable, judged again' in m for m in warned), warned
    reader.put(key(3), result(3))
    reader.close()
    assert JudgeCache(tmp_path).get(key(3)) is not None


def test_a_database_that_is_not_one_runs_without_a_cache(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / 'judge' / cache_module.DB_NAME
    path.parent.mkdir(parents=True)
    path.write_bytes(b'this is not a database' * 100)
    caplog.set_level(logging.WARNING, logger='sensei_eval.judging.cache')
    cache = JudgeCache(tmp_path)
    assert cache.get(key(0)) is None
    cache.put(key(0), result(0))
    cache.close()  # no crash: a warning, and the run goes on
    assert any('cannot be used' in r.getMessage() for r in caplog.records)


def test_the_former_journal_is_imported_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    journal = tmp_path / 'judge' / 'journal.jsonl'
    journal.parent.mkdir(parents=True)
    good = [json.dumps({'key': key(n), 'result': result(n).model_dump(mode='json')}) for n in range(3)]
    torn = good[2][:70]
    journal.write_text(f'{good[0]}\n{{"key": 1}}\nnot json\n{good[1]}\n{torn}')
    caplog.set_level(logging.WARNING, logger='sensei_eval.judging.cache')
    cache = JudgeCache(tmp_path)
    assert cache.get(key(0)) is not None and cache.get(key(1)) is not None and cache.get(key(2)) is None
    messages = [r.getMessage() for r in caplog.records]
    assert [m.split(': ')[0] for m in messages[:3]] == [f'{journal}:2', f'{journal}:3', f'{journal}:5']
    assert 'torn last line' in messages[2] and '2 entries imported' in messages[3]
    assert not journal.exists() and journal.with_name('journal.jsonl.imported').exists()


def test_the_former_one_file_per_entry_layout_is_still_read(tmp_path: Path) -> None:
    write_text_atomic(tmp_path / 'judge' / key(7)[:2] / f'{key(7)}.json', result(7).model_dump_json())
    cache = JudgeCache(tmp_path)
    hit = cache.get(key(7))
    assert hit is not None and hit.reasoning == 'reasoning 7' and hit.cached
    assert cache.get(key(8)) is None


async def test_put_does_not_wait_for_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the disk stuck, puts return, the loop keeps running, and gets see the entries; the write
    happens once the disk is back."""
    disk = threading.Event()
    real_commit = cache_module._Store._commit

    def stuck_commit(self: cache_module._Store, conn: sqlite3.Connection | None, batch: list[Row]) -> None:
        disk.wait(timeout=30)
        real_commit(self, conn, batch)

    monkeypatch.setattr(cache_module._Store, '_commit', stuck_commit)
    cache = JudgeCache(tmp_path)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        for n in range(50):
            cache.put(key(n), result(n))
            await asyncio.sleep(0)
        assert ticks >= 50  # the loop ran between puts
        assert all(cache.get(key(n)) is not None for n in range(50))
        assert rows(cache) == {}  # nothing written yet: the writer is the one waiting
    finally:
        disk.set()
        task.cancel()
    await asyncio.to_thread(cache.flush)
    assert len(rows(cache)) == 50
    cache.close()


def test_one_transaction_per_batch_not_per_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[int] = []
    real_commit = cache_module._Store._commit

    def counting(self: cache_module._Store, conn: sqlite3.Connection | None, batch: list[Row]) -> None:
        batches.append(len(batch))
        real_commit(self, conn, batch)

    monkeypatch.setattr(cache_module._Store, '_commit', counting)
    cache = JudgeCache(tmp_path)
    for n in range(200):
        cache.put(key(n), result(n))
    cache.close()
    assert len(rows(cache)) == 200
    assert 1 <= len(batches) <= 3 and sum(batches) == 200, batches


WRITER = """
import os, sys
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.core.reports import JudgeResult
cache = JudgeCache(sys.argv[1])
def put(n):
    fields = dict(judge='j', failure_mode='m', category='c', criteria_hash='h', model='m', status='ok')
    cache.put(f'{sys.argv[3]}{n:04d}', JudgeResult(reasoning=str(n), **fields))
for n in range(20):
    put(n)
if sys.argv[2] == 'crash':
    cache.flush()
    for n in range(20, 40):
        put(n)
    os._exit(0)  # no atexit: what was flushed must be there, the rest may be lost, nothing is corrupt
if sys.argv[2] == 'many':
    for n in range(20, 500):
        put(n)
"""


@pytest.mark.parametrize('ending', ['exit', 'crash'])
def test_exit_flushes_and_a_crash_loses_at_most_the_unflushed_batch(tmp_path: Path, ending: str) -> None:
    subprocess.run([sys.executable, '-c', WRITER, str(tmp_path), ending, 'k'], check=True, timeout=60)
    cache = JudgeCache(tmp_path)
    keys = sorted(rows(cache))
    assert keys[:20] == [f'k{n:04d}' for n in range(20)]
    if ending == 'exit':
        assert len(keys) == 20  # the caller closed nothing: the exit did
    assert all(cache.get(k) is not None for k in keys)


def test_several_processes_write_one_cache(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, '-c', WRITER, str(tmp_path), 'many', f'p{i}-']) for i in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    cache = JudgeCache(tmp_path)
    assert len(rows(cache)) == 1500
    assert all(cache.get(f'p{i}-{n:04d}') is not None for i in range(3) for n in (0, 250, 499))


def test_cache_command_stats_prune_clear(tmp_path: Path) -> None:
    with JudgeCache(tmp_path) as cache:
        for n in range(4):
            cache.put(key(n), result(n, status='inconclusive' if n == 3 else 'ok'))
    with sqlite3.connect(cache.db_path) as conn:  # two entries written ten days ago
        conn.execute('UPDATE judge_results SET written_at = ? WHERE key IN (?, ?)', (time.time() - 10 * 86400, key(0), key(1)))
    runner = CliRunner()
    out = runner.invoke(main_app, ['cache', 'stats', '--dir', str(tmp_path)])
    assert out.exit_code == 0 and 'entries:  4 (1 inconclusive, 3 ok)' in out.output, out.output
    out = runner.invoke(main_app, ['cache', 'prune', '--older-than', '7d', '--dir', str(tmp_path)])
    assert out.exit_code == 0 and '2 entries older than 7d deleted' in out.output, out.output
    assert sorted(rows(cache)) == sorted([key(2), key(3)])
    out = runner.invoke(main_app, ['cache', 'prune', '--older-than', 'soon', '--dir', str(tmp_path)])
    assert out.exit_code == 2
    out = runner.invoke(main_app, ['cache', 'clear', '--dir', str(tmp_path)])
    assert out.exit_code == 0 and '2 entries deleted' in out.output
    assert rows(cache) == {} and JudgeCache(tmp_path).get(key(2)) is None


def test_durations() -> None:
    assert [parse_duration(d) for d in ('45s', '90m', '12h', '30d', '2w', '1.5d')] == [45, 5400, 43200, 2592000, 1209600, 129600]
    with pytest.raises(ValueError):
        parse_duration('30')
