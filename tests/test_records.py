"""Records: the three message formats, auto-detection, and loading JSONL datasets with bad lines in them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from sensei_eval.core.datasets import load_dataset, load_datasets
from sensei_eval.core.errors import LoadError, RecordFieldError
from sensei_eval.core.message_formats import detect_format
from sensei_eval.core.records import LoadResult, QueryRecord, Rating

# ---------------------------------------------------------------------------------------------------
# Inline histories, one per format


def pydantic_ai_messages() -> list[dict[str, Any]]:
    """A pydantic-ai history as a person writes it: only the keys that matter."""
    return [
        {
            'kind': 'request',
            'parts': [
                {'part_kind': 'system-prompt', 'content': 'You are sensei, a docs assistant.'},
                {'part_kind': 'user-prompt', 'content': 'How do I add a validator in Pydantic v2?'},
            ],
        },
        {
            'kind': 'response',
            'parts': [
                {'part_kind': 'text', 'content': 'Let me check the docs.'},
                {
                    'part_kind': 'tool-call',
                    'tool_name': 'context7_get_docs',
                    'args': '{"library_id": "/pydantic/pydantic", "topic": "validators"}',
                    'tool_call_id': 'pa1',
                },
            ],
        },
        {
            'kind': 'request',
            'parts': [
                {
                    'part_kind': 'tool-return',
                    'tool_name': 'context7_get_docs',
                    'content': 'Use @field_validator on a classmethod.',
                    'tool_call_id': 'pa1',
                }
            ],
        },
        {'kind': 'response', 'parts': [{'part_kind': 'text', 'content': 'Use `@field_validator`.'}]},
    ]


def pydantic_ai_dumped() -> list[dict[str, Any]]:
    """The full JSON `ModelMessagesTypeAdapter` writes (timestamps, usage, every optional key)."""
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart(content='sys'), UserPromptPart(content='What is Depends?')]),
        ModelResponse(parts=[ToolCallPart(tool_name='search', args={'q': 'Depends'}, tool_call_id='d1')]),
        ModelRequest(parts=[ToolReturnPart(tool_name='search', content={'hits': 3}, tool_call_id='d1')]),
        ModelResponse(parts=[TextPart(content='Depends declares a dependency.')]),
    ]
    dumped: list[dict[str, Any]] = json.loads(ModelMessagesTypeAdapter.dump_json(messages))
    return dumped


def openai_messages() -> list[dict[str, Any]]:
    return [
        {'role': 'system', 'content': 'You are sensei.'},
        {'role': 'user', 'content': 'How do FastAPI dependencies work?'},
        {
            'role': 'assistant',
            'content': None,
            'tool_calls': [
                {
                    'id': 'c1',
                    'type': 'function',
                    'function': {'name': 'context7_get_docs', 'arguments': '{"library_id": "/fastapi/fastapi"}'},
                },
                {'id': 'c2', 'type': 'function', 'function': {'name': 'web_search', 'arguments': '{"q": "Depends"}'}},
            ],
        },
        {'role': 'tool', 'tool_call_id': 'c1', 'content': 'Depends() declares a dependency.'},
        {'role': 'tool', 'tool_call_id': 'c2', 'content': 'Error: rate limited'},
        {'role': 'assistant', 'content': 'Use `Depends()` in the path operation signature.'},
    ]


def tarsy_messages() -> list[dict[str, Any]]:
    return [
        {'role': 'system', 'content': 'You are an SRE agent. Use ReAct.'},
        {'role': 'user', 'content': 'Investigate the alert: pod api-7 is crash-looping in namespace x.'},
        {
            'role': 'assistant',
            'content': 'Thought: I should list the pods.\nAction: kubectl-get-pods\nAction Input: {"namespace": "x"}',
        },
        {'role': 'user', 'content': 'Observation: api-7  0/1  CrashLoopBackOff  12'},
        {'role': 'assistant', 'content': 'Thought: I know the cause.\nFinal Answer: api-7 is crash-looping; check its logs.'},
    ]


TARSY_ALERT = {'alert_type': 'PodCrashLooping', 'namespace': 'x', 'pod': 'api-7'}


def record_dict(query_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {'query_id': query_id, 'messages': messages, **extra}


def write_jsonl(path: Path, lines: list[bytes | str | dict[str, Any]]) -> Path:
    out: list[bytes] = []
    for line in lines:
        if isinstance(line, dict):
            out.append(json.dumps(line).encode())
        elif isinstance(line, str):
            out.append(line.encode())
        else:
            out.append(line)
    path.write_bytes(b'\n'.join(out) + b'\n')
    return path


def load_one(tmp_path: Path, data: dict[str, Any]) -> QueryRecord:
    result = load_dataset(write_jsonl(tmp_path / 'one.jsonl', [data]))
    assert result.errors == []
    assert len(result.records) == 1
    return result.records[0]


def shape(record: QueryRecord) -> list[tuple[str, list[tuple[str, Any]]]]:
    """The normalised history as (message kind, [(part kind, key content)])."""
    out: list[tuple[str, list[tuple[str, Any]]]] = []
    for message in record.model_messages:
        parts: list[tuple[str, Any]] = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                parts.append((part.part_kind, (part.tool_name, part.args_as_dict(), part.tool_call_id)))
            elif isinstance(part, ToolReturnPart):
                parts.append((part.part_kind, (part.tool_name, part.model_response_str(), part.tool_call_id)))
            else:
                parts.append((part.part_kind, getattr(part, 'content', None)))
        out.append((message.kind, parts))
    return out


# ---------------------------------------------------------------------------------------------------
# 1. Each loader on its format


def test_pydantic_ai_history_loads(tmp_path: Path) -> None:
    record = load_one(tmp_path, record_dict('pa', pydantic_ai_messages(), message_format='pydantic-ai'))
    assert record.message_format == 'pydantic-ai'
    assert shape(record) == [
        (
            'request',
            [
                ('system-prompt', 'You are sensei, a docs assistant.'),
                ('user-prompt', 'How do I add a validator in Pydantic v2?'),
            ],
        ),
        (
            'response',
            [
                ('text', 'Let me check the docs.'),
                ('tool-call', ('context7_get_docs', {'library_id': '/pydantic/pydantic', 'topic': 'validators'}, 'pa1')),
            ],
        ),
        ('request', [('tool-return', ('context7_get_docs', 'Use @field_validator on a classmethod.', 'pa1'))]),
        ('response', [('text', 'Use `@field_validator`.')]),
    ]
    calls = record.tool_calls()
    assert [(c.tool_name, c.args, c.tool_call_id, c.result) for c in calls] == [
        (
            'context7_get_docs',
            {'library_id': '/pydantic/pydantic', 'topic': 'validators'},
            'pa1',
            'Use @field_validator on a classmethod.',
        )
    ]
    assert not calls[0].failed
    assert record.final_answer() == 'Use `@field_validator`.'
    # the query comes from the first user turn when not given
    assert record.query == 'How do I add a validator in Pydantic v2?'
    # the raw messages are kept as given
    assert record.messages == pydantic_ai_messages()


def test_pydantic_ai_full_adapter_json_loads(tmp_path: Path) -> None:
    record = load_one(tmp_path, record_dict('pa-full', pydantic_ai_dumped()))
    assert record.message_format == 'pydantic-ai'
    assert [type(m).__name__ for m in record.model_messages] == ['ModelRequest', 'ModelResponse', 'ModelRequest', 'ModelResponse']
    [call] = record.tool_calls()
    assert (call.tool_name, call.args, call.tool_call_id) == ('search', {'q': 'Depends'}, 'd1')
    assert call.result is not None and json.loads(call.result) == {'hits': 3}
    assert record.final_answer() == 'Depends declares a dependency.'


def test_openai_history_loads(tmp_path: Path) -> None:
    record = load_one(
        tmp_path,
        record_dict(
            'oa',
            openai_messages(),
            message_format='openai',
            query='How do FastAPI dependencies work?',
            rating={'correctness': 4, 'relevance': 5, 'usefulness': 3, 'reasoning': 'ok'},
            prompt_version='v3',
            expected_tool_calls=[{'tool_name': 'context7_get_docs'}],
        ),
    )
    assert record.message_format == 'openai'
    assert shape(record) == [
        ('request', [('system-prompt', 'You are sensei.'), ('user-prompt', 'How do FastAPI dependencies work?')]),
        (
            'response',
            [
                ('tool-call', ('context7_get_docs', {'library_id': '/fastapi/fastapi'}, 'c1')),
                ('tool-call', ('web_search', {'q': 'Depends'}, 'c2')),
            ],
        ),
        (
            'request',
            [
                ('tool-return', ('context7_get_docs', 'Depends() declares a dependency.', 'c1')),
                ('tool-return', ('web_search', 'Error: rate limited', 'c2')),
            ],
        ),
        ('response', [('text', 'Use `Depends()` in the path operation signature.')]),
    ]
    calls = record.tool_calls()
    assert [(c.tool_name, c.args, c.tool_call_id, c.result) for c in calls] == [
        ('context7_get_docs', {'library_id': '/fastapi/fastapi'}, 'c1', 'Depends() declares a dependency.'),
        ('web_search', {'q': 'Depends'}, 'c2', 'Error: rate limited'),
    ]
    assert [c.failed for c in calls] == [False, True]
    assert record.final_answer() == 'Use `Depends()` in the path operation signature.'
    assert record.rating is not None and record.rating.correctness == 4
    assert record.prompt_version == 'v3'
    assert record.expected_tool_calls is not None and record.expected_tool_calls[0].tool_name == 'context7_get_docs'
    assert record.expected_tool_calls[0].args is None


def test_openai_text_content_parts_and_dict_arguments(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [
        {'role': 'developer', 'content': [{'type': 'text', 'text': 'Be brief.'}]},
        {'role': 'user', 'content': [{'type': 'text', 'text': 'Part one.'}, {'type': 'text', 'text': 'Part two.'}]},
        {'role': 'assistant', 'tool_calls': [{'id': 'k', 'function': {'name': 'lookup', 'arguments': {'id': 7}}}]},
        {'role': 'tool', 'tool_call_id': 'k', 'content': 'found'},
        {'role': 'assistant', 'content': 'Done.'},
    ]
    record = load_one(tmp_path, record_dict('oa-parts', messages))
    assert shape(record)[0] == ('request', [('system-prompt', 'Be brief.'), ('user-prompt', 'Part one.\nPart two.')])
    assert [(c.tool_name, c.args, c.result) for c in record.tool_calls()] == [('lookup', {'id': 7}, 'found')]


def test_tarsy_session_loads(tmp_path: Path) -> None:
    record = load_one(tmp_path, record_dict('ts', tarsy_messages(), message_format='tarsy', alert_data=TARSY_ALERT))
    assert record.message_format == 'tarsy'
    assert shape(record) == [
        ('request', [('system-prompt', 'You are an SRE agent. Use ReAct.')]),
        ('request', [('user-prompt', 'Investigate the alert: pod api-7 is crash-looping in namespace x.')]),
        (
            'response',
            [
                ('text', 'Thought: I should list the pods.'),
                ('tool-call', ('kubectl-get-pods', {'namespace': 'x'}, 'react_1')),
            ],
        ),
        ('request', [('tool-return', ('kubectl-get-pods', 'api-7  0/1  CrashLoopBackOff  12', 'react_1'))]),
        ('response', [('text', 'Thought: I know the cause.\nFinal Answer: api-7 is crash-looping; check its logs.')]),
    ]
    assert [(c.tool_name, c.args, c.tool_call_id, c.result) for c in record.tool_calls()] == [
        ('kubectl-get-pods', {'namespace': 'x'}, 'react_1', 'api-7  0/1  CrashLoopBackOff  12')
    ]
    # the "Final Answer:" marker (and the thought before it) is stripped
    assert record.final_answer() == 'api-7 is crash-looping; check its logs.'
    assert record.alert_data == TARSY_ALERT


def test_tarsy_free_text_action_input_and_unanswered_call(tmp_path: Path) -> None:
    messages = [
        {'role': 'user', 'content': 'Check the node.'},
        {'role': 'assistant', 'content': 'Action: kubectl-describe-node\nAction Input: node-3'},
        {'role': 'user', 'content': 'Observation: Ready'},
        {'role': 'assistant', 'content': 'Action: kubectl-top\nAction Input: {"resource": "nodes"}'},
    ]
    record = load_one(tmp_path, record_dict('ts2', messages))
    assert [(c.tool_name, c.args, c.result) for c in record.tool_calls()] == [
        ('kubectl-describe-node', 'node-3', 'Ready'),
        ('kubectl-top', {'resource': 'nodes'}, None),
    ]
    assert record.final_answer() is None


def test_tarsy_query_falls_back_to_alert(tmp_path: Path) -> None:
    messages = [
        {'role': 'system', 'content': 'You are an SRE agent.'},
        {'role': 'assistant', 'content': 'Action: kubectl-get-pods\nAction Input: {}'},
        {'role': 'user', 'content': 'Observation: none'},
        {'role': 'assistant', 'content': 'Final Answer: nothing running.'},
    ]
    record = load_one(tmp_path, record_dict('ts3', messages, alert_data={'message': 'Node down', 'severity': 'critical'}))
    assert record.query == 'Node down'
    assert record.tool_calls()[0].args == {}


# ---------------------------------------------------------------------------------------------------
# 2. Auto-detection


@pytest.mark.parametrize(
    ('messages', 'expected'),
    [
        (pydantic_ai_messages(), 'pydantic-ai'),
        (pydantic_ai_dumped(), 'pydantic-ai'),
        (openai_messages(), 'openai'),
        (tarsy_messages(), 'tarsy'),
        ([{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'hello'}], 'openai'),
    ],
    ids=['pydantic-ai', 'pydantic-ai-dumped', 'openai', 'tarsy', 'openai-no-tools'],
)
def test_detect_format(messages: list[dict[str, Any]], expected: str) -> None:
    assert detect_format(messages) == expected


@pytest.mark.parametrize(
    ('messages', 'expected'),
    [(pydantic_ai_messages(), 'pydantic-ai'), (openai_messages(), 'openai'), (tarsy_messages(), 'tarsy')],
    ids=['pydantic-ai', 'openai', 'tarsy'],
)
@pytest.mark.parametrize('explicit_null', [False, True], ids=['absent', 'null'])
def test_message_format_absent_or_null_is_detected(
    tmp_path: Path, messages: list[dict[str, Any]], expected: str, explicit_null: bool
) -> None:
    data = record_dict('auto', messages)
    if explicit_null:
        data['message_format'] = None
    record = load_one(tmp_path, data)
    assert record.message_format == expected
    assert record.tool_calls(), 'the normalised history keeps the tool calls'
    assert record.final_answer()


def test_undetectable_shape_names_message_format() -> None:
    with pytest.raises(RecordFieldError) as exc:
        detect_format([{'speaker': 'user', 'text': 'hi'}])
    assert exc.value.field == 'message_format'
    assert 'set message_format' in exc.value.message

    with pytest.raises(RecordFieldError) as exc:
        detect_format(['just a string'])
    assert exc.value.field == 'messages[0]'

    with pytest.raises(ValidationError, match='message_format'):
        QueryRecord.model_validate(record_dict('x', [{'speaker': 'user', 'text': 'hi'}]))


# ---------------------------------------------------------------------------------------------------
# 3. A malformed-record corpus, interleaved with good records in one file

MAX_BYTES = 10_000


@dataclass(frozen=True)
class Bad:
    id: str
    line: bytes
    field: str | None
    phrase: str
    query_id: str | None = None
    field_pattern: str | None = None  # a regex, when the exact path is not pinned here


def _bad(id: str, data: Any, field: str | None, phrase: str, **kw: Any) -> Bad:
    qid = data.get('query_id') if isinstance(data, dict) and isinstance(data.get('query_id'), str) else None
    return Bad(id, json.dumps(data).encode(), field, phrase, kw.pop('query_id', qid), **kw)


def _openai_with(i: int, msg: dict[str, Any]) -> list[dict[str, Any]]:
    messages = openai_messages()
    messages[i] = msg
    return messages


_USER = {'role': 'user', 'content': 'q?'}

BAD_CASES: list[Bad] = [
    Bad('bad-json', b'{"query_id": "bj", "messages": [', None, 'not valid JSON'),
    Bad('json-array', b'[{"query_id": "arr"}]', None, 'expected a JSON object, got list'),
    Bad('json-string', b'"just a string"', None, 'expected a JSON object, got str'),
    _bad('query-id-int', record_dict(42, openai_messages()), 'query_id', 'valid string'),  # type: ignore[arg-type]
    _bad('query-id-empty', record_dict('', openai_messages()), 'query_id', 'at least 1 character'),
    _bad('missing-query-id', {'messages': openai_messages()}, 'query_id', 'Field required'),
    _bad('messages-string', record_dict('ms', 'hello'), 'messages', 'valid list'),  # type: ignore[arg-type]
    _bad('message-not-object', record_dict('mo', ['hello']), 'messages[0]', 'valid dictionary'),  # type: ignore[list-item]
    _bad(
        'rating-9',
        record_dict('r9', openai_messages(), rating={'correctness': 9, 'relevance': 3, 'usefulness': 3}),
        'rating.correctness',
        'outside the scale 1-5',
    ),
    _bad(
        'rating-five',
        record_dict('r5', openai_messages(), rating={'correctness': 'five', 'relevance': 3, 'usefulness': 3}),
        'rating.correctness',
        'expected a number',
    ),
    _bad(
        'rating-without-value',
        record_dict('rm', openai_messages(), rating={'reasoning': 'fine'}),
        'rating',
        'no rating value',
    ),
    _bad(
        'unknown-field',
        record_dict('uf', openai_messages(), colour='blue'),
        'colour',
        'unknown field: the fields are alert_data, ',
    ),
    _bad('bad-message-format', record_dict('mf', openai_messages(), message_format='anthropic'), 'message_format', 'openai'),
    _bad(
        'undetectable',
        record_dict('ud', [{'speaker': 'user', 'text': 'hi'}]),
        'message_format',
        'cannot detect the format',
    ),
    _bad(
        'pydantic-ai-banana-part',
        record_dict(
            'pb',
            [{'kind': 'request', 'parts': [{'part_kind': 'user-prompt', 'content': 'q'}, {'part_kind': 'banana'}]}],
        ),
        None,
        "'banana'",
        # the exact path is pinned by test_pydantic_ai_error_path_is_the_raw_path (xfail)
        field_pattern=r'messages\[0\]\..*parts\[1\]',
    ),
    _bad(
        'openai-unknown-role',
        record_dict('or', [_USER, {'role': 'robot', 'content': 'beep'}]),
        'messages[1].role',
        "unknown role 'robot'",
    ),
    _bad('empty-history', record_dict('eh', []), 'messages', 'message history is empty'),
    _bad(
        'openai-tool-result-without-call',
        record_dict(
            'ot', [_USER, {'role': 'assistant', 'content': 'hm'}, {'role': 'tool', 'tool_call_id': 'zz', 'content': 'x'}]
        ),
        'messages[2].tool_call_id',
        "tool result without call: no earlier call has id 'zz'",
    ),
    _bad(
        'openai-tool-result-without-id',
        record_dict('oi', [_USER, {'role': 'tool', 'content': 'x'}]),
        'messages[1].tool_call_id',
        'no earlier tool call is waiting for a result',
    ),
    _bad(
        'pydantic-ai-tool-return-without-call',
        record_dict(
            'pt',
            [
                {'kind': 'request', 'parts': [{'part_kind': 'user-prompt', 'content': 'q'}]},
                {
                    'kind': 'request',
                    'parts': [{'part_kind': 'tool-return', 'tool_name': 't', 'content': 'r', 'tool_call_id': 'nope'}],
                },
            ],
        ),
        'messages[1].parts[0].tool_call_id',
        "tool result without call: no earlier tool call has id 'nope'",
    ),
    _bad(
        'tarsy-observation-without-action',
        record_dict(
            'to',
            [
                {'role': 'user', 'content': 'Investigate.'},
                {'role': 'assistant', 'content': 'Thought: look.\nAction: kubectl-get-pods\nAction Input: {}'},
                {'role': 'user', 'content': 'Observation: 3 pods'},
                {'role': 'user', 'content': 'Observation: again?'},
            ],
            message_format='tarsy',
        ),
        'messages[3].content',
        'Observation with no Action before it',
    ),
    _bad(
        'tarsy-content-not-text',
        record_dict('tc', [{'role': 'user', 'content': ['a']}], message_format='tarsy'),
        'messages[0].content',
        'expected text, got list',
    ),
    _bad(
        'arguments-not-json',
        record_dict(
            'aj',
            _openai_with(
                2,
                {
                    'role': 'assistant',
                    'tool_calls': [{'id': 'c1', 'function': {'name': 'context7_get_docs', 'arguments': '{"library_id": '}}],
                },
            )[:4],
        ),
        'messages[2].tool_calls[0].function.arguments',
        'not valid JSON',
    ),
    _bad(
        'tool-call-without-name',
        record_dict('tn', [_USER, {'role': 'assistant', 'tool_calls': [{'id': 'c', 'function': {'arguments': '{}'}}]}]),
        'messages[1].tool_calls[0].function.name',
        'missing tool name',
    ),
    _bad(
        'assistant-empty',
        record_dict('ae', _openai_with(2, {'role': 'assistant', 'content': '', 'tool_calls': []})[:3]),
        'messages[2]',
        'neither content nor tool_calls',
    ),
    _bad(
        'image-url-content-part',
        record_dict(
            'iu',
            [
                {
                    'role': 'user',
                    'content': [
                        {'type': 'text', 'text': 'what is this?'},
                        {'type': 'image_url', 'image_url': {'url': 'https://example.com/x.png'}},
                    ],
                },
                {'role': 'assistant', 'content': 'a cat'},
            ],
        ),
        'messages[0].content[1]',
        "unsupported content part 'image_url'",
    ),
    _bad(
        'no-query-anywhere',
        record_dict('nq', [{'role': 'system', 'content': 's'}, {'role': 'assistant', 'content': 'a'}]),
        'query',
        'no user turn or alert',
    ),
    _bad(
        'expected-tool-empty-name',
        record_dict('et', openai_messages(), expected_tool_calls=[{'tool_name': ''}]),
        'expected_tool_calls[0].tool_name',
        'at least 1 character',
    ),
    _bad(
        'two-problems',
        {'query_id': 7, 'messages': 'x'},
        'query_id',
        '(and 1 more problem(s))',
    ),
    Bad('non-utf8', b'{"query_id": "nu\xff\xfe", "messages": []}', None, 'not valid UTF-8 (byte 0xff at column 17)'),
    _bad(
        'huge-line',
        record_dict('hg', _openai_with(3, {'role': 'tool', 'tool_call_id': 'c1', 'content': 'x' * 20_000})),
        None,
        'over the 10,000-byte limit',
        query_id=None,  # the line is refused before it is read
    ),
    _bad('duplicate-query-id', record_dict('good-0', openai_messages()), 'query_id', 'duplicate query_id', query_id='good-0'),
]

_GOOD_FACTORIES = [openai_messages, tarsy_messages, pydantic_ai_messages]


def _corpus_lines() -> tuple[list[bytes], dict[str, int], list[str]]:
    """Good record, bad case, (blank or whitespace line), good record, bad case, ... and the line of each."""
    lines: list[bytes] = []
    bad_line: dict[str, int] = {}
    good_ids: list[str] = []

    def good() -> None:
        i = len(good_ids)
        qid = f'good-{i}'
        extra = {'alert_data': TARSY_ALERT} if i % 3 == 1 else {}
        lines.append(json.dumps(record_dict(qid, _GOOD_FACTORIES[i % 3](), **extra)).encode())
        good_ids.append(qid)

    good()
    for k, case in enumerate(BAD_CASES):
        lines.append(case.line)
        bad_line[case.id] = len(lines)
        if k % 3 == 1:
            lines.append(b'' if k % 2 else b'   \t\r')
        good()
    return lines, bad_line, good_ids


@pytest.fixture(scope='module')
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LoadResult, dict[str, int], list[str]]:
    lines, bad_line, good_ids = _corpus_lines()
    path = tmp_path_factory.mktemp('corpus') / 'corpus.jsonl'
    path.write_bytes(b'\n'.join(lines) + b'\n\n')
    return path, load_dataset(path, max_record_bytes=MAX_BYTES), bad_line, good_ids


def test_corpus_has_enough_distinct_cases() -> None:
    assert len(BAD_CASES) >= 15
    assert len({c.id for c in BAD_CASES}) == len(BAD_CASES)
    lines, _, _ = _corpus_lines()
    good_sizes = [len(line) for line in lines if line.startswith(b'{"query_id": "good-')]
    assert max(good_sizes) < MAX_BYTES


@pytest.mark.parametrize('case', BAD_CASES, ids=[c.id for c in BAD_CASES])
def test_bad_line_gives_one_precise_error(case: Bad, corpus: tuple[Path, LoadResult, dict[str, int], list[str]]) -> None:
    path, result, bad_line, _ = corpus
    line = bad_line[case.id]
    errors = [e for e in result.errors if e.line == line]
    assert len(errors) == 1, errors
    [error] = errors
    assert error.file == str(path)
    if case.field_pattern is not None:
        assert error.field is not None and re.fullmatch(case.field_pattern, error.field), error.field
    else:
        assert error.field == case.field
    assert case.phrase in error.message
    assert error.query_id == case.query_id
    # worded for a person: no pydantic prefixes or error-type tags leak through
    assert not error.message.startswith('Value error')
    assert '[type=' not in error.message
    text = str(error)
    assert text.startswith(f'{path}:{line}')
    if error.field:
        assert f'`{error.field}`' in text
    assert error.message in text


def test_corpus_keeps_every_good_record(corpus: tuple[Path, LoadResult, dict[str, int], list[str]]) -> None:
    _, result, bad_line, good_ids = corpus
    assert [r.query_id for r in result.records] == good_ids
    # one error per bad case and nothing else: blank and whitespace-only lines are skipped, not errors
    assert sorted(e.line for e in result.errors) == sorted(bad_line.values())
    # the duplicate kept the first record, not the later one
    first = next(r for r in result.records if r.query_id == 'good-0')
    assert first.query == 'How do FastAPI dependencies work?'
    dup = next(e for e in result.errors if e.line == bad_line['duplicate-query-id'])
    assert 'first on line 1' in dup.message
    # the formats were all detected
    assert {r.message_format for r in result.records} == {'openai', 'tarsy', 'pydantic-ai'}


def test_blank_lines_only_is_empty_not_error(tmp_path: Path) -> None:
    path = tmp_path / 'blank.jsonl'
    path.write_bytes(b'\n\n   \n\r\n')
    assert load_dataset(path) == LoadResult([], [])


def test_crlf_line_endings_load(tmp_path: Path) -> None:
    path = tmp_path / 'crlf.jsonl'
    path.write_bytes(
        json.dumps(record_dict('a', openai_messages())).encode()
        + b'\r\n'
        + json.dumps(record_dict('b', tarsy_messages())).encode()
    )
    result = load_dataset(path)
    assert result.errors == []
    assert [r.query_id for r in result.records] == ['a', 'b']


def test_default_limit_is_generous(tmp_path: Path) -> None:
    # the huge-line case from the corpus loads under the default limit
    data = record_dict('hg', _openai_with(3, {'role': 'tool', 'tool_call_id': 'c1', 'content': 'x' * 20_000}))
    record = load_one(tmp_path, data)
    assert record.tool_calls()[0].result == 'x' * 20_000


def test_pydantic_ai_error_path_is_the_raw_path(tmp_path: Path) -> None:
    data = record_dict(
        'pb', [{'kind': 'request', 'parts': [{'part_kind': 'user-prompt', 'content': 'q'}, {'part_kind': 'banana'}]}]
    )
    [error] = load_dataset(write_jsonl(tmp_path / 'd.jsonl', [data])).errors
    assert error.field == 'messages[0].parts[1]'


def test_deeply_nested_line_is_one_error_not_a_crash(tmp_path: Path) -> None:
    good = record_dict('g', openai_messages())
    path = write_jsonl(tmp_path / 'deep.jsonl', [b'[' * 100_000, good])
    result = load_dataset(path)
    assert [r.query_id for r in result.records] == ['g']
    assert [e.line for e in result.errors] == [1]


def test_plain_chat_with_action_line_stays_openai() -> None:
    messages = [
        {'role': 'user', 'content': 'The pod keeps restarting, what do I do?'},
        {'role': 'assistant', 'content': 'Diagnosis: the pod is OOMKilled.\nAction: raise the memory limit to 512Mi.'},
    ]
    record = QueryRecord.model_validate(record_dict('p', messages))
    assert record.tool_calls() == []
    assert record.final_answer() == 'Diagnosis: the pod is OOMKilled.\nAction: raise the memory limit to 512Mi.'


# ---------------------------------------------------------------------------------------------------
# 4-5. Several datasets; a missing file


def test_load_datasets_reports_cross_file_duplicates_and_keeps_first(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / 'a.jsonl', [record_dict('q1', openai_messages()), record_dict('q2', openai_messages())])
    b = write_jsonl(
        tmp_path / 'b.jsonl',
        [record_dict('q3', tarsy_messages()), record_dict('q2', tarsy_messages(), query='from b'), b'{oops'],
    )
    result = load_datasets([a, b])
    assert [r.query_id for r in result.records] == ['q1', 'q2', 'q3']
    q2 = next(r for r in result.records if r.query_id == 'q2')
    assert q2.message_format == 'openai'  # the first one, from a.jsonl
    assert len(result.errors) == 2
    bad_json = next(e for e in result.errors if e.field is None)
    assert (bad_json.file, bad_json.line) == (str(b), 3)
    dup = next(e for e in result.errors if e.field == 'query_id')
    assert dup.file == str(b)
    assert dup.query_id == 'q2'
    assert 'already loaded from an earlier dataset' in dup.message
    assert str(b) in str(dup)


def test_cross_file_duplicate_names_its_line(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / 'a.jsonl', [record_dict('q1', openai_messages())])
    b = write_jsonl(tmp_path / 'b.jsonl', [record_dict('q0', openai_messages()), record_dict('q1', openai_messages())])
    [dup] = load_datasets([a, b]).errors
    assert dup.line == 2
    assert str(dup).startswith(f'{b}:2')


def test_missing_file_is_one_error(tmp_path: Path) -> None:
    missing = tmp_path / 'nope.jsonl'
    result = load_dataset(missing)
    assert result.records == []
    [error] = result.errors
    assert error.file == str(missing)
    assert error.line == 0
    assert 'cannot read the dataset' in error.message
    assert str(missing) in str(error)

    good = write_jsonl(tmp_path / 'good.jsonl', [record_dict('q1', openai_messages())])
    both = load_datasets([missing, good])
    assert [r.query_id for r in both.records] == ['q1']
    assert len(both.errors) == 1


def test_directory_instead_of_file_is_one_error(tmp_path: Path) -> None:
    result = load_dataset(tmp_path)
    assert result.records == []
    assert len(result.errors) == 1
    assert 'cannot read the dataset' in result.errors[0].message


def test_load_error_str_without_field_or_query_id() -> None:
    assert str(LoadError('d.jsonl', 3, None, 'not valid JSON')) == 'd.jsonl:3: not valid JSON'
    assert str(LoadError('d.jsonl', 4, 'messages', 'empty', 'q9')) == "d.jsonl:4 (query_id 'q9') field `messages`: empty"


# ---------------------------------------------------------------------------------------------------
# 6. Rating


def test_rating_mean() -> None:
    assert Rating(correctness=4, relevance=5, usefulness=3).mean == pytest.approx(4.0)
    assert Rating(correctness=1, relevance=2, usefulness=2).mean == pytest.approx(5 / 3)
    assert Rating(correctness=5, relevance=5, usefulness=5, reasoning='great').mean == 5.0


@pytest.mark.parametrize('bad', [0, 6, 'five'])
def test_rating_bounds(bad: Any) -> None:
    with pytest.raises(ValidationError):
        Rating(correctness=bad, relevance=3, usefulness=3)


def test_utf8_bom_and_blank_query_id(tmp_path: Path) -> None:
    path = tmp_path / 'bom.jsonl'
    good = json.dumps(record_dict('q1', openai_messages())).encode()
    blank = json.dumps(record_dict('   ', openai_messages())).encode()
    path.write_bytes(b'\xef\xbb\xbf' + good + b'\n' + blank + b'\n')
    result = load_dataset(path)
    assert [r.query_id for r in result.records] == ['q1']
    [error] = result.errors
    assert (error.line, error.field) == (2, 'query_id') and 'blank' in error.message
