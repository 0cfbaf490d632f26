"""Power and safety of the sequential optimizer on an agent with hidden rules, next to dspy.GEPA.

The agent is `benchmarks/billing_agent.py`: a scripted billing agent (five prompt components) whose
runs hang on two rules the library is not told — open a ticket on refunds (~35% of the queries), pass
the currency to the invoice tool (~30%) — and that forgets the account lookup in 10% of its runs
(noise). Judged by the reference check (no model). The variant generator is a stand-in that writes
variants only from the failures it is sent (a third of its answers vague), with `--variants` per round.

Per seed (a new query set, split, noise and generator seed each):

* **real** — the stand-in generator: did the loop accept a change that makes the agent follow a hidden
  rule (power), how many judged agent runs did it cost, and for every accepted change, did the gain
  measured on 40 fresh queries (3 runs each) fall within the interval the optimizer reported;
* **useless** — a generator whose variants change nothing (under the agent's noise): any accepted
  change is a false accept;
* **harmful** — a generator whose variants make the agent skip the lookup: any accept is a false accept;
* **gepa** (first `--gepa-seeds` seeds) — dspy.GEPA with the same stand-in as reflection LM, the same
  split and the same budget in judged runs as the loop spent, held to the same test on its valset.

    python benchmarks/optimizer.py [--seeds 10] [--variants 3] [--queries 40] [--gepa-seeds 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import logging
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')
os.environ.setdefault('TQDM_DISABLE', '1')  # DSPy's per-minibatch progress bars would bury the table

from benchmarks.billing_agent import COMPONENT_MAP, COMPONENTS, BillingRunner, ProposerKind, follows, make_queries, proposer_lm
from sensei_eval.agents.components import PromptComponents
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.optimize.evaluate import evaluate_prompt
from sensei_eval.optimize.loop import SequentialOptimizer
from sensei_eval.optimize.state import OptimizeConfig, OptimizeState
from sensei_eval.optimize.variants import VariantGenerator

JUDGES = ['reference_check']
NOISE = 0.1  # share of runs in which the agent forgets the account lookup
FRESH_QUERIES = 40
FRESH_RUNS = 3


def fresh_score(texts: dict[str, str], seed: int) -> float:
    """Mean judge score of a prompt on fresh queries (not in the optimizer's set), `FRESH_RUNS` runs each."""
    prompt = COMPONENTS
    for name, text in texts.items():
        prompt = prompt.with_text(name, text)
    queries = make_queries(FRESH_QUERIES, 10_000 + seed, prefix='f')
    runner = BillingRunner(noise=NOISE, seed=20_000 + seed)
    evaluation, _ = asyncio.run(evaluate_prompt(prompt.build(), queries, runner, make_judges(JUDGES), None, runs=FRESH_RUNS))
    return evaluation.score or 0.0


def run_loop(kind: ProposerKind, seed: int, args: argparse.Namespace, tmp: Path) -> tuple[OptimizeState, float]:
    queries = make_queries(args.queries, seed)
    config = OptimizeConfig(variants=args.variants, seed=seed, component_map=COMPONENT_MAP, concurrency=4)
    generator = VariantGenerator(proposer_lm(kind, seed))
    start = time.perf_counter()
    optimizer = SequentialOptimizer(
        COMPONENTS, BillingRunner(noise=NOISE, seed=seed), queries, make_judges(JUDGES), None, generator,
        tmp / f'{kind}-{seed}', config,
    )  # fmt: skip
    state = asyncio.run(optimizer.run())
    return state, time.perf_counter() - start


def real_fixes(texts: dict[str, str]) -> set[str]:
    rules = follows(PromptComponents(sections=tuple(texts.items())).build())
    return {r for r in ('ticket', 'currency') if rules[r]}


def steps(state: OptimizeState) -> list[tuple[str, float, float | None, float | None, dict[str, str], dict[str, str]]]:
    """Each accepted change: (component, reported gain, interval low, high, texts before, texts after)."""
    texts = dict(state.original)
    out = []
    for name in state.accepted:
        cs = state.components[name]
        test = next(c.validation for c in cs.candidates if c.path == cs.frozen_path)
        assert test is not None and test.delta is not None
        after = {**texts, name: state.current[name]}
        out.append((name, test.delta, test.ci_low, test.ci_high, texts, after))
        texts = after
    return out


def run_gepa_seed(seed: int, budget: int, args: argparse.Namespace, tmp: Path) -> tuple[bool, set[str], int, float, float]:
    from sensei_eval.judging.options import JudgeRunOptions
    from sensei_eval.optimize.gepa import GepaSettings, run_gepa

    queries = make_queries(args.queries, seed)
    config = OptimizeConfig(variants=args.variants, seed=seed, component_map=COMPONENT_MAP, stratify=False)
    start = time.perf_counter()
    logging.getLogger('dspy').setLevel(logging.WARNING)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):  # DSPy's progress bars
        result = run_gepa(
            COMPONENTS, BillingRunner(noise=NOISE, seed=seed), queries, JudgeRunOptions(make_judges(JUDGES)),
            GepaSettings(proposer_lm('real', seed), max_metric_calls=budget), run_dir=tmp / f'gepa-{seed}', config=config,
        )  # fmt: skip
    gain = fresh_score(result.components, seed) - fresh_score(COMPONENTS.as_dict(), seed)
    return result.accepted, real_fixes(result.components), result.metric_calls, gain, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--seeds', type=int, default=10)
    parser.add_argument('--variants', type=int, default=3, help='variants per component and round')
    parser.add_argument('--queries', type=int, default=40, help='queries per seed (half held out for validation)')
    parser.add_argument('--gepa-seeds', type=int, default=3, help='seeds GEPA also runs on (0: none)')
    parser.add_argument('--quick', action='store_true', help='2 seeds, 24 queries, 2 variants, GEPA on 1 seed')
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.queries, args.variants, args.gepa_seeds = 2, 24, 2, 1
    print(
        f'billing agent, 2 hidden rules, noise {NOISE:.0%}; {args.queries} queries per seed, judge: reference_check; '
        f'--variants {args.variants}; {args.seeds} seed(s)'
    )
    print(f'{"seed":>4} {"kind":<8}{"accepted":<22}{"fixes":<16}{"runs":>6}{"wall s":>8}')
    power = []
    false_accepts = {'useless': 0, 'harmful': 0}
    lucky = {'useless': 0, 'harmful': 0}  # variants that beat the current text on train, so were tested
    within = []
    costs = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for seed in range(args.seeds):
            for kind in ('real', 'useless', 'harmful'):
                state, wall = run_loop(kind, seed, args, tmp)
                fixes = real_fixes(state.current)
                accepted = ', '.join(state.accepted) or '-'
                found = ', '.join(sorted(fixes)) or '-'
                print(f'{seed:>4} {kind:<8}{accepted:<22}{found:<16}{state.metric_calls:>6}{wall:>8.1f}')
                if kind == 'real':
                    power.append(fixes)
                    costs.append(state.metric_calls)
                    for name, reported, low, high, before, after in steps(state):
                        fresh = fresh_score(after, seed) - fresh_score(before, seed)
                        ok = low is not None and high is not None and low <= fresh <= high
                        within.append(ok)
                        print(
                            f'       {name}: reported gain {reported:+.3f} (95% {low:+.3f} … {high:+.3f}), '
                            f'on {FRESH_QUERIES} fresh queries {fresh:+.3f} {"within" if ok else "OUTSIDE"}'
                        )
                else:
                    false_accepts[kind] += bool(state.accepted)
                    lucky[kind] += sum(1 for cs in state.components.values() for c in cs.candidates if c.validation)
        n = args.seeds
        budget = math.ceil(statistics.mean(costs)) if costs else 0
        gepa_rows = [run_gepa_seed(seed, budget, args, tmp) for seed in range(min(args.gepa_seeds, n))]
    print()
    print(f'{"measure":<58}{"value":>20}')
    any_fix = sum(1 for f in power if f)
    both = sum(1 for f in power if f == {'ticket', 'currency'})
    print(f'{"real fix accepted (share of seeds)":<58}{f"{any_fix}/{n} = {any_fix / n:.0%}":>20}')
    print(f'{"both hidden rules found (share of seeds)":<58}{f"{both}/{n} = {both / n:.0%}":>20}')
    for kind, count in false_accepts.items():
        print(f'{f"false accepts, {kind} variants (share of seeds)":<58}{f"{count}/{n} = {count / n:.0%}":>20}')
        print(f'{f"  {kind} variants that won on train and were tested":<58}{lucky[kind]:>20}')
    inside = sum(within)
    print(f'{"fresh-query gain within the reported 95% interval":<58}{f"{inside}/{len(within)}":>20}')
    print(f'{"cost: judged agent runs per seed (mean, real)":<58}{statistics.mean(costs) if costs else 0:>20.0f}')
    if gepa_rows:
        print()
        print(f'GEPA at the same budget ({budget} judged runs), {len(gepa_rows)} seed(s):')
        print(f'{"seed":>4} {"accepted":<10}{"fixes":<18}{"runs":>6}{"fresh gain":>12}{"wall s":>8}')
        for seed, (acc, fixes, calls, gain, wall) in enumerate(gepa_rows):
            print(f'{seed:>4} {acc!s:<10}{", ".join(sorted(fixes)) or "-":<18}{calls:>6}{gain:>+12.3f}{wall:>8.1f}')


if __name__ == '__main__':
    main()
