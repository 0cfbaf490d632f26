"""Agent traces in: OpenTelemetry spans (pydantic-ai / Logfire GenAI conventions) as `QueryRecord`s.

Production agents already trace every run: pydantic-ai's instrumentation (directly, or through
`logfire.instrument_pydantic_ai()`) writes one `invoke_agent` span per run, carrying the whole message
history (`pydantic_ai.all_messages`) and the instructions (`gen_ai.system_instructions`), with `chat`
spans (`gen_ai.input.messages` / `gen_ai.output.messages`) and `execute_tool` spans
(`gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`)
under it. That is the instrumentation format of versions 2 to 6 (`InstrumentationSettings(version=…)`,
default 5; version 6 only moves tool results to the `tool` role). Reading those spans gives the same
record the judges read from a JSONL line, so the same judges run on live traffic.

* Spans are grouped by trace. A trace is complete when its root (a span without parent) has arrived;
  exporters send spans as they end, so the root normally comes last, and a trace's spans may be split
  over several requests or file lines in any order. Nothing is built from a trace before its root.
* Each top-level agent run (an `invoke_agent` span with no `invoke_agent` ancestor) becomes one record:
  its `query_id` is the trace id (or `trace:span` when a trace holds several runs), unless an attribute
  named by `TraceConfig.query_id_attribute` gives one. Agent name, prompt version, rating and user
  feedback come from attributes (or span events) named in `TraceConfig`; the run's status and timing
  go into `metadata`, which the sampler reads.
* A trace whose root never arrives is held for `TraceConfig.root_timeout_s` (for a file: until the end
  of the file). Then, if its agent-run span did arrive (only an outer wrapper span is missing), the
  record is built from it with an input warning; otherwise it is reported as an error and dropped —
  never a record made from half a run.
* A bad span (ids that are not hex, an attribute value of no OTLP type, messages that are not JSON) is a
  `LoadError` naming the file, the line and the field (`resourceSpans[0].scopeSpans[0].spans[3]…`);
  the rest of the file goes on. JSON is read with `sanitize.loads_limited` (lines and the JSON held in
  attributes alike): nesting past `sanitize.MAX_JSON_DEPTH` is such an error, never a crash.
* A double attribute that is NaN or ±Infinity (OTLP allows them, JSON has no number for them) is kept
  as the text `NaN`, `Infinity` or `-Infinity`, from protobuf and JSON requests alike.

Sources: OTLP/JSON files as the OpenTelemetry Collector's file exporter writes them (one
`ExportTraceServiceRequest` a line; `load_traces`, also reached through `datasets.load_dataset` for
`*.otlp.jsonl`), and the protobuf requests of OTLP/HTTP (`spans_from_protobuf`, used by the service).
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sensei_eval.core.documents import iter_json_values, looks_like_span
from sensei_eval.core.errors import InputError, LoadError, RecordFieldError, field_path, validation_load_error
from sensei_eval.core.records import LoadResult, QueryRecord, Rating
from sensei_eval.core.sanitize import JsonLimitError, clean_value, loads_limited
from sensei_eval.core.span_model import Span, SpanError, SpanEvent, SpanStatus
from sensei_eval.core.trace_readers import read_run

__all__ = (
    'MAX_REQUEST_ATTRIBUTES',
    'MAX_REQUEST_SPANS',
    'OTLP_SUFFIXES',
    'OtlpTooLargeError',
    'Span',
    'SpanEvent',
    'TraceBuild',
    'TraceConfig',
    'build_trace',
    'count_otlp',
    'has_root',
    'is_otlp_path',
    'iter_traces',
    'load_traces',
    'otlp_json_from_protobuf',
    'spans_from_otlp_json',
    'spans_from_protobuf',
)

# Caps on one OTLP request (the service's defaults): the OpenTelemetry SDK's batch exporter sends at most
# 512 spans of at most 128 attributes each (its defaults), so these leave a wide margin for real
# exporters while a request of 570k spans (60 s and 2 GB to ingest) is refused at once.
MAX_REQUEST_SPANS = 10_000
MAX_REQUEST_ATTRIBUTES = 200_000

# File names the dataset loader hands to this module.
OTLP_SUFFIXES = ('.otlp.jsonl', '.otlp.json')

_HEX = re.compile(r'^[0-9a-fA-F]+$')
# OTLP status codes, by number (protobuf, OTLP JSON) and by name (some JSON exporters).
_STATUS_NAMES: tuple[SpanStatus, ...] = ('unset', 'ok', 'error')
_STATUS_CODES: dict[Any, SpanStatus] = {
    **dict(enumerate(_STATUS_NAMES)),
    **{f'STATUS_CODE_{s.upper()}': s for s in _STATUS_NAMES},
}


class TraceConfig(BaseModel):
    """Which span attributes (or events) carry what the judges and the sampler need beyond messages."""

    model_config = ConfigDict(extra='forbid', frozen=True)

    query_id_attribute: str = 'sensei_eval.query_id'
    # A number 1-5 (all three dimensions) or a JSON object in the shape of `records.Rating`.
    rating_attribute: str = 'sensei_eval.rating'
    # A span event of this name whose attributes are `correctness`, `relevance`, `usefulness` (and
    # `reasoning`), or one `rating` number; the latest such event wins over the attribute.
    rating_event: str = 'sensei_eval.rating'
    feedback_attribute: str = 'sensei_eval.feedback'
    agent_attribute: str = 'gen_ai.agent.name'
    prompt_version_attribute: str = 'sensei_eval.prompt_version'
    # Seconds a trace without its root span is held before it is built without it or dropped.
    root_timeout_s: float = Field(default=300.0, gt=0)


# ---------------------------------------------------------------------------------------------------
# Decoding OTLP


class OtlpTooLargeError(InputError):
    """An OTLP request over a span or attribute cap (`count_otlp`), refused before any span is built."""


def count_otlp(request: Any) -> tuple[int, int]:
    """How many spans and attributes (span, event and resource attributes, top level) an
    `ExportTraceServiceRequest` carries, as OTLP/JSON (a dict) or protobuf; counted without building
    spans, so a request over the caps costs no more than its parse. An entry of `resourceSpans` or
    `scopeSpans` that is not an object counts as a span (each is an error to report, which costs as much);
    other malformed parts count as 0."""
    if isinstance(request, dict):
        spans = attributes = 0
        for rs in _list(_key(request, 'resourceSpans', 'resource_spans')):
            spans += not isinstance(rs, dict)
            resource = rs.get('resource') if isinstance(rs, dict) else None
            attributes += len(_list(resource.get('attributes'))) if isinstance(resource, dict) else 0
            for ss in _list(_key(rs, 'scopeSpans', 'scope_spans') if isinstance(rs, dict) else None):
                spans += not isinstance(ss, dict)
                raw_spans = _list(ss.get('spans') if isinstance(ss, dict) else None)
                spans += len(raw_spans)
                for raw in raw_spans:
                    if isinstance(raw, dict):
                        attributes += len(_list(raw.get('attributes')))
                        attributes += sum(
                            len(_list(e.get('attributes'))) for e in _list(raw.get('events')) if isinstance(e, dict)
                        )
        return spans, attributes
    spans = attributes = 0
    for rs in request.resource_spans:
        attributes += len(rs.resource.attributes)
        for ss in rs.scope_spans:
            spans += len(ss.spans)
            for pb in ss.spans:
                attributes += len(pb.attributes) + sum(len(e.attributes) for e in pb.events)
    return spans, attributes


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _check_caps(request: Any, max_spans: int | None, max_attributes: int | None) -> None:
    if max_spans is None and max_attributes is None:
        return
    spans, attributes = count_otlp(request)
    if max_spans is not None and spans > max_spans:
        raise OtlpTooLargeError(f'{spans:,} spans in one request, over the cap of {max_spans:,} spans per request')
    if max_attributes is not None and attributes > max_attributes:
        raise OtlpTooLargeError(
            f'{attributes:,} attributes in one request, over the cap of {max_attributes:,} attributes per request'
        )


def spans_from_otlp_json(
    data: Any, *, file: str, line: int, max_spans: int | None = None, max_attributes: int | None = None
) -> tuple[list[Span], list[LoadError]]:
    """The spans of one `ExportTraceServiceRequest` in OTLP/JSON (ids hex, attributes as AnyValue); over
    `max_spans` or `max_attributes`, an `OtlpTooLargeError` before any span is built."""
    _check_caps(data, max_spans, max_attributes)
    spans: list[Span] = []
    errors: list[LoadError] = []
    if not isinstance(data, dict):
        return [], [LoadError(file, line, None, f'expected an ExportTraceServiceRequest object, got {type(data).__name__}')]
    resource_spans = _key(data, 'resourceSpans', 'resource_spans')
    if not isinstance(resource_spans, list):
        return [], [LoadError(file, line, 'resourceSpans', 'missing or not a list: not an OTLP trace export')]
    for i, rs in enumerate(resource_spans):
        rwhere = f'resourceSpans[{i}]'
        if not isinstance(rs, dict):
            errors.append(LoadError(file, line, rwhere, 'expected an object'))
            continue
        try:
            resource = _attributes_json((rs.get('resource') or {}).get('attributes'), f'{rwhere}.resource.attributes')
        except SpanError as e:
            errors.append(LoadError(file, line, e.field, e.message))
            continue
        # `instrumentationLibrarySpans`: the name before OTLP 0.15, still in old Collector file exports
        scope_spans = _key(rs, 'scopeSpans', 'scope_spans') or rs.get('instrumentationLibrarySpans') or []
        if not isinstance(scope_spans, list):
            errors.append(LoadError(file, line, f'{rwhere}.scopeSpans', 'expected a list'))
            continue
        for j, ss in enumerate(scope_spans):
            swhere = f'{rwhere}.scopeSpans[{j}]'
            raw_spans = ss.get('spans') if isinstance(ss, dict) else None
            if not isinstance(raw_spans, list):
                errors.append(LoadError(file, line, f'{swhere}.spans', 'missing or not a list'))
                continue
            for k, raw in enumerate(raw_spans):
                where = f'{swhere}.spans[{k}]'
                try:
                    spans.append(_span_json(raw, where, resource, file, line))
                except SpanError as e:
                    errors.append(LoadError(file, line, e.field, e.message))
    return spans, errors


def _key(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data[camel] if camel in data else data.get(snake)


def _span_json(raw: Any, where: str, resource: dict[str, Any], file: str, line: int) -> Span:
    if not isinstance(raw, dict):
        raise SpanError(where, f'expected a span object, got {type(raw).__name__}')
    trace_id = _hex_id(_b64_id(_key(raw, 'traceId', 'trace_id'), 32), 32, f'{where}.traceId')
    span_id = _hex_id(_b64_id(_key(raw, 'spanId', 'span_id'), 16), 16, f'{where}.spanId')
    parent = _key(raw, 'parentSpanId', 'parent_span_id')
    parent_id = _hex_id(_b64_id(parent, 16), 16, f'{where}.parentSpanId') if parent else None
    name = raw.get('name')
    if not isinstance(name, str) or not name:
        raise SpanError(f'{where}.name', 'missing span name')
    start = _nanos(_key(raw, 'startTimeUnixNano', 'start_time_unix_nano'), f'{where}.startTimeUnixNano')
    end = _nanos(_key(raw, 'endTimeUnixNano', 'end_time_unix_nano'), f'{where}.endTimeUnixNano')
    attributes = _attributes_json(raw.get('attributes'), f'{where}.attributes')
    status = raw.get('status') or {}
    if not isinstance(status, dict):
        raise SpanError(f'{where}.status', 'expected an object')
    code = status.get('code', 0)
    if code not in _STATUS_CODES:
        raise SpanError(f'{where}.status.code', f'unknown status code {code!r} (0 unset, 1 ok, 2 error)')
    events: list[SpanEvent] = []
    for n, ev in enumerate(raw.get('events') or []):
        ewhere = f'{where}.events[{n}]'
        if not isinstance(ev, dict) or not isinstance(ev.get('name'), str):
            raise SpanError(ewhere, 'an event needs a name')
        t = _nanos(_key(ev, 'timeUnixNano', 'time_unix_nano') or 0, f'{ewhere}.timeUnixNano')
        events.append(SpanEvent(ev['name'], t, _attributes_json(ev.get('attributes'), f'{ewhere}.attributes')))
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=name,
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        status=_STATUS_CODES[code],
        status_message=str(status.get('message') or ''),
        events=tuple(events),
        resource=resource,
        file=file,
        line=line,
        path=where,
    )


def _b64_id(value: Any, length: int) -> Any:
    """An id in protobuf's JSON mapping (base64, as `MessageToJson` writes it) as the hex OTLP/JSON wants;
    anything else unchanged (and checked by `_hex_id`)."""
    if isinstance(value, str) and len(value) != length and len(value) == 4 * ((length // 2 + 2) // 3):
        try:
            raw = base64.b64decode(value, validate=True)
        except ValueError:
            return value
        if len(raw) == length // 2:
            return raw.hex()
    return value


def _hex_id(value: Any, length: int, where: str) -> str:
    if not isinstance(value, str) or len(value) != length or not _HEX.match(value):
        shown = repr(value)[:60]
        raise SpanError(where, f'expected {length} hex digits, got {shown}')
    if set(value) == {'0'}:
        raise SpanError(where, 'an all-zero id is invalid')
    return value.lower()


def _nanos(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise SpanError(where, 'expected nanoseconds since the epoch, got a boolean')
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise SpanError(where, f'expected nanoseconds since the epoch, got {repr(value)[:40]}') from None


def _attributes_json(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise SpanError(where, 'expected a list of {key, value}')
    out: dict[str, Any] = {}
    for n, kv in enumerate(raw):
        if not isinstance(kv, dict) or not isinstance(kv.get('key'), str):
            raise SpanError(f'{where}[{n}]', 'expected {key, value}')
        out[kv['key']] = _any_value_json(kv.get('value'), f'{where}[{n}].value')
    return out


def _any_value_json(value: Any, where: str) -> Any:
    if value is None or value == {}:
        return None
    if not isinstance(value, dict) or len(value) != 1:
        raise SpanError(where, 'expected an AnyValue with exactly one of stringValue, intValue, boolValue, …')
    kind, inner = next(iter(value.items()))
    if kind in ('stringValue', 'string_value', 'bytesValue', 'bytes_value'):
        if not isinstance(inner, str):
            raise SpanError(f'{where}.{kind}', 'expected a string')
        return inner
    if kind in ('boolValue', 'bool_value'):
        if not isinstance(inner, bool):
            raise SpanError(f'{where}.{kind}', 'expected true or false')
        return inner
    if kind in ('intValue', 'int_value'):
        try:
            return int(inner)
        except (TypeError, ValueError):
            raise SpanError(f'{where}.{kind}', f'expected an integer, got {repr(inner)[:40]}') from None
    if kind in ('doubleValue', 'double_value'):
        if isinstance(inner, bool) or not isinstance(inner, int | float | str):
            raise SpanError(f'{where}.{kind}', 'expected a number')
        try:
            return _double(float(inner))
        except ValueError:
            raise SpanError(f'{where}.{kind}', f'expected a number, got {repr(inner)[:40]}') from None
    if kind in ('arrayValue', 'array_value'):
        values = inner.get('values', []) if isinstance(inner, dict) else None
        if not isinstance(values, list):
            raise SpanError(f'{where}.{kind}', 'expected {values: [...]}')
        return [_any_value_json(v, f'{where}.{kind}.values[{n}]') for n, v in enumerate(values)]
    if kind in ('kvlistValue', 'kvlist_value'):
        values = inner.get('values', []) if isinstance(inner, dict) else None
        return _attributes_json(values, f'{where}.{kind}.values')
    raise SpanError(where, f'unknown AnyValue kind {kind!r}')


def spans_from_protobuf(
    body: bytes, *, source: str = 'OTLP request', max_spans: int | None = None, max_attributes: int | None = None
) -> tuple[list[Span], list[LoadError]]:
    """The spans of a protobuf `ExportTraceServiceRequest` (OTLP/HTTP `application/x-protobuf`); over
    `max_spans` or `max_attributes`, an `OtlpTooLargeError` before any span is built."""
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    try:
        request = ExportTraceServiceRequest.FromString(body)
    except DecodeError as e:
        return [], [LoadError(source, 0, None, f'not a protobuf ExportTraceServiceRequest: {e}')]
    _check_caps(request, max_spans, max_attributes)
    spans: list[Span] = []
    errors: list[LoadError] = []
    for i, rs in enumerate(request.resource_spans):
        resource = {kv.key: _any_value_pb(kv.value) for kv in rs.resource.attributes}
        for j, ss in enumerate(rs.scope_spans):
            for k, pb in enumerate(ss.spans):
                where = f'resourceSpans[{i}].scopeSpans[{j}].spans[{k}]'
                try:
                    trace_id = _hex_id(pb.trace_id.hex(), 32, f'{where}.traceId')
                    span_id = _hex_id(pb.span_id.hex(), 16, f'{where}.spanId')
                    parent = _hex_id(pb.parent_span_id.hex(), 16, f'{where}.parentSpanId') if pb.parent_span_id else None
                    if not pb.name:
                        raise SpanError(f'{where}.name', 'missing span name')
                except SpanError as e:
                    errors.append(LoadError(source, 0, e.field, e.message))
                    continue
                events = tuple(
                    SpanEvent(ev.name, ev.time_unix_nano, {kv.key: _any_value_pb(kv.value) for kv in ev.attributes})
                    for ev in pb.events
                )
                spans.append(
                    Span(
                        trace_id,
                        span_id,
                        parent,
                        pb.name,
                        pb.start_time_unix_nano,
                        pb.end_time_unix_nano,
                        {kv.key: _any_value_pb(kv.value) for kv in pb.attributes},
                        _STATUS_CODES.get(int(pb.status.code), 'unset'),
                        pb.status.message,
                        events,
                        resource,
                        source,
                        0,
                        where,
                    )
                )
    return spans, errors


def otlp_json_from_protobuf(request: Any) -> dict[str, Any]:
    """A protobuf `ExportTraceServiceRequest` as the OTLP/JSON line the Collector's file exporter writes
    (ids as hex, enums as integers): how to capture spans into a file `load_traces` reads."""
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

    data: dict[str, Any] = MessageToDict(request, use_integers_for_enums=True)

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            for key in ('traceId', 'spanId', 'parentSpanId'):
                if isinstance(node.get(key), str):
                    node[key] = base64.b64decode(node[key]).hex()
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(data)
    return data


def _any_value_pb(value: Any) -> Any:
    kind = value.WhichOneof('value')
    if kind is None:
        return None
    inner = getattr(value, kind)
    if kind == 'array_value':
        return [_any_value_pb(v) for v in inner.values]
    if kind == 'kvlist_value':
        return {kv.key: _any_value_pb(kv.value) for kv in inner.values}
    if kind == 'bytes_value':
        return inner.hex()
    if kind == 'double_value':
        return _double(inner)
    return inner


def _double(value: float) -> float | str:
    """A double attribute; NaN and ±Infinity (which OTLP allows and JSON has no number for) as the text
    `NaN`, `Infinity`, `-Infinity`, so both stores keep the same value (see the module docstring)."""
    if math.isfinite(value):
        return value
    return 'NaN' if math.isnan(value) else ('Infinity' if value > 0 else '-Infinity')


# ---------------------------------------------------------------------------------------------------
# OpenTelemetry SDK span dumps

_SDK_STATUS: dict[str, SpanStatus] = {'UNSET': 'unset', 'OK': 'ok', 'ERROR': 'error'}


def spans_from_value(data: Any, *, file: str, line: int, where: str = '') -> tuple[list[Span], list[LoadError]]:
    """The spans of one JSON value of a trace file: an OTLP/JSON `ExportTraceServiceRequest`, an SDK span
    (`ReadableSpan.to_json()`), a `{"spans": [...]}` document, or a list of any of these."""
    if isinstance(data, dict) and ('resourceSpans' in data or 'resource_spans' in data):
        return spans_from_otlp_json(data, file=file, line=line)
    if isinstance(data, dict) and isinstance(data.get('spans'), list):
        return spans_from_value(data['spans'], file=file, line=line, where=f'{where}spans')
    if isinstance(data, list):
        spans: list[Span] = []
        errors: list[LoadError] = []
        for i, item in enumerate(data):
            got, bad = spans_from_value(item, file=file, line=line, where=f'{where}[{i}]')
            spans.extend(got)
            errors.extend(bad)
        return spans, errors
    if looks_like_span(data):
        try:
            return [_sdk_span(data, where or '(span)', file, line)], []
        except SpanError as e:
            return [], [LoadError(file, line, e.field, e.message)]
    shown = type(data).__name__ if not isinstance(data, dict) else 'an object with keys ' + ', '.join(list(data)[:5])
    return [], [LoadError(file, line, where or None, f'not an OTLP trace export or an SDK span: {shown}')]


def _sdk_span(raw: dict[str, Any], where: str, file: str, line: int) -> Span:
    """One span as the OpenTelemetry SDK's `ReadableSpan.to_json()` writes it (ids `0x…` hex, times ISO 8601,
    status `UNSET`/`OK`/`ERROR`), or the variants frameworks write (ids as integers, times in nanoseconds,
    a `parent` context)."""
    context: dict[str, Any] = raw['context'] if isinstance(raw.get('context'), dict) else raw
    trace_id = _sdk_id(context.get('trace_id', context.get('traceId')), 32, f'{where}.context.trace_id')
    span_id = _sdk_id(context.get('span_id', context.get('spanId')), 16, f'{where}.context.span_id')
    if trace_id is None or span_id is None:
        raise SpanError(f'{where}.context', 'a span needs a trace_id and a span_id')
    parent_raw = raw.get('parent_id', raw.get('parent_span_id', raw.get('parentSpanId')))
    if isinstance(raw.get('parent'), dict):
        parent_raw = raw['parent'].get('span_id', raw['parent'].get('spanId'))
    parent = _sdk_id(parent_raw, 16, f'{where}.parent_id')
    attributes = raw.get('attributes') or {}
    if not isinstance(attributes, dict):
        raise SpanError(f'{where}.attributes', 'expected an object of attributes')
    attributes = _flat_attributes(attributes)
    if isinstance(raw.get('span_kind'), str) and 'openinference.span.kind' not in attributes:
        attributes['openinference.span.kind'] = raw['span_kind']  # Phoenix's span JSON keeps the kind beside
    status = raw.get('status') or {'status_code': raw.get('status_code', 'UNSET'), 'description': raw.get('status_message')}
    code = str(status.get('status_code', status.get('code', 'UNSET')) if isinstance(status, dict) else status)
    code = code.rsplit('.', 1)[-1].upper()  # "StatusCode.ERROR" as some dumps write it
    events: list[SpanEvent] = []
    for n, ev in enumerate(raw.get('events') or []):
        if not isinstance(ev, dict) or not isinstance(ev.get('name'), str):
            raise SpanError(f'{where}.events[{n}]', 'an event needs a name')
        ev_attrs = ev.get('attributes') or {}
        if not isinstance(ev_attrs, dict):
            raise SpanError(f'{where}.events[{n}].attributes', 'expected an object of attributes')
        events.append(
            SpanEvent(
                ev['name'], _sdk_time(ev.get('timestamp', ev.get('time_ns', 0)), f'{where}.events[{n}].timestamp'), dict(ev_attrs)
            )
        )
    resource = raw.get('resource') or {}
    resource_attrs = resource.get('attributes', {}) if isinstance(resource, dict) else {}
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=str(raw['name']),
        start_ns=_sdk_time(raw.get('start_time', raw.get('start_ns')), f'{where}.start_time'),
        end_ns=_sdk_time(raw.get('end_time', raw.get('end_ns')), f'{where}.end_time'),
        attributes={str(k): _sdk_attribute(v) for k, v in attributes.items()},
        status=_SDK_STATUS.get(code, 'unset'),
        status_message=str((status.get('description') if isinstance(status, dict) else None) or ''),
        events=tuple(events),
        resource=dict(resource_attrs) if isinstance(resource_attrs, dict) else {},
        file=file,
        line=line,
        path=where,
    )


def _flat_attributes(attributes: dict[str, Any], prefix: str = '') -> dict[str, Any]:
    """Attributes nested as objects (`{"llm": {"model_name": …}}`, as Phoenix exports spans) as the dotted keys
    OpenTelemetry uses; attributes already dotted are unchanged (an attribute value is never an object)."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        name = f'{prefix}{key}'
        if isinstance(value, dict):
            out.update(_flat_attributes(value, f'{name}.'))
        else:
            out[name] = value
    return out


