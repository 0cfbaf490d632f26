"""Calibration numbers against values worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sensei_eval.cli import calibrate as calibrate_cli
from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.reports import JudgeResult, build_report
from sensei_eval.core.transcript import Transcript
from sensei_eval.judging.run_folder import report_filename
from sensei_eval.validate import calibrate as cal

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
        report = build_report(
            openai_record(qid), [_result(passed)], run_id='run', transcript=Transcript(qid, [], '', sha256='sha-' + qid)
        )
        write_text_atomic(run / report_filename(qid), report.model_dump_json())
    errored = build_report(
        openai_record('r7'), [_result(None, status='error')], run_id='run', transcript=Transcript('r7', [], '', sha256='sha-r7')
    )
    write_text_atomic(run / report_filename('r7'), errored.model_dump_json())
    # repeats: r1 flips on its second judging, r2 does not
    for qid, passed in (('r1', False), ('r2', True)):
        report = build_report(
            openai_record(qid), [_result(passed)], run_id='run', repeat=2, transcript=Transcript(qid, [], '', sha256='sha-' + qid)
        )
        write_text_atomic(run / report_filename(qid, 2), report.model_dump_json())
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
    # a mode that is not ours is kept with a note, not a problem (changed on purpose: issue 31)
    assert not any('made_up_mode' in p for p in result.problems)
    assert any("'made_up_mode'" in n and 'not one of ours' in n for n in result.notes)
    assert any("'ghost'" in p for p in result.problems)
    # line 16 is `{"query_id": "r1"}`: no label on it
    assert any(':16: field `-`: no label on this line' in p for p in result.problems)
    # overall ratings are not outcomes: no outcome figures, no step or agent figures
    assert result.outcomes is None and result.steps is None and result.agents is None


def test_cli_writes_json_and_exits_1_on_label_problems(tmp_path: Path) -> None:
    run = _write_run(tmp_path)
    outcome = CliRunner().invoke(calibrate_cli.app, ['--reports', str(run), '--labels', str(_write_labels(tmp_path))])
    assert outcome.exit_code == 1, outcome.output
    data = json.loads((run / 'calibration.json').read_text())
    assert data['judges'][0]['cohen_kappa'] == pytest.approx(1 / 3)
    assert CliRunner().invoke(calibrate_cli.app, ['--reports', str(tmp_path / 'nope'), '--labels', 'x']).exit_code == 2
    # calibrating the same run again reads the reports, not its own earlier calibration.json
    again = CliRunner().invoke(calibrate_cli.app, ['--reports', str(run), '--labels', str(_write_labels(tmp_path))])
    assert again.exit_code == 1, again.output


# ---------------------------------------------------------------------------------------------------
# Outcomes, steps and agents: reports are built here and their summary fields set directly, so these
# tests do not depend on how build_report fills them.


def _judge(name: str, mode: str, score: float | None, status: str = 'ok') -> JudgeResult:
    ok = status == 'ok'
    return JudgeResult(
        judge=name, failure_mode=mode, category=None, criteria_hash='h', model='m',
        status=status,  # type: ignore[arg-type]
        score=score if ok else None, passed=(score == 1.0) if ok and score is not None else None,
        error=None if ok else 'boom',
    )  # fmt: skip


def _run(tmp_path: Path, rows: dict[str, dict[str, Any]]) -> Path:
    """One report per record: `judges`, then `overall_score`, `decisive_step`, `decisive_agent` set as given."""
    run = tmp_path / 'run'
    for qid, row in rows.items():
        report = build_report(
            openai_record(qid), row.get('judges', []), run_id='run', transcript=Transcript(qid, [], '', sha256='sha-' + qid)
        )
        report.overall_score = row.get('overall')
        report.decisive_step = row.get('step')
        report.decisive_agent = row.get('agent')
        write_text_atomic(run / report_filename(qid), report.model_dump_json())
    return run


def _jsonl(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / 'labels.jsonl'
    path.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    return path


H, T = 'hallucination', 'tool_parameters'
# overall_score, and two judges: an LLM judge on every record (r7 inconclusive, r8 errored) and a
# check that ran on r1-r4 only
OUTCOME_RUN: dict[str, dict[str, Any]] = {
    'r1': {'overall': 1.0, 'judges': [_judge(H, H, 1.0), _judge(T, T, 1.0)]},
    'r2': {'overall': 0.9, 'judges': [_judge(H, H, 1.0), _judge(T, T, 0.5)]},
    'r3': {'overall': 0.6, 'judges': [_judge(H, H, 0.5), _judge(T, T, 0.5)]},
    'r4': {'overall': 0.8, 'judges': [_judge(H, H, 0.5), _judge(T, T, 0.5)]},
    'r5': {'overall': 0.4, 'judges': [_judge(H, H, 0.5)]},
    'r6': {'overall': 0.9, 'judges': [_judge(H, H, 0.5)]},
    'r7': {'overall': 0.7, 'judges': [_judge(H, H, None, status='inconclusive')]},
    'r8': {'overall': None, 'judges': [_judge(H, H, None, status='error')]},
}
OUTCOME_LABELS: list[dict[str, Any]] = [
    {'query_id': 'r1', 'failure_mode': 'overall', 'label': 'pass'},  # 1
    # 2: tau2-bench's shape: unknown keys are ignored
    {'query_id': 'r2', 'reward': 1.0, 'passed': True, 'db_match': True, 'action_checks': [{'matched': True}], 'user_goal': 'x'},
    {'query_id': 'r3', 'outcome': 'FAIL'},  # 3
    {'query_id': 'r4', 'reward': 1},  # 4
    {'query_id': 'r5', 'reward': 0.5},  # 5: failed under the default threshold 1, passed under 0.5
    {'query_id': 'r6', 'failure_mode': 'overall', 'label': False},  # 6
    {'query_id': 'r7', 'outcome': 'pass', 'reward': 0},  # 7: explicit outcome wins, the contradiction is reported
    {'query_id': 'r8', 'passed': 'fail'},  # 8
    {'query_id': 'r7', 'failure_mode': 'hallucination', 'label': 'fail'},  # 9: r7's judge was inconclusive
    {'query_id': 'r1', 'reward': 1.5},  # 10: out of range
    {'query_id': 'r2', 'outcome': 'maybe'},  # 11
    {'query_id': 'r2', 'outcome': 'fail'},  # 12: r2 already passed on line 2
    {'query_id': 'r9', 'passed': False},  # 13: no such record
    {'query_id': 'r6', 'outcome': 'pass', 'passed': False},  # 14: contradicts itself
    {'query_id': 'r1', 'failure_mode': 'overall', 'label': 4},  # 15: a rating
    {'query_id': 'r1', 'rating': 2},  # 16: r1 already has a rating
]


def test_outcome_calibration_with_pass_fail_and_reward_labels(tmp_path: Path) -> None:
    result = cal.calibrate(_run(tmp_path, OUTCOME_RUN), _jsonl(tmp_path, OUTCOME_LABELS))
    o = result.outcomes
    assert o is not None
    # outcomes: passed r1 r2 r4 r7; failed r3 r5 (reward 0.5 < 1) r6 r8
    assert (o.labelled, o.failed, o.reward_threshold) == (8, 4, 1.0)
    # always fail: p = 4/8; F1 = 2p/(1+p) = 2/3; accuracy = p; every passed run is a false alarm
    b = o.baseline
    assert (b.predictor, b.n, b.auroc, b.accuracy, b.false_alarm_rate, b.detection_rate) == ('always fail', 8, 0.5, 0.5, 1.0, 1.0)
    assert b.best_f1 == pytest.approx(2 / 3)

    overall, *judges = o.predictors
    assert overall.predictor == 'overall_score'
    # r8 has no overall_score (its judge errored): counted, left out. Scored: passed 1.0 .9 .8 .7,
    # failed .6 .4 .9. AUROC = P(failed scores lower), ties half: r3 .6 and r5 .4 are below all four
    # passed (4 + 4), r6 .9 is below 1.0 and ties .9 (1.5) → 9.5 / (3·4) = 19/24
    assert (overall.n, overall.failed, overall.errors, overall.inconclusive) == (7, 3, 1, 0)
    assert overall.auroc == pytest.approx(19 / 24)
    # flag when score ≤ t: t=.4 F1 .5; t=.6 {r5 r3} P=1 R=2/3 F1=.8; t=.7 2/3; t=.8 4/7; t=.9 2/3; t=1 3/5
    # best .8 at .6: accuracy 6/7 (only r6 missed)
    assert overall.best_f1 == pytest.approx(0.8)
    assert overall.best_f1_threshold == 0.6
    assert (overall.precision, overall.recall) == (pytest.approx(1.0), pytest.approx(2 / 3))
    assert overall.accuracy == pytest.approx(6 / 7)
    # flagged = overall_score < 1: passed r2 r4 r7 of four → 3/4; failed r3 r5 r6 of three → 1
    assert (overall.false_alarm_rate, overall.detection_rate) == (0.75, 1.0)

    h, t = judges
    assert h.predictor == H
    # scored: passed r1 1, r2 1, r4 .5; failed r3 .5, r5 .5, r6 .5; r7 inconclusive, r8 errored
    assert (h.n, h.failed, h.errors, h.inconclusive, h.not_scored) == (6, 3, 1, 1, 0)
    # each failed .5 vs passed (1, 1, .5): 1 + 1 + .5 → 3·2.5 / 9 = 5/6
    assert h.auroc == pytest.approx(5 / 6)
    # t=.5: flagged r3 r4 r5 r6, P=3/4 R=1, F1=6/7; t=1: P=1/2 R=1, F1=2/3. Accuracy at .5: 5/6 (r4)
    assert (h.best_f1, h.best_f1_threshold, h.accuracy) == (pytest.approx(6 / 7), 0.5, pytest.approx(5 / 6))
    # flagged = verdict fail: passed r4 of three; failed all three
    assert (h.false_alarm_rate, h.detection_rate) == (pytest.approx(1 / 3), 1.0)

    assert t.predictor == T
    # ran on r1-r4 only: r5-r8 not scored. Passed r1 1, r2 .5, r4 .5; failed r3 .5
    assert (t.n, t.failed, t.not_scored) == (4, 1, 4)
    # r3 .5 vs (1, .5, .5): 1 + .5 + .5 → 2/3
    assert t.auroc == pytest.approx(2 / 3)
    # t=.5: flagged r2 r3 r4, P=1/3 R=1, F1=1/2; t=1: P=1/4, F1=2/5. Accuracy at .5: r1 r3 right → 1/2
    assert (t.best_f1, t.best_f1_threshold, t.accuracy) == (pytest.approx(0.5), 0.5, 0.5)
    assert (t.false_alarm_rate, t.detection_rate) == (pytest.approx(2 / 3), 1.0)

    # the failure-mode label on r7 meets an inconclusive judge: counted apart from errors
    [agreement] = result.judges
    assert (agreement.judge, agreement.n, agreement.errors, agreement.inconclusive) == (H, 0, 0, 1)

    problems = '\n'.join(result.problems)
    assert ':7: field `reward`: reward 0 means fail (threshold 1) but `outcome` says pass; used pass' in problems
    assert ':10: field `reward`:' in problems
    assert ":11: field `outcome`: expected pass or fail (or true/false), got 'maybe'" in problems
    assert ":12: field `outcome`: 'r2' already has 'pass' (line 2); kept that, not 'fail'" in problems
    assert "outcome label for 'r9': no such record in the run" in problems
    assert ':14: field `passed`: the line contradicts itself (outcome=pass, passed=fail); no outcome used' in problems
    assert ":16: field `rating`: 'r1' already has 4.0 (line 15); kept that, not 2.0" in problems
    # line 10 also says it has no label left once its bad reward is dropped (the field goes, not the line)
    assert ':10: field `-`: no label on this line' in problems
    assert len(result.problems) == 8


def test_reward_threshold_moves_the_line_between_passed_and_failed(tmp_path: Path) -> None:
    result = cal.calibrate(_run(tmp_path, OUTCOME_RUN), _jsonl(tmp_path, OUTCOME_LABELS), reward_threshold=0.5)
    assert result.outcomes is not None
    # r5's reward 0.5 now passes: failed r3 r6 r8
    assert (result.outcomes.labelled, result.outcomes.failed) == (8, 3)
    overall = result.outcomes.predictors[0]
    # passed 1.0 .9 .8 .4 .7; failed r3 .6 (above r5 .4 only → 4 of 5), r6 .9 (1 + tie .5) → 5.5/10
    assert overall.auroc == pytest.approx(0.55)


def test_step_and_agent_accuracy(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        {
            'r1': {'step': 4, 'agent': 'Planner'},
            'r2': {'step': 5, 'agent': 'coder'},
            'r3': {'step': 7},
            'r4': {},
            'r5': {'step': 6, 'agent': 'Coder'},
        },
    )
    labels = _jsonl(
        tmp_path,
        [
            {'query_id': 'r1', 'mistake_step': 4, 'mistake_agent': ' planner '},  # exact; agent matches
            {'query_id': 'r2', 'mistake_step': 4, 'mistake_agent': 'Planner'},  # off by one; agent wrong
            {'query_id': 'r3', 'mistake_step': 2, 'mistake_agent': 'coder'},  # off by 5; no decisive agent
            {'query_id': 'r4', 'mistake_step': 3},  # no decisive step: counted, not compared
            {'query_id': 'r5', 'mistake_step': 6, 'mistake_agent': 'coder'},  # exact; agent matches
            {'query_id': 'r1', 'mistake_step': '4'},  # 6: a numeric string is read (the same label again)
            {'query_id': 'r2', 'mistake_step': 0},  # 7: r2 already has 4
            {'query_id': 'r3', 'mistake_step': 2.5},  # 8
            {'query_id': 'r4', 'mistake_agent': '  '},  # 9
        ],
    )
    result = cal.calibrate(run, labels)
    # compared r1 r2 r3 r5: exact r1 r5 → 2/4; within ±1 also r2 → 3/4; r4 has no decisive step
    assert result.steps == cal.StepAccuracy(
        labelled=5, compared=4, no_decisive_step=1, exact=0.5, within_one=0.75, exact_over_labelled=0.4,
        baseline_last_step=result.steps.baseline_last_step if result.steps else None,
    )  # fmt: skip
    # compared r1 r2 r5 (r3 has no decisive agent): r1 and r5 match, case and spaces aside → 2/3
    assert result.agents is not None
    assert (result.agents.labelled, result.agents.compared, result.agents.no_decisive_agent) == (4, 3, 1)
    assert result.agents.accuracy == pytest.approx(2 / 3)
    assert result.outcomes is None
    assert [p.split(': ', 2)[1] for p in result.problems] == [
        'field `mistake_step`',
        'field `mistake_step`',
        'field `-`',  # line 8 had nothing else: no label left once the bad step is dropped
        'field `mistake_agent`',
    ]
    assert all(f'labels.jsonl:{n}:' in p for n, p in zip((7, 8, 8, 9), result.problems, strict=True))


def test_one_class_of_outcomes_gives_no_auroc_and_says_why(tmp_path: Path) -> None:
    import warnings

    import sklearn.metrics  # noqa: F401  (imported before warnings become errors)

    run = _run(tmp_path, {'r1': {'overall': 1.0}, 'r2': {'overall': 0.5}})
    labels = _jsonl(tmp_path, [{'query_id': 'r1', 'passed': True}, {'query_id': 'r2', 'passed': True}])
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # scikit-learn's warnings stay inside calibrate
        result = cal.calibrate(run, labels)
    assert result.outcomes is not None
    [overall] = result.outcomes.predictors
    assert overall.auroc is None and overall.best_f1 is None
    assert overall.false_alarm_rate == 0.5  # r2 passed with a score below 1
    assert result.outcomes.baseline.best_f1 == 0.0 and result.outcomes.baseline.auroc is None
    assert result.problems == ['outcome labels: all 2 labelled runs passed: AUROC is undefined']


def test_cli_on_tau2_shaped_labels_prints_readable_tables_at_80_columns(tmp_path: Path) -> None:
    check = 'tool_parameters_check'
    run = _run(
        tmp_path,
        {
            'r1': {'overall': 1.0, 'step': 3, 'judges': [_judge(check, T, 1.0)]},
            'r2': {'overall': 0.8, 'judges': [_judge(check, T, 1.0)]},
            'r3': {'overall': 0.5, 'judges': [_judge(check, T, 0.5)]},
            'r5': {'overall': 0.9, 'judges': [_judge(check, T, 0.5)]},
        },
    )
    # tau2-airline's labels.jsonl shape (sierra-research/tau2-bench, MIT): extra keys ignored
    rows = [
        {'query_id': q, 'reward': r, 'passed': r == 1.0, 'db_match': r == 1.0, 'action_checks': [], 'user_goal': 'g'}
        for q, r in (('r1', 1.0), ('r2', 1.0), ('r3', 0.0), ('r5', 0.0))
    ]
    rows += [
        {'query_id': 'r1', 'mistake_step': 3},
        {'query_id': 'r1', 'failure_mode': T, 'label': 'pass'},
        {'query_id': 'r3', 'failure_mode': T, 'label': 'fail'},
    ]
    out = tmp_path / 'cal.json'
    outcome = CliRunner().invoke(
        calibrate_cli.app,
        ['--reports', str(run), '--labels', str(_jsonl(tmp_path, rows)), '--out', str(out)],
        env={'COLUMNS': '80'},
    )
    assert outcome.exit_code == 0, outcome.output
    assert '…' not in outcome.output
    assert all(len(line) <= 80 for line in outcome.output.splitlines())
    for text in ('predictor', 'AUROC', 'F1', 'acc', 'FA', 'det', 'always fail', check, 'decisive_step vs mistake_step', 'κ'):
        assert text in outcome.output
    data = json.loads(out.read_text())
    assert data['outcomes']['failed'] == 2 and data['outcomes']['baseline']['best_f1'] == pytest.approx(2 / 3)
    assert {k: data['steps'][k] for k in ('labelled', 'compared', 'no_decisive_step', 'exact', 'within_one')} == {
        'labelled': 1, 'compared': 1, 'no_decisive_step': 0, 'exact': 1.0, 'within_one': 1.0,
    }  # fmt: skip
    assert data['steps']['step_base'] == 'transcript step (from 1)'
    bad = CliRunner().invoke(calibrate_cli.app, ['--reports', str(run), '--labels', str(out), '--reward-threshold', '0'])
    assert bad.exit_code == 2


def _group_chat(query_id: str, turns: list[tuple[str, str]]) -> dict[str, Any]:
    """A multi-agent log as Who&When writes it: one assistant message a turn, the speaker in `name`."""
    return {
        'query_id': query_id,
        'query': 'How many even street numbers?',
        'messages': [{'role': 'assistant', 'name': n, 'content': t} for n, t in turns],
    }


def test_blame_labels_as_who_and_when_writes_them(tmp_path: Path) -> None:
    """String steps counting messages from 0, agent names in another case: read as they are, mapped to
    transcript steps, compared with the decisive step/agent a scripted judge cites, next to baselines."""
    import asyncio

    from sensei_eval.core.records import QueryRecord
    from sensei_eval.evaluators.output import Hallucination
    from sensei_eval.judging.options import JudgeRunOptions
    from sensei_eval.judging.runner import judge_records

    from .helpers import ScriptedJudge

    turns = [('Planner', 'Plan: load the sheet.'), ('Coder', 'Count is 4 (I guessed).'), ('Computer_terminal', 'exitcode: 0'),
             ('Verifier', 'Verified, the answer is 4.')]  # fmt: skip
    records = [QueryRecord.model_validate(_group_chat(f'w{i}', turns)) for i in range(3)]

    def blame(prompt: str, n: int) -> dict[str, Any]:
        # the judge cites step 2 (the Coder's guess) on every record, with its own words per call
        claim = {'steps': [2], 'hallucinated_claim': f'Count is 4 ({n})', 'what_tools_actually_said': 'nothing',
                 'severity': 'major'}  # fmt: skip
        return {'reasoning': f'Step [2] guesses the count before any code ran ({n}).', 'issues': [claim]}

    run = tmp_path / 'run'
    asyncio.run(judge_records(records, JudgeRunOptions([Hallucination()], ScriptedJudge(blame).model()), run_id='w', run_dir=run))
    labels = _jsonl(
        tmp_path,
        [
            {'query_id': 'w0', 'mistake_agent': 'coder', 'mistake_step': '1', 'mistake_reason': 'guessed'},
            {'query_id': 'w1', 'mistake_agent': 'Planner', 'mistake_step': '0'},
            {'query_id': 'w2', 'mistake_agent': 'CODER', 'mistake_step': 'one', 'note': 'bad step, agent kept'},
        ],
    )
    result = cal.calibrate(run, labels, step_base=0)
    assert result.steps is not None and result.agents is not None
    # w0: message 1 is transcript step 2 → exact; w1: message 0 is step 1 → off by one; w2's step is bad
    assert (result.steps.labelled, result.steps.exact, result.steps.within_one) == (2, 0.5, 1.0)
    assert result.steps.step_base == 'message index from 0'
    assert result.steps.baseline_last_step == 0.0
    # the agent of the bad-step line is still used: w0 and w2 blame the Coder (case aside), w1 the Planner
    assert (result.agents.labelled, result.agents.accuracy) == (3, pytest.approx(2 / 3))
    assert result.agents.baseline_first_agent == pytest.approx(1 / 3)  # first non-user speaker: Planner
    assert [p for p in result.problems if 'mistake_step' in p] and len(result.problems) == 1
    printed = CliRunner().invoke(calibrate_cli.app, ['--reports', str(run), '--labels', str(labels), '--step-base', '0'])
    assert 'message index from 0' in printed.output and 'baseline first agent' in printed.output


def test_calibrate_a_judge_on_the_shipped_benchmark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--benchmark tau2-airline`: the shipped labelled runs are judged with the chosen judge (scripted
    here), and its agreement is printed beside the checks alone and the always-fail baseline."""
    from sensei_eval.data import BENCHMARKS

    from .helpers import ScriptedJudge, about

    folder = BENCHMARKS['tau2-airline']
    assert sum(1 for _ in (folder / 'records.jsonl').open()) == 50 and 'MIT' in (folder / 'README.md').read_text()
    # a judge that finds a hallucination in every run: it fails them all, like the baseline
    claim = {'steps': [3], 'hallucinated_claim': 'x', 'what_tools_actually_said': 'y', 'severity': 'major'}
    scripted = ScriptedJudge(lambda p, n: {'reasoning': f'Step [3] is wrong ({about(p)}).', 'issues': [claim]})
    monkeypatch.setattr(calibrate_cli, '_judge_model', lambda model, base_url, console: scripted.model())
    args = ['--benchmark', 'tau2-airline', '--judges', 'hallucination', '--limit', '6', '--run-dir', str(tmp_path)]
    outcome = CliRunner().invoke(calibrate_cli.app, args)
    assert outcome.exit_code == 0, outcome.output
    assert 'always fail' in outcome.output and 'hallucination' in outcome.output
    assert 'checks only (no model): AUROC' in outcome.output
    data = json.loads((tmp_path / 'calibration.json').read_text())
    judged = {f['predictor']: f for f in data['judged']['outcomes']['predictors']}
    assert judged['hallucination']['n'] == 6 and judged['hallucination']['false_alarm_rate'] == 1.0
    assert data['checks_only']['outcomes']['labelled'] == 6
    unknown = CliRunner().invoke(calibrate_cli.app, ['--benchmark', 'no-such-set'])
    assert unknown.exit_code == 2 and 'neither a shipped benchmark' in unknown.output
