"""Small bodies that cost gigabytes: what a request may cost is measured before it is parsed, and heavy
parsing runs off the event loop, so the health check and other clients stay answered.

Reproduced against the real server (uvicorn on loopback, `live_server`): `{"resourceSpans":[1,1,…]}` with
1.9 million values (3.6 MiB plain, 283 KiB gzip) took 1.2-1.3 GB and froze every client for 20-40 s; a 95 KiB
gzip holding one long string froze the service 23.6 s. Found on the way: the value pre-scan itself was
quadratic on an unterminated string of escaped quotes (80 KB took 22 s, on the event loop); a gzip protobuf
of empty messages was parsed whole, uncounted. Peak memory (the service's own, in a child process) is
`benchmarks/hostile.py`'s item 1.
"""

from __future__ import annotations

import gzip
import json
import random
import time
import zlib
from pathlib import Path

import httpx
import pytest

from benchmarks.hostile_harness import HealthProbe
from sensei_eval.core.sanitize import JsonValueCounter, json_value_bound
from sensei_eval.service.body_budget import BodyBudget, BodyRefusedError, count_protobuf_fields, inflate_gzip
from sensei_eval.service.migrate import upgrade

from .conftest import ScriptedScorer, alert_record, fast_settings, live_server

JSON = {'Content-Type': 'application/json'}
GZIP_JSON = {**JSON, 'Content-Encoding': 'gzip'}
PROTOBUF = {'Content-Type': 'application/x-protobuf', 'Content-Encoding': 'gzip'}
M = 2**20


def _scalars(n: int) -> bytes:
    return b'{"resourceSpans":[' + b','.join([b'1'] * n) + b']}'


