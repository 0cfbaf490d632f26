"""One pairing of tool calls and results (by order within the turn, the id only a hint), speakers from
`name` or a content prefix, and reference verdicts that survive unique ids and numbers sent as strings."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.transcript import render_transcript
from sensei_eval.evaluators.checks import ErrorRecoveryCheck, RepeatedCallCheck
from sensei_eval.evaluators.reference import ReferenceCheck
from sensei_eval.evaluators.tool_effects import read_only_tools


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {'id': call_id, 'type': 'function', 'function': {'name': name, 'arguments': json.dumps(args)}}


def _reused_ids_record(**extra: Any) -> QueryRecord:
    """Two turns whose call ids both restart at `call_0`; the second turn's first call fails."""
    messages = [
        {'role': 'user', 'content': 'Move my booking.'},
        {'role': 'assistant', 'content': None, 'tool_calls': [_call('call_0', 'get_booking', {'id': 'B1'}),
                                                               _call('call_1', 'get_user', {'id': 'U1'})]},
        {'role': 'tool', 'tool_call_id': 'call_0', 'content': '{"booking": "B1"}'},
        {'role': 'tool', 'tool_call_id': 'call_1', 'content': '{"user": "U1"}'},
        {'role': 'assistant', 'content': None, 'tool_calls': [_call('call_0', 'update_booking', {'id': 'B1', 'n': 2}),
                                                               _call('call_1', 'update_booking', {'id': 'B1', 'n': 3})]},
        {'role': 'tool', 'tool_call_id': 'call_0', 'content': 'Error: seat count unavailable'},
        {'role': 'tool', 'tool_call_id': 'call_1', 'content': '{"ok": true}'},
        {'role': 'assistant', 'content': 'Done: your booking now has 3 seats.'},
    ]  # fmt: skip
    return QueryRecord.model_validate({'query_id': 'reused', 'messages': messages, **extra})


def test_results_pair_by_order_within_the_turn_when_ids_repeat() -> None:
    calls = _reused_ids_record().tool_calls()
    assert [(c.tool_name, c.result) for c in calls] == [
        ('get_booking', '{"booking": "B1"}'),
        ('get_user', '{"user": "U1"}'),
        ('update_booking', 'Error: seat count unavailable'),
        ('update_booking', '{"ok": true}'),
    ]
    assert [c.failed for c in calls] == [False, False, True, False]


def test_the_transcript_and_the_checks_use_the_same_pairing() -> None:
    record = _reused_ids_record()
    transcript = render_transcript(record)
    # each result step follows its own call, and carries the right tool name
    results = [(s.number, s.tool_name, s.text) for s in transcript.steps if s.kind == 'tool_result']
    assert results[2][1:] == ('update_booking', 'Error: seat count unavailable')
    for call in record.tool_calls():
        assert transcript.step_of(call.call_at) is not None and transcript.step_of(call.result_at) is not None
    # the agent changed its arguments after the error: no repeated-call or recovery finding
    for check in (RepeatedCallCheck(), ErrorRecoveryCheck()):
        assert asyncio.run(check.judge(record, transcript, None)).passed is True


def _reference(record: QueryRecord, check: ReferenceCheck | None = None) -> JudgeResult:
    return asyncio.run((check or ReferenceCheck()).judge(record, render_transcript(record), None))


def _with_unique_ids(record: QueryRecord) -> QueryRecord:
    data = record.model_dump(mode='json')
    k = 0
    for msg in data['messages']:
        for call in msg.get('tool_calls') or []:
            k += 1
            call['id'] = f'unique_{k}'
    # results point at the call they answer, in order
    waiting: list[str] = []
    for msg in data['messages']:
        waiting += [c['id'] for c in msg.get('tool_calls') or []]
        if msg['role'] == 'tool':
            msg['tool_call_id'] = waiting.pop(0)
    return QueryRecord.model_validate(data)


def test_unique_ids_and_numbers_as_strings_do_not_change_the_verdict() -> None:
    expected = [{'tool_name': 'update_booking', 'args': {'id': 'B1', 'n': 3}}, {'tool_name': 'update_booking'}]
    record = _reused_ids_record(expected_tool_calls=expected)
    base = _reference(record)
    unique = _reference(_with_unique_ids(record))
    data = record.model_dump(mode='json')
    for msg in data['messages']:
        for call in msg.get('tool_calls') or []:
            args = json.loads(call['function']['arguments'])
            call['function']['arguments'] = json.dumps({k: str(v) if isinstance(v, int) else v for k, v in args.items()})
    as_strings = _reference(QueryRecord.model_validate(data))
    # the failed call (n=2) does not count: one update_booking succeeded, so the wildcard is unmatched
    assert base.passed is False
    for other in (unique, as_strings):
        assert (other.passed, other.score, other.details['expected']) == (base.passed, base.score, base.details['expected'])
    # `exact` values tell "3" from 3
    exact = _reference(QueryRecord.model_validate(data), ReferenceCheck(values='exact'))
    assert exact.details['expected'][0]['matched'] is False


