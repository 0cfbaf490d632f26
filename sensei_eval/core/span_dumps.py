"""OpenTelemetry SDK span dumps, and the one entry that reads any JSON value of a trace file.

`ReadableSpan.to_json()` (what `ConsoleSpanExporter` prints) writes ids as `0x…` hex, times as ISO 8601 and
the status as `UNSET`/`OK`/`ERROR`; frameworks write variants (ids as integers, times in nanoseconds, a
`parent` context; Phoenix nests attributes as objects and keeps `span_kind` beside them). `spans_from_value`
takes one JSON value of a trace file — an OTLP/JSON `ExportTraceServiceRequest` or `ExportLogsServiceRequest`,
an SDK span, a `{"spans": [...]}` document, or a list of any of these — and gives its spans and log events;
what cannot be read is a located `LoadError` and the rest goes on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sensei_eval.core.documents import looks_like_span
from sensei_eval.core.errors import LoadError
from sensei_eval.core.otlp import LogEvent, double_value, hex_id, logs_from_otlp_json, nanos, spans_from_otlp_json
from sensei_eval.core.span_model import Span, SpanError, SpanEvent, SpanStatus

__all__ = ('TraceValue', 'spans_from_value')

_SDK_STATUS: dict[str, SpanStatus] = {'UNSET': 'unset', 'OK': 'ok', 'ERROR': 'error'}
# What a hostile value can raise while a dumped span is read: caught per span.
_VALUE_ERRORS = (ValueError, TypeError, OverflowError, RecursionError, KeyError, AttributeError)

TraceValue = tuple[list[Span], list[LogEvent], list[LoadError]]


def spans_from_value(data: Any, *, file: str, line: int, where: str = '') -> TraceValue:
    """The spans, log events and errors of one JSON value of a trace file (see the module docstring)."""
    if isinstance(data, dict) and ('resourceSpans' in data or 'resource_spans' in data):
        spans, errors = spans_from_otlp_json(data, file=file, line=line)
        return spans, [], errors
    if isinstance(data, dict) and ('resourceLogs' in data or 'resource_logs' in data):
        logs, errors = logs_from_otlp_json(data, file=file, line=line)
        return [], logs, errors
    if isinstance(data, dict) and isinstance(data.get('spans'), list):
        return spans_from_value(data['spans'], file=file, line=line, where=f'{where}spans')
    if isinstance(data, list):
        all_spans: list[Span] = []
        logs_out: list[LogEvent] = []
        bad: list[LoadError] = []
        for i, item in enumerate(data):
            got, got_logs, errors = spans_from_value(item, file=file, line=line, where=f'{where}[{i}]')
            all_spans.extend(got)
            logs_out.extend(got_logs)
            bad.extend(errors)
        return all_spans, logs_out, bad
    if looks_like_span(data):
        span_where = where or '(span)'
        try:
            return [_sdk_span(data, span_where, file, line)], [], []
        except SpanError as e:
            return [], [], [LoadError(file, line, e.field, e.message)]
        except _VALUE_ERRORS as e:
            return [], [], [LoadError(file, line, span_where, f'cannot be read: {type(e).__name__}: {str(e)[:200]}')]
    shown = type(data).__name__ if not isinstance(data, dict) else 'an object with keys ' + ', '.join(list(data)[:5])
    return [], [], [LoadError(file, line, where or None, f'not an OTLP export or an SDK span: {shown[:200]}')]


def _sdk_span(raw: dict[str, Any], where: str, file: str, line: int) -> Span:
    """One span as the OpenTelemetry SDK's `ReadableSpan.to_json()` writes it, or a framework's variant."""
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
    raw_events = raw.get('events') or []
    if not isinstance(raw_events, list):
        raise SpanError(f'{where}.events', 'expected a list of events')
    for n, ev in enumerate(raw_events):
        if not isinstance(ev, dict) or not isinstance(ev.get('name'), str):
            raise SpanError(f'{where}.events[{n}]', 'an event needs a name')
        ev_attrs = ev.get('attributes') or {}
        if not isinstance(ev_attrs, dict):
            raise SpanError(f'{where}.events[{n}].attributes', 'expected an object of attributes')
        when = _sdk_time(ev.get('timestamp', ev.get('time_ns', 0)), f'{where}.events[{n}].timestamp')
        events.append(SpanEvent(ev['name'], when, dict(ev_attrs)))
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
        status_message=str((status.get('description') if isinstance(status, dict) else None) or '')[:4000],
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
    stack: list[tuple[str, dict[str, Any]]] = [(prefix, attributes)]
    while stack:  # a loop, not recursion: a hostile dump nests as deep as the JSON limit allows
        base, node = stack.pop()
        for key, value in node.items():
            name = f'{base}{key}'
            if isinstance(value, dict):
                stack.append((f'{name}.', value))
            else:
                out[name] = value
    return out


def _sdk_attribute(value: Any) -> Any:
    if isinstance(value, float):
        return double_value(value)
    return value


def _sdk_id(value: Any, length: int, where: str) -> str | None:
    if value is None or value == '' or value == 0:
        return None
    if isinstance(value, bool):
        raise SpanError(where, 'expected an id, got a boolean')
    if isinstance(value, int):
        if value < 0 or value >= 1 << (4 * length):
            raise SpanError(where, f'id does not fit {length} hex digits')
        return f'{value:0{length}x}'
    if isinstance(value, str):
        text = value.lower().removeprefix('0x')
        if len(text) < length and text and all(c in '0123456789abcdef' for c in text):
            text = text.rjust(length, '0')
        return hex_id(text, length, where)
    raise SpanError(where, f'expected an id, got {type(value).__name__}')


def _sdk_time(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, str) and not value.strip().isdigit():
        try:
            moment = datetime.fromisoformat(value.strip()[:64])
        except ValueError:
            raise SpanError(where, f'expected an ISO 8601 time or nanoseconds, got {value[:40]!r}') from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1_000_000) * 1000
    return nanos(value, where)
