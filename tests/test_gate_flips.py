"""The gate's flip rule: pass → fail flips against fail → pass fixes, one-sided, in a Tarone–Holm family.

The case that motivated it: removing one rule from a prompt broke 8 of 19 queries on one failure mode
(8 flips, 0 fixes) while five other modes did not move at all. Corrected by Holm over every metric, the
five untouched modes diluted the one real regression past alpha and the gate passed; here they are
dropped from the family (no query changed, so their tests could never be significant).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sensei_eval.cli import validate as validate_cli
from sensei_eval.core.modes import MODES
from sensei_eval.core.reports import JudgeResult, RecordReport, build_report
from sensei_eval.validate import Resampling, Thresholds, assert_no_regression, compare_reports, stats, to_markdown
from sensei_eval.validate.gate import decide

from .test_validate import _BASE, report
from .test_validate_cli import _write_run

BROKEN = 'completeness'
UNTOUCHED = ('tool_selection', 'hallucination', 'tool_parameters', 'citation_quality', 'agent_format')
N_QUERIES = 19
N_FLIPS = 8


def _eight_of_nineteen() -> tuple[list[RecordReport], list[RecordReport]]:
    """19 queries: `completeness` passes on 13 before; after, 8 of those fail, nothing is fixed.
    The five other modes have the same verdict on both sides for every query (some pass, some fail)."""
    old, new = [], []
    for i in range(N_QUERIES):
        same = {mode: (i + j) % 4 != 0 for j, mode in enumerate(UNTOUCHED)}
        before = i < 13
        after = before and i >= N_FLIPS
        old.append(report(f'q{i:02d}', {BROKEN: before, **same}))
        new.append(report(f'q{i:02d}', {BROKEN: after, **same}))
    return old, new


def test_eight_of_nineteen_flips_fail_the_gate_and_untouched_modes_are_dropped() -> None:
    old, new = _eight_of_nineteen()
    c = compare_reports(old, new, resampling=Resampling(seed=0))
    m = c.metric(BROKEN)
    assert m.rule == 'flips' and (m.flips, m.fixes) == (N_FLIPS, 0)
    assert m.p_regression == pytest.approx(0.5**N_FLIPS)  # one-sided exact: P(8 of 8 discordant are flips)
    assert m.mcnemar_p == pytest.approx(2 * 0.5**N_FLIPS)  # the two-sided p the old rule reported
    assert m.verdict == 'regressed' and m.p_adjusted is not None and m.p_adjusted <= 0.05
    assert c.gate.exit_code == 1 and c.gate.regressed[0] == BROKEN
    assert any(r.startswith(f'{BROKEN} regressed: 8 pass→fail, 0 fail→pass') for r in c.gate.reasons)
    # the five modes where nothing changed cannot dilute the correction: they are not in the family
    assert set(c.gate.dropped) == set(UNTOUCHED)
    assert all('no discordant query' in why for why in c.gate.dropped.values())
    # the broken mode's flips and its scores are two tests of the family; overall moved too (sign-flip rule)
    assert set(c.gate.family) == {BROKEN, f'{BROKEN} (scores)', 'overall'}
    for mode in UNTOUCHED:
        assert c.metric(mode).in_family is False and c.metric(mode).p_adjusted is None
        assert c.metric(mode).verdict == 'no_change' and c.metric(mode).explanation.startswith('not tested')
    # what the old rule did: Holm over every metric's two-sided test lifted the regression above alpha
    old_rule = stats.holm_adjust({x.metric: x.p_value for x in c.metrics if x.p_value is not None})
    assert old_rule[BROKEN] > 0.05


def test_eight_of_nineteen_through_the_library_entry_points() -> None:
    old, new = _eight_of_nineteen()
    with pytest.raises(AssertionError, match='prompt change regressed') as info:
        assert_no_regression(old, new)
    assert 'Dropped from the family' in str(info.value)
    # re-gating a finished comparison recomputes the family for the new alpha
    c = compare_reports(old, new)
    # (max_drop off: overall_score compounds findings, so 8 of 19 runs failing one mode also drop the
    # overall mean past the default 0.05; this test is about the flips alone)
    strict = c.model_copy(update={'thresholds': Thresholds(alpha=0.001, max_drop=1.0)}, deep=True)
    decide(strict)
    # 0.5^8 = 0.0039 > 0.001: at this alpha the 8 flips can never be significant, so the mode is dropped too
    why = strict.metric(BROKEN).dropped_reason
    assert why == '8 discordant queries: smallest attainable p 0.00391 > alpha 0.001'
    assert strict.metric(BROKEN).verdict == 'not_significant' and strict.gate.exit_code == 0  # it moved: not 'no change'


def test_eight_of_nineteen_through_the_cli(tmp_path: Path) -> None:
    old, new = _eight_of_nineteen()
    before, after = _write_run(tmp_path / 'before', old), _write_run(tmp_path / 'after', new)
    out = tmp_path / 'cmp'
    args = ['--old-reports', str(before), '--new-reports', str(after), '--out', str(out)]
    result = CliRunner().invoke(validate_cli.app, args)
    assert result.exit_code == 1, result.output
    data = json.loads((out / 'comparison.json').read_text())
    assert data['correction'] == 'tarone-holm'
    assert sorted(data['gate']['dropped']) == sorted(UNTOUCHED) and BROKEN in data['gate']['family']
    broken = next(x for x in data['metrics'] if x['metric'] == BROKEN)
    assert broken['verdict'] == 'regressed' and (broken['mcnemar_b'], broken['mcnemar_c']) == (8, 0)
    md = (out / 'comparison.md').read_text()
    assert '| flips / fixes |' in md and 'Dropped from the family' in md
    assert all(f'- `{mode}`: no discordant query' in md for mode in UNTOUCHED)
    assert 'dropped tool_selection: no discordant query' in result.stdout and 'gate: failed' in result.stdout
    # reversed, the same 8 queries are fixes: improved, and the gate passes
    back = CliRunner().invoke(
        validate_cli.app, ['--old-reports', str(after), '--new-reports', str(before), '--out', str(tmp_path / 'b')]
    )
    assert back.exit_code == 0, back.output


def _independent_side(rng: np.random.Generator, modes: tuple[str, ...], n: int, pass_rate: float) -> list[RecordReport]:
    """Every query passes every mode with probability `pass_rate`, drawn afresh for this side."""
    return [report(f'q{i:02d}', {m: bool(rng.random() < pass_rate) for m in modes}) for i in range(n)]


def test_a_a_comparisons_pass_in_20_of_20_seeds() -> None:
    """Both sides drawn from the same distribution, independently: flips and fixes are equally likely."""
    modes = (BROKEN, *UNTOUCHED)
    outcomes = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        old = _independent_side(rng, modes, 30, 0.7)
        new = _independent_side(rng, modes, 30, 0.7)
        c = compare_reports(old, new, resampling=Resampling(seed, bootstrap=500, permutations=999))
        outcomes.append((c.gate.exit_code, c.gate.regressed, c.gate.reasons))
        discordant = sum((c.metric(m).flips or 0) + (c.metric(m).fixes or 0) for m in modes)
        assert discordant > 0  # the sides really differ query by query: this is not a test of identical inputs
    assert [code for code, _, _ in outcomes] == [0] * 20, [o for o in outcomes if o[0]]


def test_majority_of_runs_decides_a_querys_pass() -> None:
    """3 runs per query: 2 of 3 passing runs is a pass; 1 of 3 a fail — so 2/3 → 1/3 is a flip."""

    def runs(qid: str, verdicts: list[bool]) -> list[RecordReport]:
        return [report(f'{qid}#r{r}', {BROKEN: v}) for r, v in enumerate(verdicts, start=1)]

    old = runs('q0', [True, True, False]) + runs('q1', [False, False, True]) + runs('q2', [True, True, True])
    new = runs('q0', [True, False, False]) + runs('q1', [False, True, True]) + runs('q2', [True, False, True])
    m = compare_reports(old, new).metric(BROKEN)
    assert (m.flips, m.fixes) == (1, 1)  # q0 flipped, q1 was fixed, q2 stayed a (majority) pass


def test_too_few_discordant_queries_are_dropped_with_the_attainable_p() -> None:
    # 3 flips, 0 fixes: the one-sided exact p can never go below 1/8, so it can never reach 0.05
    old = [report(f'q{i}', {BROKEN: True, 'hallucination': i < 10}) for i in range(12)]
    new = [report(f'q{i}', {BROKEN: i >= 3, 'hallucination': i < 10}) for i in range(12)]
    c = compare_reports(old, new)
    m = c.metric(BROKEN)
    assert (m.flips, m.fixes) == (3, 0) and m.min_attainable_p == pytest.approx(1 / 8)
    assert m.dropped_reason == '3 discordant queries: smallest attainable p 0.125 > alpha 0.05'
    assert 'hallucination' in c.gate.dropped and BROKEN in c.gate.dropped
    md = to_markdown(c)
    assert '- `completeness`: 3 discordant queries: smallest attainable p 0.125 > alpha 0.05' in md


def test_flip_rule_overrides_the_mean_and_scores_only_metrics_keep_the_sign_flip_test() -> None:
    """A score-only judge (no pass/fail) is judged on its mean by the sign-flip test, in the same family."""

    def scored(qid: str, score: float, passed: bool) -> RecordReport:
        results = [
            JudgeResult(
                judge='investigation_score', failure_mode=None, category=None, criteria_hash='h-inv',
                model='scripted', status='ok', score=score, passed=None,
            ),
            JudgeResult(
                judge=BROKEN, failure_mode=BROKEN, category=MODES[BROKEN].category, criteria_hash='h-c',
                model='scripted', status='ok', score=1.0 if passed else 0.5, passed=passed,
            ),
        ]  # fmt: skip
        return build_report(_BASE.model_copy(update={'query_id': qid}), results, run_id='t', model='scripted')

    old = [scored(f'q{i:02d}', 0.9, True) for i in range(12)]
    new = [scored(f'q{i:02d}', 0.6 if i < 9 else 0.9, True) for i in range(12)]
    c = compare_reports(old, new)
    inv = c.metric('investigation_score')
    assert inv.rule == 'scores' and inv.mcnemar_b is None
    assert inv.p_regression == pytest.approx(0.5**9)  # exact: 9 nonzero differences, all down
    assert inv.in_family and inv.verdict == 'regressed'
    assert c.metric(BROKEN).dropped_reason is not None and 'investigation_score' in c.gate.family
    assert '| `investigation_score` |' in to_markdown(c) and 'scores only' in to_markdown(c)
