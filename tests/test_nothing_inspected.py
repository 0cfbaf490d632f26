"""Nothing inspected never passes (issue 39, item 1): a check with nothing to read is `not_applicable`
with its reason, a run where nothing applied is "not judged", and a smoke answer is never `passed: true`
in the report JSON.

Found on real logs: 58 Magentic-One and 184 Who&When runs contain no tool call, and every one of them
read `overall 1.00 · all 3 judges`; a tool reading the raw report JSON counted the embedded model's
answers as passes.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic_evals.evaluators import EvaluatorContext
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, RunFacts, RunSummary, build_report
from sensei_eval.core.spans import span_tree
from sensei_eval.core.verdicts import judge_status, record_verdict
from sensei_eval.evaluators.checks import ErrorRecoveryCheck, IdentifierCheck
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import BUILTIN_PROFILES
from sensei_eval.judging.run_folder import load_reports
from sensei_eval.validate import compare_reports

from .helpers import openai_record

# A Magentic-One style log (the shape of Who&When's algorithm-generated runs): agents talk, no tool call.
_NO_TOOLS = {
    'query_id': 'ww-1',
    'messages': [
        {'role': 'user', 'content': 'How many studio albums did Mercedes Sosa publish between 2000 and 2009?'},
        {'role': 'assistant', 'name': 'Orchestrator', 'content': 'WebSurfer, please look up her discography.'},
        {'role': 'assistant', 'name': 'WebSurfer', 'content': 'Her discography lists `Cantora 1` (2009).'},
        {'role': 'assistant', 'name': 'Orchestrator', 'content': 'FINAL ANSWER: 3'},
    ],
}


def _no_tools(query_id: str = 'ww-1') -> QueryRecord:
    return QueryRecord.model_validate({**_NO_TOOLS, 'query_id': query_id})


def _judge(records: list[QueryRecord], profile: str = 'default') -> list[RecordReport]:
    from sensei_eval.judging.runner import judge_records

    options = JudgeRunOptions(make_judges(['checks']), profile=BUILTIN_PROFILES[profile])
    return asyncio.run(judge_records(records, options, run_id='t'))


def test_a_run_without_tool_calls_judged_by_the_checks_is_not_judged() -> None:
    (report,) = _judge([_no_tools()])
    statuses = {name: (r.status, r.error) for name, r in report.judges.items()}
    assert statuses == {
        'error_recovery_check': ('not_applicable', 'no tool calls in this run'),
        'repeated_call_check': ('not_applicable', 'no tool calls in this run'),
        'identifier_check': ('not_applicable', 'no tool calls in this run: no tool result to check the answer against'),
    }
    assert all(r.passed is None and r.score is None for r in report.judges.values())
    assert report.overall_score is None
    assert report.coverage is not None
    assert (report.coverage.label, report.coverage.applied, report.coverage.not_applicable) == ('not judged', 0, 3)
    assert {judge_status(r) for r in report.judges.values()} == {'not_applicable'}
    # the verdicts carry the reason, and the report JSON says no pass anywhere
    verdicts = record_verdict(report).verdicts
    assert [v.error for v in verdicts if v.judge == 'error_recovery_check'] == ['no tool calls in this run']
    data = json.loads(report.model_dump_json())
    assert data['overall_score'] is None and all(j['passed'] is None for j in data['judges'].values())


def test_a_run_with_tool_calls_is_still_judged_and_not_applicable_is_not_skipped() -> None:
    """Tool calls that all succeeded were inspected: `error_recovery_check` passes them. And a check the
    profile does not run stays `skipped` (it never ran), apart from a check that ran and found nothing."""
    (report,) = _judge([openai_record('with-tools')])
    assert report.judges['error_recovery_check'].status == 'ok' and report.judges['error_recovery_check'].passed is True
    assert report.overall_score == 1.0 and report.coverage is not None and report.coverage.label == 'all 3 judges'
    assert 'greeting_check' in report.skipped and 'greeting_check' not in report.judges
    # under the docs-agent profile a check reading the final answer applies; without an answer it does not
    call = {'id': 'c1', 'type': 'function', 'function': {'name': 'lookup', 'arguments': '{}'}}
    no_answer = QueryRecord.model_validate(
        {
            'query_id': 'q',
            'messages': [
                {'role': 'user', 'content': 'Hello?'},
                {'role': 'assistant', 'content': None, 'tool_calls': [call]},
                {'role': 'tool', 'tool_call_id': 'c1', 'content': 'ok'},
            ],
        }
    )
    (docs,) = _judge([no_answer], profile='docs-agent')
    assert docs.judges['greeting_check'].status == 'not_applicable'
    assert docs.judges['greeting_check'].error == 'no final answer in this run'
    assert docs.judges['docs_tool_check'].status == 'ok'  # it read the query: no library named, a pass


def test_a_partly_applicable_run_scores_what_applied() -> None:
    """Identifier check judges the answer; the tool-call checks had nothing to inspect in another run."""
    check = IdentifierCheck()
    record = openai_record('ids', answer='Use `Depends()` and `Annotated`.')
    result = asyncio.run(check.judge(record, _transcript(record), None))
    assert result.status == 'ok' and result.passed is False  # `Annotated` is in no tool result
    na = asyncio.run(ErrorRecoveryCheck().judge(_no_tools(), _transcript(_no_tools()), None))
    report = build_report(record, [result, na], run_id='t')
    assert report.coverage is not None and report.coverage.applied == 1 and report.coverage.not_applicable == 1
    # the check that applied failed its mode (score 0.5): the band of runs a check failed, 0.25 * 0.5
    assert report.coverage.label == '1 of 1 judge' and report.overall_score == 0.125


def _transcript(record: QueryRecord) -> Any:
    from sensei_eval.core.transcript import render_transcript

    return render_transcript(record)


def test_the_run_summary_counts_not_applicable_apart() -> None:
    class J:
        def __init__(self, name: str) -> None:
            self.name = name

        def criteria_hash(self) -> str:
            return 'h'

    reports = _judge([_no_tools('a'), openai_record('b')])
    names = ['error_recovery_check', 'repeated_call_check', 'identifier_check']
    summary = RunSummary.build('r', reports, [J(n) for n in names], RunFacts(datetime.now(UTC)))
    recovery = summary.per_judge['error_recovery_check']
    assert (recovery.ok, recovery.not_applicable, recovery.inconclusive, recovery.errors) == (1, 1, 0, 0)
    assert summary.records_scored == 1 and summary.inconclusive == [] and summary.judge_errors == []
    assert summary.coverage is not None and summary.coverage.label == 'all 3 judges'
    only_na = RunSummary.build('r', reports[:1], [J(n) for n in names], RunFacts(datetime.now(UTC)))
    assert only_na.mean_overall_score is None and only_na.coverage is not None
    assert (only_na.coverage.label, only_na.coverage.not_applicable) == ('not judged', 3)


def test_the_cli_says_not_judged_for_runs_without_tool_calls(tmp_path: Path) -> None:
    data = tmp_path / 'logs.jsonl'
    data.write_text('\n'.join(json.dumps({**_NO_TOOLS, 'query_id': f'ww-{i}'}) for i in range(3)) + '\n')
    result = CliRunner().invoke(
        judge_cli.app, ['--dataset', str(data), '--evaluators', 'checks', '--out', str(tmp_path), '--run-id', 'r']
    )
    assert result.exit_code == 0, result.output
    assert 'overall: not judged' in result.output, result.output
    assert 'overall 1.00' not in result.output and 'all 3 judges' not in result.output
    reports = load_reports(tmp_path / 'r')
    assert [r.overall_score for r in reports] == [None, None, None]
    summary = json.loads((tmp_path / 'r' / 'summary.json').read_text())
    assert summary['mean_overall_score'] is None and summary['per_judge']['repeated_call_check']['not_applicable'] == 3


def test_validate_counts_not_applicable_as_no_value_and_no_error() -> None:
    """An A/A comparison of runs without tool calls: no judge error, nothing to compare, never a pass."""
    old = _judge([_no_tools('a'), openai_record('b')])
    new = _judge([_no_tools('a'), openai_record('b')])
    comparison = compare_reports(old, new)
    assert comparison.old.judge_errors == 0 and comparison.new.judge_errors == 0
    recovery = comparison.metric('tool_parameters/error_recovery_check')
    assert recovery.n_pairs == 1 and recovery.errors_old == 0  # only the run with tool calls is a pair
    overall = comparison.metric('overall')
    assert overall.n_pairs == 1 and overall.errors_old == 0
    assert comparison.gate.passed, comparison.gate.reasons


def test_a_check_used_as_a_pydantic_evals_evaluator_gives_no_result_when_not_applicable() -> None:
    record = _no_tools()
    ctx = EvaluatorContext[Any, Any, Any](
        name=record.query_id, inputs=record, metadata=None, expected_output=None, output=None, duration=0.0,
        _span_tree=span_tree(record), attributes={}, metrics={},
    )  # fmt: skip
    assert asyncio.run(ErrorRecoveryCheck().evaluate(ctx)) == {}


# ---------------------------------------------------------------------------------------------------
# Smoke answers: `passed: null` in the report JSON


def _smoke(passed: bool | None = True, score: float | None = 1.0) -> JudgeResult:
    return JudgeResult(
        judge='hallucination', failure_mode='hallucination', category=None, criteria_hash='h',
        model='embedded:SmolLM2-135M-Instruct', status='ok', passed=passed, score=score, reasoning='looks fine',
    )  # fmt: skip


def test_a_smoke_answer_is_stored_with_passed_null() -> None:
    smoke = _smoke()
    assert smoke.passed is None and smoke.details['smoke_answer'] == {'passed': True}
    assert smoke.score == 1.0  # the model's own number stays, and counts in no score (next lines)
    report = build_report(openai_record('s'), [smoke], run_id='t')
    data = json.loads(report.model_dump_json())
    assert data['judges']['hallucination']['passed'] is None
    assert data['overall_score'] is None and data['coverage']['label'] == 'not judged'
    assert not any(j['passed'] for j in data['judges'].values())


def test_a_report_written_with_a_smoke_pass_reads_back_as_no_pass() -> None:
    """Reports written before this rule said `passed: true, score: 1.0` for a smoke answer."""
    report = build_report(openai_record('s'), [_smoke()], run_id='t')
    data = json.loads(report.model_dump_json())
    data['judges']['hallucination'].update(passed=True, score=1.0, details={})
    loaded = RecordReport.model_validate(data)
    assert loaded.judges['hallucination'].passed is None
    assert loaded.judges['hallucination'].details['smoke_answer']['passed'] is True
    assert judge_status(loaded.judges['hallucination']) == 'smoke'


def test_no_report_a_judge_run_writes_says_passed_true_for_a_smoke_answer(tmp_path: Path) -> None:
    """The whole path: a scripted model that answers "nothing wrong" under the embedded model's name,
    judged by the runner and written to the run folder; every report's JSON has `passed: null` for it."""
    from pydantic_ai.models.function import FunctionModel

    from sensei_eval.judging.runner import judge_records
    from sensei_eval.models.judge_model import JudgeModel

    from .helpers import ScriptedJudge, no_issues

    scripted = ScriptedJudge(no_issues)
    model = JudgeModel(FunctionModel(scripted, model_name='smollm2'), 'embedded:SmolLM2-135M-Instruct', 60_000)
    options = JudgeRunOptions(make_judges(['hallucination']), model)
    records = [openai_record('s1'), openai_record('s2', answer='Other.')]
    reports = asyncio.run(judge_records(records, options, run_id='run', run_dir=tmp_path / 'run'))
    assert scripted.calls, 'the scripted model was asked'
    written = list((tmp_path / 'run' / 'records').glob('*.json'))
    assert len(written) == 2 and len(reports) == 2
    for path in written:
        data = json.loads(path.read_text())
        judge = data['judges']['hallucination']
        assert judge['model'].startswith('embedded:') and judge['passed'] is None, path
        assert data['overall_score'] is None and data['coverage']['label'] == 'not judged'
