"""Record the weather run (question, `get_weather(city="Paris")`, its result, the answer) as traced by producers
that cannot be installed beside the test environment's (an older release of a package the `dev` extra pins newer,
or one that only imports on an older OpenAI client), into OTLP/JSON files the tests read.

Each producer runs against `tests/openai_server.py` (the OpenAI-compatible test server, over real HTTP) in a
virtualenv of its own, and its spans (and log records, for producers that send content as OTel log events) are
written one `Export…ServiceRequest` a line, as the Collector's file exporter writes them. How each file was made:

    python3 -m venv /tmp/v && /tmp/v/bin/pip install <the packages named in PRODUCERS> opentelemetry-sdk \
        opentelemetry-exporter-otlp-proto-common
    /tmp/v/bin/python tests/data/otlp/recorded/record.py <producer>

It imports nothing of sensei_eval: the recording is the producer's own output.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))

from tests.openai_server import OpenAIServer  # noqa: E402

QUESTION = 'What is the weather in Paris right now?'
SYSTEM = 'You answer weather questions with the tool.'
WEATHER = 'rainy, 57°F'
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
CALL = {'id': 'call_w1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}
TURNS: list[Any] = [('message', {'tool_calls': [CALL]}), ('message', {'content': ANSWER})]

# These import `opentelemetry._events`, which later SDKs no longer have.
_OLD_OTEL = (
    ' opentelemetry-sdk==1.38.0 opentelemetry-api==1.38.0 opentelemetry-semantic-conventions==0.59b0'
    ' opentelemetry-instrumentation==0.59b0'
)
# producer -> the packages its virtualenv had (pip install …) when its file was recorded
PRODUCERS = {
    'openllmetry-openai-0.46.2': 'opentelemetry-instrumentation-openai==0.46.2 "openai<2"' + _OLD_OTEL,
    'openllmetry-langchain-0.46.2': (
        'opentelemetry-instrumentation-langchain==0.46.2 "langchain-openai<0.4" "langchain-core<0.4" "openai<2"' + _OLD_OTEL
    ),
    'pydantic-ai-0.4.0-attributes': 'pydantic-ai-slim[openai]==0.4.0 "openai<2"' + _OLD_OTEL,
    'pydantic-ai-0.4.0-logs': 'pydantic-ai-slim[openai]==0.4.0 "openai<2"' + _OLD_OTEL,
    # langfuse 3.15.0 was installed; it takes no span exporter, so its spans are taken from our provider
    'langfuse-3': '"langfuse>=3,<4" "openai<2"',
}


# A hand-written loop names its agent on the span around the run, as docs/traces.md tells users to.
_AGENT = {'gen_ai.agent.name': 'weather'}


def get_weather(city: str) -> str:
    return WEATHER if city == 'Paris' else 'unknown city'


def _otlp_json(request: Any) -> dict[str, Any]:
    """A protobuf export request as OTLP/JSON (ids hex, enums as integers)."""
    from google.protobuf.json_format import MessageToDict

    data: dict[str, Any] = MessageToDict(request, use_integers_for_enums=True)

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            for key in ('traceId', 'spanId', 'parentSpanId'):
                if isinstance(node.get(key), str) and node[key]:
                    node[key] = base64.b64decode(node[key]).hex()
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(data)
    return data


class _Capture:
    """A tracer provider and a logger provider whose spans and log records are kept in memory."""

    def __init__(self) -> None:
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        try:
            from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as LogMemory
        except ImportError:
            from opentelemetry.sdk._logs.export import InMemoryLogExporter as LogMemory  # type: ignore[no-redef]
        self.spans = InMemorySpanExporter()
        self.logs = LogMemory()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))

    def write(self, path: Path) -> None:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        lines = [json.dumps(_otlp_json(encode_spans(self.spans.get_finished_spans())))]
        logs = self.logs.get_finished_logs()
        if logs:
            lines.append(json.dumps(_otlp_json(encode_logs(logs))))
        path.write_text('\n'.join(lines) + '\n')


def _client_loop(base_url: str, capture: _Capture) -> None:
    """The hand-written agent loop on the plain openai client, inside one span of the app's."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key='test-key', max_retries=0)
    messages: list[Any] = [{'role': 'system', 'content': SYSTEM}, {'role': 'user', 'content': QUESTION}]
    with capture.tracer_provider.get_tracer('weather-app').start_as_current_span('weather request', attributes=_AGENT):
        for _ in range(4):
            message = client.chat.completions.create(model='m', messages=messages, tools=TOOLS).choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return
            for call in message.tool_calls:
                result = get_weather(**json.loads(call.function.arguments))
                messages.append({'role': 'tool', 'tool_call_id': call.id, 'content': result})


