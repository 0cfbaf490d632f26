"""Verdicts per metric and the CI gate's exit code.

A metric's verdict, from its Holm-adjusted p-value (the family is every metric compared together, so
with 15 failure modes at alpha 0.05 noise alone still flags *something* in at most ~5% of comparisons,
not in half of them):

* `improved` / `regressed` — adjusted p < `alpha`, |Δ| ≥ `min_effect`, and |Δ| is not within the noise
  floor (the spread that agent and judge noise alone give the mean difference; see `compare`);
* `no_change` — anything else; the explanation says whether the change was within noise, too small,
  or not significant;
* `insufficient_data` — no query has a value on both sides.

The gate (exit codes of `python -m sensei_eval.validate`):

* 0 — nothing regressed significantly and the overall mean did not drop more than `max_drop`;
* 1 — any metric regressed; or the overall mean dropped more than `max_drop` *and* its bootstrap CI lies
  wholly below 0 (a drop that noise explains is reported, not gated on); or a metric could not be
  compared; or more than `max_error_rate` of the agent runs or judge calls on either side errored (by
  default any error fails: errors are never a silent pass);
* 2 — usage or input errors, decided before anything is compared (see the CLI).

McNemar's pass/fail test is reported next to each verdict but does not drive it: one primary test per
metric keeps the multiple-testing correction honest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from .compare import Comparison, MetricComparison

__all__ = ('EXIT_INPUT_ERROR', 'EXIT_OK', 'EXIT_REGRESSION', 'GateResult', 'Thresholds', 'decide', 'metric_verdict')

# Said wherever noise could not be estimated (a single run and a single judging per query).
_NOT_MEASURED = 'noise not measured (use --runs/--judge-repeats ≥ 2)'
EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_INPUT_ERROR = 2


class Thresholds(BaseModel):
    """The gate's knobs; every one is a CLI option of the same name."""

    model_config = ConfigDict(frozen=True)

    alpha: float = Field(0.05, gt=0, lt=1, description='Family-wise significance level (Holm across metrics).')
    max_drop: float = Field(0.05, ge=0, description='Largest tolerated drop of the overall mean score (0-1 scale).')
    min_effect: float = Field(0.0, ge=0, description='Smallest |Δ| that counts as a change, however significant.')
    max_error_rate: float = Field(0.0, ge=0, le=1, description='Tolerated fraction of errored agent runs / judge calls.')
    ci_level: float = Field(0.95, gt=0, lt=1, description='Level of the bootstrap confidence intervals.')


class GateResult(BaseModel):
    """The gate's decision and every reason for it."""

    exit_code: int
    passed: bool
    reasons: list[str] = Field(default_factory=list)
    regressed: list[str] = Field(default_factory=list)
    improved: list[str] = Field(default_factory=list)


def metric_verdict(m: MetricComparison, th: Thresholds) -> None:
    """Set `m.verdict` and `m.explanation` from its numbers and the thresholds."""
    if m.n_pairs == 0 or m.delta is None:
        m.verdict = 'insufficient_data'
        m.explanation = (
            f'no query has a value on both sides (judge errors: old {m.errors_old}, new {m.errors_new}; '
            f'queries on one side only: old {len(m.only_old)}, new {len(m.only_new)})'
        )
        return
    p = m.p_adjusted if m.p_adjusted is not None else m.p_value
    size = f'Δ {m.delta:+.3f}, d_z {_fmt(m.effect_size_dz)} ({m.effect_label})'
    noise = f'noise floor ±{m.noise_floor:.3f}' if m.noise_floor is not None else _NOT_MEASURED
    significant = p is not None and p < th.alpha and m.delta != 0
    if significant and m.within_noise:
        m.verdict = 'no_change'
        m.explanation = f'within noise: {size}, adjusted p {p:.3g}, but |Δ| < {noise}'
    elif significant and abs(m.delta) < th.min_effect:
        m.verdict = 'no_change'
        m.explanation = f'too small to count: {size} below --min-effect {th.min_effect:g} (adjusted p {p:.3g})'
    elif significant:
        m.verdict = 'improved' if m.delta > 0 else 'regressed'
        m.explanation = f'{m.verdict}: {size}, adjusted p {p:.3g}; {noise}'
    else:
        why = 'within noise' if m.within_noise else 'not significant'
        m.explanation = f'no significant change ({why}): {size}, adjusted p {_fmt(p)}; {noise}'
        m.verdict = 'no_change'
    if m.mcnemar_p is not None:
        m.explanation += f'; pass/fail: {m.mcnemar_b} pass→fail, {m.mcnemar_c} fail→pass (McNemar p {m.mcnemar_p:.3g})'


def decide(comparison: Comparison) -> None:
    """Give every metric its verdict and the comparison its gate result (exit code and reasons)."""
    th = comparison.thresholds
    reasons: list[str] = []
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
    dropped = overall is not None and overall.delta is not None and overall.delta < -th.max_drop
    if overall is not None and dropped and overall.ci_high is not None and overall.ci_high < 0:
        reasons.append(
            f'overall mean dropped {-(overall.delta or 0.0):.3f} > --max-drop {th.max_drop:g} '
            f'({overall.ci_level:.0%} CI {overall.ci_low:+.3f} … {overall.ci_high:+.3f})'
        )
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
    comparison.gate = GateResult(exit_code=code, passed=code == EXIT_OK, reasons=reasons, regressed=regressed, improved=improved)


def _fmt(x: float | None) -> str:
    return 'n/a' if x is None else f'{x:.3g}'
