"""Agent traces: `POST /v1/traces` and `POST /v1/logs` (OTLP/HTTP, protobuf or JSON), and
`GET /api/v1/traces[/{trace_id}]`.

Point any OpenTelemetry OTLP/HTTP exporter (Logfire included) at the service's base URL: the exporter
appends `/v1/traces` itself. The answer is the OTLP `ExportTraceServiceResponse`, in the request's
encoding. The body is measured before it is parsed (`body_budget`: JSON values, the longest string, gzip
inflated a chunk at a time up to `ServiceSettings.inflated_limit`, protobuf fields, CPU time; 413 past any),
then parsed and cleaned (`sanitize.clean_value`), in a worker thread unless it is small. Spans refused
(malformed, or late for a trace already built) are counted in `partial_success` with the reasons, and the
rest are kept; so are the spans of a trace this request completed that gave no run (`rejected`, with the
first reason). A body that is not an OTLP request at all is a 400 (exporters do not retry it); JSON nested
past `sanitize.MAX_JSON_DEPTH` (also once a gzip body is inflated) a 422; a request over `otlp_max_spans`
spans or `otlp_max_attributes` attributes a 413 naming the cap, before any span is built; JSON holding more
values than `ServiceSettings.otlp_max_values` (counted after inflating, before parsing) a 413 too. Deep JSON
inside an attribute (`pydantic_ai.all_messages`) refuses only its run, with a located error; any other value
that cannot be read (an `intValue` past 64 bits, a 5,000-digit list index in an attribute key, a rating of
`NaN`) is a located error for its span or run only, answered in `partial_success`: the request's other traces
are kept, never a 500. A NaN or ±Infinity double attribute is kept as the text `NaN` / `Infinity` /
`-Infinity` on both stores.

`POST /v1/logs` takes the OTel log events instrumentations send content in (`ExportLogsServiceRequest`, the
same encodings, budget and limits, its caps counted in log records): each event is buffered with its trace and
joined to its span when the trace is built (`trace_ingest.ingest_logs`). Log events for a trace already built
are refused as late (`rejectedLogRecords`). The spans are written in batches (`trace_ingest.BATCH_SPANS`). Both
routes need the token like every write. How spans become sessions and which are judged: `trace_ingest`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from pydantic import BaseModel
from sqlalchemy import func, select

from sensei_eval.core.errors import LoadError
from sensei_eval.core.sanitize import JsonLimitError, clean_value, loads_limited
from sensei_eval.core.traces import (
    OtlpTooLargeError,
    count_otlp,
    logs_from_otlp_json,
    logs_from_protobuf,
    spans_from_otlp_json,
    spans_from_protobuf,
)
from sensei_eval.service.body_budget import INLINE_BYTES, BodyBudget, BodyRefusedError, count_protobuf_fields, inflate_gzip
from sensei_eval.service.config import ServiceSettings
from sensei_eval.service.guard import OTLP_LOGS_PATH, OTLP_TRACES_PATH
from sensei_eval.service.schemas import Limit, Offset
from sensei_eval.service.state import State, Writer
from sensei_eval.service.store import SamplingRow, Store, TraceRow
from sensei_eval.service.trace_ingest import IngestResult, ingest_logs, ingest_spans

__all__ = ('router',)

router = APIRouter(tags=['traces'])

_PROTOBUF = 'application/x-protobuf'
_MAX_MESSAGES = 10


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
    return await _export(request, user, state, logs=False)


@router.post(OTLP_LOGS_PATH, summary='OTLP/HTTP log export (protobuf or JSON): content sent as OTel events')
async def export_logs(request: Request, user: Writer, state: State) -> Response:
    return await _export(request, user, state, logs=True)


async def _export(request: Request, user: Any, state: Any, *, logs: bool) -> Response:
    """One OTLP export (spans, or log events with `logs`): measured, parsed off the event loop when large,
    ingested, answered with `partial_success`."""
    body = await request.body()
    encoding = request.headers.get('content-encoding', '').strip().lower()
    media = request.headers.get('content-type', '').split(';', 1)[0].strip().lower()
    protobuf = media == _PROTOBUF
    gzip = encoding == 'gzip'  # OTEL_EXPORTER_OTLP_COMPRESSION=gzip
    if not gzip and encoding not in ('', 'identity'):
        raise HTTPException(415, f'content encoding {encoding[:40]!r} is not supported (use gzip or none)')
    settings = state.settings
    ingest = ingest_logs if logs else ingest_spans

    def decode() -> tuple[list[Any], list[LoadError]]:
        return _decode(body, settings, gzip=gzip, protobuf=protobuf, logs=logs)

    def decode_and_ingest() -> tuple[IngestResult, list[LoadError]]:
        items, errors = decode()
        return ingest(state.store, items, settings, user=user), errors

    if gzip or len(body) > INLINE_BYTES:  # in a worker thread, and its items held by at most a few at once
        result, errors = await state.parsing.run(decode_and_ingest, inline=False)
    else:
        items, errors = decode()
        result = await asyncio.to_thread(ingest, state.store, items, settings, user=user)
    if result.evaluations:
        state.wake()
    refused, reasons = result.partial_success()
    messages = [f'{e.field or "request"}: {e.message}' for e in errors[:_MAX_MESSAGES]] + reasons
    return _answer(protobuf, refused + len(errors), '; '.join(messages[:_MAX_MESSAGES]), logs=logs)


def _decode(
    body: bytes, settings: ServiceSettings, *, gzip: bool, protobuf: bool, logs: bool
) -> tuple[list[Any], list[LoadError]]:
    """The spans (or log events) of a request body, measured before anything is built (`body_budget`; 413
    past a limit, 400 unreadable, 422 nested too deep or not finite), or the `HTTPException` that answers it."""
    where = 'POST /v1/logs' if logs else 'POST /v1/traces'
    outer = 'resourceLogs' if logs else 'resourceSpans'
    hint = 'OTEL_BLRP_MAX_EXPORT_BATCH_SIZE' if logs else 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'
    caps = {'max_records' if logs else 'max_spans': settings.otlp_max_spans, 'max_attributes': settings.otlp_max_attributes}
    meter = BodyBudget.of(settings, otlp=True).meter(json=not protobuf)
    try:
        if gzip:
            body = inflate_gzip(body, meter)
        elif not protobuf:
            meter.measure(body)
        if protobuf:
            from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

            descriptor = (ExportLogsServiceRequest if logs else ExportTraceServiceRequest).DESCRIPTOR
            count_protobuf_fields(body, descriptor, meter)
            reader = logs_from_protobuf if logs else spans_from_protobuf
            items, errors = reader(body, source=where, **caps)
            if errors and errors[0].field is None and not items:
                raise HTTPException(400, errors[0].message)
            return list(items), errors
        escaped = b'\\u' in body  # only a \u escape can make a lone surrogate or a NUL in parsed JSON
        try:
            # the one nesting limit, also on an inflated gzip body (the guard saw only its bytes)
            data = loads_limited(body or b'null', where=where)
        except JsonLimitError as e:
            raise HTTPException(422, f'request body refused: {e.message}') from None
        except ValueError as e:
            raise HTTPException(400, f'not JSON: {str(e)[:200]}') from None
        del body
        meter.check_cpu('parsing')
        if escaped:  # lone surrogates and NULs become U+FFFD, as in every JSON write (`guard`)
            _check_caps(data, settings)  # first: cleaning a request over them would be wasted
            data, _ = clean_value(data)
        json_reader = logs_from_otlp_json if logs else spans_from_otlp_json
        items, errors = json_reader(data, file=where, line=0, **caps)
        if errors and errors[0].field in (None, outer) and not items:
            raise HTTPException(400, errors[0].message)
        return list(items), errors
    except BodyRefusedError as e:
        more = f'; send smaller batches ({hint})' if e.status == 413 else ''
        raise HTTPException(e.status, f'request body refused: {e.message}{more}') from None
    except OtlpTooLargeError as e:
        raise HTTPException(413, f'{e}; send smaller batches ({hint})') from None


def _check_caps(data: Any, settings: ServiceSettings) -> None:
    """413 for a request over the span (log record) or attribute cap (`count_otlp`, as the reader counts)."""
    items, attributes = count_otlp(data)
    for count, cap, what in ((items, settings.otlp_max_spans, 'spans'), (attributes, settings.otlp_max_attributes, 'attributes')):
        if count > cap:
            raise OtlpTooLargeError(f'{count:,} {what} in one request, over the cap of {cap:,} {what} per request')


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