def _sdk_attribute(value: Any) -> Any:
    if isinstance(value, float):
        return _double(value)
    return value


def _sdk_id(value: Any, length: int, where: str) -> str | None:
    if value is None or value == '' or value == 0:
        return None
    if isinstance(value, bool):
        raise SpanError(where, 'expected an id, got a boolean')
    if isinstance(value, int):
        if value < 0 or value >= 1 << (4 * length):
            raise SpanError(where, f'id {value} does not fit {length} hex digits')
        return f'{value:0{length}x}'
    if isinstance(value, str):
        text = value.lower().removeprefix('0x')
        if len(text) < length and _HEX.match(text or 'x'):
            text = text.rjust(length, '0')
        return _hex_id(text, length, where)
    raise SpanError(where, f'expected an id, got {type(value).__name__}')


def _sdk_time(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, str) and not value.strip().isdigit():
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise SpanError(where, f'expected an ISO 8601 time or nanoseconds, got {value[:40]!r}') from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1_000_000) * 1000
    return _nanos(value, where)


def _decode_lines(raw: bytes, file: str) -> tuple[str, list[LoadError]]:
    """The file as text; a line that is not UTF-8 is an error on its line and read as blank."""
    try:
        return raw.decode('utf-8'), []
    except UnicodeDecodeError:
        pass
    errors: list[LoadError] = []
    lines: list[str] = []
    for n, line in enumerate(raw.split(b'\n'), start=1):
        try:
            lines.append(line.decode('utf-8'))
        except UnicodeDecodeError as e:
            errors.append(LoadError(file, n, None, f'not valid UTF-8 (byte 0x{line[e.start]:02x} at column {e.start + 1})'))
            lines.append('')
    return '\n'.join(lines), errors


