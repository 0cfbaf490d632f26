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


def test_flip_test_is_the_one_sided_binomial_on_discordant_pairs() -> None:
    # 5 flips (pass → fail), 1 fix, 4 unchanged
    old = [True] * 5 + [False] + [True] * 2 + [False] * 2
    new = [False] * 5 + [True] + [True] * 2 + [False] * 2
    worse = stats.flip_test(old, new)
    assert (worse.flips, worse.fixes, worse.discordant, worse.alternative) == (5, 1, 6, 'worse')
    # P(X ≥ 5), X ~ Bin(6, ½) = (6 + 1) / 64
    assert worse.p_value == pytest.approx(7 / 64)
    assert worse.min_attainable_p == pytest.approx(1 / 64)
    better = stats.flip_test(old, new, alternative='better')  # P(X ≤ 5) = 1 − 1/64
    assert better.p_value == pytest.approx(63 / 64)
    assert stats.flip_test(old, new, alternative='two-sided').p_value == pytest.approx(14 / 64)
    none = stats.flip_test([True, False], [True, False])
    assert (none.p_value, none.min_attainable_p) == (1.0, 1.0)  # nothing changed: nothing to test
    with pytest.raises(ValueError, match='same length'):
        stats.flip_test([True], [True, False])


def test_min_attainable_p_by_hand() -> None:
    assert stats.min_attainable_p(0) == 1.0
    assert stats.min_attainable_p(4) == 1 / 16 and stats.min_attainable_p(4, 'two-sided') == 2 / 16
    # at alpha 0.05 one-sided, 4 discordant queries can never be significant (1/16), 5 can (1/32)
    assert stats.min_attainable_p(4) > 0.05 >= stats.min_attainable_p(5, 'better')
    # sign-flip: exact up to 20 non-zero differences, so ½^nonzero (ties left out); above, Monte Carlo's floor
    assert stats.sign_flip_min_p([1.0, 1.0, 0.5], [0.5, 1.0, 0.0]) == 1 / 4
    assert stats.sign_flip_min_p([1.0] * 20, [0.0] * 20, resamples=999) == 0.5**20
    assert stats.sign_flip_min_p([1.0] * 25, [0.0] * 25, resamples=999) == pytest.approx(1 / 1000)
    assert stats.sign_flip_min_p([1.0] * 25 + [0.5] * 100, [0.0] * 25 + [0.5] * 100, resamples=999) == pytest.approx(1 / 1000)


def test_sign_flip_one_sided_directions() -> None:
    # five identical drops: only the all-minus pattern of 2^5 is as low
    assert stats.sign_flip_test([1.0] * 5, [0.5] * 5, alternative='worse') == pytest.approx(1 / 32)
    assert stats.sign_flip_test([1.0] * 5, [0.5] * 5, alternative='better') == pytest.approx(1.0)
    assert stats.sign_flip_test([0.5] * 5, [1.0] * 5, alternative='better') == pytest.approx(1 / 32)


def test_tarone_holm_drops_untestable_metrics_by_hand() -> None:
    # one real regression (8 flips of 8: p = min p = 1/256) and five metrics where nothing changed
    p = {'broken': 1 / 256, **{f'same{i}': 1.0 for i in range(5)}}
    floor = {'broken': 1 / 256, **{f'same{i}': 1.0 for i in range(5)}}
    r = stats.tarone_holm(p, floor, 0.05)
    assert (r.k, r.family, r.rejected) == (1, ['broken'], ['broken'])
    assert r.adjusted['broken'] == pytest.approx(1 / 256)  # not multiplied by 6
    assert set(r.dropped) == {f'same{i}' for i in range(5)}
    # plain Holm over all six would multiply by 6
    assert stats.holm_adjust(p)['broken'] == pytest.approx(6 / 256)


