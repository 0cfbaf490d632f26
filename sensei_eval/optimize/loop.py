"""The sequential component optimizer (DSPy): one component at a time.

    baseline: evaluate the prompt as it is
    order the components by how many issues their mapped judges found (the failure-mode table's mapping)
    for each component, in that order:
        generate N variants (DSPy, fed with the failure examples of the judges mapped to it)
        evaluate every full prompt = frozen components + one variant on the training queries
        keep the best variant only if it beats the current text by `margin`; freeze; next

Components whose judges found nothing are not visited (there is nothing to learn from) unless
`all_components` is set; the run folder says why each was skipped.

Budget: `budget_calls` counts model calls (agent requests, judge requests that missed the cache, and
variant-generator requests); before each step the loop checks the step's expected cost — the cost of
the last evaluation — against what is left, so it stops *before* overspending. `max_metric_calls`
counts judged agent runs (one per query per evaluated prompt), the unit DSPy's GEPA budgets in.
`max_components` caps the components visited.

Everything is saved under the run folder as it happens — `state.json` (rewritten atomically after
every candidate), `candidates/<component>/<k>.json` (the variant, its full prompt, its evaluation and
cost), `candidates/baseline.json` — so a killed run resumed with the same folder continues where it
stopped: generated variants are reused, evaluated candidates are not re-run. At the end it writes
`suggestions.json` (`PromptSuggestion`s, for a human to review: nothing is applied to the
agent) and `prompts.yaml` / `prompts.diff` (the optimized components and their diff).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from ..cache import JudgeCache
from ..evaluators.base import Judge
from ..evaluators.registry import COMPONENTS
from ..models import JudgeModel
from ..reports import write_json_atomic
from .agent import AgentRunner, Query
from .components import PromptComponents, save_components, section_diff
from .evaluate import FailureExample, PromptEvaluation, evaluate_prompt
from .variants import VariantGenerator

__all__ = (
    'CandidateResult',
    'ComponentState',
    'OptimizeConfig',
    'OptimizeState',
    'PromptSuggestion',
    'SequentialOptimizer',
    'order_components',
)

T = TypeVar('T')

# How many failure examples the generator sees per component: enough to show a pattern, few enough
# to keep its prompt small for a local model.
MAX_FAILURE_EXAMPLES = 8
STATE_VERSION = 1


class PromptSuggestion(BaseModel):
    """An optimization suggestion: what a human reviews before changing the agent's prompt."""

    failure_pattern: str
    affected_queries: list[str]
    current_prompt_section: str
    suggested_change: str
    expected_improvement: str
    diff: str = ''
    score_before: float | None = None
    score_after: float | None = None


class OptimizeConfig(BaseModel):
    variants: int = Field(3, ge=1)
    margin: float = Field(0.01, ge=0.0)
    budget_calls: int | None = Field(None, ge=1)
    max_metric_calls: int | None = Field(None, ge=1)
    max_components: int | None = Field(None, ge=1)
    all_components: bool = False
    seed: int = 0
    concurrency: int = Field(4, ge=1)
    judges: list[str] = Field(default_factory=list)
    query_ids: list[str] = Field(default_factory=list)


class CandidateResult(BaseModel):
    component: str
    index: int
    text: str
    score: float | None
    model_calls: int
    errors: int
    path: str


class ComponentState(BaseModel):
    name: str
    status: Literal['pending', 'evaluating', 'done', 'skipped'] = 'pending'
    reason: str | None = None
    failures: int = 0
    variants: list[str] | None = None
    generator_calls: int = 0
    generator_errors: list[str] = Field(default_factory=list)
    candidates: list[CandidateResult] = Field(default_factory=list)
    score_before: float | None = None
    score_after: float | None = None
    frozen_index: int | None = None


class OptimizeState(BaseModel):
    version: int = STATE_VERSION
    config: OptimizeConfig
    source: str
    original: dict[str, str]
    current: dict[str, str]
    order: list[str] = Field(default_factory=list)
    components: dict[str, ComponentState] = Field(default_factory=dict)
    baseline_score: float | None = None
    current_score: float | None = None
    agent_calls: int = 0
    judge_calls: int = 0
    generator_calls: int = 0
    metric_calls: int = 0
    stopped: str | None = None

    @property
    def model_calls(self) -> int:
        return self.agent_calls + self.judge_calls + self.generator_calls


