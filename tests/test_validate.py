"""Comparison, verdicts, gate and Markdown of the before/after validator, on synthetic judge reports."""

from __future__ import annotations

import numpy as np
import pytest

from sensei_eval.core.modes import MODES
from sensei_eval.core.reports import MODEL_CONFIDENCE, JudgeResult, RecordReport, build_report
from sensei_eval.validate import (
    Comparison,
    Resampling,
    Thresholds,
    ValidateOptions,
    assert_no_regression,
    compare_reports,
    split_run_id,
    to_markdown,
)

from .helpers import openai_record

_BASE = openai_record('base')
MVP = ('tool_selection', 'hallucination', 'completeness')


def result(mode: str, passed: bool | None, *, error: bool = False, judge: str | None = None) -> JudgeResult:
    """A judge's verdict on one mode: pass = 1.0, fail = 0.5 (one issue), or an error."""
    if error:
        return JudgeResult(
            judge=judge or mode, failure_mode=mode, category=MODES[mode].category, criteria_hash='h-' + mode,
            model='scripted', status='error', error='judge output was not JSON',
        )  # fmt: skip
    return JudgeResult(
        judge=judge or mode, failure_mode=mode, category=MODES[mode].category, criteria_hash='h-' + mode,
        model='scripted', status='ok', score=1.0 if passed else 0.5, passed=passed,
    )  # fmt: skip


def report(query_id: str, verdicts: dict[str, bool | None], *, repeat: int = 1, errors: tuple[str, ...] = ()) -> RecordReport:
    record = _BASE.model_copy(update={'query_id': query_id})
    results = [result(m, v) for m, v in verdicts.items() if m not in errors]
    results += [result(m, None, error=True) for m in errors]
    return build_report(record, results, run_id='t', repeat=repeat, model='scripted')


def side(
    truth: dict[str, list[bool]], rng: np.random.Generator | None = None, flip: float = 0.0, runs: int = 1, repeats: int = 1
) -> list[RecordReport]:
    """Reports for `truth[mode][i]` (query i passes mode?) with judge verdicts flipped at rate `flip`."""
    n = len(next(iter(truth.values())))
    out = []
    for i in range(n):
        for run in range(1, runs + 1):
            qid = f'q{i:02d}' if runs == 1 else f'q{i:02d}#r{run}'
            for rep in range(1, repeats + 1):
                verdicts = {}
                for mode, truths in truth.items():
                    v = truths[i]
                    if rng is not None and rng.random() < flip:
                        v = not v
                    verdicts[mode] = v
                out.append(report(qid, verdicts, repeat=rep))
    return out


def truth_for(modes: tuple[str, ...], n: int, rng: np.random.Generator, pass_rate: float = 0.7) -> dict[str, list[bool]]:
    return {m: [bool(rng.random() < pass_rate) for _ in range(n)] for m in modes}


# ---------------------------------------------------------------------------------------------------
# Pairing and numbers


def test_split_run_id() -> None:
    assert split_run_id('docs-001#r2') == ('docs-001', 2)
    assert split_run_id('docs-001') == ('docs-001', 1)
    assert split_run_id('a#rx') == ('a#rx', 1)


