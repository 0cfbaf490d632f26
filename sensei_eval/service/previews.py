"""What a list page shows of a session's stored record: bounded previews, cut by the database.

A list (`GET /api/v1/sessions`, the dashboard's `GET /api/v1/dashboard/sessions`) shows one line per session,
but a session's query may be megabytes: 60 sessions of 4.7 MB queries made a 282 MB page and a 1 GB peak. So a
list reads of the record only the first `PREVIEW_CHARS` + 1 characters of the query, of an alert's JSON, of the
rating's JSON and of the prompt version (`substr`, in the database: the rest never reaches Python). A preview
that was cut ends with `…` (`query_truncated` says so in the API); the detail endpoints
(`GET /api/v1/sessions/{id}`, the dashboard's session page) keep the full text.

Each column is one extraction from the stored JSON, and each is selected once: PostgreSQL parses a `json`
value's whole text for every `->`, so a line costs one parse of the record per column it shows.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Text, cast, func
from sqlalchemy.sql.elements import ColumnElement

from sensei_eval.core.records import RATING_DIMENSIONS
from sensei_eval.service.store import SessionRow

__all__ = (
    'PREVIEW_CHARS',
    'alert_line',
    'alert_preview_column',
    'cut',
    'prompt_version_preview_column',
    'query_preview_column',
    'rating_mean',
    'rating_preview_column',
)

# Characters of a query (or an alert, a prompt version) a list line carries: a line of the list shows a
# sentence or two; the detail page has the rest.
PREVIEW_CHARS = 500
# An alert line shows its first few `key=value` pairs.
_ALERT_PAIRS = 4
_ELLIPSIS = '…'


def query_preview_column() -> ColumnElement[Any]:
    """The stored query's first `PREVIEW_CHARS` + 1 characters (one more tells a cut text), or NULL."""
    return func.substr(SessionRow.record['query'].as_string(), 1, PREVIEW_CHARS + 1)


def alert_preview_column() -> ColumnElement[Any]:
    """The stored alert's JSON text, its first `PREVIEW_CHARS` + 1 characters, or NULL."""
    return func.substr(cast(SessionRow.record['alert_data'], Text), 1, PREVIEW_CHARS + 1)


def prompt_version_preview_column() -> ColumnElement[Any]:
    """The stored prompt version's first `PREVIEW_CHARS` + 1 characters, or NULL."""
    return func.substr(SessionRow.record['prompt_version'].as_string(), 1, PREVIEW_CHARS + 1)


def rating_preview_column() -> ColumnElement[Any]:
    """The stored rating's JSON text, its first `PREVIEW_CHARS` characters (its numbers come before its free
    text, as `Rating` writes it), or NULL."""
    return func.substr(cast(SessionRow.record['rating'], Text), 1, PREVIEW_CHARS)


def cut(text: str | None) -> tuple[str, bool]:
    """A preview read with `*_preview_column` as shown: at most `PREVIEW_CHARS` characters, ending with `…`
    when the stored text is longer; and whether it was cut."""
    text = text or ''
    if len(text) <= PREVIEW_CHARS:
        return text, False
    return text[: PREVIEW_CHARS - 1] + _ELLIPSIS, True


def alert_line(preview: str | None) -> str:
    """An alert's list line from its cut JSON text: its first `key=value` pairs (as many as the preview holds
    whole), or the text itself when it is no object."""
    text = (preview or '').strip()
    if not text:
        return ''
    if not text.startswith('{'):
        try:
            return str(json.loads(text))
        except ValueError:
            return cut(text)[0]
    pairs = _leading_pairs(text)
    if pairs:
        return ', '.join(f'{k}={v}' for k, v in pairs)
    return cut(text)[0]


def rating_mean(preview: str | None) -> float | None:
    """The mean of the rating's dimensions (1-5) found whole in its preview, rounded to 2 places; None without."""
    text = (preview or '').strip()
    if not text.startswith('{'):
        return None
    values = dict(_leading_pairs(text, limit=None))
    numbers = [v for d in RATING_DIMENSIONS if isinstance(v := values.get(d), int | float) and not isinstance(v, bool)]
    return round(sum(numbers) / len(numbers), 2) if numbers else None


def _leading_pairs(text: str, limit: int | None = _ALERT_PAIRS) -> list[tuple[str, Any]]:
    """The first `limit` (None: all) whole `"key": value` pairs of a JSON object's text, which may be cut anywhere."""
    decoder = json.JSONDecoder()
    pairs: list[tuple[str, Any]] = []
    pos = 1
    try:
        while limit is None or len(pairs) < limit:
            key, pos = decoder.raw_decode(text, _skip(text, pos))
            pos = _skip(text, pos)
            if text[pos] != ':':
                break
            value, pos = decoder.raw_decode(text, _skip(text, pos + 1))
            pairs.append((str(key), value))
            pos = _skip(text, pos)
            if text[pos] != ',':
                break
            pos += 1
    except (ValueError, IndexError):  # the preview ends inside this pair: it is left out
        pass
    return pairs


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in ' \t\r\n':
        pos += 1
    return pos
