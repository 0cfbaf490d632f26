"""The verdict model (`core.verdicts`): statuses, the severity rule, coverage, "not judged", smoke.

The bug behind the gate-flip test: `mode_verdicts` took a judge's own `passed` when it reported one
failure mode, but "no issue at all" when it reported two, so the same behaviour change (8 queries lose an
advisory account lookup) failed the gate with one reference and passed with the same reference minus
one expected call's arguments.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, build_report
from sensei_eval.core.verdicts import coverage_of, is_smoke, judge_status, mode_verdicts, record_verdict
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from sensei_eval.validate import Resampling, compare_reports

from .helpers import openai_record

_BASE = openai_record('base')
# one finding that validates as the issue model of every mode used here (issue models ignore extra keys)
_FINDING = {
    'reasoning': 'wrong.', 'hallucinated_claim': 'x', 'what_tools_actually_said': 'y', 'severity': 'major',
    'missed_aspects': ['a'], 'missed_tools': ['t'], 'unnecessary_tools': [],
}  # fmt: skip


def result(
    judge: str,
    passed: bool | None,
    *,
    status: str = 'ok',
    model: str | None = 'test',
    issues: list[dict[str, Any]] | None = None,
    score: float | None = None,
) -> JudgeResult:
    found = issues if issues is not None else ([] if passed or passed is None else [dict(_FINDING)])
    return JudgeResult(
        judge=judge, failure_mode=judge, category=None, criteria_hash='h', model=model, status=status,  # type: ignore[arg-type]
        issues=found, score=score if score is not None else (None if status != 'ok' else 1.0 - 0.5 * len(found)),
        passed=None if status != 'ok' else passed, error=None if status == 'ok' else 'why',
    )  # fmt: skip


def run(query_id: str, *results: JudgeResult) -> RecordReport:
    return build_report(_BASE.model_copy(update={'query_id': query_id}), list(results), run_id='t')


# ---------------------------------------------------------------------------------------------------
# Statuses, coverage and the overall score


def test_a_run_no_judge_judged_has_no_score_and_says_not_judged() -> None:
    report = run('q', result('completeness', None, status='inconclusive'), result('hallucination', None, status='error'))
    assert report.overall_score is None
    assert report.coverage is not None and report.coverage.label == 'not judged'
    assert (report.coverage.applied, report.coverage.judged, report.coverage.errors) == (2, 0, 1)
    assert [v.status for v in mode_verdicts(report).values()] == ['inconclusive', 'error']


def test_a_partly_judged_run_scores_what_was_judged_and_says_checks_only() -> None:
    checks = [result(f'check_{i}', True, model=None) for i in range(8)]
    llm = [result(m, None, status='inconclusive') for m in ('hallucination', 'completeness', 'tool_selection')]
    report = run('q', *checks, *llm)
    assert report.coverage is not None and report.coverage.label == 'checks only, 8 of 11 judges'
    assert not report.coverage.complete and report.overall_score == 1.0
    scored = run('q2', result('tool_selection', True, model=None), result('hallucination', None, status='inconclusive'))
    assert scored.overall_score == 1.0 and scored.coverage is not None
    assert scored.coverage.label == 'checks only, 1 of 2 judges'
    full = run('q3', result('tool_selection', True, model=None), result('hallucination', False))
    assert full.coverage is not None and full.coverage.label == 'all 2 judges' and full.coverage.complete
    # failed by the LLM judge only: the model-failed band, [0.25, 0.5) (`core.verdicts`, overall score)
    assert full.overall_score is not None and abs(full.overall_score - (0.25 + 0.25 * (1 - 0.8 * 0.5))) < 1e-9


def test_embedded_model_answers_are_smoke_never_a_verdict_or_a_score() -> None:
    smoke = result('hallucination', False, model='embedded:SmolLM2-135M-Instruct')
    assert is_smoke(smoke) and judge_status(smoke) == 'smoke'
    report = run('q', smoke, result('tool_selection', False, model=None))
    verdicts = mode_verdicts(report)
    assert verdicts['hallucination', 'hallucination'].status == 'smoke'
    assert verdicts['hallucination', 'hallucination'].score is None
    assert report.failure_modes == ['tool_selection'] and 'hallucination' not in report.issues
    assert report.overall_score == 0.25 * 0.5  # the check's finding only: the check-failed band
    assert report.coverage is not None and report.coverage.smoke == 1
    assert report.coverage.label == 'checks only, 1 of 2 judges'
    only_smoke = run('q2', smoke)
    assert only_smoke.overall_score is None and only_smoke.coverage is not None
    assert only_smoke.coverage.label == 'not judged'


def test_reports_written_before_coverage_get_it_on_load() -> None:
    report = run('q', result('tool_selection', True, model=None), result('hallucination', None, status='inconclusive'))
    data = json.loads(report.model_dump_json())
    del data['coverage']
    loaded = RecordReport.model_validate(data)
    assert loaded.coverage == report.coverage and loaded.overall_score == report.overall_score
    # an old report that counted the embedded model's answer in its score: the score is taken back
    old = json.loads(run('q', result('hallucination', False, model='embedded:SmolLM2-135M-Instruct')).model_dump_json())
    del old['coverage']
    old['overall_score'] = 0.57
    assert RecordReport.model_validate(old).overall_score is None


def test_run_summary_counts_coverage_and_smoke() -> None:
    from datetime import UTC, datetime

    from sensei_eval.core.reports import RunFacts, RunSummary

    class J:
        def __init__(self, name: str) -> None:
            self.name = name

        def criteria_hash(self) -> str:
            return 'h'

    reports = [
        run('a', result('tool_selection', True, model=None), result('hallucination', None, status='inconclusive')),
        run(
            'b', result('tool_selection', None, status='error', model=None), result('hallucination', None, status='inconclusive')
        ),
    ]
    summary = RunSummary.build('r', reports, [J('tool_selection'), J('hallucination')], RunFacts(datetime.now(UTC)))
    assert summary.records_scored == 1 and summary.records_partly_judged == 1
    assert summary.coverage is not None and summary.coverage.label == 'checks only, 1 of 2 judges'
    assert summary.per_judge['hallucination'].ok == 0 and summary.per_judge['hallucination'].inconclusive == 2


# ---------------------------------------------------------------------------------------------------
# The severity rule, the same on every path


def test_a_minor_finding_passes_its_mode_on_every_path() -> None:
    minor = {**_FINDING, 'severity': 'minor'}
    single = result('hallucination', True, issues=[minor], score=0.75)
    multi = JudgeResult(
        judge='reference_check', failure_mode='tool_selection', category='tool_usage', criteria_hash='h', model=None,
        status='ok', issues=[{**minor, 'failure_mode': 'tool_selection'}], score=0.9,
        mode_scores={'tool_selection': 0.9, 'tool_parameters': 1.0}, passed=True,
    )  # fmt: skip
    report = run('q', single, multi)
    verdicts = mode_verdicts(report)
    assert verdicts['hallucination', 'hallucination'].status == 'pass'
    assert verdicts['reference_check', 'tool_selection'].status == 'pass'
    assert verdicts['reference_check', 'tool_selection'].score == 0.9
    assert report.failure_modes == [] and report.overall_score is not None and report.overall_score < 1
    major = result('hallucination', False, issues=[dict(_FINDING)])
    assert judge_status(major) == 'fail'
    # a judge that fails without a finding fails its own mode
    assert judge_status(result('completeness', False, issues=[])) == 'fail'


def _calls_record(query_id: str, lookup: bool, expected: list[dict[str, Any]]) -> QueryRecord:
    calls: list[tuple[str, dict[str, Any]]] = [('get_account', {'id': query_id})] if lookup else []
    calls.append(('create_invoice', {'account': query_id, 'currency': 'EUR'}))
    messages: list[dict[str, Any]] = [{'role': 'system', 'content': 'Bill.'}, {'role': 'user', 'content': f'bill {query_id}'}]
    for i, (name, args) in enumerate(calls):
        messages.append(
            {'role': 'assistant', 'content': None,
             'tool_calls': [{'id': f'c{i}', 'type': 'function', 'function': {'name': name, 'arguments': json.dumps(args)}}]}
        )  # fmt: skip
        messages.append({'role': 'tool', 'tool_call_id': f'c{i}', 'content': '{"ok": true}'})
    messages.append({'role': 'assistant', 'content': 'Invoice created.'})
    return QueryRecord.model_validate({'query_id': query_id, 'messages': messages, 'expected_tool_calls': expected})


def _gate(with_args: bool) -> tuple[int, list[str], list[str]]:
    from sensei_eval.evaluators.reference import ReferenceCheck

    def expected(q: str) -> list[dict[str, Any]]:
        invoice_args = {'account': q, 'currency': 'EUR'} if with_args else None
        return [{'tool_name': 'get_account', 'args': None}, {'tool_name': 'create_invoice', 'args': invoice_args}]

    ids = [f'q{i:02d}' for i in range(20)]
    old_records = [_calls_record(q, True, expected(q)) for q in ids]
    new_records = [_calls_record(q, i >= 8, expected(q)) for i, q in enumerate(ids)]  # 8 lose the lookup
    options = JudgeRunOptions([ReferenceCheck()])
    old = asyncio.run(judge_records(old_records, options, run_id='old'))
    new = asyncio.run(judge_records(new_records, options, run_id='new'))
    c = compare_reports(old, new, resampling=Resampling(seed=0))
    statuses = [mode_verdicts(r)['reference_check', 'tool_selection'].status for r in new]
    return c.gate.exit_code, c.gate.regressed, statuses


def test_the_gate_does_not_depend_on_whether_an_expected_call_has_arguments() -> None:
    """Same behaviour change, same reference except one expected call's arguments: same decision."""
    with_args, without_args = _gate(with_args=True), _gate(with_args=False)
    # the lookup is read-only (advisory): its miss is a minor finding, a pass with a lower score, both ways
    assert with_args[2] == without_args[2] == ['pass'] * 20
    # ... and the gate decides on what moved: 8 of 20 queries lost score on tool_selection, 0 verdicts flipped,
    # a regression either way (issue 39, item 5)
    assert with_args[0] == without_args[0] == 1
    assert [m for m in with_args[1] if m.startswith('tool_selection')] == ['tool_selection/reference_check']
    assert [m for m in without_args[1] if m.startswith('tool_selection')] == ['tool_selection/reference_check']


