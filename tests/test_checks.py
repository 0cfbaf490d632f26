"""Deterministic checks and reference checks on the sample dataset: each finds its documented failure
(datasets/README.md) and stays quiet on the clean records."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.checks import CHECKS
from sensei_eval.evaluators.registry import GROUPS, make_judges
from sensei_eval.judging import run as judging_run
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records

SAMPLE = Path(__file__).resolve().parents[1] / 'datasets' / 'sample.jsonl'

# query_id -> the checks that must fire on it (datasets/README.md); every other check must stay quiet
EXPECTED: dict[str, set[str]] = {
    'docs-006': {'version_check'},
    'docs-007': {'identifier_check'},
    'docs-009': {'greeting_check'},
    'docs-010': {'citation_check'},
    'docs-011': {'citation_check'},
    'docs-012': {'docs_tool_check'},
    'docs-013': {'repeated_call_check', 'error_recovery_check', 'citation_check'},
    'tarsy-002': {'repeated_call_check', 'error_recovery_check'},
}
CLEAN = ('docs-001', 'docs-002', 'docs-003', 'docs-004', 'docs-long-001', 'tarsy-001')


@pytest.fixture(scope='module')
def reports() -> dict[str, RecordReport]:
    records = load_dataset(SAMPLE).records
    done = asyncio.run(judge_records(records, JudgeRunOptions(make_judges(['checks'])), run_id='checks'))
    return {r.query_id: r for r in done}


def _fired(report: RecordReport) -> set[str]:
    return {name for name, r in report.judges.items() if r.status == 'ok' and r.issues and name != 'reference_check'}


@pytest.mark.parametrize('query_id', sorted(set(EXPECTED) | set(CLEAN)))
def test_checks_find_documented_failures_and_nothing_else(reports: dict[str, RecordReport], query_id: str) -> None:
    report = reports[query_id]
    assert all(r.status == 'ok' for r in report.judges.values())
    assert _fired(report) == EXPECTED.get(query_id, set())


def test_check_issues_land_in_the_mode_lists_marked_as_checks(reports: dict[str, RecordReport]) -> None:
    r = reports['docs-007']
    [issue] = r.issues_of('hallucination')
    assert issue.source == 'check' and 'retry_policy' in issue.hallucinated_claim
    assert r.failure_modes == ['hallucination']
    v = reports['docs-006'].issues_of('tool_parameters')[0]
    assert v.parameter == 'version' and '15' in v.suggested_value
    g = reports['docs-009'].issues_of('agent_format')
    assert {i.problem_type for i in g} == {'greeting', 'filler'}
    assert reports['docs-011'].issues_of('citation_quality')[0].citations_without_snippets == 2


def test_docs_agent_checks_run_only_under_their_profile(reports: dict[str, RecordReport]) -> None:
    # the sample's documentation-agent records name their profile; the TARSy records get the default one
    assert reports['docs-001'].profile == 'docs-agent' and reports['tarsy-001'].profile == 'default'
    skipped = reports['tarsy-001'].skipped
    assert {'version_check', 'docs_tool_check', 'greeting_check', 'citation_check'} <= set(skipped)
    assert not {'repeated_call_check', 'error_recovery_check', 'identifier_check'} & set(skipped)


def test_reference_check_passes_the_expected_calls(reports: dict[str, RecordReport]) -> None:
    for qid in ('docs-002', 'docs-003', 'docs-004'):
        result = reports[qid].judges['reference_check']
        assert result.status == 'ok' and result.passed is True and result.score == 1.0, result.reasoning
        assert all(e['matched'] for e in result.details['expected'])
        assert result.details['ToolCorrectness']['value'] is True  # pydantic-evals agrees on the tool names
    assert 'reference_check' in reports['docs-001'].skipped


def test_reference_check_fails_a_wrong_trajectory() -> None:
    record = load_dataset(SAMPLE).records[2]  # docs-003: expects docs, then scout_grep
    data = record.model_dump()
    data['expected_tool_calls'] = [
        {'tool_name': 'scout_grep'},
        # lookups are advisory by default (issue 31: a missing read alone does not fail a run): required here
        {'tool_name': 'tavily_search', 'required': True},
        {'tool_name': 'context7_get_docs', 'args': {'library_id': '/wrong/lib'}},
    ]
    [report] = asyncio.run(
        judge_records([QueryRecord.model_validate(data)], JudgeRunOptions(make_judges(['reference_check'])), run_id='r')
    )
    result = report.judges['reference_check']
    assert result.passed is False
    assert [e['matched'] for e in result.details['expected']] == [True, False, False]
    names = result.details['ToolCorrectness']
    assert names['value'] is False and "'tavily_search'" in names['reason']
    assert [i.missed_tools for i in report.issues_of('tool_selection')] == [['tavily_search']]
    [param] = report.issues_of('tool_parameters')
    assert param.tool_name == 'context7_get_docs' and 'library_id' in param.parameter and '/wrong/lib' in param.suggested_value


def test_failed_tool_calls_are_failed_spans() -> None:
    from sensei_eval.core.spans import span_tree

    record = next(r for r in load_dataset(SAMPLE).records if r.query_id == 'docs-013')
    statuses = [n.status for n in span_tree(record) if n.name.startswith('execute_tool')]
    assert statuses == ['error', 'error']


def test_checks_group_and_hashes() -> None:
    assert set(GROUPS['checks']) == {c.name for c in CHECKS} | {'reference_check'}
    assert len({c().criteria_hash() for c in CHECKS}) == len(CHECKS)


def test_cli_checks_need_no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_model(*a: object, **k: object) -> None:
        raise AssertionError('checks must not resolve a model')

    monkeypatch.setattr(judging_run, 'resolve_model', no_model)
    result = CliRunner().invoke(
        judge_cli.app, ['--dataset', str(SAMPLE), '--evaluators', 'checks', '--out', str(tmp_path), '--run-id', 'c']
    )
    assert result.exit_code == 0, result.output
    assert len(list((tmp_path / 'c' / 'records').glob('*.json'))) == 17 and (tmp_path / 'c' / 'summary.json').is_file()