def _single(expected: list[dict[str, Any]], calls: list[tuple[str, dict[str, Any]]], **metadata: Any) -> JudgeResult:
    messages: list[dict[str, Any]] = [{'role': 'user', 'content': 'Please help.'}]
    for k, (name, args) in enumerate(calls):
        messages.append({'role': 'assistant', 'content': None, 'tool_calls': [_call(f'c{k}', name, args)]})
        messages.append({'role': 'tool', 'tool_call_id': f'c{k}', 'content': '{"ok": true}'})
    messages.append({'role': 'assistant', 'content': 'Done.'})
    record = QueryRecord.model_validate(
        {'query_id': 'q', 'messages': messages, 'expected_tool_calls': expected, 'metadata': metadata}
    )
    return _reference(record)


def test_a_missing_read_only_call_is_a_minor_finding_and_a_missing_write_fails() -> None:
    lookup = _single([{'tool_name': 'search_flights', 'args': {'to': 'LAS'}}, {'tool_name': 'book', 'args': {'f': 1}}],
                     [('book', {'f': 1})])  # fmt: skip
    assert lookup.passed is True
    [issue] = lookup.issues
    assert issue['severity'] == 'minor' and issue['missed_tools'] == ['search_flights']
    assert 0.5 < lookup.score < 1
    write = _single([{'tool_name': 'book', 'args': {'f': 1}}], [('search_flights', {'to': 'LAS'})])
    assert write.passed is False and write.issues[0]['severity'] == 'major' and write.score is not None
    assert write.score < 0.5


def test_read_only_comes_from_tool_annotations_before_name_patterns() -> None:
    tools = [{'name': 'search_flights', 'annotations': {'readOnlyHint': False}},
             {'type': 'function', 'function': {'name': 'calc', 'annotations': {'readOnlyHint': True}}}]  # fmt: skip
    result = _single([{'tool_name': 'search_flights'}, {'tool_name': 'calc'}], [], tools=tools)
    assert [(e['tool_name'], e['required']) for e in result.details['expected']] == [('search_flights', True), ('calc', False)]
    record = QueryRecord.model_validate(
        {'query_id': 'x', 'messages': [{'role': 'user', 'content': 'hi'}], 'metadata': {'tools': tools}}
    )
    assert read_only_tools(record) == {'search_flights': False, 'calc': True}


def test_a_free_text_argument_in_other_words_is_minor_and_lenient_values_fold_case() -> None:
    summary = 'The user wants to change the return flight to a nonstop one to Las Vegas.'
    other = 'Customer asks to switch their return leg to a direct flight into Las Vegas.'
    result = _single([{'tool_name': 'transfer', 'args': {'summary': summary}}], [('transfer', {'summary': other})])
    assert result.passed is True and result.issues[0]['severity'] == 'minor'
    assert result.details['expected'][0]['matched'] is False  # the match table still says what differs
    folded = _single(
        [{'tool_name': 'transfer', 'args': {'summary': summary}}], [('transfer', {'summary': summary.upper() + '  '})]
    )
    assert folded.details['expected'][0]['matched'] is True
    # a short string is not free text: case counts there
    ids = _single([{'tool_name': 'cancel', 'args': {'id': 'AB12'}}], [('cancel', {'id': 'ab12'})])
    assert ids.passed is False


def test_per_tool_and_per_argument_rules() -> None:
    expected = [{'tool_name': 'transfer', 'args': {'summary': 'x', 'id': 7}}, {'tool_name': 'get_user', 'required': True}]
    calls = [('transfer', {'summary': 'anything at all', 'id': '7'})]
    check = ReferenceCheck(tools={'transfer': {'args': {'summary': 'ignore'}}})
    record_result = _reference(_single_record(expected, calls), check)
    assert record_result.details['expected'][0]['matched'] is True
    # `required` on the expected call wins over the read-only pattern
    assert record_result.passed is False and record_result.issues[0]['missed_tools'] == ['get_user']
    with pytest.raises(ValueError, match=r'tools\.transfer\.args'):
        ReferenceCheck(tools={'transfer': {'args': {'summary': 'loose'}}})


def _single_record(expected: list[dict[str, Any]], calls: list[tuple[str, dict[str, Any]]]) -> QueryRecord:
    messages: list[dict[str, Any]] = [{'role': 'user', 'content': 'Please help.'}]
    for k, (name, args) in enumerate(calls):
        messages.append({'role': 'assistant', 'content': None, 'tool_calls': [_call(f'c{k}', name, args)]})
        messages.append({'role': 'tool', 'tool_call_id': f'c{k}', 'content': '{"ok": true}'})
    messages.append({'role': 'assistant', 'content': 'Done.'})
    return QueryRecord.model_validate({'query_id': 'q', 'messages': messages, 'expected_tool_calls': expected})


