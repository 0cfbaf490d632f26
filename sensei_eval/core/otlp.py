"""Decoding OTLP: the spans of an `ExportTraceServiceRequest` and the log records of an `ExportLogsServiceRequest`,
as OTLP/JSON (a parsed dict, as the Collector's file exporter writes a line) or protobuf (OTLP/HTTP's
`application/x-protobuf`), into `span_model.Span`s and `LogEvent`s.

* Every span (or log record) is decoded on its own: a value that cannot be read — ids that are not hex, an
  attribute value of no OTLP type, an `intValue` of `Infinity` or 5,000 digits, a time that is not a number —
  is a `LoadError` naming the file, the line and the field (`resourceSpans[0].scopeSpans[0].spans[3]…`), that
  span is left out, and the rest of the request goes on. Nothing a span holds raises past this module.
* A double attribute that is NaN or ±Infinity (OTLP allows them, JSON has no number for them) is kept as the
  text `NaN`, `Infinity` or `-Infinity`, from protobuf and JSON requests alike, so both stores keep it.
* Caps (`max_spans`, `max_attributes`) are checked by counting before anything is built (`count_otlp`); over
  either is an `OtlpTooLargeError`.
* Log records are how content travels when an instrumentation sends it as OTel events (the GenAI conventions'
  event form, OpenLLMetry's `use_attributes=False`, the openai-v2 instrumentation's default, pydantic-ai's
  first instrumentation with `event_mode='logs'`): a record with an event name (`eventName`, or the older
  `event.name` attribute) and a span context becomes a `SpanEvent` of that span — its body's fields and its
  attributes as the event's attributes — which `traces.attach_logs` joins to its span by trace and span id.
  Records without an event name (ordinary application logs) are ignored; an event without a span context
  cannot be joined and is a `LoadError`.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sensei_eval.core.errors import InputError, LoadError
from sensei_eval.core.span_model import Span, SpanError, SpanEvent, SpanStatus

__all__ = (
    'LogEvent',
    'OtlpTooLargeError',
    'count_otlp',
    'double_value',
    'hex_id',
    'logs_from_otlp_json',
    'logs_from_protobuf',
    'nanos',
    'otlp_json_from_protobuf',
    'spans_from_otlp_json',
    'spans_from_protobuf',
)

_HEX = re.compile(r'^[0-9a-fA-F]+$')
# OTLP status codes, by number (protobuf, OTLP JSON) and by name (some JSON exporters).
_STATUS_NAMES: tuple[SpanStatus, ...] = ('unset', 'ok', 'error')
_STATUS_CODES: dict[Any, SpanStatus] = {
    **dict(enumerate(_STATUS_NAMES)),
    **{f'STATUS_CODE_{s.upper()}': s for s in _STATUS_NAMES},
}
# What a hostile value can raise in int(), float(), bytes.hex() and friends: caught per span, never past it.
_VALUE_ERRORS = (ValueError, TypeError, OverflowError, RecursionError, KeyError, AttributeError)
# The attribute older event APIs (the OTel Events API, pydantic-ai 0.x) name a log event with.
_EVENT_NAME_ATTRIBUTE = 'event.name'


class OtlpTooLargeError(InputError):
    """An OTLP request over a span or attribute cap (`count_otlp`), refused before any span is built."""


@dataclass(frozen=True)
class LogEvent:
    """An OTel log event with the span it belongs to: joined to that span as one of its events."""

    trace_id: str
    span_id: str
    event: SpanEvent
    file: str = ''
    line: int = 0
    path: str = ''


# ---------------------------------------------------------------------------------------------------
# Counting and caps


def count_otlp(request: Any) -> tuple[int, int]:
    """How many spans (or log records) and attributes (span, event, record and resource attributes, top level)
    an `ExportTraceServiceRequest` or `ExportLogsServiceRequest` carries, as OTLP/JSON (a dict) or protobuf;
    counted without building anything, so a request over the caps costs no more than its parse. An entry of
    the outer or middle list (`resourceSpans`, `scopeSpans`, their log twins) that is not an object counts as
    an item (each is an error to report, which costs as much); other malformed parts count as 0."""
    if isinstance(request, dict):
        items = attributes = 0
        logs = 'resourceLogs' in request or 'resource_logs' in request
        outer = ('resourceLogs', 'resource_logs') if logs else ('resourceSpans', 'resource_spans')
        middle = ('scopeLogs', 'scope_logs') if logs else ('scopeSpans', 'scope_spans')
        inner = 'logRecords' if logs else 'spans'
        for rs in _list(_key(request, *outer)):
            items += not isinstance(rs, dict)
            resource = rs.get('resource') if isinstance(rs, dict) else None
            attributes += len(_list(resource.get('attributes'))) if isinstance(resource, dict) else 0
            for ss in _list(_key(rs, *middle) if isinstance(rs, dict) else None):
                items += not isinstance(ss, dict)
                raw_items = _list((ss.get(inner) or ss.get('log_records')) if isinstance(ss, dict) else None)
                items += len(raw_items)
                for raw in raw_items:
                    if isinstance(raw, dict):
                        attributes += len(_list(raw.get('attributes')))
                        attributes += sum(
                            len(_list(e.get('attributes'))) for e in _list(raw.get('events')) if isinstance(e, dict)
                        )
        return items, attributes
    items = attributes = 0
    if hasattr(request, 'resource_logs'):
        for rl in request.resource_logs:
            attributes += len(rl.resource.attributes)
            for sl in rl.scope_logs:
                items += len(sl.log_records)
                attributes += sum(len(r.attributes) for r in sl.log_records)
        return items, attributes
    for rs in request.resource_spans:
        attributes += len(rs.resource.attributes)
        for ss in rs.scope_spans:
            items += len(ss.spans)
            for pb in ss.spans:
                attributes += len(pb.attributes) + sum(len(e.attributes) for e in pb.events)
    return items, attributes


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _key(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data[camel] if camel in data else data.get(snake)


def _check_caps(request: Any, max_items: int | None, max_attributes: int | None, what: str = 'spans') -> None:
    if max_items is None and max_attributes is None:
        return
    items, attributes = count_otlp(request)
    if max_items is not None and items > max_items:
        raise OtlpTooLargeError(f'{items:,} {what} in one request, over the cap of {max_items:,} {what} per request')
    if max_attributes is not None and attributes > max_attributes:
        raise OtlpTooLargeError(
            f'{attributes:,} attributes in one request, over the cap of {max_attributes:,} attributes per request'
        )


# ---------------------------------------------------------------------------------------------------
# OTLP/JSON spans


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
            resource = _resource(rs, rwhere)
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
                except _VALUE_ERRORS as e:
                    errors.append(LoadError(file, line, where, f'cannot be read: {type(e).__name__}: {str(e)[:200]}'))
    return spans, errors


def _resource(rs: Mapping[str, Any], where: str) -> dict[str, Any]:
    resource = rs.get('resource') or {}
    if not isinstance(resource, dict):
        raise SpanError(f'{where}.resource', 'expected an object')
    try:
        return _attributes_json(resource.get('attributes'), f'{where}.resource.attributes')
    except _VALUE_ERRORS as e:
        raise SpanError(f'{where}.resource', f'cannot be read: {type(e).__name__}') from None


def _span_json(raw: Any, where: str, resource: dict[str, Any], file: str, line: int) -> Span:
    if not isinstance(raw, dict):
        raise SpanError(where, f'expected a span object, got {type(raw).__name__}')
    trace_id = hex_id(_b64_id(_key(raw, 'traceId', 'trace_id'), 32), 32, f'{where}.traceId')
    span_id = hex_id(_b64_id(_key(raw, 'spanId', 'span_id'), 16), 16, f'{where}.spanId')
    parent = _key(raw, 'parentSpanId', 'parent_span_id')
    parent_id = hex_id(_b64_id(parent, 16), 16, f'{where}.parentSpanId') if parent else None
    name = raw.get('name')
    if not isinstance(name, str) or not name:
        raise SpanError(f'{where}.name', 'missing span name')
    start = nanos(_key(raw, 'startTimeUnixNano', 'start_time_unix_nano'), f'{where}.startTimeUnixNano')
    end = nanos(_key(raw, 'endTimeUnixNano', 'end_time_unix_nano'), f'{where}.endTimeUnixNano')
    attributes = _attributes_json(raw.get('attributes'), f'{where}.attributes')
    status = raw.get('status') or {}
    if not isinstance(status, dict):
        raise SpanError(f'{where}.status', 'expected an object')
    code = status.get('code', 0)
    if not isinstance(code, int | str) or isinstance(code, bool) or code not in _STATUS_CODES:
        raise SpanError(f'{where}.status.code', f'unknown status code {repr(code)[:40]} (0 unset, 1 ok, 2 error)')
    events: list[SpanEvent] = []
    raw_events = raw.get('events') or []
    if not isinstance(raw_events, list):
        raise SpanError(f'{where}.events', 'expected a list')
    for n, ev in enumerate(raw_events):
        ewhere = f'{where}.events[{n}]'
        if not isinstance(ev, dict) or not isinstance(ev.get('name'), str):
            raise SpanError(ewhere, 'an event needs a name')
        t = nanos(_key(ev, 'timeUnixNano', 'time_unix_nano') or 0, f'{ewhere}.timeUnixNano')
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
        status_message=str(status.get('message') or '')[:4000],
        events=tuple(events),
        resource=resource,
        file=file,
        line=line,
        path=where,
    )


def _b64_id(value: Any, length: int) -> Any:
    """An id in protobuf's JSON mapping (base64, as `MessageToJson` writes it) as the hex OTLP/JSON wants;
    anything else unchanged (and checked by `hex_id`)."""
    if isinstance(value, str) and len(value) != length and len(value) == 4 * ((length // 2 + 2) // 3):
        try:
            raw = base64.b64decode(value, validate=True)
        except ValueError:
            return value
        if len(raw) == length // 2:
            return raw.hex()
    return value


def hex_id(value: Any, length: int, where: str) -> str:
    """A trace (32) or span (16) id as lower-case hex; anything else is a `SpanError` at `where`."""
    if not isinstance(value, str) or len(value) != length or not _HEX.match(value):
        shown = repr(value)[:60]
        raise SpanError(where, f'expected {length} hex digits, got {shown}')
    if set(value) == {'0'}:
        raise SpanError(where, 'an all-zero id is invalid')
    return value.lower()


def nanos(value: Any, where: str) -> int:
    """Nanoseconds since the epoch (a number or its decimal text); anything else is a `SpanError` at `where`."""
    if isinstance(value, bool):
        raise SpanError(where, 'expected nanoseconds since the epoch, got a boolean')
    if isinstance(value, str) and len(value) > 30:
        raise SpanError(where, f'expected nanoseconds since the epoch, got {len(value):,} characters')
    try:
        out = int(value or 0)
    except (TypeError, ValueError, OverflowError):
        raise SpanError(where, f'expected nanoseconds since the epoch, got {repr(value)[:40]}') from None
    if not 0 <= out < 1 << 64:
        raise SpanError(where, f'{out} is not nanoseconds since the epoch (0 to 2^64)')
    return out


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
        return _int64(inner, f'{where}.{kind}')
    if kind in ('doubleValue', 'double_value'):
        if isinstance(inner, bool) or not isinstance(inner, int | float | str):
            raise SpanError(f'{where}.{kind}', 'expected a number')
        try:
            return double_value(float(inner))
        except (ValueError, OverflowError):
            raise SpanError(f'{where}.{kind}', f'expected a number, got {repr(inner)[:40]}') from None
    if kind in ('arrayValue', 'array_value'):
        values = inner.get('values', []) if isinstance(inner, dict) else None
        if not isinstance(values, list):
            raise SpanError(f'{where}.{kind}', 'expected {values: [...]}')
        return [_any_value_json(v, f'{where}.{kind}.values[{n}]') for n, v in enumerate(values)]
    if kind in ('kvlistValue', 'kvlist_value'):
        values = inner.get('values', []) if isinstance(inner, dict) else None
        return _attributes_json(values, f'{where}.{kind}.values')
    raise SpanError(where, f'unknown AnyValue kind {kind[:40]!r}')


def _int64(value: Any, where: str) -> int:
    """An OTLP `intValue` (a 64-bit integer, as a number or its decimal text)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise SpanError(where, f'expected an integer, got {repr(value)[:40]}')
    if isinstance(value, str) and len(value) > 24:
        raise SpanError(where, f'expected a 64-bit integer, got {len(value):,} characters')
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise SpanError(where, f'expected an integer, got {value!r}')
    try:
        out = int(value)
    except (ValueError, OverflowError):
        raise SpanError(where, f'expected an integer, got {repr(value)[:40]}') from None
    if not -(1 << 63) <= out < 1 << 64:
        raise SpanError(where, f'{repr(value)[:40]} does not fit a 64-bit integer')
    return out


