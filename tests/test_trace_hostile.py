"""Hostile trace input (issue 41, items 2 and 3): span trees are built in linear time, and one bad value is a
located error for its own span or run only — the other runs of the same file are read and judged.

Each reproduction is the value the issue names: `{"intValue": 1e400}` (JSON's Infinity for an integer), an
`intValue` of 5,000 digits, a 5,000-digit list index in an attribute key, a rating `NaN` / `Infinity` in OTLP,
a time that overflows. The linear-time claim is measured in `benchmarks/hostile.py` (a 10,000-span chain
judged) and `benchmarks/traces.py`; here a 10,000-span chain is read correctly (no recursion, every span
placed), and the ancestor walks are counted to be linear.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from sensei_eval.cli.app import app as root
from sensei_eval.core import span_model
from sensei_eval.core.span_model import Span, SpanIndex
from sensei_eval.core.traces import build_trace, load_traces, spans_from_otlp_json

QUESTION = 'What is the weather in Paris?'
ANSWER = 'It is rainy in Paris.'


def _s(key: str, value: Any) -> dict[str, Any]:
    return {'key': key, 'value': {'stringValue': value if isinstance(value, str) else json.dumps(value)}}


def good_trace(trace: str, *extra: dict[str, Any]) -> dict[str, Any]:
    """One complete run: an agent span and a model call with the question and the answer."""
    inputs = [{'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]}]
    outputs = [{'role': 'assistant', 'parts': [{'type': 'text', 'content': ANSWER}]}]
    spans = [
        {
            'traceId': trace,
            'spanId': '1' * 16,
            'name': 'invoke_agent weather',
            'startTimeUnixNano': '1000',
            'endTimeUnixNano': '9000',
            'attributes': [_s('gen_ai.operation.name', 'invoke_agent')],
        },
        {
            'traceId': trace,
            'spanId': '2' * 16,
            'parentSpanId': '1' * 16,
            'name': 'chat m',
            'startTimeUnixNano': '2000',
            'endTimeUnixNano': '3000',
            'attributes': [
                _s('gen_ai.operation.name', 'chat'),
                _s('gen_ai.input.messages', inputs),
                _s('gen_ai.output.messages', outputs),
                *extra,
            ],
        },
    ]
    return {'resourceSpans': [{'scopeSpans': [{'spans': spans}]}]}


def write_lines(path: Path, documents: list[Any], raw: dict[int, str] | None = None) -> Path:
    """One document a line; `raw` replaces a line with text as is (for JSON Python would not write)."""
    lines = [json.dumps(d) for d in documents]
    for n, text in (raw or {}).items():
        lines[n] = text
    path.write_text('\n'.join(lines) + '\n')
    return path


def test_an_int_value_of_infinity_or_5000_digits_is_an_error_on_its_span_only(tmp_path: Path) -> None:
    infinite = good_trace('a' * 32, {'key': 'gen_ai.usage.input_tokens', 'value': {'intValue': 1}})
    huge = good_trace('b' * 32, {'key': 'gen_ai.usage.input_tokens', 'value': {'intValue': '9' * 5000}})
    text = json.dumps(infinite).replace('{"intValue": 1}', '{"intValue": 1e400}')  # JSON's way to say Infinity
    path = write_lines(tmp_path / 'mixed.otlp.jsonl', [infinite, huge, good_trace('c' * 32)], raw={0: text})
    result = load_traces(path)
    assert [r.query_id for r in result.records] == ['c' * 32]  # the good trace, read and whole
    assert result.records[0].final_answer() == ANSWER
    fields = {(e.line, e.field) for e in result.errors}
    where = 'resourceSpans[0].scopeSpans[0].spans[1].attributes[3].value.intValue'
    assert (1, where) in fields and (2, where) in fields
    messages = ' '.join(e.message for e in result.errors)
    assert 'expected an integer, got inf' in messages and '5,000 characters' in messages


def test_times_and_ids_that_overflow_are_located(tmp_path: Path) -> None:
    doc = good_trace('d' * 32)
    spans = doc['resourceSpans'][0]['scopeSpans'][0]['spans']
    spans[1]['startTimeUnixNano'] = '9' * 5000
    spans[0]['endTimeUnixNano'] = 1e400
    got, errors = spans_from_otlp_json(json.loads(json.dumps(doc)), file='f', line=1)
    assert got == []
    assert {e.field for e in errors} == {
        'resourceSpans[0].scopeSpans[0].spans[0].endTimeUnixNano',
        'resourceSpans[0].scopeSpans[0].spans[1].startTimeUnixNano',
    }


def test_a_5000_digit_list_index_in_an_attribute_key_refuses_its_run_only(tmp_path: Path) -> None:
    bad = good_trace('e' * 32)
    chat = bad['resourceSpans'][0]['scopeSpans'][0]['spans'][1]
    chat['attributes'] = [_s('gen_ai.operation.name', 'chat'), _s(f'llm.input_messages.{"7" * 5000}.message.role', 'user')]
    path = write_lines(tmp_path / 'index.otlp.jsonl', [bad, good_trace('f' * 32)])
    result = load_traces(path)
    assert [r.query_id for r in result.records] == ['f' * 32]
    [error] = result.errors
    assert error.query_id == 'e' * 32 and error.line == 1
    assert error.field == 'resourceSpans[0].scopeSpans[0].spans[1].attributes[llm.input_messages]'
    assert 'list index of 5,000 digits' in error.message


def test_a_rating_of_nan_or_infinity_is_a_located_problem_and_the_run_is_kept(tmp_path: Path) -> None:
    docs = []
    for trace, value in (('1a' * 16, {'doubleValue': 'NaN'}), ('2b' * 16, {'stringValue': 'Infinity'})):
        doc = good_trace(trace)
        doc['resourceSpans'][0]['scopeSpans'][0]['spans'][0]['attributes'].append({'key': 'sensei_eval.rating', 'value': value})
        docs.append(doc)
    result = load_traces(write_lines(tmp_path / 'ratings.otlp.jsonl', docs))
    assert len(result.records) == 2 and all(r.rating is None for r in result.records)
    assert [e.message for e in result.errors] == [
        'rating nan is not a whole number from 1 to 5; the run has no rating',
        'rating inf is not a whole number from 1 to 5; the run has no rating',
    ]
    assert all(e.field == 'resourceSpans[0].scopeSpans[0].spans[0].attributes[sensei_eval.rating]' for e in result.errors)


def test_judge_reports_the_good_runs_of_a_file_with_hostile_values(tmp_path: Path) -> None:
    infinite = good_trace('a' * 32, {'key': 'x', 'value': {'intValue': 1}})
    text = json.dumps(infinite).replace('{"intValue": 1}', '{"intValue": 1e400}')
    index = good_trace('e' * 32)
    chat = index['resourceSpans'][0]['scopeSpans'][0]['spans'][1]
    chat['attributes'] = [*chat['attributes'][:2], _s(f'llm.output_messages.{"7" * 5000}.message.role', 'assistant')]
    path = write_lines(tmp_path / 'runs.otlp.jsonl', [infinite, index, good_trace('c' * 32), good_trace('d' * 32)], raw={0: text})
    out = tmp_path / 'reports'
    result = CliRunner().invoke(root, ['judge', '--dataset', str(path), '--judges', 'checks', '--no-cache', '--out', str(out)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1  # the bad run is a load error ...
    reports = sorted(p.stem for p in out.glob('*/records/*.json'))
    assert reports == ['c' * 32, 'd' * 32]  # ... and the good ones are judged and reported
    assert 'list index of 5,000 digits' in ' '.join(result.output.split())


def chain(n: int, kind: str) -> list[Span]:
    """A run span and `n - 1` spans nested one inside the next (each the parent of the following)."""
    trace = 'ab' * 16
    q = json.dumps([{'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]}])
    a = json.dumps([{'role': 'assistant', 'parts': [{'type': 'text', 'content': ANSWER}]}])
    spans = []
    for i in range(n):
        attrs: dict[str, Any] = {'gen_ai.operation.name': 'invoke_agent' if i == 0 else kind}
        if i == 0:
            attrs['input.value'] = QUESTION  # the run's own input: the user turn when no model call recorded one
        if kind == 'chat' and i:
            attrs |= {'gen_ai.input.messages': q, 'gen_ai.output.messages': a}
        if kind == 'execute_tool' and i:
            attrs |= {'gen_ai.tool.name': f'step{i}', 'gen_ai.tool.call.result': 'ok'}
        if kind == 'other' and i == n - 1:
            attrs = {'gen_ai.operation.name': 'chat', 'gen_ai.input.messages': q, 'gen_ai.output.messages': a}
        parent = f'{i:016x}' if i else None
        spans.append(Span(trace, f'{i + 1:016x}', parent, f's{i}', 1000 + i, 10**9 - i, attrs, path=f'spans[{i}]'))
    return spans


def test_a_10000_span_chain_is_read_whole() -> None:
    build = build_trace(chain(10_000, 'chat'))  # each model call inside the one above: one call, read once
    [record] = build.records
    assert [m['role'] for m in record.messages] == ['user', 'assistant'] and record.metadata['span_count'] == 10_000
    [record] = build_trace(chain(10_000, 'other')).records  # the model call at the bottom of 9,998 plain spans
    assert record.final_answer() == ANSWER
    [tools] = build_trace(chain(2_000, 'execute_tool')).records  # every tool span a call and its result, in order
    calls = tools.tool_calls()
    assert [c.tool_name for c in calls] == [f'step{i}' for i in range(1, 2_000)] and all(c.result == 'ok' for c in calls)
    assert tools.query == QUESTION


def test_ancestor_questions_cost_one_step_per_span(monkeypatch: Any) -> None:
    """`SpanIndex` walks each chain once: the agent-above and orphan questions for every span of a 5,000-span
    chain cost about 5,000 steps each, not 12.5 million."""
    steps = {'n': 0}
    real_get = dict.get

    class Counting(dict[str, Span]):
        def get(self, key: Any, default: Any = None) -> Any:
            steps['n'] += 1
            return real_get(self, key, default)

    spans = chain(5_000, 'other')
    index = SpanIndex(spans)
    index.by_id = Counting(index.by_id)
    monkeypatch.setattr(index._agent_above, 'by_id', index.by_id)
    monkeypatch.setattr(index._reaches_missing, 'by_id', index.by_id)
    for span in spans:
        index.has_agent_ancestor(span)
        index.orphan(span)
    assert steps['n'] < 4 * len(spans)
    assert span_model.SpanIndex is SpanIndex