def _group_chat(prefix: bool) -> dict[str, Any]:
    turns = [('Orchestrator', 'Plan: find the file, then count.'), ('Coder', 'print(4)'), ('Computer_terminal', ''),
             ('Verifier', 'The count is 4.')]  # fmt: skip
    if prefix:
        messages = [{'role': 'assistant', 'content': f'[{n}] {t}'} for n, t in turns]
    else:
        messages = [{'role': 'assistant', 'content': t, 'name': n} for n, t in turns]
    return {'query_id': 'g', 'query': 'How many?', 'messages': messages}


@pytest.mark.parametrize('prefix', [False, True])
def test_speakers_come_from_name_or_a_consistent_content_prefix(prefix: bool) -> None:
    record = QueryRecord.model_validate(_group_chat(prefix))
    transcript = render_transcript(record)
    assert [s.speaker for s in transcript.steps] == ['Orchestrator', 'Coder', 'Computer_terminal', 'Verifier']
    assert transcript.steps[0].text == 'Plan: find the file, then count.'  # the prefix became the speaker
    assert '[1] assistant (Orchestrator): Plan' in transcript.text


def test_a_prefix_is_not_taken_for_a_speaker_unless_consistent_or_named() -> None:
    data = {'query_id': 'p', 'messages': [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': '[Note] one'},
                                          {'role': 'assistant', 'content': 'plain text'}]}  # fmt: skip
    assert [s.speaker for s in render_transcript(QueryRecord.model_validate(data)).steps] == [None, None, None]
    named = {**data, 'metadata': {'speaker_prefix': 'bracket'}}
    assert [s.speaker for s in render_transcript(QueryRecord.model_validate(named)).steps] == [None, 'Note', None]
    colon = {
        'query_id': 'c',
        'query': 'go?',
        'messages': [{'role': 'assistant', 'content': 'Planner: go'}],
        'metadata': {'speaker_prefix': 'colon'},
    }
    assert render_transcript(QueryRecord.model_validate(colon)).steps[0].speaker == 'Planner'


def test_a_profile_sets_the_reference_rules_and_names_its_mistakes(tmp_path: Any) -> None:
    from sensei_eval.judging.profiles import ProfileError, load_profile

    good = tmp_path / 'p.yaml'
    good.write_text(
        'name: support\nextends: default\nparams:\n  reference_check:\n    values: exact\n'
        '    tools: {calculate: {read_only: true}, transfer: {args: {summary: ignore}}}\n'
    )
    check = load_profile(good).configure(ReferenceCheck())
    assert isinstance(check, ReferenceCheck) and check.values == 'exact'
    assert check.read_only('calculate', {}) and not check.read_only('transfer', {})
    bad = tmp_path / 'bad.yaml'
    bad.write_text('name: s\nextends: default\nparams:\n  reference_check:\n    tools: {calculate: {readonly: true}}\n')
    with pytest.raises(ProfileError, match=r'params\.reference_check.*tools\.calculate\.readonly'):
        load_profile(bad)


def _mode_result(judge: str, mode: str, score: float, model: str | None, status: str = 'ok') -> Any:
    from sensei_eval.core.modes import MODES

    return JudgeResult(
        judge=judge, failure_mode=mode, category=MODES[mode].category, criteria_hash='h', model=model,
        status=status, score=score if status == 'ok' else None, passed=score == 1.0 if status == 'ok' else None,
    )  # fmt: skip


def test_overall_score_is_a_confidence_weighted_product_of_mode_scores_in_its_band() -> None:
    from sensei_eval.core.reports import MODEL_CONFIDENCE, build_report

    record = QueryRecord.model_validate({'query_id': 'o', 'messages': [{'role': 'user', 'content': 'hi'}]})
    check = _mode_result('repeated_call_check', 'tool_parameters', 0.5, None)
    llm = _mode_result('hallucination', 'hallucination', 0.5, 'm')
    report = build_report(record, [check, llm], run_id='x')
    # a check failed the run: its band, 0.25 x the product of (1 - confidence x (1 - mode score))
    assert report.overall_score == pytest.approx(0.25 * 0.5 * (1 - MODEL_CONFIDENCE * 0.5))
    # a model's finding costs less than a check's equal one (it sits in the band of runs a model failed);
    # findings compound
    alone = build_report(record, [llm], run_id='x').overall_score
    assert alone is not None and 0.25 <= alone < 0.5 and report.overall_score < alone
    # errored and inconclusive judges never count as a score
    errored = build_report(record, [_mode_result('hallucination', 'hallucination', 0.0, 'm', 'error')], run_id='x')
    unsure = build_report(record, [_mode_result('hallucination', 'hallucination', 0.0, 'm', 'inconclusive')], run_id='x')
    assert errored.overall_score is None and unsure.overall_score is None
    # graded: different findings give different scores
    scores = {
        build_report(record, [_mode_result('reference_check', 'tool_selection', s, None)], run_id='x').overall_score
        for s in (1.0, 0.9, 0.75, 0.5, 0.25, 0.0)
    }
    assert len(scores) == 6