def double_value(value: float) -> float | str:
    """A double attribute; NaN and ±Infinity (which OTLP allows and JSON has no number for) as the text
    `NaN`, `Infinity`, `-Infinity`, so both stores keep the same value (see the module docstring)."""
    if math.isfinite(value):
        return value
    return 'NaN' if math.isnan(value) else ('Infinity' if value > 0 else '-Infinity')


# ---------------------------------------------------------------------------------------------------
# Protobuf spans


def spans_from_protobuf(
    body: bytes, *, source: str = 'OTLP request', max_spans: int | None = None, max_attributes: int | None = None
) -> tuple[list[Span], list[LoadError]]:
    """The spans of a protobuf `ExportTraceServiceRequest` (OTLP/HTTP `application/x-protobuf`); over
    `max_spans` or `max_attributes`, an `OtlpTooLargeError` before any span is built."""
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError) as e:
        return [], [LoadError(source, 0, None, f'not a protobuf ExportTraceServiceRequest: {e}')]
    _check_caps(request, max_spans, max_attributes)
    spans: list[Span] = []
    errors: list[LoadError] = []
    for i, rs in enumerate(request.resource_spans):
        try:
            resource = {kv.key: _any_value_pb(kv.value) for kv in rs.resource.attributes}
        except _VALUE_ERRORS as e:
            errors.append(LoadError(source, 0, f'resourceSpans[{i}].resource', f'cannot be read: {type(e).__name__}'))
            continue
        for j, ss in enumerate(rs.scope_spans):
            for k, pb in enumerate(ss.spans):
                where = f'resourceSpans[{i}].scopeSpans[{j}].spans[{k}]'
                try:
                    spans.append(_span_pb(pb, where, resource, source))
                except SpanError as e:
                    errors.append(LoadError(source, 0, e.field, e.message))
                except _VALUE_ERRORS as e:
                    errors.append(LoadError(source, 0, where, f'cannot be read: {type(e).__name__}: {str(e)[:200]}'))
    return spans, errors


