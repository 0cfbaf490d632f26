"""Verdicts per metric and the CI gate's exit code: the gate decides on what moved.

The regression rule, per metric (see docs/gate.md for the reasoning and the power table):

* a metric with pass/fail verdicts is tested on its *flips* (queries that passed before and fail
  after) against its *fixes* (fail → pass): the one-sided exact McNemar test — a binomial test of the
  flips among the discordant queries — for an excess of flips. A query's pass is the strict majority
  of its runs × re-judgings;
* the same metric's *scores* are tested too: the one-sided exact sign-flip test of the paired score
  differences (`MetricComparison.scores`). A change that moves scores and no verdict — a dropped
  advisory lookup is a minor finding, so its mode still passes — is a change: 8 of 20 queries losing
  score on one mode is a regression even with 0 flips;
* a metric with scores only (`overall`, score-only judges) has the sign-flip test alone;
* multiple testing: every one of these regression tests is one hypothesis of one family, corrected by
  Tarone–Holm (`stats.tarone_holm`): a test that cannot reach alpha / K with its number of discordant
  queries (non-zero differences) — above all one where nothing changed — is dropped from the family and
  listed with the reason, so identical metrics cannot dilute a real regression. The improvement tests
  form their own family the same way; "improved" is a report, never a gate failure.

Verdicts: `regressed` / `improved` — a test of the metric rejected in its family (adjusted p ≤ `alpha`)
with |effect| ≥ `min_effect` (the change of the pass rate for the flip test, of the mean score for a
score test); a significant score test within the noise floor (the spread agent and judge noise alone
give Δ) does not count. The flip test is not vetoed by the noise floor: under no change a noisy query is
as likely to fix as to flip, so the exact test already accounts for that noise. When a metric's tests
disagree (its pass rate rose while its scores fell), `regressed` wins. `no_change` — only when neither a
verdict nor a score moved; `not_significant` — something moved, but no test counted (the reason is in
the explanation); `insufficient_data` — no query has a value on both sides.

The gate (exit codes of `python -m sensei_eval.validate`):

* 0 — nothing regressed significantly (a drop of the overall mean beyond `max_drop` that the family does
  not reject is a warning), or every regression is in a mode the user allowed by name (`allow`,
  `--allow MODE`: reported as a warning, never silently);
* 1 — any metric regressed, in any mode, whatever the overall score did; or the overall mean dropped
  more than `max_drop` *and* the overall's regression test is rejected inside the Tarone–Holm family (so
  every statistical rule that can fail the gate is a test of the one family `alpha` controls: an A/A
  comparison fails at most `alpha` of the time); or a metric could not be compared; or more than
  `max_error_rate` of the agent runs or judge calls on either side errored (by default any error fails:
  errors are never a silent pass — not a statistical rule, it is about the evidence, not the agent);
* 2 — usage or input errors, decided before anything is compared (see the CLI).
"""

from __future__ import annotations

from dataclasses import dataclass

from sensei_eval.validate import stats
from sensei_eval.validate.results import SCORES_TEST, Comparison, GateResult, MetricComparison, Thresholds, Verdict

__all__ = (
    'EXIT_INPUT_ERROR',
    'EXIT_OK',
    'EXIT_REGRESSION',
    'apply_family',
    'decide',
    'is_allowed',
    'metric_verdict',
)

# Said wherever noise could not be estimated (a single run and a single judging per query).
_NOT_MEASURED = 'noise not measured (use --runs/--judge-repeats ≥ 2)'
EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_INPUT_ERROR = 2


def apply_family(metrics: list[MetricComparison], alpha: float) -> stats.TaroneHolmResult:
    """Tarone–Holm over every regression test of the metrics (and, separately, their improvement tests):
    each metric's rule test, keyed by its name, and a pass/fail metric's score test, `<metric> (scores)`.

    Sets `in_family`, `dropped_reason`, `p_adjusted` and `p_adjusted_improvement` on every metric and on
    its `scores` test; returns the regression family's result."""
    worse_p: dict[str, float] = {}
    better_p: dict[str, float] = {}
    floor: dict[str, float] = {}
    for m in metrics:
        if m.p_regression is not None and m.p_improvement is not None and m.min_attainable_p is not None:
            worse_p[m.metric], better_p[m.metric], floor[m.metric] = m.p_regression, m.p_improvement, m.min_attainable_p
        t = m.scores
        if t is not None and t.p_regression is not None and t.p_improvement is not None and t.min_attainable_p is not None:
            key = m.metric + SCORES_TEST
            worse_p[key], better_p[key], floor[key] = t.p_regression, t.p_improvement, t.min_attainable_p
    worse = stats.tarone_holm(worse_p, floor, alpha)
    better = stats.tarone_holm(better_p, floor, alpha)
    for m in metrics:
        m.in_family = m.metric in worse.family
        m.p_adjusted = worse.adjusted[m.metric] if m.in_family else None
        m.p_adjusted_improvement = better.adjusted[m.metric] if m.metric in better.family else None
        m.dropped_reason = _drop_reason(m, m.rule == 'flips', alpha, worse.k_stop) if m.metric in worse.dropped else None
        if m.scores is not None:
            key = m.metric + SCORES_TEST
            m.scores.in_family = key in worse.family
            m.scores.p_adjusted = worse.adjusted[key] if m.scores.in_family else None
            m.scores.p_adjusted_improvement = better.adjusted[key] if key in better.family else None
            m.scores.dropped_reason = _drop_reason(m, False, alpha, worse.k_stop) if key in worse.dropped else None
    return worse


