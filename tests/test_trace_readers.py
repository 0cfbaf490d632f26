"""The trace readers on each form the conventions' documents define (OpenTelemetry GenAI: parts messages with
`response`, system instructions, the operation-details event, the older per-message events, `gen_ai.prompt` /
`gen_ai.completion` attributes and their flattened form, `execute_tool` spans without ids; OpenInference:
flattened messages, TOOL / AGENT / CHAIN / RETRIEVER spans, `input.value` / `output.value`), SDK span dumps,
speakers from agent names, and the seven published framework traces in `shared/datasets/agent-traces`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.message_formats import speaker_of
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.span_model import Span, SpanEvent
from sensei_eval.core.traces import build_trace, load_traces

# the seven published traces of shared/datasets/agent-traces, copied with their licence
AGENT_TRACES = Path(__file__).parent / 'data' / 'agent_traces'

TRACE = 'ab' * 16
QUESTION = 'What is the weather in Paris?'
RESULT = 'rainy, 57°F'
ANSWER = 'It is rainy and 57°F in Paris.'


def span(
    sid: int,
    name: str,
    parent: int | None,
    start: int,
    attributes: dict[str, Any],
    events: tuple[SpanEvent, ...] = (),
    status: str = 'ok',
) -> Span:
    return Span(
        TRACE, f'{sid:016x}', f'{parent:016x}' if parent else None, name, start * 1000, start * 1000 + 500,
        attributes, status, '', events, {}, 'test', 1, f'spans[{sid}]',  # type: ignore[arg-type]
    )  # fmt: skip


def one_record(spans: list[Span]) -> QueryRecord:
    build = build_trace(spans)
    assert build.errors == [], [str(e) for e in build.errors]
    [record] = build.records
    return record


def check(record: QueryRecord, args: dict[str, Any] | None = None) -> None:
    [call] = record.tool_calls()
    assert call.tool_name == 'get_weather' and call.args == (args or {'city': 'Paris'})
    assert call.result == RESULT
    assert record.final_answer() == ANSWER and record.query == QUESTION


# --------------------------------------------------------------------------- OpenTelemetry GenAI


def genai_parts_chat(sid: int, start: int, *, response_key: str = 'response', with_id: bool = True) -> Span:
    call: dict[str, Any] = {'type': 'tool_call', 'name': 'get_weather', 'arguments': {'city': 'Paris'}}
    result: dict[str, Any] = {'type': 'tool_call_response', response_key: RESULT}
    if with_id:
        call['id'] = result['id'] = 'call_1'
    inputs = [
        {'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]},
        {'role': 'assistant', 'parts': [call]},
        {'role': 'tool', 'parts': [result]},
    ]
    outputs = [{'role': 'assistant', 'parts': [{'type': 'text', 'content': ANSWER}], 'finish_reason': 'stop'}]
    return span(sid, 'chat gpt-4o', 1, start, {
        'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o',
        'gen_ai.system_instructions': json.dumps([{'type': 'text', 'content': 'Answer weather questions.'}]),
        'gen_ai.input.messages': json.dumps(inputs), 'gen_ai.output.messages': json.dumps(outputs),
        'gen_ai.usage.input_tokens': 40, 'gen_ai.usage.output_tokens': 9,
    })  # fmt: skip


def test_genai_parts_with_the_result_in_response_and_a_raw_client_root() -> None:
    record = one_record([span(1, 'weather request', None, 0, {}), genai_parts_chat(2, 1)])
    check(record)
    assert record.messages[0] == {'role': 'system', 'content': 'Answer weather questions.'}
    assert record.metadata['usage'] == {'input_tokens': 40, 'output_tokens': 9} and record.metadata['model'] == 'gpt-4o'


def test_genai_tool_call_response_drafts_result_key_and_no_ids() -> None:
    check(one_record([span(1, 'root', None, 0, {}), genai_parts_chat(2, 1, response_key='result', with_id=False)]))


def test_a_tool_result_present_but_unreadable_is_an_error_not_null() -> None:
    chat = genai_parts_chat(2, 1)
    broken = json.loads(chat.attributes['gen_ai.input.messages'])
    del broken[2]['parts'][0]['response']
    bad = span(2, chat.name, 1, 1, {**chat.attributes, 'gen_ai.input.messages': json.dumps(broken)})
    build = build_trace([span(1, 'root', None, 0, {}), bad])
    assert build.records == []
    [error] = build.errors
    assert error.field == 'spans[2].attributes[gen_ai.input.messages][2].parts[0]' and 'cannot be read' in error.message


def test_genai_execute_tool_spans_without_ids_pair_by_order_under_invoke_agent() -> None:
    first_out = [{'role': 'assistant', 'parts': [{'type': 'tool_call', 'name': 'get_weather', 'arguments': '{"city": "Paris"}'}]}]
    spans = [
        span(1, 'invoke_agent weather', None, 0, {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'weather'}),
        span(2, 'chat m', 1, 1, {'gen_ai.operation.name': 'chat',
             'gen_ai.input.messages': json.dumps([{'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]}]),
             'gen_ai.output.messages': json.dumps(first_out)}),
        span(3, 'execute_tool get_weather', 1, 2, {'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'get_weather',
             'gen_ai.tool.call.arguments': '{"city": "Paris"}', 'gen_ai.tool.call.result': RESULT}),
        span(4, 'chat m', 1, 3, {'gen_ai.operation.name': 'chat',
             'gen_ai.output.messages': json.dumps([{'role': 'assistant', 'parts': [{'type': 'text', 'content': ANSWER}]}])}),
    ]  # fmt: skip
    record = one_record(spans)
    check(record)
    assert record.metadata['agent'] == 'weather'


def test_genai_operation_details_event() -> None:
    chat = genai_parts_chat(2, 1)
    event = SpanEvent('gen_ai.client.inference.operation.details', 1, {
        k: chat.attributes[k] for k in ('gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.system_instructions')
    })  # fmt: skip
    check(one_record([span(1, 'root', None, 0, {}), span(2, 'chat m', 1, 1, {'gen_ai.operation.name': 'chat'}, (event,))]))


def test_genai_older_per_message_events() -> None:
    call = {'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}
    events = (
        SpanEvent('gen_ai.system.message', 1, {'content': 'Answer weather questions.'}),
        SpanEvent('gen_ai.user.message', 2, {'content': QUESTION}),
        SpanEvent('gen_ai.assistant.message', 3, {'gen_ai.event.content': json.dumps({'tool_calls': [call]})}),
        SpanEvent('gen_ai.tool.message', 4, {'gen_ai.event.content': json.dumps({'id': 'c1', 'content': RESULT})}),
        SpanEvent(
            'gen_ai.choice',
            5,
            {'gen_ai.event.content': json.dumps({'index': 0, 'finish_reason': 'stop', 'message': {'content': ANSWER}})},
        ),
    )
    check(one_record([span(1, 'root', None, 0, {}), span(2, 'chat gpt-4', 1, 1, {'gen_ai.system': 'openai'}, events)]))


def test_genai_older_prompt_and_completion_attributes_flattened() -> None:
    attributes = {
        'gen_ai.operation.name': 'chat',
        'gen_ai.prompt.0.role': 'user', 'gen_ai.prompt.0.content': QUESTION,
        'gen_ai.prompt.1.role': 'assistant', 'gen_ai.prompt.1.tool_calls.0.id': 'c1',
        'gen_ai.prompt.1.tool_calls.0.name': 'get_weather', 'gen_ai.prompt.1.tool_calls.0.arguments': '{"city": "Paris"}',
        'gen_ai.prompt.2.role': 'tool', 'gen_ai.prompt.2.tool_call_id': 'c1', 'gen_ai.prompt.2.content': RESULT,
        'gen_ai.completion.0.role': 'assistant', 'gen_ai.completion.0.content': ANSWER,
    }  # fmt: skip
    check(one_record([span(1, 'root', None, 0, {}), span(2, 'openai.chat', 1, 1, attributes)]))


def test_genai_older_prompt_and_completion_as_json_and_text() -> None:
    prompt = [{'role': 'user', 'content': QUESTION}]
    spans = [
        span(1, 'root', None, 0, {}),
        span(2, 'chat', 1, 1, {'gen_ai.prompt': json.dumps(prompt), 'gen_ai.completion': ANSWER}),
    ]
    record = one_record(spans)
    assert record.query == QUESTION and record.final_answer() == ANSWER and record.tool_calls() == []


# --------------------------------------------------------------------------- OpenInference


def oi_llm(sid: int, parent: int, start: int, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> Span:
    attributes: dict[str, Any] = {'openinference.span.kind': 'LLM', 'llm.model_name': 'gpt-4o', 'llm.token_count.prompt': 30}
    for prefix, messages in (('llm.input_messages', inputs), ('llm.output_messages', outputs)):
        for i, m in enumerate(messages):
            for key, value in m.items():
                attributes[f'{prefix}.{i}.message.{key}'] = value
    return span(sid, 'ChatCompletion', parent, start, attributes)


def test_openinference_agent_with_llm_and_tool_spans_and_session() -> None:
    call = {'tool_calls.0.tool_call.id': 'c1', 'tool_calls.0.tool_call.function.name': 'get_weather',
            'tool_calls.0.tool_call.function.arguments': '{"city": "Paris"}'}  # fmt: skip
    spans = [
        span(1, 'WeatherAgent', None, 0, {'openinference.span.kind': 'AGENT', 'input.value': QUESTION, 'output.value': ANSWER,
                                          'session.id': 'conv-7'}),
        oi_llm(2, 1, 1, [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'contents.0.message_content.type': 'text',
                                                                       'contents.0.message_content.text': QUESTION}],
               [{'role': 'assistant', **call}]),
        span(3, 'get_weather', 1, 2, {'openinference.span.kind': 'TOOL', 'tool.name': 'get_weather',
                                      'input.value': '{"city": "Paris"}', 'input.mime_type': 'application/json',
                                      'output.value': RESULT, 'output.mime_type': 'text/plain'}),
        oi_llm(4, 1, 3, [{'role': 'user', 'content': QUESTION}, {'role': 'assistant', **call},
                         {'role': 'tool', 'tool_call_id': 'c1', 'content': RESULT}], [{'role': 'assistant', 'content': ANSWER}]),
    ]  # fmt: skip
    record = one_record(spans)
    check(record)
    assert record.metadata['session_id'] == 'conv-7' and record.metadata['agent'] == 'WeatherAgent'
    assert [m['role'] for m in record.messages] == ['system', 'user', 'assistant', 'tool', 'assistant']


def test_openinference_chain_root_with_only_tool_and_retriever_spans_uses_input_and_output_values() -> None:
    spans = [
        span(1, 'RunnableSequence', None, 0, {'openinference.span.kind': 'CHAIN', 'input.value': json.dumps({'input': QUESTION}),
                                              'input.mime_type': 'application/json', 'output.value': ANSWER}),
        span(2, 'get_weather', 1, 1, {'openinference.span.kind': 'TOOL', 'tool.name': 'get_weather',
                                      'input.value': '{"city": "Paris"}', 'output.value': RESULT}),
        span(3, 'retriever', 1, 2, {'openinference.span.kind': 'RETRIEVER', 'input.value': 'paris climate',
                                    'retrieval.documents.0.document.content': 'Paris is mild.'}),
        span(4, 'embed', 1, 3, {'openinference.span.kind': 'EMBEDDING', 'input.value': 'paris'}),
    ]  # fmt: skip
    record = one_record(spans)
    calls = record.tool_calls()
    assert [(c.tool_name, c.result) for c in calls] == [('get_weather', RESULT), ('retriever', '[{"content": "Paris is mild."}]')]
    assert calls[1].args == {'query': 'paris climate'}
    assert record.query == QUESTION and record.final_answer() == ANSWER
    [warning] = record.input_warnings  # the embedding span is not dropped silently
    assert "span 'embed' (EMBEDDING)" in warning and 'spans[4]' in warning


def test_two_agents_become_speakers() -> None:
    def chat(sid: int, parent: int, start: int, text: str) -> Span:
        out = json.dumps([{'role': 'assistant', 'parts': [{'type': 'text', 'content': text}]}])
        inp = json.dumps([{'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]}])
        return span(
            sid,
            'chat',
            parent,
            start,
            {'gen_ai.operation.name': 'chat', 'gen_ai.input.messages': inp, 'gen_ai.output.messages': out},
        )

    spans = [
        span(1, 'workflow', None, 0, {}),
        span(2, 'invoke_agent planner', 1, 1, {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'planner'}),
        chat(3, 2, 2, 'Plan: look up the weather.'),
        span(4, 'invoke_agent writer', 1, 3, {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'writer'}),
        chat(5, 4, 4, ANSWER),
    ]
    build = build_trace(spans)
    assert len(build.records) == 2  # two top-level agent runs under a plain (non-agent) root: two runs
    lead = {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'lead'}
    nested = [spans[0], span(2, 'invoke_agent lead', 1, 1, lead),
              span(6, 'invoke_agent planner', 2, 1, {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'planner'}),
              chat(3, 6, 2, 'Plan: look up the weather.'),
              span(7, 'invoke_agent writer', 2, 3, {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'writer'}),
              chat(5, 7, 4, ANSWER)]  # fmt: skip
    record = one_record(nested)
    said = [(speaker_of(m), m.parts[0].content) for m in record.model_messages if m.kind == 'response']
    assert said == [('planner', 'Plan: look up the weather.'), ('writer', ANSWER)]
    assert record.metadata['agents'] == ['planner', 'writer']


# --------------------------------------------------------------------------- files


def test_sdk_span_dump_in_the_to_json_shape(tmp_path: Path) -> None:
    """`ReadableSpan.to_json()` as ConsoleSpanExporter prints it: 0x ids, ISO times, status names."""

    def dump(sid: int, parent: int | None, name: str, attributes: dict[str, Any]) -> str:
        return json.dumps({
            'name': name, 'context': {'trace_id': '0x' + TRACE, 'span_id': f'0x{sid:016x}', 'trace_state': '[]'},
            'kind': 'SpanKind.INTERNAL', 'parent_id': f'0x{parent:016x}' if parent else None,
            'start_time': f'2025-01-01T00:00:0{sid}.000000Z', 'end_time': f'2025-01-01T00:00:0{sid}.500000Z',
            'status': {'status_code': 'UNSET'}, 'attributes': attributes, 'events': [], 'links': [],
            'resource': {'attributes': {'service.name': 'weather'}, 'schema_url': ''},
        }, indent=4)  # fmt: skip

    chat = genai_parts_chat(2, 1)
    path = tmp_path / 'console.log'
    path.write_text(dump(2, 1, 'chat gpt-4o', chat.attributes) + '\n' + dump(1, None, 'weather request', {}) + '\n')
    loaded = load_dataset(path)
    assert loaded.errors == []
    check(loaded.records[0])
    assert loaded.records[0].metadata['trace_id'] == TRACE


def test_otlp_pretty_printed_document_and_bad_values_located(tmp_path: Path) -> None:
    from tests.service.test_trace_producers_service import _request, _span  # the OTLP/JSON request helpers

    request = _request(_span(TRACE, '1' * 16, 'chat', gen_ai__operation__name='chat',
                             gen_ai__input__messages=json.dumps([{'role': 'user', 'content': QUESTION}]),
                             gen_ai__output__messages=json.dumps([{'role': 'assistant', 'content': ANSWER}])))  # fmt: skip
    path = tmp_path / 'export.json'
    path.write_text(json.dumps(request, indent=2) + '\n{not json}\n')
    result = load_traces(path)
    assert [r.final_answer() for r in result.records] == [ANSWER]
    [error] = result.errors
    assert error.line == json.dumps(request, indent=2).count('\n') + 2 and 'not valid JSON' in error.message


def test_json_array_and_single_document_of_records(tmp_path: Path) -> None:
    messages = [{'role': 'user', 'content': QUESTION}, {'role': 'assistant', 'content': ANSWER}]
    array = tmp_path / 'runs.json'
    text = json.dumps([{'query_id': 'a', 'messages': messages}, {'query_id': 'b', 'messages': []}], indent=2)
    array.write_text(text)
    loaded = load_dataset(array)
    assert [r.query_id for r in loaded.records] == ['a']
    [error] = loaded.errors
    b_starts = text.split('\n').index('    "query_id": "b",')  # the line before it opens the element (1-based)
    assert error.line == b_starts and error.query_id == 'b'  # the line where the bad element starts
    single = tmp_path / 'one.json'
    single.write_text(json.dumps({'query_id': 'one', 'messages': messages}, indent=2))
    assert [r.query_id for r in load_dataset(single).records] == ['one']


ORDER = {'order_id': '#1'}
CANCEL = {'name': 'cancel_order', 'arguments': json.dumps(ORDER)}


def test_tau_bench_and_tau2_bench_result_files(tmp_path: Path) -> None:
    traj = [
        {'role': 'system', 'content': 'Policy.'}, {'role': 'user', 'content': 'Cancel my order #1.'},
        {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 't1', 'type': 'function', 'function': CANCEL}]},
        {'role': 'tool', 'tool_call_id': 't1', 'name': 'cancel_order', 'content': 'cancelled'},
        {'role': 'assistant', 'content': 'Your order is cancelled.'},
    ]  # fmt: skip
    v1 = tmp_path / 'retail-results.json'
    v1.write_text(json.dumps([{'task_id': 4, 'trial': 0, 'reward': 1.0, 'traj': traj,
                               'info': {'task': {'actions': [{'name': 'cancel_order', 'kwargs': ORDER}]}}}]))  # fmt: skip
    [record] = load_dataset(v1).records
    assert record.query_id == 'retail-results-task4-trial0' and record.metadata['reward'] == 1.0
    assert record.expected_tool_calls is not None and record.expected_tool_calls[0].tool_name == 'cancel_order'
    assert record.tool_calls()[0].result == 'cancelled'
    tau2 = tmp_path / 'tau2.json'
    messages = [
        {'role': 'assistant', 'content': 'Hi! How can I help?', 'tool_calls': None},
        {'role': 'user', 'content': 'Cancel order #1.'},
        {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'x1', 'name': 'cancel_order', 'arguments': ORDER}]},
        {'role': 'tool', 'id': 'x1', 'content': 'cancelled', 'requestor': 'assistant', 'error': False},
        {'role': 'assistant', 'content': 'Done.'},
    ]  # fmt: skip
    tau2.write_text(json.dumps({
        'info': {'environment_info': {'policy': 'Airline policy.'}},
        'tasks': [{'id': '7', 'evaluation_criteria': {'actions': [{'name': 'cancel_order', 'arguments': {'order_id': '#1'}}]}}],
        'simulations': [{'id': 's', 'task_id': '7', 'trial': 1, 'messages': messages, 'reward_info': {'reward': 0.0},
                         'termination_reason': 'agent_stop'}],
    }, indent=2))  # fmt: skip
    [record] = load_dataset(tau2).records
    assert record.messages[0] == {'role': 'system', 'content': 'Airline policy.'} and record.query == 'Cancel order #1.'
    assert record.tool_calls()[0].args == {'order_id': '#1'} and record.tool_calls()[0].result == 'cancelled'
    assert record.metadata['reward'] == 0.0 and record.metadata['termination_reason'] == 'agent_stop'


@pytest.mark.parametrize('forced', [False, True])
def test_who_and_when_and_magentic_logs_keep_speakers(tmp_path: Path, forced: bool) -> None:
    log = {
        'question': 'How many clients get the sunset design?', 'ground_truth': '8', 'mistake_agent': 'WebSurfer',
        'mistake_step': '2', 'history': [
            {'role': 'human', 'content': 'How many clients get the sunset design?'},
            {'role': 'Orchestrator (thought)', 'content': 'Ask WebSurfer to open the sheet.'},
            {'role': 'WebSurfer', 'content': 'I count 4 even addresses.'},
            {'role': 'assistant', 'name': 'Verifier_Expert', 'content': 'The answer is 4.'},
        ],
    }  # fmt: skip
    path = tmp_path / 'log.json'
    path.write_text(json.dumps(log, indent=2))
    from sensei_eval.core.datasets import iter_dataset

    items = list(iter_dataset(path, format='who-and-when' if forced else 'auto'))
    [record] = items
    assert isinstance(record, QueryRecord)
    speakers = [speaker_of(m) for m in record.model_messages if m.kind == 'response']
    assert speakers == ['Orchestrator', 'WebSurfer', 'Verifier_Expert']  # the note after a name is not the agent
    assert record.metadata['mistake_agent'] == 'WebSurfer' and record.query == log['question']


def test_the_seven_published_framework_traces() -> None:
    paths = sorted(AGENT_TRACES.glob('*.json'))
    assert len(paths) == 7
    for path in paths:
        loaded = load_dataset(path)
        assert loaded.errors == [], path.name
        [record] = loaded.records
        calls = record.tool_calls()
        names = [c.tool_name for c in calls]
        assert names[:2] == ['get_current_time', 'write_file'], path.name
        assert calls[0].args == {'timezone': 'America/New_York'} and calls[1].args == {'text': '2025'}, path.name
        assert all(c.result is not None for c in calls), path.name
        assert '2025' in (calls[0].result or ''), path.name
        assert 'New_York' in record.query and record.input_warnings == [], path.name
        answer = record.final_answer() or ''
        assert 'step' in answer.lower() or 'time' in answer.lower(), (path.name, answer)
        expected = json.loads(path.read_text())['final_output']
        described = expected['steps'][0]['description'] if isinstance(expected, dict) else str(expected)
        assert described in answer, (path.name, answer)
        assert record.metadata['usage']['input_tokens'] > 0


def test_google_adk_native_spans_with_gemini_parts() -> None:
    request = {
        'model': 'gemini-2.0-flash',
        'config': {'system_instruction': 'Answer weather questions.'},
        'contents': [
            {'role': 'user', 'parts': [{'text': QUESTION}]},
            {'role': 'model', 'parts': [{'function_call': {'id': 'adk-1', 'name': 'get_weather', 'args': {'city': 'Paris'}}}]},
            {
                'role': 'user',
                'parts': [{'function_response': {'id': 'adk-1', 'name': 'get_weather', 'response': {'result': RESULT}}}],
            },
        ],
    }
    first = {**request, 'contents': request['contents'][:1]}
    calling = request['contents'][1]
    spans = [
        span(1, 'invoke_agent weather_agent', None, 0, {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'adk'}),
        span(5, 'call_llm', 1, 1, {'gcp.vertex.agent.llm_request': json.dumps(first),
             'gcp.vertex.agent.llm_response': json.dumps({'content': calling})}),
        span(2, 'execute_tool get_weather', 1, 2, {'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'get_weather',
             'gen_ai.tool.call.id': 'adk-1', 'gcp.vertex.agent.tool_call_args': '{"city": "Paris"}',
             'gcp.vertex.agent.tool_response': json.dumps({'result': RESULT})}),
        span(3, 'call_llm', 1, 3, {'gcp.vertex.agent.llm_request': json.dumps(request),
             'gcp.vertex.agent.llm_response': json.dumps({'content': {'role': 'model', 'parts': [{'text': ANSWER}]}})}),
    ]  # fmt: skip
    record = one_record(spans)
    [call] = record.tool_calls()
    assert (
        call.tool_name == 'get_weather' and call.args == {'city': 'Paris'} and json.loads(call.result or '') == {'result': RESULT}
    )
    assert record.messages[0] == {'role': 'system', 'content': 'Answer weather questions.'}
    assert record.final_answer() == ANSWER and record.query == QUESTION


def test_openllmetry_workflow_with_tool_and_flattened_chat() -> None:
    spans = [
        span(1, 'weather.workflow', None, 0, {'traceloop.span.kind': 'workflow', 'traceloop.entity.name': 'weather'}),
        span(2, 'openai.chat', 1, 1, {'gen_ai.prompt.0.role': 'user', 'gen_ai.prompt.0.content': QUESTION,
             'gen_ai.completion.0.role': 'assistant', 'gen_ai.completion.0.tool_calls.0.id': 'c1',
             'gen_ai.completion.0.tool_calls.0.name': 'get_weather',
             'gen_ai.completion.0.tool_calls.0.arguments': '{"city": "Paris"}'}),
        span(3, 'get_weather.tool', 1, 2, {'traceloop.span.kind': 'tool', 'traceloop.entity.name': 'get_weather',
             'traceloop.entity.input': json.dumps({'inputs': {'city': 'Paris'}}),
             'traceloop.entity.output': json.dumps({'outputs': RESULT})}),
        span(4, 'openai.chat', 1, 3, {'gen_ai.completion.0.role': 'assistant', 'gen_ai.completion.0.content': ANSWER}),
    ]  # fmt: skip
    check(one_record(spans))


def test_what_the_model_saw_of_a_tool_result_wins_over_the_tool_span() -> None:
    """A tool span's output (here the LangChain `ToolMessage` it became, dumped) is used only when no model input
    shows the result, and then as the message's content, not its envelope."""
    call = {'tool_calls.0.tool_call.id': 'c1', 'tool_calls.0.tool_call.function.name': 'get_weather',
            'tool_calls.0.tool_call.function.arguments': '{"city": "Paris"}'}  # fmt: skip
    raw = json.dumps({'content': RESULT, 'type': 'tool', 'tool_call_id': 'c1'})
    spans = [
        span(1, 'LangGraph', None, 0, {'openinference.span.kind': 'CHAIN'}),
        oi_llm(2, 1, 1, [{'role': 'user', 'content': QUESTION}], [{'role': 'assistant', **call}]),
        span(3, 'get_weather', 1, 2, {'openinference.span.kind': 'TOOL', 'tool.name': 'get_weather',
                                      'input.value': '{"city": "Paris"}', 'output.value': raw}),
        oi_llm(4, 1, 3, [{'role': 'user', 'content': QUESTION}, {'role': 'assistant', **call},
                         {'role': 'tool', 'tool_call_id': 'c1', 'content': RESULT}], [{'role': 'assistant', 'content': ANSWER}]),
    ]  # fmt: skip
    check(one_record(spans))
    without_second_input = [*spans[:3], oi_llm(4, 1, 3, [], [{'role': 'assistant', 'content': ANSWER}])]
    record = one_record(without_second_input)
    assert record.tool_calls()[0].result == RESULT  # no model input repeated it: the span's output stands, unwrapped