def _span_pb(pb: Any, where: str, resource: dict[str, Any], source: str) -> Span:
    trace_id = hex_id(pb.trace_id.hex(), 32, f'{where}.traceId')
    span_id = hex_id(pb.span_id.hex(), 16, f'{where}.spanId')
    parent = hex_id(pb.parent_span_id.hex(), 16, f'{where}.parentSpanId') if pb.parent_span_id else None
    if not pb.name:
        raise SpanError(f'{where}.name', 'missing span name')
    events = tuple(
        SpanEvent(ev.name, ev.time_unix_nano, {kv.key: _any_value_pb(kv.value) for kv in ev.attributes}) for ev in pb.events
    )
    return Span(
        trace_id,
        span_id,
        parent,
        pb.name,
        pb.start_time_unix_nano,
        pb.end_time_unix_nano,
        {kv.key: _any_value_pb(kv.value) for kv in pb.attributes},
        _STATUS_CODES.get(int(pb.status.code), 'unset'),
        pb.status.message[:4000],
        events,
        resource,
        source,
        0,
        where,
    )


def otlp_json_from_protobuf(request: Any) -> dict[str, Any]:
    """A protobuf `ExportTraceServiceRequest` (or `ExportLogsServiceRequest`) as the OTLP/JSON line the
    Collector's file exporter writes (ids as hex, enums as integers): how to capture spans into a file
    `traces.load_traces` reads."""
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

    data: dict[str, Any] = MessageToDict(request, use_integers_for_enums=True)

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            for key in ('traceId', 'spanId', 'parentSpanId'):
                if isinstance(node.get(key), str) and node[key]:
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
        return double_value(inner)
    return inner