@dataclass(frozen=True)
class _Test:
    """One of a metric's tests, as `metric_verdict` weighs it."""

    what: str  # the evidence, for the explanation: "8 pass→fail, 0 fail→pass", "scores of 8 queries"
    name: str  # the test's name: one-sided exact McNemar / one-sided sign-flip
    p_regression: float | None
    p_improvement: float | None
    p_adjusted: float | None
    p_adjusted_improvement: float | None
    dropped_reason: str | None
    effect: float  # what --min-effect is compared with
    effect_name: str
    noise_veto: bool  # a score test within the noise floor does not count


def _tests(m: MetricComparison) -> list[_Test]:
    """The metric's tests: its rule's, then (for a pass/fail metric) the test of its scores."""
    changed = sum(1 for old, new in m.per_query.values() if old != new)
    scores_what = f'scores of {changed} quer{"y" if changed == 1 else "ies"}'
    delta = m.delta or 0.0
    if m.rule == 'flips':
        flips = f'{m.mcnemar_b} pass→fail, {m.mcnemar_c} fail→pass'
        pass_change = (m.new_pass_rate or 0.0) - (m.old_pass_rate or 0.0)
        primary = _Test(
            flips, 'one-sided exact McNemar', m.p_regression, m.p_improvement, m.p_adjusted, m.p_adjusted_improvement,
            m.dropped_reason, pass_change, 'pass rate change', noise_veto=False,
        )  # fmt: skip
    else:
        primary = _Test(
            'mean score', 'one-sided sign-flip', m.p_regression, m.p_improvement, m.p_adjusted, m.p_adjusted_improvement,
            m.dropped_reason, delta, 'Δ', noise_veto=True,
        )  # fmt: skip
    out = [primary]
    if (t := m.scores) is not None:
        scores = _Test(
            scores_what, 'one-sided sign-flip', t.p_regression, t.p_improvement, t.p_adjusted, t.p_adjusted_improvement,
            t.dropped_reason, delta, 'Δ', noise_veto=True,
        )  # fmt: skip
        out.append(scores)
    return out


def metric_verdict(m: MetricComparison, th: Thresholds) -> None:
    """Set `m.verdict` and `m.explanation` from its tests, their family membership and the thresholds."""
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
    tests = _tests(m)
    regressed: list[str] = []
    improved: list[str] = []
    blocked: list[str] = []
    for t in tests:
        directions = ((regressed, t.p_regression, t.p_adjusted), (improved, t.p_improvement, t.p_adjusted_improvement))
        for found, p_one, p_adj in directions:
            if p_adj is None or p_adj > th.alpha:
                continue
            text = f'{t.what} ({t.name} p {_fmt(p_one)}, Tarone–Holm adjusted {_fmt(p_adj)})'
            if abs(t.effect) < th.min_effect:
                small = f'{t.effect_name} {t.effect:+.3f} below --min-effect {th.min_effect:g}'
                blocked.append(f'too small to count: {text}, {small}')
            elif t.noise_veto and m.within_noise:
                blocked.append(f'within noise: {text}, but |Δ| < noise floor ±{m.noise_floor:.3f}')
            else:
                found.append(text)
    verdicts: tuple[tuple[Verdict, list[str]], ...] = (('regressed', regressed), ('improved', improved))
    for direction, found in verdicts:
        if found:
            m.verdict = direction
            rest = [t.what for t in tests if not any(x.startswith(t.what + ' (') for x in found)]
            also = f'; {", ".join(dict.fromkeys(rest))}' if rest else ''
            m.explanation = f'{direction}: {"; ".join(found)}{also}; {size}; {noise}'
            return
    if not m.moved:
        m.verdict = 'no_change'
        dropped = '; '.join(dict.fromkeys(t.dropped_reason for t in tests if t.dropped_reason)) or 'nothing to test'
        m.explanation = f'not tested ({dropped}): nothing moved, no verdict and no score; {size}'
        return
    m.verdict = 'not_significant'
    if blocked:
        m.explanation = f'moved, not counted: {"; ".join(blocked)}; {size}; {noise}'
        return
    why = []
    for t in tests:
        if t.dropped_reason is not None:
            why.append(f'{t.what}: not tested ({t.dropped_reason})')
            continue
        # the direction the data moved: the other one-sided p is near 1
        worse = (t.p_regression or 1.0) <= (t.p_improvement or 1.0)
        p_one, p_adj = (t.p_regression, t.p_adjusted) if worse else (t.p_improvement, t.p_adjusted_improvement)
        why.append(f'{t.what}: {t.name} p {_fmt(p_one)}, Tarone–Holm adjusted {_fmt(p_adj)}')
    what = 'within noise' if m.within_noise else 'not significant'
    m.explanation = f'moved, {what}: {"; ".join(why)}; {size}; {noise}'