def test_phoenix_span_json_with_nested_attributes(tmp_path: Path) -> None:
    """Spans as Phoenix exports them: attributes nested as objects, the kind beside them, lists of messages."""
    call = {'tool_call': {'id': 'c1', 'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}}
    llm = {
        'name': 'ChatCompletion', 'span_kind': 'LLM', 'parent_id': 'a1' * 8,
        'context': {'trace_id': TRACE, 'span_id': 'b2' * 8}, 'start_time': '2025-01-01T00:00:01+00:00',
        'end_time': '2025-01-01T00:00:02+00:00', 'status_code': 'OK',
        'attributes': {'llm': {'model_name': 'gpt-4o', 'input_messages': [
            {'message': {'role': 'user', 'content': QUESTION}},
            {'message': {'role': 'assistant', 'tool_calls': [call]}},
            {'message': {'role': 'tool', 'tool_call_id': 'c1', 'content': RESULT}},
        ], 'output_messages': [{'message': {'role': 'assistant', 'content': ANSWER}}]}},
    }  # fmt: skip
    root = {'name': 'agent', 'span_kind': 'AGENT', 'parent_id': None, 'context': {'trace_id': TRACE, 'span_id': 'a1' * 8},
            'start_time': '2025-01-01T00:00:00+00:00', 'end_time': '2025-01-01T00:00:03+00:00', 'attributes': {}}  # fmt: skip
    path = tmp_path / 'phoenix.jsonl'
    path.write_text(json.dumps(llm) + '\n' + json.dumps(root) + '\n')
    loaded = load_dataset(path)
    assert loaded.errors == []
    check(loaded.records[0])
    assert loaded.records[0].metadata['model'] == 'gpt-4o'


def test_pydantic_ai_first_instrumentation_events_attribute() -> None:
    """pydantic-ai's instrumentation version 1 (via Logfire): message events kept as JSON in `all_messages_events`."""
    events = [
        {'event.name': 'gen_ai.user.message', 'content': QUESTION, 'role': 'user'},
        {'event.name': 'gen_ai.choice', 'index': 0, 'message': {'role': 'assistant', 'tool_calls': [
            {'id': 'c1', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}]}},
        {'event.name': 'gen_ai.tool.message', 'content': RESULT, 'role': 'tool', 'id': 'c1', 'name': 'get_weather'},
        {'event.name': 'gen_ai.choice', 'index': 0, 'message': {'role': 'assistant', 'content': ANSWER}},
    ]  # fmt: skip
    spans = [
        span(1, 'agent run', None, 0, {'all_messages_events': json.dumps(events), 'agent_name': 'weather'}),
        span(2, 'chat gpt-4o', 1, 1, {'gen_ai.operation.name': 'chat', 'events': json.dumps(events[:1])}),
    ]
    record = one_record(spans)
    check(record)
    assert record.metadata['agent'] == 'weather'


def test_tool_span_with_python_call_inputs() -> None:
    spans = [
        span(1, 'CodeAgent.run', None, 0, {'openinference.span.kind': 'AGENT', 'input.value': QUESTION, 'output.value': ANSWER}),
        span(2, 'get_weather', 1, 1, {'openinference.span.kind': 'TOOL', 'tool.name': 'get_weather',
                                      'input.value': json.dumps({'args': [], 'kwargs': {'city': 'Paris'}}),
                                      'output.value': RESULT}),
    ]  # fmt: skip
    check(one_record(spans))


def test_strands_style_events_with_bedrock_content_blocks() -> None:
    """GenAI message events whose content is Bedrock Converse blocks written as JSON text (Strands Agents)."""
    use = {'toolUse': {'toolUseId': 't1', 'name': 'get_weather', 'input': {'city': 'Paris'}}}
    result = {'toolResult': {'toolUseId': 't1', 'status': 'success', 'content': [{'text': RESULT}]}}
    events = (
        SpanEvent('gen_ai.user.message', 1, {'content': json.dumps([{'text': QUESTION}])}),
        SpanEvent('gen_ai.assistant.message', 2, {'content': json.dumps([{'text': 'Let me check.'}, use])}),
        SpanEvent('gen_ai.tool.message', 3, {'content': json.dumps([result]), 'id': 't1'}),
        SpanEvent('gen_ai.choice', 4, {'message': json.dumps([{'text': ANSWER}]), 'finish_reason': 'end_turn'}),
    )
    spans = [
        span(1, 'invoke_agent', None, 0, {'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'Strands Agents'}),
        span(2, 'chat', 1, 1, {'gen_ai.operation.name': 'chat'}, events),
    ]
    check(one_record(spans))


def test_a_model_call_seen_by_two_instrumentations_counts_once() -> None:
    """A framework's LLM span around the client library's own span of the same call: one assistant turn."""
    inputs = [{'role': 'user', 'content': QUESTION}]
    outputs = [{'role': 'assistant', 'content': ANSWER}]
    spans = [
        span(1, 'agent', None, 0, {'openinference.span.kind': 'AGENT'}),
        oi_llm(2, 1, 1, inputs, outputs),
        oi_llm(3, 2, 1, inputs, outputs),
    ]
    record = one_record(spans)
    assert [m['role'] for m in record.messages] == ['user', 'assistant']
    hollow = [spans[0], span(2, 'call_llm', 1, 1, {'gen_ai.operation.name': 'call_llm'}), spans[2]]
    assert one_record(hollow).final_answer() == ANSWER  # the outer span has no content: the inner one is read
