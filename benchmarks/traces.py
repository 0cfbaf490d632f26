"""What the trace readers recover from published traces of seven agent frameworks and from real producers, and how
fast.

**Frameworks.** The seven traces (`tests/data/agent_traces/`, a copy of `shared/datasets/agent-traces`: Agno,
Google ADK, LangChain, LlamaIndex, the OpenAI Agents SDK, smolagents and TinyAgent running one task, as
OpenTelemetry SDK span dumps) are read with the dataset loader, format told from the content. The task's
reference: the question, two tool calls (`get_current_time` with `{"timezone": "America/New_York"}`,
`write_file` with `{"text": "2025"}`) with results, an answer, and the agent's name.

**Producers.** The weather run (question, `get_weather(city="Paris")`, its result, the answer) traced by real
instrumentation packages against the OpenAI-compatible test server (`tests/openai_server.py`), written as
OTLP/JSON and read back: the official GenAI instrumentation (content on spans, and as log events), OpenInference's,
OpenLLMetry's openai (attributes, and log events) and LangChain (a hand loop; `create_agent`) instrumentations,
Langfuse's SDK, pydantic-ai's own; plus the recorded traces of producers that cannot be installed beside these
(`tests/data/otlp/recorded/`: OpenLLMetry 0.46.2, pydantic-ai 0.4.0, Langfuse 3). Hand loops name their agent on
the span around the run (`gen_ai.agent.name`), as `docs/traces.md` tells users to. A producer whose package is
not installed is listed as such. Every row must show one run with the question, the call and its arguments,
the result, the answer, the agent, and 0 warnings.

Without `--quick`, it also times the readers: every framework file read `--repeat` times, as spans per second.

    python benchmarks/traces.py [--quick] [--dir PATH] [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sensei_eval.core.datasets import load_dataset  # noqa: E402
from sensei_eval.core.errors import LoadNotice  # noqa: E402
from sensei_eval.core.message_formats import FINAL_ANSWER_TOOLS  # noqa: E402
from sensei_eval.core.records import LoadResult  # noqa: E402

# the tests' in-memory tracer and logger providers, written as a Collector writes OTLP/JSON
from tests.test_trace_producers_more import Capture as _Capture  # noqa: E402

DEFAULT_DIR = ROOT / 'tests' / 'data' / 'agent_traces'
RECORDED = ROOT / 'tests' / 'data' / 'otlp' / 'recorded'
# What every framework run of the task does: these calls, in this order, each answered.
EXPECTED_CALLS = (('get_current_time', {'timezone': 'America/New_York'}), ('write_file', {'text': '2025'}))
FRAMEWORK_QUESTION = 'Find what year it is in the America/New_York timezone'
# The weather run every producer traces.
WEATHER_QUESTION = 'What is the weather in Paris right now?'
WEATHER_CALLS = (('get_weather', {'city': 'Paris'}),)
WEATHER_RESULT = 'rainy, 57°F'
WEATHER_ANSWER = f'It is {WEATHER_RESULT} in Paris.'
SYSTEM = 'You answer weather questions with the tool.'


def _row(
    name: str, loaded: LoadResult, question: str, calls: tuple[tuple[str, dict[str, Any]], ...], answer: str | None
) -> tuple[str, bool]:
    """One line of the table and whether the run was recovered whole."""
    errors = [e for e in loaded.errors if not isinstance(e, LoadNotice)]
    skipped = len(loaded.errors) - len(errors)
    records = loaded.records
    record = records[0] if len(records) == 1 else None
    got = [(c.tool_name, c.args) for c in record.tool_calls() if c.tool_name not in FINAL_ANSWER_TOOLS] if record else []
    results = all(c.result is not None for c in record.tool_calls()) if record else False
    final = record.final_answer() if record else None
    ok = {
        'question': bool(record and question in record.query),
        'calls': got == [(n, a) for n, a in calls],
        'results': results,
        'answer': bool(final) and (answer is None or final == answer),
        'agent': bool(record and record.metadata.get('agent')),
    }
    warnings = sum(len(r.input_warnings) for r in records)
    whole = all(ok.values()) and not errors and warnings == 0
    marks = ' '.join('yes' if ok[k] else 'NO ' for k in ('question', 'calls', 'results', 'answer'))
    agent = str(record.metadata.get('agent', '-'))[:14] if record else '-'
    tools = len(record.tools) if record and record.tools is not None else '-'
    line = f'{name:<40} {len(records):>4} {marks}  {agent:<14} {tools!s:>5} {warnings:>4} {len(errors):>3} {skipped:>4}'
    for error in errors[:3]:
        line += f'\n    error: {error}'
    for r in records:
        for warning in r.input_warnings[:3]:
            line += f'\n    warning: {warning}'
    return line, whole


_HEADER = (
    f'{"trace":<40} {"runs":>4} {"ques":<3} {"call":<3} {"res":<3} {"ans":<3}  {"agent":<14} {"tools":>5} {"warn":>4} {"err":>3} '
    f'{"skip":>4}'
)


def frameworks(directory: Path) -> tuple[int, int]:
    paths = sorted(directory.glob('*.json'))
    if not paths:
        raise SystemExit(f'no *.json trace files in {directory}')
    print(_HEADER)
    print('-' * len(_HEADER))
    whole = 0
    for path in paths:
        line, ok = _row(path.stem, load_dataset(path), FRAMEWORK_QUESTION, EXPECTED_CALLS, None)
        print(line)
        whole += ok
    return whole, len(paths)


# ---------------------------------------------------------------------------------------------------
# Live producers


def _client_loop(base_url: str, capture: _Capture) -> None:
    """The hand-written agent loop on the plain openai client, in one span of the app's that names the agent."""
    import openai

    from tests.test_trace_producers import TOOLS

    client = openai.OpenAI(base_url=base_url, api_key='test-key', max_retries=0)
    messages: list[Any] = [{'role': 'system', 'content': SYSTEM}, {'role': 'user', 'content': WEATHER_QUESTION}]
    tracer = capture.tracer_provider.get_tracer('weather-app')
    with tracer.start_as_current_span('weather request', attributes={'gen_ai.agent.name': 'weather'}):
        for _ in range(4):
            message = client.chat.completions.create(model='m', messages=messages, tools=TOOLS).choices[0].message  # type: ignore[arg-type]
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return
            for call in message.tool_calls:
                city = json.loads(call.function.arguments).get('city')  # type: ignore[union-attr]
                messages.append({'role': 'tool', 'tool_call_id': call.id, 'content': WEATHER_RESULT if city == 'Paris' else '?'})


