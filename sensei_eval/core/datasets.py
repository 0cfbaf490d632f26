"""Reading datasets: JSONL files of records, streamed a line at a time, and every other shape users hand in
(told from the content, `core.documents`; or forced with `format`): a JSON array of records or one record,
OTLP/JSON trace exports and OpenTelemetry SDK span dumps (`core.traces`), tau-bench / tau2-bench result files
and Who&When / Magentic-One logs (`core.importers`). `iter_datasets` yields each record, or one `LoadError`
(file, line, field, message) per bad line or run, so one bad line never hides the rest; `load_dataset` /
`load_datasets` collect the same stream into lists for small inputs. `DatasetStream` is what a run reads:
the records of several datasets as the run needs them, `--query-id` filtered, each load error and
notice told as it is met and kept for the summary.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from sensei_eval.core.documents import DatasetFormat, detect_format, iter_elements
from sensei_eval.core.errors import (
    LoadError,
    LoadNotice,
    RecordFieldError,
    describe_error,
    json_error_text,
    validation_load_error,
)
from sensei_eval.core.importers import import_tau_bench, import_who_and_when
from sensei_eval.core.records import MAX_RECORD_BYTES, LoadResult, QueryRecord
from sensei_eval.core.sanitize import MAX_ID_LENGTH, JsonLimitError, clean_value, loads_limited

__all__ = (
    'DatasetStream',
    'dataset_format',
    'dataset_problem',
    'iter_dataset',
    'iter_datasets',
    'load_dataset',
    'load_datasets',
)


def iter_dataset(
    path: str | Path,
    *,
    max_record_bytes: int = MAX_RECORD_BYTES,
    seen: dict[str, int] | None = None,
    format: DatasetFormat = 'auto',
) -> Iterator[QueryRecord | LoadError]:
    """Read a JSONL dataset a line at a time: each good line as a record, each bad one as a `LoadError`.

    Memory stays flat whatever the file size: one line is held at a time, and a line over
    `max_record_bytes` is skipped without being read whole. `seen` (query id -> line) collects the ids
    read so far, for the duplicate check; pass a dict to keep it. Text is made safe here, once: lone
    UTF-16 surrogates and NULs (valid JSON escapes no encoder takes) become U+FFFD and the record's
    `input_warnings` say where; a query_id over `sanitize.MAX_ID_LENGTH` characters is an error on its line."""
    path = Path(path)
    seen = {} if seen is None else seen
    if format == 'auto':
        format = _sniff(path)
    if format in ('otlp', 'spans'):  # agent traces: one record per run
        from sensei_eval.core.traces import iter_traces

        yield from iter_traces(path, seen=seen)
        return
    if format != 'jsonl':
        yield from _iter_document(path, format, max_record_bytes, seen)
        return
    try:
        f = path.open('rb')
    except OSError as e:
        yield LoadError(str(path), 0, None, f'cannot read the dataset: {e.strerror or e}')
        return
    with f:
        lineno = 0
        try:
            for lineno, line in _lines(f, max_record_bytes):
                if isinstance(line, int):
                    yield LoadError(
                        str(path), lineno, None, f'record is {line:,} bytes, over the {max_record_bytes:,}-byte limit'
                    )
                    continue
                if lineno == 1:
                    line = line.removeprefix(b'\xef\xbb\xbf')  # a UTF-8 byte-order mark, as some editors write
                if not line.strip():
                    continue
                record, error = _load_line(str(path), lineno, line, max_record_bytes)
                if error is not None:
                    yield error
                    continue
                assert record is not None
                if record.query_id in seen:
                    yield LoadError(
                        str(path),
                        lineno,
                        'query_id',
                        f'duplicate query_id {record.query_id!r} (first on line {seen[record.query_id]}); this line is skipped',
                        record.query_id,
                    )
                    continue
                seen[record.query_id] = lineno
                yield record
        except OSError as e:
            yield LoadError(str(path), lineno + 1, None, f'cannot read the dataset: {e.strerror or e}')


def dataset_format(path: str | Path, format: DatasetFormat = 'auto') -> DatasetFormat:
    """The format `iter_dataset` reads `path` in: `format`, or when `auto` the one its name or content tells."""
    return _sniff(Path(path)) if format == 'auto' else format


def _sniff(path: Path) -> DatasetFormat:
    """The file's format from its name (`*.otlp.json[l]`) or, failing that, its first bytes."""
    if path.name.lower().endswith(('.otlp.jsonl', '.otlp.json')):
        return 'otlp'
    try:
        with path.open('rb') as f:
            head = f.read(1 << 20)
    except OSError:
        return 'jsonl'  # the line reader reports why the file cannot be read
    return detect_format(head)