# ---------------------------------------------------------------------------------------------------
# Log records (OTel events carrying content)


def logs_from_otlp_json(
    data: Any, *, file: str, line: int, max_records: int | None = None, max_attributes: int | None = None
) -> tuple[list[LogEvent], list[LoadError]]:
    """The events of one `ExportLogsServiceRequest` in OTLP/JSON (see the module docstring); over the caps, an
    `OtlpTooLargeError` before any record is read."""
    _check_caps(data, max_records, max_attributes, 'log records')
    if not isinstance(data, dict):
        return [], [LoadError(file, line, None, f'expected an ExportLogsServiceRequest object, got {type(data).__name__}')]
    resource_logs = _key(data, 'resourceLogs', 'resource_logs')
    if not isinstance(resource_logs, list):
        return [], [LoadError(file, line, 'resourceLogs', 'missing or not a list: not an OTLP log export')]
    out: list[LogEvent] = []
    errors: list[LoadError] = []
    for i, rl in enumerate(resource_logs):
        scope_logs = _key(rl, 'scopeLogs', 'scope_logs') if isinstance(rl, dict) else None
        if not isinstance(scope_logs, list):
            errors.append(LoadError(file, line, f'resourceLogs[{i}].scopeLogs', 'missing or not a list'))
            continue
        for j, sl in enumerate(scope_logs):
            records = _key(sl, 'logRecords', 'log_records') if isinstance(sl, dict) else None
            if not isinstance(records, list):
                errors.append(LoadError(file, line, f'resourceLogs[{i}].scopeLogs[{j}].logRecords', 'missing or not a list'))
                continue
            for k, raw in enumerate(records):
                where = f'resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]'
                try:
                    event = _log_json(raw, where, file, line)
                except SpanError as e:
                    errors.append(LoadError(file, line, e.field, e.message))
                    continue
                except _VALUE_ERRORS as e:
                    errors.append(LoadError(file, line, where, f'cannot be read: {type(e).__name__}: {str(e)[:200]}'))
                    continue
                if event is not None:
                    out.append(event)
    return out, errors


