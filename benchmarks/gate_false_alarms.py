"""A/A: the gate on one prompt against itself with a noisy agent — how often does it fail?

Both sides run the same billing prompt (`benchmarks/billing_agent.py`) on the same queries, each side
with its own agent noise: in `--noise` of its runs the agent forgets the account lookup, at random, so
the two sides' verdicts differ by chance alone. Judged by the reference check (no model), compared by
`validate.compare_reports` with the default thresholds (alpha 0.05, --max-drop 0.05). Every rule that can
fail the gate on the evidence is a test of the one Tarone–Holm family `--alpha` controls (the
`--max-drop` rule fails only inside it), so the share of seeds whose gate fails must stay at most alpha
(up to simulation error: with 100 seeds, a true rate of 5% shows 10 or more failures about 3% of the time).

Prints the failure rate next to alpha, and how many failures each rule caused.

    python benchmarks/gate_false_alarms.py [--seeds 100] [--queries 30] [--noise 0.2] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')

from scipy import stats as sp

from benchmarks.billing_agent import COMPONENTS, BillingRunner, make_queries
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.optimize.evaluate import evaluate_prompt
from sensei_eval.validate.compare import Resampling, compare_reports
from sensei_eval.validate.results import Thresholds

JUDGES = ['reference_check']


def one_seed(seed: int, queries: int, noise: float, runs: int, thresholds: Thresholds) -> tuple[bool, list[str], list[str], bool]:
    qs = make_queries(queries, seed, prefix='aa')
    prompt = COMPONENTS.build()
    judges = make_judges(JUDGES)
    _, old = asyncio.run(evaluate_prompt(prompt, qs, BillingRunner(noise=noise, seed=2 * seed), judges, None, runs=runs))
    _, new = asyncio.run(evaluate_prompt(prompt, qs, BillingRunner(noise=noise, seed=2 * seed + 1), judges, None, runs=runs))
    c = compare_reports(old, new, thresholds=thresholds, resampling=Resampling(seed=seed))
    overall = c.metric('overall')
    # the rule before: a drop beyond --max-drop whose bootstrap CI lies below 0 failed the gate, outside the family
    old_rule = overall.delta is not None and overall.delta < -thresholds.max_drop and (overall.ci_high or 0.0) < 0
    return not c.gate.passed, c.gate.reasons, c.warnings, old_rule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--seeds', type=int, default=100)
    parser.add_argument('--queries', type=int, default=30)
    parser.add_argument('--noise', type=float, default=0.2, help='share of runs in which the agent forgets the lookup')
    parser.add_argument('--runs', type=int, default=1, help='agent runs per query and side')
    parser.add_argument('--alpha', type=float, default=0.05)
    parser.add_argument('--quick', action='store_true', help='20 seeds')
    args = parser.parse_args()
    seeds = 20 if args.quick else args.seeds
    thresholds = Thresholds(alpha=args.alpha)
    start = time.perf_counter()
    failed = 0
    causes: Counter[str] = Counter()
    warned = old_rule = 0
    for seed in range(seeds):
        fails, reasons, warnings, before = one_seed(seed, args.queries, args.noise, args.runs, thresholds)
        failed += fails
        old_rule += fails or before
        warned += any('--max-drop' in w for w in warnings)
        for reason in reasons:
            causes['--max-drop' if '--max-drop' in reason else reason.split(' ', 1)[0]] += 1
    rate = failed / seeds
    # the chance of seeing this many failures or more if the true rate were alpha
    tail = float(sp.binom.sf(failed - 1, seeds, args.alpha)) if failed else 1.0
    print(
        f'A/A, one billing prompt against itself: {args.queries} queries, {args.runs} run(s), noise {args.noise:.0%}, '
        f'judge reference_check, {seeds} seeds, {time.perf_counter() - start:.1f} s'
    )
    chance = f'P(≥ {failed} | rate alpha) = {tail:.3f}'
    print(f'gate failed in {failed}/{seeds} seeds = {rate:.1%}   (alpha {args.alpha:.1%}; {chance})')
    print('failures by rule: ' + (', '.join(f'{k} {v}' for k, v in causes.most_common()) or 'none'))
    print(f'seeds with a --max-drop warning (a drop the family did not reject: reported, not failed): {warned}')
    before = f'{old_rule}/{seeds} = {old_rule / seeds:.1%}'
    print(f'gate failed with --max-drop outside the family (the rule before: drop and CI below 0 failed): {before}')


if __name__ == '__main__':
    main()
