"""Sequential component optimization vs dspy.GEPA at the same budget of metric calls.

Both run on the example documentation agent (`examples/docs_agent`, its simulated model follows the
rules its prompt states), judged by the deterministic checks (a scripted judge: no model), with the
same scripted proposer behind the variant generator and GEPA's reflection LM: asked to rewrite a
component, it adds that component's fixing rule with probability `--hit-rate`, else a plausible
sentence that changes nothing. A metric call is one judged agent run. Prints, per strategy, the final
mean judge score and the model calls spent (agent requests + proposer requests; the checks make none).

    python benchmarks/optimizer.py [--budget 190] [--hit-rate 0.5] [--seeds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')

from examples.docs_agent import prompts
from examples.docs_agent.agent import make_agent
from examples.docs_agent.simulated import RULE_COMPONENTS, RULES
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.optimize.agent import PydanticAIRunner, load_queries
from sensei_eval.optimize.components import load_components
from sensei_eval.optimize.gepa import run_gepa
from sensei_eval.optimize.loop import OptimizeConfig, SequentialOptimizer
from sensei_eval.optimize.scripted import ScriptedLM
from sensei_eval.optimize.variants import VariantGenerator

ROOT = Path(__file__).resolve().parents[1]
FILLER = [
    'Be precise and thorough.',
    'Keep the answer focused on what was asked.',
    'Prefer clear, well-structured explanations.',
    'Double-check your work before answering.',
]
FIX = {RULE_COMPONENTS[name]: sentence for name, sentence in RULES}


def proposal(component: str, current: str, rng: random.Random, hit_rate: float) -> str:
    """What the scripted proposer writes for one component: the fix with probability `hit_rate`."""
    fix = FIX.get(component)
    if fix is not None and fix not in current and rng.random() < hit_rate:
        return f'{current}\n{fix}'
    return f'{current}\n{rng.choice(FILLER)}'


def variant_lm(rng: random.Random, hit_rate: float) -> ScriptedLM:
    def respond(messages: list[dict[str, Any]]) -> dict[str, Any]:
        text = messages[-1]['content']
        name = _field(text, 'component_name')
        current = _field(text, 'current_text')
        n = int((_field(text, 'num_variants') or '1').split()[0])
        return {'variants': json.dumps([proposal(name, current, rng, hit_rate) for _ in range(n)])}

    return ScriptedLM(respond)


def reflection_lm(rng: random.Random, hit_rate: float) -> ScriptedLM:
    texts = {n: getattr(prompts, n) for n in prompts.COMPONENTS}

    def respond(messages: list[dict[str, Any]]) -> str:
        text = messages[-1]['content']
        current = json.loads(text).get('current_instruction', '') if text.lstrip().startswith('{') else ''
        if not current:
            m = re.search(r'current_instruction[^\n]*\n(.*?)\n\n\[\[', text, re.DOTALL)
            current = m.group(1).strip() if m else ''
        name = next((n for n, t in texts.items() if current.startswith(t)), '')
        return json.dumps({'new_instruction': proposal(name, current or texts.get(name, ''), rng, hit_rate)})

    return ScriptedLM(respond)


def _field(text: str, name: str) -> str:
    m = re.search(rf'\[\[ ## {name} ## \]\]\n(.*?)(?=\n\n\[\[ ## |\Z)', text, re.DOTALL)
    return m.group(1).strip() if m else ''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--budget', type=int, default=190, help='metric calls (judged agent runs) per strategy')
    parser.add_argument('--hit-rate', type=float, default=0.5)
    parser.add_argument('--seeds', type=int, default=3)
    args = parser.parse_args()

    queries, errors = load_queries(ROOT / 'examples/docs_agent/queries.jsonl')
    assert not errors, errors
    judges = make_judges(['checks'])
    print(f'{len(queries)} queries, judges: checks, budget {args.budget} metric calls, hit rate {args.hit_rate}')
    print(f'{"strategy":<11}{"seed":>5}{"baseline":>10}{"final":>8}{"metric calls":>14}{"model calls":>13}{"wall s":>8}')
    totals: dict[str, list[float]] = {'sequential': [], 'gepa': []}
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            components = load_components('examples.docs_agent.prompts')
            rng = random.Random(seed)
            generator = VariantGenerator(variant_lm(rng, args.hit_rate))
            runner = PydanticAIRunner(make_agent())
            config = OptimizeConfig(variants=2, max_metric_calls=args.budget, seed=seed, concurrency=4)
            start = time.perf_counter()
            opt = SequentialOptimizer(components, runner, queries, judges, None, generator, Path(tmp) / 'seq', config)
            state = asyncio.run(opt.run())
            wall = time.perf_counter() - start
            print(
                f'{"sequential":<11}{seed:>5}{state.baseline_score or 0:>10.3f}{state.current_score or 0:>8.3f}'
                f'{state.metric_calls:>14}{state.agent_calls + state.generator_calls:>13}{wall:>8.1f}'
            )
            totals['sequential'].append(state.current_score or 0.0)

            rng = random.Random(seed)
            start = time.perf_counter()
            lm = reflection_lm(rng, args.hit_rate)
            result = run_gepa(
                components, PydanticAIRunner(make_agent()), queries, judges, None, reflection_lm=lm,
                max_metric_calls=args.budget, run_dir=Path(tmp) / 'gepa', seed=seed, num_threads=4,
            )  # fmt: skip
            wall = time.perf_counter() - start
            print(
                f'{"gepa":<11}{seed:>5}{result.baseline_score or 0:>10.3f}{result.best_score or 0:>8.3f}'
                f'{result.metric_calls:>14}{result.agent_calls + len(lm.calls):>13}{wall:>8.1f}'
            )
            totals['gepa'].append(result.best_score or 0.0)
    for name, scores in totals.items():
        print(f'mean final score, {name}: {sum(scores) / len(scores):.3f} over {len(scores)} seed(s)')


if __name__ == '__main__':
    import logging

    logging.getLogger('dspy').setLevel(logging.ERROR)
    logging.getLogger('gepa').setLevel(logging.ERROR)
    main()
