"""OpenTelemetry spans of a judge run: one per record, one per judge call, pydantic-ai's spans nested inside."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, StatusCode
from pydantic_ai import Agent, InstrumentationSettings

from sensei_eval.evaluators.output import Completeness
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging import telemetry
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records

from .helpers import ScriptedJudge, no_issues, openai_record

JUDGES = ['completeness', 'repeated_call_check']


def _answer(prompt: str, n: int) -> dict[str, Any] | str:
    if 'judge `completeness`' in prompt and 'ZZERRZZ' in prompt:
        return 'no json at all'  # invalid output three times: an error
    if 'judge `completeness`' in prompt and 'ZZINCZZ' in prompt:
        return {'reasoning': '...', 'issues': []}  # no words: inconclusive
    return no_issues(prompt, n)


def _records() -> list[Any]:
    return [openai_record('ok-1'), openai_record('err-1', answer='ZZERRZZ'), openai_record('inc-1', answer='ZZINCZZ')]


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _by_name(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def test_a_run_emits_a_record_span_and_a_judge_span_per_call(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    scripted = ScriptedJudge(_answer)
    reports = asyncio.run(
        judge_records(_records(), JudgeRunOptions(make_judges(JUDGES), scripted.model(), tracer_provider=provider), run_id='t1')
    )
    by_id = {r.query_id: r for r in reports}
    assert [by_id[q].judges['completeness'].status for q in ('ok-1', 'err-1', 'inc-1')] == ['ok', 'error', 'inconclusive']
    finished = exporter.get_finished_spans()

    records = {str((s.attributes or {})['sensei_eval.query_id']): s for s in _by_name(finished, 'sensei_eval.record')}
    assert sorted(records) == ['err-1', 'inc-1', 'ok-1']
    for query_id, span in records.items():
        attrs = dict(span.attributes or {})
        assert (
            attrs['sensei_eval.repeat'] == 1 and attrs['sensei_eval.run_id'] == 't1' and attrs['sensei_eval.profile'] == 'default'
        )
        statuses = [r.status for r in by_id[query_id].judges.values()]
        for status in ('ok', 'error', 'inconclusive'):
            assert attrs[f'sensei_eval.judges.{status}'] == statuses.count(status)
        assert attrs['sensei_eval.judges.skipped'] == len(by_id[query_id].skipped)
        # the verdict model's coverage and overall score, as the report has them (no score when not judged)
        report = by_id[query_id]
        assert report.coverage is not None and attrs['sensei_eval.coverage'] == report.coverage.label
        assert attrs.get('sensei_eval.overall_score') == report.overall_score

    calls = _by_name(finished, 'sensei_eval.judge completeness')
    assert len(calls) == 3
    expected = {'ok-1': 'ok', 'err-1': 'error', 'inc-1': 'inconclusive'}
    for span in calls:
        attrs = dict(span.attributes or {})
        query_id = str(attrs['sensei_eval.query_id'])
        result = by_id[query_id].judges['completeness']
        assert span.parent is not None and span.parent.span_id == records[query_id].context.span_id  # nested in its record
        assert attrs['sensei_eval.judge'] == 'completeness' and attrs['sensei_eval.failure_mode'] == 'completeness'
        assert attrs['sensei_eval.criteria_hash'] == Completeness().criteria_hash()
        assert attrs['sensei_eval.model'] == 'function:scripted'
        assert attrs['sensei_eval.status'] == expected[query_id] and attrs['sensei_eval.cached'] is False
        assert list(attrs['sensei_eval.verdicts']) == [{'ok-1': 'pass', 'err-1': 'error', 'inc-1': 'inconclusive'}[query_id]]
        assert attrs['sensei_eval.input_tokens'] == result.input_tokens > 0
        assert attrs['sensei_eval.output_tokens'] == result.output_tokens > 0
        assert isinstance(attrs['sensei_eval.latency_s'], float) and attrs['sensei_eval.latency_s'] >= 0
        # the GenAI semantic conventions of the model call
        assert attrs['gen_ai.operation.name'] == 'chat'
        assert attrs['gen_ai.request.model'] == 'scripted' and attrs['gen_ai.provider.name'] == 'function'
        assert attrs['gen_ai.usage.input_tokens'] == result.input_tokens
        assert attrs['gen_ai.usage.output_tokens'] == result.output_tokens
        if query_id == 'err-1':
            assert span.status.status_code == StatusCode.ERROR and 'invalid output' in str(attrs['sensei_eval.error'])
        elif query_id == 'inc-1':
            assert span.status.status_code != StatusCode.ERROR and 'empty reasoning' in str(attrs['sensei_eval.error'])
        else:
            assert span.status.status_code != StatusCode.ERROR and 'sensei_eval.error' not in attrs

    checks = _by_name(finished, 'sensei_eval.judge repeated_call_check')
    assert len(checks) == 3
    for span in checks:  # a deterministic check: no model call, so no GenAI attributes
        attrs = dict(span.attributes or {})
        assert attrs['sensei_eval.status'] == 'ok' and not any(k.startswith('gen_ai.') for k in attrs)


def test_cached_verdicts_are_spans_marked_cached(spans: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Any) -> None:
    provider, exporter = spans
    scripted = ScriptedJudge(_answer)
    for run_id in ('a', 'b'):
        options = JudgeRunOptions(
            make_judges(['completeness']), scripted.model(), cache=JudgeCache(tmp_path), tracer_provider=provider
        )
        asyncio.run(judge_records(_records(), options, run_id=run_id))
    second = [s for s in _by_name(exporter.get_finished_spans(), 'sensei_eval.judge completeness')][3:]
    cached = {str((s.attributes or {})['sensei_eval.query_id']): (s.attributes or {})['sensei_eval.cached'] for s in second}
    # verdicts and inconclusive answers are stored (keyed by model and criteria); the error is asked again
    assert cached == {'ok-1': True, 'err-1': False, 'inc-1': True}


def test_pydantic_ai_spans_nest_under_the_judge_span(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    try:
        options = JudgeRunOptions(make_judges(['completeness']), ScriptedJudge(_answer).model(), tracer_provider=provider)
        asyncio.run(judge_records([openai_record('ok-1')], options, run_id='n'))
    finally:
        Agent.instrument_all(False)
    finished = exporter.get_finished_spans()
    [judge_span] = _by_name(finished, 'sensei_eval.judge completeness')
    children = [s for s in finished if s.parent is not None and s.parent.span_id == judge_span.context.span_id]
    assert any('agent' in s.name for s in children), [s.name for s in finished]


def test_the_global_provider_is_used_when_configured(
    spans: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = spans
    monkeypatch.setattr(trace, 'get_tracer_provider', lambda: provider)
    asyncio.run(judge_records([openai_record('g')], JudgeRunOptions(make_judges(['repeated_call_check'])), run_id='g'))
    assert [s.name for s in exporter.get_finished_spans()] == ['sensei_eval.judge repeated_call_check', 'sensei_eval.record']


def test_no_tracer_configured_means_no_spans_and_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, 'get_tracer_provider', ProxyTracerProvider)  # the API's placeholder: nothing configured
    assert telemetry.get_tracer() is None and telemetry.get_tracer(NoOpTracerProvider()) is None
    started: list[str] = []
    real = trace.ProxyTracer.start_as_current_span

    def counting(self: trace.ProxyTracer, name: str, *args: Any, **kwargs: Any) -> Any:
        started.append(name)
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(trace.ProxyTracer, 'start_as_current_span', counting)
    reports = asyncio.run(
        judge_records(_records(), JudgeRunOptions(make_judges(JUDGES), ScriptedJudge(_answer).model()), run_id='quiet')
    )
    assert len(reports) == 3 and reports[1].judges['completeness'].status == 'error'
    assert started == []