def test_numbers_match_a_hand_computation() -> None:
    # completeness per query, old → new: q0 1→0.5, q1 1→0.5, q2 0.5→1, q3 1→1
    old = [report(f'q{i}', {'completeness': v}) for i, v in enumerate([True, True, False, True])]
    new = [report(f'q{i}', {'completeness': v}) for i, v in enumerate([False, False, True, True])]
    c = compare_reports(old, new, resampling=Resampling(seed=1))
    m = c.metric('completeness')
    assert m.n_pairs == 4
    assert m.old_mean == pytest.approx((1 + 1 + 0.5 + 1) / 4)
    assert m.new_mean == pytest.approx((0.5 + 0.5 + 1 + 1) / 4)
    assert m.delta == pytest.approx(-0.125)
    d = np.array([-0.5, -0.5, 0.5, 0.0])
    assert m.effect_size_dz == pytest.approx(d.mean() / d.std(ddof=1))
    assert (m.mcnemar_b, m.mcnemar_c) == (2, 1)
    assert m.mcnemar_p == pytest.approx(1.0)  # 2·P(X ≤ 1 | n=3) = 2·4/8, capped at 1
    # the gate's test is one-sided on the flips: P(X ≥ 2 | n=3) = 4/8; 3 discordant queries can't go below 1/8
    assert m.rule == 'flips' and m.p_regression == pytest.approx(0.5) and m.min_attainable_p == pytest.approx(1 / 8)
    assert m.dropped_reason == '3 discordant queries: smallest attainable p 0.125 > alpha 0.05'
    assert m.old_pass_rate == pytest.approx(0.75) and m.new_pass_rate == pytest.approx(0.5)
    assert m.ci_low is not None and m.ci_high is not None and m.ci_low <= m.delta <= m.ci_high
    assert m.verdict == 'not_significant'  # verdicts and scores moved, not significantly: never 'no change'
    assert m.scores is not None and m.scores.dropped_reason == '3 queries changed score: smallest attainable p 0.125 > alpha 0.05'
    # overall is the report's overall_score: one mode here, a model's verdict, so a fail sits in the band of
    # runs LLM judges failed (`core.verdicts`): 0.25 + 0.25 * (1 - MODEL_CONFIDENCE * 0.5); one more failed
    # query out of four
    fail = 0.25 + 0.25 * (1 - MODEL_CONFIDENCE * 0.5)
    assert c.metric('overall').delta == pytest.approx(((2 * fail + 2) - (fail + 3)) / 4)
    assert c.gate.exit_code == 0
    assert 'noise not measured' in m.explanation


def test_runs_and_repeats_are_averaged_per_query_and_noise_is_split() -> None:
    # q0: run 1 judged [pass, fail], run 2 judged [pass, pass]; q1: run 1 [fail, fail], run 2 [pass, fail]
    old = [
        report('q0#r1', {'completeness': True}, repeat=1), report('q0#r1', {'completeness': False}, repeat=2),
        report('q0#r2', {'completeness': True}, repeat=1), report('q0#r2', {'completeness': True}, repeat=2),
        report('q1#r1', {'completeness': False}, repeat=1), report('q1#r1', {'completeness': False}, repeat=2),
        report('q1#r2', {'completeness': True}, repeat=1), report('q1#r2', {'completeness': False}, repeat=2),
    ]  # fmt: skip
    c = compare_reports(old, old)
    m = c.metric('completeness')
    assert m.n_pairs == 2 and m.observations_old == 8
    assert m.old_mean == pytest.approx(((1 + 0.5 + 1 + 1) / 4 + (0.5 + 0.5 + 1 + 0.5) / 4) / 2)
    assert c.old.runs == 2 and c.old.repeats == 2
    noise = m.noise_old
    assert noise is not None
    # judge: var([1, .5]) = .125, var([1, 1]) = 0, var([.5, .5]) = 0, var([1, .5]) = .125 → .0625
    assert noise.judge_var == pytest.approx(0.0625)
    # runs: q0 means [.75, 1] → .03125; q1 [.5, .75] → .03125
    assert noise.run_var == pytest.approx(0.03125)
    assert noise.agent_var == pytest.approx(0.0)
    # floor = 1.96 · sqrt((v_old + v_new) / n) with v = run_var / R = .015625
    assert m.noise_floor == pytest.approx(1.959964 * np.sqrt(2 * 0.015625 / 2), rel=1e-5)
    assert m.within_noise is True and m.delta == 0


