"""How a run's history is assembled (issue 42): the model calls' input histories are the backbone and a tool span is
the same call as the one that history shows (by id, else by name and arguments), placed where the history puts
it; consecutive model calls parented under the first are calls of their own; OpenLLMetry's legacy empty
completion is no answer; an empty final answer is a located warning; OTel log events are joined to their spans;
and the tools a run had come from each convention's tool definitions (issue 38 item 1), also for a live
pydantic-ai run read through `record_from_span_tree`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_evals.otel.span_tree import SpanTree

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.span_model import Span
from sensei_eval.core.spans import record_from_span_tree
from sensei_eval.core.traces import build_trace

from .test_trace_readers import ANSWER, QUESTION, RESULT, check, one_record, span

CALL = {'type': 'tool_call', 'name': 'get_weather', 'arguments': {'city': 'Paris'}}
WEATHER_TOOL = {
    'type': 'function',
    'name': 'get_weather',
    'description': 'The current weather of a city.',
    'parameters': {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']},
}


def agent_span() -> Span:
    return span(1, 'invoke_agent weather', None, 0, {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'weather'})


def whole_history_chat(sid: int, start: int, *, call_id: str | None = None) -> Span:
    """A model call whose input carries the whole history so far: the question, the call and its result."""
    call = {**CALL, **({'id': call_id} if call_id else {})}
    result = {'type': 'tool_call_response', 'response': RESULT, **({'id': call_id} if call_id else {})}
    inputs = [
        {'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]},
        {'role': 'assistant', 'parts': [call]},
        {'role': 'tool', 'parts': [result]},
    ]
    outputs = [{'role': 'assistant', 'parts': [{'type': 'text', 'content': ANSWER}]}]
    return span(sid, 'chat m', 1, start, {
        'gen_ai.operation.name': 'chat',
        'gen_ai.input.messages': json.dumps(inputs), 'gen_ai.output.messages': json.dumps(outputs),
    })  # fmt: skip


def tool_span(sid: int, start: int, **attributes: Any) -> Span:
    base = {'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'get_weather'}
    return span(sid, 'execute_tool get_weather', 1, start, base | attributes)


def roles(record: QueryRecord) -> list[str]:
    return [m['role'] for m in record.messages]


def test_a_tool_span_before_the_model_call_holding_the_history_is_that_call_in_its_place() -> None:
    for call_id in (None, 'call_7'):  # without ids: matched by name and arguments; with: by id
        extra = {'gen_ai.tool.call.id': call_id} if call_id else {}
        tool = tool_span(2, 1, **{'gen_ai.tool.call.arguments': '{"city": "Paris"}', 'gen_ai.tool.call.result': RESULT}, **extra)
        record = one_record([agent_span(), tool, whole_history_chat(3, 2, call_id=call_id)])
        assert roles(record) == ['user', 'assistant', 'tool', 'assistant']  # the question first, the call once
        check(record)
        assert record.input_warnings == []


def test_an_openinference_tool_span_with_plain_text_input_is_the_history_call_without_a_warning() -> None:
    llm = {
        'openinference.span.kind': 'LLM',
        'llm.input_messages.0.message.role': 'user',
        'llm.input_messages.0.message.content': QUESTION,
        'llm.input_messages.1.message.role': 'assistant',
        'llm.input_messages.1.message.tool_calls.0.tool_call.function.name': 'get_weather',
        'llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments': '{"city": "Paris"}',
        'llm.input_messages.2.message.role': 'tool',
        'llm.input_messages.2.message.content': RESULT,
        'llm.output_messages.0.message.role': 'assistant',
        'llm.output_messages.0.message.content': ANSWER,
    }
    spans = [
        span(1, 'agent', None, 0, {'openinference.span.kind': 'AGENT'}),
        span(2, 'get_weather', 1, 1, {'openinference.span.kind': 'TOOL', 'tool.name': 'get_weather',
             'input.value': 'Paris', 'output.value': RESULT}),
        span(3, 'ChatOpenAI', 1, 2, llm),
    ]  # fmt: skip
    record = one_record(spans)
    check(record)
    assert record.input_warnings == []  # LangChain's one-argument tool input is plain text, not bad JSON


def test_a_tool_span_the_history_does_not_show_is_placed_where_it_ran() -> None:
    first = span(2, 'chat m', 1, 1, {
        'gen_ai.operation.name': 'chat',
        'gen_ai.input.messages': json.dumps([{'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]}]),
        'gen_ai.output.messages': json.dumps([{'role': 'assistant', 'parts': [{'type': 'text', 'content': 'Checking.'}]}]),
    })  # fmt: skip
    tool = tool_span(3, 2, **{'gen_ai.tool.call.arguments': '{"city": "Paris"}', 'gen_ai.tool.call.result': RESULT})
    last = span(4, 'chat m', 1, 3, {
        'gen_ai.operation.name': 'chat',
        'gen_ai.output.messages': json.dumps([{'role': 'assistant', 'parts': [{'type': 'text', 'content': ANSWER}]}]),
    })  # fmt: skip
    record = one_record([agent_span(), first, tool, last])
    assert roles(record) == ['user', 'assistant', 'assistant', 'tool', 'assistant']
    check(record)


def test_consecutive_chat_spans_parented_under_the_first_are_calls_of_their_own_and_an_empty_completion_is_none() -> None:
    """OpenLLMetry's LangChain instrumentation before 0.47: the second call is a child of the first though it runs
    after it, and an empty completion is written as the JSON text `""`."""
    first = span(2, 'ChatOpenAI.chat', 1, 1, {
        'llm.request.type': 'chat',
        'gen_ai.prompt.0.role': 'user', 'gen_ai.prompt.0.content': QUESTION,
        'gen_ai.completion.0.role': 'assistant', 'gen_ai.completion.0.content': '""',
        'gen_ai.completion.0.tool_calls.0.id': 'call_1', 'gen_ai.completion.0.tool_calls.0.name': 'get_weather',
        'gen_ai.completion.0.tool_calls.0.arguments': '{"city": "Paris"}',
    })  # fmt: skip
    second = span(3, 'ChatOpenAI.chat', 2, 3, {
        'llm.request.type': 'chat',
        'gen_ai.prompt.0.role': 'user', 'gen_ai.prompt.0.content': QUESTION,
        'gen_ai.prompt.1.role': 'assistant', 'gen_ai.prompt.1.tool_calls.0.id': 'call_1',
        'gen_ai.prompt.1.tool_calls.0.name': 'get_weather', 'gen_ai.prompt.1.tool_calls.0.arguments': '{"city": "Paris"}',
        'gen_ai.prompt.2.role': 'tool', 'gen_ai.prompt.2.content': RESULT, 'gen_ai.prompt.2.tool_call_id': 'call_1',
        'gen_ai.completion.0.role': 'assistant', 'gen_ai.completion.0.content': ANSWER,
    })  # fmt: skip
    record = one_record([span(1, 'weather request', None, 0, {}), first, second])
    check(record)
    assert record.messages[1]['content'] is None  # not the two quote marks


def test_an_empty_final_answer_is_a_located_warning() -> None:
    chat = span(2, 'chat m', 1, 1, {
        'gen_ai.operation.name': 'chat',
        'gen_ai.input.messages': json.dumps([{'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]}]),
        'gen_ai.output.messages': json.dumps([{'role': 'assistant', 'parts': [{'type': 'text', 'content': ''}]}]),
    })  # fmt: skip
    record = one_record([agent_span(), chat])
    assert record.final_answer() is None
    assert record.input_warnings == ['spans[2]: the final answer is empty (the last model output has no text)']


def test_tools_from_each_convention() -> None:
    def with_tools(attributes: dict[str, Any]) -> QueryRecord:
        chat = whole_history_chat(2, 1)
        return one_record([agent_span(), span(2, chat.name, 1, 1, chat.attributes | attributes)])

    genai_text = with_tools({'gen_ai.tool.definitions': json.dumps([WEATHER_TOOL])})
    genai_structured = with_tools({'gen_ai.tool.definitions': [json.dumps(WEATHER_TOOL)]})
    openinference = with_tools({'llm.tools.0.tool.json_schema': json.dumps({'type': 'function', 'function': WEATHER_TOOL})})
    openllmetry = with_tools({
        'llm.request.functions.0.name': 'get_weather', 'llm.request.functions.0.description': WEATHER_TOOL['description'],
        'llm.request.functions.0.parameters': json.dumps(WEATHER_TOOL['parameters']),
    })  # fmt: skip
    for record in (genai_text, genai_structured, openinference, openllmetry):
        [tool] = record.tools or []
        assert (tool.name, tool.description, tool.parameters) == (
            'get_weather',
            WEATHER_TOOL['description'],
            WEATHER_TOOL['parameters'],
        )
    assert with_tools({}).tools is None  # no span said: the inventory is unknown, not empty


def _weather_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('get_weather', {'city': 'Paris'}, tool_call_id='call_w1')])
    return ModelResponse(parts=[TextPart(ANSWER)])


def test_a_live_pydantic_ai_run_read_from_its_span_tree_has_its_tools() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(FunctionModel(_weather_model))
    agent.instrument = InstrumentationSettings(tracer_provider=provider)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The current weather of a city."""
        return RESULT

    agent.run_sync(QUESTION)
    tree = SpanTree()
    tree.add_readable_spans(list(exporter.get_finished_spans()))
    record = record_from_span_tree(tree, query_id='live-1')
    check(record)
    assert record.tools is not None and [t.name for t in record.tools] == ['get_weather']
    assert record.tools[0].parameters is not None and 'city' in record.tools[0].parameters['properties']


