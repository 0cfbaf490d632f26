"""Every log line safe to write: credentials redacted, control characters escaped, one record one line.

A log is read by people and parsed by tools, so two things must never reach it from a record's text:

* **credentials** — a URL's `user:password@`, the values of query parameters named like a secret
  (`?api_key=`, `?token=`, `?sig=` ..., percent-encoded names too), in a whole URL or in a bare path with its
  query (`GET /api/v1/sessions?api_key=…`, as uvicorn's access log writes each request), an
  `Authorization: Bearer …` value, and any secret registered with `register_secret` (the service's token,
  the model's API key). httpx logs every request URL at INFO; a `--base-url` carrying a key would otherwise
  be written in clear on every model call, and a client's `?api_key=` on every request it makes;
* **control characters** — a request path with `%0a` decodes to a line break, and a forged
  `… INFO sensei_eval.service.audit: …` after it would stand in the log as a line of its own. Every C0/C1
  control character but the tab is written escaped (`\\n`, `\\x1b`, `\\u2028` ...), so one record is one line.

`install()` applies both to every record of every logger (httpx, uvicorn and third-party ones included)
through the log-record factory, which runs before any handler or formatter: the message and each string
argument are rewritten, numbers are left as they are (uvicorn's access formatter reads its status code
from the arguments). A traceback's text is left to the formatter.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

__all__ = ('escape_controls', 'install', 'redact_text', 'redact_url', 'register_secret')

# Query parameter names whose values are secrets (`?api-key=`, `?token=`, a signed URL's `sig=`).
_SECRET_PARAM = re.compile(r'(key|token|secret|password|passwd|pwd|sig|signature|auth|credential)', re.IGNORECASE)
_URL = re.compile(r'\b[a-zA-Z][a-zA-Z0-9+.-]{1,15}://[^\s\'"<>`]+')
# One `name=value` of a query string (after `?`, `&` or `;`), wherever it stands: a bare path's query has no
# scheme for `_URL` to find. The name is decoded before it is matched (`api%5Fkey` is `api_key`).
_QUERY_PARAM = re.compile(r'(?<=[?&;])([^=&;\s"\'<>#?]+)=([^&;\s"\'<>#]*)')
_BEARER = re.compile(r'\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=:-]{4,}', re.IGNORECASE)
# Every C0 and C1 control character but the tab, DEL, and the Unicode line/paragraph separators.
_CONTROLS = re.compile('[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u0085]')
_ESCAPES = {'\n': '\\n', '\r': '\\r'}
_MASK = '***'
# Registered secrets shorter than this are not replaced (a one-letter "secret" would mask every word).
_MIN_SECRET = 6

_secrets: set[str] = set()
_lock = threading.Lock()
_installed = False


def register_secret(secret: str | None) -> None:
    """Replace this exact text by `***` in every log line from now on (the service's token, an API key)."""
    if secret and len(secret.strip()) >= _MIN_SECRET:
        with _lock:
            _secrets.add(secret.strip())


def redact_url(url: str) -> str:
    """`url` safe to show, store or log: the password in `user:password@` becomes `***` (a user alone is kept;
    a token given as the user, `https://TOKEN@host`, becomes `***` too), and so do the values of query
    parameters named like a secret (`?api_key=...`). Anything unparsable is returned as `***`."""
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return _MASK
    netloc = parts.netloc
    if '@' in netloc:
        userinfo, _, hostport = netloc.rpartition('@')
        user, colon, _password = userinfo.partition(':')
        netloc = f'{user}:{_MASK}@{hostport}' if colon else f'{_MASK}@{hostport}'
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_PARAM.search(k) for k, _ in pairs):
            query = urlencode([(k, _MASK if _SECRET_PARAM.search(k) else v) for k, v in pairs], safe='*')
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_url(match: re.Match[str]) -> str:
    return redact_url(match.group(0))


def _redact_param(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    if value and value != _MASK and _SECRET_PARAM.search(unquote_plus(name)):
        return f'{name}={_MASK}'
    return match.group(0)


def redact_text(text: str) -> str:
    """`text` with credentials in URLs, `Bearer` values and registered secrets replaced by `***`."""
    if '://' in text:
        text = _URL.sub(_redact_url, text)
    if '=' in text:
        text = _QUERY_PARAM.sub(_redact_param, text)
    text = _BEARER.sub(lambda m: f'{m.group(1)} {_MASK}', text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, _MASK)
    return text


def escape_controls(text: str) -> str:
    """`text` on one line: control characters (not the tab) written as escapes."""
    return _CONTROLS.sub(
        lambda m: _ESCAPES.get(m.group(), f'\\x{ord(m.group()):02x}' if ord(m.group()) < 0x100 else f'\\u{ord(m.group()):04x}'),
        text,
    )


def _safe(value: Any) -> Any:
    if isinstance(value, bool | int | float) or value is None:
        return value
    return escape_controls(redact_text(value if isinstance(value, str) else str(value)))


def install() -> None:
    """Make every log record of this process safe (see the module docstring); idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            record.msg = _safe(record.msg) if isinstance(record.msg, str) else _safe(str(record.msg))
            if isinstance(record.args, tuple):
                record.args = tuple(_safe(a) for a in record.args)
            elif isinstance(record.args, dict):
                record.args = {k: _safe(v) for k, v in record.args.items()}
        except Exception:  # a record must never fail to be made; the formatter shows what it can
            pass
        return record

    logging.setLogRecordFactory(factory)