# OpenLLMetry's instrumentations do not fully undo themselves: instrumented a second time, their first wrappers
# still record into the first providers. Each is instrumented once, on a capture of its own, and its rows read it.
_ONCE: dict[str, _Capture] = {}


def _instrumented(make: Callable[[], Any], *, logs: bool = False) -> Callable[[str, _Capture], None]:
    def produce(base_url: str, capture: _Capture) -> None:
        instrumentor = make()
        kwargs: dict[str, Any] = {'tracer_provider': capture.tracer_provider}
        if logs:
            kwargs['logger_provider'] = capture.logger_provider
        instrumentor.instrument(**kwargs)
        try:
            _client_loop(base_url, capture)
        finally:
            instrumentor.uninstrument()

    return produce


def _once(name: str, instrument: Callable[[_Capture], None]) -> _Capture:
    if name not in _ONCE:
        _ONCE[name] = _Capture()
        instrument(_ONCE[name])
    once = _ONCE[name]
    once.spans.clear()
    once.logs.clear()
    return once


def _genai(mode: str) -> Callable[[str, _Capture], None]:
    def produce(base_url: str, capture: _Capture) -> None:
        import os

        os.environ['OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT'] = mode
        os.environ['OTEL_SEMCONV_STABILITY_OPT_IN'] = 'gen_ai_latest_experimental'
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        _instrumented(OpenAIInstrumentor, logs=True)(base_url, capture)

    return produce


def _openinference(base_url: str, capture: _Capture) -> None:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    _instrumented(OpenAIInstrumentor)(base_url, capture)


def _openllmetry(use_attributes: bool) -> Callable[[str, _Capture], None]:
    def produce(base_url: str, capture: _Capture) -> None:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        from opentelemetry.instrumentation.openai.shared.config import Config

        def instrument(once: _Capture) -> None:
            # the events path is set up at instrument time; which path runs is `Config` (what use_attributes sets)
            OpenAIInstrumentor(use_attributes=False).instrument(
                tracer_provider=once.tracer_provider, logger_provider=once.logger_provider
            )

        once = _once('openllmetry-openai', instrument)
        Config.use_legacy_attributes = use_attributes
        _client_loop(base_url, once)
        capture.spans, capture.logs = once.spans, once.logs

    return produce


def _weather_tool() -> Any:
    from langchain_core.tools import tool

    @tool('get_weather')
    def weather(city: str) -> str:
        """The current weather of a city."""
        return WEATHER_RESULT if city == 'Paris' else 'unknown city'

    return weather


def _langchain(agent: bool) -> Callable[[str, _Capture], None]:
    def produce(base_url: str, capture: _Capture) -> None:
        from langchain_core.messages import HumanMessage, SystemMessage
        from langchain_openai import ChatOpenAI
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        once = _once('openllmetry-langchain', lambda c: LangchainInstrumentor().instrument(tracer_provider=c.tracer_provider))
        capture.spans = once.spans
        model = ChatOpenAI(model='m', base_url=base_url, api_key='k', max_retries=0)  # type: ignore[arg-type]
        weather = _weather_tool()
        if agent:
            from langchain.agents import create_agent

            question = {'messages': [{'role': 'user', 'content': WEATHER_QUESTION}]}
            create_agent(model, tools=[weather], system_prompt=SYSTEM, name='weather').invoke(question)  # type: ignore[arg-type]
            return
        bound = model.bind_tools([weather])
        messages: list[Any] = [SystemMessage(SYSTEM), HumanMessage(WEATHER_QUESTION)]
        with once.tracer_provider.get_tracer('weather-app').start_as_current_span(
            'weather request', attributes={'gen_ai.agent.name': 'weather'}
        ):
            for _ in range(4):
                reply = bound.invoke(messages)
                messages.append(reply)
                if not reply.tool_calls:
                    break
                messages.extend(weather.invoke(call) for call in reply.tool_calls)

    return produce