# ---------------------------------------------------------------------------------------------------
# Traces into records


@dataclass
class TraceBuild:
    """What one trace gave: its records (one per top-level agent run) and its located errors."""

    trace_id: str
    records: list[QueryRecord] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # query_id -> line of its agent-run span


def has_root(spans: Iterable[Span]) -> bool:
    """Whether the trace's root span (no parent) has arrived: the trace is complete."""
    return any(s.parent_span_id is None for s in spans)


def build_trace(spans: Sequence[Span], config: TraceConfig | None = None, *, timed_out: bool = False) -> TraceBuild:
    """The records of one trace. Call it when `has_root(spans)`, or with `timed_out=True` once the
    root's wait is over (see the module docstring for what a trace without root gives)."""
    config = config or TraceConfig()
    if not spans:
        raise ValueError('a trace has at least one span')
    trace_id = spans[0].trace_id
    build = TraceBuild(trace_id)
    by_id: dict[str, Span] = {}
    for span in spans:
        if span.attributes.get('logfire.span_type') == 'pending_span':
            continue  # Logfire's placeholder for a span still open: the real span follows
        by_id.setdefault(span.span_id, span)  # a span sent twice (an exporter retry) counts once
    ordered = sorted(by_id.values(), key=lambda s: (s.start_ns, s.end_ns))
    first = min(spans, key=lambda s: (s.file, s.line))
    root_missing = not has_root(ordered)
    runs = _runs(ordered, by_id)
    if not runs:
        what = 'no agent-run span (invoke_agent or an OpenInference AGENT), model call or tool span'
        why = f'{what} arrived' if root_missing else f'the trace has {what}'
        if root_missing and timed_out:
            waited = f'the root span never arrived within {config.root_timeout_s:g} s'
            why = f'{waited} and no agent-run span arrived; its {len(ordered)} span(s) are dropped'
        build.errors.append(LoadError(first.file, first.line, first.path or None, f'trace {trace_id}: {why}'))
        return build
    members = _members(runs, ordered, by_id)
    for run in runs:
        query_id = _text_attr(_lookup(config.query_id_attribute, run, ordered))
        if query_id is None:
            query_id = trace_id if len(runs) == 1 else f'{trace_id}:{run.span_id}'
        try:
            record = _record(run, members[run.span_id], ordered, query_id, config)
        except SpanError as e:
            build.errors.append(LoadError(run.file, run.line, e.field, e.message, query_id))
            continue
        except RecordFieldError as e:
            build.errors.append(LoadError(run.file, run.line, f'{run.path}.{e.field}', e.message, query_id))
            continue
        except ValidationError as e:
            build.errors.append(validation_load_error(run.file, run.line, e, query_id))
            continue
        if root_missing:
            record.input_warnings.append(
                f'the trace root span never arrived within {config.root_timeout_s:g} s; built from the finished agent-run span'
            )
        for problem in record.metadata.pop('_problems', []):
            build.errors.append(LoadError(run.file, run.line, problem[0], problem[1], query_id))
        build.records.append(record)
        build.lines[query_id] = run.line
    return build


