"""Agent traces: `POST /v1/traces` and `POST /v1/logs` (OTLP/HTTP, protobuf or JSON), and
`GET /api/v1/traces[/{trace_id}]`.

Point any OpenTelemetry OTLP/HTTP exporter (Logfire included) at the service's base URL: the exporter
appends `/v1/traces` itself. The answer is the OTLP `ExportTraceServiceResponse`, in the request's
encoding; gzip bodies are inflated, up to 20 times the body limit. Spans refused (malformed, or late
for a trace already built) are counted in `partial_success` with the reasons, and the rest are kept; so
are the spans of a trace this request completed that gave no run (`rejected`, with the first reason).
A body that is not an OTLP request at all is a 400 (exporters do not retry it); JSON nested past
`sanitize.MAX_JSON_DEPTH` (also once a gzip body is inflated) a 422; a request over
`otlp_max_spans` spans or `otlp_max_attributes` attributes a 413 naming the cap, before any span is
built; JSON holding more values than `ServiceSettings.otlp_max_values` (counted after inflating, before
parsing) a 413 too. Deep JSON inside an attribute (`pydantic_ai.all_messages`) refuses only its run, with a located
error; any other value that cannot be read (an `intValue` past 64 bits, a 5,000-digit list index in an
attribute key, a rating of `NaN`) is a located error for its span or run only, answered in `partial_success`:
the request's other traces are kept, never a 500. A NaN or ±Infinity double attribute is kept as the text
`NaN` / `Infinity` / `-Infinity` on both stores. Decoding a protobuf body, inflating gzip and parsing JSON run
off the event loop.

`POST /v1/logs` takes the OTel log events instrumentations send content in (`ExportLogsServiceRequest`, the
same encodings and limits, its caps counted in log records): each event is buffered with its trace and joined
to its span when the trace is built (`trace_ingest.ingest_logs`). Log events for a trace already built are
refused as late (`rejectedLogRecords`). The spans are written in batches (`trace_ingest.BATCH_SPANS`). The route needs the
token like every write. How spans become sessions and which are judged: `trace_ingest`.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from pydantic import BaseModel
from sqlalchemy import func, select

from sensei_eval.core.sanitize import JsonLimitError, JsonTooManyValuesError, JsonValueCounter, loads_limited
from sensei_eval.core.traces import (
    OtlpTooLargeError,
    logs_from_otlp_json,
    logs_from_protobuf,
    spans_from_otlp_json,
    spans_from_protobuf,
)
from sensei_eval.service.guard import OTLP_LOGS_PATH, OTLP_TRACES_PATH
from sensei_eval.service.schemas import Limit, Offset
from sensei_eval.service.state import State, Writer
from sensei_eval.service.store import SamplingRow, Store, TraceRow
from sensei_eval.service.trace_ingest import ingest_logs, ingest_spans

__all__ = ('router',)

router = APIRouter(tags=['traces'])

_PROTOBUF = 'application/x-protobuf'
_MAX_MESSAGES = 10
# How much larger than the body limit a gzip request may inflate (span JSON compresses about 10:1).
_INFLATE_FACTOR = 20


class SamplingOut(BaseModel):
    """The sampler's decision on one session made from a trace."""

    session_id: str
    agent: str | None
    sampled: bool
    reason: str
    detail: str
    judge_calls: int
    judges: list[str]
    evaluation_id: str | None
    decided_at_us: int


class TraceOut(BaseModel):
    trace_id: str
    status: str
    span_count: int
    root_seen: bool
    first_seen_us: int
    updated_at_us: int
    error: str | None
    runs: list[SamplingOut]


class TracePage(BaseModel):
    items: list[TraceOut]
    total: int
    limit: int
    offset: int


