"""On-disk cache of judge results, so a re-run with nothing changed makes zero model calls.

The key is everything that can change a verdict: the judge's criteria hash, the model's name and
settings, the transcript's SHA256 (the transcript, not the raw record: a change the judge can't see
doesn't invalidate), and the repeat index (so `--repeat 3` really asks three times). Verdicts (`ok`)
and inconclusive answers are stored — an inconclusive answer is what that model says to that prompt,
and a different model or criteria is a different key, so it is judged again; an error is never
stored, so it is retried on the next run.

Storage: one SQLite database, `<dir>/judge/cache.sqlite3` (stdlib `sqlite3`, WAL mode), one row per
entry, looked up by key: opening it reads nothing but the schema, so memory does not grow with the
number of entries.

* opened lazily, on the first `get` or `put`; several processes on one machine may share it (WAL:
  readers never wait for a writer; writers queue on a busy timeout, in short transactions);
* `put` never waits for the disk: the entry is visible at once to every `get` of this process (all
  `JudgeCache`s of one directory share one store) and queued; a writer thread commits what has queued
  in one transaction per batch (`FLUSH_INTERVAL_S`). A crash loses at most the batch not yet
  committed, and corrupts nothing;
* `flush()` waits until everything put is committed; `close()` also stops the writer; at exit every
  store is closed (`atexit`), so callers need do nothing; `with JudgeCache() as cache:` closes too;
* a bad entry (undecodable, stored as binary, not a result, nested too deep) is a miss with one warning
  naming its key, never a crash; the fresh result replaces it. A database that cannot be opened is one
  warning, and the run goes on without a cache. A cache folder (or `judge/`) that is a file, and a
  `cache.sqlite3` that is a folder, are layout problems (`CacheLayoutError`): the warning says what to move;
  `cache stats`, `clear` and `prune` report them as errors, never as an empty cache or a fresh start;
* the former journal (`<dir>/judge/journal.jsonl`) is imported once, line by line, by the first
  process that opens the database, then renamed `journal.jsonl.imported` (delete it at will); its bad
  lines are skipped with a warning each. The older one-file-per-entry layout
  (`<dir>/judge/<2 hex>/<key>.json`) is still read on a miss when such folders exist.

`sensei-eval cache stats|clear|prune --older-than 30d` (`sensei_eval.cli.cache`) manages it.
Default location: `$SENSEI_EVAL_CACHE`, else `~/.cache/sensei-eval`.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from sensei_eval.core.config import default_cache_dir
from sensei_eval.core.errors import InputError
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.sanitize import loads_limited

__all__ = ('DB_NAME', 'FLUSH_INTERVAL_S', 'CacheLayoutError', 'CacheStats', 'CacheUnreadableError', 'JudgeCache')

log = logging.getLogger(__name__)

# The writer gathers entries for this long before one commit: the most a crash can lose.
FLUSH_INTERVAL_S = 0.2
# A writer thread with nothing to do for this long ends; the next `put` starts another.
_WRITER_IDLE_S = 2.0
# How long a statement waits for another process's write lock before giving up (writes happen off the
# event loop, in short transactions, so a wait this long means a stuck peer, not contention).
_BUSY_TIMEOUT_S = 30.0
# Reads run on the caller's thread (often the event loop): they never wait long for a lock.
_READ_BUSY_TIMEOUT_S = 2.0
# Rows per transaction when importing the former journal (bounded memory, short write locks).
_IMPORT_BATCH = 5000
# Bad keys warned about per process: one warning each, and a bound on what that remembers.
_MAX_WARNED = 10_000
DB_NAME = 'cache.sqlite3'
JOURNAL_NAME = 'journal.jsonl'
# Rows are appended in rowid order (full pages) and found through the key's index: keyed by the
# (random) hash itself, a table of ~0.7 KB rows would fill its pages about half.
# Statuses stored: a verdict, or an answer that shows the judge did not judge (never an error).
_CACHED_STATUSES = frozenset({'ok', 'inconclusive'})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_results (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    result TEXT NOT NULL,
    status TEXT NOT NULL,
    model TEXT,
    written_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_judge_results_written_at ON judge_results (written_at);
"""
_INSERT = 'INSERT OR REPLACE INTO judge_results (key, result, status, model, written_at) VALUES (?, ?, ?, ?, ?)'