def test_tarone_holm_step_down_by_hand() -> None:
    p = {'a': 0.004, 'b': 0.04, 'c': 0.03, 'd': 0.2}
    floor = {'a': 0.004, 'b': 0.004, 'c': 0.03, 'd': 0.125}
    r = stats.tarone_holm(p, floor, 0.05)
    # step 1: floors ≤ 0.05 are a, b, c (3 > 1); ≤ 0.025 are a, b (2 ≤ 2) → K = 2: a 0.004 ≤ 0.025, rejected
    # step 2 (b, c, d left): ≤ 0.05 are b, c (2 > 1); ≤ 0.025 only b → K = 2; smallest p is c 0.03 > 0.025: stop
    # (adjusted p: c 0.03·2 = 0.06; b 0.04·1 = 0.04 raised to the running maximum 0.06; d 0.2)
    assert r.k == 2 and r.k_stop == 2 and r.rejected == ['a']
    assert r.family == ['a', 'b'] and r.dropped == {'c': 0.03, 'd': 0.125}
    assert r.adjusted == {'a': pytest.approx(0.008), 'c': pytest.approx(0.06), 'b': pytest.approx(0.06), 'd': pytest.approx(0.2)}
    # a test dropped at the first step re-enters once rejections shrink K: c at K = 1 after a and b
    r2 = stats.tarone_holm({**p, 'b': 0.01}, floor, 0.05)
    assert r2.rejected == ['a', 'b', 'c'] and r2.dropped == {'d': 0.125}
    assert all((r2.adjusted[key] <= 0.05) == (key in r2.rejected) for key in p)
    with pytest.raises(ValueError, match='same keys'):
        stats.tarone_holm({'a': 0.1}, {}, 0.05)


def test_zero_differences_leave_the_test_and_the_p_is_exact_whatever_the_seed() -> None:
    """The issue's case: 6 queries improved, none hurt, 8 ties → one-sided p = 1/64 exactly, in every seed.

    (The old rule sampled 9,999 of the 2^14 sign patterns of all 14 pairs: p 0.0147–0.0177 by seed.)"""
    old = [0.5] * 6 + [1.0] * 8
    new = [1.0] * 6 + [1.0] * 8
    ps = {stats.sign_flip_test(old, new, alternative='better', rng=seed) for seed in range(10)}
    assert ps == {1 / 64}
    assert stats.sign_flip_min_p(old, new, alternative='better') == 1 / 64
    assert stats.sign_flip_test(old, new, alternative='worse') == 1.0
    # unequal gains: the observed sum is still the largest of the 2^6 patterns
    assert stats.sign_flip_test(old, [1.0, 0.75, 0.9, 0.6, 1.0, 0.55] + [1.0] * 8, alternative='better') == 1 / 64


def test_the_same_evidence_in_any_order_gives_the_same_p() -> None:
    rng = np.random.default_rng(7)
    for n in (14, 20, 40):  # exact (≤ 20 non-zero differences) and Monte Carlo beyond
        old = np.round(rng.uniform(0, 1, n), 2)
        new = np.round(np.clip(old + rng.normal(0.1, 0.3, n), 0, 1), 2)
        new[: n // 4] = old[: n // 4]  # some ties
        want = {alt: stats.sign_flip_test(list(old), list(new), alternative=alt) for alt in ('better', 'worse', 'two-sided')}
        for _ in range(5):
            order = rng.permutation(n)
            got = {alt: stats.sign_flip_test(list(old[order]), list(new[order]), alternative=alt) for alt in want}
            assert got == want


def test_exact_up_to_twenty_changed_queries_and_seeded_beyond() -> None:
    # 20 non-zero differences among 30 pairs: all 2^20 patterns, against the count by a binomial
    old = [0.0] * 20 + [1.0] * 10
    new = [1.0] * 15 + [-1.0] * 5 + [1.0] * 10
    from math import comb

    # equal |d|: the sum is ≥ observed when at least 15 of the 20 signs are +
    assert stats.sign_flip_test(old, new, alternative='better') == pytest.approx(sum(comb(20, k) for k in range(15, 21)) / 2**20)
    # 30 non-zero: Monte Carlo, (hits + 1) / (R + 1), the same p for the same seed
    old30, new30 = [0.0] * 30, [1.0] * 21 + [-1.0] * 9
    a = stats.sign_flip_test(old30, new30, alternative='better', rng=3)
    assert a == stats.sign_flip_test(old30, new30, alternative='better', rng=3)
    exact = sum(comb(30, k) for k in range(21, 31)) / 2**30
    assert a == pytest.approx(exact, abs=0.01)