@router.post(OTLP_TRACES_PATH, summary='OTLP/HTTP trace export (protobuf or JSON)')
async def export_traces(request: Request, user: Writer, state: State) -> Response:
    protobuf, data = await _otlp_body(request, state)
    caps = {'max_spans': state.settings.otlp_max_spans, 'max_attributes': state.settings.otlp_max_attributes}
    try:
        if protobuf:
            assert isinstance(data, bytes)
            spans, errors = await asyncio.to_thread(spans_from_protobuf, data, source='POST /v1/traces', **caps)
            if errors and errors[0].field is None and not spans:
                raise HTTPException(400, errors[0].message)
        else:
            spans, errors = spans_from_otlp_json(data, file='POST /v1/traces', line=0, **caps)
            if errors and errors[0].field in (None, 'resourceSpans') and not spans:
                raise HTTPException(400, errors[0].message)
    except OtlpTooLargeError as e:
        raise HTTPException(413, f'{e}; send smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)') from None
    result = await asyncio.to_thread(ingest_spans, state.store, spans, state.settings, user=user)
    if result.evaluations:
        state.wake()
    refused, reasons = result.partial_success()
    rejected = refused + len(errors)
    messages = [f'{e.field or "request"}: {e.message}' for e in errors] + reasons
    return _answer(protobuf, rejected, '; '.join(messages[:_MAX_MESSAGES]))


@router.post(OTLP_LOGS_PATH, summary='OTLP/HTTP log export (protobuf or JSON): content sent as OTel events')
async def export_logs(request: Request, user: Writer, state: State) -> Response:
    protobuf, data = await _otlp_body(request, state)
    caps = {'max_records': state.settings.otlp_max_spans, 'max_attributes': state.settings.otlp_max_attributes}
    try:
        if protobuf:
            assert isinstance(data, bytes)
            logs, errors = await asyncio.to_thread(logs_from_protobuf, data, source='POST /v1/logs', **caps)
            if errors and errors[0].field is None and not logs:
                raise HTTPException(400, errors[0].message)
        else:
            logs, errors = logs_from_otlp_json(data, file='POST /v1/logs', line=0, **caps)
            if errors and errors[0].field in (None, 'resourceLogs') and not logs:
                raise HTTPException(400, errors[0].message)
    except OtlpTooLargeError as e:
        raise HTTPException(413, f'{e}; send smaller batches (OTEL_BLRP_MAX_EXPORT_BATCH_SIZE)') from None
    result = await asyncio.to_thread(ingest_logs, state.store, logs, state.settings, user=user)
    if result.evaluations:
        state.wake()
    refused, reasons = result.partial_success()
    messages = [f'{e.field or "request"}: {e.message}' for e in errors] + reasons
    return _answer(protobuf, refused + len(errors), '; '.join(messages[:_MAX_MESSAGES]), logs=True)


async def _otlp_body(request: Request, state: Any) -> tuple[bool, Any]:
    """An OTLP request's body: (True, the protobuf bytes) or (False, the parsed JSON); gzip inflated within its
    limits, JSON parsed within the nesting and value limits, heavy work off the event loop."""
    body = await request.body()
    encoding = request.headers.get('content-encoding', '').strip().lower()
    media = request.headers.get('content-type', '').split(';', 1)[0].strip().lower()
    protobuf = media == _PROTOBUF
    if encoding == 'gzip':  # OTEL_EXPORTER_OTLP_COMPRESSION=gzip
        max_values = None if protobuf else state.settings.otlp_max_values
        body = await asyncio.to_thread(_gunzip, body, _INFLATE_FACTOR * state.settings.max_body_bytes, max_values)
    elif encoding not in ('', 'identity'):
        raise HTTPException(415, f'content encoding {encoding[:40]!r} is not supported (use gzip or none)')
    if protobuf:
        return True, body
    where = f'POST {request.url.path}'
    try:
        # the one nesting limit, also on an inflated gzip body (the guard saw only its bytes)
        data = await asyncio.to_thread(loads_limited, body or b'null', where=where, max_values=state.settings.otlp_max_values)
    except JsonTooManyValuesError as e:
        raise HTTPException(413, f'request body refused: {e.message}; send smaller batches') from None
    except JsonLimitError as e:
        raise HTTPException(422, f'request body refused: {e.message}') from None
    except ValueError as e:
        raise HTTPException(400, f'not JSON: {e}') from None
    return False, data


