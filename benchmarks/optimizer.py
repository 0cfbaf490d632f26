"""Sequential component optimization vs dspy.GEPA at the same budget, with the proposer blind to the answer key.

Both run on the example documentation agent (`examples/docs_agent`: its scripted model follows the rules
its prompt states, by meaning), judged by the deterministic checks (no model), on the same train /
validation split (by seed). The variant generator's LM and GEPA's reflection LM are the same scripted
proposer (`examples/docs_agent/proposer.py`): it writes each variant from the failure examples and the
issues' suggested fixes it is shown, never from the agent's rules. Both are held to the same acceptance
rule: a change is kept only if a one-sided paired sign-flip test over the validation queries says it
beats the prompt it replaces (alpha 0.05, margin 0.01).

Per strategy and seed it prints the train and validation score of the prompt it ends with (both
measured afterwards with the same evaluation, outside the budget), the accepted changes, the metric
calls (judged agent runs) and the model calls (agent requests + proposer requests; the checks make
none).

    python benchmarks/optimizer.py [--budget 190] [--seeds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')
os.environ.setdefault('TQDM_DISABLE', '1')  # DSPy's per-minibatch progress bars would bury the table

from examples.docs_agent.agent import make_agent
from examples.docs_agent.proposer import proposer_lm
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.optimize.agent import PydanticAIRunner, Query, load_queries
from sensei_eval.optimize.components import PromptComponents, load_components
from sensei_eval.optimize.evaluate import evaluate_prompt
from sensei_eval.optimize.gepa import run_gepa
from sensei_eval.optimize.loop import OptimizeConfig, SequentialOptimizer, split_queries
from sensei_eval.optimize.variants import VariantGenerator

ROOT = Path(__file__).resolve().parents[1]


def scores(texts: dict[str, str], components: PromptComponents, queries: list[Query], ids: list[str]) -> float:
    """Mean judge score of the prompt with `texts` on the queries `ids` (one run each)."""
    prompt = components
    for name, text in texts.items():
        prompt = prompt.with_text(name, text)
    chosen = [q for q in queries if q.query_id in set(ids)]
    evaluation, _ = asyncio.run(
        evaluate_prompt(prompt.build(), chosen, PydanticAIRunner(make_agent()), make_judges(['checks']), None)
    )
    return evaluation.score or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--budget', type=int, default=190, help='metric calls (judged agent runs) per strategy')
    parser.add_argument('--seeds', type=int, default=3)
    parser.add_argument('--variants', type=int, default=3, help='variants per component (sequential)')
    args = parser.parse_args()

    queries, errors = load_queries(ROOT / 'examples/docs_agent/queries.jsonl')
    assert not errors, errors
    judges = make_judges(['checks'])
    print(f'{len(queries)} queries, judges: checks, budget {args.budget} metric calls, proposer blind to the rules')
    header = f'{"strategy":<11}{"seed":>5}{"train":>15}{"validation":>15}{"accepted":>10}{"metric":>8}{"model":>7}{"wall s":>8}'
    print(header)
    totals: dict[str, list[tuple[float, float, int]]] = {'sequential': [], 'gepa': []}
    for seed in range(args.seeds):
        config = OptimizeConfig(variants=args.variants, max_metric_calls=args.budget, seed=seed, concurrency=4)
        split = split_queries([q.query_id for q in queries], config)
        with tempfile.TemporaryDirectory() as tmp:
            components = load_components('examples.docs_agent.prompts')
            original = components.as_dict()
            base_train, base_val = (scores(original, components, queries, ids) for ids in (split.train, split.validation))

            start = time.perf_counter()
            generator = VariantGenerator(proposer_lm())
            runner = PydanticAIRunner(make_agent())
            opt = SequentialOptimizer(components, runner, queries, judges, None, generator, Path(tmp) / 'seq', config)
            state = asyncio.run(opt.run())
            wall = time.perf_counter() - start
            train, val = (scores(state.current, components, queries, ids) for ids in (split.train, split.validation))
            print(
                f'{"sequential":<11}{seed:>5}{base_train:>7.3f}->{train:.3f}{base_val:>7.3f}->{val:.3f}'
                f'{len(state.accepted):>10}{state.metric_calls:>8}{state.agent_calls + state.generator_calls:>7}{wall:>8.1f}'
            )
            totals['sequential'].append((train, val, len(state.accepted)))

            start = time.perf_counter()
            lm = proposer_lm()
            result = run_gepa(
                components, PydanticAIRunner(make_agent()), queries, judges, None, reflection_lm=lm,
                max_metric_calls=args.budget, run_dir=Path(tmp) / 'gepa', seed=seed, num_threads=4, config=config,
            )  # fmt: skip
            wall = time.perf_counter() - start
            changed = sum(1 for n, t in result.components.items() if t != original[n])
            train, val = (scores(result.components, components, queries, ids) for ids in (split.train, split.validation))
            accepted = f'{changed}{"" if result.accepted else "*"}'
            print(
                f'{"gepa":<11}{seed:>5}{base_train:>7.3f}->{train:.3f}{base_val:>7.3f}->{val:.3f}'
                f'{accepted:>10}{result.metric_calls:>8}{result.agent_calls + len(lm.calls):>7}{wall:>8.1f}'
            )
            if result.validation is not None and not result.accepted:
                print(f'{"":<16}GEPA best candidate rejected: {result.validation.reason}')
            totals['gepa'].append((train, val, changed))
    print('accepted: components changed in the kept prompt (* GEPA best candidate failed the validation test)')
    for name, rows in totals.items():
        n = len(rows)
        print(
            f'mean over {n} seed(s), {name}: train {sum(r[0] for r in rows) / n:.3f}, '
            f'validation {sum(r[1] for r in rows) / n:.3f}, accepted components {sum(r[2] for r in rows) / n:.1f}'
        )


if __name__ == '__main__':
    import logging

    logging.getLogger('dspy').setLevel(logging.ERROR)
    logging.getLogger('gepa').setLevel(logging.ERROR)
    main()