def _iter_document(path: Path, format: DatasetFormat, max_bytes: int, seen: dict[str, int]) -> Iterator[QueryRecord | LoadError]:
    """Records from a whole-document file: a JSON array of records, one record, or a named importer's file."""
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        yield LoadError(file, 0, None, f'cannot read the dataset: {e.strerror or e}')
        return
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError as e:
        yield LoadError(file, 0, None, f'not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})')
        return
    values = iter_elements(text, file) if format == 'json' else _whole_values(text, file)
    for line, value in values:
        if isinstance(value, LoadError):
            yield value
            continue
        if format == 'json':
            items: Iterator[tuple[str | None, Any]] = iter([(None, value)])
        else:
            importer = import_tau_bench if format == 'tau-bench' else import_who_and_when
            items = _imported(importer, value, path.stem)
        for where, data in items:
            if isinstance(data, LoadError):
                yield LoadError(file, line, data.field, data.message)
                continue
            record, error = _record_from_data(file, line, data, where)
            if error is not None:
                yield error
                continue
            assert record is not None
            if record.query_id in seen:
                message = f'duplicate query_id {record.query_id!r} (first on line {seen[record.query_id]}); this run is skipped'
                yield LoadError(file, line, 'query_id', message, record.query_id)
                continue
            seen[record.query_id] = line
            yield record


def _whole_values(text: str, file: str) -> Iterator[tuple[int, Any]]:
    from sensei_eval.core.documents import iter_json_values

    yield from iter_json_values(text, file)


def _imported(importer: Any, value: Any, stem: str) -> Iterator[tuple[str | None, Any]]:
    try:
        yield from importer(value, stem)
    except RecordFieldError as e:
        yield None, LoadError('', 0, e.field, e.message)


def _lines(f: BinaryIO, max_bytes: int) -> Iterator[tuple[int, bytes | int]]:
    """(line number, line without its newline), or (line number, size) for a line over `max_bytes`,
    which is skipped in chunks rather than read whole."""
    lineno = 0
    while line := f.readline(max_bytes + 1):
        lineno += 1
        if len(line) > max_bytes and not line.endswith(b'\n'):
            size = len(line)
            while chunk := f.readline(1 << 20):
                size += len(chunk)
                if chunk.endswith(b'\n'):
                    size -= 1
                    break
            yield lineno, size
            continue
        yield lineno, line.removesuffix(b'\n')


def iter_datasets(
    paths: Iterable[str | Path], *, max_record_bytes: int = MAX_RECORD_BYTES, format: DatasetFormat = 'auto'
) -> Iterator[QueryRecord | LoadError]:
    """Several datasets as one stream, in order; a query_id seen in an earlier file is a `LoadError`, not a second record.

    What stays in memory is one entry per query id (for the duplicate checks), never the records."""
    earlier: set[str] = set()
    paths = list(paths)
    for index, path in enumerate(paths):
        seen: dict[str, int] = {}
        for item in iter_dataset(path, max_record_bytes=max_record_bytes, seen=seen, format=format):
            if isinstance(item, QueryRecord) and item.query_id in earlier:
                message = f'query_id {item.query_id!r} already loaded from an earlier dataset; this line is skipped'
                yield LoadError(str(path), seen.get(item.query_id, 0), 'query_id', message, item.query_id)
                continue
            yield item
        if index < len(paths) - 1:  # after the last file nothing reads it: no second table of every id
            earlier.update(seen)


def _collect(items: Iterable[QueryRecord | LoadError], lines: dict[str, int] | None = None) -> LoadResult:
    records: list[QueryRecord] = []
    errors: list[LoadError] = []
    for item in items:
        (records if isinstance(item, QueryRecord) else errors).append(item)  # type: ignore[arg-type]
    return LoadResult(records, errors, {} if lines is None else lines)


