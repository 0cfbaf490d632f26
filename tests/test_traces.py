"""Agent traces into records: real pydantic-ai runs instrumented with OpenTelemetry, written as OTLP/JSON
(the Collector file exporter's format) and as protobuf, read back with the dataset loader."""

from __future__ import annotations

import contextlib
import json
import random
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import DEFAULT_INSTRUMENTATION_VERSION, InstrumentationSettings

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.traces import (
    TraceConfig,
    build_trace,
    load_traces,
    otlp_json_from_protobuf,
    spans_from_otlp_json,
    spans_from_protobuf,
)

DATA = Path(__file__).parent / 'data' / 'otlp'


def _prompt(messages: list[ModelMessage]) -> str:
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    return p.content
    return ''


def docs_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The agent under trace: looks the question up once, then answers from the result (or fails on 'explode')."""
    prompt = _prompt(messages)
    if 'explode' in prompt and len(messages) > 1:
        raise RuntimeError('the model provider is down')
    if len(messages) == 1:
        call = ToolCallPart('search_docs', {'query': prompt[:40]}, tool_call_id='call_docs')
        return ModelResponse(parts=[TextPart('Let me look that up.'), call])
    return ModelResponse(parts=[TextPart(f'From the docs: {prompt[:30]} is answered by the search result.')])


def make_agent(name: str = 'docs-helper') -> Agent[None, str]:
    agent = Agent(FunctionModel(docs_model), name=name, instructions='Answer from the documentation.')

    @agent.tool_plain
    def search_docs(query: str) -> str:
        return f'Docs about {query}: use the documented API.'

    return agent


def run_traced(
    runs: Sequence[tuple[str, dict[str, Any]]], *, provider: TracerProvider | None = None, version: Any = None
) -> list[ReadableSpan]:
    """Run the agent once per (prompt, attributes of the request span around it); return the finished spans."""
    exporter = InMemorySpanExporter()
    provider = provider or TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = make_agent()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # versions 2-4 are deprecated, still emitted
        settings = InstrumentationSettings(tracer_provider=provider, version=version or DEFAULT_INSTRUMENTATION_VERSION)
    agent.instrument = settings
    tracer = provider.get_tracer('app')
    for prompt, attributes in runs:
        # the failing run is traced with an error status
        with tracer.start_as_current_span('POST /ask', attributes=attributes), contextlib.suppress(RuntimeError):
            agent.run_sync(prompt)
    return list(exporter.get_finished_spans())


def write_otlp(path: Path, batches: Sequence[Sequence[ReadableSpan]]) -> Path:
    """One ExportTraceServiceRequest a line, as the Collector's file exporter writes them."""
    with path.open('w') as f:
        for batch in batches:
            f.write(json.dumps(otlp_json_from_protobuf(encode_spans(batch))) + '\n')
    return path


def test_agent_trace_becomes_the_record_the_judges_read(tmp_path: Path) -> None:
    spans = run_traced([('How do I pin a version?', {'sensei_eval.rating': 2, 'sensei_eval.prompt_version': 'v3'})])
    result = load_dataset(write_otlp(tmp_path / 'runs.otlp.jsonl', [spans]))
    assert result.errors == []
    [record] = result.records
    assert [m['role'] for m in record.messages] == ['system', 'user', 'assistant', 'tool', 'assistant']
    assert record.messages[0]['content'] == 'Answer from the documentation.'
    assert record.query == 'How do I pin a version?'
    [call] = record.tool_calls()
    assert call.tool_name == 'search_docs' and call.args == {'query': 'How do I pin a version?'}
    assert call.result == 'Docs about How do I pin a version?: use the documented API.'
    assert record.final_answer() == 'From the docs: How do I pin a version? is answered by the search result.'
    assert record.rating is not None and record.rating.correctness == 2 and record.prompt_version == 'v3'
    trace_id = format(spans[0].context.trace_id, '032x')
    assert record.query_id == trace_id and record.metadata['trace_id'] == trace_id
    assert record.metadata['agent'] == 'docs-helper' and record.metadata['status'] == 'ok'
    assert record.metadata['span_count'] == 4  # the run, two model requests, one tool call
    assert result.lines[record.query_id] == 1