def test_judge_errors_are_excluded_and_counted_never_zero() -> None:
    old = [report(f'q{i}', {'completeness': True, 'hallucination': True}) for i in range(6)]
    new = [report(f'q{i}', {'completeness': True, 'hallucination': True}) for i in range(4)]
    new += [report(f'q{i}', {'hallucination': True}, errors=('completeness',)) for i in range(4, 6)]
    c = compare_reports(old, new)
    m = c.metric('completeness')
    assert m.errors_new == 2 and m.n_pairs == 4
    assert m.new_mean == 1.0 and m.delta == 0.0  # an error scored 0 would have pulled this down
    assert m.only_old == ['q4', 'q5'] and m.only_new == []
    assert c.metric('overall').errors_new == 2  # overall of a report with an errored judge is not used
    assert c.new.judge_errors == 2 and c.new.judge_results == 12
    assert c.gate.exit_code == 1 and any('judge call(s) errored' in r for r in c.gate.reasons)
    tolerant = compare_reports(old, new, thresholds=Thresholds(max_error_rate=0.25))
    assert tolerant.gate.exit_code == 0
    assert 'judge error' in to_markdown(c)


def test_queries_on_one_side_are_reported_not_dropped() -> None:
    old = [report(f'q{i}', {'completeness': True}) for i in range(5)]
    new = [report(f'q{i}', {'completeness': True}) for i in (0, 1, 2, 3, 9)]
    c = compare_reports(old, new)
    assert c.only_old == ['q4'] and c.only_new == ['q9']
    assert c.metric('completeness').n_pairs == 4
    assert 'q4' in to_markdown(c) and 'q9' in to_markdown(c)


def test_a_mode_judged_twice_is_two_metrics_never_pooled() -> None:
    """An LLM judge and a check of the same mode are compared separately: the check failing cannot make the
    LLM judge's mode look failed, and a checks-only side cannot make it 'regress'."""
    record = _BASE.model_copy(update={'query_id': 'q0'})
    both = build_report(
        record, [result('tool_selection', True), result('tool_selection', False, judge='docs_tool_check')], run_id='t'
    )
    c = compare_reports([both], [both])
    llm, check = c.metric('tool_selection'), c.metric('tool_selection/docs_tool_check')
    assert (llm.old_mean, llm.old_pass_rate, llm.judges) == (1.0, 1.0, ['tool_selection'])
    assert (check.old_mean, check.old_pass_rate, check.judges) == (0.5, 0.0, ['docs_tool_check'])
    assert [m.metric for m in c.metrics][:2] == ['tool_selection', 'tool_selection/docs_tool_check']


# ---------------------------------------------------------------------------------------------------
# Verdicts and gate


def test_planted_regression_in_one_mode_is_flagged() -> None:
    rng = np.random.default_rng(11)
    n = 30
    truth = truth_for(MVP, n, rng, pass_rate=0.9)
    worse = {**truth, 'completeness': [t and i % 5 == 0 for i, t in enumerate(truth['completeness'])]}
    c = compare_reports(side(truth, rng, flip=0.05), side(worse, rng, flip=0.05))
    assert c.metric('completeness').verdict == 'regressed'
    assert c.metric('completeness').delta is not None and c.metric('completeness').delta < 0
    assert c.metric('tool_selection').verdict in ('no_change', 'not_significant')
    assert c.metric('hallucination').verdict in ('no_change', 'not_significant')
    assert c.gate.exit_code == 1 and c.gate.regressed[0] == 'completeness'
    assert any(r.startswith('completeness regressed:') for r in c.gate.reasons)


def test_real_improvement_is_reported_as_improved() -> None:
    rng = np.random.default_rng(5)
    n = 30
    truth = truth_for(MVP, n, rng, pass_rate=0.9)
    bad = {**truth, 'hallucination': [i % 4 == 0 for i in range(n)]}
    good = {**truth, 'hallucination': [True] * n}
    c = compare_reports(side(bad, rng, flip=0.05), side(good, rng, flip=0.05))
    m = c.metric('hallucination')
    assert m.verdict == 'improved' and m.effect_label in ('medium', 'large')
    assert m.mcnemar_c is not None and m.mcnemar_c > 10 and m.mcnemar_b == 0
    assert c.gate.exit_code == 0 and c.gate.improved[0] == 'hallucination'


