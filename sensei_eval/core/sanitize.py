"""Text as it enters: the one place where strings from users' files and requests are made safe.

JSON allows what no later stage can take: a lone UTF-16 surrogate (`"\\ud800"`) decodes to a Python
`str` that every UTF-8 encoder refuses, so the record would load and then crash the renderer, the
report writer or the database; a NUL character is refused by PostgreSQL's `text`. Both are replaced
by U+FFFD where records enter (the loader and the service's ingest route), and every replacement is
returned as a path so the caller can record a warning: the data is changed, never silently.

`MAX_ID_LENGTH` is the one limit for identifiers (query ids, session ids) on every backend.

`loads_limited` is the one way JSON from outside is parsed (dataset lines, OTLP bodies and the JSON held
in span attributes, API bodies): nesting deeper than `MAX_JSON_DEPTH` and NaN/±Infinity are refused with
a `JsonLimitError` that says where (`file:line`, the field path, or the column where the nesting went
too deep), never a `RecursionError` or a crash further down. The depth limit sits far below what every
later stage takes (pydantic's serializer fails near 253 levels, CPython's `json` near 1,000, PostgreSQL's
`jsonb` at 10,000), so a record that loads can always be written back, stored and shown.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sensei_eval.core.errors import InputError

__all__ = (
    'MAX_ID_LENGTH',
    'MAX_JSON_DEPTH',
    'MAX_JSON_VALUES',
    'REPLACEMENT',
    'JsonLimitError',
    'JsonTooDeepError',
    'JsonTooManyValuesError',
    'JsonValueCounter',
    'clean_text',
    'clean_value',
    'json_depth',
    'json_value_bound',
    'loads_limited',
)

# One bound for ids everywhere: PostgreSQL's VARCHAR(255) columns set it, SQLite and file names follow.
MAX_ID_LENGTH = 255
REPLACEMENT = '\ufffd'
# Deepest JSON nesting accepted anywhere. A record needs about 6 levels (messages, tool calls, their
# arguments) and real tool arguments or metadata a dozen more; 64 leaves room for those, while a report
# nests a record's metadata a few levels deeper again and must stay far below pydantic's serializer
# limit (about 253 levels: past it a report cannot be written and the run would crash).
MAX_JSON_DEPTH = 64
# Most JSON values (objects, arrays, keys, scalars; an upper bound counted before parsing) one text may
# hold when a caller asks for the cap. Memory, not size, is what a body of `{}` costs: 1.7 million empty
# objects in a 4.9 MiB body take over 600 MB through parsing, validation and storage. A real session is
# a few thousand values; 250,000 leaves room for long runs and large metadata.
MAX_JSON_VALUES = 250_000

# Paired surrogates never reach a str (json.loads joins them into one code point), so any code point in
# this range is a lone one.
_UNSAFE = re.compile('[\ud800-\udfff\x00]')


def clean_text(text: str) -> tuple[str, int]:
    """The text with lone surrogates and NULs replaced by U+FFFD, and how many were replaced."""
    cleaned, n = _UNSAFE.subn(REPLACEMENT, text)
    return cleaned, n


def clean_value(value: Any, path: str = '') -> tuple[Any, list[str]]:
    """A JSON value (keys too) cleaned throughout; returns it and the paths where text was replaced."""
    changed: list[str] = []
    if isinstance(value, str):
        cleaned, n = clean_text(value)
        return cleaned, ([path or '(value)'] if n else [])
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = key
            if isinstance(key, str):
                new_key, n = clean_text(key)
                if n:
                    changed.append(f'{path}.{new_key}(key)' if path else f'{new_key}(key)')
            sub = f'{path}.{new_key}' if path else str(new_key)
            out[new_key], more = clean_value(item, sub)
            changed.extend(more)
        return out, changed
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            cleaned_item, more = clean_value(item, f'{path}[{i}]')
            items.append(cleaned_item)
            changed.extend(more)
        return items, changed
    return value, changed


class JsonLimitError(InputError):
    """JSON refused although Python's parser may take it: nested too deep, or a non-finite number.

    `file` names the input (`data.jsonl:12`, `POST /v1/traces`, an attribute); `field` the path inside
    the value where the limit was passed (None when the text could not be parsed at all)."""


class JsonTooDeepError(JsonLimitError):
    """JSON nested deeper than the limit (refused before anything recurses over it)."""


class JsonTooManyValuesError(JsonLimitError):
    """JSON holding more values than the cap (refused before it is parsed)."""


# A JSON string once its escaped backslashes and escaped quotes are removed: quote, no quote, quote (no
# backtracking, and never a match started inside a string).
_STRING = re.compile(rb'"[^"]*"')
_CHUNK = 1 << 20


class JsonValueCounter:
    """`json_value_bound` fed a chunk at a time (an inflating gzip body): `count` so far, kept exact across
    chunk boundaries (an open string, an escape), in memory of one chunk. `longest_string` is about the length
    in bytes of the longest string that spanned a chunk boundary (any other string is shorter than its chunk),
    so a body holding one giant string is seen as it inflates. Linear however the text is made or cut: escaped
    backslashes and quotes are removed first (C speed), then strings are blanked; a run of backslashes carries
    only its parity."""

    def __init__(self) -> None:
        self.count = 1
        self.longest_string = 0
        self._in_string = False
        self._open = 0  # bytes of the string still open at the end of the last chunk
        self._carry = b''

    def feed(self, data: bytes) -> int:
        data = self._carry + data
        # never split an escape: an odd run of backslashes at the end waits, one backslash, for the next byte
        run = len(data) - len(data.rstrip(b'\\'))
        self._carry = b'\\' if run % 2 else b''
        if run % 2:
            data = data[:-1]
        if b'\\' in data:  # escaped backslashes, then escaped quotes (left to right, as JSON pairs them): C speed
            data = data.replace(b'\\\\', b'').replace(b'\\"', b'')
        if self._in_string:
            close = data.find(b'"')
            if close < 0:  # the whole chunk is inside the string
                self._open += len(data)
                self.longest_string = max(self.longest_string, self._open)
                return self.count
            self.longest_string = max(self.longest_string, self._open + close)
            data = data[close + 1 :]
            self._in_string = False
        if b'"' in data:
            data = _STRING.sub(b'0', data)
            open_at = data.find(b'"')  # a string the chunk ends inside of
            if open_at >= 0:
                self._open = len(data) - open_at - 1  # after its opening quote
                data = data[:open_at]
                self._in_string = True
        self.count += data.count(b',') + data.count(b':') + data.count(b'[') + data.count(b'{')
        return self.count


def json_value_bound(text: str | bytes, limit: int | None = None) -> int:
    """An upper bound on the values a JSON text holds, without parsing it: every `{`, `[`, `,` and `:`
    outside strings starts a value (C-speed byte counts over the text, a chunk at a time, its strings
    blanked). With `limit`, stops counting once past it."""
    data = text.encode('utf-8', 'surrogatepass') if isinstance(text, str) else text
    counter = JsonValueCounter()
    view = memoryview(data)
    for start in range(0, len(data), _CHUNK):
        counter.feed(bytes(view[start : start + _CHUNK]))
        if limit is not None and counter.count > limit:
            break
    return counter.count


def _no_constant(name: str) -> float:
    # NaN and ±Infinity are not JSON: PostgreSQL refuses them and no JSON response could carry them back.
    raise JsonLimitError(f'{name} is not a JSON number')


def _finite(text: str) -> float:
    value = float(text)
    if value in (float('inf'), float('-inf')):
        raise JsonLimitError(f'number {text[:40]} is out of range')
    return value


def _path(path: str, key: Any) -> str:
    return f'{path}[{key}]' if isinstance(key, int) else (f'{path}.{key}' if path else str(key))


def json_depth(value: Any, max_depth: int | None = None) -> tuple[int, str | None]:
    """How deeply a parsed JSON value nests (a scalar is 0, `[]` is 1), without recursion; with
    `max_depth`, stops at the first container past it and also returns its path (`messages[3].content`,
    cut to its first 8 steps), else None. Only containers are visited, and paths are built only for a
    value found too deep (a second pass), so a normal record costs one cheap walk."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if max_depth is not None and depth > max_depth:
            return depth, _path_to_depth(value, max_depth)
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((v, depth + 1) for v in children if isinstance(v, dict | list))
    return deepest, None


