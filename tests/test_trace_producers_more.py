"""More real producers (issue 42): the weather run — question, `get_weather(city="Paris")`, its result, the answer
— traced by OpenLLMetry's openai instrumentation (content on spans, and content sent as OTel log events), the
official GenAI instrumentation sending content as log events, OpenLLMetry's LangChain instrumentation (a hand
loop, and `create_agent`, whose construction is a trace of its own), and Langfuse's SDK (`@observe` with its
openai wrapper) exporting to an in-process exporter; plus the recorded traces of producers that cannot be
installed beside these (`tests/data/otlp/recorded/`, made by `record.py` there with the real packages).

Every producer runs against the OpenAI-compatible test server over real HTTP; its spans (and log records) are
written as OTLP/JSON, read back with the dataset loader, and must give the same record: the question, the call
with its arguments, the result, the final answer, the tools the agent had, and no warning.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from sensei_eval.cli.app import app as root
from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.errors import LoadNotice
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.traces import otlp_json_from_protobuf

from .openai_server import OpenAIServer
from .test_trace_producers import AGENT_TURNS, ANSWER, QUESTION, TOOLS, WEATHER, check_weather_record, run_weather_agent

RECORDED = Path(__file__).parent / 'data' / 'otlp' / 'recorded'
SYSTEM = 'You answer weather questions with the tool.'


class Capture:
    """A tracer provider and a logger provider keeping what they record in memory."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.logs = InMemoryLogRecordExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))

    def write(self, path: Path) -> Path:
        """The spans as one OTLP/JSON trace line and the log records as one log line, as a Collector writes them."""
        lines = [json.dumps(otlp_json_from_protobuf(encode_spans(self.spans.get_finished_spans())))]
        if self.logs.get_finished_logs():
            lines.append(json.dumps(otlp_json_from_protobuf(encode_logs(self.logs.get_finished_logs()))))
        path.write_text('\n'.join(lines) + '\n')
        return path


def check_run(record: QueryRecord, agent: str | None = None) -> None:
    check_weather_record(record)  # question, call and arguments, result, answer, no warning
    assert record.tools is not None and [t.name for t in record.tools] == ['get_weather']
    assert record.metadata.get('agent') == agent


def one_record(path: Path) -> QueryRecord:
    loaded = load_dataset(path)
    assert loaded.errors == [], [str(e) for e in loaded.errors]
    [record] = loaded.records
    return record


@pytest.fixture
def capture() -> Iterator[Capture]:
    yield Capture()


@pytest.fixture(scope='module')
def openllmetry() -> Iterator[Capture]:
    """OpenLLMetry's openai instrumentation, instrumented once (instrumenting it again with other providers leaves
    its spans on the first ones); each test clears the capture and picks the content path."""
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    capture = Capture()
    instrumentor = OpenAIInstrumentor(use_attributes=False)  # sets up its event logger; the path is chosen per test
    instrumentor.instrument(tracer_provider=capture.tracer_provider, logger_provider=capture.logger_provider)
    try:
        yield capture
    finally:
        instrumentor.uninstrument()
        _close(capture)


def _close(capture: Capture) -> None:
    """Shut the providers: wrappers an instrumentation leaves behind record nothing more."""
    capture.tracer_provider.shutdown()
    capture.logger_provider.shutdown()