def test_pure_noise_is_not_flagged_in_95_of_100_seeded_trials() -> None:
    """Same prompt twice: every mode's truth is identical, the judge flips verdicts at 15%."""
    modes = tuple(MODES)  # all 15: without a multiple-testing correction noise would flag often
    flagged = any_change = 0
    for trial in range(100):
        rng = np.random.default_rng(1000 + trial)
        truth = truth_for(modes, 20, rng, pass_rate=0.75)
        c = compare_reports(
            side(truth, rng, flip=0.15), side(truth, rng, flip=0.15),
            resampling=Resampling(trial, bootstrap=500, permutations=999),
        )  # fmt: skip
        flagged += c.gate.exit_code != 0
        any_change += any(m.verdict in ('regressed', 'improved') for m in c.metrics)
    assert flagged <= 5
    assert any_change <= 5  # not flagged as improved either


def test_max_drop_fails_the_gate_only_inside_the_family() -> None:
    """--max-drop is an effect threshold on the overall's family test: a drop the family does not reject is a
    warning (an A/A run with a noisy agent must not fail on it alone); a rejected one fails even when no
    metric is called `regressed` (here --min-effect keeps every verdict at not_significant)."""
    rng = np.random.default_rng(3)
    n = 25
    truth = truth_for(MVP, n, rng, pass_rate=1.0)
    worse = {m: [i % 3 != 0 for i in range(n)] for m in MVP}
    # alpha so small nothing is significant: the drop is beyond --max-drop, but not rejected by the family
    c = compare_reports(side(truth), side(worse), thresholds=Thresholds(alpha=1e-9))
    overall = c.metric('overall')
    assert overall.delta is not None and overall.delta < -0.05 and overall.ci_high is not None and overall.ci_high < 0
    assert all(m.verdict == 'not_significant' for m in c.metrics)
    assert c.gate.exit_code == 0 and not any('--max-drop' in r for r in c.gate.reasons)
    assert any('--max-drop' in w and 'not gated on' in w for w in c.warnings)
    # at alpha 0.05 the overall drop is significant in the family: --max-drop fails the gate by itself
    c = compare_reports(side(truth), side(worse), thresholds=Thresholds(min_effect=0.99))
    overall = c.metric('overall')
    assert overall.p_adjusted is not None and overall.p_adjusted <= 0.05
    assert all(m.verdict == 'not_significant' for m in c.metrics)
    assert c.gate.exit_code == 1 and any('--max-drop' in r and 'significant in the family' in r for r in c.gate.reasons)
    # a drop within --max-drop: neither a reason nor a warning
    c = compare_reports(side(truth), side(worse), thresholds=Thresholds(min_effect=0.99, max_drop=0.5))
    assert c.gate.exit_code == 0 and not any('--max-drop' in w for w in c.warnings)


def test_min_effect_keeps_small_changes_from_counting() -> None:
    rng = np.random.default_rng(11)
    n = 30
    truth = truth_for(MVP, n, rng, pass_rate=0.9)
    worse = {**truth, 'completeness': [t and i % 5 == 0 for i, t in enumerate(truth['completeness'])]}
    c = compare_reports(side(truth), side(worse), thresholds=Thresholds(min_effect=0.9, max_drop=1.0))
    assert c.metric('completeness').verdict == 'not_significant' and 'min-effect' in c.metric('completeness').explanation
    assert c.gate.exit_code == 0


def test_markdown_renders_the_table() -> None:
    rng = np.random.default_rng(11)
    truth = truth_for(MVP, 30, rng, pass_rate=0.9)
    worse = {**truth, 'completeness': [t and i % 5 == 0 for i, t in enumerate(truth['completeness'])]}
    c = compare_reports(side(truth, runs=2), side(worse, runs=2))
    md = to_markdown(c)
    lines = md.splitlines()
    assert lines[0] == '## Prompt validation: ❌ regression'
    header = next(i for i, line in enumerate(lines) if line.startswith('| metric |'))
    assert lines[header + 1].startswith('|---|')
    rows = [line for line in lines[header + 2 :] if line.startswith('|')][: len(c.metrics)]
    assert [r.split('|')[1].strip() for r in rows] == ['`tool_selection`', '`completeness`', '`hallucination`', '**overall**']
    completeness = c.metric('completeness')
    row = rows[1]
    assert all(len(r.split('|')) == len(lines[header].split('|')) for r in rows)
    assert f'▼ {completeness.delta:+.3f}' in row
    assert f'[{completeness.ci_low:+.3f}, {completeness.ci_high:+.3f}]' in row
    assert '🔴 **regressed**' in row
    assert '**Why the gate failed:**' in md and 'Noise (standard deviations' in md