@dataclass
class SequentialOptimizer:
    """The sequential loop over prompt components; see the module docstring."""

    components: PromptComponents
    runner: AgentRunner
    queries: Sequence[Query]
    judges: Sequence[Judge]
    judge_model: JudgeModel | None
    generator: VariantGenerator
    run_dir: Path
    config: OptimizeConfig
    cache: JudgeCache | None = None
    on_event: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        self.config = self.config.model_copy(
            update={'query_ids': [q.query_id for q in self.queries], 'judges': [j.name for j in self.judges]}
        )

    async def run(self) -> OptimizeState:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        state = self._load_or_start()
        current_eval = await self._baseline(state)
        if state.stopped is None and not state.order:
            state.order = order_components(self.components, current_eval)
            for name in self.components.names:
                cs = state.components.setdefault(name, ComponentState(name=name))
                cs.failures = _component_failures(name, current_eval)
                if name not in state.order:
                    cs.status = 'skipped'
                    cs.reason = 'the failure modes mapped to it had no issue in the baseline runs'
            if self.config.all_components:
                state.order += [n for n in self.components.names if n not in state.order]
                for n in state.order:
                    if state.components[n].status == 'skipped':
                        state.components[n].status, state.components[n].reason = 'pending', None
            self._save(state)
        visited = sum(1 for n in state.order if state.components[n].status == 'done')
        for name in state.order:
            if state.stopped is not None:
                break
            cs = state.components[name]
            if cs.status == 'done':
                current_eval = self._best_eval(state, name) or current_eval
                continue
            if self.config.max_components is not None and visited >= self.config.max_components:
                state.stopped = f'max_components ({self.config.max_components}) reached'
                break
            current_eval = await self._component(state, cs, current_eval)
            visited += 1
        if state.stopped is None:
            state.stopped = 'complete'
        self._finish(state)
        return state

    # -- steps -----------------------------------------------------------------------------------------

    async def _baseline(self, state: OptimizeState) -> PromptEvaluation:
        path = self.run_dir / 'candidates' / 'baseline.json'
        if path.is_file():
            return PromptEvaluation.model_validate(json.loads(path.read_text())['evaluation'])
        self._event('baseline: evaluating the prompt as it is')
        prompt = self._current_components(state).build()
        evaluation = await self._evaluate(prompt)
        self._spend(state, evaluation)
        state.baseline_score = state.current_score = evaluation.score
        write_json_atomic(path, _dump({'prompt': prompt, 'evaluation': evaluation.model_dump()}))
        self._save(state)
        self._event(
            f'baseline: score {_fmt(evaluation.score)} ({evaluation.errors} error(s), {evaluation.model_calls} model calls)'
        )
        return evaluation

    async def _component(self, state: OptimizeState, cs: ComponentState, current_eval: PromptEvaluation) -> PromptEvaluation:
        name = cs.name
        cs.status = 'evaluating'
        cs.score_before = state.current_score
        if cs.variants is None:
            if self._over_budget(state, self.generator.max_rounds, 0):
                state.stopped = f'budget reached before generating variants for {name}'
                self._save(state)
                return current_eval
            examples = _failure_examples(name, current_eval, self.config.seed)
            components = self._current_components(state)
            rest = '\n\n'.join(f'## {n}\n{t}' for n, t in components.sections if n != name)
            self._event(f'{name}: generating {self.config.variants} variant(s) from {len(examples)} failure example(s)')
            before = self.generator.lm_calls
            out = await _in_daemon_thread(
                self.generator,
                component_name=name,
                current_text=components[name],
                rest_of_prompt=rest,
                failure_examples=[e.render() for e in examples],
                num_variants=self.config.variants,
                seed=self.config.seed,
            )
            cs.generator_calls = self.generator.lm_calls - before
            state.generator_calls += cs.generator_calls
            cs.variants = list(out.variants)
            cs.generator_errors = list(getattr(out, 'errors', []) or [])
            self._save(state)
            if not cs.variants:
                cs.status = 'done'
                cs.reason = f'the generator produced no usable variant in {cs.generator_calls} round(s) (its errors: state.json)'
                cs.score_after = state.current_score
                self._save(state)
                return current_eval
        done = {c.index for c in cs.candidates}
        est = current_eval.model_calls
        for k, text in enumerate(cs.variants):
            if k in done:
                continue
            if self._over_budget(state, est, len(self.queries)):
                state.stopped = f'budget reached while evaluating {name} (variant {k + 1} of {len(cs.variants)})'
                break
            prompt = self._current_components(state).with_text(name, text).build()
            self._event(f'{name}: evaluating variant {k + 1}/{len(cs.variants)}')
            evaluation = await self._evaluate(prompt)
            self._spend(state, evaluation)
            path = self.run_dir / 'candidates' / _safe(name) / f'{k}.json'
            write_json_atomic(
                path,
                _dump({'component': name, 'index': k, 'text': text, 'prompt': prompt, 'evaluation': evaluation.model_dump()}),
            )
            cs.candidates.append(
                CandidateResult(
                    component=name, index=k, text=text, score=evaluation.score, model_calls=evaluation.model_calls,
                    errors=evaluation.errors, path=str(path.relative_to(self.run_dir)),
                )
            )  # fmt: skip
            self._save(state)
            self._event(f'{name}: variant {k + 1} scored {_fmt(evaluation.score)} (current {_fmt(state.current_score)})')
        if state.stopped is not None and len(cs.candidates) < len(cs.variants):
            self._save(state)
            return current_eval  # unfinished: resumed later, nothing frozen from half a comparison
        best = max((c for c in cs.candidates if c.score is not None), key=lambda c: (c.score or 0.0, -c.index), default=None)
        threshold = (state.current_score or 0.0) + self.config.margin
        if best is not None and best.score is not None and (state.current_score is None or best.score >= threshold):
            state.current[name] = best.text
            state.current_score = best.score
            cs.frozen_index = best.index
            self._event(f'{name}: froze variant {best.index + 1} ({_fmt(cs.score_before)} -> {_fmt(best.score)})')
            current_eval = self._best_eval(state, name) or current_eval
        else:
            why = 'no variant scored' if best is None else f'best variant {_fmt(best.score)} < {_fmt(threshold)} needed'
            cs.reason = f'kept the current text: {why}'
            self._event(f'{name}: {cs.reason}')
        cs.status = 'done'
        cs.score_after = state.current_score
        self._save(state)
        return current_eval

    async def _evaluate(self, prompt: str) -> PromptEvaluation:
        evaluation, _ = await evaluate_prompt(
            prompt,
            self.queries,
            self.runner,
            self.judges,
            self.judge_model,
            concurrency=self.config.concurrency,
            cache=self.cache,
        )
        return evaluation

    # -- bookkeeping -----------------------------------------------------------------------------------

    def _load_or_start(self) -> OptimizeState:
        path = self.run_dir / 'state.json'
        if path.is_file():
            state = OptimizeState.model_validate_json(path.read_text())
            if state.original != self.components.as_dict():
                raise ValueError(f'{path}: this run folder optimizes other prompt components; use a new --out')
            if state.config.query_ids != self.config.query_ids or state.config.judges != self.config.judges:
                raise ValueError(f'{path}: this run folder used other queries or judges; use a new --out')
            # budgets and limits may be raised on resume; the rest of the config stays as it was
            state.config = state.config.model_copy(
                update={k: getattr(self.config, k) for k in ('budget_calls', 'max_metric_calls', 'max_components', 'concurrency')}
            )
            if state.stopped is not None and state.stopped != 'complete':
                state.stopped = None
            self._event(f'resuming {self.run_dir} ({state.model_calls} model calls spent)')
            return state
        state = OptimizeState(
            config=self.config,
            source=self.components.source,
            original=self.components.as_dict(),
            current=self.components.as_dict(),
        )
        self._save(state)
        return state

    def _current_components(self, state: OptimizeState) -> PromptComponents:
        components = self.components
        for name, text in state.current.items():
            components = components.with_text(name, text)
        return components

    def _best_eval(self, state: OptimizeState, name: str) -> PromptEvaluation | None:
        cs = state.components[name]
        if cs.frozen_index is None:
            return None
        path = self.run_dir / 'candidates' / _safe(name) / f'{cs.frozen_index}.json'
        return PromptEvaluation.model_validate(json.loads(path.read_text())['evaluation'])

    def _spend(self, state: OptimizeState, evaluation: PromptEvaluation) -> None:
        state.agent_calls += evaluation.agent_calls
        state.judge_calls += evaluation.judge_calls
        state.metric_calls += len(self.queries)

    def _over_budget(self, state: OptimizeState, model_calls: int, metric_calls: int) -> bool:
        cfg = self.config
        if cfg.budget_calls is not None and state.model_calls + model_calls > cfg.budget_calls:
            return True
        return cfg.max_metric_calls is not None and state.metric_calls + metric_calls > cfg.max_metric_calls

    def _save(self, state: OptimizeState) -> None:
        write_json_atomic(self.run_dir / 'state.json', state.model_dump_json(indent=2))

    def _finish(self, state: OptimizeState) -> None:
        self._save(state)
        optimized = self._current_components(state)
        save_components(optimized, self.components, self.run_dir)
        suggestions = build_suggestions(state, self.run_dir, [j.name for j in self.judges])
        write_json_atomic(self.run_dir / 'suggestions.json', _dump([s.model_dump() for s in suggestions]))
        self._event(f'done ({state.stopped}): {len(suggestions)} suggestion(s) in {self.run_dir}/suggestions.json')

    def _event(self, message: str) -> None:
        if self.on_event is not None:
            self.on_event(message)