def _runs(ordered: Sequence[Span], by_id: Mapping[str, Span]) -> list[Span]:
    """The trace's agent runs: each top-level agent span (no agent span above it); several of them under one
    OpenInference CHAIN root (an agent workflow with hand-offs) are one run, the root. A trace with no agent
    span but model calls or tool spans (a raw client, traced per call) is one run: its root span."""
    runs = [s for s in ordered if s.kind == 'agent' and not _has_agent_ancestor(s, by_id)]
    roots = [s for s in ordered if s.parent_span_id is None]
    if len(runs) > 1 and len(roots) == 1 and roots[0].kind == 'chain':
        return roots
    if runs:
        return runs
    if roots and any(s.kind in ('llm', 'tool', 'retriever') for s in ordered):
        return roots[:1]
    return []


def _members(runs: Sequence[Span], ordered: Sequence[Span], by_id: Mapping[str, Span]) -> dict[str, list[Span]]:
    """Each run's spans: its descendants, plus spans whose parent never arrived (an exporter that dropped
    an intermediate span) that fall within the run's time (or the only run)."""
    children = _children(ordered)
    out = {run.span_id: _descendants(run, children) for run in runs}
    placed = {s.span_id for spans in out.values() for s in spans} | {run.span_id for run in runs}
    for span in ordered:
        if span.span_id in placed or not _orphan(span, by_id):
            continue
        home = next((r for r in runs if r.start_ns <= span.start_ns <= max(r.end_ns, r.start_ns)), None)
        if home is None and len(runs) == 1:
            home = runs[0]
        if home is not None:
            for s in [span, *_descendants(span, children)]:
                if s.span_id not in placed:
                    out[home.span_id].append(s)
                    placed.add(s.span_id)
    for spans in out.values():
        spans.sort(key=lambda s: (s.start_ns, s.end_ns))
    return out


