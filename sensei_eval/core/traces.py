"""Agent traces in: OpenTelemetry spans (and the OTel log events that carry their content) as `QueryRecord`s.

Production agents already trace every run: pydantic-ai's instrumentation (directly, or through
`logfire.instrument_pydantic_ai()`) writes one `invoke_agent` span per run, carrying the whole message
history (`pydantic_ai.all_messages`) and the instructions (`gen_ai.system_instructions`), with `chat`
spans and `execute_tool` spans under it; the official GenAI and OpenInference instrumentations, OpenLLMetry,
Langfuse and the agent frameworks write the same run in their own shapes (`core.trace_readers`). Reading
those spans gives the same record the judges read from a JSONL line, so the same judges run on live traffic.

* Spans are grouped by trace. A trace is complete when its root (a span without parent) has arrived;
  exporters send spans as they end, so the root normally comes last, and a trace's spans may be split
  over several requests or file lines in any order. Nothing is built from a trace before its root.
* Each top-level agent run (an agent span with no agent span above it) becomes one record: its `query_id`
  is the trace id (or `trace:span` when a trace holds several runs), unless an attribute named by
  `TraceConfig.query_id_attribute` gives one. Agent name, prompt version, rating and user feedback come from
  attributes (or span events) named in `TraceConfig`; the run's status and timing go into `metadata`, which
  the sampler reads; the tools its model calls were offered into `tools`.
* A trace that holds no run but an agent being built (`create_agent`, as current OpenLLMetry LangChain
  writes at agent construction, a trace of its own) is skipped with a `LoadNotice`, not refused.
* A trace whose root never arrives is held for `TraceConfig.root_timeout_s` (for a file: until the end
  of the file). Then, if its agent-run span did arrive (only an outer wrapper span is missing), the
  record is built from it with an input warning; otherwise it is reported as an error and dropped —
  never a record made from half a run.
* A bad span (`core.otlp`) is a `LoadError` naming the file, the line and the field, and the rest goes on; a
  value that cannot be read inside a run (JSON nested past `sanitize.MAX_JSON_DEPTH`, a list index of 5,000
  digits, a rating of `NaN`) refuses that run only, with the field named. Building a trace is linear in its
  spans (`span_model.SpanIndex`): a chain of 10,000 nested spans is read in well under a second.
* OTel log events (`core.otlp.LogEvent`) are joined to their span by trace and span id before the trace is
  built; an event for a span that never arrived is an error on its line.

Sources: OTLP/JSON files as the OpenTelemetry Collector's file exporter writes them (one
`ExportTraceServiceRequest` or `ExportLogsServiceRequest` a line; `load_traces`, also reached through
`datasets.load_dataset` for `*.otlp.jsonl`), SDK span dumps (`core.span_dumps`), and the protobuf requests of
OTLP/HTTP (`core.otlp`, used by the service).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sensei_eval.core.documents import iter_json_values
from sensei_eval.core.errors import LoadError, LoadNotice, RecordFieldError, field_path, validation_load_error
from sensei_eval.core.otlp import (
    LogEvent,
    OtlpTooLargeError,
    count_otlp,
    logs_from_otlp_json,
    logs_from_protobuf,
    otlp_json_from_protobuf,
    spans_from_otlp_json,
    spans_from_protobuf,
)
from sensei_eval.core.records import LoadResult, QueryRecord, Rating
from sensei_eval.core.sanitize import JsonLimitError, clean_value, loads_limited
from sensei_eval.core.span_dumps import spans_from_value
from sensei_eval.core.span_model import Span, SpanError, SpanEvent, SpanIndex
from sensei_eval.core.trace_readers import agent_name, read_run

__all__ = (
    'MAX_REQUEST_ATTRIBUTES',
    'MAX_REQUEST_SPANS',
    'OTLP_SUFFIXES',
    'LogEvent',
    'OtlpTooLargeError',
    'Span',
    'SpanEvent',
    'TraceBuild',
    'TraceConfig',
    'attach_logs',
    'build_trace',
    'count_otlp',
    'has_root',
    'is_otlp_path',
    'iter_traces',
    'load_traces',
    'logs_from_otlp_json',
    'logs_from_protobuf',
    'otlp_json_from_protobuf',
    'spans_from_otlp_json',
    'spans_from_protobuf',
    'spans_from_value',
)

# Caps on one OTLP request (the service's defaults): the OpenTelemetry SDK's batch exporter sends at most
# 512 spans of at most 128 attributes each (its defaults), so these leave a wide margin for real
# exporters while a request of 570k spans (60 s and 2 GB to ingest) is refused at once.
MAX_REQUEST_SPANS = 10_000
MAX_REQUEST_ATTRIBUTES = 200_000

# File names the dataset loader hands to this module.
OTLP_SUFFIXES = ('.otlp.jsonl', '.otlp.json')

# What a hostile value inside one run can raise while its record is built: that run is refused with a
# located error, the trace's other runs and the file's other traces go on.
_RUN_ERRORS = (ValueError, TypeError, OverflowError, RecursionError, KeyError, AttributeError, IndexError)


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
# Log events joined to their spans


def attach_logs(spans: Sequence[Span], logs: Sequence[LogEvent]) -> tuple[list[Span], list[LogEvent]]:
    """`spans` with each log event added to the events of the span it names (by trace and span id), in time
    order; and the log events whose span is not among `spans`."""
    by_span: dict[tuple[str, str], list[SpanEvent]] = {}
    for log in logs:
        by_span.setdefault((log.trace_id, log.span_id), []).append(log.event)
    if not by_span:
        return list(spans), []
    out: list[Span] = []
    joined: set[tuple[str, str]] = set()
    for span in spans:
        key = (span.trace_id, span.span_id)
        extra = by_span.get(key)
        if extra and key not in joined:
            joined.add(key)
            events = tuple(sorted((*span.events, *extra), key=lambda e: e.time_ns))
            span = replace(span, events=events)
        out.append(span)
    left = [log for log in logs if (log.trace_id, log.span_id) not in joined]
    return out, left


# ---------------------------------------------------------------------------------------------------
# Traces into records


@dataclass
class TraceBuild:
    """What one trace gave: its records (one per top-level agent run), its located errors, and notices of
    what it skipped on purpose (`LoadNotice`, also in `errors` for callers that list everything)."""

    trace_id: str
    records: list[QueryRecord] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # query_id -> line of its agent-run span

    @property
    def skipped(self) -> bool:
        """Whether the trace held no run on purpose (every error a notice)."""
        return not self.records and bool(self.errors) and all(isinstance(e, LoadNotice) for e in self.errors)


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
    kept = [s for s in spans if s.attributes.get('logfire.span_type') != 'pending_span']  # Logfire's placeholders
    index = SpanIndex(kept)  # a span sent twice (an exporter retry) counts once
    ordered = sorted(index.by_id.values(), key=lambda s: (s.start_ns, s.end_ns))
    first = min(spans, key=lambda s: (s.file, s.line))
    root_missing = not has_root(ordered)
    runs = _runs(ordered, index)
    if not runs:
        _no_run(build, ordered, first, root_missing=root_missing, timed_out=timed_out, config=config)
        return build
    members = _members(runs, ordered, index)
    facts = _TraceFacts(ordered, config)
    for run in runs:
        query_id = _text_attr(facts.lookup(config.query_id_attribute, run))
        if query_id is None:
            query_id = trace_id if len(runs) == 1 else f'{trace_id}:{run.span_id}'
        try:
            record = _record(run, members[run.span_id], index, facts, query_id)
        except SpanError as e:
            build.errors.append(LoadError(run.file, run.line, e.field, e.message, query_id))
            continue
        except RecordFieldError as e:
            build.errors.append(LoadError(run.file, run.line, f'{run.path}.{e.field}', e.message, query_id))
            continue
        except ValidationError as e:
            build.errors.append(validation_load_error(run.file, run.line, e, query_id))
            continue
        except _RUN_ERRORS as e:
            message = f'the run cannot be read: {type(e).__name__}: {str(e)[:200]}'
            build.errors.append(LoadError(run.file, run.line, run.path or None, message, query_id))
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


def _no_run(
    build: TraceBuild, ordered: Sequence[Span], first: Span, *, root_missing: bool, timed_out: bool, config: TraceConfig
) -> None:
    """Why a trace gave no run: a notice when it only built an agent, else an error."""
    trace_id = build.trace_id
    setup = [s for s in ordered if s.kind == 'setup']
    if setup and all(s.kind in ('setup', 'other') for s in ordered):
        names = ', '.join(sorted({repr(agent_name(s) or s.name) for s in setup})[:3])
        message = f'trace {trace_id}: skipped, it holds no agent run, only an agent being built ({names}; {setup[0].operation})'
        build.errors.append(LoadNotice(first.file, first.line, first.path or None, message))
        return
    what = 'no agent-run span (invoke_agent or an OpenInference AGENT), model call or tool span'
    why = f'{what} arrived' if root_missing else f'the trace has {what}'
    if root_missing and timed_out:
        waited = f'the root span never arrived within {config.root_timeout_s:g} s'
        why = f'{waited} and no agent-run span arrived; its {len(ordered)} span(s) are dropped'
    build.errors.append(LoadError(first.file, first.line, first.path or None, f'trace {trace_id}: {why}'))


def _runs(ordered: Sequence[Span], index: SpanIndex) -> list[Span]:
    """The trace's agent runs: each top-level agent span (no agent span above it); several of them under one
    OpenInference CHAIN root (an agent workflow with hand-offs) are one run, the root. A trace with no agent
    span but model calls or tool spans (a raw client, traced per call) is one run: its root span."""
    runs = [s for s in ordered if s.kind == 'agent' and not index.has_agent_ancestor(s)]
    roots = [s for s in ordered if s.parent_span_id is None]
    if len(runs) > 1 and len(roots) == 1 and roots[0].kind == 'chain':
        return roots
    if runs:
        return runs
    if roots and any(s.kind in ('llm', 'tool', 'retriever') for s in ordered):
        return roots[:1]
    return []


def _members(runs: Sequence[Span], ordered: Sequence[Span], index: SpanIndex) -> dict[str, list[Span]]:
    """Each run's spans: its descendants, plus spans whose parent never arrived (an exporter that dropped
    an intermediate span) that fall within the run's time (or the only run)."""
    out = {run.span_id: index.descendants(run) for run in runs}
    placed = {s.span_id for spans in out.values() for s in spans} | {run.span_id for run in runs}
    for span in ordered:
        if span.span_id in placed or not index.orphan(span):
            continue
        home = next((r for r in runs if r.start_ns <= span.start_ns <= max(r.end_ns, r.start_ns)), None)
        if home is None and len(runs) == 1:
            home = runs[0]
        if home is not None:
            for s in [span, *index.descendants(span)]:
                if s.span_id not in placed:
                    out[home.span_id].append(s)
                    placed.add(s.span_id)
    for spans in out.values():
        spans.sort(key=lambda s: (s.start_ns, s.end_ns))
    return out