def load_dataset(path: str | Path, *, max_record_bytes: int = MAX_RECORD_BYTES) -> LoadResult:
    """Read a JSONL dataset whole: the good records, and one `LoadError` per bad line (`iter_dataset`, collected)."""
    seen: dict[str, int] = {}
    return _collect(iter_dataset(path, max_record_bytes=max_record_bytes, seen=seen), seen)


def load_datasets(paths: Iterable[str | Path], *, max_record_bytes: int = MAX_RECORD_BYTES) -> LoadResult:
    """Several datasets as one; a query_id seen in an earlier file is reported, not overwritten (`iter_datasets`, collected)."""
    return _collect(iter_datasets(paths, max_record_bytes=max_record_bytes))


def _load_line(file: str, lineno: int, line: bytes, max_bytes: int) -> tuple[QueryRecord | None, LoadError | None]:
    if len(line) > max_bytes:
        return None, LoadError(file, lineno, None, f'record is {len(line):,} bytes, over the {max_bytes:,}-byte limit')
    try:
        text = line.decode('utf-8')
    except UnicodeDecodeError as e:
        return None, LoadError(file, lineno, None, f'not valid UTF-8 (byte 0x{line[e.start]:02x} at column {e.start + 1})')
    try:
        # one limit on nesting (sanitize.MAX_JSON_DEPTH): a record deeper than it could not be written back
        data = loads_limited(text, where=f'{file}:{lineno}', allow_nan=True)
    except json.JSONDecodeError as e:
        return None, LoadError(file, lineno, None, f'not valid JSON: {json_error_text(e)}')
    except JsonLimitError as e:
        return None, LoadError(file, lineno, e.field, e.message)
    except ValueError as e:  # valid syntax Python refuses: an integer over its 4,300-digit limit
        return None, LoadError(file, lineno, None, f'not valid JSON: {e}')
    return _record_from_data(file, lineno, data)


def _record_from_data(file: str, lineno: int, data: Any, where: str | None = None) -> tuple[QueryRecord | None, LoadError | None]:
    """A record from one parsed JSON value; `where` locates it inside a document (`[3]`, `simulations[2]`)."""
    if not isinstance(data, dict):
        return None, LoadError(file, lineno, where, f'expected a JSON object, got {type(data).__name__}')
    try:
        # the one place loaded text is made safe: lone surrogates and NULs become U+FFFD, with a warning
        data, replaced = clean_value(data)
    except RecursionError:
        return None, LoadError(file, lineno, None, 'record nested too deeply to read')
    query_id = data.get('query_id') if isinstance(data.get('query_id'), str) else None
    if query_id is not None and len(query_id) > MAX_ID_LENGTH:
        message = f'too long: {len(query_id):,} characters, over the {MAX_ID_LENGTH}-character id limit ({query_id[:40]!r}...)'
        return None, LoadError(file, lineno, 'query_id', message)
    try:
        record = QueryRecord.model_validate(data)
    except ValidationError as e:
        return None, validation_load_error(file, lineno, e, query_id)
    except RecursionError:
        return None, LoadError(file, lineno, None, 'record nested too deeply to read', query_id)
    except Exception as e:  # a shape no parser check foresaw: one bad line must never stop the run
        return None, LoadError(file, lineno, None, f'cannot read the record ({describe_error(e)})', query_id)
    if replaced:
        more = f' and {len(replaced) - 5} more place(s)' if len(replaced) > 5 else ''
        record.input_warnings.append(
            f'line {lineno}: lone UTF-16 surrogate(s) or NUL character(s) replaced by U+FFFD in {", ".join(replaced[:5])}{more}'
        )
    return record, None


# ---------------------------------------------------------------------------------------------------
# A run's records


