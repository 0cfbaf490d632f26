"""What a reference means (issue 31), each rule on records written here: a write nobody asked for fails,
`[]` means "change nothing", every call is classified from the best evidence the record has and the
report says which, subset matching holds at every depth, a refused write told honestly to the user is a
recovery, findings use any agent's words, speakers come from any consistent prefix grammar, and
calibrate keeps what the judges saw."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sensei_eval.core.errors import ConfigError
from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, build_report
from sensei_eval.core.transcript import render_transcript
from sensei_eval.evaluators.checks import ErrorRecoveryCheck
from sensei_eval.evaluators.reference import ReferenceCheck
from sensei_eval.evaluators.tool_effects import classify_tool
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import BUILTIN_PROFILES
from sensei_eval.judging.run_folder import report_filename
from sensei_eval.judging.runner import judge_records
from sensei_eval.validate import calibrate as cal


def _record(
    calls: list[tuple[str, dict[str, Any], str]],
    expected: list[dict[str, Any]] | None,
    answer: str = 'Done.',
    **metadata: Any,
) -> QueryRecord:
    messages: list[dict[str, Any]] = [{'role': 'user', 'content': 'Please help with my order.'}]
    for i, (name, args, result) in enumerate(calls):
        messages.append(
            {'role': 'assistant', 'content': None,
             'tool_calls': [{'id': f'c{i}', 'type': 'function', 'function': {'name': name, 'arguments': json.dumps(args)}}]}
        )  # fmt: skip
        messages.append({'role': 'tool', 'tool_call_id': f'c{i}', 'content': result})
    messages.append({'role': 'assistant', 'content': answer})
    data: dict[str, Any] = {'query_id': 'q', 'messages': messages, 'metadata': metadata}
    if expected is not None:
        data['expected_tool_calls'] = expected
    return QueryRecord.model_validate(data)


def _judge(record: QueryRecord, check: Any = None) -> JudgeResult:
    return asyncio.run((check or ReferenceCheck()).judge(record, render_transcript(record), None))


LOOKUP = ('get_order', {'id': 'O1'}, '{"id": "O1", "status": "pending"}')
CANCEL = ('cancel_order', {'id': 'O1'}, '{"status": "cancelled"}')
CANCEL_OTHER = ('cancel_order', {'id': 'O2'}, '{"status": "cancelled"}')


# ---------------------------------------------------------------------------------------------------
# Extra writes, empty and missing references


def test_a_write_nobody_asked_for_fails_and_says_which_evidence_decided() -> None:
    expected = [{'tool_name': 'cancel_order', 'args': {'id': 'O1'}}]
    result = _judge(_record([LOOKUP, CANCEL, CANCEL_OTHER], expected))
    assert result.passed is False
    [issue] = result.issues
    assert issue['failure_mode'] == 'tool_selection' and issue['unnecessary_tools'] == ['cancel_order']
    assert issue['steps'] == [6] and issue['severity'] == 'major'
    assert "'cancel' in the name (name)" in issue['reasoning']
    assert result.details['extra_state_changing_calls'] == 1
    assert result.details['tools']['cancel_order'] == {
        'state_changing': True, 'kind': 'write', 'evidence': 'name', 'why': "'cancel' in the name"
    }  # fmt: skip
    assert [c['expected'] for c in result.details['calls']] == [None, 0, None]
    # ranked below a run that did the reference and nothing else: matched 1 of (1 expected + 1 extra)
    assert result.score == pytest.approx(0.25)
    assert _judge(_record([LOOKUP, CANCEL], expected)).score == 1.0


def test_reads_computations_and_hand_offs_beyond_the_reference_are_free() -> None:
    expected = [{'tool_name': 'cancel_order', 'args': {'id': 'O1'}}]
    extras = [('calculate', {'expression': '2*3'}, '6'), ('think', {'thought': 'ok'}, 'ok'),
              ('transfer_to_human_agents', {'summary': 'x'}, 'transferred'), ('searchProducts', {'q': 'x'}, '[]'),
              ('kubectl-logs', {'pod': 'a'}, 'log lines')]  # fmt: skip
    result = _judge(_record([LOOKUP, *extras, CANCEL], expected))
    assert result.passed is True and result.issues == []
    kinds = {n: t['kind'] for n, t in result.details['tools'].items()}
    assert kinds == {'get_order': 'read', 'calculate': 'compute', 'think': 'compute',
                     'transfer_to_human_agents': 'hand-off', 'searchProducts': 'read', 'kubectl-logs': 'unknown',
                     'cancel_order': 'write'}  # fmt: skip


def test_extra_writes_allow_in_a_profile_or_record() -> None:
    expected = [{'tool_name': 'cancel_order', 'args': {'id': 'O1'}}]
    calls = [CANCEL, CANCEL_OTHER]
    assert _judge(_record(calls, expected), ReferenceCheck(extra_writes='allow')).passed is True
    assert _judge(_record(calls, expected, reference_check={'extra_writes': 'allow'})).passed is True
    bad = _judge(_record(calls, expected, reference_check={'extra_writes': 'sometimes'}))
    assert bad.passed is False and any('extra_writes' in w for w in bad.warnings)
    with pytest.raises(ValueError, match='extra_writes'):
        ReferenceCheck(extra_writes='maybe')  # type: ignore[arg-type]


def test_an_empty_reference_means_change_nothing() -> None:
    check = ReferenceCheck()
    only_reads = _record([LOOKUP], [])
    assert check.applies_to(only_reads) is None  # `[]` is a reference, even without strict
    result = _judge(only_reads)
    assert result.passed is True and 'change nothing' in (result.reasoning or '')
    changed = _judge(_record([LOOKUP, CANCEL], []))
    assert changed.passed is False and changed.score == 0.0
    assert 'the reference is empty ("change nothing")' in changed.issues[0]['reasoning']
    # an empty reference says "change nothing" even where partial references allow extra writes
    assert _judge(_record([CANCEL], []), ReferenceCheck(extra_writes='allow')).passed is False
    # only a missing field is "no reference"
    assert check.applies_to(_record([CANCEL], None)) == 'the record has no expected_tool_calls or expected_outputs'


def test_a_failed_write_changed_nothing_and_a_wrong_write_is_reported_once() -> None:
    refused = ('cancel_order', {'id': 'O2'}, 'Error: order O2 already shipped')
    assert _judge(_record([refused], [])).passed is True
    wrong = _judge(_record([CANCEL_OTHER], [{'tool_name': 'cancel_order', 'args': {'id': 'O1'}}]))
    assert wrong.passed is False
    assert [i['failure_mode'] for i in wrong.issues] == ['tool_parameters']  # not again as an extra write


# ---------------------------------------------------------------------------------------------------
# Classification: annotation, description, profile, name


def test_evidence_order_annotation_description_profile_name() -> None:
    # the name says "cancel", the annotation says it only reads: the annotation wins
    assert classify_tool('cancel_preview', {'annotations': {'readOnlyHint': True}}).kind == 'read'
    assert classify_tool('get_thing', {'annotations': {'destructiveHint': True}}).evidence == 'annotation'
    assert classify_tool('get_thing', {'annotations': {'readOnlyHint': False}}).state_changing
    # an OpenAI schema's description, by its leading verb or what it says it does not do
    described = classify_tool('records_tool', {'description': 'Deletes a record from the store.'})
    assert (described.kind, described.evidence) == ('write', 'description')
    think = classify_tool('notes', {'description': 'Use the tool to think. It will not change the database.'})
    assert (think.kind, think.evidence) == ('compute', 'description')
    assert classify_tool('x', {'description': 'Cancel the booking. This does not affect others.'}).state_changing
    assert classify_tool('x', {'description': 'Transfer the user to a human agent.'}).kind == 'hand-off'
    # a profile's rule, then its patterns, then the name
    assert classify_tool('update_cache', None, {'read_only': True}).evidence == 'profile'
    assert classify_tool('sync', state_changing_patterns=[r'^sync$']).state_changing
    assert classify_tool('purge_cache').kind == 'write' and classify_tool('fetchUser').kind == 'read'
    assert classify_tool('transfer_funds').kind == 'write'  # a transfer that is not to someone: a write
    # a namespace or product before the verb is skipped, in any naming style
    assert classify_tool('airline.transferToHumanAgents').kind == 'hand-off'
    assert classify_tool('shop__cancelOrder').kind == 'write' and classify_tool('context7_get_docs').kind == 'read'


def test_tool_schemas_in_the_record_decide_before_the_name() -> None:
    tools = [
        {'type': 'function', 'function': {'name': 'order_tool', 'description': 'Cancels an order.', 'parameters': {}}},
        {'name': 'cancel_preview', 'annotations': {'readOnlyHint': True}},
    ]
    calls = [('cancel_preview', {'id': 'O1'}, '{}'), ('order_tool', {'id': 'O1'}, '{}')]
    result = _judge(_record(calls, [], tools=tools))
    assert result.passed is False and result.issues[0]['unnecessary_tools'] == ['order_tool']
    assert result.details['tools']['order_tool']['evidence'] == 'description'
    assert result.details['tools']['cancel_preview'] == {
        'state_changing': False, 'kind': 'read', 'evidence': 'annotation', 'why': 'readOnlyHint: true'
    }  # fmt: skip


def test_a_missing_lookup_is_advisory_and_a_missing_write_fails() -> None:
    expected = [{'tool_name': 'get_order'}, {'tool_name': 'cancel_order'}]
    missing_read = _judge(_record([CANCEL], expected))
    assert missing_read.passed is True and missing_read.issues[0]['severity'] == 'minor'
    assert 'advisory call: read, by name' in missing_read.issues[0]['reasoning']
    assert _judge(_record([LOOKUP], expected)).passed is False


# ---------------------------------------------------------------------------------------------------
# Argument matching at every depth


NESTED = {'order': {'id': 'O1', 'items': [{'item_id': 'a', 'qty': 1}, {'item_id': 'b', 'qty': 2}]}}


@pytest.mark.parametrize(
    ('actual', 'subset'),
    [
        # extra keys inside nested objects and inside list items
        ({'order': {'id': 'O1', 'note': 'x', 'items': [{'item_id': 'a', 'qty': 1, 'sku': 9},
                                                        {'item_id': 'b', 'qty': 2}]}, 'trace': 1}, True),
        # list items in another order, paired by their shared key
        ({'order': {'id': 'O1', 'items': [{'item_id': 'b', 'qty': 2}, {'item_id': 'a', 'qty': '1'}]}}, True),
        # a nested value that differs
        ({'order': {'id': 'O1', 'items': [{'item_id': 'a', 'qty': 5}, {'item_id': 'b', 'qty': 2}]}}, False),
        # an item missing or one too many
        ({'order': {'id': 'O1', 'items': [{'item_id': 'a', 'qty': 1}]}}, False),
        ({'order': {'id': 'O1', 'items': [{'item_id': 'a', 'qty': 1}, {'item_id': 'b', 'qty': 2},
                                           {'item_id': 'c', 'qty': 1}]}}, False),
    ],
)  # fmt: skip
def test_subset_ignores_extra_keys_at_every_depth(actual: dict[str, Any], subset: bool) -> None:
    expected = [{'tool_name': 'update_order', 'args': NESTED}]
    record = _record([('update_order', actual, '{}')], expected)
    assert _judge(record, ReferenceCheck(arguments='subset')).passed is subset
    assert _judge(record, ReferenceCheck(arguments='subset')).details['expected'][0]['matched'] is subset


def test_lists_of_scalars_are_multisets_unless_ordered_and_nested_keys_are_ignored_in_either_mode() -> None:
    """Arguments as APIs read them (issue 39, item 3): `['b', 'a']` fits `['a', 'b']` unless the check's rule
    names the list ordered; a key inside a nested object the reference does not name is ignored whether the
    top level compares `exact` or `subset`."""
    expected = [{'tool_name': 'set_tags', 'args': {'tags': [{'t': 'x'}, {'t': 'x'}], 'path': ['a', 'b']}}]
    good = _record([('set_tags', {'tags': [{'t': 'x', 'w': 1}, {'t': 'x'}], 'path': ['a', 'b']}, '{}')], expected)
    swapped = _record([('set_tags', {'tags': [{'t': 'x'}, {'t': 'x'}], 'path': ['b', 'a']}, '{}')], expected)
    fewer = _record([('set_tags', {'tags': [{'t': 'x'}, {'t': 'x'}], 'path': ['a', 'a']}, '{}')], expected)
    for check in (ReferenceCheck(), ReferenceCheck(arguments='subset')):
        assert _judge(good, check).passed is True
        assert _judge(swapped, check).passed is True  # a multiset: the order of the path carries nothing
        assert _judge(fewer, check).passed is False  # a multiset still counts: a twice is not a and b
    ordered = ReferenceCheck(tools={'set_tags': {'ordered': ['path']}})
    assert _judge(swapped, ordered).passed is False
    assert _judge(good, ordered).passed is True
    extra_top = _record([('set_tags', {'tags': [{'t': 'x'}, {'t': 'x'}], 'path': ['a', 'b'], 'force': True}, '{}')], expected)
    assert _judge(extra_top).passed is False  # exact: a top-level argument the reference does not name differs
    assert _judge(extra_top, ReferenceCheck(arguments='subset')).passed is True


def test_an_ordered_rule_that_is_not_a_list_of_paths_is_a_config_error() -> None:
    for bad in ('path', [1], {'path': True}):
        with pytest.raises(ConfigError, match=r'tools\.set_tags\.ordered'):
            ReferenceCheck(tools={'set_tags': {'ordered': bad}})


def test_tau_bench_shapes_pass_as_the_apis_read_them() -> None:
    """The two shapes that failed passing tau-bench runs: item ids in another order (tau stores
    `sorted(item_ids)`), and flight objects carrying keys the reference does not name."""
    exchange = {'order_id': '#W1', 'item_ids': ['111', '222'], 'new_item_ids': ['333', '444'], 'payment_method_id': 'gc_1'}
    sent = {**exchange, 'item_ids': ['222', '111'], 'new_item_ids': ['444', '333']}
    record = _record(
        [('exchange_delivered_order_items', sent, '{}')], [{'tool_name': 'exchange_delivered_order_items', 'args': exchange}]
    )
    assert _judge(record).passed is True
    wrong = {**sent, 'new_item_ids': ['444', '555']}
    record = _record(
        [('exchange_delivered_order_items', wrong, '{}')], [{'tool_name': 'exchange_delivered_order_items', 'args': exchange}]
    )
    result = _judge(record)
    assert result.passed is False and 'new_item_ids' in result.issues[0]['parameter']
    flights = {
        'reservation_id': 'R1',
        'cabin': 'economy',
        'flights': [{'flight_number': 'HAT1', 'date': '2024-05-20'}, {'flight_number': 'HAT2', 'date': '2024-05-21'}],
    }
    sent_flights = {
        **flights,
        'flights': [
            {'flight_number': 'HAT2', 'date': '2024-05-21', 'origin': 'JFK', 'destination': 'SFO', 'price': 120},
            {'flight_number': 'HAT1', 'date': '2024-05-20', 'origin': 'SFO', 'destination': 'JFK', 'price': 99},
        ],
    }
    record = _record(
        [('update_reservation_flights', sent_flights, '{}')], [{'tool_name': 'update_reservation_flights', 'args': flights}]
    )
    assert _judge(record).passed is True
    moved = {**sent_flights, 'flights': [{**sent_flights['flights'][0], 'date': '2024-05-22'}, sent_flights['flights'][1]]}
    record = _record(
        [('update_reservation_flights', moved, '{}')], [{'tool_name': 'update_reservation_flights', 'args': flights}]
    )
    assert _judge(record).passed is False  # a named nested key still counts


# ---------------------------------------------------------------------------------------------------
# Recovery from a tool error, in words that fit any agent


REFUSED = ('book_flight', {'flight': 'HAT1', 'seats': 3}, 'Error: not enough seats on flight HAT1')


def test_a_refused_write_reported_to_the_user_is_a_recovery() -> None:
    honest = _record([REFUSED], None, answer='I could not book HAT1: there are not enough seats left. '
                     'Would you like the later flight HAT3 instead?')  # fmt: skip
    assert ErrorRecoveryCheck().find(honest, render_transcript(honest)) == []
    because = _record([REFUSED], None, answer='Unfortunately the booking did not go through because the plane is full.')
    assert ErrorRecoveryCheck().find(because, render_transcript(because)) == []


def test_an_unrecovered_error_is_a_tool_finding_not_research_depth() -> None:
    silent = _record([REFUSED], None, answer='All set, you are booked on HAT1!')
    [issue] = ErrorRecoveryCheck().find(silent, render_transcript(silent))
    data = issue.model_dump()
    assert type(issue).__name__ == 'ToolParameterIssue' and data['tool_name'] == 'book_flight'
    assert 'query_phrasings_tried' not in data and 'not enough seats' in data['actual_value']
    [report] = asyncio.run(judge_records([silent], JudgeRunOptions([ErrorRecoveryCheck()]), run_id='t'))
    assert list(report.issues) == ['tool_parameters']
    # the documentation agent's vocabulary, only under its profile
    docs = BUILTIN_PROFILES['docs-agent'].configure(ErrorRecoveryCheck())
    [docs_report] = asyncio.run(judge_records([silent], JudgeRunOptions([docs]), run_id='t'))
    assert list(docs_report.issues) == ['research_depth']
    assert docs_report.issues['research_depth'][0].query_phrasings_tried == 1  # type: ignore[attr-defined]
    assert BUILTIN_PROFILES['default'].configure(ErrorRecoveryCheck()).vocabulary == 'any'


# ---------------------------------------------------------------------------------------------------
# Speakers


def _speakers(contents: list[str], **extra: Any) -> list[str | None]:
    data = {'query_id': 's', 'query': 'task', 'messages': [{'role': 'assistant', 'content': c} for c in contents], **extra}
    return [s.speaker for s in render_transcript(QueryRecord.model_validate(data)).steps]


@pytest.mark.parametrize(
    ('contents', 'speakers'),
    [
        (['[Orchestrator] plan', '[WebSurfer] found it'], ['Orchestrator', 'WebSurfer']),
        (['[Orchestrator (thought)] plan', '[Orchestrator (-> WebSurfer)] go look', '[WebSurfer] ok'],
         ['Orchestrator', 'Orchestrator', 'WebSurfer']),
        (['Planner: find it', 'Coder (-> Planner): print(4)', 'Planner: thanks'], ['Planner', 'Coder', 'Planner']),
        (['Data Analyst: the mean is 4', 'Reviewer: agreed'], ['Data Analyst', 'Reviewer']),
    ],
)  # fmt: skip
def test_each_prefix_grammar_names_the_speaker(contents: list[str], speakers: list[str]) -> None:
    assert _speakers(contents) == speakers


def test_the_prefix_is_cut_from_the_text_the_judges_read() -> None:
    data = {'query_id': 's', 'query': 't', 'messages': [{'role': 'assistant', 'content': '[Orchestrator (thought)] plan'},
                                                        {'role': 'assistant', 'content': '[Coder] x = 1'}]}  # fmt: skip
    transcript = render_transcript(QueryRecord.model_validate(data))
    assert '[1] assistant (Orchestrator): plan' in transcript.text


def test_partly_unknown_prefixes_keep_the_speakers_they_could_read() -> None:
    contents = ['[Orchestrator (thought)] plan', '[WebSurfer] page', 'no prefix on this one', '[Orchestrator] done']
    assert _speakers(contents) == ['Orchestrator', 'WebSurfer', None, 'Orchestrator']


def test_prose_is_not_taken_for_speakers() -> None:
    assert _speakers(['Note: this is it', 'Note: and this']) == [None, None]
    assert _speakers(['[a link](http://x) here', '[another](http://y) there']) == [None, None]
    assert _speakers(['Sure, here it is.', 'Planner: go', 'plain', 'plain again']) == [None, None, None, None]


def test_a_note_after_a_name_field_is_dropped_as_in_prefixes() -> None:
    data = {'query_id': 's', 'query': 't', 'messages': [
        {'role': 'assistant', 'content': 'plan', 'name': 'Orchestrator (thought)'},
        {'role': 'assistant', 'content': 'go', 'name': 'Orchestrator (-> WebSurfer)'},
        {'role': 'assistant', 'content': 'ok', 'name': 'WebSurfer'}]}  # fmt: skip
    speakers = [s.speaker for s in render_transcript(QueryRecord.model_validate(data)).steps]
    assert speakers == ['Orchestrator', 'Orchestrator', 'WebSurfer']


def test_the_openai_name_field_wins_over_a_prefix() -> None:
    data = {'query_id': 's', 'query': 't', 'messages': [
        {'role': 'assistant', 'content': '[Other] hi', 'name': 'Coder'},
        {'role': 'assistant', 'content': 'x', 'name': 'Bot'}]}  # fmt: skip
    assert [s.speaker for s in render_transcript(QueryRecord.model_validate(data)).steps] == ['Coder', 'Bot']


# ---------------------------------------------------------------------------------------------------
# calibrate


def _write_run(tmp_path: Path, records: list[QueryRecord], scores: dict[str, float]) -> Path:
    run = tmp_path / 'run'
    for record in records:
        score = scores[record.query_id]
        result = JudgeResult(
            judge='reference_check', failure_mode='tool_selection', category='tool_usage', criteria_hash='h',
            model=None, status='ok', score=score, passed=score == 1.0,
        )  # fmt: skip
        report = build_report(record, [result], run_id='run', transcript=render_transcript(record))
        write_text_atomic(run / report_filename(record.query_id), report.model_dump_json())
    return run


# a prefix grammar only the record's metadata names (no detection reads `<Name>`)
_ANGLE = r'^<(?P<name>\w+)>\s*'


def _colon_chat(qid: str, first: str) -> QueryRecord:
    messages = [{'role': 'assistant', 'content': f'<{first}> start'}, {'role': 'assistant', 'content': '<Other> reply'}]
    return QueryRecord.model_validate(
        {'query_id': qid, 'query': 'task', 'messages': messages, 'metadata': {'speaker_prefix': _ANGLE, 'note': 1}}
    )


def test_calibrate_keeps_metadata_and_reads_baselines_on_the_judges_speakers(tmp_path: Path) -> None:
    # a one-message-per-agent log whose prefix grammar the record names: only its metadata says so
    records = [_colon_chat('a', 'Planner'), _colon_chat('b', 'Coder')]
    run = _write_run(tmp_path, records, {'a': 1.0, 'b': 0.5})
    labels = tmp_path / 'labels.jsonl'
    labels.write_text('\n'.join(json.dumps({'query_id': q, 'mistake_agent': 'Planner'}) for q in ('a', 'b')) + '\n')
    result = cal.calibrate(run, labels)
    assert result.agents is not None and result.agents.baseline_first_agent == pytest.approx(0.5)
    reloaded = json.loads((run / report_filename('a')).read_text())
    assert reloaded['metadata'] == {'speaker_prefix': _ANGLE, 'note': 1}
    # without its metadata the record has no speakers: the baseline would read 0
    bare = QueryRecord.model_validate({k: v for k, v in records[0].model_dump().items() if k != 'metadata'})
    assert [s.speaker for s in render_transcript(bare).steps] == [None, None]


def test_a_constant_score_separates_nothing(tmp_path: Path) -> None:
    records = [_colon_chat(q, 'Planner') for q in ('a', 'b', 'c')]
    run = _write_run(tmp_path, records, {'a': 0.5, 'b': 0.5, 'c': 0.5})
    labels = tmp_path / 'labels.jsonl'
    labels.write_text('\n'.join(json.dumps({'query_id': q, 'passed': q == 'a'}) for q in ('a', 'b', 'c')) + '\n')
    result = cal.calibrate(run, labels)
    assert result.outcomes is not None
    overall = result.outcomes.predictors[0]
    assert overall.auroc == pytest.approx(0.5)
    assert overall.best_f1 is None and overall.accuracy is None and overall.precision is None
    assert overall.note is not None and 'separates nothing' in overall.note


def test_mast_style_labels_and_foreign_modes_are_read_with_a_note(tmp_path: Path) -> None:
    records = [_colon_chat(q, 'Planner') for q in ('a', 'b')]
    run = _write_run(tmp_path, records, {'a': 1.0, 'b': 0.5})
    rows = [{'query_id': 'a', 'failure_mode': 'tool_selection', 'label': 0},
            {'query_id': 'b', 'failure_mode': 'tool_selection', 'label': 1},
            {'query_id': 'a', 'failure_mode': '1.1 Disobey Task Specification', 'label': 1}]  # fmt: skip
    labels = tmp_path / 'labels.jsonl'
    labels.write_text('\n'.join(map(json.dumps, rows)) + '\n')
    result = cal.calibrate(run, labels)
    assert result.problems == []
    [agreement] = result.judges
    assert agreement.confusion_matrix == [[1, 0], [0, 1]] and agreement.accuracy == 1.0
    assert any('MAST-style' in n for n in result.notes)
    assert any('1.1 Disobey Task Specification' in n and 'not one of ours' in n for n in result.notes)


def test_python_m_sensei_eval_calibrate_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, '-m', 'sensei_eval.calibrate', '--help'], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert 'python -m sensei_eval.calibrate' in done.stdout and '--labels' in done.stdout


def test_a_missing_advisory_call_passes_with_its_reason_on_the_verdict() -> None:
    """Issue 39, item 4: a never-called expected `get_forecast` scored 0.50 "passed" with no reason anywhere.
    The finding says why it is advisory and what that means, and the verdict model hands it to every surface."""
    from sensei_eval.core.verdicts import mode_verdicts

    record = _record([], [{'tool_name': 'get_forecast', 'args': {'city': 'Oslo'}}], answer='It will rain.')
    result = _judge(record)
    assert result.passed is True and result.score == 0.5
    report = build_report(record, [result], run_id='t')
    verdict = mode_verdicts(report)['reference_check', 'tool_selection']
    assert verdict.status == 'pass' and verdict.score == 0.5
    (reason,) = verdict.reasons
    assert reason.startswith('minor: get_forecast was expected but never called (an advisory call: read')
    assert reason.endswith('a missing advisory call lowers the score and does not fail the run).')
    # a passed run: the upper band, 0.5 + 0.5 * 0.5, and the reason beside it
    assert report.overall_score == 0.75 and 'advisory call' in (result.reasoning or '')