@pytest.mark.parametrize('use_attributes', [True, False], ids=['attributes', 'log-events'])
def test_openllmetry_openai(openllmetry: Capture, use_attributes: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.instrumentation.openai.shared.config import Config

    monkeypatch.setattr(Config, 'use_legacy_attributes', use_attributes)  # what OpenAIInstrumentor(use_attributes=…) sets
    capture = openllmetry
    capture.spans.clear()
    capture.logs.clear()
    with OpenAIServer(script=list(AGENT_TURNS)) as server:
        run_weather_agent(server.base_url, capture.tracer_provider)
    assert bool(capture.logs.get_finished_logs()) is not use_attributes  # the events path sends content as logs
    record = one_record(capture.write(tmp_path / 'openllmetry.otlp.jsonl'))
    check_weather_record(record)
    if use_attributes:  # the events path records no tool definitions
        check_run(record)


def test_genai_instrumentation_content_as_log_events(capture: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    monkeypatch.setenv('OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', 'EVENT_ONLY')
    monkeypatch.setenv('OTEL_SEMCONV_STABILITY_OPT_IN', 'gen_ai_latest_experimental')
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=capture.tracer_provider, logger_provider=capture.logger_provider)
    try:
        with OpenAIServer(script=list(AGENT_TURNS)) as server:
            run_weather_agent(server.base_url, capture.tracer_provider)
    finally:
        instrumentor.uninstrument()
    names = {log.log_record.event_name for log in capture.logs.get_finished_logs()}
    assert names == {'gen_ai.client.inference.operation.details'}
    assert not any('gen_ai.input.messages' in (s.attributes or {}) for s in capture.spans.get_finished_spans())
    check_weather_record(one_record(capture.write(tmp_path / 'genai-events.json')))


def _weather_tool() -> Any:
    from langchain_core.tools import tool

    @tool('get_weather')
    def weather(city: str) -> str:
        """The current weather of a city."""
        return WEATHER if city == 'Paris' else 'unknown city'

    return weather


@pytest.fixture(scope='module')
def _langchain() -> Iterator[Capture]:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    capture = Capture()
    instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        yield capture
    finally:
        instrumentor.uninstrument()
        _close(capture)


@pytest.fixture
def langchain_instrumented(_langchain: Capture) -> Capture:
    """OpenLLMetry's LangChain instrumentation, instrumented once per module (as its openai one); cleared per test."""
    _langchain.spans.clear()
    return _langchain


def test_openllmetry_langchain_hand_loop(langchain_instrumented: Capture, tmp_path: Path) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_openai import ChatOpenAI

    capture = langchain_instrumented
    weather = _weather_tool()
    with OpenAIServer(script=list(AGENT_TURNS)) as server:
        model = ChatOpenAI(model='m', base_url=server.base_url, api_key='k', max_retries=0).bind_tools([weather])  # type: ignore[arg-type]
        messages: list[Any] = [SystemMessage(SYSTEM), HumanMessage(QUESTION)]
        with capture.tracer_provider.get_tracer('weather-app').start_as_current_span('weather request'):
            for _ in range(4):
                reply = model.invoke(messages)
                messages.append(reply)
                if not reply.tool_calls:
                    break
                messages.extend(weather.invoke(call) for call in reply.tool_calls)
    tool_span = next(s for s in capture.spans.get_finished_spans() if s.name == 'execute_tool get_weather')
    assert 'ToolMessage' in str((tool_span.attributes or {}).get('gen_ai.tool.call.result'))  # the envelope, unwrapped
    check_run(one_record(capture.write(tmp_path / 'langchain.otlp.jsonl')))


def test_openllmetry_langchain_create_agent(langchain_instrumented: Capture, tmp_path: Path) -> None:
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    capture = langchain_instrumented
    with OpenAIServer(script=list(AGENT_TURNS)) as server:
        model = ChatOpenAI(model='m', base_url=server.base_url, api_key='k', max_retries=0)  # type: ignore[arg-type]
        agent = create_agent(model, tools=[_weather_tool()], system_prompt=SYSTEM, name='weather')
        agent.invoke({'messages': [{'role': 'user', 'content': QUESTION}]})
    traces = {s.context.trace_id for s in capture.spans.get_finished_spans()}
    assert len(traces) == 2  # the agent's construction is a trace of its own
    path = capture.write(tmp_path / 'agent.otlp.jsonl')
    loaded = load_dataset(path)
    assert len(loaded.errors) == 1, [str(e) for e in loaded.errors]
    [notice] = loaded.errors
    assert isinstance(notice, LoadNotice) and 'only an agent being built' in notice.message
    [record] = loaded.records
    check_run(record, agent='weather')
    out = tmp_path / 'reports'
    result = CliRunner().invoke(root, ['judge', '--dataset', str(path), '--judges', 'checks', '--no-cache', '--out', str(out)])
    assert result.exit_code == 0, result.output  # the run was judged; the construction trace is information
    assert 'skipped:' in result.output and len(list(out.glob('*/records/*.json'))) == 1


def test_langfuse_observe_with_its_openai_wrapper(capture: Capture, tmp_path: Path) -> None:
    from langfuse import Langfuse, observe

    memory = InMemorySpanExporter()
    client = Langfuse(
        public_key='pk-lf-test',
        secret_key='sk-lf-test',
        base_url='http://127.0.0.1:9',  # never reached: the exporter is in-process
        span_exporter=memory,
        tracer_provider=capture.tracer_provider,
    )
    from langfuse.openai import OpenAI

    @observe(as_type='tool', name='get_weather')
    def weather(city: str) -> str:
        return WEATHER if city == 'Paris' else 'unknown city'

    @observe(as_type='agent', name='weather-agent')
    def agent(question: str, base_url: str) -> str | None:
        llm = OpenAI(base_url=base_url, api_key='k', max_retries=0)
        messages: list[Any] = [{'role': 'system', 'content': SYSTEM}, {'role': 'user', 'content': question}]
        for _ in range(4):
            message = llm.chat.completions.create(model='m', messages=messages, tools=TOOLS).choices[0].message  # type: ignore[arg-type]
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content
            for call in message.tool_calls:
                result = weather(**json.loads(call.function.arguments))  # type: ignore[union-attr]
                messages.append({'role': 'tool', 'tool_call_id': call.id, 'content': result})
        return None

    try:
        with OpenAIServer(script=list(AGENT_TURNS)) as server:
            assert agent(QUESTION, server.base_url) == ANSWER
        client.flush()
    finally:
        client.shutdown()
    types = {(s.attributes or {}).get('langfuse.observation.type') for s in memory.get_finished_spans()}
    assert types == {'agent', 'generation', 'tool'}
    capture.spans = memory
    check_run(one_record(capture.write(tmp_path / 'langfuse.otlp.jsonl')), agent='weather-agent')


@pytest.mark.parametrize('path', sorted(RECORDED.glob('*.otlp.jsonl')), ids=lambda p: p.name.removesuffix('.otlp.jsonl'))
def test_recorded_producers(path: Path) -> None:
    """OpenLLMetry 0.46.2 (openai, and LangChain with its consecutive chat spans parented under the first and an
    empty completion written as `""`), pydantic-ai 0.4.0 (events as attributes, and as OTel log events; its
    `running tools` span is no tool) and Langfuse 3, recorded by `record.py` with the real packages."""
    check_run(one_record(path), 'weather-agent' if path.name.startswith('langfuse') else 'weather')