def _log_line(trace: str, span_id: str, events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    records = [
        {
            'timeUnixNano': str(1500 + n),
            'eventName': name,
            'traceId': trace,
            'spanId': span_id,
            'body': {'kvlistValue': {'values': [{'key': k, 'value': {'stringValue': v}} for k, v in body.items()]}},
        }
        for n, (name, body) in enumerate(events)
    ]
    return {'resourceLogs': [{'scopeLogs': [{'logRecords': records}]}]}


def test_content_sent_as_log_events_is_joined_to_its_span(tmp_path: Path) -> None:
    trace = 'cd' * 16
    spans = [
        {'traceId': trace, 'spanId': '1' * 16, 'name': 'invoke_agent weather', 'startTimeUnixNano': '1000',
         'endTimeUnixNano': '9000', 'attributes': [{'key': 'gen_ai.operation.name', 'value': {'stringValue': 'invoke_agent'}}]},
        {'traceId': trace, 'spanId': '2' * 16, 'parentSpanId': '1' * 16, 'name': 'chat m', 'startTimeUnixNano': '1400',
         'endTimeUnixNano': '2000', 'attributes': [{'key': 'gen_ai.operation.name', 'value': {'stringValue': 'chat'}}]},
    ]  # fmt: skip
    logs = _log_line(
        trace,
        '2' * 16,
        [('gen_ai.user.message', {'content': QUESTION}), ('gen_ai.choice', {'message': json.dumps({'content': ANSWER})})],
    )
    stray = _log_line(trace, '9' * 16, [('gen_ai.user.message', {'content': 'lost'})])
    path = tmp_path / 'events.json'  # told from its content: a trace line, then the log lines
    path.write_text(
        '\n'.join(json.dumps(d) for d in ({'resourceSpans': [{'scopeSpans': [{'spans': spans}]}]}, logs, stray)) + '\n'
    )
    loaded = load_dataset(path)
    [record] = loaded.records
    assert record.query == QUESTION and record.final_answer() == ANSWER
    [error] = loaded.errors
    assert error.line == 3 and error.field == 'resourceLogs[0].scopeLogs[0].logRecords[0]' and 'not in the file' in error.message


def test_a_langfuse_generation_made_by_hand() -> None:
    """`start_generation(input=[…messages…], output='text')`: messages in, text out; the agent named by its span."""
    spans = [
        span(1, 'weather-agent', None, 0, {'langfuse.observation.type': 'agent', 'langfuse.observation.output': ANSWER}),
        span(2, 'llm', 1, 1, {
            'langfuse.observation.type': 'generation',
            'langfuse.observation.input': json.dumps([{'role': 'user', 'content': QUESTION}]),
            'langfuse.observation.output': json.dumps({'role': 'assistant', 'tool_calls': [
                {'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}]}),
            'langfuse.observation.usage_details': json.dumps({'input': 12, 'output': 3}),
        }),
        span(3, 'get_weather', 1, 2, {'langfuse.observation.type': 'tool',
             'langfuse.observation.input': json.dumps({'args': [], 'kwargs': {'city': 'Paris'}}),
             'langfuse.observation.output': RESULT}),
    ]  # fmt: skip
    record = one_record(spans)
    check(record)
    assert record.metadata['agent'] == 'weather-agent' and record.metadata['usage'] == {'input_tokens': 12, 'output_tokens': 3}
    assert build_trace(spans).errors == []


def test_judge_prints_input_warnings_and_view_lists_them(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sensei_eval.cli.app import app as root

    empty = [{'role': 'assistant', 'parts': [{'type': 'text', 'content': ''}]}]
    question = [{'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]}]
    spans = [
        {'traceId': 'ef' * 16, 'spanId': '1' * 16, 'name': 'invoke_agent a', 'startTimeUnixNano': '1', 'endTimeUnixNano': '9',
         'attributes': [{'key': 'gen_ai.operation.name', 'value': {'stringValue': 'invoke_agent'}}]},
        {'traceId': 'ef' * 16, 'spanId': '2' * 16, 'parentSpanId': '1' * 16, 'name': 'chat m', 'startTimeUnixNano': '2',
         'endTimeUnixNano': '3', 'attributes': [
             {'key': 'gen_ai.operation.name', 'value': {'stringValue': 'chat'}},
             {'key': 'gen_ai.input.messages', 'value': {'stringValue': json.dumps(question)}},
             {'key': 'gen_ai.output.messages', 'value': {'stringValue': json.dumps(empty)}}]},
    ]  # fmt: skip
    path = tmp_path / 'empty.otlp.jsonl'
    path.write_text(json.dumps({'resourceSpans': [{'scopeSpans': [{'spans': spans}]}]}) + '\n')
    out = tmp_path / 'reports'
    result = CliRunner().invoke(root, ['judge', '--dataset', str(path), '--judges', 'checks', '--no-cache', '--out', str(out)])
    flat = ' '.join(result.output.split())
    assert f'input warning: {"ef" * 16}: resourceSpans[0].scopeSpans[0].spans[1]: the final answer is empty' in flat
    [run] = list(out.iterdir())
    view = CliRunner().invoke(root, ['view', str(run), '--out', str(tmp_path / 'view.html')])
    assert view.exit_code == 0, view.output
    assert 'input warnings (1)' in (tmp_path / 'view.html').read_text()


def test_langchain_messages_dumped_without_a_role_are_read() -> None:
    """A tool's output recorded as the `ToolMessage` it became (`model_dump`: `type`, no role), and a model call's
    `input.value` holding LangChain messages the same way."""
    tool_message = {'content': RESULT, 'type': 'tool', 'tool_call_id': 'call_1', 'name': 'get_weather'}
    llm_in = {'messages': [{'type': 'human', 'content': QUESTION}]}
    call = {'id': 'call_1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}
    llm_out = {'choices': [{'message': {'role': 'assistant', 'tool_calls': [call]}}]}
    spans = [
        span(1, 'agent', None, 0, {'openinference.span.kind': 'AGENT', 'output.value': ANSWER}),
        span(2, 'llm', 1, 1, {'openinference.span.kind': 'LLM', 'input.value': json.dumps(llm_in),
             'output.value': json.dumps(llm_out)}),
        span(3, 'get_weather', 1, 2, {'openinference.span.kind': 'TOOL', 'tool.name': 'get_weather',
             'input.value': '{"city": "Paris"}', 'output.value': json.dumps(tool_message)}),
    ]  # fmt: skip
    record = one_record(spans)
    check(record)
    assert record.input_warnings == []
