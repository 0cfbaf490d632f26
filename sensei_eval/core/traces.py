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
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sensei_eval.core.errors import InputError, LoadError, RecordFieldError, field_path, json_error_text, validation_load_error
from sensei_eval.core.records import LoadResult, QueryRecord, Rating
from sensei_eval.core.sanitize import JsonLimitError, clean_value, loads_limited

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

SpanStatus = Literal['unset', 'ok', 'error']
_HEX = re.compile(r'^[0-9a-fA-F]+$')
_STATUS_CODES: dict[Any, SpanStatus] = {
    0: 'unset', 1: 'ok', 2: 'error',
    'STATUS_CODE_UNSET': 'unset', 'STATUS_CODE_OK': 'ok', 'STATUS_CODE_ERROR': 'error',
}  # fmt: skip


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


@dataclass(frozen=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Span:
    """One span, decoded from OTLP JSON or protobuf; `file`/`line`/`path` say where it came from."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: SpanStatus = 'unset'
    status_message: str = ''
    events: tuple[SpanEvent, ...] = ()
    resource: dict[str, Any] = field(default_factory=dict)
    file: str = ''
    line: int = 0
    path: str = ''

    def to_json(self) -> dict[str, Any]:
        """A plain JSON form (what the service buffers in its store)."""
        return {
            'trace_id': self.trace_id, 'span_id': self.span_id, 'parent_span_id': self.parent_span_id,
            'name': self.name, 'start_ns': self.start_ns, 'end_ns': self.end_ns, 'attributes': self.attributes,
            'status': self.status, 'status_message': self.status_message,
            'events': [{'name': e.name, 'time_ns': e.time_ns, 'attributes': e.attributes} for e in self.events],
            'resource': self.resource, 'file': self.file, 'line': self.line, 'path': self.path,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Span:
        events = tuple(SpanEvent(e['name'], int(e['time_ns']), dict(e['attributes'])) for e in data.get('events', ()))
        return cls(
            trace_id=data['trace_id'], span_id=data['span_id'], parent_span_id=data.get('parent_span_id'),
            name=data['name'], start_ns=int(data['start_ns']), end_ns=int(data['end_ns']),
            attributes=dict(data['attributes']), status=data.get('status', 'unset'),
            status_message=data.get('status_message', ''), events=events, resource=dict(data.get('resource', {})),
            file=data.get('file', ''), line=int(data.get('line', 0)), path=data.get('path', ''),
        )  # fmt: skip

    @property
    def operation(self) -> str:
        """The GenAI operation (`invoke_agent`, `chat`, `execute_tool`), from the attribute or the name."""
        op = self.attributes.get('gen_ai.operation.name')
        if isinstance(op, str) and op:
            return op
        if self.name.startswith('invoke_agent') or self.name in ('agent run', 'agent_run'):
            return 'invoke_agent'
        return self.name.split(' ', 1)[0]


class _SpanError(InputError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


# ---------------------------------------------------------------------------------------------------
# Decoding OTLP


class OtlpTooLargeError(InputError):
    """An OTLP request over a span or attribute cap (`count_otlp`), refused before any span is built."""


def count_otlp(request: Any) -> tuple[int, int]:
    """How many spans and attributes (span, event and resource attributes, top level) an
    `ExportTraceServiceRequest` carries, as OTLP/JSON (a dict) or protobuf; counted without building
    spans, so a request over the caps costs no more than its parse. Malformed parts count as 0."""
    if isinstance(request, dict):
        spans = attributes = 0
        for rs in _list(_key(request, 'resourceSpans', 'resource_spans')):
            resource = rs.get('resource') if isinstance(rs, dict) else None
            attributes += len(_list(resource.get('attributes'))) if isinstance(resource, dict) else 0
            for ss in _list(_key(rs, 'scopeSpans', 'scope_spans') if isinstance(rs, dict) else None):
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
        except _SpanError as e:
            errors.append(LoadError(file, line, e.field, e.message))
            continue
        scope_spans = _key(rs, 'scopeSpans', 'scope_spans') or []
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
                except _SpanError as e:
                    errors.append(LoadError(file, line, e.field, e.message))
    return spans, errors


def _key(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data[camel] if camel in data else data.get(snake)


def _span_json(raw: Any, where: str, resource: dict[str, Any], file: str, line: int) -> Span:
    if not isinstance(raw, dict):
        raise _SpanError(where, f'expected a span object, got {type(raw).__name__}')
    trace_id = _hex_id(_key(raw, 'traceId', 'trace_id'), 32, f'{where}.traceId')
    span_id = _hex_id(_key(raw, 'spanId', 'span_id'), 16, f'{where}.spanId')
    parent = _key(raw, 'parentSpanId', 'parent_span_id')
    parent_id = _hex_id(parent, 16, f'{where}.parentSpanId') if parent else None
    name = raw.get('name')
    if not isinstance(name, str) or not name:
        raise _SpanError(f'{where}.name', 'missing span name')
    start = _nanos(_key(raw, 'startTimeUnixNano', 'start_time_unix_nano'), f'{where}.startTimeUnixNano')
    end = _nanos(_key(raw, 'endTimeUnixNano', 'end_time_unix_nano'), f'{where}.endTimeUnixNano')
    attributes = _attributes_json(raw.get('attributes'), f'{where}.attributes')
    status = raw.get('status') or {}
    if not isinstance(status, dict):
        raise _SpanError(f'{where}.status', 'expected an object')
    code = status.get('code', 0)
    if code not in _STATUS_CODES:
        raise _SpanError(f'{where}.status.code', f'unknown status code {code!r} (0 unset, 1 ok, 2 error)')
    events: list[SpanEvent] = []
    for n, ev in enumerate(raw.get('events') or []):
        ewhere = f'{where}.events[{n}]'
        if not isinstance(ev, dict) or not isinstance(ev.get('name'), str):
            raise _SpanError(ewhere, 'an event needs a name')
        t = _nanos(_key(ev, 'timeUnixNano', 'time_unix_nano') or 0, f'{ewhere}.timeUnixNano')
        events.append(SpanEvent(ev['name'], t, _attributes_json(ev.get('attributes'), f'{ewhere}.attributes')))
    return Span(
        trace_id, span_id, parent_id, name, start, end, attributes, _STATUS_CODES[code], str(status.get('message') or ''),
        tuple(events), resource, file, line, where,
    )  # fmt: skip


def _hex_id(value: Any, length: int, where: str) -> str:
    if not isinstance(value, str) or len(value) != length or not _HEX.match(value):
        shown = repr(value)[:60]
        raise _SpanError(where, f'expected {length} hex digits, got {shown}')
    if set(value) == {'0'}:
        raise _SpanError(where, 'an all-zero id is invalid')
    return value.lower()


def _nanos(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise _SpanError(where, 'expected nanoseconds since the epoch, got a boolean')
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise _SpanError(where, f'expected nanoseconds since the epoch, got {repr(value)[:40]}') from None


def _attributes_json(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise _SpanError(where, 'expected a list of {key, value}')
    out: dict[str, Any] = {}
    for n, kv in enumerate(raw):
        if not isinstance(kv, dict) or not isinstance(kv.get('key'), str):
            raise _SpanError(f'{where}[{n}]', 'expected {key, value}')
        out[kv['key']] = _any_value_json(kv.get('value'), f'{where}[{n}].value')
    return out


def _any_value_json(value: Any, where: str) -> Any:
    if value is None or value == {}:
        return None
    if not isinstance(value, dict) or len(value) != 1:
        raise _SpanError(where, 'expected an AnyValue with exactly one of stringValue, intValue, boolValue, …')
    kind, inner = next(iter(value.items()))
    if kind in ('stringValue', 'string_value', 'bytesValue', 'bytes_value'):
        if not isinstance(inner, str):
            raise _SpanError(f'{where}.{kind}', 'expected a string')
        return inner
    if kind in ('boolValue', 'bool_value'):
        if not isinstance(inner, bool):
            raise _SpanError(f'{where}.{kind}', 'expected true or false')
        return inner
    if kind in ('intValue', 'int_value'):
        try:
            return int(inner)
        except (TypeError, ValueError):
            raise _SpanError(f'{where}.{kind}', f'expected an integer, got {repr(inner)[:40]}') from None
    if kind in ('doubleValue', 'double_value'):
        if isinstance(inner, bool) or not isinstance(inner, int | float | str):
            raise _SpanError(f'{where}.{kind}', 'expected a number')
        try:
            return _double(float(inner))
        except ValueError:
            raise _SpanError(f'{where}.{kind}', f'expected a number, got {repr(inner)[:40]}') from None
    if kind in ('arrayValue', 'array_value'):
        values = inner.get('values', []) if isinstance(inner, dict) else None
        if not isinstance(values, list):
            raise _SpanError(f'{where}.{kind}', 'expected {values: [...]}')
        return [_any_value_json(v, f'{where}.{kind}.values[{n}]') for n, v in enumerate(values)]
    if kind in ('kvlistValue', 'kvlist_value'):
        values = inner.get('values', []) if isinstance(inner, dict) else None
        return _attributes_json(values, f'{where}.{kind}.values')
    raise _SpanError(where, f'unknown AnyValue kind {kind!r}')


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
                        raise _SpanError(f'{where}.name', 'missing span name')
                except _SpanError as e:
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
    runs = [s for s in ordered if s.operation == 'invoke_agent' and not _has_agent_ancestor(s, by_id)]
    root_missing = not has_root(ordered)
    if not runs:
        why = 'no agent-run span (invoke_agent) arrived' if root_missing else 'the trace has no agent-run span (invoke_agent)'
        if root_missing and timed_out:
            waited = f'the root span never arrived within {config.root_timeout_s:g} s'
            why = f'{waited} and {why}; its {len(ordered)} span(s) are dropped'
        build.errors.append(LoadError(first.file, first.line, first.path or None, f'trace {trace_id}: {why}'))
        return build
    children = _children(ordered)
    for run in runs:
        query_id = _text_attr(_lookup(config.query_id_attribute, run, ordered))
        if query_id is None:
            query_id = trace_id if len(runs) == 1 else f'{trace_id}:{run.span_id}'
        try:
            record = _record(run, _descendants(run, children), ordered, query_id, config)
        except _SpanError as e:
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


def _has_agent_ancestor(span: Span, by_id: Mapping[str, Span]) -> bool:
    seen: set[str] = set()
    parent = span.parent_span_id
    while parent is not None and parent in by_id and parent not in seen:
        seen.add(parent)
        node = by_id[parent]
        if node.operation == 'invoke_agent':
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
    messages = _messages(run, inner)
    problems: list[tuple[str, str]] = []
    rating = _rating(run, trace, config, problems)
    agent = _text_attr(_lookup(config.agent_attribute, run, trace)) or _text_attr(_lookup('agent_name', run, trace))
    feedback = _text_attr(_lookup(config.feedback_attribute, run, trace))
    failed_tools = sum(1 for s in inner if s.operation == 'execute_tool' and s.status == 'error')
    model = run.attributes.get('model_name') or next(
        (s.attributes.get('gen_ai.request.model') for s in inner if s.operation == 'chat'), None
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
    if problems:
        metadata['_problems'] = problems
    data, replaced = clean_value(
        {
            'query_id': query_id,
            'message_format': 'openai',
            'messages': messages,
            'rating': rating,
            'prompt_version': _text_attr(_lookup(config.prompt_version_attribute, run, trace)),
            'metadata': metadata,
        }
    )
    record = QueryRecord.model_validate(data)
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


def _messages(run: Span, inner: Sequence[Span]) -> list[dict[str, Any]]:
    """The run's history as chat-completions messages: `pydantic_ai.all_messages` on the run span, else
    the last model request's input and output; tool results only an `execute_tool` span saw are added."""
    otel = _json_attr(run, 'pydantic_ai.all_messages')
    instructions = _json_attr(run, 'gen_ai.system_instructions')
    if otel is None:
        chats = [s for s in inner if s.operation == 'chat' and 'gen_ai.input.messages' in s.attributes]
        if chats:
            last = max(chats, key=lambda s: s.end_ns)
            otel = list(_json_attr(last, 'gen_ai.input.messages') or []) + list(_json_attr(last, 'gen_ai.output.messages') or [])
            instructions = instructions if instructions is not None else _json_attr(last, 'gen_ai.system_instructions')
    if not otel:
        raise _SpanError(
            f'{run.path}.attributes[pydantic_ai.all_messages]',
            'the agent run carries no messages (instrumented with include_content=False, or not a pydantic-ai run)',
        )
    if not isinstance(otel, list):
        raise _SpanError(f'{run.path}.attributes[pydantic_ai.all_messages]', 'expected a JSON list of messages')
    out: list[dict[str, Any]] = []
    system = _instruction_text(instructions)
    if system:
        out.append({'role': 'system', 'content': system})
    out.extend(_from_otel_messages(otel, f'{run.path}.attributes[pydantic_ai.all_messages]'))
    return _add_tool_results(out, inner)


def _json_attr(span: Span, name: str) -> Any:
    value = span.attributes.get(name)
    if not isinstance(value, str):
        return value
    where = f'{span.path}.attributes[{name}]'
    try:
        # the one nesting limit (sanitize.MAX_JSON_DEPTH): a message history 100k levels deep is this run's
        # located error, not a RecursionError that loses the request
        return loads_limited(value, allow_nan=True)
    except JsonLimitError as e:
        raise _SpanError(f'{where}.{e.field}' if e.field else where, e.message) from None
    except json.JSONDecodeError as e:
        raise _SpanError(where, f'not valid JSON (truncated by an attribute limit?): {json_error_text(e)}') from None
    except ValueError as e:  # an integer over Python's digit limit
        raise _SpanError(where, f'not valid JSON: {e}') from None


def _instruction_text(instructions: Any) -> str:
    if isinstance(instructions, str):
        return instructions
    if isinstance(instructions, list):
        return '\n\n'.join(p['content'] for p in instructions if isinstance(p, dict) and isinstance(p.get('content'), str))
    return ''


def _from_otel_messages(messages: Sequence[Any], where: str) -> Iterator[dict[str, Any]]:
    """GenAI semantic-convention messages (`{role, parts: [{type, …}]}`) as chat-completions messages."""
    for i, msg in enumerate(messages):
        mwhere = f'{where}[{i}]'
        if not isinstance(msg, dict) or not isinstance(msg.get('parts'), list):
            raise _SpanError(mwhere, 'expected {role, parts: [...]}')
        role = msg.get('role')
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for j, part in enumerate(msg['parts']):
            kind = part.get('type') if isinstance(part, dict) else None
            if kind == 'text':
                texts.append(str(part.get('content', '')))
            elif kind == 'tool_call':
                args = part.get('arguments')
                arguments = args if isinstance(args, str) else json.dumps(args if args is not None else {})
                calls.append(
                    {'id': part.get('id'), 'type': 'function', 'function': {'name': part.get('name'), 'arguments': arguments}}
                )
            elif kind == 'tool_call_response':
                if texts and role != 'assistant':
                    yield {'role': 'user', 'content': '\n'.join(texts)}
                    texts = []
                result = part.get('result')
                content = result if isinstance(result, str) else json.dumps(result, default=str)
                yield {'role': 'tool', 'tool_call_id': part.get('id'), 'content': content}
            elif kind == 'thinking':
                continue  # the model's hidden reasoning: not part of what the agent did or said
            elif isinstance(kind, str):
                texts.append(f'[{kind} part]')  # images, files, native tools: named, not judged
            else:
                raise _SpanError(f'{mwhere}.parts[{j}]', 'expected a part object with a `type`')
        if role == 'assistant':
            if texts or calls:
                out: dict[str, Any] = {'role': 'assistant', 'content': '\n'.join(texts) or None}
                if calls:
                    out['tool_calls'] = calls
                yield out
        elif texts:
            yield {'role': 'system' if role == 'system' else 'user', 'content': '\n'.join(texts)}


def _add_tool_results(messages: list[dict[str, Any]], inner: Sequence[Span]) -> list[dict[str, Any]]:
    """Results of calls the history leaves unanswered, taken from their `execute_tool` spans."""
    answered = {m.get('tool_call_id') for m in messages if m.get('role') == 'tool'}
    results: dict[str, str] = {}
    for span in inner:
        call_id = span.attributes.get('gen_ai.tool.call.id')
        if span.operation == 'execute_tool' and isinstance(call_id, str) and call_id not in answered:
            result = span.attributes.get('gen_ai.tool.call.result')
            if result is None and span.status == 'error':
                result = f'error: {span.status_message or "the tool failed"}'
            if result is not None:
                results[call_id] = result if isinstance(result, str) else json.dumps(result, default=str)
    if not results:
        return messages
    out: list[dict[str, Any]] = []
    for message in messages:
        out.append(message)
        for call in message.get('tool_calls') or []:
            if call.get('id') in results:
                out.append({'role': 'tool', 'tool_call_id': call['id'], 'content': results[call['id']]})
    return out


# ---------------------------------------------------------------------------------------------------
# Files


def is_otlp_path(path: str | Path) -> bool:
    return str(path).lower().endswith(OTLP_SUFFIXES)


def load_traces(path: str | Path, config: TraceConfig | None = None) -> LoadResult:
    """Read an OTLP/JSON file (one `ExportTraceServiceRequest` a line) into records.

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
    for lineno, line in enumerate(raw.split(b'\n'), start=1):
        if not line.strip():
            continue
        try:
            data = loads_limited(line, allow_nan=True)
        except JsonLimitError as e:
            errors.append(LoadError(str(path), lineno, e.field, e.message))
            continue
        except (UnicodeDecodeError, ValueError) as e:
            message = f'not valid JSON: {json_error_text(e) if isinstance(e, json.JSONDecodeError) else e}'
            errors.append(LoadError(str(path), lineno, None, message))
            continue
        spans, span_errors = spans_from_otlp_json(data, file=str(path), line=lineno)
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
