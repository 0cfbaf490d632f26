"""On-disk cache of judge results, so a re-run with nothing changed makes zero model calls.

The key is everything that can change a verdict: the judge's criteria hash, the model's name and
settings, the transcript's SHA256 (the transcript, not the raw record: a change the judge can't see
doesn't invalidate), and the repeat index (so `--repeat 3` really asks three times). Only successful
results are stored: an error is retried on the next run, never replayed.

Storage: one append-only journal, `<dir>/judge/journal.jsonl`, a JSON line per entry
(`{"key": ..., "result": {...}}`). One file per entry, fsync'd from the event loop, made a cold-cache
run markedly slower than no cache at all; so now:

* `put` only updates an in-memory index and queues the line: a writer thread appends what has queued
  in one write and one fsync per batch (`FLUSH_INTERVAL_S`), under an `flock` so processes sharing the
  directory never interleave lines. The event loop never waits for the disk;
* `get` sees every entry put earlier in this process — the index is shared by all `JudgeCache`s of one
  directory — and what the journal held when this process first read it;
* a crash loses at most the batch not yet written, and corrupts nothing: a torn last line (the crash
  cut a write short) is skipped with a warning naming the file and line, and the next writer starts on
  a fresh line;
* `flush()` waits until everything put is on disk; `close()` also stops the writer; at exit every
  journal is closed (`atexit`), so callers need do nothing; `with JudgeCache() as cache:` closes too;
* the former layout, one file per entry (`<dir>/judge/<2 hex>/<key>.json`), is still read: a key the
  journal lacks is looked up there.

Default location: `$SENSEI_EVAL_CACHE`, else `~/.cache/sensei-eval`.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import queue
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from .reports import JudgeResult

__all__ = ('FLUSH_INTERVAL_S', 'JudgeCache', 'default_cache_dir')

log = logging.getLogger(__name__)

# The writer gathers entries for this long before one write and one fsync: the most a crash can lose.
FLUSH_INTERVAL_S = 0.2
# A writer thread with nothing to do for this long ends; the next `put` starts another.
_WRITER_IDLE_S = 2.0
JOURNAL_NAME = 'journal.jsonl'


def default_cache_dir() -> Path:
    env = os.environ.get('SENSEI_EVAL_CACHE')
    if env:
        return Path(env)
    return Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'sensei-eval'


class JudgeCache:
    """Judge results by cache key (`key`); `hits` and `misses` count this cache's lookups."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0
        self._journal = _Journal.of(self.directory / 'judge' / JOURNAL_NAME)

    @staticmethod
    def key(criteria_hash: str, model: str, settings: dict[str, Any], transcript_sha256: str, repeat: int) -> str:
        material = json.dumps([criteria_hash, model, settings, transcript_sha256, repeat], sort_keys=True, default=str)
        return hashlib.sha256(material.encode()).hexdigest()

    @property
    def journal_path(self) -> Path:
        return self._journal.path

    def _legacy_path(self, key: str) -> Path:
        return self.directory / 'judge' / key[:2] / f'{key}.json'

    def get(self, key: str) -> JudgeResult | None:
        raw = self._journal.lookup(key)
        try:
            if raw is None:
                raw = self._legacy_path(key).read_text(encoding='utf-8')
            result = JudgeResult.model_validate_json(raw) if isinstance(raw, str) else JudgeResult.model_validate(raw)
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return result.model_copy(update={'cached': True})

    def put(self, key: str, result: JudgeResult) -> None:
        """Remember `result` now; it reaches the disk in the writer's next batch (never on the caller's thread)."""
        if result.status != 'ok':
            return
        text = result.model_dump_json()
        self._journal.add(key, text, f'{{"key":{json.dumps(key)},"result":{text}}}\n')

    def flush(self) -> None:
        """Block until every entry put so far is written and fsync'd (from async code: `asyncio.to_thread`)."""
        self._journal.flush()

    def close(self) -> None:
        """Flush and stop the writer. The cache stays usable: a later `put` starts a new writer."""
        self._journal.close()

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class _Journal:
    """One journal file of this process: the index every `JudgeCache` of the directory shares, and the
    writer thread that appends to the file."""

    _all: ClassVar[dict[Path, _Journal]] = {}
    _all_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, path: Path) -> _Journal:
        key = path.absolute()
        with cls._all_lock:
            journal = cls._all.get(key)
            if journal is None:
                journal = cls._all[key] = cls(key)
            return journal

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, Any] = {}  # key -> result (JSON text when put here, parsed when read)
        self._loaded = False
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[str | threading.Event | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None

    # -- reading ---------------------------------------------------------------------------------------

    def lookup(self, key: str) -> Any:
        with self._lock:
            if not self._loaded:
                self._load()
                self._loaded = True
            return self._entries.get(key)

    def _load(self) -> None:
        """Read the journal (under a shared lock: no writer is mid-line). Bad lines are skipped, each with
        a warning; a last line without its newline is a write a crash cut short."""
        try:
            with self.path.open('rb') as f:
                fcntl.flock(f.fileno(), fcntl.LOCK_SH)
                data = f.read()
        except FileNotFoundError:
            return
        except OSError as e:
            log.warning('judge cache %s unreadable, starting empty: %s', self.path, e)
            return
        lines = data.split(b'\n')
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            torn = number == len(lines)  # after the last newline: no newline of its own
            try:
                entry = json.loads(line)
                if not (isinstance(entry, dict) and isinstance(entry.get('key'), str) and isinstance(entry.get('result'), dict)):
                    raise ValueError('expected {"key": ..., "result": {...}}')
            except ValueError as e:
                what = 'torn last line (a write cut short)' if torn else f'unreadable line ({str(e)[:80]})'
                log.warning('%s:%d: %s ignored', self.path, number, what)
                continue
            self._entries.setdefault(entry['key'], entry['result'])

    # -- writing ---------------------------------------------------------------------------------------

    def add(self, key: str, result_json: str, line: str) -> None:
        with self._lock:
            self._entries[key] = result_json
            self._queue.put(line)
            self._ensure_writer()

    def flush(self) -> None:
        done = threading.Event()
        with self._lock:
            if self._writer is None:
                return  # nothing queued: the writer ends only with an empty queue
            self._queue.put(done)
        done.wait()

    def close(self) -> None:
        """Stop the writer once the queue is written; the next `JudgeCache` of the path reads the file again."""
        with _Journal._all_lock:
            if _Journal._all.get(self.path) is self:
                del _Journal._all[self.path]
        with self._lock:
            writer = self._writer
            if writer is None:
                return
            self._queue.put(None)
        writer.join()

    def _ensure_writer(self) -> None:  # under self._lock
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_loop, name=f'judge-cache-writer:{self.path}', daemon=True)
            self._writer.start()
            _open_journals.add(self)

    def _write_loop(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=_WRITER_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._writer = None
                        _open_journals.discard(self)
                        return
                continue
            batch = [first]
            deadline = time.monotonic() + FLUSH_INTERVAL_S
            while isinstance(batch[-1], str) and (left := deadline - time.monotonic()) > 0:
                try:
                    batch.append(self._queue.get(timeout=left))
                except queue.Empty:
                    break
            while isinstance(batch[-1], threading.Event):  # flush requests: take what queued meanwhile too
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            lines = [item for item in batch if isinstance(item, str)]
            if lines:
                self._append(lines)
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if None in batch:
                with self._lock:
                    if self._queue.empty():
                        self._writer = None
                        _open_journals.discard(self)
                        return

    def _append(self, lines: list[str]) -> None:
        """One write and one fsync for the batch, under an exclusive `flock`. A cache that cannot be
        written is a warning, never a failed run."""
        data = ''.join(lines).encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            log.warning('judge cache %s not written (%d entries): %s', self.path, len(lines), e)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b'\n':
                data = b'\n' + data  # after a torn line: start on a fresh one
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            if size == 0:
                _fsync_dir(self.path.parent)  # a new file: make its name durable too
        except OSError as e:
            log.warning('judge cache %s not written (%d entries): %s', self.path, len(lines), e)
        finally:
            os.close(fd)


_open_journals: set[_Journal] = set()


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@atexit.register
def _close_all() -> None:
    """At exit, what the writers still hold reaches the disk: callers need not close their caches."""
    for journal in list(_open_journals):
        journal.close()