def _orphan(span: Span, by_id: Mapping[str, Span]) -> bool:
    """Whether the span's chain of parents ends at a span that never arrived."""
    seen: set[str] = set()
    node = span
    while node.parent_span_id is not None and node.span_id not in seen:
        seen.add(node.span_id)
        parent = by_id.get(node.parent_span_id)
        if parent is None:
            return True
        node = parent
    return False


def _has_agent_ancestor(span: Span, by_id: Mapping[str, Span]) -> bool:
    seen: set[str] = set()
    parent = span.parent_span_id
    while parent is not None and parent in by_id and parent not in seen:
        seen.add(parent)
        node = by_id[parent]
        if node.kind == 'agent':
            return True
        parent = node.parent_span_id
    return False


def _children(spans: Sequence[Span]) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {}
    for span in spans:
        if span.parent_span_id is not None:
            out.setdefault(span.parent_span_id, []).append(span)
    return out


def _descendants(run: Span, children: Mapping[str, list[Span]]) -> list[Span]:
    out: list[Span] = []
    stack = list(children.get(run.span_id, ()))
    seen: set[str] = set()
    while stack:
        span = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        out.append(span)
        stack.extend(children.get(span.span_id, ()))
    return sorted(out, key=lambda s: (s.start_ns, s.end_ns))


