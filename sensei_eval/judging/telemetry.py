"""OpenTelemetry spans of a judge run: one per record, one per judge call.

Spans go through the OpenTelemetry API (`opentelemetry.trace`) only, so nothing is exported unless the
application configured a tracer provider (Logfire, or the OpenTelemetry SDK with an exporter). Without
one, `get_tracer` returns None and no span is even started (the API's no-op spans still cost a context
switch each, a few percent of a checks-only run); with a provider that does not sample, attributes
are not computed (`span.is_recording()` is checked first).

* `sensei_eval.record` — one record (× repeat): query id, repeat, profile, run id, how many of its
  judges were ok, errored, inconclusive or skipped, and its coverage label and overall score (absent
  when not judged), from `core.verdicts`;
* `sensei_eval.judge <name>` — one judge call, a child of its record's span: query id, judge, failure
  mode, criteria hash, model, status (ok | error | inconclusive), the verdicts (`core.verdicts`: pass |
  fail | inconclusive | error | smoke, one per member), cached, tokens in/out, latency, and
  the GenAI semantic-convention attributes of the model call (`gen_ai.operation.name`,
  `gen_ai.request.model`, `gen_ai.provider.name`, `gen_ai.usage.input_tokens` / `output_tokens`).
  The span is current while the judge runs, so pydantic-ai's own spans (`invoke_agent`, `chat`), when
  its instrumentation is on, nest under it. A fused judge (several failure modes in one model call) is
  one span, with its members listed and one status over them.

`configure_from_env` is what the commands (`judge`, `validate`, `optimize`, `serve`) call first: with
the `otel` extra installed and the standard OpenTelemetry environment set (`OTEL_EXPORTER_OTLP_ENDPOINT`
or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_TRACES_EXPORTER=otlp|console`; `OTEL_SERVICE_NAME`,
default `sensei-eval`), it installs an SDK tracer provider exporting there, so the spans reach a
collector with no code. It leaves a provider the application already set, and does nothing when none
of those variables is set, when `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.trace import (
    INVALID_SPAN,
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)

from sensei_eval.core.verdicts import judge_status, record_verdict
from sensei_eval.models.judge_model import redact_url

if TYPE_CHECKING:
    from sensei_eval.core.reports import JudgeResult
    from sensei_eval.evaluators.base import Judge
    from sensei_eval.models.judge_model import JudgeModel

__all__ = (
    'RECORD_SPAN',
    'TRACER_NAME',
    'configure_from_env',
    'end_judge_span',
    'end_record_span',
    'get_tracer',
    'judge_span',
    'record_span',
)

TRACER_NAME = 'sensei_eval'
log = logging.getLogger(__name__)
RECORD_SPAN = 'sensei_eval.record'
JUDGE_SPAN = 'sensei_eval.judge'


# What a span helper returns when spans are off: reusable, enters to the API's invalid (non-recording) span.
_NO_SPAN: AbstractContextManager[Span] = nullcontext(INVALID_SPAN)


# The service name spans carry when OTEL_SERVICE_NAME is not set.
DEFAULT_SERVICE_NAME = 'sensei-eval'


def configure_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """Install an OpenTelemetry SDK tracer provider from the standard environment (module docstring).
    Returns what it did, for the console (None when it did nothing); raises `MissingExtraError` when
    the environment asks for export and the `otel` extra is missing."""
    env = os.environ if environ is None else environ
    exporters = [e.strip().lower() for e in env.get('OTEL_TRACES_EXPORTER', '').split(',') if e.strip()]
    endpoint = env.get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') or env.get('OTEL_EXPORTER_OTLP_ENDPOINT')
    if env.get('OTEL_SDK_DISABLED', '').strip().lower() == 'true' or 'none' in exporters:
        return None
    if not exporters:
        if not endpoint:
            return None
        exporters = ['otlp']
    if not isinstance(trace.get_tracer_provider(), ProxyTracerProvider | NoOpTracerProvider):
        return None  # the application configured its own
    from sensei_eval.core.extras import requires_extra

    with requires_extra('otel', 'exporting spans (OTEL_* is set)'):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    service = env.get('OTEL_SERVICE_NAME') or DEFAULT_SERVICE_NAME
    provider = SdkTracerProvider(resource=Resource.create({'service.name': service}))  # flushed at exit
    chosen: list[str] = []
    for name in dict.fromkeys(exporters):
        exporter: SpanExporter
        if name == 'otlp':
            with requires_extra('otel', 'exporting spans over OTLP'):
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            exporter = OTLPSpanExporter()  # reads the endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*
            chosen.append(f'OTLP to {redact_url(endpoint) if endpoint else "http://localhost:4318"}')
        elif name == 'console':
            exporter = ConsoleSpanExporter()
            chosen.append('the console')
        else:
            log.warning('OTEL_TRACES_EXPORTER=%s: not an exporter sensei-eval sets up (otlp, console, none)', name)
            continue
        provider.add_span_processor(BatchSpanProcessor(exporter))
    if not chosen:
        return None
    trace.set_tracer_provider(provider)
    return f'spans of service {service!r} exported to {" and ".join(chosen)}'


def get_tracer(tracer_provider: TracerProvider | None = None) -> Tracer | None:
    """The tracer judge runs use: from `tracer_provider`, else the global one; None when neither is
    configured (the global provider is still the API's placeholder), so spans cost nothing."""
    from importlib.metadata import PackageNotFoundError, version

    provider = tracer_provider or trace.get_tracer_provider()
    if isinstance(provider, ProxyTracerProvider | NoOpTracerProvider):
        return None

    try:
        own = version('sensei-eval')
    except PackageNotFoundError:  # a source checkout that was never installed
        own = None
    return trace.get_tracer(TRACER_NAME, own, tracer_provider=provider)


def record_span(tracer: Tracer | None, *, query_id: str, repeat: int, profile: str, run_id: str) -> AbstractContextManager[Span]:
    """The span of one record's judging; the judge spans started inside it are its children."""
    if tracer is None:
        return _NO_SPAN
    return _record_span(tracer, query_id=query_id, repeat=repeat, profile=profile, run_id=run_id)


@contextmanager
def _record_span(tracer: Tracer, *, query_id: str, repeat: int, profile: str, run_id: str) -> Iterator[Span]:
    attributes: dict[str, str | int] = {
        'sensei_eval.query_id': query_id,
        'sensei_eval.repeat': repeat,
        'sensei_eval.profile': profile,
        'sensei_eval.run_id': run_id,
    }
    with tracer.start_as_current_span(RECORD_SPAN, attributes=attributes) as span:
        yield span


def end_record_span(span: Span, results: Sequence[JudgeResult], skipped: int, problems: Sequence[str]) -> None:
    """Status counts on the record's span; an unknown profile on the record is an error status."""
    if not span.is_recording():
        return
    for status in ('ok', 'error', 'inconclusive'):
        span.set_attribute(f'sensei_eval.judges.{status}', sum(1 for r in results if r.status == status))
    span.set_attribute('sensei_eval.judges.skipped', skipped)
    verdict = record_verdict(results)  # the verdict model's overall score and coverage, as the report has them
    span.set_attribute('sensei_eval.coverage', verdict.coverage.label)
    if verdict.overall_score is not None:
        span.set_attribute('sensei_eval.overall_score', verdict.overall_score)
    if problems:
        span.set_status(Status(StatusCode.ERROR, problems[0][:200]))


def judge_span(
    tracer: Tracer | None, judge: Judge, *, query_id: str, repeat: int, model: JudgeModel | None, members: Sequence[Judge] = ()
) -> AbstractContextManager[Span]:
    """The span of one judge call (current while it runs, so the model client's spans nest under it)."""
    if tracer is None:
        return _NO_SPAN
    return _judge_span(tracer, judge, query_id=query_id, repeat=repeat, model=model, members=members)


@contextmanager
def _judge_span(
    tracer: Tracer, judge: Judge, *, query_id: str, repeat: int, model: JudgeModel | None, members: Sequence[Judge]
) -> Iterator[Span]:
    attributes: dict[str, str | int | Sequence[str]] = {
        'sensei_eval.query_id': query_id,
        'sensei_eval.repeat': repeat,
        'sensei_eval.judge': judge.name,
    }
    if members:
        attributes['sensei_eval.members'] = [m.name for m in members]
        modes = [m.failure_mode for m in members if m.failure_mode]
        attributes['sensei_eval.failure_mode'] = modes
    elif judge.failure_mode:
        attributes['sensei_eval.failure_mode'] = judge.failure_mode
    if model is not None and judge.needs_model:
        attributes['sensei_eval.model'] = model.name
        attributes['gen_ai.operation.name'] = 'chat'
        request_model = getattr(model.model, 'model_name', None) if not isinstance(model.model, str) else model.model
        attributes['gen_ai.request.model'] = str(request_model or model.name)
        provider = getattr(model.model, 'system', None) if not isinstance(model.model, str) else model.model.split(':')[0]
        if provider:
            attributes['gen_ai.provider.name'] = str(provider)
    with tracer.start_as_current_span(f'{JUDGE_SPAN} {judge.name}', attributes=attributes) as span:
        yield span


def end_judge_span(span: Span, judge: Judge, results: Sequence[JudgeResult], *, latency_s: float) -> None:
    """Outcome attributes of a judge call: one result, or a fused judge's results (one per member)."""
    if not span.is_recording() or not results:
        return
    statuses = {r.status for r in results}
    status = 'error' if 'error' in statuses else 'inconclusive' if 'inconclusive' in statuses else 'ok'
    input_tokens = sum(r.input_tokens for r in results)
    output_tokens = sum(r.output_tokens for r in results)
    span.set_attribute('sensei_eval.criteria_hash', judge.criteria_hash())
    span.set_attribute('sensei_eval.status', status)
    span.set_attribute('sensei_eval.verdicts', [judge_status(r) for r in results])  # pass/fail/inconclusive/error/smoke
    span.set_attribute('sensei_eval.cached', all(r.cached for r in results))
    span.set_attribute('sensei_eval.input_tokens', input_tokens)
    span.set_attribute('sensei_eval.output_tokens', output_tokens)
    span.set_attribute('sensei_eval.requests', sum(r.requests for r in results))
    span.set_attribute('sensei_eval.latency_s', latency_s)
    if results[0].model is not None:
        span.set_attribute('gen_ai.usage.input_tokens', input_tokens)
        span.set_attribute('gen_ai.usage.output_tokens', output_tokens)
    if status != 'ok':
        why = next((r.error for r in results if r.status == status and r.error), None) or status
        span.set_attribute('sensei_eval.error', why[:500])
    if status == 'error':
        span.set_status(Status(StatusCode.ERROR, why[:200]))