def test_comparison_json_round_trips() -> None:
    rng = np.random.default_rng(2)
    truth = truth_for(MVP, 10, rng)
    c = compare_reports(side(truth), side(truth))
    again = Comparison.model_validate_json(c.model_dump_json())
    assert again == c


def test_assert_no_regression_on_reports_and_comparisons() -> None:
    rng = np.random.default_rng(11)
    truth = truth_for(MVP, 30, rng, pass_rate=0.9)
    worse = {**truth, 'completeness': [t and i % 5 == 0 for i, t in enumerate(truth['completeness'])]}
    ok = assert_no_regression(side(truth), side(truth))
    assert ok.gate.passed
    with pytest.raises(AssertionError, match='prompt change regressed') as info:
        assert_no_regression(side(truth), side(worse))
    assert '| `completeness` |' in str(info.value)
    c = compare_reports(side(truth), side(worse))
    assert_no_regression(
        c, validate=ValidateOptions(Thresholds(min_effect=0.9, max_drop=1.0))
    )  # re-gated with looser thresholds: passes


def test_a_change_smaller_than_the_noise_is_called_that() -> None:
    # 6 queries, 2 runs × 2 judgings; the judge disagrees with itself a lot, the prompt changes one verdict
    rng = np.random.default_rng(4)
    truth = {'completeness': [True] * 6}
    old = side(truth, rng, flip=0.3, runs=2, repeats=2)
    new = side(truth, rng, flip=0.3, runs=2, repeats=2)
    c = compare_reports(old, new)
    m = c.metric('completeness')
    assert m.noise_old is not None and m.noise_old.judge_var is not None and m.noise_old.judge_var > 0
    assert m.noise_floor is not None and m.delta is not None and abs(m.delta) < m.noise_floor
    assert m.within_noise is True and m.verdict == 'not_significant' and 'within noise' in m.explanation
    assert '(within noise)' in to_markdown(c)
    assert set(m.per_query) == {f'q{i:02d}' for i in range(6)}
    assert m.old_mean == pytest.approx(np.mean([o for o, _ in m.per_query.values()]))


def test_changed_judge_criteria_are_warned_about() -> None:
    old = [report(f'q{i}', {'completeness': True}) for i in range(3)]
    new = [report(f'q{i}', {'completeness': True}) for i in range(3)]
    for r in new:
        r.criteria_hashes['completeness'] = 'h-edited-rubric'
    c = compare_reports(old, new)
    assert any('judge criteria differ' in w and 'completeness' in w for w in c.warnings)
    assert 'judge criteria differ' in to_markdown(c)


def test_the_same_reports_in_any_order_give_the_same_numbers() -> None:
    """Each metric's p and interval come from its own seeded generator over sorted evidence: shuffling the
    reports, or comparing fewer judges first, changes nothing."""
    rng = np.random.default_rng(5)
    n = 40  # overall: > 20 queries changed, so its sign-flip p is Monte Carlo — seeded, order-free
    old_truth = truth_for(MVP, n, rng, pass_rate=0.8)
    new_truth = truth_for(MVP, n, rng, pass_rate=0.6)
    old, new = side(old_truth), side(new_truth)
    a = compare_reports(old, new)
    shuffled = [old[i] for i in rng.permutation(len(old))], [new[i] for i in rng.permutation(len(new))]
    b = compare_reports(*shuffled)
    for m in a.metrics:
        other = b.metric(m.metric)
        numbers = ('p_value', 'p_regression', 'p_improvement', 'p_adjusted', 'ci_low', 'ci_high', 'delta')
        assert [getattr(m, k) for k in numbers] == [getattr(other, k) for k in numbers], m.metric
    assert a.gate.exit_code == b.gate.exit_code
