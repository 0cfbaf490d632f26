"""Real producers: a weather agent on the plain `openai` client, calling the project's OpenAI-compatible test
server, traced by the official OpenTelemetry GenAI instrumentation (`opentelemetry-instrumentation-openai-v2`,
content on spans, latest experimental conventions) and by OpenInference's (`openinference-instrumentation-openai`).
Their spans are written to files (OTLP/JSON, and the SDK's own `span.to_json()` dump), read back as records
with every tool result intact, and judged through the CLI. The service half is in
`tests/service/test_trace_producers_service.py`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from sensei_eval.cli.app import app as root
from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.traces import otlp_json_from_protobuf

from .openai_server import Behaviour, OpenAIServer

WEATHER = 'rainy, 57°F'
QUESTION = 'What is the weather in Paris right now?'
ANSWER = f'It is {WEATHER} in Paris.'
TOOLS = [
    {
        'type': 'function',
        'function': {
            'name': 'get_weather',
            'description': 'The current weather of a city.',
            'parameters': {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']},
        },
    }
]
AGENT_TURNS: list[Behaviour] = [
    (
        'message',
        {
            'tool_calls': [
                {'id': 'call_w1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}
            ]
        },
    ),
    ('message', {'content': ANSWER}),
]


def get_weather(city: str) -> str:
    return WEATHER if city == 'Paris' else 'unknown city'


def run_weather_agent(base_url: str, provider: TracerProvider) -> None:
    """The agent loop: ask, run each tool call the model asks for, send the results back, until it answers."""
    client = openai.OpenAI(base_url=base_url, api_key='test-key', max_retries=0)
    messages: list[Any] = [
        {'role': 'system', 'content': 'You answer weather questions with the tool.'},
        {'role': 'user', 'content': QUESTION},
    ]
    with provider.get_tracer('weather-app').start_as_current_span('weather request'):
        for _ in range(4):
            response = client.chat.completions.create(model='m', messages=messages, tools=TOOLS)  # type: ignore[arg-type]
            message = response.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return
            for call in message.tool_calls:
                args = json.loads(call.function.arguments)  # type: ignore[union-attr]
                messages.append({'role': 'tool', 'tool_call_id': call.id, 'content': get_weather(**args)})


@pytest.fixture
def genai_instrumented(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    monkeypatch.setenv('OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', 'SPAN_ONLY')
    monkeypatch.setenv('OTEL_SEMCONV_STABILITY_OPT_IN', 'gen_ai_latest_experimental')
    yield from _instrumented(OpenAIInstrumentor())


@pytest.fixture
def openinference_instrumented() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    yield from _instrumented(OpenAIInstrumentor())


def _instrumented(instrumentor: Any, *exporters: SpanExporter) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield provider, memory
    finally:
        instrumentor.uninstrument()


def traced_run(provider: TracerProvider, memory: InMemorySpanExporter) -> list[ReadableSpan]:
    with OpenAIServer(script=list(AGENT_TURNS)) as server:
        run_weather_agent(server.base_url, provider)
    spans = list(memory.get_finished_spans())
    assert len(spans) == 3  # the request span around the loop and one span per model call
    return spans


def check_weather_record(record: QueryRecord) -> None:
    [call] = record.tool_calls()
    assert call.tool_name == 'get_weather' and call.args == {'city': 'Paris'}
    assert call.result == WEATHER  # the tool's answer, not null
    assert record.final_answer() == ANSWER
    assert record.query == QUESTION
    assert record.input_warnings == []


def write_otlp(spans: list[ReadableSpan], path: Path) -> Path:
    path.write_text(json.dumps(otlp_json_from_protobuf(encode_spans(spans))) + '\n')
    return path


def test_genai_instrumentation_spans_become_a_record(
    genai_instrumented: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    spans = traced_run(*genai_instrumented)
    chat = [s for s in spans if (s.attributes or {}).get('gen_ai.operation.name') == 'chat']
    assert chat and 'gen_ai.input.messages' in (chat[-1].attributes or {})  # the current convention, content on the span
    assert '"response"' in str(chat[-1].attributes['gen_ai.input.messages'])  # the tool result under `response`
    loaded = load_dataset(write_otlp(spans, tmp_path / 'weather.json'))  # no .otlp suffix: detected by content
    assert loaded.errors == []
    [record] = loaded.records
    check_weather_record(record)
    assert record.metadata['usage'] == {'input_tokens': 100, 'output_tokens': 20}


def test_openinference_instrumentation_spans_become_a_record(
    openinference_instrumented: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    spans = traced_run(*openinference_instrumented)
    assert {(s.attributes or {}).get('openinference.span.kind') for s in spans} >= {'LLM'}
    loaded = load_dataset(write_otlp(spans, tmp_path / 'weather.otlp.jsonl'))
    assert loaded.errors == []
    [record] = loaded.records
    check_weather_record(record)
    # the SDK's own span dump (ConsoleSpanExporter's shape: span.to_json() one after another) reads the same
    dump = tmp_path / 'console.txt'
    dump.write_text('\n'.join(s.to_json() for s in spans) + '\n')
    loaded = load_dataset(dump)
    assert loaded.errors == []
    [same] = loaded.records
    check_weather_record(same)
    assert same.model_dump(mode='json')['messages'] == record.model_dump(mode='json')['messages']


def test_traced_runs_are_judged_from_the_file(
    genai_instrumented: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai import models

    monkeypatch.setattr(models, 'ALLOW_MODEL_REQUESTS', True)  # the judge is the local test server
    path = write_otlp(traced_run(*genai_instrumented), tmp_path / 'weather.json')
    out = tmp_path / 'reports'
    with OpenAIServer() as judge:
        args = ['judge', '--dataset', str(path), '--format', 'otlp', '--base-url', judge.base_url, '--model', 'm']
        result = CliRunner().invoke(
            root, [*args, '--judges', 'hallucination', '--no-cache', '--out', str(out)], env={'COLUMNS': '120'}
        )
        assert result.exit_code == 0, result.output
        assert len(judge.completions()) == 1
    [report_path] = list(out.glob('*/records/*.json'))
    report = json.loads(report_path.read_text())
    assert report['judges']['hallucination']['status'] == 'ok'


def test_a_record_id_with_markup_does_not_stop_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record id that reads as Rich markup (`[/]`) is printed as text: the run judges and reports it."""
    from pydantic_ai import models

    monkeypatch.setattr(models, 'ALLOW_MODEL_REQUESTS', True)
    messages = [{'role': 'user', 'content': QUESTION}, {'role': 'assistant', 'content': ANSWER}]
    records = [{'query_id': 'odd[/]id[bold]', 'messages': messages}, {'query_id': 'bad[/]one', 'messages': []}]
    path = tmp_path / 'odd.json'
    path.write_text(json.dumps(records, indent=2))  # a JSON array of records, pretty-printed
    out = tmp_path / 'reports'
    with OpenAIServer(default='500') as judge:  # every judge call fails: the error lines name the record too
        args = ['judge', '--dataset', str(path), '--base-url', judge.base_url, '--model', 'm', '--judges', 'hallucination']
        result = CliRunner().invoke(root, [*args, '--no-cache', '--out', str(out), '--verbose'], env={'COLUMNS': '200'})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert 'MarkupError' not in result.output
    assert 'bad[/]one' in result.output  # the bad record, printed as written (line 9 of the array)
    assert 'odd[/]id[bold]' in result.output
    # the array's records counted (its good record, and its bad one once the run ends), not its lines; which of
    # the two lines is printed depends on timing (a progress line goes out at most once a second)
    assert re.search(r'progress: (1/1|2/2) records', result.output), result.output
    assert [p.name for p in out.glob('*/records/*.json')] != []


def test_judge_refuses_an_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / 'runs.jsonl'
    path.write_text('{}\n')
    result = CliRunner().invoke(root, ['judge', '--dataset', str(path), '--format', 'csv[/]'], env={'COLUMNS': '200'})
    assert result.exit_code == 2
    flat = ' '.join(result.output.split())  # the message wraps at 80 columns
    assert '--format csv[/] is not one of auto, jsonl, json, otlp, spans, tau-bench, who-and-when' in flat
