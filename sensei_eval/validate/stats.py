"""Paired statistics for before/after comparisons: bootstrap CI, permutation and McNemar tests, noise.

Everything here works on *paired* data: one value per query on each side (the caller has already
averaged a query's runs and re-judgings), so the unit of evidence is the query, never the individual
judge call — R runs × J re-judgings of one query are not R·J independent observations.

* `paired_bootstrap_ci` — percentile bootstrap of the mean difference (new − old), resampling queries
  with replacement from a seeded `numpy.random.Generator` (`metric_rng(seed, metric)`: one per metric),
  so a report is reproducible and a metric's interval does not depend on the other metrics.
* `sign_flip_test` — the paired permutation (sign-flip) test of the mean difference: under H0 old and
  new are exchangeable within a query, i.e. each difference's sign is a coin flip. **Zero differences
  leave the test** (Wilcoxon's convention for ties, "zero method wilcox"): a query that scored the same
  on both sides carries no evidence of a direction, and flipping the sign of 0 changes nothing, so in
  the exact test it would only double numerator and denominator — but counting it would make the
  test's smallest p depend on how many queries did *not* change. With m non-zero differences the
  test **enumerates all 2^m sign patterns exactly** while m ≤ `EXACT_MAX_NONZERO` (20: about a
  million sums, 8 MB and milliseconds with numpy); above, it
  draws `resamples` random patterns from a seeded generator, p = (hits + 1) / (resamples + 1). The
  differences are sorted by size before anything is computed, so the same evidence in any order
  gives the same p, exact or Monte Carlo. Example: 6 queries improved, none hurt, 8 unchanged → the
  one-sided p is 1/64 exactly, whatever the seed. No normality assumption, which matters for judge
  scores that take a handful of values.
* `mcnemar_exact` — the exact McNemar test for paired pass/fail: a two-sided binomial test
  (`scipy.stats.binomtest`, p = 0.5) on the discordant pairs only.
* `flip_test` — the same exact test, one-sided: is there an excess of *flips* (pass → fail) over
  *fixes* (fail → pass)? A gate asks one direction; a two-sided p would halve its power for nothing.
* `min_attainable_p` / `sign_flip_min_p` — the smallest p-value a test can give with this many
  discordant pairs (nonzero differences): with 3 discordant queries a one-sided exact test can never
  go below 1/8, so it can never be significant at 0.05 and must not count in a multiple-testing family.
* `tarone_holm` — Tarone's family selection for discrete tests (only tests whose minimum attainable p
  can reach alpha/K count, K the family size) with Holm's step-down inside it, re-selected at every
  step (Hommel & Krummenauer, 1998): untestable metrics cannot dilute the correction.
* `cohens_dz` — effect size of paired data: mean difference / SD of the differences (ddof 1).
* `holm_adjust` — plain Holm–Bonferroni adjusted p-values (every test counts; see `tarone_holm`).
* `noise_components` — variance across re-judgings of one transcript (judge noise) and across agent
  runs of one query (agent noise), each averaged over the cells that have ≥ 2 values.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from sensei_eval.core.extras import requires_extra

__all__ = (
    'Alternative',
    'BootstrapCI',
    'FlipTestResult',
    'McNemarResult',
    'NoiseEstimate',
    'TaroneHolmResult',
    'cohens_dz',
    'effect_label',
    'flip_test',
    'holm_adjust',
    'mcnemar_exact',
    'metric_rng',
    'min_attainable_p',
    'noise_components',
    'paired_bootstrap_ci',
    'sign_flip_min_p',
    'sign_flip_test',
    'tarone_holm',
)

# The alternative hypothesis, in one vocabulary for both tests: 'worse' = more flips (pass → fail) than
# fixes, or mean(new − old) < 0; 'better' = the reverse; 'two-sided' = either.
Alternative = Literal['worse', 'better', 'two-sided']

# Up to this many non-zero differences the sign-flip test enumerates all 2^m sign patterns (exact p);
# 2^20 sums of 8 bytes are 8 MB and a few milliseconds. Above, it draws `resamples` random patterns
# (DEFAULT_PERMUTATIONS unless asked): 2^m sums would no longer fit in memory for long.
EXACT_MAX_NONZERO = 20
DEFAULT_PERMUTATIONS = 9_999
# Two statistics closer than this (relative to the largest |difference|) are the same value: sums of
# the same numbers in another order differ in the last bits, and a p-value must not depend on that.
_TIE_TOLERANCE = 1e-9
DEFAULT_BOOTSTRAP = 2_000


@dataclass(frozen=True)
class BootstrapCI:
    """A percentile bootstrap interval for the mean paired difference."""

    low: float
    high: float
    level: float
    resamples: int


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar: `b` pairs went pass → fail, `c` went fail → pass; p is two-sided."""

    b: int
    c: int
    p_value: float

    @property
    def discordant(self) -> int:
        return self.b + self.c


