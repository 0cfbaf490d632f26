"""What one request body may cost, measured before it is parsed into Python objects, and where it is parsed.

A body's size says little about what reading it costs: 3.6 MiB of `1,1,1,…` are 1.9 million JSON values,
95 KiB of gzip inflate to 100 MiB of one string, 5 MiB of protobuf hold 2.6 million empty messages. So a
write's body is measured first, by scans that build nothing, and refused with 413 (naming what was over
which limit) past any of:

* **values** — JSON: every `{`, `[`, `,` and `:` outside strings (`sanitize.JsonValueCounter`: an upper
  bound, counted at C speed and linear in the text however it is made); protobuf: every field, walked on
  the wire through the message's descriptor (`count_protobuf_fields`; only for a body big enough to hold
  more fields than the cap, as a field takes at least two bytes);
* **string bytes** — the longest JSON string is at most `max_string_bytes` (the body limit: an inflated
  body carries no longer a string than a plain one could);
* **decompressed bytes** — a gzip body is inflated a chunk at a time, each chunk measured (bytes, values,
  strings) before the next is made, up to `max_inflated_bytes`;
* **CPU time** — this thread's CPU time across the measuring and the parsing after it, checked between
  chunks and steps, up to `cpu_s`.

Nesting needs no scan: the parser stops at once past its recursion limit and `sanitize.loads_limited`
refuses what nests deeper than `MAX_JSON_DEPTH` (422).

`Parsing` runs the work: a body of at most `INLINE_BYTES` on the event loop (cheaper than a thread hop), any
other in a worker thread, at most `ServiceSettings.parse_concurrency` at once (the others wait, off the
loop). So the loop keeps answering health checks and other clients while a costly body is read, and memory
holds at most that many parses.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sensei_eval.core.errors import InputError
from sensei_eval.core.sanitize import JsonValueCounter
from sensei_eval.service.config import ServiceSettings

__all__ = (
    'INLINE_BYTES',
    'BodyBudget',
    'BodyMeter',
    'BodyRefusedError',
    'Parsing',
    'count_protobuf_fields',
    'inflate_gzip',
)

# Bodies up to this size are measured and parsed on the event loop: under a millisecond or two, less than
# handing them to a thread. Anything larger, and every gzip body (its size says nothing), goes to a thread.
INLINE_BYTES = 64 * 1024
# Bytes inflated, and measured, at a time.
_CHUNK = 1 << 20
# Protobuf fields walked between two looks at the CPU clock.
_FIELDS_PER_CHECK = 1 << 16

T = TypeVar('T')


class BodyRefusedError(InputError):
    """A body refused before it was parsed: `status` is the HTTP answer (413 over a budget, 400 unreadable)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class BodyBudget:
    """The limits one request body is measured against (see the module docstring)."""

    max_values: int
    max_string_bytes: int
    max_inflated_bytes: int
    cpu_s: float

    @classmethod
    def of(cls, settings: ServiceSettings, *, otlp: bool = False) -> BodyBudget:
        """The service's budget for a body: OTLP traces (`otlp`) get their own value cap."""
        return cls(
            max_values=settings.otlp_max_values if otlp else settings.max_json_values,
            max_string_bytes=settings.max_body_bytes,
            max_inflated_bytes=settings.inflated_limit,
            cpu_s=settings.parse_cpu_s,
        )

    def meter(self, *, json: bool = True) -> BodyMeter:
        """A meter for one body, its CPU clock started now (in the thread that will do the work)."""
        return BodyMeter(self, json)


