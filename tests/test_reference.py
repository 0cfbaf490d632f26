"""The reference check: each expected call matched to a distinct successful call, order-free, extra
reads allowed and extra writes failed unless asked otherwise; findings in the tool_selection /
tool_parameters issue models; and on real tau2-bench runs, the benchmark's own per-action labels reproduced."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import ExpectedToolCall, QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport
from sensei_eval.core.transcript import render_transcript
from sensei_eval.evaluators.call_matching import match_expected_calls
from sensei_eval.evaluators.reference import ReferenceCheck
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records

TAU2 = Path(__file__).parent / 'data' / 'tau2_airline'


def _record(calls: list[tuple[str, dict[str, Any], str]], expected: list[dict[str, Any]], **metadata: Any) -> QueryRecord:
    """A record whose agent makes `calls` (name, args, result) in order, then answers."""
    messages: list[dict[str, Any]] = [{'role': 'system', 'content': 'Help the user.'}, {'role': 'user', 'content': 'Do it.'}]
    for i, (name, args, result) in enumerate(calls):
        messages.append(
            {'role': 'assistant', 'content': None,
             'tool_calls': [{'id': f'c{i}', 'type': 'function', 'function': {'name': name, 'arguments': json.dumps(args)}}]}
        )  # fmt: skip
        messages.append({'role': 'tool', 'tool_call_id': f'c{i}', 'content': result})
    messages.append({'role': 'assistant', 'content': 'Done.'})
    return QueryRecord.model_validate(
        {'query_id': 'q', 'messages': messages, 'expected_tool_calls': expected, 'metadata': metadata}
    )


def _judge(record: QueryRecord, check: ReferenceCheck | None = None) -> JudgeResult:
    return asyncio.run((check or ReferenceCheck()).judge(record, render_transcript(record), None))


def _report(record: QueryRecord) -> RecordReport:
    [report] = asyncio.run(judge_records([record], JudgeRunOptions([ReferenceCheck()]), run_id='t'))
    return report


GET = ('update', {'id': 'A'}, '{"id": "A"}')
GET_B = ('update', {'id': 'B'}, '{"id": "B"}')


def test_a_tool_expected_twice_needs_two_calls_with_its_arguments() -> None:
    expected = [{'tool_name': 'update', 'args': {'id': 'A'}}, {'tool_name': 'update', 'args': {'id': 'B'}}]
    assert _judge(_record([GET, GET_B], expected)).passed is True
    # the first call of a tool is not the only one looked at: B second still matches
    once = _judge(_record([GET, GET], expected))
    assert once.passed is False
    assert [e['matched'] for e in once.details['expected']] == [True, False]


def test_repeats_of_one_expected_call_count_as_a_multiset() -> None:
    expected = [{'tool_name': 'update', 'args': {'id': 'A'}}] * 2
    assert _judge(_record([GET, GET], expected)).passed is True
    result = _judge(_record([GET], expected))
    assert result.passed is False
    [issue] = result.issues
    assert issue['failure_mode'] == 'tool_selection' and issue['missed_tools'] == ['update']


def test_order_is_free_by_default_and_checked_when_ordered() -> None:
    expected = [{'tool_name': 'update', 'args': {'id': 'B'}}, {'tool_name': 'update', 'args': {'id': 'A'}}]
    assert _judge(_record([GET, GET_B], expected)).passed is True
    ordered = _judge(_record([GET, GET_B], expected), ReferenceCheck(ordered=True))
    assert ordered.passed is False
    assert 'not in the expected order' in ordered.reasoning  # type: ignore[operator]
    # the record can ask for it too
    assert _judge(_record([GET, GET_B], expected, reference_check={'ordered': True})).passed is False


def test_extra_reads_are_free_extra_writes_fail_and_strict_fails_any_extra() -> None:
    # the semantics changed on purpose (issue 31): an extra state-changing call fails by default
    expected = [{'tool_name': 'update', 'args': {'id': 'A'}}]
    free = [('think', {'thought': 'hm'}, 'ok'), GET, ('calculate', {'expression': '1+1'}, '2'), ('get_x', {}, '{}')]
    assert _judge(_record(free, expected)).passed is True
    calls = [*free, GET_B]
    extra = _judge(_record(calls, expected))
    assert extra.passed is False
    [issue] = extra.issues
    assert issue['unnecessary_tools'] == ['update'] and issue['failure_mode'] == 'tool_selection'
    assert _judge(_record(calls, expected), ReferenceCheck(extra_writes='allow')).passed is True
    assert _judge(_record(calls, expected, reference_check={'extra_writes': 'allow'})).passed is True
    strict = _judge(_record(calls, expected, reference_check={'extra_writes': 'allow'}), ReferenceCheck(strict=True))
    assert strict.passed is False
    [issue] = strict.issues
    assert issue['unnecessary_tools'] == ['calculate', 'get_x', 'think', 'update'] and issue['failure_mode'] == 'tool_selection'
    assert _judge(_record(free, expected, reference_check={'strict': True})).passed is False


def test_arguments_compare_after_json_normalisation() -> None:
    expected = [{'tool_name': 'book', 'args': {'legs': [{'n': 1, 'd': 'x'}], 'pay': 10}}]
    calls = [('book', {'pay': 10.0, 'legs': [{'d': 'x', 'n': 1}]}, 'booked')]  # other key order, 10.0 == 10
    assert _judge(_record(calls, expected)).passed is True
    # exact by default: an extra argument is a difference; subset ignores it
    extra = [('book', {'pay': 10, 'legs': [{'n': 1, 'd': 'x'}], 'note': 'hi'}, 'booked')]
    assert _judge(_record(extra, expected)).passed is False
    assert _judge(_record(extra, expected), ReferenceCheck(arguments='subset')).passed is True


def test_a_failed_call_does_not_count() -> None:
    expected = [{'tool_name': 'update', 'args': {'id': 'A'}}]
    failed = ('update', {'id': 'A'}, 'Error: reservation not found')
    result = _judge(_record([failed], expected))
    assert result.passed is False
    [issue] = result.issues
    assert issue['failure_mode'] == 'tool_selection' and 'every call of update failed' in issue['reasoning']
    assert issue['steps'] == [3]
    assert _judge(_record([failed, GET], expected)).passed is True


def test_wrong_arguments_are_a_tool_parameters_issue_naming_the_parameter_values_and_step() -> None:
    expected = [{'tool_name': 'update', 'args': {'id': 'A', 'full': True}}]
    result = _judge(_record([('update', {'id': 'Z', 'full': True}, '{}')], expected))
    [issue] = result.issues
    assert issue['failure_mode'] == 'tool_parameters'
    assert issue['tool_name'] == 'update' and issue['parameter'] == 'id'
    assert issue['actual_value'] == '{"id": "Z"}' and issue['suggested_value'] == '{"id": "A"}'
    assert issue['steps'] == [3]
    # a major finding with no expected call matched: 0.5 * share 0
    assert result.mode_scores == {'tool_selection': 1.0, 'tool_parameters': 0.0}


def test_wildcards_do_not_steal_the_call_a_specific_expectation_needs() -> None:
    expected = [ExpectedToolCall(tool_name='update'), ExpectedToolCall(tool_name='update', args={'id': 'A'})]
    record = _record([GET, GET_B], [e.model_dump() for e in expected])
    matches = match_expected_calls(expected, record.tool_calls())
    assert [m.actual_index for m in matches] == [1, 0]


def test_findings_reach_the_report_scores_and_failure_modes() -> None:
    expected = [{'tool_name': 'update', 'args': {'id': 'A'}}, {'tool_name': 'cancel', 'args': {'id': 'A'}}]
    report = _report(_record([('update', {'id': 'B'}, '{}')], expected))
    assert [i.missed_tools for i in report.issues_of('tool_selection')] == [['cancel']]
    assert [i.parameter for i in report.issues_of('tool_parameters')] == ['id']
    assert report.failure_modes == ['tool_selection', 'tool_parameters']
    # both modes have a major finding and no expected call matched (share 0): 0.5 * 0 each
    assert report.category_scores['tool_usage'] == 0.0
    assert report.overall_score is not None and report.overall_score < 1
    assert report.decisive_step is None  # the primary mode's finding is a call never made: no step to cite
    wrong_args = _report(_record([('update', {'id': 'B'}, '{}')], expected[:1]))
    assert wrong_args.primary_failure_mode == 'tool_parameters' and wrong_args.decisive_step == 3


def test_bad_record_options_are_reported_not_ignored() -> None:
    result = _judge(_record([GET], [{'tool_name': 'update'}], reference_check={'strict': 'yes', 'loose': 1}))
    assert result.passed is True
    assert any('strict' in w for w in result.warnings) and any('loose' in w for w in result.warnings)


def test_reproduces_tau2_bench_action_labels_on_real_runs() -> None:
    """Published runs with the benchmark's own labels (see tests/data/tau2_airline/README.md)."""
    records = load_dataset(TAU2 / 'records.jsonl').records
    labels = {json.loads(line)['query_id']: json.loads(line) for line in (TAU2 / 'labels.jsonl').read_text().splitlines()}
    reports = asyncio.run(judge_records(records, JudgeRunOptions([ReferenceCheck()]), run_id='tau2'))
    assert len(reports) == 4
    for report in reports:
        ours = [e['matched'] for e in report.judges['reference_check'].details['expected']]
        theirs = [a['matched'] for a in labels[report.query_id]['action_checks']]
        assert ours == theirs, report.query_id
    by_id = {r.query_id: r for r in reports}
    # tau2-airline-4 passed with get_reservation_details expected twice and extra calls: it passes here too
    assert by_id['tau2-airline-4'].judges['reference_check'].passed is True


@pytest.mark.parametrize('qid', ['tau2-airline-2', 'tau2-airline-9'])
def test_failed_tau2_runs_fail_the_reference_check(qid: str) -> None:
    record = next(r for r in load_dataset(TAU2 / 'records.jsonl').records if r.query_id == qid)
    assert _judge(record).passed is False
