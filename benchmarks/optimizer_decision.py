"""The optimizer's decision on a real fix, seed after seed: same evidence, same answer, on validate's scale.

The agent is `benchmarks/billing_agent.py` without noise: it opens a ticket on a refund only when its
prompt says so (the hidden rule). Per seed, 4 train queries (2 refunds that fail the reference check,
2 balances that pass: all shown to the generator) and 14 fresh test queries: 6 refunds, which the real
fix helps, and 8 balances, which it leaves as they were. The generator (`proposer_lm('reliable')`)
writes only real fixes, 3 variants; one component has failures, so each test is at level
alpha / 1 / 3 = 0.0167. The evidence is the same in every seed — 6 improved, none hurt, 8 ties — and
the exact one-sided sign-flip p is 1/64 = 0.0156 < 0.0167: the fix must be accepted in every seed.

For contrast it prints the p the old rule gave on the same pairs (scipy's `permutation_test` over all
14 pairs, ties included, 9,999 random sign patterns: 2^14 is above the budget), seeded like the run.

And the suggestion's promised gain next to what `validate` reports on the same 14 queries (the overall
metric's Δ and 95% CI from `compare_reports` on the prompt before and after): the same scale, so the
same numbers.

    python benchmarks/optimizer_decision.py [--seeds 10] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')

import numpy as np
from scipy import stats as sp

from benchmarks.billing_agent import COMPONENT_MAP, COMPONENTS, BillingRunner, make_queries_of, proposer_lm
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.optimize.evaluate import evaluate_prompt
from sensei_eval.optimize.loop import SequentialOptimizer, build_suggestions
from sensei_eval.optimize.state import OptimizeConfig
from sensei_eval.optimize.variants import VariantGenerator
from sensei_eval.validate.compare import compare_reports

JUDGES = ['reference_check']
ALPHA = 0.05
# scipy >= 1.15 names the seed `rng`, older releases `random_state`
_RNG = 'rng' if 'rng' in inspect.signature(sp.permutation_test).parameters else 'random_state'


def old_rule_p(old: list[float], new: list[float], seed: int) -> float:
    """What the optimizer computed before: scipy's permutation test over every pair, 9,999 resamples."""
    result = sp.permutation_test(
        (np.asarray(old), np.asarray(new)),
        lambda x, y, axis: np.mean(y - x, axis=axis),
        permutation_type='samples',
        vectorized=True,
        n_resamples=9_999,
        alternative='greater',
        **{_RNG: np.random.default_rng(seed)},
    )
    return float(result.pvalue)