@dataclass(frozen=True)
class CacheStats:
    """What `sensei-eval cache stats` prints."""

    path: Path
    entries: int
    by_status: dict[str, int]
    bytes_on_disk: int
    oldest: float | None
    newest: float | None
    binary: int = 0  # entries stored as binary, not text (not written by sensei-eval): never read, judged again


class CacheUnreadableError(InputError):
    """The cache database exists but cannot be opened (not SQLite, truncated, unreadable): `cache clear`
    removes it; a run goes on without a cache and warns."""


class CacheLayoutError(CacheUnreadableError):
    """The cache cannot be where it should: its folder (or `judge/`) is a file, or `cache.sqlite3` is a folder.
    Nothing here is ours to delete: the message names the path and what to move; a run goes on without a cache."""


class JudgeCache:
    """Judge results by cache key (`key`); `hits` and `misses` count this cache's lookups."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0
        self._store = _Store.of(self.directory / 'judge' / DB_NAME)

    @staticmethod
    def key(criteria_hash: str, model: str, settings: dict[str, Any], transcript_sha256: str, repeat: int) -> str:
        material = json.dumps([criteria_hash, model, settings, transcript_sha256, repeat], sort_keys=True, default=str)
        return hashlib.sha256(material.encode()).hexdigest()

    @property
    def db_path(self) -> Path:
        return self._store.path

    @property
    def journal_path(self) -> Path:
        """The former journal's path (imported into the database on first open)."""
        return self._store.path.parent / JOURNAL_NAME

    def get(self, key: str) -> JudgeResult | None:
        raw = self._store.lookup(key)
        if raw is None:
            raw = self._store.legacy_lookup(key)
        result = _decode(raw, key) if raw is not None else None
        if result is None:
            self.misses += 1
            return None
        self.hits += 1
        return result.model_copy(update={'cached': True})

    def put(self, key: str, result: JudgeResult) -> None:
        """Remember `result` now; it reaches the disk in the writer's next batch (never on the caller's thread).
        Errors are not stored."""
        if result.status not in _CACHED_STATUSES:
            return
        self._store.add(key, result.model_dump_json(exclude_defaults=True), result.status, result.model)

    def flush(self) -> None:
        """Block until every entry put so far is committed (from async code: `asyncio.to_thread`)."""
        self._store.flush()

    def close(self) -> None:
        """Flush and stop the writer. The cache stays usable: a later call opens it again."""
        self._store.close()

    def stats(self) -> CacheStats:
        """Entries and size; `CacheUnreadableError` when the database exists but cannot be opened (it is
        never reported as an empty cache)."""
        self._raise_if_unreadable()
        return self._store.stats()

    def clear(self) -> int:
        """Delete every entry (and the former journal and per-entry files); returns how many rows went.
        An unreadable database is `CacheUnreadableError`: `remove_unreadable` deletes it."""
        self._raise_if_unreadable()
        return self._store.delete_older_than(None)

    def unreadable(self) -> str | None:
        """Why the cache cannot be used: a layout problem (`layout_problem`), or a database that exists and
        cannot be opened; None otherwise."""
        return self._store.unreadable()

    def layout_problem(self) -> str | None:
        """What is in the way of the cache's own paths (a file where its folder goes, a folder where its
        database goes), with what to do; None when nothing is."""
        return self._store.layout_problem()

    def remove_unreadable(self) -> list[Path]:
        """Delete an unreadable cache database (with its WAL and shared-memory files); the files removed.
        The next run starts a new cache there."""
        return self._store.remove_database() if self._store.unreadable() else []

    def _raise_if_unreadable(self) -> None:
        problem = self._store.layout_problem()
        if problem is not None:
            raise CacheLayoutError(f'judge cache cannot be used: {problem}')
        reason = self._store.unreadable()
        if reason is not None:
            raise CacheUnreadableError(
                f'judge cache {self._store.path} cannot be read ({reason}); `sensei-eval cache clear` removes it'
            )

    def prune(self, older_than_s: float) -> int:
        """Delete entries written more than `older_than_s` seconds ago; returns how many went. A cache that
        cannot be used is `CacheUnreadableError` (never "0 deleted")."""
        self._raise_if_unreadable()
        return self._store.delete_older_than(time.time() - older_than_s)

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _decode(raw: str, key: str) -> JudgeResult | None:
    """The stored result, or None (one warning per key) when it is not one: a miss, never a crash."""
    try:
        result = JudgeResult.model_validate(loads_limited(raw, where=f'judge cache entry {key[:16]}'))
        if result.status not in _CACHED_STATUSES:
            raise ValueError(f'status {result.status!r} is never cached')
        return result
    except (ValueError, RecursionError, MemoryError) as e:  # pydantic's ValidationError is a ValueError
        _warn_once(key, f'judge cache entry {key[:16]}… unreadable, judged again: {" ".join(str(e).split())[:160]}')
        return None


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(key: str, message: str) -> None:
    with _warned_lock:
        if key in _warned or len(_warned) >= _MAX_WARNED:
            return
        _warned.add(key)
    log.warning('%s', message)