@dataclass
class BodyMeter:
    """One body measured as it comes, a chunk at a time; `BodyRefusedError` at the first limit passed."""

    budget: BodyBudget
    json: bool
    size: int = 0
    _values: JsonValueCounter = field(default_factory=JsonValueCounter)
    _cpu_start: float = field(default_factory=time.thread_time)

    @property
    def values(self) -> int:
        return self._values.count

    def feed(self, chunk: bytes, *, inflated: bool = False) -> None:
        """Measure the next chunk of the (inflated, when `inflated`) body."""
        self.size += len(chunk)
        if inflated and self.size > self.budget.max_inflated_bytes:
            raise BodyRefusedError(413, f'the request inflates to more than {self.budget.max_inflated_bytes:,} bytes')
        if self.json:
            count = self._values.feed(chunk)
            if count > self.budget.max_values:
                raise BodyRefusedError(
                    413,
                    f'JSON with more than {self.budget.max_values:,} values (at least {count:,} counted), over the limit',
                )
            if self._values.longest_string > self.budget.max_string_bytes:
                raise BodyRefusedError(413, f'a JSON string of more than {self.budget.max_string_bytes:,} bytes, over the limit')
        self.check_cpu()

    def measure(self, body: bytes) -> None:
        """Measure a whole (plain) body."""
        view = memoryview(body)
        for start in range(0, len(body), _CHUNK):
            self.feed(bytes(view[start : start + _CHUNK]))

    def check_cpu(self, step: str = 'reading') -> None:
        """Refuse once this thread has spent more than the budget's CPU seconds on the body."""
        spent = time.thread_time() - self._cpu_start
        if spent > self.budget.cpu_s:
            raise BodyRefusedError(413, f'{step} the request took more than {self.budget.cpu_s:g} s of CPU time')


def inflate_gzip(body: bytes, meter: BodyMeter) -> bytes:
    """A gzip body inflated a chunk at a time, each chunk measured by `meter` before the next is made (so a
    small body that would inflate without end, or to one giant string, is refused at that chunk); 400 when
    it is not gzip."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    parts: list[bytes] = []
    pending = body
    try:
        while True:
            chunk = inflater.decompress(pending, _CHUNK)
            pending = inflater.unconsumed_tail
            meter.feed(chunk, inflated=True)
            parts.append(chunk)
            if not pending and (not chunk or inflater.eof):
                break
    except zlib.error as e:
        raise BodyRefusedError(400, f'not valid gzip: {e}') from None
    return b''.join(parts)


def count_protobuf_fields(body: bytes, descriptor: Any, meter: BodyMeter) -> int:
    """How many fields (scalars and messages, at every depth) a protobuf message of `descriptor` holds, read
    on the wire without building it; 413 past `meter`'s value cap, counted only when the body is big enough
    to pass it (each field takes two bytes at least). A malformed body stops the count: the parser says why."""
    limit = meter.budget.max_values
    if len(body) <= 2 * limit:
        return len(body) // 2
    count = 0
    size = len(body)
    stack: list[tuple[int, int, Any]] = [(0, size, descriptor)]
    while stack:
        pos, end, message = stack.pop()
        fields = message.fields_by_number
        while pos < end:
            key = body[pos]  # a one-byte key (fields 1-15) is the common case: no varint loop
            pos += 1
            if key & 0x80:
                key, pos = _varint(body, pos - 1)
            count += 1
            if count > limit:
                raise BodyRefusedError(413, f'protobuf with more than {limit:,} fields (values), over the limit')
            if not count & (_FIELDS_PER_CHECK - 1):
                meter.check_cpu()
            wire = key & 7
            if wire == 2:
                length = body[pos] if pos < size else 0x80
                if length & 0x80:
                    length, pos = _varint(body, pos)
                else:
                    pos += 1
                if pos < 0:
                    return count
                if length:
                    inner = fields.get(key >> 3)
                    if inner is not None and inner.message_type is not None:
                        stack.append((pos, min(pos + length, end), inner.message_type))
                pos += length
            elif wire == 0:
                _, pos = _varint(body, pos)
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:  # groups (long deprecated) or garbage: the parser will refuse it
                return count
            if pos < 0:
                return count
    return count


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The base-128 varint at `pos` and the position after it; (0, -1) past the end or over 10 bytes."""
    result = shift = 0
    while pos < len(data) and shift < 70:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    return 0, -1


class Parsing:
    """Where request bodies are measured and parsed: small ones on the loop, others in worker threads, at
    most `concurrency` at once (see the module docstring)."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = max(1, concurrency)
        self._slots: asyncio.Semaphore | None = None

    async def run(self, work: Callable[[], T], *, inline: bool) -> T:
        """`work()` on the loop when `inline`, else in a thread once a slot is free."""
        if inline:
            return work()
        if self._slots is None:  # made on the loop that uses it
            self._slots = asyncio.Semaphore(self.concurrency)
        async with self._slots:
            return await asyncio.to_thread(work)