def one_seed(seed: int, tmp: Path) -> dict[str, object]:
    train = make_queries_of({'refund': 2, 'balance': 2}, seed, prefix='t')
    test = make_queries_of({'refund': 6, 'balance': 8}, seed, prefix='v')
    config = OptimizeConfig(
        variants=3, seed=seed, alpha=ALPHA, component_map=COMPONENT_MAP, validation_queries=[q.query_id for q in test],
        concurrency=4,
    )  # fmt: skip
    run_dir = tmp / f'seed-{seed}'
    optimizer = SequentialOptimizer(
        COMPONENTS, BillingRunner(noise=0.0, seed=seed), [*train, *test], make_judges(JUDGES), None,
        VariantGenerator(proposer_lm('reliable', seed)), run_dir, config,
    )  # fmt: skip
    state = asyncio.run(optimizer.run())
    tested = [c.validation for cs in state.components.values() for c in cs.candidates if c.validation is not None]
    first = tested[0] if tested else None
    suggestion = next(iter(build_suggestions(state, run_dir, JUDGES)), None)
    # validate on the same 14 queries: the prompt as it was against the optimized prompt
    optimized = COMPONENTS
    for name, text in state.current.items():
        optimized = optimized.with_text(name, text)
    judges = make_judges(JUDGES)
    _, before = asyncio.run(evaluate_prompt(COMPONENTS.build(), test, BillingRunner(noise=0.0, seed=seed), judges, None))
    _, after = asyncio.run(evaluate_prompt(optimized.build(), test, BillingRunner(noise=0.0, seed=seed), judges, None))
    overall = compare_reports(before, after).metric('overall')
    pairs = overall.per_query
    diffs = [new - old for old, new in pairs.values()]
    return {
        'accepted': 'workflow' in state.accepted,
        'p': None if first is None else first.p_value,
        'level': state.alpha_per_test,
        'improved': sum(1 for d in diffs if d > 0),
        'hurt': sum(1 for d in diffs if d < 0),
        'ties': sum(1 for d in diffs if d == 0),
        'old_p': old_rule_p([o for o, _ in pairs.values()], [n for _, n in pairs.values()], seed),
        'promised': None if suggestion is None else suggestion.validation_gain,
        'interval': None if suggestion is None else suggestion.gain_interval,
        'validate': overall.delta,
        'validate_ci': (overall.ci_low, overall.ci_high),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--seeds', type=int, default=10)
    parser.add_argument('--quick', action='store_true', help='3 seeds')
    args = parser.parse_args()
    seeds = 3 if args.quick else args.seeds
    print(f'billing agent, ticket rule hidden, no noise; 4 train + 14 test queries (6 refunds, 8 balances); {seeds} seed(s)')
    print(f'{"seed":>4} {"accepted":<9}{"evidence (+/-/=)":<18}{"exact p":>9}{"level":>8}{"old rule p":>12}'
          f'{"promised gain [95%]":>28}{"validate overall Δ [95% CI]":>32}{"s":>6}')  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as name:
        for seed in range(seeds):
            start = time.perf_counter()
            r = one_seed(seed, Path(name))
            rows.append(r)
            interval = r['interval']
            promised = 'n/a' if r['promised'] is None else f'{r["promised"]:+.3f}'
            if isinstance(interval, tuple):
                promised += f' [{interval[0]:+.3f}, {interval[1]:+.3f}]'
            low, high = r['validate_ci']  # type: ignore[misc]
            measured = f'{r["validate"]:+.3f} [{low:+.3f}, {high:+.3f}]'
            p = 'n/a' if r['p'] is None else f'{r["p"]:.4f}'
            evidence = f'{r["improved"]}/{r["hurt"]}/{r["ties"]}'
            print(
                f'{seed:>4} {r["accepted"]!s:<9}{evidence:<18}{p:>9}'
                f'{r["level"] or 0:>8.4f}{r["old_p"]:>12.4f}{promised:>28}{measured:>32}{time.perf_counter() - start:>6.1f}'
            )
    accepted = sum(1 for r in rows if r['accepted'])
    exact = {r['p'] for r in rows}
    old = [float(r['old_p']) for r in rows]  # type: ignore[arg-type]
    same_scale = sum(1 for r in rows if r['promised'] is not None and abs(float(r['promised']) - float(r['validate'])) < 1e-9)  # type: ignore[arg-type]
    print()
    print(f'accepted in {accepted}/{seeds} seeds')
    print(f'exact p over the seeds: {sorted(f"{p:.6f}" for p in exact if p is not None)} (1/64 = {1 / 64:.6f})')
    old_accepts = sum(1 for p in old if p < (rows[0]['level'] or 0))  # type: ignore[operator]
    print(f'old rule (Monte Carlo over all pairs): p {min(old):.4f} … {max(old):.4f}, would accept {old_accepts}/{seeds}')
    same_interval = sum(1 for r in rows if r['interval'] is not None and tuple(r['interval']) == tuple(r['validate_ci']))  # type: ignore[arg-type]
    print(f"promised gain equal to validate's overall Δ on the same queries: {same_scale}/{seeds}")
    print(f"promised 95% interval equal to validate's overall CI (default seed): {same_interval}/{seeds}")


if __name__ == '__main__':
    main()
