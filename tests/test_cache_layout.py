"""Cache reporting never calls a broken cache empty or fresh: each problem is an error naming the path and what
to do, with a non-zero exit, and a run goes on without the cache, saying why.

Reproduced as reported: a cache folder that is a file made `cache stats` print "entries: 0" and exit 0; a
`cache.sqlite3` that is a folder made `cache clear` claim a fresh start while the cache stayed broken; entries
stored as binary were judged again on every run without a word.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sensei_eval.core.reports import JudgeResult
from sensei_eval.judging import cache as cache_module
from sensei_eval.judging.cache import CacheLayoutError, JudgeCache

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-m', 'sensei_eval', 'cache', *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def _result(n: int) -> JudgeResult:
    return JudgeResult(
        judge='completeness', failure_mode='incomplete_answer', category='answer', criteria_hash='c' * 12,
        model='m', status='ok', score=1.0, passed=True, reasoning=f'reasoning {n}',
    )  # fmt: skip


def test_a_cache_folder_that_is_a_file_is_an_error_for_every_command(tmp_path: Path) -> None:
    folder = tmp_path / 'cache'
    folder.write_text('not a folder')
    for command in (['stats'], ['clear'], ['prune', '--older-than', '1d']):
        done = _cli(*command, '--dir', str(folder))
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert f'{folder} is a file' in done.stderr and 'move it away' in done.stderr, done.stderr
        assert 'entries' not in done.stdout and 'new cache' not in done.stdout and 'deleted' not in done.stdout
    assert folder.read_text() == 'not a folder'  # nothing of the user's was touched


def test_a_judge_folder_that_is_a_file_is_named_too(tmp_path: Path) -> None:
    (tmp_path / 'judge').write_text('x')
    done = _cli('stats', '--dir', str(tmp_path))
    assert done.returncode == 1 and f'{tmp_path / "judge"} is a file' in done.stderr


def test_a_database_path_that_is_a_folder_is_never_cleared_as_a_fresh_start(tmp_path: Path) -> None:
    db = tmp_path / 'judge' / cache_module.DB_NAME
    (db / 'inside').mkdir(parents=True)
    stats = _cli('stats', '--dir', str(tmp_path))
    clear = _cli('clear', '--dir', str(tmp_path))
    assert stats.returncode == 1 and f'{db} is a folder' in stats.stderr, stats.stderr
    assert clear.returncode == 1 and f'{db} is a folder' in clear.stderr and 'new cache' not in clear.stdout, clear.stdout
    assert (db / 'inside').is_dir()  # left alone: it is not the cache


def test_a_run_goes_on_without_the_cache_and_says_what_to_move(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / 'judge').mkdir()
    (tmp_path / 'judge' / cache_module.DB_NAME).mkdir()
    caplog.set_level(logging.WARNING, logger='sensei_eval.judging.cache')
    cache = JudgeCache(tmp_path)
    assert cache.get('k') is None
    cache.put('k', _result(0))
    cache.close()
    assert any('is a folder, where the cache database goes' in r.getMessage() for r in caplog.records)
    with pytest.raises(CacheLayoutError):
        cache.stats()


def test_entries_stored_as_binary_are_warned_about_and_reported_by_stats(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with JudgeCache(tmp_path) as cache:
        cache.put('good', _result(0))
    text = _result(1).model_dump_json()
    with sqlite3.connect(cache.db_path) as conn:
        conn.executemany(cache_module._INSERT, [(f'blob{n}', text.encode(), 'ok', 'm', 0.0) for n in range(3)])
    caplog.set_level(logging.WARNING, logger='sensei_eval.judging.cache')
    reader = JudgeCache(tmp_path)
    assert reader.get('good') is not None and reader.get('blob0') is None
    reader.put('blob0', _result(2))  # the fresh result replaces it
    reader.close()
    assert any('stored as binary (a BLOB), not text' in r.getMessage() for r in caplog.records)
    assert JudgeCache(tmp_path).get('blob0') is not None
    stats = _cli('stats', '--dir', str(tmp_path))
    assert stats.returncode == 1 and 'entries:  4 (4 ok)' in stats.stdout, stats.stdout
    assert f'2 entries in {cache.db_path} are stored as binary' in stats.stderr and 'cache clear' in stats.stderr
    clear = _cli('clear', '--dir', str(tmp_path))
    assert clear.returncode == 0 and '4 entries deleted' in clear.stdout
    assert _cli('stats', '--dir', str(tmp_path)).returncode == 0
