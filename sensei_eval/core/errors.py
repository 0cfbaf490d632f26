"""The errors sensei-eval raises on purpose, one family: `SenseiError`, and under it what a user can act on —
a config file or flag (`ConfigError`), an input file (`InputError`: a dataset, a report, a label file) or a
judge model call (`ModelCallError`). Each carries where it happened when that is known (file, line,
field), so every command reports it the same way (`describe_error`), and the one formatter of pydantic's
validation errors (`field_path`, `validation_message`) words a bad field the way the user wrote it.

`LoadError` is the located error of one bad dataset line: the readers yield it in the record stream (one bad
line never stops a run), and it is an `InputError` so it can also be raised as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

__all__ = (
    'ConfigError',
    'InputError',
    'LoadError',
    'LoadNotice',
    'ModelCallError',
    'ModelSetupError',
    'ModelUnreachableError',
    'ModelUsageError',
    'RecordFieldError',
    'SenseiError',
    'describe_error',
    'field_path',
    'json_error_text',
    'validation_load_error',
    'validation_message',
)


class SenseiError(Exception):
    """An error of ours, with where it happened when known; `str()` is the one line a user reads."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.field = field

    def where(self) -> str:
        r"""`file:line field \`x\`` as far as known ('' when nothing is)."""
        place = f'{self.file}:{self.line}' if self.file and self.line else (self.file or '')
        field = f'field `{self.field}`' if self.field else ''
        return ' '.join(p for p in (place, field) if p)

    def __str__(self) -> str:
        where = self.where()
        return f'{where}: {self.message}' if where else self.message


class ConfigError(SenseiError, ValueError):
    """A configuration the user gave (a flag, an environment variable, a config file) cannot be used."""


class InputError(SenseiError, ValueError):
    """An input file (dataset, report, labels) is wrong at a known place."""


class ModelCallError(SenseiError, RuntimeError):
    """The judge model cannot be used or a call to it failed for good."""


class ModelSetupError(ModelCallError):
    """The judge model cannot be used; `exit_code` is what the CLI exits with."""

    exit_code = 1


class ModelUsageError(ModelSetupError):
    """The model was named or configured wrongly (no provider prefix, unknown provider, missing or rejected key)."""

    exit_code = 2


class ModelUnreachableError(ModelSetupError):
    """The model's server could not be reached."""


class RecordFieldError(InputError):
    """A record's content is wrong at a known place; `field` is a path like `messages[3].content`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


def describe_error(e: BaseException, *, limit: int = 500) -> str:
    """One line for any error a command, a log or a stored result reports (the one such function): ours as they
    word themselves, a validation error by its field, others with their type; a cause that adds something and
    the notes (`after 3 attempts`, see `models.retry`) follow in brackets, the text cut at `limit` characters."""
    if isinstance(e, SenseiError):
        text = str(e)
    elif isinstance(e, ValidationError):
        text = validation_message(e)
    else:
        body = str(e).strip()
        text = f'{type(e).__name__}: {body}' if body else type(e).__name__
    cause = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    if cause is not None and (why := str(cause).strip()) and why not in text:
        text += f' ({why})'
    notes = ' '.join(getattr(e, '__notes__', ()))
    return text[:limit] + (f' ({notes})' if notes else '')


def field_path(loc: Iterable[int | str]) -> str:
    path = ''
    for item in loc:
        path += f'[{item}]' if isinstance(item, int) else f'.{item}'
    return path


def validation_message(e: ValidationError, *, where: str | None = None) -> str:
    """A pydantic validation error in one line: the first failing field as the user wrote it and why, and
    how many more problems there are (the one formatter every loader uses)."""
    errs = e.errors()
    err = errs[0]
    field = field_path(err['loc']).lstrip('.')
    more = f' (and {len(errs) - 1} more problem(s))' if len(errs) > 1 else ''
    text = f'field `{field}`: {err["msg"]}{more}' if field else f'{err["msg"]}{more}'
    return f'{where}: {text}' if where else text


class LoadError(InputError):
    """One bad line of a dataset: where it is and what is wrong, worded for the person who wrote it."""

    def __init__(self, file: str, line: int, field: str | None, message: str, query_id: str | None = None) -> None:
        super().__init__(message, file=file, line=line, field=field)
        self.query_id = query_id

    def _key(self) -> tuple[Any, ...]:
        return (self.file, self.line, self.field, self.message, self.query_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LoadError) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled whole (a Ray worker or a process pool hands it back): rebuilt from its own arguments
        return (type(self), (self.file, self.line, self.field, self.message, self.query_id))

    def __repr__(self) -> str:
        fields = (self.file, self.line, self.field, self.message, self.query_id)
        return 'LoadError(' + ', '.join(map(repr, fields)) + ')'

    def __str__(self) -> str:
        where = f'{self.file}:{self.line}'
        rid = f' (query_id {self.query_id!r})' if self.query_id else ''
        field = f' field `{self.field}`' if self.field else ''
        return f'{where}{rid}{field}: {self.message}'


class LoadNotice(LoadError):
    """Not an error: input skipped on purpose (a trace that holds no agent run, such as an agent being built).
    Commands print it as information; it does not fail the run."""


def json_error_text(e: json.JSONDecodeError) -> str:
    """A JSON error with its column, read as English: 'Unterminated string starting at column 12'."""
    msg = e.msg.rstrip()
    return f'{msg} column {e.colno}' if msg.endswith(' at') else f'{msg} at column {e.colno}'


def validation_load_error(file: str, lineno: int, e: ValidationError, query_id: str | None = None) -> LoadError:
    """A model's validation error on one dataset line, as a `LoadError` naming the field the way a user
    wrote it (`messages[2].tool_calls[0]`), or the record-level field a `RecordFieldError` names."""
    err = e.errors()[0]
    cause = (err.get('ctx') or {}).get('error')
    field: str | None
    if isinstance(cause, RecordFieldError):
        field, message = cause.field, cause.message
    else:
        field, message = field_path(err['loc']).lstrip('.') or None, err['msg']
    more = f' (and {len(e.errors()) - 1} more problem(s))' if len(e.errors()) > 1 else ''
    return LoadError(file, lineno, field, message + more, query_id)
