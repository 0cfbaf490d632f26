"""The GEPA baseline: `dspy.GEPA` over the same prompt components, judged by the same judges.

`run_gepa` wraps the agent as an `AgentProgram` (one predictor per component), scores it with
`JudgeMetric(feedback=True)` — the issues routed to the component GEPA is rewriting, by the same
routing as the sequential loop — and lets GEPA rewrite components round-robin under a budget of
metric calls (judged agent runs). It is here to compare against the sequential loop at the same budget
(`benchmarks/optimizer.py`, `--strategy gepa`), not to replace it.

Like with like: the queries are split exactly as the sequential loop splits them (`split_queries`, same
config and seed); GEPA learns from the train queries (its reflective minibatches) and keeps its Pareto
front on the validation queries (its `valset`). Its best candidate is then held to the loop's acceptance
rule — the one-sided paired sign-flip test against the unchanged prompt over the validation queries
(`validation_test`, `alpha`, `margin`) — and `GepaResult.components` is that candidate only when it
passes, else the prompt as it was. Note that GEPA also *chose* its best candidate on those validation
scores, so its test is the more optimistic of the two.

A reflection LM whose every proposal fails (GEPA logs each and goes on) raises `GepaError`, and a
metric that never scored raises `metrics.MetricError`, rather than returning the prompt unchanged.

One difference to know: GEPA scores a run whose agent or judges failed as `failure_score` (0.0), where
the sequential loop excludes and counts it; `GepaResult.errors` lists every such failure so a low GEPA
score caused by errors is visible as that.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
from dspy.teleprompt.gepa import InstructionProposer
from pydantic import BaseModel, Field

from sensei_eval.agents.components import PromptComponents, save_components
from sensei_eval.agents.runner import AgentRunner, Query
from sensei_eval.core.errors import ModelCallError, describe_error
from sensei_eval.core.files import write_text_atomic
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import Profile
from sensei_eval.optimize.acceptance import run_profile, split_queries, validation_test
from sensei_eval.optimize.evaluate import PromptEvaluation
from sensei_eval.optimize.metrics import AgentProgram, JudgeMetric
from sensei_eval.optimize.routing import resolve_routing
from sensei_eval.optimize.state import OptimizeConfig, ValidationTest

__all__ = ('GepaError', 'GepaResult', 'GepaSettings', 'run_gepa')


class GepaError(ModelCallError):
    """GEPA could not run as asked: every proposal failed (e.g. a reflection LM answer it cannot parse)."""


class _CountingProposer:
    """Calls GEPA's instruction proposer and counts the proposals that failed (raised or proposed nothing)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.failures = 0
        self.last_error = ''

    def __call__(self, candidate: dict[str, str], reflective_dataset: Any, components_to_update: list[str]) -> dict[str, str]:
        self.calls += 1
        try:
            out: dict[str, str] = self.inner(
                candidate=candidate, reflective_dataset=reflective_dataset, components_to_update=components_to_update
            )
        except Exception as e:
            self.failures += 1
            self.last_error = describe_error(e, limit=300)
            raise
        if not any(isinstance(v, str) and v.strip() for v in out.values()):
            self.failures += 1
            self.last_error = 'the proposer returned no new instruction'
        return out


class GepaResult(BaseModel):
    baseline_score: float | None = Field(description='Validation score of the prompt as it was (GEPA valset).')
    best_score: float | None = Field(description="Validation score of GEPA's best candidate.")
    components: dict[str, str] = Field(description='The best candidate if it passed the validation test, else the original.')
    accepted: bool = False
    validation: ValidationTest | None = None
    train: list[str] = Field(default_factory=list)
    validation_queries: list[str] = Field(default_factory=list)
    routing: str | None = None
    candidates: int
    metric_calls: int
    agent_calls: int
    judge_calls: int
    reflection_calls: int
    errors: list[str] = Field(default_factory=list)

    @property
    def model_calls(self) -> int:
        return self.agent_calls + self.judge_calls + self.reflection_calls


@dataclass(frozen=True)
class GepaSettings:
    """GEPA's own settings: the `reflection_lm` (a dspy LM) that proposes, the budget of metric calls
    (`max_metric_calls` judged runs), `num_threads`, and the proposer's `adapter` (None: DSPy's default)."""

    reflection_lm: Any
    max_metric_calls: int
    num_threads: int = 1
    adapter: Any = None