def _log_json(raw: Any, where: str, file: str, line: int) -> LogEvent | None:
    if not isinstance(raw, dict):
        raise SpanError(where, f'expected a log record object, got {type(raw).__name__}')
    attributes = _attributes_json(raw.get('attributes'), f'{where}.attributes')
    name = _key(raw, 'eventName', 'event_name') or attributes.pop(_EVENT_NAME_ATTRIBUTE, None)
    attributes.pop(_EVENT_NAME_ATTRIBUTE, None)
    if not isinstance(name, str) or not name:
        return None  # an ordinary log line, not an event
    body = _any_value_json(raw.get('body'), f'{where}.body')
    time = nanos(
        _key(raw, 'timeUnixNano', 'time_unix_nano') or _key(raw, 'observedTimeUnixNano', 'observed_time_unix_nano'),
        f'{where}.timeUnixNano',
    )
    trace, span = _key(raw, 'traceId', 'trace_id'), _key(raw, 'spanId', 'span_id')
    if not trace or not span:
        raise SpanError(
            where, f'event {name[:80]!r} has no trace and span id: it cannot be joined to the model call it describes'
        )
    trace_id = hex_id(_b64_id(trace, 32), 32, f'{where}.traceId')
    span_id = hex_id(_b64_id(span, 16), 16, f'{where}.spanId')
    return LogEvent(trace_id, span_id, SpanEvent(name, time, _event_attributes(attributes, body)), file, line, where)


def _event_attributes(attributes: dict[str, Any], body: Any) -> dict[str, Any]:
    """A log event's fields as a span event's attributes: the body's fields over the record's attributes; a body
    that is not a map is kept under `body`."""
    if isinstance(body, dict):
        return {**attributes, **body}
    if body is not None:
        return {**attributes, 'body': body}
    return attributes


def logs_from_protobuf(
    body: bytes, *, source: str = 'OTLP request', max_records: int | None = None, max_attributes: int | None = None
) -> tuple[list[LogEvent], list[LoadError]]:
    """The events of a protobuf `ExportLogsServiceRequest` (OTLP/HTTP `application/x-protobuf`)."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    try:
        request = ExportLogsServiceRequest.FromString(body)
    except (DecodeError, RecursionError) as e:
        return [], [LoadError(source, 0, None, f'not a protobuf ExportLogsServiceRequest: {e}')]
    _check_caps(request, max_records, max_attributes, 'log records')
    out: list[LogEvent] = []
    errors: list[LoadError] = []
    for i, rl in enumerate(request.resource_logs):
        for j, sl in enumerate(rl.scope_logs):
            for k, pb in enumerate(sl.log_records):
                where = f'resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]'
                try:
                    attributes = {kv.key: _any_value_pb(kv.value) for kv in pb.attributes}
                    name = getattr(pb, 'event_name', '') or attributes.pop(_EVENT_NAME_ATTRIBUTE, None)
                    attributes.pop(_EVENT_NAME_ATTRIBUTE, None)
                    if not isinstance(name, str) or not name:
                        continue
                    if not pb.trace_id or not pb.span_id:
                        raise SpanError(where, f'event {name[:80]!r} has no trace and span id: it cannot be joined')
                    event = SpanEvent(
                        name,
                        pb.time_unix_nano or pb.observed_time_unix_nano,
                        _event_attributes(attributes, _any_value_pb(pb.body)),
                    )
                    trace_id = hex_id(pb.trace_id.hex(), 32, f'{where}.traceId')
                    span_id = hex_id(pb.span_id.hex(), 16, f'{where}.spanId')
                    out.append(LogEvent(trace_id, span_id, event, source, 0, where))
                except SpanError as e:
                    errors.append(LoadError(source, 0, e.field, e.message))
                except _VALUE_ERRORS as e:
                    errors.append(LoadError(source, 0, where, f'cannot be read: {type(e).__name__}: {str(e)[:200]}'))
    return out, errors