def _lookup(name: str, run: Span, spans: Sequence[Span]) -> tuple[Any, Span] | None:
    """An attribute: on the run span first, then on any span of the trace (latest ending first)."""
    if name in run.attributes:
        return run.attributes[name], run
    for span in sorted(spans, key=lambda s: s.end_ns, reverse=True):
        if name in span.attributes:
            return span.attributes[name], span
    return None


def _text_attr(found: tuple[Any, Span] | None) -> str | None:
    if found is None or found[0] is None:
        return None
    value = found[0]
    text = value if isinstance(value, str) else json.dumps(value)
    return text.strip() or None


def _record(run: Span, inner: Sequence[Span], trace: Sequence[Span], query_id: str, config: TraceConfig) -> QueryRecord:
    content = read_run(run, inner)
    if not content.messages:
        raise SpanError(
            run.path or run.name,
            'the agent run carries no messages: no model call recorded its input or output, and the run span has '
            'no input (instrumented without message content?)',
        )
    problems: list[tuple[str, str]] = []
    rating = _rating(run, trace, config, problems)
    agent = (
        _text_attr(_lookup(config.agent_attribute, run, trace))
        or _text_attr(_lookup('agent_name', run, trace))
        or _text_attr(_lookup('agent.name', run, trace))
        or (content.agents[0] if content.agents else None)
    )
    feedback = _text_attr(_lookup(config.feedback_attribute, run, trace))
    failed_tools = sum(1 for s in inner if s.kind in ('tool', 'retriever') and s.status == 'error')
    model = run.attributes.get('model_name') or next(
        (
            s.attributes.get(k)
            for s in inner
            if s.kind == 'llm'
            for k in ('gen_ai.request.model', 'gen_ai.response.model', 'llm.model_name')
            if isinstance(s.attributes.get(k), str)
        ),
        None,
    )
    metadata: dict[str, Any] = {
        'source': 'otlp',
        'trace_id': run.trace_id,
        'span_id': run.span_id,
        'status': 'error' if run.status == 'error' else 'ok',
        'started_at': run.start_ns / 1e9,
        'ended_at': run.end_ns / 1e9,
        'duration_s': round(max(0, run.end_ns - run.start_ns) / 1e9, 6),
        'span_count': len(inner) + 1,
        'failed_tool_spans': failed_tools,
    }
    if run.status_message:
        metadata['status_message'] = run.status_message
    if agent:
        metadata['agent'] = agent
    if feedback:
        metadata['feedback'] = feedback
    if isinstance(model, str) and model:
        metadata['model'] = model
    if content.usage:
        metadata['usage'] = content.usage
    if content.session_id:
        metadata['session_id'] = content.session_id
    if len(content.agents) > 1:
        metadata['agents'] = content.agents
    if problems:
        metadata['_problems'] = problems
    data, replaced = clean_value(
        {
            'query_id': query_id,
            'message_format': 'openai',
            'messages': content.messages,
            'rating': rating,
            'prompt_version': _text_attr(_lookup(config.prompt_version_attribute, run, trace)),
            'metadata': metadata,
        }
    )
    record = QueryRecord.model_validate(data)
    record.input_warnings.extend(content.warnings)
    if replaced:
        record.input_warnings.append(
            f'lone UTF-16 surrogate(s) or NUL character(s) replaced by U+FFFD in {", ".join(replaced[:5])}'
        )
    return record


