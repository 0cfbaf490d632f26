"""Agent traces: `POST /v1/traces` (OTLP/HTTP, protobuf or JSON), and `GET /api/v1/traces[/{trace_id}]`.

Point any OpenTelemetry OTLP/HTTP exporter (Logfire included) at the service's base URL: the exporter
appends `/v1/traces` itself. The answer is the OTLP `ExportTraceServiceResponse`, in the request's
encoding. The body is measured before it is parsed (`body_budget`: JSON values, the longest string, gzip
inflated a chunk at a time up to `ServiceSettings.inflated_limit`, protobuf fields, CPU time; 413 past any),
then parsed and cleaned (`sanitize.clean_value`), in a worker thread unless it is small. Spans refused (malformed, or late
for a trace already built) are counted in `partial_success` with the reasons, and the rest are kept; so
are the spans of a trace this request completed that gave no run (`rejected`, with the first reason).
A body that is not an OTLP request at all is a 400 (exporters do not retry it); JSON nested past
`sanitize.MAX_JSON_DEPTH` (also once a gzip body is inflated) a 422; a request over
`otlp_max_spans` spans or `otlp_max_attributes` attributes a 413 naming the cap, before any span is
built; JSON holding more values than `ServiceSettings.otlp_max_values` (counted after inflating, before
parsing) a 413 too. Deep JSON inside an attribute (`pydantic_ai.all_messages`) refuses only its run, with a located
error. A NaN or ±Infinity double attribute is kept as the text `NaN` / `Infinity` / `-Infinity` on
both stores. The spans are written in batches (`trace_ingest.BATCH_SPANS`). The route needs the
token like every write. How spans become sessions and which are judged: `trace_ingest`.
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
from sensei_eval.core.span_model import Span
from sensei_eval.core.traces import OtlpTooLargeError, count_otlp, spans_from_otlp_json, spans_from_protobuf
from sensei_eval.service.body_budget import INLINE_BYTES, BodyBudget, BodyRefusedError, count_protobuf_fields, inflate_gzip
from sensei_eval.service.config import ServiceSettings
from sensei_eval.service.guard import OTLP_TRACES_PATH
from sensei_eval.service.schemas import Limit, Offset
from sensei_eval.service.state import State, Writer
from sensei_eval.service.store import SamplingRow, Store, TraceRow
from sensei_eval.service.trace_ingest import IngestResult, ingest_spans

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
    body = await request.body()
    encoding = request.headers.get('content-encoding', '').strip().lower()
    media = request.headers.get('content-type', '').split(';', 1)[0].strip().lower()
    protobuf = media == _PROTOBUF
    gzip = encoding == 'gzip'  # OTEL_EXPORTER_OTLP_COMPRESSION=gzip
    if not gzip and encoding not in ('', 'identity'):
        raise HTTPException(415, f'content encoding {encoding[:40]!r} is not supported (use gzip or none)')
    settings = state.settings

    def decode() -> tuple[list[Span], list[LoadError]]:
        return _decode(body, settings, gzip=gzip, protobuf=protobuf)

    def decode_and_ingest() -> tuple[IngestResult, list[LoadError]]:
        spans, errors = decode()
        return ingest_spans(state.store, spans, settings, user=user), errors

    if gzip or len(body) > INLINE_BYTES:  # in a worker thread, and its spans held by at most a few at once
        result, errors = await state.parsing.run(decode_and_ingest, inline=False)
    else:
        spans, errors = decode()
        result = await asyncio.to_thread(ingest_spans, state.store, spans, settings, user=user)
    if result.evaluations:
        state.wake()
    refused, reasons = result.partial_success()
    rejected = refused + len(errors)
    messages = [f'{e.field or "request"}: {e.message}' for e in errors[:_MAX_MESSAGES]] + reasons
    return _answer(protobuf, rejected, '; '.join(messages[:_MAX_MESSAGES]))


def _decode(body: bytes, settings: ServiceSettings, *, gzip: bool, protobuf: bool) -> tuple[list[Span], list[LoadError]]:
    """The spans of a request body, measured before anything is built (`body_budget`; 413 past a limit, 400
    unreadable, 422 nested too deep or not finite), or the `HTTPException` that answers it."""
    caps = {'max_spans': settings.otlp_max_spans, 'max_attributes': settings.otlp_max_attributes}
    meter = BodyBudget.of(settings, otlp=True).meter(json=not protobuf)
    try:
        if gzip:
            body = inflate_gzip(body, meter)
        elif not protobuf:
            meter.measure(body)
        if protobuf:
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

            count_protobuf_fields(body, ExportTraceServiceRequest.DESCRIPTOR, meter)
            spans, errors = spans_from_protobuf(body, source='POST /v1/traces', **caps)
            if errors and errors[0].field is None and not spans:
                raise HTTPException(400, errors[0].message)
            return spans, errors
        escaped = b'\\u' in body  # only a \u escape can make a lone surrogate or a NUL in parsed JSON
        try:
            # the one nesting limit, also on an inflated gzip body (the guard saw only its bytes)
            data = loads_limited(body or b'null', where='POST /v1/traces')
        except JsonLimitError as e:
            raise HTTPException(422, f'request body refused: {e.message}') from None
        except ValueError as e:
            raise HTTPException(400, f'not JSON: {str(e)[:200]}') from None
        del body
        meter.check_cpu('parsing')
        if escaped:  # lone surrogates and NULs become U+FFFD, as in every JSON write (`guard`)
            _check_caps(data, settings)  # first: cleaning a request over them would be wasted
            data, _ = clean_value(data)
        spans, errors = spans_from_otlp_json(data, file='POST /v1/traces', line=0, **caps)
        if errors and errors[0].field in (None, 'resourceSpans') and not spans:
            raise HTTPException(400, errors[0].message)
        return spans, errors
    except BodyRefusedError as e:
        hint = '; send smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)' if e.status == 413 else ''
        raise HTTPException(e.status, f'request body refused: {e.message}{hint}') from None
    except OtlpTooLargeError as e:
        raise HTTPException(413, f'{e}; send smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)') from None


def _check_caps(data: Any, settings: ServiceSettings) -> None:
    """413 for a request over the span or attribute cap (`traces.count_otlp`, as the reader counts)."""
    spans, attributes = count_otlp(data)
    for count, cap, what in ((spans, settings.otlp_max_spans, 'spans'), (attributes, settings.otlp_max_attributes, 'attributes')):
        if count > cap:
            raise OtlpTooLargeError(f'{count:,} {what} in one request, over the cap of {cap:,} {what} per request')


def _answer(protobuf: bool, rejected: int, message: str) -> Response:
    if protobuf:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        response = ExportTraceServiceResponse()
        if rejected or message:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message
        return Response(response.SerializeToString(), media_type=_PROTOBUF)
    body: dict[str, Any] = {}
    if rejected or message:
        body['partialSuccess'] = {'rejectedSpans': rejected, 'errorMessage': message}
    return Response(json.dumps(body), media_type='application/json')


@router.get('/api/v1/traces', response_model=TracePage)
def list_traces(
    state: State,
    limit: Limit = 50,
    offset: Offset = 0,
    status: Annotated[str | None, Query(pattern='^(pending|ingested|rejected)$')] = None,
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