def is_allowed(m: MetricComparison, allow: tuple[str, ...] | list[str]) -> bool:
    """Whether the user allowed `m` to regress: `allow` names its failure mode, or the metric itself."""
    return m.metric in allow or (m.failure_mode is not None and m.failure_mode in allow)


def decide(comparison: Comparison) -> None:
    """Give every metric its verdict and the comparison its gate result (exit code and reasons)."""
    th = comparison.thresholds
    reasons: list[str] = []
    family = apply_family(comparison.metrics, th.alpha)
    for m in comparison.metrics:
        metric_verdict(m, th)
    regressed = [m.metric for m in comparison.metrics if m.verdict == 'regressed']
    improved = [m.metric for m in comparison.metrics if m.verdict == 'improved']
    allowed = [m.metric for m in comparison.metrics if m.verdict == 'regressed' and is_allowed(m, th.allow)]
    for m in comparison.metrics:
        if m.verdict == 'regressed':
            if m.metric in allowed:
                comparison.warnings.append(f'{m.metric} {m.explanation} (allowed by --allow: reported, not gated on)')
            else:
                reasons.append(f'{m.metric} {m.explanation}')
        elif m.verdict == 'insufficient_data':
            reasons.append(f'{m.metric} could not be compared: {m.explanation}')
    unmatched = [a for a in th.allow if not any(is_allowed(m, (a,)) for m in comparison.metrics)]
    if unmatched:
        names = ', '.join(m.metric for m in comparison.metrics) or 'none'
        comparison.warnings.append(f'--allow {", ".join(unmatched)}: no such metric or failure mode here (metrics: {names})')
    overall = next((m for m in comparison.metrics if m.kind == 'overall'), None)
    drop = _max_drop(overall, th)
    if drop is not None:
        failing, text = drop
        if failing and not (overall is not None and is_allowed(overall, th.allow)):
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
        allowed=allowed,
        family=family.family,
        dropped=_dropped(comparison.metrics),
        tarone_k=family.k,
    )


def _dropped(metrics: list[MetricComparison]) -> dict[str, str]:
    """The tests left out of the family, with why: one entry under the metric's name when all its tests were."""
    out: dict[str, str] = {}
    for m in metrics:
        score_why = m.scores.dropped_reason if m.scores is not None else None
        if m.dropped_reason is not None:
            both = score_why is not None and score_why != m.dropped_reason
            out[m.metric] = f'{m.dropped_reason}; scores: {score_why}' if both else m.dropped_reason
        elif score_why is not None:
            out[m.metric + SCORES_TEST] = score_why
    return out


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


def _drop_reason(m: MetricComparison, flips: bool, alpha: float, k: int) -> str:
    """Why a test could not be significant (`flips`: the flip test, else a score test): nothing changed, or
    too few queries changed."""
    if flips:
        changed = (m.mcnemar_b or 0) + (m.mcnemar_c or 0)
        if changed == 0:
            return 'no discordant query: none flipped or was fixed'
        what = f'{changed} discordant quer{"y" if changed == 1 else "ies"}'
        floor = m.min_attainable_p
    else:
        changed = sum(1 for old, new in m.per_query.values() if old != new)
        if changed == 0:
            return "no query's score changed"
        what = f'{changed} quer{"y" if changed == 1 else "ies"} changed score'
        floor = m.scores.min_attainable_p if m.scores is not None else m.min_attainable_p
    bound = f'alpha {alpha:g}' if k == 1 else f'alpha/K = {alpha:g}/{k} = {alpha / k:.3g}'
    return f'{what}: smallest attainable p {_fmt(floor)} > {bound}'


def _fmt(x: float | None) -> str:
    return 'n/a' if x is None else f'{x:.3g}'