def test_record_verdict_equals_what_the_report_stores() -> None:
    report = run('q', result('tool_selection', False, model=None), result('hallucination', True))
    verdict = record_verdict(report)
    assert verdict.overall_score == report.overall_score and verdict.coverage == report.coverage
    assert verdict.failure_modes == report.failure_modes == ['tool_selection']
    assert coverage_of(report.judges.values()) == report.coverage


def test_view_shows_coverage_beside_the_score_and_not_judged(tmp_path: Any) -> None:
    from sensei_eval.judging.run_folder import RunFolder
    from sensei_eval.judging.view import write_view

    folder = RunFolder(tmp_path / 'run')
    reports = [
        run('partly', result('tool_selection', True, model=None), result('hallucination', None, status='inconclusive')),
        run('nothing', result('hallucination', None, status='inconclusive')),
        run('smoke', result('hallucination', False, model='embedded:SmolLM2-135M-Instruct')),
    ]
    for report in reports:
        folder.write_report(report)
    page = write_view([folder.path]).read_text()
    assert '1.00 (checks only, 1 of 2 judges)' in page
    assert page.count('not judged') >= 4  # two records, each in the list and in its card
    assert 'smoke' in page and 'chip smoke' in page


def test_judge_status_is_the_aggregate_of_the_mode_verdicts() -> None:
    from sensei_eval.core.verdicts import result_verdicts

    minor = {**_FINDING, 'severity': 'minor'}
    cases = [
        result('hallucination', True),
        result('hallucination', False),
        result('hallucination', True, issues=[minor]),
        result('completeness', False, issues=[]),
        result('hallucination', None, status='inconclusive'),
        result('hallucination', None, status='error'),
        result('hallucination', False, model='embedded:SmolLM2-135M-Instruct'),
        result('hallucination', None, status='not_applicable', model=None),
        JudgeResult(
            judge='reference_check', failure_mode='tool_selection', category='tool_usage', criteria_hash='h', model=None,
            status='ok', issues=[{**minor, 'failure_mode': 'tool_selection'}, {**_FINDING, 'failure_mode': 'tool_parameters'}],
            score=0.5, mode_scores={'tool_selection': 0.9, 'tool_parameters': 0.5}, passed=False,
        ),
    ]  # fmt: skip
    for r in cases:
        statuses = {v.status for v in result_verdicts(r)}
        aggregate = 'fail' if 'fail' in statuses else 'pass' if statuses == {'pass'} else statuses.pop()
        assert judge_status(r) == aggregate, r


def test_smoke_answers_are_counted_apart_from_inconclusive_verdicts_in_the_summary() -> None:
    from datetime import UTC, datetime

    from sensei_eval.core.reports import RunFacts, RunSummary

    class J:
        name = 'hallucination'

        def criteria_hash(self) -> str:
            return 'h'

    smoke = result('hallucination', None, status='inconclusive', model='embedded:SmolLM2-135M-Instruct')
    reports = [run('a', smoke), run('b', result('hallucination', True))]
    summary = RunSummary.build('r', reports, [J()], RunFacts(datetime.now(UTC)))
    judge = summary.per_judge['hallucination']
    assert (judge.ok, judge.smoke, judge.inconclusive) == (1, 1, 0)
    assert summary.inconclusive == [] and summary.records_scored == 1