def _path_to_depth(value: Any, max_depth: int) -> str:
    stack: list[tuple[Any, int, str]] = [(value, 1, '')]
    while stack:
        item, depth, path = stack.pop()
        if depth > max_depth:
            return _short(path)
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        stack.extend((v, depth + 1, _path(path, k) if depth <= 8 else path) for k, v in pairs if isinstance(v, dict | list))
    return _short('')


def _short(path: str) -> str:
    return (path + '…') if path else '(top level)'


def _column_too_deep(text: str, max_depth: int) -> int | None:
    """The 1-based column where nesting first passes `max_depth`, scanning brackets outside strings."""
    depth = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        token = m.group()
        if token in '[{':
            depth += 1
            if depth > max_depth:
                return m.start() + 1
        elif token in ']}':
            depth -= 1
    return None


def loads_limited(
    text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, where: str = '', allow_nan: bool = False, max_values: int | None = None
) -> Any:
    """`json.loads`, refusing nesting deeper than `max_depth` (and, unless `allow_nan`, NaN/±Infinity)
    with a `JsonLimitError` located by `where` and the field path, never a `RecursionError`; with
    `max_values`, a text holding more values than that (`json_value_bound`) is a `JsonTooManyValuesError`
    before it is parsed. Malformed JSON is still `json.JSONDecodeError` (a `ValueError`), an integer over
    Python's digit limit a `ValueError`."""
    if max_values is not None and (bound := json_value_bound(text, max_values)) > max_values:
        raise JsonTooManyValuesError(
            f'JSON with more than {max_values:,} values (at least {bound:,} counted), over the limit; send smaller requests',
            file=where or None,
        )
    try:
        value = json.loads(text) if allow_nan else json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except JsonLimitError as e:
        raise JsonLimitError(e.message, file=where or None) from None
    except RecursionError:
        decoded = text.decode('utf-8', 'replace') if isinstance(text, bytes) else text
        column = _column_too_deep(decoded, max_depth)
        at = f' (column {column:,})' if column else ''
        raise JsonTooDeepError(f'JSON nested deeper than {max_depth} levels{at}', file=where or None) from None
    _, field = json_depth(value, max_depth)
    if field is not None:
        raise JsonTooDeepError(f'JSON nested deeper than {max_depth} levels', file=where or None, field=field)
    return value
