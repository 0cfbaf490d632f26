"""Verdicts keyed by the failure mode of each finding (`reports.mode_verdicts`), everywhere they are read.

The bug this guards against: a judge result's `failure_mode` is the judge's class constant, so the
reference check's `tool_parameters` findings were counted as `tool_selection` by the optimizer and the
validator, and a change that broke the account lookup on 8 queries while fixing the currency on 6 passed
the gate ("tool_selection 8 flips / 6 fixes").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from typer.testing import CliRunner

from sensei_eval.cli import validate as validate_cli
from sensei_eval.core.reports import JudgeResult, RecordReport, build_report, mode_verdicts
from sensei_eval.optimize.evaluate import summarise
from sensei_eval.optimize.loop import route_failures
from sensei_eval.optimize.routing import resolve_routing
from sensei_eval.validate import Resampling, compare_reports, to_markdown
from sensei_eval.validate.compare import JudgeSetError
from sensei_eval.validate.render import print_comparison

from .helpers import openai_record
from .test_validate import result
from .test_validate_cli import _write_run

_BASE = openai_record('base')


def reference(lookup_ok: bool, currency_ok: bool) -> JudgeResult:
    """What the reference check reports: one result, findings of two modes, each tagged with its mode."""
    issues: list[dict[str, Any]] = []
    if not lookup_ok:
        why = 'lookup_account was expected but never called.'
        issues.append(
            {'missed_tools': ['lookup_account'], 'unnecessary_tools': [], 'reasoning': why, 'failure_mode': 'tool_selection'}
        )
    if not currency_ok:
        issues.append(
            {'tool_name': 'create_invoice', 'parameter': 'currency', 'actual_value': '(absent)', 'suggested_value': 'EUR',
             'reasoning': 'create_invoice was called without the currency.', 'failure_mode': 'tool_parameters'}
        )  # fmt: skip
    modes = {'tool_selection': 1.0 if lookup_ok else 0.5, 'tool_parameters': 1.0 if currency_ok else 0.5}
    return JudgeResult(
        judge='reference_check', failure_mode='tool_selection', category='tool_usage', criteria_hash='h-ref',
        model=None, status='ok', issues=issues, score=min(modes.values()), mode_scores=modes, passed=not issues,
    )  # fmt: skip


def run(query_id: str, *results: JudgeResult) -> RecordReport:
    return build_report(_BASE.model_copy(update={'query_id': query_id, 'query': f'bill {query_id}'}), list(results), run_id='t')


def test_one_judge_reporting_two_modes_gives_a_verdict_per_mode() -> None:
    verdicts = mode_verdicts(run('q0', reference(lookup_ok=True, currency_ok=False)))
    assert set(verdicts) == {('reference_check', 'tool_selection'), ('reference_check', 'tool_parameters')}
    selection, parameters = verdicts['reference_check', 'tool_selection'], verdicts['reference_check', 'tool_parameters']
    assert (selection.passed, selection.score, selection.issues) == (True, 1.0, [])
    assert (parameters.passed, parameters.score) == (False, 0.5)
    assert [i['parameter'] for i in parameters.issues] == ['currency']
    # a single-mode judge keeps its own verdict; an errored one is an error under its mode, with no score
    plain = mode_verdicts(run('q1', result('completeness', False), result('hallucination', None, error=True)))
    assert plain['completeness', 'completeness'].passed is False and plain['completeness', 'completeness'].score == 0.5
    assert plain['hallucination', 'hallucination'].status == 'error' and plain['hallucination', 'hallucination'].score is None


def test_the_optimizer_counts_and_routes_each_finding_under_its_own_mode() -> None:
    reports = [run(f'q{i}', reference(lookup_ok=i % 3 != 0, currency_ok=i % 2 != 0)) for i in range(6)]
    evaluation = summarise('prompt', [], reports, [])
    # q0, q3 miss the lookup; q0, q2, q4 the currency
    assert evaluation.failures_by_mode == {'tool_selection': 2, 'tool_parameters': 3}
    labels = sorted(e.label for e in evaluation.failure_examples)
    assert labels == ['create_invoice currency absent'] * 3 + ['lookup_account missing'] * 2
    assert evaluation.failing_modes['q0'] == ['tool_selection', 'tool_parameters'] and evaluation.failing_modes['q1'] == []
    assert [s.query_id for s in evaluation.success_examples] == ['q1', 'q5']
    components = {'tools': 'Use the tools.', 'arguments': 'Pass the arguments.'}
    routing = resolve_routing(list(components), user_map={'tool_selection': ['tools'], 'tool_parameters': ['arguments']})
    routed, unrouted = route_failures(evaluation, routing, components)
    assert not unrouted
    assert sorted(e.query_id for e in routed['arguments']) == ['q0', 'q2', 'q4']
    assert sorted(e.query_id for e in routed['tools']) == ['q0', 'q3']


def _mixed() -> tuple[list[RecordReport], list[RecordReport]]:
    """20 queries: the change breaks the lookup on 8 (q00-q07) and fixes the currency on 6 (q10-q15)."""
    old = [run(f'q{i:02d}', reference(lookup_ok=True, currency_ok=not 10 <= i < 16)) for i in range(20)]
    new = [run(f'q{i:02d}', reference(lookup_ok=i >= 8, currency_ok=True)) for i in range(20)]
    return old, new


def test_breaking_selection_on_8_while_fixing_parameters_on_6_fails_the_gate() -> None:
    old, new = _mixed()
    c = compare_reports(old, new, resampling=Resampling(seed=0))
    selection = c.metric('tool_selection/reference_check')
    parameters = c.metric('tool_parameters/reference_check')
    assert (selection.flips, selection.fixes, selection.verdict) == (8, 0, 'regressed')
    assert (parameters.flips, parameters.fixes) == (0, 6)
    assert parameters.old_pass_rate == 0.7 and parameters.new_pass_rate == 1.0
    assert c.gate.exit_code == 1 and 'tool_selection/reference_check' in c.gate.regressed
    console = Console(record=True, width=200)
    print_comparison(c, console)
    table = console.export_text()
    assert 'tool_selection/reference_check' in table and 'tool_parameters/reference_check' in table
    markdown = to_markdown(c)
    assert '`tool_selection/reference_check`' in markdown and '`tool_parameters/reference_check`' in markdown


def test_an_llm_judge_and_a_check_of_one_mode_are_not_pooled() -> None:
    """Old: checks only; new: checks + the LLM judge. Refused by default; with common judges, no regression."""
    old = [run(f'q{i}', reference(True, True)) for i in range(8)]
    new = [run(f'q{i}', reference(True, True), result('tool_selection', i >= 7)) for i in range(8)]
    try:
        compare_reports(old, new)
    except JudgeSetError as e:
        assert 'new only: tool_selection' in str(e) and '--common-judges' in str(e)
    else:
        raise AssertionError('different judge sets were compared')
    c = compare_reports(old, new, common_judges=True)
    assert c.gate.exit_code == 0 and [m.metric for m in c.metrics if m.kind != 'overall'] == [
        'tool_selection/reference_check',
        'tool_parameters/reference_check',
    ]
    assert any('--common-judges' in w for w in c.warnings)


def _write(path: Path, reports: list[RecordReport]) -> Path:
    _write_run(path, reports)
    return path


def test_cli_refuses_different_judges_in_one_line_unless_common_judges(tmp_path: Path) -> None:
    old = _write(tmp_path / 'old', [run(f'q{i}', reference(True, True)) for i in range(4)])
    new = _write(tmp_path / 'new', [run(f'q{i}', reference(True, True), result('completeness', True)) for i in range(4)])
    runner = CliRunner()
    args = ['--old-reports', str(old), '--new-reports', str(new), '--out', str(tmp_path / 'v')]
    refused = runner.invoke(validate_cli.app, args)
    assert refused.exit_code == 2
    lines = [line for line in refused.output.splitlines() if line.strip()]
    assert len(lines) == 1 and 'different judges' in lines[0] and 'completeness' in lines[0]
    ok = runner.invoke(validate_cli.app, [*args, '--common-judges'])
    assert ok.exit_code == 0, ok.output
    data = json.loads((tmp_path / 'v' / 'comparison.json').read_text())
    assert {m['metric'] for m in data['metrics']} == {
        'tool_selection/reference_check',
        'tool_parameters/reference_check',
        'overall',
    }
