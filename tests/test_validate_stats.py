"""The validator's statistics against values worked out by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sensei_eval.validate import stats


def test_mcnemar_exact_matches_the_binomial_by_hand() -> None:
    # 8 pass→fail, 1 fail→pass, 3 unchanged pass, 2 unchanged fail
    old = [True] * 8 + [False] + [True] * 3 + [False] * 2
    new = [False] * 8 + [True] + [True] * 3 + [False] * 2
    r = stats.mcnemar_exact(old, new)
    assert (r.b, r.c, r.discordant) == (8, 1, 9)
    # two-sided exact: 2 · P(X ≤ 1), X ~ Bin(9, ½) = 2 · (1 + 9) / 512
    assert r.p_value == pytest.approx(20 / 512)
    assert stats.mcnemar_exact([True, False], [True, False]).p_value == 1.0  # no discordant pair
    assert stats.mcnemar_exact([True] * 3 + [False] * 3, [False] * 3 + [True] * 3).p_value == 1.0  # balanced


def test_sign_flip_test_is_exact_for_small_samples() -> None:
    # five identical positive differences: only "all +" and "all −" of 2^5 sign patterns are as extreme
    assert stats.sign_flip_test([0.5] * 5, [1.0] * 5) == pytest.approx(2 / 32)
    old = [1.0, 1.0, 0.5, 1.0, 0.5, 1.0, 1.0, 0.0]
    new = [0.5, 0.5, 0.5, 0.0, 0.5, 1.0, 0.5, 0.5]
    d = np.subtract(new, old)
    observed = abs(d.mean())
    extreme = sum(1 for signs in itertools.product([1, -1], repeat=len(d)) if abs((d * signs).mean()) >= observed - 1e-12)
    assert stats.sign_flip_test(old, new) == pytest.approx(extreme / 2 ** len(d))
    assert stats.sign_flip_test([1.0, 0.5], [1.0, 0.5]) == 1.0  # nothing changed


def test_bootstrap_ci_against_the_exact_bootstrap_distribution() -> None:
    old = [1.0, 1.0, 0.5]
    new = [0.5, 1.0, 1.0]
    d = np.subtract(new, old)  # [-0.5, 0, 0.5]
    # all 27 equally likely resamples of 3 pairs, by hand
    means = sorted(float(np.mean([d[i] for i in idx])) for idx in itertools.product(range(3), repeat=3))
    assert means[0] == -0.5 and means[-1] == 0.5
    ci = stats.paired_bootstrap_ci(old, new, resamples=20_000, rng=1)
    # P(mean = −0.5) = 1/27 ≈ 3.7% > 2.5%, so the exact 2.5th percentile is −0.5; likewise +0.5 on top
    assert ci.low == pytest.approx(-0.5) and ci.high == pytest.approx(0.5)
    narrow = stats.paired_bootstrap_ci([0.0, 0.5], [0.25, 0.75])  # every difference is +0.25
    assert (narrow.low, narrow.high) == (pytest.approx(0.25), pytest.approx(0.25))
    # reproducible from the seed
    a = stats.paired_bootstrap_ci([0, 1, 0.5, 1], [1, 1, 0, 0.5], rng=3)
    b = stats.paired_bootstrap_ci([0, 1, 0.5, 1], [1, 1, 0, 0.5], rng=3)
    assert a == b


def test_cohens_dz_by_hand() -> None:
    old = [0.5, 1.0, 0.0, 0.5]
    new = [1.0, 1.0, 1.0, 1.0]  # d = [0.5, 0, 1, 0.5]: mean 0.5, sd = sqrt(0.5 / 3)
    assert stats.cohens_dz(old, new) == pytest.approx(0.5 / math.sqrt(0.5 / 3))
    assert stats.effect_label(stats.cohens_dz(old, new)) == 'large'
    assert stats.cohens_dz([0.0, 0.0], [1.0, 1.0]) is None  # sd 0: undefined, not infinite
    assert stats.effect_label(0.1) == 'negligible' and stats.effect_label(-0.3) == 'small' and stats.effect_label(0.6) == 'medium'


def test_holm_adjustment_by_hand() -> None:
    adjusted = stats.holm_adjust({'a': 0.01, 'b': 0.04, 'c': 0.03})
    # sorted: a 0.01·3 = 0.03; c 0.03·2 = 0.06; b 0.04·1 = 0.04 → raised to 0.06 (monotone)
    assert adjusted == {'a': pytest.approx(0.03), 'c': pytest.approx(0.06), 'b': pytest.approx(0.06)}
    assert stats.holm_adjust({'x': 0.6, 'y': 0.7}) == {'x': 1.0, 'y': 1.0}


def test_noise_components_by_hand() -> None:
    cells = {
        'q1': {1: [1.0, 0.5], 2: [1.0, 1.0]},
        'q2': {1: [0.5, 0.5], 2: [0.0, 0.5]},
    }
    est = stats.noise_components(cells, runs=2, repeats=2)
    # judge: variances (ddof 1) 0.125, 0, 0, 0.125 → 0.0625
    assert est.judge_var == pytest.approx(0.0625)
    # runs: means q1 [0.75, 1.0], q2 [0.5, 0.25] → variance 0.03125 each
    assert est.run_var == pytest.approx(0.03125)
    # agent part: 0.03125 − 0.0625 / 2 = 0 (all the run-to-run spread is judge noise)
    assert est.agent_var == pytest.approx(0.0)
    assert est.query_mean_var == pytest.approx(0.03125 / 2)
    single = stats.noise_components({'q': {1: [1.0]}}, runs=1, repeats=1)
    assert single.judge_var is None and single.run_var is None and single.query_mean_var is None
