"""Text as it enters: the one place where strings from users' files and requests are made safe.

JSON allows what no later stage can take: a lone UTF-16 surrogate (`"\\ud800"`) decodes to a Python
`str` that every UTF-8 encoder refuses, so the record would load and then crash the renderer, the
report writer or the database; a NUL character is refused by PostgreSQL's `text`. Both are replaced
by U+FFFD where records enter (the loader and the service's ingest route), and every replacement is
returned as a path so the caller can record a warning: the data is changed, never silently.

`MAX_ID_LENGTH` is the one limit for identifiers (query ids, session ids) on every backend.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ('MAX_ID_LENGTH', 'REPLACEMENT', 'clean_text', 'clean_value')

# One bound for ids everywhere: PostgreSQL's VARCHAR(255) columns set it, SQLite and file names follow.
MAX_ID_LENGTH = 255
REPLACEMENT = '\ufffd'

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