@dataclass(frozen=True)
class FlipTestResult:
    """Exact one-sided McNemar (sign test on the discordant pairs).

    `flips`: queries that passed before and fail after; `fixes`: failed before, pass after.
    `p_value` is for `alternative` ('worse' = more flips than fixes, i.e. a regression);
    `min_attainable_p` is the smallest p this test could have given with this many discordant pairs.
    """

    flips: int
    fixes: int
    p_value: float
    min_attainable_p: float
    alternative: Alternative = 'worse'

    @property
    def discordant(self) -> int:
        return self.flips + self.fixes


@dataclass(frozen=True)
class TaroneHolmResult:
    """Outcome of `tarone_holm` at one alpha.

    `k`: Tarone's K at the first step (the multiplier of the smallest p); `k_stop`: K among the tests
    left where the step-down stopped. `family`: the rejected tests plus those left whose minimum
    attainable p ≤ alpha / k_stop; `dropped`: every other test, with its minimum attainable p — it
    could never be significant at alpha / k_stop, so it did not count in the correction.
    `adjusted[key]`: the step-down adjusted p (p × K at its step, running maximum; ≤ alpha exactly
    when rejected — tied to this alpha, because the family is). `rejected`: in step-down order.
    """

    alpha: float
    k: int
    k_stop: int
    family: list[str]
    dropped: dict[str, float]
    adjusted: dict[str, float]
    rejected: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NoiseEstimate:
    """Variance components of one side's scores (None where not measurable: fewer than 2 values).

    `judge_var`: mean over (query, run) of the variance across J re-judgings of the same transcript.
    `run_var`: mean over queries of the variance across R runs of the per-run mean score; it contains
    judge noise divided by J, so `agent_var = max(0, run_var − judge_var / J)` is the agent's own part.
    `query_mean_var`: the noise variance of one query's mean score (what the comparison pairs).
    """

    judge_var: float | None
    run_var: float | None
    agent_var: float | None
    query_mean_var: float | None
    runs: int
    repeats: int


def paired_bootstrap_ci(
    old: Sequence[float],
    new: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = DEFAULT_BOOTSTRAP,
    rng: np.random.Generator | int | None = 0,
) -> BootstrapCI:
    """Percentile CI of mean(new − old): resample the *pairs* (queries) with replacement.

    The differences are sorted first, so the same pairs in any order give the same interval for a seed."""
    diffs = np.sort(_diffs(old, new))
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    idx = generator.integers(0, len(diffs), size=(resamples, len(diffs)))
    means = diffs[idx].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return BootstrapCI(float(low), float(high), level, resamples)


def metric_rng(seed: int, metric: str) -> np.random.Generator:
    """The generator of one metric's resampling: from the run's seed and the metric's name, so a metric's
    interval and p do not depend on what was computed before it (`validate` and the optimizer share it)."""
    return np.random.default_rng([seed, zlib.crc32(metric.encode())])