class _TraceFacts:
    """Attribute look-ups and rating events over a whole trace, each computed once per trace (not per run)."""

    def __init__(self, ordered: Sequence[Span], config: TraceConfig) -> None:
        self.config = config
        self.latest_first = sorted(ordered, key=lambda s: s.end_ns, reverse=True)
        self._found: dict[str, tuple[Any, Span] | None] = {}
        events = [(e, s) for s in ordered for e in s.events if e.name == config.rating_event]
        self.rating_events = sorted(events, key=lambda p: p[0].time_ns)

    def lookup(self, name: str, run: Span) -> tuple[Any, Span] | None:
        """An attribute: on the run span first, then on any span of the trace (latest ending first)."""
        if name in run.attributes:
            return run.attributes[name], run
        if name not in self._found:
            self._found[name] = next(((s.attributes[name], s) for s in self.latest_first if name in s.attributes), None)
        return self._found[name]


def _text_attr(found: tuple[Any, Span] | None) -> str | None:
    if found is None or found[0] is None:
        return None
    value = found[0]
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.strip() or None


def _record(run: Span, inner: Sequence[Span], index: SpanIndex, facts: _TraceFacts, query_id: str) -> QueryRecord:
    config = facts.config
    content = read_run(run, inner, index)
    if not content.messages:
        raise SpanError(
            run.path or run.name,
            'the agent run carries no messages: no model call recorded its input or output, and the run span has '
            'no input (instrumented without message content?)',
        )
    problems: list[tuple[str, str]] = []
    rating = _rating(run, facts, problems)
    agent = (
        _text_attr(facts.lookup(config.agent_attribute, run))
        or _text_attr(facts.lookup('agent_name', run))
        or _text_attr(facts.lookup('agent.name', run))
        or agent_name(run)
        or (content.agents[0] if content.agents else None)
    )
    feedback = _text_attr(facts.lookup(config.feedback_attribute, run))
    failed_tools = sum(1 for s in inner if s.kind in ('tool', 'retriever') and s.status == 'error')
    model = run.attributes.get('model_name') or next(
        (
            s.attributes.get(k)
            for s in inner
            if s.kind == 'llm'
            for k in ('gen_ai.request.model', 'gen_ai.response.model', 'llm.model_name', 'langfuse.observation.model.name')
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
        metadata['agent'] = agent[:255]
    if feedback:
        metadata['feedback'] = feedback
    if isinstance(model, str) and model:
        metadata['model'] = model[:255]
    if content.usage:
        metadata['usage'] = content.usage
    if content.session_id:
        metadata['session_id'] = content.session_id[:255]
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
            'prompt_version': _text_attr(facts.lookup(config.prompt_version_attribute, run)),
            'tools': content.tools,
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


def _rating(run: Span, facts: _TraceFacts, problems: list[tuple[str, str]]) -> dict[str, Any] | None:
    config = facts.config
    if facts.rating_events:
        event, span = facts.rating_events[-1]
        where = f'{span.path}.events[{config.rating_event}]'
        attrs = dict(event.attributes)
        value: Any = attrs.get('rating', attrs)
    else:
        found = facts.lookup(config.rating_attribute, run)
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
        if not math.isfinite(value) or value != int(value) or not 1 <= value <= 5:
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
    """Read a trace file into records: OTLP/JSON (one `ExportTraceServiceRequest` or `ExportLogsServiceRequest`
    a line, or one pretty-printed), or OpenTelemetry SDK span dumps (`span.to_json()` objects one after another,
    a JSON array of them, or a `{"spans": [...]}` document); see `span_dumps.spans_from_value`. Log events are
    joined to their spans (`attach_logs`).

    The end of the file is the root span's deadline: a trace still without root is then built from its
    finished agent run or reported (see the module docstring). Errors name the file, line and field; a trace
    skipped on purpose is a `LoadNotice` among them."""
    path = Path(path)
    config = config or TraceConfig()
    errors: list[LoadError] = []
    spans: list[Span] = []
    logs: list[LogEvent] = []
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
        got, got_logs, value_errors = spans_from_value(data, file=str(path), line=lineno)
        errors.extend(value_errors)
        spans.extend(got)
        logs.extend(got_logs)
    spans, unjoined = attach_logs(spans, logs)
    for log in unjoined[:20]:
        message = f'log event {log.event.name!r} names span {log.span_id} of trace {log.trace_id}, which is not in the file'
        errors.append(LoadError(log.file, log.line, log.path, message))
    if len(unjoined) > 20:
        errors.append(LoadError(str(path), 0, None, f'{len(unjoined) - 20} more log event(s) name spans not in the file'))
    traces: dict[str, list[Span]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    records: list[QueryRecord] = []
    lines: dict[str, int] = {}
    for trace_spans in traces.values():
        build = build_trace(trace_spans, config, timed_out=not has_root(trace_spans))
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
    """`load_traces` as the dataset stream `datasets.iter_dataset` yields: errors (and notices), then records;
    a query_id already in `seen` (query id -> line) is a duplicate error, and each record's line is added to it."""
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