def openllmetry_openai(base_url: str, capture: _Capture) -> None:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=capture.tracer_provider)
    _client_loop(base_url, capture)


def openllmetry_langchain(base_url: str, capture: _Capture) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    LangchainInstrumentor().instrument(tracer_provider=capture.tracer_provider)

    @tool('get_weather')
    def weather_tool(city: str) -> str:
        """The current weather of a city."""
        return get_weather(city)

    model = ChatOpenAI(model='m', base_url=base_url, api_key='k', max_retries=0).bind_tools([weather_tool])  # type: ignore[arg-type]
    messages: list[Any] = [SystemMessage(SYSTEM), HumanMessage(QUESTION)]
    with capture.tracer_provider.get_tracer('weather-app').start_as_current_span('weather request', attributes=_AGENT):
        for _ in range(4):
            reply = model.invoke(messages)
            messages.append(reply)
            if not reply.tool_calls:
                return
            for call in reply.tool_calls:
                messages.append(weather_tool.invoke(call))


def pydantic_ai_first(base_url: str, capture: _Capture, event_mode: str) -> None:
    from opentelemetry.sdk._events import EventLoggerProvider
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIModel
    from pydantic_ai.providers.openai import OpenAIProvider

    settings = InstrumentationSettings(
        tracer_provider=capture.tracer_provider,
        event_logger_provider=EventLoggerProvider(capture.logger_provider),
        event_mode=event_mode,  # type: ignore[arg-type]
    )
    model = OpenAIModel('m', provider=OpenAIProvider(base_url=base_url, api_key='k'))
    agent = Agent(model, name='weather', system_prompt=SYSTEM, instrument=settings)
    agent.tool_plain(get_weather)
    agent.run_sync(QUESTION)


def langfuse_v3(base_url: str, capture: _Capture) -> None:
    from langfuse import Langfuse, observe

    # v3 takes no exporter: its spans go through our provider (its own processor's exports to port 9 fail)
    client = Langfuse(
        public_key='pk-lf-test', secret_key='sk-lf-test', host='http://127.0.0.1:9', tracer_provider=capture.tracer_provider
    )
    from langfuse.openai import OpenAI  # the wrapper records each call as a generation

    @observe(as_type='tool', name='get_weather')
    def weather(city: str) -> str:
        return get_weather(city)

    @observe(as_type='agent', name='weather-agent')
    def agent(question: str) -> str | None:
        llm = OpenAI(base_url=base_url, api_key='k', max_retries=0)
        messages: list[Any] = [{'role': 'system', 'content': SYSTEM}, {'role': 'user', 'content': question}]
        for _ in range(4):
            message = llm.chat.completions.create(model='m', messages=messages, tools=TOOLS).choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content
            for call in message.tool_calls:
                messages.append(
                    {'role': 'tool', 'tool_call_id': call.id, 'content': weather(**json.loads(call.function.arguments))}
                )
        return None

    agent(QUESTION)
    client.flush()


def main() -> None:
    producer = sys.argv[1] if len(sys.argv) > 1 else ''
    if producer not in PRODUCERS:
        raise SystemExit(f'usage: record.py <{"|".join(PRODUCERS)}>')
    capture = _Capture()
    with OpenAIServer(script=list(TURNS)) as server:
        if producer.startswith('openllmetry-openai'):
            openllmetry_openai(server.base_url, capture)
        elif producer.startswith('openllmetry-langchain'):
            openllmetry_langchain(server.base_url, capture)
        elif producer.startswith('pydantic-ai'):
            pydantic_ai_first(server.base_url, capture, producer.rsplit('-', 1)[1])
        else:
            langfuse_v3(server.base_url, capture)
    path = HERE / f'{producer}.otlp.jsonl'
    capture.write(path)
    print(f'{path}: {len(capture.spans.get_finished_spans())} spans, {len(capture.logs.get_finished_logs())} log records')


if __name__ == '__main__':
    main()