def _long_string_gzip(n_bytes: int) -> bytes:
    """A small gzip body inflating to one JSON string of `n_bytes` (made a chunk at a time)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [c.compress(b'{"resourceSpans":[],"x":"')]
    parts += [c.compress(b'a' * M) for _ in range(n_bytes // M)]
    return b''.join([*parts, c.compress(b'"}'), c.flush()])


def test_costly_bodies_are_refused_before_they_are_parsed_and_health_stays_answered(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "s.db"}'
    upgrade(url)
    scalars = _scalars(1_900_000)
    protobuf = gzip.compress(b'\x0a\x00' * 2_600_000)  # 2.6 million empty ResourceSpans
    quotes = b'{"query_id": "q", "x": "' + b'\\"' * 100_000  # unterminated: the old pre-scan was quadratic here
    with (
        live_server(fast_settings(url), ScriptedScorer().model()) as server,
        httpx.Client(base_url=server.url, timeout=60) as c,
        HealthProbe(server.url, interval=0.05) as probe,
    ):
        started = time.monotonic()
        plain = c.post('/v1/traces', content=scalars, headers=JSON)
        zipped = c.post('/v1/traces', content=gzip.compress(scalars), headers=GZIP_JSON)
        string = c.post('/v1/traces', content=_long_string_gzip(100 * M), headers=GZIP_JSON)
        fields = c.post('/v1/traces', content=protobuf, headers=PROTOBUF)
        escaped = c.post('/api/v1/sessions', content=quotes, headers=JSON)
        took = time.monotonic() - started
        good = c.post('/api/v1/sessions', json=alert_record('still-works'))
    assert plain.status_code == 413 and '1,900,000 spans' in plain.json()['detail'], plain.text
    assert zipped.status_code == 413, zipped.text
    assert string.status_code == 413 and 'JSON string of more than' in string.json()['detail'], string.text
    assert fields.status_code == 413 and 'fields (values)' in fields.json()['detail'], fields.text
    assert escaped.status_code in (400, 422), escaped.text
    assert good.status_code == 201
    assert took < 20, f'the five refusals took {took:.1f} s'
    assert probe.failed == 0 and probe.slowest < 1.0, f'health: slowest answer {probe.slowest:.2f} s, {probe.failed} failed'


def test_a_request_within_its_budget_is_still_taken_in_a_thread(tmp_path: Path) -> None:
    """Bodies over `INLINE_BYTES` go to a worker thread: still parsed, cleaned and stored as before."""
    url = f'sqlite:///{tmp_path / "s.db"}'
    upgrade(url)
    record = alert_record('big-ok', metadata={'notes': ['line \ud800 of notes'] * 8000})
    body = json.dumps(record).encode('utf-8', 'surrogatepass')
    assert len(body) > 64 * 1024
    with live_server(fast_settings(url), ScriptedScorer().model()) as server, httpx.Client(base_url=server.url, timeout=30) as c:
        created = c.post('/api/v1/sessions', content=body, headers=JSON)
        assert created.status_code == 201, created.text
        assert created.json()['warnings'] and 'U+FFFD' in created.json()['warnings'][0]
        detail = c.get(f'/api/v1/sessions/{created.json()["session_id"]}').json()
    assert detail['record']['metadata']['notes'][0] == 'line \ufffd of notes'


# ---------------------------------------------------------------------------------------------------
# The measures


@pytest.mark.parametrize(
    'text',
    [
        b'{"a":"' + b'\\"' * 2_000_000,  # unterminated string of escaped quotes
        b'{"a":"' + b'\\\\' * 2_000_000 + b'"}',  # backslashes
        b'{"a":"' + b'x' * 4 * M + b'"}',
    ],
    ids=['escaped-quotes', 'backslashes', 'one-string'],
)
def test_the_value_scan_is_linear_on_hostile_strings(text: bytes) -> None:
    started = time.process_time()
    json_value_bound(text)
    assert time.process_time() - started < 1.0  # 4 MiB; the old scan took 22 s on 80 KB of escaped quotes


def test_the_value_scan_is_exact_however_the_text_is_cut_and_sees_a_long_string() -> None:
    rng = random.Random(41)
    for _ in range(300):
        value = [{'a\\"b': 'x,\\\\y:"[{' * rng.randint(0, 3), 'n': [1, {'k': '\\' * rng.randint(0, 6) + '"é'}]}]
        text = json.dumps(value * rng.randint(1, 5)).encode()
        counter, i = JsonValueCounter(), 0
        while i < len(text):
            step = rng.randint(1, 9)
            counter.feed(text[i : i + step])
            i += step
        assert counter.count == json_value_bound(text)
    counter = JsonValueCounter()
    chunks = (b'{"a": "', b'x' * 1000, b'y' * 1000, b'", "b": 1}')
    for chunk in chunks:
        counter.feed(chunk)
    assert counter.longest_string == 2000 and counter.count == json_value_bound(b''.join(chunks)) == 5


def test_gzip_is_measured_as_it_inflates() -> None:
    budget = BodyBudget(max_values=1000, max_string_bytes=M, max_inflated_bytes=8 * M, cpu_s=10)
    with pytest.raises(BodyRefusedError, match='JSON string of more than'):
        inflate_gzip(_long_string_gzip(4 * M), budget.meter())
    with pytest.raises(BodyRefusedError, match='inflates to more than'):
        inflate_gzip(gzip.compress(b' ' * 9 * M), budget.meter())
    with pytest.raises(BodyRefusedError, match='more than 1,000 values'):
        inflate_gzip(gzip.compress(b'[' + b'1,' * 5000 + b'1]'), budget.meter())
    with pytest.raises(BodyRefusedError, match='not valid gzip'):
        inflate_gzip(b'\x1f\x8b not gzip', budget.meter())
    assert inflate_gzip(gzip.compress(b'[1, 2]'), budget.meter()) == b'[1, 2]'


def test_protobuf_fields_are_counted_on_the_wire() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add()
    for i in range(3):
        span = spans.spans.add(trace_id=bytes(16), span_id=(i + 1).to_bytes(8, 'big'), name=f's{i}', start_time_unix_nano=1)
        span.attributes.add(key='k', value=AnyValue(string_value='v'))
        span.attributes.add(key='a').value.array_value.values.add(int_value=5)
    body = request.SerializeToString()

    def exact(message: object) -> int:
        count = 0
        for f, v in message.ListFields():  # type: ignore[attr-defined]
            for item in list(v) if f.is_repeated else [v]:
                count += 1 + (exact(item) if f.message_type is not None else 0)
        return count

    small = BodyBudget(max_values=len(body) // 2 - 1, max_string_bytes=M, max_inflated_bytes=M, cpu_s=10)
    assert count_protobuf_fields(body, ExportTraceServiceRequest.DESCRIPTOR, small.meter(json=False)) == exact(request)
    tight = BodyBudget(max_values=10, max_string_bytes=M, max_inflated_bytes=M, cpu_s=10)
    with pytest.raises(BodyRefusedError, match='more than 10 fields'):
        count_protobuf_fields(b'\x0a\x00' * 1000, ExportTraceServiceRequest.DESCRIPTOR, tight.meter(json=False))