def dataset_problem(path: Path) -> str | None:
    """Why `path` cannot be read as a dataset (missing, a folder, a FIFO or device), or None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f'no such dataset: {path}'
    except OSError as e:
        return f'cannot read the dataset {path}: {e.strerror or e}'
    if stat.S_ISREG(mode):
        return None
    kind = (
        'a folder'
        if stat.S_ISDIR(mode)
        else 'a FIFO'
        if stat.S_ISFIFO(mode)
        else 'a device'
        if (stat.S_ISCHR(mode) or stat.S_ISBLK(mode))
        else 'a socket'
        if stat.S_ISSOCK(mode)
        else 'not a regular file'
    )
    return f'dataset {path} is {kind}: --dataset takes a JSONL file (or an .otlp.jsonl trace file)'


# What a stream tells as it reads: (kind, subject); kinds: `skipped` (a `LoadNotice`: skipped on purpose,
# information), `bad_record` (a `LoadError`), `input_warnings` (a record that came with input warnings: the
# record), `not_found` (an asked-for query id the datasets do not hold).
StreamNotice = Callable[[str, Any], None]


class DatasetStream:
    """The records to judge, read from `datasets` as the run needs them: a bad line is told (`on_notice`)
    when it is met and kept for the summary (`load_errors`), `wanted` (query ids) filters, and nothing
    else is held."""

    def __init__(
        self,
        datasets: Sequence[Path],
        wanted: Sequence[str] | None = None,
        format: DatasetFormat = 'auto',
        max_record_bytes: int = MAX_RECORD_BYTES,
        on_notice: StreamNotice | None = None,
    ) -> None:
        self.datasets = datasets
        self.format = format
        self.max_record_bytes = max_record_bytes
        self.wanted = list(dict.fromkeys(wanted)) if wanted else None
        self.on_notice = on_notice
        self.loaded = 0
        self.load_errors: list[str] = []
        self._found: set[str] = set()
        self._items = self._records()
        self._head: list[QueryRecord] = []
        self._finished: list[str] | None = None

    def _tell(self, kind: str, subject: Any) -> None:
        if self.on_notice is not None:
            self.on_notice(kind, subject)

    def _records(self) -> Iterator[QueryRecord]:
        for item in iter_datasets(self.datasets, format=self.format, max_record_bytes=self.max_record_bytes):
            if isinstance(item, LoadNotice):  # skipped on purpose (a trace holding no run): information, not a failure
                self._tell('skipped', item)
                continue
            if isinstance(item, LoadError):
                self.load_errors.append(str(item))
                self._tell('bad_record', item)
                continue
            self.loaded += 1
            if item.input_warnings:
                self._tell('input_warnings', item)
            if self.wanted is None or item.query_id in self.wanted:
                self._found.add(item.query_id)
                yield item

    def peek(self) -> QueryRecord | None:
        """The first record to judge (reading up to it), or None when there is none at all."""
        if not self._head:
            self._head = [r for r in [next(self._items, None)] if r is not None]
        return self._head[0] if self._head else None

    def __iter__(self) -> Iterator[QueryRecord]:
        yield from self._head
        self._head = []
        yield from self._items

    def finish(self) -> list[str]:
        """Every load error, the asked-for ids never found last (once the input is read to its end)."""
        if self._finished is None:
            for q in self.wanted or []:
                if q not in self._found:
                    self.load_errors.append(f'query id {q!r} not found in {", ".join(map(str, self.datasets))}')
                    self._tell('not_found', q)
            self._finished = self.load_errors
        return self._finished

    def expected(self, repeat: int) -> int:
        """How many reports the run will write, at most (a line count: what a progress bar counts to)."""
        if self.wanted is not None:
            return len(self.wanted) * repeat
        return repeat * sum(_count_records(p, self.format) for p in self.datasets)

    def why_nothing(self) -> str:
        """Why there is nothing to judge (after `peek` found no record)."""
        names = ', '.join(map(str, self.datasets))
        if self.loaded:
            return f'no record of {names} matches --query-id'
        if self.load_errors:
            return f'no record of {names} could be loaded ({len(self.load_errors)} error(s), listed above)'
        return f'{names} has no records (the file is empty or blank)' if len(self.datasets) == 1 else f'{names} have no records'


def _count_records(path: Path, format: DatasetFormat) -> int:
    """A JSONL file's lines; the records of any other file (a document's lines say nothing of its runs)."""
    if dataset_format(path, format) == 'jsonl':
        return _count_lines(path)
    return sum(1 for item in iter_datasets([path], format=format) if not isinstance(item, LoadError))


def _count_lines(path: Path) -> int:
    lines, last = 0, b'\n'
    try:
        with path.open('rb') as f:
            while chunk := f.read(1 << 20):
                lines += chunk.count(b'\n')
                last = chunk[-1:]
    except OSError:
        return 0
    return lines + (last != b'\n')