def _rating(run: Span, trace: Sequence[Span], config: TraceConfig, problems: list[tuple[str, str]]) -> dict[str, Any] | None:
    events = sorted(((e, s) for s in trace for e in s.events if e.name == config.rating_event), key=lambda p: p[0].time_ns)
    if events:
        event, span = events[-1]
        where = f'{span.path}.events[{config.rating_event}]'
        attrs = dict(event.attributes)
        value: Any = attrs.get('rating', attrs)
    else:
        found = _lookup(config.rating_attribute, run, trace)
        if found is None or found[0] is None:
            return None
        value, span = found
        where = f'{span.path}.attributes[{config.rating_attribute}]'
    if isinstance(value, str):
        try:
            value = loads_limited(value, allow_nan=True)
        except JsonLimitError as e:
            problems.append((where, f'rating refused: {e.message}; the run has no rating'))
            return None
        except ValueError:
            problems.append((where, f'rating is neither a number 1-5 nor a JSON object: {value[:60]!r}; the run has no rating'))
            return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value != int(value) or not 1 <= value <= 5:
            problems.append((where, f'rating {value!r} is not a whole number from 1 to 5; the run has no rating'))
            return None
        n = int(value)
        return {'correctness': n, 'relevance': n, 'usefulness': n}
    if isinstance(value, dict):
        try:
            return Rating.model_validate(value).model_dump(exclude_none=True)
        except ValidationError as e:
            err = e.errors()[0]
            problems.append((where + field_path(err['loc']), f'{err["msg"]}; the run has no rating'))
            return None
    problems.append((where, f'rating of type {type(value).__name__} is neither a number nor an object; the run has no rating'))
    return None


