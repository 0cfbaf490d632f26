"""The judge cache's journal: entries visible at once in the process, written off the event loop in
batches (one fsync each), durable at exit without the caller closing anything, a torn last line
skipped with a warning, and the former one-file-per-entry layout still read."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sensei_eval import cache as cache_module
from sensei_eval.cache import JudgeCache
from sensei_eval.reports import JudgeResult, write_json_atomic


def result(n: int, status: str = 'ok') -> JudgeResult:
    return JudgeResult(
        judge='completeness', failure_mode='incomplete_answer', category='answer', criteria_hash='c' * 12,
        model='function:scripted', status=status, score=1.0, passed=True, reasoning=f'reasoning {n}',
    )  # fmt: skip


def key(n: int) -> str:
    return JudgeCache.key('c' * 12, 'function:scripted', {'temperature': 0.0}, f'sha{n}', 1)


def journal_lines(cache: JudgeCache) -> list[str]:
    return cache.journal_path.read_text().splitlines() if cache.journal_path.exists() else []


def test_entries_are_seen_at_once_and_survive_close(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    for n in range(3):
        cache.put(key(n), result(n))
    cache.put(key(9), result(9, status='error'))  # errors are never stored
    # the same run sees them before any write, through this cache and any other of the directory
    assert cache.get(key(1)) is not None and JudgeCache(tmp_path).get(key(2)) is not None
    assert cache.get(key(9)) is None
    cache.close()
    assert [json.loads(line)['key'] for line in journal_lines(cache)] == [key(0), key(1), key(2)]
    fresh = JudgeCache(tmp_path)  # reads the file again
    hit = fresh.get(key(0))
    assert hit is not None and hit.cached and hit.reasoning == 'reasoning 0'
    assert fresh.get(key(5)) is None and (fresh.hits, fresh.misses) == (1, 1)


def test_a_torn_last_line_is_ignored_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with JudgeCache(tmp_path) as cache:
        cache.put(key(0), result(0))
        cache.put(key(1), result(1))
    torn = journal_lines(cache)[1][:70]
    with cache.journal_path.open('a') as f:  # a crash cut the third entry's write short
        f.write(json.dumps({'key': key(2), 'result': result(2).model_dump(mode='json')})[:70])
    assert torn  # (the journal held whole lines before)

    caplog.set_level(logging.WARNING, logger='sensei_eval.cache')
    reader = JudgeCache(tmp_path)
    assert reader.get(key(0)) is not None and reader.get(key(1)) is not None and reader.get(key(2)) is None
    assert [r.getMessage() for r in caplog.records] == [f'{reader.journal_path}:3: torn last line (a write cut short) ignored']

    reader.put(key(3), result(3))  # the next write starts on a fresh line
    reader.close()
    caplog.clear()
    again = JudgeCache(tmp_path)
    assert all(again.get(key(n)) is not None for n in (0, 1, 3))
    assert len(caplog.records) == 1 and ':3: unreadable line' in caplog.records[0].getMessage()
    assert json.loads(journal_lines(again)[3])['key'] == key(3)


def test_a_corrupt_line_in_the_middle_costs_only_that_entry(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / 'judge' / 'journal.jsonl'
    path.parent.mkdir(parents=True)
    good = [json.dumps({'key': key(n), 'result': result(n).model_dump(mode='json')}) for n in range(2)]
    path.write_text(f'{good[0]}\n{{"key": 1}}\nnot json\n{good[1]}\n')
    caplog.set_level(logging.WARNING, logger='sensei_eval.cache')
    cache = JudgeCache(tmp_path)
    assert cache.get(key(0)) is not None and cache.get(key(1)) is not None
    assert [r.getMessage().split(': ')[0] for r in caplog.records] == [f'{path}:2', f'{path}:3']


def test_the_former_one_file_per_entry_layout_is_still_read(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / 'judge' / key(7)[:2] / f'{key(7)}.json', result(7).model_dump_json())
    cache = JudgeCache(tmp_path)
    hit = cache.get(key(7))
    assert hit is not None and hit.reasoning == 'reasoning 7' and hit.cached
    assert cache.get(key(8)) is None


async def test_put_does_not_wait_for_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the disk stuck, puts return, the loop keeps running, and gets see the entries; the write
    happens once the disk is back."""
    disk = threading.Event()
    real_append = cache_module._Journal._append

    def stuck_append(self: cache_module._Journal, lines: list[str]) -> None:
        disk.wait(timeout=30)
        real_append(self, lines)

    monkeypatch.setattr(cache_module._Journal, '_append', stuck_append)
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
        assert journal_lines(cache) == []  # nothing written yet: the writer is the one waiting
    finally:
        disk.set()
        task.cancel()
    await asyncio.to_thread(cache.flush)
    assert len(journal_lines(cache)) == 50
    cache.close()


def test_one_fsync_per_batch_not_per_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(cache_module.os, 'fsync', lambda fd: (synced.append(fd), real_fsync(fd))[1])
    cache = JudgeCache(tmp_path)
    for n in range(200):
        cache.put(key(n), result(n))
    cache.close()
    assert len(journal_lines(cache)) == 200
    assert 1 <= len(synced) <= 4, synced  # a batch or two, plus the new file's directory


WRITER = """
import os, sys
from sensei_eval.cache import JudgeCache
from sensei_eval.reports import JudgeResult
cache = JudgeCache(sys.argv[1])
def put(n):
    fields = dict(judge='j', failure_mode='m', category='c', criteria_hash='h', model='m', status='ok')
    cache.put(f'k{n:04d}', JudgeResult(reasoning=str(n), **fields))
for n in range(20):
    put(n)
if sys.argv[2] == 'crash':
    cache.flush()
    for n in range(20, 40):
        put(n)
    os._exit(0)  # no atexit: what was flushed must be there, the rest may be lost, nothing is corrupt
"""


@pytest.mark.parametrize('ending', ['exit', 'crash'])
def test_exit_flushes_and_a_crash_loses_at_most_the_unflushed_batch(tmp_path: Path, ending: str) -> None:
    subprocess.run([sys.executable, '-c', WRITER, str(tmp_path), ending], check=True, timeout=60)
    cache = JudgeCache(tmp_path)
    keys = [json.loads(line)['key'] for line in journal_lines(cache)]  # every line parses
    assert keys[:20] == [f'k{n:04d}' for n in range(20)]
    if ending == 'exit':
        assert len(keys) == 20  # the caller closed nothing: the exit did
    assert all(cache.get(k) is not None for k in keys)