class _Store:
    """One cache database of this process: the entries put but not yet committed (shared by every
    `JudgeCache` of the directory), a read connection per thread, and the writer thread."""

    _all: ClassVar[dict[Path, _Store]] = {}
    _all_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, path: Path) -> _Store:
        key = path.absolute()
        with cls._all_lock:
            store = cls._all.get(key)
            if store is None:
                store = cls._all[key] = cls(key)
            return store

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: dict[str, str] = {}  # key -> result JSON, until committed
        self._lock = threading.Lock()
        self._ready = False  # schema made and the former journal imported
        self._broken = False  # the database cannot be opened: no cache this process
        self._broken_reason: str | None = None
        self._local = threading.local()
        self._queue: queue.SimpleQueue[tuple[str, str, str, str | None] | threading.Event | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._legacy: bool | None = None

    # -- connections -----------------------------------------------------------------------------------

    def _connect(self, busy_timeout_s: float) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        conn.execute('PRAGMA synchronous=NORMAL')  # WAL: durable at each checkpoint, never corrupt
        return conn

    def _prepare(self) -> bool:
        """Make the schema and import the former journal, once per process; False if the store is unusable."""
        if self._ready:
            return True
        if self._broken:
            return False
        with self._lock:
            if self._ready or self._broken:
                return self._ready
            problem = self.layout_problem()
            if problem is not None:
                log.warning('judge cache cannot be used, running without it: %s', problem)
                self._broken, self._broken_reason = True, problem
                return False
            try:
                conn = self._connect(_BUSY_TIMEOUT_S)
                try:
                    if conn.execute('PRAGMA journal_mode=WAL').fetchone()[0].lower() != 'wal':
                        log.warning('judge cache %s: WAL mode unavailable, using the default journal', self.path)
                    conn.executescript(_SCHEMA)
                    self._import_journal(conn)
                finally:
                    conn.close()
            except (sqlite3.Error, OSError) as e:
                log.warning(
                    'judge cache %s cannot be used, running without it (`sensei-eval cache clear` removes it): %s', self.path, e
                )
                self._broken = True
                self._broken_reason = str(e) or type(e).__name__
                return False
            self._ready = True
            return True

    def _reader(self) -> sqlite3.Connection | None:
        if not self._prepare():
            return None
        conn: sqlite3.Connection | None = getattr(self._local, 'conn', None)
        if conn is None:
            conn = self._local.conn = self._connect(_READ_BUSY_TIMEOUT_S)
            conn.execute('PRAGMA query_only=ON')
        return conn

    # -- reading ---------------------------------------------------------------------------------------

    def lookup(self, key: str) -> str | None:
        with self._lock:
            pending = self._pending.get(key)
        if pending is not None:
            return pending
        try:
            conn = self._reader()
            if conn is None:
                return None
            row = conn.execute('SELECT result FROM judge_results WHERE key = ?', (key,)).fetchone()
        except (sqlite3.Error, ValueError) as e:  # a locked database, text stored that is not UTF-8
            _warn_once(key, f'judge cache entry {key[:16]}… unreadable, judged again: {e}')
            return None
        if row is not None and not isinstance(row[0], str):
            kind = 'binary (a BLOB)' if isinstance(row[0], bytes) else type(row[0]).__name__
            _warn_once(
                key,
                f'judge cache entry {key[:16]}… in {self.path} is stored as {kind}, not text (not written by sensei-eval): '
                'unreadable, judged again (the fresh result replaces it; `sensei-eval cache clear` removes them all)',
            )
            return None
        return row[0] if row is not None else None

    def legacy_lookup(self, key: str) -> str | None:
        """The one-file-per-entry layout of early versions, read when such folders exist."""
        if self._legacy is None:
            try:
                self._legacy = any(p.is_dir() and len(p.name) == 2 for p in self.path.parent.iterdir())
            except OSError:
                self._legacy = False
        if not self._legacy:
            return None
        try:
            return (self.path.parent / key[:2] / f'{key}.json').read_text(encoding='utf-8')
        except (OSError, UnicodeDecodeError):
            return None

    # -- writing ---------------------------------------------------------------------------------------

    def add(self, key: str, result_json: str, status: str, model: str | None) -> None:
        with self._lock:
            self._pending[key] = result_json
            self._queue.put((key, result_json, status, model))
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, name=f'judge-cache-writer:{self.path}', daemon=True)
                self._writer.start()
                _open_stores.add(self)

    def flush(self) -> None:
        done = threading.Event()
        with self._lock:
            if self._writer is None:
                return  # nothing queued: the writer ends only with an empty queue
            self._queue.put(done)
        done.wait()

    def close(self) -> None:
        """Stop the writer once the queue is committed; close this thread's read connection."""
        with self._lock:
            writer = self._writer
            if writer is not None:
                self._queue.put(None)
        if writer is not None:
            writer.join()
        conn = getattr(self._local, 'conn', None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _write_loop(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                try:
                    first = self._queue.get(timeout=_WRITER_IDLE_S)
                except queue.Empty:
                    with self._lock:
                        if self._queue.empty():
                            self._writer = None
                            _open_stores.discard(self)
                            return
                    continue
                batch = [first]
                deadline = time.monotonic() + FLUSH_INTERVAL_S
                while isinstance(batch[-1], tuple) and (left := deadline - time.monotonic()) > 0:
                    try:
                        batch.append(self._queue.get(timeout=left))
                    except queue.Empty:
                        break
                while isinstance(batch[-1], threading.Event):  # flush requests: take what queued meanwhile too
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                rows = [item for item in batch if isinstance(item, tuple)]
                if rows:
                    if conn is None and self._prepare():
                        conn = self._connect(_BUSY_TIMEOUT_S)
                    self._commit(conn, rows)
                for item in batch:
                    if isinstance(item, threading.Event):
                        item.set()
                if None in batch:
                    with self._lock:
                        if self._queue.empty():
                            self._writer = None
                            _open_stores.discard(self)
                            return
        finally:
            if conn is not None:
                conn.close()

    def _commit(self, conn: sqlite3.Connection | None, rows: list[tuple[str, str, str, str | None]]) -> None:
        """One transaction for the batch. A cache that cannot be written is a warning, never a failed run."""
        if conn is not None:
            now = time.time()
            try:
                conn.execute('BEGIN IMMEDIATE')
                conn.executemany(_INSERT, [(k, r, s, m, now) for k, r, s, m in rows])
                conn.execute('COMMIT')
            except sqlite3.Error as e:
                if conn.in_transaction:
                    conn.execute('ROLLBACK')
                log.warning('judge cache %s not written (%d entries): %s', self.path, len(rows), e)
        with self._lock:  # committed (or lost): gets read the database from now on
            for key, result, _, _ in rows:
                if self._pending.get(key) is result:
                    del self._pending[key]

    def _import_journal(self, conn: sqlite3.Connection) -> None:
        """Import the former journal once (`INSERT OR IGNORE`: what the database has wins), then rename it."""
        journal = self.path.parent / JOURNAL_NAME
        if not journal.exists():
            return
        conn.execute('BEGIN IMMEDIATE')  # one importer at a time; the others find the journal gone
        try:
            if not journal.exists():
                conn.execute('COMMIT')
                return
            imported = 0
            batch: list[tuple[str, str, str, str | None, float]] = []
            now = time.time()
            for key, result in _journal_entries(journal):
                batch.append((key, result['text'], result['status'], result['model'], now))
                if len(batch) >= _IMPORT_BATCH:
                    conn.executemany(_INSERT.replace('OR REPLACE', 'OR IGNORE'), batch)
                    imported += len(batch)
                    batch.clear()
            conn.executemany(_INSERT.replace('OR REPLACE', 'OR IGNORE'), batch)
            imported += len(batch)
            conn.execute('COMMIT')
        except BaseException:
            conn.execute('ROLLBACK')
            raise
        journal.rename(journal.with_name(JOURNAL_NAME + '.imported'))
        log.warning('judge cache: %d entries imported from %s into %s', imported, journal, self.path.name)

    # -- management ------------------------------------------------------------------------------------

    def layout_problem(self) -> str | None:
        judge_dir = self.path.parent
        for folder in (judge_dir, *judge_dir.parents):
            if folder.exists() and not folder.is_dir():
                return (
                    f'{folder} is a file, where the cache needs a folder: move it away, or point --dir / '
                    'SENSEI_EVAL_CACHE at another folder'
                )
        if self.path.exists() and not self.path.is_file():
            kind = 'a folder' if self.path.is_dir() else 'not a regular file'
            return (
                f'{self.path} is {kind}, where the cache database goes: it is not the cache, so it is left alone; '
                'move or remove it, or point --dir / SENSEI_EVAL_CACHE at another folder'
            )
        return None

    def unreadable(self) -> str | None:
        problem = self.layout_problem()
        if problem is not None:
            return problem
        if not self.path.exists() or self._prepare():
            return None
        return self._broken_reason or 'cannot be opened'

    def remove_database(self) -> list[Path]:
        with self._lock:
            removed = []
            for p in [self.path, *self.path.parent.glob(f'{self.path.name}-*')]:
                if p.is_file():
                    p.unlink()
                    removed.append(p)
            self._broken, self._broken_reason, self._ready = False, None, False
            self._local = threading.local()
        return removed

    def stats(self) -> CacheStats:
        self.flush()
        entries, by_status, oldest, newest, binary = 0, {}, None, None, 0
        if self.path.exists() and self._prepare():
            conn = self._connect(_BUSY_TIMEOUT_S)
            try:
                by_status = dict(conn.execute('SELECT status, count(*) FROM judge_results GROUP BY status').fetchall())
                entries = sum(by_status.values())
                oldest, newest = conn.execute('SELECT min(written_at), max(written_at) FROM judge_results').fetchone()
                binary = conn.execute("SELECT count(*) FROM judge_results WHERE typeof(result) != 'text'").fetchone()[0]
            finally:
                conn.close()
        files = list(self.path.parent.glob(f'{DB_NAME}*')) if self.path.parent.exists() else []
        size = sum(p.stat().st_size for p in files if p.is_file())
        return CacheStats(self.path, entries, by_status, size, oldest, newest, binary)

    def delete_older_than(self, before: float | None) -> int:
        """Delete entries written before `before` (None: all of them, plus the former layouts' files)."""
        self.flush()
        with self._lock:
            self._pending.clear()
        if not self.path.exists() or not self._prepare():
            deleted = 0
        else:
            conn = self._connect(_BUSY_TIMEOUT_S)
            try:
                if before is None:
                    deleted = conn.execute('DELETE FROM judge_results').rowcount
                    conn.execute('VACUUM')  # give the space back
                else:
                    deleted = conn.execute('DELETE FROM judge_results WHERE written_at < ?', (before,)).rowcount
                conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')
            finally:
                conn.close()
        if before is None:
            deleted += _remove_former_layouts(self.path.parent)
            self._legacy = False
        return deleted


def _journal_entries(journal: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The former journal's good entries, streamed; a bad line is a warning naming file and line."""
    with journal.open('rb') as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = loads_limited(line, where=f'{journal}:{number}')
                if not (isinstance(entry, dict) and isinstance(entry.get('key'), str) and isinstance(entry.get('result'), dict)):
                    raise ValueError('expected {"key": ..., "result": {...}}')
                result = entry['result']
                status = result.get('status')
                if status not in _CACHED_STATUSES:
                    raise ValueError(f'status {status!r} is never cached')
                text = json.dumps(result, ensure_ascii=False)
            except (ValueError, RecursionError) as e:
                torn = not line.endswith(b'\n')
                what = 'torn last line (a write cut short)' if torn else f'unreadable line ({str(e)[:80]})'
                log.warning('%s:%d: %s ignored', journal, number, what)
                continue
            model = result.get('model')
            yield entry['key'], {'text': text, 'status': status, 'model': model if isinstance(model, str) else None}


def _remove_former_layouts(judge_dir: Path) -> int:
    removed = 0
    if not judge_dir.is_dir():
        return 0
    for child in judge_dir.iterdir():
        if child.is_dir() and len(child.name) == 2:
            for file in child.glob('*.json'):
                file.unlink(missing_ok=True)
                removed += 1
            with contextlib.suppress(OSError):
                child.rmdir()
        elif child.name.startswith(JOURNAL_NAME):
            child.unlink(missing_ok=True)
    return removed


_open_stores: set[_Store] = set()


@atexit.register
def _close_all() -> None:
    """At exit, what the writers still hold reaches the disk: callers need not close their caches."""
    for store in list(_open_stores):
        store.close()