def test_protobuf_and_json_and_split_lines_give_the_same_records(tmp_path: Path) -> None:
    spans = run_traced([('first question', {}), ('second question', {'sensei_eval.feedback': 'wrong answer'})])
    whole = load_traces(write_otlp(tmp_path / 'whole.otlp.jsonl', [spans]))
    shuffled = list(spans)
    random.Random(7).shuffle(shuffled)
    roots = [s for s in shuffled if s.parent is None]
    children = [s for s in shuffled if s.parent is not None]
    # the roots arrive last, each span on its own line, children in random order
    split = load_traces(write_otlp(tmp_path / 'split.otlp.jsonl', [[s] for s in children + roots]))
    decoded, errors = spans_from_protobuf(encode_spans(spans).SerializeToString())
    assert errors == [] and split.errors == [] and whole.errors == []
    trace_ids = dict.fromkeys(s.trace_id for s in decoded)
    from_pb = [build_trace([s for s in decoded if s.trace_id == t]).records[0] for t in trace_ids]
    dump = sorted((r.model_dump() for r in whole.records), key=lambda d: d['query_id'])
    assert len(dump) == 2
    assert sorted((r.model_dump() for r in split.records), key=lambda d: d['query_id']) == dump
    assert sorted((r.model_dump() for r in from_pb), key=lambda d: d['query_id']) == dump
    assert [r.metadata.get('feedback') for r in whole.records if r.query == 'second question'] == ['wrong answer']


@pytest.mark.parametrize('version', [2, 3, 4, 5, 6])
def test_every_instrumentation_version_gives_the_same_history(version: int, tmp_path: Path) -> None:
    default = load_traces(write_otlp(tmp_path / 'default.otlp.jsonl', [run_traced([('same question', {})])])).records[0]
    other = load_traces(write_otlp(tmp_path / f'v{version}.otlp.jsonl', [run_traced([('same question', {})], version=version)]))
    assert other.errors == []
    assert other.records[0].messages == default.messages


def test_a_history_from_model_request_spans_when_the_run_span_has_none(tmp_path: Path) -> None:
    """Without `pydantic_ai.all_messages` the last model request's input and output are the history."""
    spans = run_traced([('question without run history', {})])
    data = otlp_json_from_protobuf(encode_spans(spans))
    decoded, _ = spans_from_otlp_json(data, file='x', line=1)
    full = build_trace(decoded).records[0]
    for span in data['resourceSpans'][0]['scopeSpans'][0]['spans']:
        span['attributes'] = [a for a in span['attributes'] if a['key'] != 'pydantic_ai.all_messages']
    stripped, _ = spans_from_otlp_json(data, file='x', line=1)
    assert build_trace(stripped).records[0].messages == full.messages


def test_an_agent_run_that_failed_is_a_record_with_error_status(tmp_path: Path) -> None:
    spans = run_traced([('explode please', {})])
    result = load_traces(write_otlp(tmp_path / 'failed.otlp.jsonl', [spans]))
    [record] = result.records
    assert record.metadata['status'] == 'error' and 'provider is down' in record.metadata['status_message']
    assert [m['role'] for m in record.messages] == ['system', 'user', 'assistant', 'tool']  # what happened before the failure


def test_bad_spans_get_located_errors_and_the_rest_goes_on() -> None:
    path = DATA / 'bad_spans.otlp.jsonl'
    result = load_dataset(path)
    where = {(e.line, e.field) for e in result.errors}
    assert (2, None) in where  # not JSON
    assert (3, 'resourceSpans[0].scopeSpans[0].spans[0].traceId') in where
    assert (4, 'resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value') in where
    assert (5, 'resourceSpans[0].scopeSpans[0].spans[0].attributes[pydantic_ai.all_messages]') in where
    assert (6, 'resourceSpans[0].scopeSpans[0].spans[0].attributes[sensei_eval.rating]') in where
    assert all(e.file == str(path) for e in result.errors) and len(result.errors) == 5
    messages = {e.line: e.message for e in result.errors}
    assert 'truncated' in messages[5] and 'Unterminated string' in messages[5] and '9' in messages[6]
    by_id = {r.query_id: r for r in result.records}
    # the good trace (its child on line 1, its root on line 7) is one record; the bad rating's run is kept unrated
    good = by_id['0af7651916cd43dd8448eb211c80319c']
    assert good.rating is not None and good.rating.usefulness == 2 and good.prompt_version == 'v7'
    assert good.tool_calls()[0].result == 'Use == in requirements.txt'
    assert by_id['2cf7651916cd43dd8448eb211c80319e'].rating is None
    assert len(result.records) == 2