def _langfuse(base_url: str, capture: _Capture) -> None:
    from langfuse import Langfuse, observe

    client = Langfuse(public_key='pk-lf-b', secret_key='sk-lf-b', base_url='http://127.0.0.1:9', span_exporter=capture.spans,
                      tracer_provider=capture.tracer_provider)  # fmt: skip
    from langfuse.openai import OpenAI

    from tests.test_trace_producers import TOOLS

    @observe(as_type='tool', name='get_weather')
    def weather(city: str) -> str:
        return WEATHER_RESULT if city == 'Paris' else 'unknown city'

    @observe(as_type='agent', name='weather')
    def agent(question: str) -> None:
        llm = OpenAI(base_url=base_url, api_key='k', max_retries=0)
        messages: list[Any] = [{'role': 'system', 'content': SYSTEM}, {'role': 'user', 'content': question}]
        for _ in range(4):
            message = llm.chat.completions.create(model='m', messages=messages, tools=TOOLS).choices[0].message  # type: ignore[arg-type]
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return
            for call in message.tool_calls:
                messages.append(
                    {'role': 'tool', 'tool_call_id': call.id, 'content': weather(**json.loads(call.function.arguments))}
                )  # type: ignore[union-attr]

    agent(WEATHER_QUESTION)
    client.flush()
    client.shutdown()


def _pydantic_ai(base_url: str, capture: _Capture) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel('m', provider=OpenAIProvider(base_url=base_url, api_key='k'))
    agent = Agent(model, name='weather', instructions=SYSTEM)
    agent.instrument = InstrumentationSettings(tracer_provider=capture.tracer_provider)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The current weather of a city."""
        return WEATHER_RESULT if city == 'Paris' else 'unknown city'

    agent.run_sync(WEATHER_QUESTION)


# In this order: OpenLLMetry's openai instrumentation, once on, stays on, so the producers using the openai
# client without it come first.
PRODUCERS: dict[str, Callable[[str, _Capture], None]] = {
    'genai openai-v2 (spans)': _genai('SPAN_ONLY'),
    'genai openai-v2 (log events)': _genai('EVENT_ONLY'),
    'openinference openai': _openinference,
    'pydantic-ai (own)': _pydantic_ai,
    'langfuse 5 (@observe)': _langfuse,
    'openllmetry langchain (loop)': _langchain(False),
    'openllmetry langchain (agent)': _langchain(True),
    'openllmetry openai': _openllmetry(True),
    'openllmetry openai (log events)': _openllmetry(False),
}


def producers() -> tuple[int, int]:
    from tests.openai_server import OpenAIServer
    from tests.test_trace_producers import AGENT_TURNS

    print(_HEADER)
    print('-' * len(_HEADER))
    whole = total = 0
    with tempfile.TemporaryDirectory(prefix='producers-') as tmp:
        for name, produce in PRODUCERS.items():
            total += 1
            capture = _Capture()
            try:
                with OpenAIServer(script=list(AGENT_TURNS)) as server:
                    produce(server.base_url, capture)
            except ImportError as e:
                print(f'{name:<40} not installed ({e.name}): pip install -e ".[dev]"')
                continue
            path = capture.write(Path(tmp) / f'{total}.otlp.jsonl')
            line, ok = _row(name, load_dataset(path), WEATHER_QUESTION, WEATHER_CALLS, WEATHER_ANSWER)
            print(line)
            whole += ok
    for path in sorted(RECORDED.glob('*.otlp.jsonl')):
        total += 1
        name = f'{path.name.removesuffix(".otlp.jsonl")} (recorded)'
        line, ok = _row(name, load_dataset(path), WEATHER_QUESTION, WEATHER_CALLS, WEATHER_ANSWER)
        print(line)
        whole += ok
    return whole, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='only what was recovered (no timing)')
    parser.add_argument('--dir', type=Path, default=DEFAULT_DIR, help='folder of *.json framework trace files')
    parser.add_argument('--repeat', type=int, default=50, help='reads per file for the timing')
    args = parser.parse_args()
    done, of = frameworks(args.dir)
    whole = 'one run with the question, the calls with their arguments and results, the final answer and the agent, 0 warnings'
    print(f'\n{done} of {of} frameworks: {whole}\n')
    done, of = producers()
    print(f'\n{done} of {of} producers: {whole}')
    if args.quick:
        return
    paths = sorted(args.dir.glob('*.json'))
    total_spans = sum(len(json.loads(p.read_text()).get('spans', [])) for p in paths)
    started = time.perf_counter()
    for _ in range(args.repeat):
        for path in paths:
            load_dataset(path)
    elapsed = time.perf_counter() - started
    spans_read = total_spans * args.repeat
    print(f'read {spans_read:,} spans ({len(paths) * args.repeat} files) in {elapsed:.2f} s: {spans_read / elapsed:,.0f} spans/s')


if __name__ == '__main__':
    main()
