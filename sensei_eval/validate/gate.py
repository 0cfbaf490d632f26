"""Verdicts per metric and the CI gate's exit code.

The regression rule, per metric (see docs/gate.md for the reasoning and the power table):

* a metric with pass/fail verdicts is judged by its *flips* (queries that passed before and fail
  after) against its *fixes* (fail → pass): the one-sided exact McNemar test — a binomial test of the
  flips among the discordant queries — for an excess of flips. A query's pass is the strict majority
  of its runs × re-judgings. The mean score, its CI and d_z are shown next to it but do not decide;
* a metric with scores only (`overall`, score-only judges) keeps the one-sided paired sign-flip test
  of its mean score;
* multiple testing: the regression tests of all metrics form one family, corrected by Tarone–Holm
  (`stats.tarone_holm`): a metric whose test cannot reach alpha / K with its number of discordant
  queries — above all one where no query changed — is dropped from the family and listed as dropped
  with the reason, so identical metrics cannot dilute a real regression. The improvement tests form
  their own family the same way; "improved" is a report, never a gate failure.

Verdicts: `regressed` / `improved` — adjusted p ≤ `alpha` and |effect| ≥ `min_effect` (effect: the
change of the pass rate under the flip rule, of the mean score otherwise); a significant score-only
change within the noise floor (the spread agent and judge noise alone give Δ) is `no_change`. The flip
rule is not vetoed by the noise floor: under no change a noisy query is as likely to fix as to flip,
so the exact test already accounts for that noise. `no_change` — anything else, with the reason;
`insufficient_data` — no query has a value on both sides.

The gate (exit codes of `python -m sensei_eval.validate`):

* 0 — nothing regressed significantly (a drop of the overall mean beyond `max_drop` that the family does
  not reject is a warning);
* 1 — any metric regressed; or the overall mean dropped more than `max_drop` *and* the overall's
  regression test is rejected inside the Tarone–Holm family (so every statistical rule that can fail the
  gate is a test of the one family `alpha` controls: an A/A comparison fails at most `alpha` of the
  time); or a metric could not be compared; or more than `max_error_rate` of the agent runs or judge
  calls on either side errored (by default any error fails: errors are never a silent pass — not a
  statistical rule, it is about the evidence, not the agent);
* 2 — usage or input errors, decided before anything is compared (see the CLI).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sensei_eval.validate import stats
from sensei_eval.validate.comparison import Comparison, GateResult, MetricComparison, Thresholds, Verdict

if TYPE_CHECKING:
    from sensei_eval.validate.comparison import Comparison, MetricComparison, Verdict

__all__ = (
    'EXIT_INPUT_ERROR',
    'EXIT_OK',
    'EXIT_REGRESSION',
    'apply_family',
    'decide',
    'metric_verdict',
)

# Said wherever noise could not be estimated (a single run and a single judging per query).
_NOT_MEASURED = 'noise not measured (use --runs/--judge-repeats ≥ 2)'
EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_INPUT_ERROR = 2


def apply_family(metrics: list[MetricComparison], alpha: float) -> stats.TaroneHolmResult:
    """Tarone–Holm over the metrics' regression tests (and, separately, their improvement tests).

    Sets `in_family`, `dropped_reason`, `p_adjusted` and `p_adjusted_improvement` on every metric;
    returns the regression family's result.
    """
    tested = [m for m in metrics if m.p_regression is not None and m.p_improvement is not None and m.min_attainable_p is not None]
    floor = {m.metric: m.min_attainable_p or 1.0 for m in tested}
    worse = stats.tarone_holm({m.metric: m.p_regression or 1.0 for m in tested}, floor, alpha)
    better = stats.tarone_holm({m.metric: m.p_improvement or 1.0 for m in tested}, floor, alpha)
    for m in metrics:
        m.in_family = m.metric in worse.family
        m.p_adjusted = worse.adjusted[m.metric] if m.in_family else None
        m.p_adjusted_improvement = better.adjusted[m.metric] if m.metric in better.family else None
        m.dropped_reason = _drop_reason(m, alpha, worse.k_stop) if m.metric in worse.dropped else None
    return worse


def metric_verdict(m: MetricComparison, th: Thresholds) -> None:
    """Set `m.verdict` and `m.explanation` from its numbers, its family membership and the thresholds."""
    if m.n_pairs == 0 or m.delta is None:
        m.verdict = 'insufficient_data'
        m.explanation = (
            f'no query has a value on both sides (judge errors: old {m.errors_old}, new {m.errors_new}; '
            f'queries on one side only: old {len(m.only_old)}, new {len(m.only_new)})'
        )
        return
    size = f'Δ {m.delta:+.3f}, d_z {_fmt(m.effect_size_dz)} ({m.effect_label})'
    noise = f'noise floor ±{m.noise_floor:.3f}' if m.noise_floor is not None else _NOT_MEASURED
    if m.within_noise:
        noise = f'within noise (|Δ| < noise floor ±{m.noise_floor:.3f})'
    flips = m.rule == 'flips'
    if flips:
        effect = (m.new_pass_rate or 0.0) - (m.old_pass_rate or 0.0)
        test = f'{m.mcnemar_b} pass→fail, {m.mcnemar_c} fail→pass'
    else:
        effect = m.delta
        test = 'mean score'
    regressed = m.p_adjusted is not None and m.p_adjusted <= th.alpha
    improved = m.p_adjusted_improvement is not None and m.p_adjusted_improvement <= th.alpha
    if regressed or improved:
        direction: Verdict = 'regressed' if regressed else 'improved'
        p_one = m.p_regression if regressed else m.p_improvement
        p_adj = m.p_adjusted if regressed else m.p_adjusted_improvement
        p_text = f'{_test_name(m)} p {_fmt(p_one)}, Tarone–Holm adjusted {_fmt(p_adj)}'
        if abs(effect) < th.min_effect:
            m.verdict = 'no_change'
            what = 'pass rate change' if flips else 'Δ'
            m.explanation = (
                f'too small to count: {test}, {what} {effect:+.3f} below --min-effect {th.min_effect:g} ({p_text}); {size}'
            )
        elif not flips and m.within_noise:
            m.verdict = 'no_change'
            m.explanation = f'within noise: {size}, {p_text}, but |Δ| < noise floor ±{m.noise_floor:.3f}'
        else:
            m.verdict = direction
            m.explanation = f'{direction}: {test} ({p_text}); {size}; {noise}'
        return
    m.verdict = 'no_change'
    if m.dropped_reason is not None:
        m.explanation = f'not tested ({m.dropped_reason}): {test}; {size}; {noise}'
    else:
        # the direction the data moved: the other one-sided p is near 1
        worse = (m.p_regression or 1.0) <= (m.p_improvement or 1.0)
        p_one, p_adj = (m.p_regression, m.p_adjusted) if worse else (m.p_improvement, m.p_adjusted_improvement)
        why = 'within noise' if m.within_noise else 'not significant'
        m.explanation = (
            f'no significant change ({why}): {test} ({_test_name(m)} p {_fmt(p_one)}, '
            f'Tarone–Holm adjusted {_fmt(p_adj)}); {size}; {noise}'
        )


def decide(comparison: Comparison) -> None:
    """Give every metric its verdict and the comparison its gate result (exit code and reasons)."""
    th = comparison.thresholds
    reasons: list[str] = []
    family = apply_family(comparison.metrics, th.alpha)
    for m in comparison.metrics:
        metric_verdict(m, th)
    regressed = [m.metric for m in comparison.metrics if m.verdict == 'regressed']
    improved = [m.metric for m in comparison.metrics if m.verdict == 'improved']
    for m in comparison.metrics:
        if m.verdict == 'regressed':
            reasons.append(f'{m.metric} {m.explanation}')
        elif m.verdict == 'insufficient_data':
            reasons.append(f'{m.metric} could not be compared: {m.explanation}')
    overall = next((m for m in comparison.metrics if m.kind == 'overall'), None)
    drop = _max_drop(overall, th)
    if drop is not None:
        failing, text = drop
        if failing:
            reasons.append(text)
        else:
            comparison.warnings.append(text)
    if not comparison.metrics:
        reasons.append('nothing to compare: neither side has any judge result')
    for side in (comparison.old, comparison.new):
        if side.run_attempts and len(side.run_errors) / side.run_attempts > th.max_error_rate:
            reasons.append(
                f'{side.label}: {len(side.run_errors)} of {side.run_attempts} agent run(s) errored '
                f'(--max-error-rate {th.max_error_rate:g})'
            )
        if side.judge_results and side.judge_errors / side.judge_results > th.max_error_rate:
            reasons.append(
                f'{side.label}: {side.judge_errors} of {side.judge_results} judge call(s) errored '
                f'(--max-error-rate {th.max_error_rate:g})'
            )
    code = EXIT_REGRESSION if reasons else EXIT_OK
    comparison.correction = 'tarone-holm'
    comparison.gate = GateResult(
        exit_code=code,
        passed=code == EXIT_OK,
        reasons=reasons,
        regressed=regressed,
        improved=improved,
        family=family.family,
        dropped={m.metric: m.dropped_reason for m in comparison.metrics if m.dropped_reason is not None},
        tarone_k=family.k,
    )


def _max_drop(overall: MetricComparison | None, th: Thresholds) -> tuple[bool, str] | None:
    """The --max-drop rule, inside the family: (fails the gate, what to say), None when the overall mean
    did not drop more than `max_drop`.

    A drop beyond `max_drop` fails the gate only when the overall's own regression test is rejected by
    the family (its Tarone–Holm adjusted one-sided sign-flip p ≤ alpha): the rule then only adds an effect
    threshold to a rejection the family already made (it also fails a significant drop that the noise
    floor or --min-effect kept from being called `regressed`), so the gate's false alarms stay bounded by
    alpha. A drop beyond `max_drop` that the family does not reject is a warning, never a failure.
    """
    if overall is None or overall.delta is None or overall.delta >= -th.max_drop:
        return None
    interval = '' if overall.ci_low is None else f', {overall.ci_level:.0%} CI {overall.ci_low:+.3f} … {overall.ci_high:+.3f}'
    what = f'overall mean dropped {-overall.delta:.3f} > --max-drop {th.max_drop:g}{interval}'
    significant = overall.p_adjusted is not None and overall.p_adjusted <= th.alpha
    if significant:
        if overall.verdict == 'regressed':
            return None  # already a reason of its own
        return True, f'{what}; significant in the family (Tarone–Holm adjusted p {_fmt(overall.p_adjusted)} ≤ alpha {th.alpha:g})'
    why = (
        f'not tested ({overall.dropped_reason})'
        if overall.dropped_reason is not None
        else f'Tarone–Holm adjusted p {_fmt(overall.p_adjusted)} > alpha {th.alpha:g}'
    )
    return False, f'{what}, but the drop is not significant in the family ({why}): reported, not gated on'


def _drop_reason(m: MetricComparison, alpha: float, k: int) -> str:
    """Why a metric's test could not be significant: nothing changed, or too few queries changed."""
    if m.rule == 'flips':
        changed = (m.mcnemar_b or 0) + (m.mcnemar_c or 0)
        if changed == 0:
            return 'no discordant query: none flipped or was fixed'
        what = f'{changed} discordant quer{"y" if changed == 1 else "ies"}'
    else:
        changed = sum(1 for old, new in m.per_query.values() if old != new)
        if changed == 0:
            return "no query's score changed"
        what = f'{changed} quer{"y" if changed == 1 else "ies"} changed score'
    bound = f'alpha {alpha:g}' if k == 1 else f'alpha/K = {alpha:g}/{k} = {alpha / k:.3g}'
    return f'{what}: smallest attainable p {_fmt(m.min_attainable_p)} > {bound}'


def _test_name(m: MetricComparison) -> str:
    return 'one-sided exact McNemar' if m.rule == 'flips' else 'one-sided sign-flip'


def _fmt(x: float | None) -> str:
    return 'n/a' if x is None else f'{x:.3g}'