# ---------------------------------------------------------------------------------------------------
# Files


def is_otlp_path(path: str | Path) -> bool:
    return str(path).lower().endswith(OTLP_SUFFIXES)


def load_traces(path: str | Path, config: TraceConfig | None = None) -> LoadResult:
    """Read a trace file into records: OTLP/JSON (one `ExportTraceServiceRequest` a line, or one
    pretty-printed), or OpenTelemetry SDK span dumps (`span.to_json()` objects one after another, a JSON
    array of them, or a `{"spans": [...]}` document); see `spans_from_value`.

    The end of the file is the root span's deadline: a trace still without root is then built from its
    finished agent run or reported (see the module docstring). Errors name the file, line and field."""
    path = Path(path)
    config = config or TraceConfig()
    errors: list[LoadError] = []
    traces: dict[str, list[Span]] = {}
    try:
        raw = path.read_bytes().removeprefix(b'\xef\xbb\xbf')
    except OSError as e:
        return LoadResult([], [LoadError(str(path), 0, None, f'cannot read the trace file: {e.strerror or e}')])
    text, bad_lines = _decode_lines(raw, str(path))
    errors.extend(bad_lines)
    for lineno, data in iter_json_values(text, str(path)):
        if isinstance(data, LoadError):
            errors.append(data)
            continue
        spans, span_errors = spans_from_value(data, file=str(path), line=lineno)
        errors.extend(span_errors)
        for span in spans:
            traces.setdefault(span.trace_id, []).append(span)
    records: list[QueryRecord] = []
    lines: dict[str, int] = {}
    for spans in traces.values():
        build = build_trace(spans, config, timed_out=not has_root(spans))
        errors.extend(build.errors)
        for record in build.records:
            if record.query_id in lines:
                message = f'duplicate query_id {record.query_id!r} (first on line {lines[record.query_id]}); this run is skipped'
                errors.append(LoadError(str(path), build.lines[record.query_id], 'query_id', message, record.query_id))
                continue
            lines[record.query_id] = build.lines[record.query_id]
            records.append(record)
    return LoadResult(records, errors, lines)


def iter_traces(
    path: str | Path, config: TraceConfig | None = None, *, seen: dict[str, int] | None = None
) -> Iterator[QueryRecord | LoadError]:
    """`load_traces` as the dataset stream `datasets.iter_dataset` yields: errors, then records; a query_id
    already in `seen` (query id -> line) is a duplicate error, and each record's line is added to it."""
    seen = {} if seen is None else seen
    result = load_traces(path, config)
    yield from result.errors
    for record in result.records:
        line = result.lines.get(record.query_id, 0)
        if record.query_id in seen:
            message = f'duplicate query_id {record.query_id!r} (first on line {seen[record.query_id]}); this run is skipped'
            yield LoadError(str(path), line, 'query_id', message, record.query_id)
            continue
        seen[record.query_id] = line
        yield record