def order_components(components: PromptComponents, evaluation: PromptEvaluation) -> list[str]:
    """Components whose mapped failure modes had issues, most issues first (ties in prompt order)."""
    counts = {name: _component_failures(name, evaluation) for name in components.names}
    failing = [n for n in components.names if counts[n] > 0]
    return sorted(failing, key=lambda n: (-counts[n], components.names.index(n)))


def build_suggestions(state: OptimizeState, run_dir: Path, judge_names: Sequence[str]) -> list[PromptSuggestion]:
    """One suggestion per frozen component, with the pattern its judges found and the measured gain."""
    out = []
    baseline = PromptEvaluation.model_validate(json.loads((run_dir / 'candidates' / 'baseline.json').read_text())['evaluation'])
    for name in state.order:
        cs = state.components[name]
        if cs.frozen_index is None:
            continue
        examples = [e for e in baseline.failure_examples if name in COMPONENTS.get(e.failure_mode or '', ())]
        by_judge: dict[str, set[str]] = {}
        for e in examples:
            by_judge.setdefault(e.judge, set()).add(e.query_id)
        pattern = '; '.join(
            f'{j} found issues in {len(q)} of {len(baseline.per_query)} runs' for j, q in sorted(by_judge.items())
        )
        diff = section_diff(name, state.original[name], state.current[name])
        out.append(
            PromptSuggestion(
                failure_pattern=pattern or 'no mapped judge failures (visited with --all-components)',
                affected_queries=sorted({q for qs in by_judge.values() for q in qs}),
                current_prompt_section=name,
                suggested_change=state.current[name],
                expected_improvement=(
                    f'mean judge score {_fmt(cs.score_before)} -> {_fmt(cs.score_after)} on {len(state.config.query_ids)} '
                    f'training queries with judges {", ".join(judge_names)} (measured, same queries; validate on held-out '
                    'queries with `python -m sensei_eval.validate` before applying)'
                ),
                diff=diff,
                score_before=cs.score_before,
                score_after=cs.score_after,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------------
# Helpers


def _component_failures(name: str, evaluation: PromptEvaluation) -> int:
    """Issues found in the failure modes the failure-mode table maps to this component."""
    return sum(n for mode, n in evaluation.failures_by_mode.items() if name in COMPONENTS.get(mode, ()))


def _failure_examples(name: str, evaluation: PromptEvaluation, seed: int) -> list[FailureExample]:
    relevant = [e for e in evaluation.failure_examples if name in COMPONENTS.get(e.failure_mode or '', ())]
    if len(relevant) <= MAX_FAILURE_EXAMPLES:
        return relevant
    return random.Random(f'{seed}:{name}').sample(relevant, MAX_FAILURE_EXAMPLES)


async def _in_daemon_thread(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """`fn(**kwargs)` off the event loop, on a daemon thread: a blocking model call must not keep an
    interrupted run alive (asyncio.to_thread's executor is joined at shutdown, so Ctrl-C would wait for it)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def work() -> None:
        try:
            outcome: tuple[Callable[[Any], None], Any] = (future.set_result, fn(**kwargs))
        except BaseException as e:
            outcome = (future.set_exception, e)
        with contextlib.suppress(RuntimeError):  # the loop is gone: the run was interrupted meanwhile
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, name='sensei-eval-generator', daemon=True).start()
    return await future


def _safe(name: str) -> str:
    return ''.join(c if c.isalnum() or c in '-_' else '_' for c in name)


def _fmt(score: float | None) -> str:
    return 'n/a' if score is None else f'{score:.3f}'


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)