def test_a_trace_without_its_root_is_built_from_its_finished_run_or_dropped(tmp_path: Path) -> None:
    spans = run_traced([('wrapped question', {'sensei_eval.rating': 5})])
    without_wrapper = [s for s in spans if s.parent is not None]  # the request span never arrived
    partial = load_traces(write_otlp(tmp_path / 'partial.otlp.jsonl', [without_wrapper]))
    [record] = partial.records
    assert partial.errors == [] and 'root span never arrived' in record.input_warnings[0]
    assert record.final_answer() is not None
    only_children = [s for s in spans if s.name.startswith(('chat', 'execute_tool'))]  # the run span is missing too
    dropped = load_traces(write_otlp(tmp_path / 'children.otlp.jsonl', [only_children]), TraceConfig(root_timeout_s=30))
    assert dropped.records == []
    [error] = dropped.errors
    assert 'never arrived within 30 s' in error.message and 'no agent-run span' in error.message and error.line == 1


def test_rating_from_a_span_event_and_several_runs_in_one_trace(tmp_path: Path) -> None:
    exporter_provider = TracerProvider()
    exporter = InMemorySpanExporter()
    exporter_provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = make_agent('support')
    agent.instrument = InstrumentationSettings(tracer_provider=exporter_provider)
    tracer = exporter_provider.get_tracer('app')
    with tracer.start_as_current_span('conversation') as span:
        agent.run_sync('first turn')
        agent.run_sync('second turn')
        span.add_event('sensei_eval.rating', {'correctness': 1, 'relevance': 3, 'usefulness': 2, 'reasoning': 'wrong'})
    result = load_traces(write_otlp(tmp_path / 'two.otlp.jsonl', [exporter.get_finished_spans()]))
    assert result.errors == [] and len(result.records) == 2
    trace_id = format(exporter.get_finished_spans()[0].context.trace_id, '032x')
    assert all(r.query_id.startswith(trace_id + ':') for r in result.records)
    assert {r.query for r in result.records} == {'first turn', 'second turn'}
    assert all(r.rating is not None and r.rating.correctness == 1 and r.rating.reasoning == 'wrong' for r in result.records)


def test_logfire_pending_spans_are_not_runs() -> None:
    """Logfire may export a placeholder for a span still open; it is not a second agent run."""
    data = otlp_json_from_protobuf(encode_spans(run_traced([('pending question', {})])))
    raw_spans = data['resourceSpans'][0]['scopeSpans'][0]['spans']
    run_span = next(s for s in raw_spans if s['name'].startswith('invoke_agent'))
    pending = json.loads(json.dumps(run_span))
    pending.update(spanId='00000000000000ab', parentSpanId=run_span['spanId'])
    pending['attributes'].append({'key': 'logfire.span_type', 'value': {'stringValue': 'pending_span'}})
    raw_spans.append(pending)
    spans, errors = spans_from_otlp_json(data, file='x', line=1)
    build = build_trace(spans)
    assert errors == [] and build.errors == [] and len(build.records) == 1
    assert build.records[0].metadata['span_count'] == 4


def test_judge_command_reads_a_trace_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sensei_eval.cli.app import app

    spans = run_traced([('a question for the judge command', {})])
    path = write_otlp(tmp_path / 'runs.otlp.jsonl', [spans])
    out = tmp_path / 'reports'
    result = CliRunner().invoke(app, ['judge', '--dataset', str(path), '--judges', 'checks', '--out', str(out)])
    assert result.exit_code == 0, result.output
    trace_id = format(spans[0].context.trace_id, '032x')
    [report] = list(out.glob(f'*/records/{trace_id}*'))
    data = json.loads(report.read_text())
    assert data['query_id'] == trace_id and 'error_recovery_check' in data['judges']
