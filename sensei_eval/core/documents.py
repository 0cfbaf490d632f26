"""What a dataset file holds, told from its content rather than its name, and its JSON values one by one.

Users hand `--dataset` many shapes: JSONL records (the native format), a JSON array of records (how many
tools save results), one record or one document pretty-printed, OTLP/JSON trace exports (a request a
line, or one pretty-printed request), OpenTelemetry SDK span dumps (`span.to_json()` objects as the
`ConsoleSpanExporter` prints them, one after another, or a `{"spans": [...]}` document), tau-bench and
tau2-bench result files, and Who&When / Magentic-One logs. `detect_format` looks at the first JSON value of
the file (and, for an array or a document, its first element); `iter_json_values` reads a file as a stream
of JSON values whatever their layout (one a line, pretty-printed, concatenated), with the line each starts
on, so a bad value is a located error and the values after it are still read.

Formats (`--format`): `auto` (detect), `jsonl`, `json` (an array of records, or one record), `otlp`,
`spans` (SDK span dumps), `tau-bench`, `who-and-when`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal, get_args

from sensei_eval.core.errors import LoadError, json_error_text
from sensei_eval.core.sanitize import MAX_JSON_DEPTH, json_depth

__all__ = ('DATASET_FORMATS', 'DatasetFormat', 'detect_format', 'iter_elements', 'iter_json_values', 'looks_like_span')

DatasetFormat = Literal['auto', 'jsonl', 'json', 'otlp', 'spans', 'tau-bench', 'who-and-when']
DATASET_FORMATS: tuple[str, ...] = get_args(DatasetFormat)

# How much of a file is read to tell its format: enough for the first record or span of any real file.
_SNIFF_BYTES = 1 << 20


def looks_like_span(value: Any) -> bool:
    """An OpenTelemetry SDK span as `ReadableSpan.to_json()` (or a framework's variant) writes it."""
    if not isinstance(value, dict) or not isinstance(value.get('name'), str):
        return False
    context = value.get('context')
    if isinstance(context, dict) and ('span_id' in context or 'spanId' in context):
        return True
    return ('span_id' in value or 'spanId' in value) and ('trace_id' in value or 'traceId' in value)


def _kind_of(value: Any) -> DatasetFormat | None:
    if isinstance(value, dict):
        if any(k in value for k in ('resourceSpans', 'resource_spans', 'resourceLogs', 'resource_logs')):
            return 'otlp'
        if isinstance(value.get('spans'), list) or looks_like_span(value):
            return 'spans'
        if isinstance(value.get('simulations'), list) or 'traj' in value:
            return 'tau-bench'
        if isinstance(value.get('history'), list) and 'messages' not in value:
            return 'who-and-when'
        return None
    return None


def detect_format(head: bytes) -> DatasetFormat:
    """The format of a file from its first bytes (up to `_SNIFF_BYTES`): see the module docstring.
    Records (a JSON object with `messages`) and anything unrecognised are `jsonl` when the first line is a
    whole JSON value, else `json` (an array or a pretty-printed document)."""
    text = head[:_SNIFF_BYTES].decode('utf-8', 'replace').lstrip('\ufeff').lstrip()
    if not text:
        return 'jsonl'
    first_line = text.split('\n', 1)[0]
    try:
        first: Any = json.loads(first_line)
        whole_line = True
    except RecursionError:
        return 'jsonl'  # a line nested past any limit: the line reader reports it on its line
    except ValueError:
        whole_line = False
        try:
            first, end = json.JSONDecoder().raw_decode(text)
            if '\n' not in text[:end].rstrip():
                return 'jsonl'  # a line with more than one value on it: the line reader reports it
        except RecursionError:
            return 'jsonl'
        except ValueError:
            first = _first_element(text)
            if first is None:
                return 'jsonl'  # not JSON from the start: the line reader reports each bad line
    kind = _kind_of(first)
    if whole_line and isinstance(first, list) and text[len(first_line) :].strip():
        return 'jsonl'  # a line holding an array, and more lines: JSONL with a bad line, not one array
    if kind is None and isinstance(first, list) and first:
        kind = _kind_of(first[0])
        if kind == 'spans' or kind == 'otlp':
            return kind
        if kind is None and isinstance(first[0], dict) and 'task_id' in first[0] and 'traj' in first[0]:
            return 'tau-bench'
        return kind or 'json'
    if kind is not None:
        return kind
    if isinstance(first, list) or not whole_line:
        return 'json'
    return 'jsonl'


def _first_element(text: str) -> Any:
    """The first element of a JSON array too long for the sniffed bytes, or None."""
    if not text.startswith('['):
        return None
    decoder = json.JSONDecoder()
    pos = 1
    while pos < len(text) and text[pos] in ' \t\r\n':
        pos += 1
    try:
        value, _ = decoder.raw_decode(text, pos)
    except (ValueError, RecursionError):
        return None
    return [value]


def iter_json_values(text: str, file: str) -> Iterator[tuple[int, Any]]:
    """(line, value) for each JSON value in `text`, whatever the layout; a value that cannot be read is
    (line, `LoadError`), and reading resumes on the next line. Nesting past `MAX_JSON_DEPTH` is such an error."""
    decoder = json.JSONDecoder()
    pos = 1 if text.startswith('\ufeff') else 0
    size = len(text)
    line, counted = 1, 0
    while True:
        while pos < size and text[pos] in ' \t\r\n':
            pos += 1
        if pos >= size:
            return
        line += text.count('\n', counted, pos)
        counted = pos
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            yield line, LoadError(file, line, None, f'not valid JSON: {json_error_text(e)}')
            pos = _next_line(text, pos)
            continue
        except RecursionError:
            yield line, LoadError(file, line, None, f'JSON nested deeper than {MAX_JSON_DEPTH} levels')
            pos = _next_line(text, pos)
            continue
        except ValueError as e:  # an integer over Python's digit limit
            yield line, LoadError(file, line, None, f'not valid JSON: {e}')
            pos = _next_line(text, pos)
            continue
        _, deep = json_depth(value, MAX_JSON_DEPTH)
        if deep is not None:
            yield line, LoadError(file, line, deep, f'JSON nested deeper than {MAX_JSON_DEPTH} levels')
        else:
            yield line, value
        pos = end


def _next_line(text: str, pos: int) -> int:
    nl = text.find('\n', pos)
    return len(text) if nl < 0 else nl + 1


def iter_elements(text: str, file: str) -> Iterator[tuple[int, Any]]:
    """Like `iter_json_values`, but a top-level JSON array gives its elements, each with the line it
    starts on (a JSON array of records, as many tools save results)."""
    decoder = json.JSONDecoder()
    for line, value in iter_json_values(text, file):
        if not isinstance(value, list):
            yield line, value
            continue
        # the array again, element by element, for each element's line
        start = _line_start(text, line)
        pos = text.find('[', start)
        line_at, counted = line, pos
        pos += 1
        for element in value:
            while pos < len(text) and text[pos] in ' \t\r\n,':
                pos += 1
            line_at += text.count('\n', counted, pos)
            counted = pos
            try:
                _, end = decoder.raw_decode(text, pos)
            except (ValueError, RecursionError):
                end = pos
            yield line_at, element
            pos = end


def _line_start(text: str, line: int) -> int:
    pos = 0
    for _ in range(line - 1):
        pos = text.index('\n', pos) + 1
    return pos
