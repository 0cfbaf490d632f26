"""What the before/after gate's flip rule can detect: exact figures for docs/gate.md.

Prints four tables:

1. the smallest regression the gate can flag: the fewest flips (pass → fail, with no fix) whose
   one-sided exact McNemar p reaches alpha / k, for k metrics in the Tarone–Holm family, and what
   share of 10 / 20 / 50 / 100 queries that is;
2. the same with a background of fixes (noise moves some queries the other way): flips needed;
3. the power to flag a regression of a given flip rate, computed exactly (sum over the binomial
   number of discordant queries and the binomial split into flips and fixes), at the first Holm step
   (level alpha / k, the worst case: the regression is the only rejection in a family of k);
4. a simulation of the whole family (the gate's own `stats.tarone_holm`): A/A false alarms, and the
   power against one regressed metric among five where nothing changed, next to plain Holm over the
   two-sided tests of every metric (the rule this replaced).

Run: `python benchmarks/gate_power.py` (about 25 s of CPU; `--reps` sets the simulation size).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import scipy
from scipy import stats as sp

from sensei_eval.validate import stats

ALPHA = 0.05
SIZES = (10, 20, 50, 100)
FAMILY = (1, 2, 4, 7, 16)


def min_flips(k: int, fixes: int = 0, alpha: float = ALPHA, limit: int = 200) -> int | None:
    """Fewest flips with `fixes` fixes whose one-sided exact p ≤ alpha / k."""
    for flips in range(1, limit):
        if sp.binom.sf(flips - 1, flips + fixes, 0.5) <= alpha / k:
            return flips
    return None


def critical_flips(discordant: int, level: float) -> int:
    """Smallest number of flips among `discordant` queries that is significant at `level` (d + 1: never)."""
    flips = np.arange(discordant + 1)
    p = sp.binom.sf(flips - 1, discordant, 0.5)
    ok = np.nonzero(p <= level)[0]
    return int(ok[0]) if ok.size else discordant + 1


def power(n: int, flip_rate: float, fix_rate: float, level: float) -> float:
    """Exact P(one-sided exact McNemar ≤ level) when each query flips w.p. flip_rate, is fixed w.p. fix_rate."""
    churn = flip_rate + fix_rate
    if churn == 0:
        return 0.0
    share = flip_rate / churn
    total = 0.0
    for d in range(n + 1):
        b = critical_flips(d, level)
        if b <= d:
            total += sp.binom.pmf(d, n, churn) * sp.binom.sf(b - 1, d, share)
    return float(total)


def table_minimal() -> list[str]:
    head = (
        '| metrics in the family (k) | alpha / k | fewest flips (0 fixes) | ' + ' | '.join(f'share of {n}' for n in SIZES) + ' |'
    )
    out = [head, '|' + '---|' * (3 + len(SIZES))]
    for k in FAMILY:
        m = min_flips(k)
        assert m is not None
        shares = ' | '.join(f'{m / n:.0%}' if m <= n else 'impossible' for n in SIZES)
        out.append(f'| {k} | {ALPHA / k:.4f} | {m} | {shares} |')
    return out


def table_with_fixes() -> list[str]:
    fixes = (0, 1, 2, 3, 5, 10)
    out = ['| k \\ fixes | ' + ' | '.join(str(f) for f in fixes) + ' |', '|' + '---|' * (1 + len(fixes))]
    for k in (1, 7):
        out.append(f'| {k} | ' + ' | '.join(str(min_flips(k, f)) for f in fixes) + ' |')
    return out


def table_power() -> list[str]:
    rates = (0.05, 0.10, 0.20, 0.30)
    out = []
    for noise in (0.0, 0.10):
        for k in (1, 7):
            out.append('')
            out.append(
                f'k = {k} (level {ALPHA / k:.4f}); background churn {noise:.0%} '
                f'(each query flips w.p. {noise / 2:.0%} and is fixed w.p. {noise / 2:.0%} by noise alone):'
            )
            out.append('')
            out.append('| queries | ' + ' | '.join(f'+{r:.0%} flips' for r in rates) + ' |')
            out.append('|' + '---|' * (1 + len(rates)))
            for n in SIZES:
                cells = ' | '.join(f'{power(n, r + noise / 2, noise / 2, ALPHA / k):.2f}' for r in rates)
                out.append(f'| {n} | {cells} |')
    return out


def simulate(reps: int, seed: int) -> list[str]:
    """Six pass/fail metrics on n queries; A/A (both sides drawn independently, pass w.p. 0.7) and one
    metric regressed (8 of 19-style: flip rate 0.4 of passing queries) among five untouched ones."""
    rng = np.random.default_rng(seed)
    out = [
        '| scenario | queries | flagged: Tarone–Holm, one-sided flip test | flagged: plain Holm, two-sided McNemar, all 6 |',
        '|---|---|---|---|',
    ]

    def run(n: int, regress: float, identical_others: bool) -> tuple[float, float]:
        new_rule = old_rule = 0
        for _ in range(reps):
            p_one: dict[str, float] = {}
            floor: dict[str, float] = {}
            p_two: dict[str, float] = {}
            for j in range(6):
                old = rng.random(n) < 0.7
                if j == 0 and regress:
                    new = old & (rng.random(n) >= regress)  # a passing query breaks w.p. `regress`
                elif j == 0 or not identical_others:
                    new = rng.random(n) < 0.7  # an independent draw: pure noise
                else:
                    new = old.copy()  # nothing changed
                flips, fixes = int(np.sum(old & ~new)), int(np.sum(new & ~old))
                d = flips + fixes
                p_one[f'm{j}'] = float(sp.binom.sf(flips - 1, d, 0.5)) if d else 1.0
                p_two[f'm{j}'] = (
                    float(min(1.0, 2 * min(sp.binom.cdf(flips, d, 0.5), sp.binom.sf(flips - 1, d, 0.5)))) if d else 1.0
                )
                floor[f'm{j}'] = stats.min_attainable_p(d)
            # A/A: any rejection is a false alarm; with a regression: did m0 get caught?
            rejected = stats.tarone_holm(p_one, floor, ALPHA).rejected
            adjusted = stats.holm_adjust(p_two)
            if regress:
                new_rule += 'm0' in rejected
                old_rule += adjusted['m0'] <= ALPHA
            else:
                new_rule += bool(rejected)
                old_rule += any(v <= ALPHA for v in adjusted.values())
        return new_rule / reps, old_rule / reps

    for n in (19, 50):
        a_a = run(n, 0.0, identical_others=False)
        out.append(f'| A/A: 6 metrics, every side drawn independently | {n} | {a_a[0]:.3f} | {a_a[1]:.3f} |')
    for n in (19, 50):
        hit = run(n, 0.4, identical_others=True)
        out.append(f'| 1 metric: 40% of passing queries break; 5 metrics identical | {n} | {hit[0]:.3f} | {hit[1]:.3f} |')
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--reps', type=int, default=2000, help='simulation repetitions per row')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--quick', action='store_true', help='100 repetitions: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.reps = 100
    print(f'alpha {ALPHA} (one-sided), exact binomial computations with scipy {scipy.__version__}')
    print()
    print('1. Smallest detectable regression: flips with no fix that reach alpha / k')
    print()
    print('\n'.join(table_minimal()))
    print()
    print('2. Flips needed when some queries were fixed at the same time')
    print()
    print('\n'.join(table_with_fixes()))
    print()
    print('3. Power (exact) to flag a metric whose flip rate rose by the column value')
    print('\n'.join(table_power()))
    print()
    print(f'4. Simulation of the family, {args.reps} repetitions per row (seed {args.seed})')
    print()
    print('\n'.join(simulate(args.reps, args.seed)))
    print()
    print(f'(with no fix, k metrics need ⌈log2(k / alpha)⌉ flips: {math.ceil(math.log2(7 / ALPHA))} for k = 7)')


if __name__ == '__main__':
    main()
