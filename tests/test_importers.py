"""Benchmark result files (`--format tau-bench`, `who-and-when`): required outputs and the agent's tools
carried into the record, and every bad entry a located error for its own run only (issue 39 item 2,
issue 41 item 7).

Fixtures: `tests/data/tau_bench/` (the published result-file shapes of sierra-research/tau-bench and
tau2-bench, see its README).
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.core.datasets import iter_dataset
from sensei_eval.core.errors import LoadError
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import render_transcript
from sensei_eval.evaluators.reference import ReferenceCheck
from sensei_eval.judging.run_folder import load_reports

DATA = Path(__file__).parent / 'data' / 'tau_bench'
V1 = DATA / 'tau_bench_results.json'
TAU2 = DATA / 'tau2_results.json'


def _load(path: Path, format: Any = 'auto') -> tuple[list[QueryRecord], list[LoadError]]:
    items = list(iter_dataset(path, format=format))
    return [i for i in items if isinstance(i, QueryRecord)], [i for i in items if isinstance(i, LoadError)]


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2))
    return path


# ---------------------------------------------------------------------------------------------------
# Required outputs and tools from the result files


def test_tau_bench_outputs_become_required_outputs_and_the_checks_catch_the_wrong_value(tmp_path: Path) -> None:
    records, errors = _load(V1, 'tau-bench')
    assert errors == []
    assert {r.query_id: r.expected_outputs for r in records} == {
        'tau_bench_results-task12-trial0': ['4'],
        'tau_bench_results-task31-trial0': ['10'],
    }
    assert all(r.tools is None for r in records)  # tau-bench's result files do not record the tools
    result = CliRunner().invoke(
        judge_cli.app,
        ['--dataset', str(V1), '--format', 'tau-bench', '--evaluators', 'checks', '--out', str(tmp_path), '--run-id', 'r'],
    )
    assert result.exit_code == 0, result.output
    reports = {r.query_id: r for r in load_reports(tmp_path / 'r')}
    wrong, right = reports['tau_bench_results-task12-trial0'], reports['tau_bench_results-task31-trial0']
    # the calls were right in both runs; the benchmark failed the first on its output, and so do the checks
    assert wrong.judges['reference_check'].mode_scores['tool_selection'] == 1.0
    assert wrong.failure_modes == ['completeness'] and wrong.overall_score == 0.0
    assert wrong.expected_outputs == ['4'] and "tell the user '4'" in wrong.issues_of('completeness')[0].reasoning  # type: ignore[attr-defined]
    assert right.failure_modes == [] and right.overall_score == 1.0
    assert [r.metadata['reward'] for r in (wrong, right)] == [0.0, 1.0]


def test_tau2_outputs_follow_the_reward_basis_and_the_tools_come_with_their_descriptions() -> None:
    records, errors = _load(TAU2)
    assert errors == []
    by_task = {r.metadata['task_id']: r for r in records}
    assert by_task['7'].expected_outputs == ['4']
    assert by_task['8'].expected_outputs is None  # communicate_info outside reward_basis: it gates nothing
    tools = {t.name: t for t in by_task['7'].tools or []}
    assert list(tools) == ['get_reservation_details', 'update_reservation_baggages', 'transfer_to_human_agents']
    assert (tools['get_reservation_details'].description or '').startswith('Get the details of a reservation.')
    assert (tools['update_reservation_baggages'].description or '').startswith('Update the baggage information')
    assert tools['get_reservation_details'].parameters is not None
    assert tools['get_reservation_details'].parameters['required'] == ['reservation_id']
    # the reference check reads what the tools do from their descriptions, not their names
    record = by_task['7']
    result = asyncio.run(ReferenceCheck().judge(record, render_transcript(record), None))
    described = result.details['tools']
    assert (
        described['get_reservation_details']['evidence'] == 'description'
        and described['get_reservation_details']['kind'] == 'read'
    )
    assert described['update_reservation_baggages']['kind'] == 'write'
    assert result.passed is True and result.details['outputs'] == [{'output': '4', 'found': True, 'step': 10}]


# ---------------------------------------------------------------------------------------------------
# One bad entry is a located error for its own run only (issue 41, item 7)


def test_a_bad_tau_bench_entry_between_good_ones_is_one_located_error(tmp_path: Path) -> None:
    good = json.loads(V1.read_text())
    path = _write(tmp_path, 'results.json', [good[0], {'task_id': 99, 'traj': 'not a list'}, good[1]])
    records, errors = _load(path, 'tau-bench')
    assert [r.metadata['task_id'] for r in records] == [12, 31]
    (error,) = errors
    assert error.field == '[1]' and 'expected a tau-bench result' in error.message and error.file == str(path)


def test_a_bad_required_output_is_an_error_for_its_run(tmp_path: Path) -> None:
    good = json.loads(V1.read_text())
    bad = copy.deepcopy(good[0])
    bad['task_id'] = 13
    bad['info']['task']['outputs'] = ['4', {'value': 4}]
    records, errors = _load(_write(tmp_path, 'results.json', [good[0], bad, good[1]]), 'tau-bench')
    assert len(records) == 2
    (error,) = errors
    assert error.field == '[1].info.task.outputs[1]' and 'expected a required output as text, got dict' in error.message


@pytest.mark.parametrize(
    ('tool_calls', 'field', 'why'),
    [
        ('abc', 'simulations[1].messages[2].tool_calls', 'expected a list of tool calls, got str'),
        (['abc'], 'simulations[1].messages[2].tool_calls[0]', 'expected a tool call {id, name, arguments}'),
        ([{'id': 'x', 'arguments': {}}], 'simulations[1].messages[2].tool_calls[0]', 'expected a tool call'),
    ],
)
def test_a_tau2_run_with_unreadable_tool_calls_is_an_error_for_that_run_only(
    tmp_path: Path, tool_calls: Any, field: str, why: str
) -> None:
    data = json.loads(TAU2.read_text())
    first, second = data['simulations']
    broken = copy.deepcopy(second)
    broken['task_id'] = '8'
    broken['messages'][2]['tool_calls'] = tool_calls
    data['simulations'] = [first, broken, {**copy.deepcopy(second), 'trial': 1}]
    records, errors = _load(_write(tmp_path, 'tau2.json', data), 'tau-bench')
    assert [(r.metadata['task_id'], r.metadata['trial']) for r in records] == [('7', 0), ('8', 1)]
    (error,) = errors
    assert error.field == field and why in error.message


def test_a_tau2_file_whose_simulations_are_not_a_list_is_one_error(tmp_path: Path) -> None:
    records, errors = _load(_write(tmp_path, 'tau2.json', {'simulations': 'abc'}), 'tau-bench')
    assert records == [] and [e.field for e in errors] == ['simulations']


def test_a_bad_who_and_when_log_between_good_ones_is_one_located_error(tmp_path: Path) -> None:
    log = {'question': 'How many?', 'history': [{'role': 'human', 'content': 'How many?'}, {'role': 'WebSurfer', 'content': '4'}]}
    bad = {'question': 'Broken', 'history': [{'role': 'human', 'content': 'x'}, 'not a turn']}
    path = _write(tmp_path, 'logs.json', [{**log, 'question_ID': 'a'}, {**bad, 'question_ID': 'b'}, {**log, 'question_ID': 'c'}])
    records, errors = _load(path, 'who-and-when')
    assert [r.query_id for r in records] == ['a', 'c']
    (error,) = errors
    assert error.field == '[1].history[1]' and 'expected {role, content}' in error.message


def test_the_cli_judges_the_good_runs_and_reports_each_bad_one(tmp_path: Path) -> None:
    data = json.loads(TAU2.read_text())
    broken = copy.deepcopy(data['simulations'][1])
    broken['messages'][2]['tool_calls'] = 'abc'
    data['simulations'].insert(1, broken)
    path = _write(tmp_path, 'tau2.json', data)
    result = CliRunner().invoke(
        judge_cli.app,
        ['--dataset', str(path), '--evaluators', 'checks', '--out', str(tmp_path / 'out'), '--run-id', 'r'],
    )
    assert result.exit_code == 1, result.output  # a run failed to load: exit 1, after judging the others
    assert 'simulations[1].messages[2].tool_calls' in result.output
    assert len(load_reports(tmp_path / 'out' / 'r')) == 2
