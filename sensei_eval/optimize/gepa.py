"""The GEPA baseline: `dspy.GEPA` over the same prompt components, judged by the same judges.

`run_gepa` wraps the agent as an `AgentProgram` (one predictor per component), scores it with
`JudgeMetric(feedback=True)` — issues of the judges mapped to the component GEPA is rewriting — and
lets GEPA rewrite components round-robin under a budget of metric calls (judged agent runs). It is
here to compare against the sequential loop at the same budget (`benchmarks/optimizer.py`,
`--strategy gepa`), not to replace it.

One difference to know: GEPA scores a run whose agent or judges failed as `failure_score` (0.0), where
the sequential loop excludes and counts it; `GepaResult.errors` lists every such failure so a low GEPA
score caused by errors is visible as that.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy
from dspy.teleprompt.gepa import InstructionProposer
from pydantic import BaseModel, Field

from ..cache import JudgeCache
from ..evaluators.base import Judge
from ..models import JudgeModel
from ..reports import write_json_atomic
from .agent import AgentRunner, Query
from .components import PromptComponents, save_components
from .metrics import AgentProgram, JudgeMetric

__all__ = ('GepaResult', 'run_gepa')


class GepaResult(BaseModel):
    baseline_score: float | None
    best_score: float | None
    components: dict[str, str]
    candidates: int
    metric_calls: int
    agent_calls: int
    judge_calls: int
    reflection_calls: int
    errors: list[str] = Field(default_factory=list)

    @property
    def model_calls(self) -> int:
        return self.agent_calls + self.judge_calls + self.reflection_calls


def run_gepa(
    components: PromptComponents,
    runner: AgentRunner,
    queries: Sequence[Query],
    judges: Sequence[Judge],
    judge_model: JudgeModel | None,
    *,
    reflection_lm: Any,
    max_metric_calls: int,
    run_dir: Path,
    seed: int = 0,
    num_threads: int = 1,
    cache: JudgeCache | None = None,
    adapter: Any = None,
) -> GepaResult:
    """Optimize `components` with dspy.GEPA (round-robin over components); results under `run_dir`."""
    os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')
    run_dir.mkdir(parents=True, exist_ok=True)
    program = AgentProgram(components, runner, queries)
    trainset = [dspy.Example(query=q.query, query_id=q.query_id).with_inputs('query', 'query_id') for q in queries]
    metric = JudgeMetric(judges, judge_model, feedback=True, cache=cache)
    calls_before = len(getattr(reflection_lm, 'history', []) or [])
    # the built-in proposer, with our adapter when given (the embedded model: chat format, no JSON grammar)
    proposer = InstructionProposer(adapter=adapter) if adapter is not None else None
    optimizer = dspy.GEPA(
        metric=metric,
        instruction_proposer=proposer,
        max_metric_calls=max_metric_calls,
        reflection_lm=reflection_lm,
        component_selector='round_robin',
        reflection_minibatch_size=min(3, len(trainset)),
        candidate_selection_strategy='pareto',
        log_dir=str(run_dir / 'gepa_log'),
        track_stats=True,
        seed=seed,
        num_threads=num_threads,
    )
    with dspy.context(lm=reflection_lm):
        optimized = optimizer.compile(program, trainset=trainset, valset=trainset)
    details = optimized.detailed_results
    scores = list(details.val_aggregate_scores)
    best = optimized.current_components()
    result = GepaResult(
        baseline_score=scores[0] if scores else None,
        best_score=max(scores) if scores else None,
        components=best.as_dict(),
        candidates=len(details.candidates),
        metric_calls=int(getattr(details, 'total_metric_calls', None) or metric.calls),
        agent_calls=program.agent_requests,
        judge_calls=metric.judge_requests,
        reflection_calls=len(getattr(reflection_lm, 'history', []) or []) - calls_before,
        errors=list(metric.errors),
    )
    save_components(best, components, run_dir)
    write_json_atomic(run_dir / 'gepa_result.json', result.model_dump_json(indent=2))
    return result