def sign_flip_test(
    old: Sequence[float],
    new: Sequence[float],
    *,
    resamples: int = DEFAULT_PERMUTATIONS,
    rng: np.random.Generator | int | None = 0,
    alternative: Alternative = 'two-sided',
) -> float:
    """p-value of the paired sign-flip test of mean(new − old) = 0 over the non-zero differences.

    `alternative` 'worse' tests for a drop (mean(new − old) < 0), 'better' for a rise, as in `flip_test`.
    Zero differences are left out (Wilcoxon's convention); with m non-zero differences the p is exact
    (all 2^m sign patterns) when m ≤ `EXACT_MAX_NONZERO`, else Monte Carlo with
    `resamples` patterns drawn from `rng` (seeded: the same seed, the same p). The differences are
    sorted first, so the order of the pairs never changes the p. p = 1 when no difference is non-zero.
    """
    magnitudes, observed = _nonzero(old, new)
    m = len(magnitudes)
    if m == 0:
        return 1.0  # every pair identical: no evidence of any change
    tol = _TIE_TOLERANCE * float(magnitudes[-1]) * m
    if _exact(m):
        sums = _all_sign_sums(magnitudes)
        hits, total = _hits(sums, observed, tol, alternative), sums.size
        return float(min(1.0, hits / total))
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    hits = 0
    done = 0
    chunk = max(1, min(resamples, 2**22 // m))  # at most ~32 MB of signs at a time
    while done < resamples:
        size = min(chunk, resamples - done)
        signs = generator.integers(0, 2, size=(size, m), dtype=np.int8) * 2 - 1
        hits += _hits(signs @ magnitudes, observed, tol, alternative)
        done += size
    return float(min(1.0, (hits + 1) / (resamples + 1)))


def mcnemar_exact(old_passed: Sequence[bool], new_passed: Sequence[bool]) -> McNemarResult:
    """Exact McNemar test on paired pass/fail outcomes; p = 1 when no pair changed."""
    with requires_extra('stats', 'the before/after gate'):
        from scipy import stats

    if len(old_passed) != len(new_passed):
        raise ValueError('paired samples must have the same length')
    b = sum(1 for o, n in zip(old_passed, new_passed, strict=True) if o and not n)
    c = sum(1 for o, n in zip(old_passed, new_passed, strict=True) if n and not o)
    if b + c == 0:
        return McNemarResult(0, 0, 1.0)
    p = stats.binomtest(c, b + c, 0.5, alternative='two-sided').pvalue
    return McNemarResult(b, c, float(min(1.0, p)))


def flip_test(old_passed: Sequence[bool], new_passed: Sequence[bool], *, alternative: Alternative = 'worse') -> FlipTestResult:
    """Exact McNemar, one-sided by default: P(at least this many flips | discordant pairs, no change).

    Under no change a discordant query is as likely to be a flip as a fix, whatever the agent and judge
    noise (the two sides are exchangeable), so the flips are Binomial(flips + fixes, ½). p = 1 and
    minimum attainable p = 1 when no query changed: there is nothing to test.
    """
    with requires_extra('stats', 'the before/after gate'):
        from scipy import stats

    if len(old_passed) != len(new_passed):
        raise ValueError('paired samples must have the same length')
    flips = sum(1 for o, n in zip(old_passed, new_passed, strict=True) if o and not n)
    fixes = sum(1 for o, n in zip(old_passed, new_passed, strict=True) if n and not o)
    floor = min_attainable_p(flips + fixes, alternative)
    if flips + fixes == 0:
        return FlipTestResult(0, 0, 1.0, floor, alternative)
    # binomtest on the flips: 'greater' = more flips than half the discordant pairs
    scipy_alternative = {'worse': 'greater', 'better': 'less', 'two-sided': 'two-sided'}[alternative]
    p = stats.binomtest(flips, flips + fixes, 0.5, alternative=scipy_alternative).pvalue
    return FlipTestResult(flips, fixes, float(min(1.0, p)), floor, alternative)


def min_attainable_p(discordant: int, alternative: Alternative = 'worse') -> float:
    """Smallest p an exact sign test on `discordant` pairs can give: ½^n one-sided, 2·½^n two-sided."""
    if discordant <= 0:
        return 1.0
    one_sided = 0.5**discordant
    return one_sided if alternative != 'two-sided' else min(1.0, 2 * one_sided)


def sign_flip_min_p(
    old: Sequence[float], new: Sequence[float], *, resamples: int = DEFAULT_PERMUTATIONS, alternative: Alternative = 'worse'
) -> float:
    """Smallest p `sign_flip_test` can give on these pairs: every non-zero difference the same sign.

    Zero differences do not count (they left the test): exact enumeration of m non-zero differences gives
    ½^m one-sided (2·½^m two-sided); Monte Carlo adds one to the count and the number of resamples, so
    it never goes below 1 / (resamples + 1).
    """
    nonzero = len(_nonzero(old, new)[0])
    floor = min_attainable_p(nonzero, alternative)
    if nonzero and not _exact(nonzero):
        floor = max(floor, 1.0 / (resamples + 1))
    return floor


def tarone_holm(p_values: Mapping[str, float], min_p: Mapping[str, float], alpha: float) -> TaroneHolmResult:
    """Holm's step-down over Tarone's family, re-selected at every step (Hommel & Krummenauer, 1998).

    At each step, among the hypotheses not yet rejected: k = the smallest k ≥ 1 with at most k of them
    having a minimum attainable p ≤ alpha / k (Tarone, 1990); the smallest p is rejected when it is
    ≤ alpha / k. A test that could never reach alpha / k — above all one with no discordant pair — does
    not enlarge k, so it cannot dilute the others. The family depends only on the minimum attainable
    p-values (the number of discordant pairs), never on which way they went, and each step is a
    shortcut of the closed test whose local tests are Tarone's, so the family-wise error rate stays ≤ alpha.
    """
    if set(p_values) != set(min_p):
        raise ValueError('p_values and min_p must have the same keys')
    order = sorted(p_values, key=lambda key: (p_values[key], key))
    k_first = _tarone_k([min_p[key] for key in order], alpha)
    adjusted: dict[str, float] = {}
    rejected: list[str] = []
    running = 0.0
    for step, key in enumerate(order):
        k = _tarone_k([min_p[other] for other in order[step:]], alpha)
        running = max(running, min(1.0, p_values[key] * k))
        adjusted[key] = running
        if len(rejected) == step and min_p[key] <= alpha / k and p_values[key] <= alpha / k:
            rejected.append(key)
    # where the step-down stopped: Tarone's family among the hypotheses left, plus those rejected before
    left = order[len(rejected) :]
    k_stop = _tarone_k([min_p[key] for key in left], alpha)
    family = rejected + [key for key in left if min_p[key] <= alpha / k_stop]
    dropped = {key: min_p[key] for key in left if min_p[key] > alpha / k_stop}
    return TaroneHolmResult(
        alpha=alpha, k=k_first, k_stop=k_stop, family=family, dropped=dropped, adjusted=adjusted, rejected=rejected
    )


def cohens_dz(old: Sequence[float], new: Sequence[float]) -> float | None:
    """Cohen's d_z = mean(d) / sd(d) with d = new − old; None when it is undefined (n < 2 or sd = 0)."""
    diffs = _diffs(old, new)
    if len(diffs) < 2:
        return None
    sd = float(np.std(diffs, ddof=1))
    if sd == 0.0:
        return None
    return float(np.mean(diffs)) / sd


def effect_label(dz: float | None) -> str:
    """Cohen's conventional words for |d|: negligible < 0.2 ≤ small < 0.5 ≤ medium < 0.8 ≤ large."""
    if dz is None:
        return 'n/a'
    size = abs(dz)
    if size < 0.2:
        return 'negligible'
    if size < 0.5:
        return 'small'
    if size < 0.8:
        return 'medium'
    return 'large'


def holm_adjust(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm–Bonferroni step-down adjusted p-values (monotone, capped at 1), keyed like the input."""
    ordered = sorted(p_values.items(), key=lambda kv: (kv[1], kv[0]))
    m = len(ordered)
    adjusted: dict[str, float] = {}
    running = 0.0
    for i, (key, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - i) * p))
        adjusted[key] = running
    return adjusted


def noise_components(cells: Mapping[str, Mapping[int, Sequence[float]]], *, runs: int, repeats: int) -> NoiseEstimate:
    """Noise of one side from `cells[query][run] = [score per re-judging]` (missing values left out)."""
    judge_vars = [float(np.var(v, ddof=1)) for runs_ in cells.values() for v in runs_.values() if len(v) >= 2]
    run_vars = []
    for runs_ in cells.values():
        run_means = [sum(v) / len(v) for v in runs_.values() if v]
        if len(run_means) >= 2:
            run_vars.append(float(np.var(run_means, ddof=1)))
    judge_var = float(np.mean(judge_vars)) if judge_vars else None
    run_var = float(np.mean(run_vars)) if run_vars else None
    agent_var = None
    if run_var is not None:
        agent_var = max(0.0, run_var - (judge_var / repeats if judge_var is not None else 0.0))
    # noise variance of a query's mean over R runs × J repeats
    query_mean_var = None
    if run_var is not None:
        query_mean_var = run_var / max(1, runs)
    elif judge_var is not None:
        query_mean_var = judge_var / max(1, runs * repeats)
    return NoiseEstimate(judge_var, run_var, agent_var, query_mean_var, runs, repeats)


# ---------------------------------------------------------------------------------------------------
# Helpers


def _diffs(old: Sequence[float], new: Sequence[float]) -> np.ndarray:
    if len(old) != len(new):
        raise ValueError('paired samples must have the same length')
    if not old:
        raise ValueError('no pairs')
    diffs: np.ndarray = np.asarray(new, dtype=float) - np.asarray(old, dtype=float)
    return diffs


def _tarone_k(min_ps: Sequence[float], alpha: float) -> int:
    """Tarone's K: the smallest k ≥ 1 such that at most k tests can reach p ≤ alpha / k."""
    k = 1
    while sum(1 for p in min_ps if p <= alpha / k) > k:
        k += 1
    return k


def _nonzero(old: Sequence[float], new: Sequence[float]) -> tuple[np.ndarray, float]:
    """The non-zero |differences| sorted ascending, and the observed sum of the signed differences
    (summed in that same order, so the pairs' order cannot change a bit of it)."""
    diffs = _diffs(old, new)
    diffs = diffs[diffs != 0.0]
    order = np.lexsort((diffs, np.abs(diffs)))
    diffs = diffs[order]
    magnitudes: np.ndarray = np.abs(diffs)
    return magnitudes, float(np.sum(diffs))


def _exact(nonzero: int) -> bool:
    return nonzero <= EXACT_MAX_NONZERO


def _all_sign_sums(magnitudes: np.ndarray) -> np.ndarray:
    """The 2^m sums Σ ±|d_i| over every sign pattern, built one difference at a time (2^m floats)."""
    sums = np.zeros(1)
    for d in magnitudes:
        sums = np.concatenate((sums + d, sums - d))
    return sums


def _hits(sums: np.ndarray, observed: float, tol: float, alternative: Alternative) -> int:
    """How many sign patterns give a statistic at least as extreme as the observed one."""
    if alternative == 'better':
        return int(np.count_nonzero(sums >= observed - tol))
    if alternative == 'worse':
        return int(np.count_nonzero(sums <= observed + tol))
    return int(np.count_nonzero(np.abs(sums) >= abs(observed) - tol))