def run_gepa(
    components: PromptComponents,
    runner: AgentRunner,
    queries: Sequence[Query],
    options: JudgeRunOptions,
    gepa: GepaSettings,
    *,
    run_dir: Path,
    config: OptimizeConfig | None = None,
) -> GepaResult:
    """Optimize `components` with dspy.GEPA (round-robin over components); results under `run_dir`.

    `options` give the judges, their model and cache (the agent profile comes from `config`); `config`
    gives the split, the routing, the acceptance rule and the seed, as for the sequential loop."""
    os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')
    run_dir.mkdir(parents=True, exist_ok=True)
    config = config or OptimizeConfig()
    reflection_lm = gepa.reflection_lm
    split = split_queries([q.query_id for q in queries], config)
    profile: Profile = run_profile(config.profile, queries)
    routing = resolve_routing(
        components.names, user_map=config.component_map, profile_map=profile.component_map, profile=profile.name
    )
    program = AgentProgram(components, runner, queries)
    trainset, valset = _examples(queries, split.train), _examples(queries, split.validation)
    metric = JudgeMetric(options.judges, options.model, feedback=routing or True, cache=options.cache, profile=profile)
    calls_before = len(getattr(reflection_lm, 'history', []) or [])
    proposer = _CountingProposer(InstructionProposer(adapter=gepa.adapter) if gepa.adapter is not None else InstructionProposer())
    optimizer = _optimizer(gepa, metric, proposer, run_dir, seed=config.seed, minibatch=min(3, len(trainset)))
    with dspy.context(lm=reflection_lm):
        optimized = optimizer.compile(program, trainset=trainset, valset=valset)
    _check_proposals(proposer)
    metric.check()
    details = optimized.detailed_results
    scores = list(details.val_aggregate_scores)
    test = _acceptance_test(details, split.validation, config)
    accepted = test is not None and test.accepted
    kept = optimized.current_components() if accepted else components
    result = GepaResult(
        baseline_score=scores[0] if scores else None,
        best_score=max(scores) if scores else None,
        components=kept.as_dict(),
        accepted=accepted,
        validation=test,
        train=split.train,
        validation_queries=split.validation,
        routing=routing.describe(),
        candidates=len(details.candidates),
        metric_calls=int(getattr(details, 'total_metric_calls', None) or metric.calls),
        agent_calls=program.agent_requests,
        judge_calls=metric.judge_requests,
        reflection_calls=len(getattr(reflection_lm, 'history', []) or []) - calls_before,
        errors=list(metric.errors),
    )
    save_components(kept, components, run_dir)
    write_text_atomic(run_dir / 'gepa_result.json', result.model_dump_json(indent=2))
    return result


def _examples(queries: Sequence[Query], ids: Sequence[str]) -> list[Any]:
    """The queries named by `ids` as DSPy examples (inputs: the query and its id)."""
    by_id = {q.query_id: q for q in queries}
    return [dspy.Example(query=by_id[i].query, query_id=i).with_inputs('query', 'query_id') for i in ids]


def _optimizer(
    gepa: GepaSettings, metric: JudgeMetric, proposer: _CountingProposer, run_dir: Path, *, seed: int, minibatch: int
) -> Any:
    """dspy.GEPA round-robin over components, Pareto candidate selection, its log under `run_dir/gepa_log`.

    The proposer is the built-in one, with our adapter when given (the embedded model: chat format, no
    JSON grammar), counted: GEPA logs a proposal that fails (an answer it cannot parse) and goes on, so a
    reflection LM that fails on every call would end in the seed prompt with nothing said."""
    return dspy.GEPA(
        metric=metric,
        instruction_proposer=proposer,
        max_metric_calls=gepa.max_metric_calls,
        reflection_lm=gepa.reflection_lm,
        component_selector='round_robin',
        reflection_minibatch_size=minibatch,
        candidate_selection_strategy='pareto',
        log_dir=str(run_dir / 'gepa_log'),
        track_stats=True,
        seed=seed,
        num_threads=gepa.num_threads,
    )


def _check_proposals(proposer: _CountingProposer) -> None:
    """A reflection LM that failed on every proposal is an error, not a run that found nothing."""
    if proposer.calls and proposer.failures == proposer.calls:
        raise GepaError(
            f"GEPA's reflection LM failed on all {proposer.calls} proposal(s), so GEPA could propose nothing; "
            f'last: {proposer.last_error}'
        )


def _acceptance_test(details: Any, validation_ids: Sequence[str], config: OptimizeConfig) -> ValidationTest | None:
    """The sequential loop's acceptance test of GEPA's best candidate against the seed, on the validation
    queries' subscores (None when GEPA's best is the seed, or it kept no subscores)."""
    best_idx = int(getattr(details, 'best_idx', 0) or 0)
    subscores = list(getattr(details, 'val_subscores', []) or [])
    if not subscores or best_idx == 0:
        return None
    before, after = (_as_evaluation(subscores[i], validation_ids) for i in (0, best_idx))
    return validation_test(before, after, alpha=config.alpha, margin=config.margin)


def _as_evaluation(subscores: Any, validation_ids: Sequence[str]) -> PromptEvaluation:
    """GEPA's per-instance validation scores of one candidate as a `PromptEvaluation` (per query id), so the
    loop's `validation_test` applies. GEPA scores a failed run 0.0; no such 0 reaches here, because
    `metric.check()` has already raised when any metric call had a judge without a verdict."""
    items = subscores.items() if isinstance(subscores, dict) else enumerate(subscores)
    per_query = {validation_ids[int(i)]: float(v) for i, v in items if v is not None and int(i) < len(validation_ids)}
    mean = sum(per_query.values()) / len(per_query) if per_query else None
    return PromptEvaluation(prompt_version='gepa', score=mean, n_scores=len(per_query), per_query=per_query)