# Bytes inflated at a time, each counted (JSON) before the next is made.
_INFLATE_CHUNK = 1 << 20


def _gunzip(body: bytes, limit: int, max_values: int | None = None) -> bytes:
    """A gzip body, inflated up to `limit` bytes (more is refused: a small body must not inflate without end);
    with `max_values`, its JSON values are counted as it inflates (`sanitize.JsonValueCounter`), and a body
    past the cap is refused at that chunk, before the rest is inflated."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    counter = JsonValueCounter() if max_values is not None else None
    parts: list[bytes] = []
    size = 0
    pending = body
    try:
        while True:
            chunk = inflater.decompress(pending, _INFLATE_CHUNK)
            pending = inflater.unconsumed_tail
            size += len(chunk)
            if size > limit:
                raise HTTPException(413, f'the request inflates to more than {limit:,} bytes')
            if counter is not None and max_values is not None and counter.feed(chunk) > max_values:
                raise HTTPException(
                    413, f'request body refused: JSON with more than {max_values:,} values, over the limit; send smaller batches'
                )
            parts.append(chunk)
            if not pending and (not chunk or inflater.eof):
                break
    except zlib.error as e:
        raise HTTPException(400, f'not valid gzip: {e}') from None
    return b''.join(parts)


def _answer(protobuf: bool, rejected: int, message: str, *, logs: bool = False) -> Response:
    """The OTLP `Export…ServiceResponse`, with `partial_success` when anything was refused."""
    if protobuf:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        response: Any = ExportLogsServiceResponse() if logs else ExportTraceServiceResponse()
        if rejected or message:
            if logs:
                response.partial_success.rejected_log_records = rejected
            else:
                response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message
        return Response(response.SerializeToString(), media_type=_PROTOBUF)
    body: dict[str, Any] = {}
    if rejected or message:
        body['partialSuccess'] = {'rejectedLogRecords' if logs else 'rejectedSpans': rejected, 'errorMessage': message}
    return Response(json.dumps(body), media_type='application/json')


@router.get('/api/v1/traces', response_model=TracePage)
def list_traces(
    state: State,
    limit: Limit = 50,
    offset: Offset = 0,
    status: Annotated[str | None, Query(pattern='^(pending|ingested|rejected|skipped)$')] = None,
) -> TracePage:
    with state.store.read() as db:
        query = select(TraceRow)
        count = select(func.count()).select_from(TraceRow)
        if status is not None:
            query, count = query.where(TraceRow.status == status), count.where(TraceRow.status == status)
        total = db.scalar(count) or 0
        rows = list(db.scalars(query.order_by(TraceRow.first_seen_us.desc(), TraceRow.trace_id).limit(limit).offset(offset)))
    return TracePage(items=[_trace_out(state.store, r) for r in rows], total=total, limit=limit, offset=offset)


@router.get('/api/v1/traces/{trace_id}', response_model=TraceOut)
def get_trace(trace_id: Annotated[str, Path(min_length=1, max_length=64)], state: State) -> TraceOut:
    with state.store.read() as db:
        row = db.get(TraceRow, trace_id.lower())
    if row is None:
        raise HTTPException(404, f'trace {trace_id[:40]} not seen')
    return _trace_out(state.store, row)


def _trace_out(store: Store, row: TraceRow) -> TraceOut:
    with store.read() as db:
        runs = list(
            db.scalars(select(SamplingRow).where(SamplingRow.trace_id == row.trace_id).order_by(SamplingRow.decided_at_us))
        )
    return TraceOut(
        trace_id=row.trace_id,
        status=row.status,
        span_count=row.span_count,
        root_seen=row.root_seen,
        first_seen_us=row.first_seen_us,
        updated_at_us=row.updated_at_us,
        error=row.error,
        runs=[
            SamplingOut(
                session_id=r.session_id,
                agent=r.agent,
                sampled=r.sampled,
                reason=r.reason,
                detail=r.detail,
                judge_calls=r.judge_calls,
                judges=list(r.judges),
                evaluation_id=r.evaluation_id,
                decided_at_us=r.decided_at_us,
            )
            for r in runs
        ],
    )
