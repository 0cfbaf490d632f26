"""Required outputs (issue 39, item 2): what the agent must tell the user is part of the reference.

Every failed run the checks missed on held-out tau-bench runs gave the user a wrong value ("a total of 6
suitcases" where the required output is 4, "11 T-shirt options" where it is 10). tau-bench's own rule is
the final state *and* the required outputs.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.outputs import contains_output, output_tokens
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, build_report
from sensei_eval.core.transcript import render_transcript
from sensei_eval.core.verdicts import mode_verdicts
from sensei_eval.evaluators.reference import ReferenceCheck

DATA = Path(__file__).parent / 'data' / 'tau2_airline'


@pytest.mark.parametrize(
    ('reply', 'output', 'found'),
    [
        ('You have a total of 4 suitcases.', '4', True),
        ('You have a total of 6 suitcases.', '4', False),
        ('There are 14 bags in 2024.', '4', False),  # never inside another number
        ('The fee is $4.00.', '4', True),  # numbers as numbers
        ('The total is $1,234.50', '1234.5', True),
        ('The total is 1234.5 dollars', '$1,234.50', True),
        ('We found 10 T-shirt options for you', '10', True),
        ('We found 11 T-shirt options for you', '10', False),
        ('Your seat: 12a.', 'Seat 12A', True),  # case and punctuation folded
        ('Your seat is 12A.', 'seat 12A', False),  # the words of an output stay together
        ('That category is full.', 'cat', False),  # words as words
        ('Order #W2378156   is   cancelled', 'w2378156 is cancelled', True),
        ('Refund: 88.0', '88', True),
        ('Nothing to say', '!', False),
    ],
)
def test_a_reply_says_an_output_as_numbers_and_words(reply: str, output: str, found: bool) -> None:
    assert contains_output(reply, output) is found


def test_output_tokens_read_grouped_numbers_and_alphanumeric_words() -> None:
    assert output_tokens('W1234 costs $1,234.50 (4th)') == (('w', 'w1234'), ('w', 'costs'), ('n', 1234.5), ('w', '4th'))


def _run(replies: list[str], *, outputs: list[Any] | None, expected: list[dict[str, Any]] | None = None) -> QueryRecord:
    messages: list[dict[str, Any]] = [{'role': 'user', 'content': 'How many suitcases do I have on my booking?'}]
    if expected is not None:
        call = {'id': 'c1', 'type': 'function', 'function': {'name': 'get_reservation_details', 'arguments': '{"id": "R1"}'}}
        messages += [
            {'role': 'assistant', 'content': None, 'tool_calls': [call]},
            {'role': 'tool', 'tool_call_id': 'c1', 'content': '{"total_baggages": 4}'},
        ]
    for text in replies:
        messages += [{'role': 'assistant', 'content': text}, {'role': 'user', 'content': 'ok'}]
    data: dict[str, Any] = {'query_id': 'q', 'messages': messages[:-1], 'expected_outputs': outputs}
    if expected is not None:
        data['expected_tool_calls'] = expected
    return QueryRecord.model_validate(data)


def _judge(record: QueryRecord, check: ReferenceCheck | None = None) -> JudgeResult:
    return asyncio.run((check or ReferenceCheck()).judge(record, render_transcript(record), None))


def test_a_wrong_value_told_to_the_user_fails_the_reference() -> None:
    wrong = _run(['Let me check.', 'You have a total of 6 suitcases.'], outputs=['4'])
    check = ReferenceCheck()
    assert check.applies_to(wrong) is None  # outputs alone are a reference
    result = _judge(wrong)
    assert result.status == 'ok' and result.passed is False
    assert result.mode_scores == {'completeness': 0.0} and result.score == 0.0
    (issue,) = result.issues
    assert issue['failure_mode'] == 'completeness' and issue['severity'] == 'major'
    assert issue['missed_aspects'] == ["required output '4'"]
    assert "tell the user '4'" in issue['reasoning'] and 'none of its 2 replies' in issue['reasoning']
    assert issue['steps'] == [4]  # the last reply, the step a reader goes to
    assert result.details['outputs'] == [{'output': '4', 'found': False, 'step': None}]
    right = _judge(_run(['Let me check.', 'You have a total of 4 suitcases.'], outputs=[4]))
    assert right.passed is True and right.mode_scores == {'completeness': 1.0}
    assert right.details['outputs'] == [{'output': '4', 'found': True, 'step': 4}]
    assert 'all 1 required output(s) said to the user' in (right.reasoning or '')


def test_outputs_and_calls_are_one_reference_and_each_mode_gets_its_verdict() -> None:
    expected = [{'tool_name': 'get_reservation_details', 'args': {'id': 'R1'}}]
    record = _run(['You have 6 suitcases and 88 dollars of credit.'], outputs=['4', '88'], expected=expected)
    result = _judge(record)
    assert result.passed is False
    assert result.mode_scores == {'tool_selection': 1.0, 'tool_parameters': 1.0, 'completeness': 0.25}
    report = build_report(record, [result], run_id='t')
    verdicts = mode_verdicts(report)
    assert verdicts['reference_check', 'completeness'].status == 'fail'
    assert verdicts['reference_check', 'tool_selection'].status == 'pass'
    # a check failed the run: its band, 0.25 * P with P = 0.25 (`core.verdicts`)
    assert report.failure_modes == ['completeness'] and report.overall_score == 0.0625
    assert report.expected_outputs == ['4', '88']  # the report carries what was required
    assert json.loads(report.model_dump_json())['expected_outputs'] == ['4', '88']


def test_no_outputs_and_no_calls_skip_the_check_and_empty_outputs_require_nothing() -> None:
    check = ReferenceCheck()
    assert check.applies_to(_run(['Hi'], outputs=None)) == 'the record has no expected_tool_calls or expected_outputs'
    assert check.applies_to(_run(['Hi'], outputs=[])) is not None
    expected = [{'tool_name': 'get_reservation_details', 'args': {'id': 'R1'}}]
    result = _judge(_run(['Done'], outputs=[], expected=expected))
    assert 'completeness' not in result.mode_scores and 'outputs' not in result.details


def test_an_answer_given_through_a_final_answer_tool_counts_as_a_reply() -> None:
    call = {'id': 'f1', 'type': 'function', 'function': {'name': 'final_answer', 'arguments': '{"answer": "4 suitcases"}'}}
    record = QueryRecord.model_validate(
        {
            'query_id': 'q',
            'messages': [{'role': 'user', 'content': 'How many?'}, {'role': 'assistant', 'content': None, 'tool_calls': [call]}],
            'expected_outputs': ['4'],
        }
    )
    assert _judge(record).passed is True


def test_a_real_tau2_run_is_held_to_what_it_told_the_user() -> None:
    """tau2-airline-13 (a published run, tests/data/tau2_airline): what its replies said passes, a value
    they never said fails, and the calls are judged as before."""
    (record,) = [r for r in load_dataset(DATA / 'records.jsonl').records if r.query_id == 'tau2-airline-13']
    plain = _judge(record)
    # its reply: "I've pulled up your reservation XEWRD9. ... a return on May 21st."
    told = _judge(record.model_copy(update={'expected_outputs': ['reservation xewrd9']}))
    assert told.passed is plain.passed and told.mode_scores['completeness'] == 1.0
    never = _judge(record.model_copy(update={'expected_outputs': ['987654321']}))
    assert never.passed is False and never.mode_scores['completeness'] == 0.0
    assert {k: v for k, v in never.mode_scores.items() if k != 'completeness'} == plain.mode_scores


def test_a_blank_required_output_is_a_located_error_and_the_other_lines_load(tmp_path: Path) -> None:
    good = {'query_id': 'a', 'messages': [{'role': 'user', 'content': 'hi'}], 'expected_outputs': ['4']}
    bad = {'query_id': 'b', 'messages': [{'role': 'user', 'content': 'hi'}], 'expected_outputs': ['4', '  ']}
    path = tmp_path / 'd.jsonl'
    path.write_text('\n'.join(json.dumps(x) for x in (good, bad, {**good, 'query_id': 'c'})) + '\n')
    loaded = load_dataset(path)
    assert [r.query_id for r in loaded.records] == ['a', 'c']
    (error,) = loaded.errors
    assert error.line == 2 and 'expected_outputs[1]' in str(error) and 'blank' in str(error)


def test_view_shows_the_required_outputs_of_a_record(tmp_path: Path) -> None:
    from sensei_eval.judging.run_folder import RunFolder
    from sensei_eval.judging.view import write_view

    record = _run(['You have a total of 6 suitcases.'], outputs=['4'])
    folder = RunFolder(tmp_path / 'run')
    folder.write_report(build_report(record, [_judge(record)], run_id='run'))
    page = write_view([folder.path]).read_text()
    assert 'class="expected-outputs' in page and 'required outputs: ' in page
    assert 'tell the user &#x27;4&#x27;' in page or "tell the user '4'" in page  # the failed verdict says why
