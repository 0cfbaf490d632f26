"""Calibration numbers against values worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sensei_eval import calibrate as cal
from sensei_eval.reports import JudgeResult, build_report, report_filename, write_json_atomic

from .helpers import openai_record


def _result(passed: bool | None, status: str = 'ok') -> JudgeResult:
    issues = (
        []
        if passed or passed is None
        else [{'steps': [5], 'hallucinated_claim': 'x', 'what_tools_actually_said': 'y', 'severity': 'major'}]
    )
    return JudgeResult(
        judge='hallucination', failure_mode='hallucination', category='output', criteria_hash='h', model='m',
        status=status,  # type: ignore[arg-type]
        issues=issues, passed=passed if status == 'ok' else None,
        score=(1.0 if passed else 0.5) if status == 'ok' else None, error=None if status == 'ok' else 'boom',
    )  # fmt: skip


def _write_run(tmp_path: Path) -> Path:
    run = tmp_path / 'run'
    predictions = {'r1': True, 'r2': True, 'r3': False, 'r4': False, 'r5': True, 'r6': False}
    for qid, passed in predictions.items():
        report = build_report(openai_record(qid), [_result(passed)], run_id='run', transcript_sha256='sha-' + qid)
        write_json_atomic(run / report_filename(qid), report.model_dump_json())
    errored = build_report(openai_record('r7'), [_result(None, status='error')], run_id='run', transcript_sha256='sha-r7')
    write_json_atomic(run / report_filename('r7'), errored.model_dump_json())
    # repeats: r1 flips on its second judging, r2 does not
    for qid, passed in (('r1', False), ('r2', True)):
        report = build_report(openai_record(qid), [_result(passed)], run_id='run', repeat=2, transcript_sha256='sha-' + qid)
        write_json_atomic(run / report_filename(qid, 2), report.model_dump_json())
    return run


def _write_labels(tmp_path: Path) -> Path:
    rows = [
        *[{'query_id': q, 'failure_mode': 'hallucination', 'label': v} for q, v in
          [('r1', 'pass'), ('r2', 'fail'), ('r3', 'fail'), ('r4', 'pass'), ('r5', True), ('r6', 'FAIL'), ('r7', 'pass')]],
        *[{'query_id': q, 'failure_mode': 'overall', 'label': v} for q, v in
          [('r1', 5), ('r2', 2), ('r3', 1), ('r4', 3), ('r5', 4), ('r6', 2)]],
        {'query_id': 'r1', 'failure_mode': 'made_up_mode', 'label': 'pass'},
        {'query_id': 'ghost', 'failure_mode': 'hallucination', 'label': 'pass'},
    ]  # fmt: skip
    path = tmp_path / 'labels.jsonl'
    path.write_text('\n'.join(json.dumps(r) for r in rows) + '\n{"query_id": "r1"}\n')
    return path


def test_calibration_matches_hand_computed_values(tmp_path: Path) -> None:
    result = cal.calibrate(_write_run(tmp_path), _write_labels(tmp_path))
    [h] = result.judges
    # label pass: r1 (judge pass), r4 (fail), r5 (pass); label fail: r2 (pass), r3 (fail), r6 (fail)
    assert h.confusion_matrix == [[2, 1], [1, 2]]
    assert h.n == 6 and h.errors == 1  # r7's judge errored: left out, counted
    assert h.accuracy == pytest.approx(4 / 6)
    # κ = (po - pe) / (1 - pe), po = 4/6, pe = 3/6·3/6 + 3/6·3/6 = 1/2  →  1/3
    assert h.cohen_kappa == pytest.approx(1 / 3)
    # Spearman: score ranks [5,5,2,2,5,2] vs rating ranks [6,2.5,1,4,5,2.5]: 9 / sqrt(13.5·17)
    assert result.spearman_overall_vs_labels['n'] == 6
    assert result.spearman_overall_vs_labels['rho'] == pytest.approx(9 / math.sqrt(13.5 * 17))
    # noise: r1 disagrees with itself, r2 does not → 1 of 2 pairs
    [noise] = result.noise
    assert (noise.records, noise.pairs, noise.disagreement_rate) == (2, 2, 0.5)
    assert any('made_up_mode' in p for p in result.problems)
    assert any("'ghost'" in p for p in result.problems)
    assert any(':16: field `failure_mode`' in p for p in result.problems)


def test_cli_writes_json_and_exits_1_on_label_problems(tmp_path: Path) -> None:
    run = _write_run(tmp_path)
    outcome = CliRunner().invoke(cal.app, ['--reports', str(run), '--labels', str(_write_labels(tmp_path))])
    assert outcome.exit_code == 1, outcome.output
    data = json.loads((run / 'calibration.json').read_text())
    assert data['judges'][0]['cohen_kappa'] == pytest.approx(1 / 3)
    assert CliRunner().invoke(cal.app, ['--reports', str(tmp_path / 'nope'), '--labels', 'x']).exit_code == 2
    # calibrating the same run again reads the reports, not its own earlier calibration.json
    again = CliRunner().invoke(cal.app, ['--reports', str(run), '--labels', str(_write_labels(tmp_path))])
    assert again.exit_code == 1, again.output
