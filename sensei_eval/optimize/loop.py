"""The sequential component optimizer (DSPy): one component at a time, kept only when it generalises.

    baseline: evaluate the prompt as it is on every query (once), then split the queries into train
        (failure examples, candidate search) and validation (acceptance) within each group of queries
        that failed the same failure modes (a stratified split; by seed alone with validation_queries)
    route every finding on train, under its own failure mode (`core.verdicts.mode_verdicts`), to a prompt
        component (`sensei_eval.optimize.routing`: the user's map, else the agent profile's map, else lexical)
    for each component with failures, most first, in rounds (at most `rounds`):
        generate N variants (DSPy), fed the failures routed to it grouped by what went wrong (a count
            and `examples_per_issue` examples per kind) and `success_examples` passing runs
        evaluate every full prompt = frozen components + one variant on the training queries
        the best `top_k` that beat the current text on train are run on the validation queries (`runs`
            times each) and tested against the current text on the *test queries* — the validation
            queries plus the train queries the generator was not shown — by a one-sided paired
            sign-flip test on the failure modes of the findings the variants were written from; the first
            with p < alpha / components / N, a mean gain of the overall score above `margin` and no more
            errors is frozen, and a next round starts from the failures left; else the component ends

Every score here is the runs' overall score, the number `validate` compares (`evaluate.run_overall`), so
a suggestion's promised gain and its 95% paired bootstrap interval are what `validate` would show on
the same queries. The test is the exact sign-flip test of `validate.stats` (zero differences left out,
every sign pattern enumerated up to 20 changed queries), so the same evidence always gives the same
decision: 6 queries improved, none hurt and 8 unchanged is p = 1/64 in every seed. A query not judged on
one side (a judge error) is left out of the pairs and counted in the test, never scored 0 or 1.

The train score picks candidates; only the test accepts one, so a variant that changes nothing, or
helps only the queries it was written from, is not frozen. The test level splits `alpha` over the
components (Bonferroni) and the variants of a round (the train ranking saw them all on the unseen train
queries the test reuses); rounds form a fixed sequence. `acceptance_plan` states, before anything is
tested, the smallest gain a split can accept. With too few validation queries no gain can reach `alpha`
(the exact one-sided test's smallest p is 0.5^n): the run refuses to start and says so. Components with
no routed failure are not visited unless `all_components` is set; the run folder says why each was
skipped.

Budget: `budget_calls` counts model calls (agent requests, judge requests that missed the cache, and
variant-generator requests); before each step the loop checks the step's expected cost — the cost of
the last evaluation of that kind — against what is left, so it stops *before* overspending.
`max_metric_calls` counts judged agent runs (one per query and run per evaluated prompt), the unit
DSPy's GEPA budgets in. `max_components` caps the components visited.

Everything is saved under the run folder as it happens — `state.json` (rewritten atomically after
every candidate), `candidates/<component>/r<round>-<k>.json` (the variant, its full prompt, its evaluations,
its test), `candidates/baseline.json` — so a killed run resumed with the same folder continues where it
stopped: generated variants are reused, evaluated candidates are not re-run. At the end it writes
`suggestions.json` (`PromptSuggestion`s, for a human to review: nothing is applied to the
agent) and `prompts.yaml` / `prompts.diff` (the optimized components and their diff).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sensei_eval.agents.components import PromptComponents, save_components, section_diff
from sensei_eval.agents.runner import AgentRunner, Query
from sensei_eval.core.errors import ConfigError
from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.base import Judge
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.optimize.acceptance import (
    acceptance_plan,
    interval_pair,
    run_profile,
    split_queries,
    validation_test,
)
from sensei_eval.optimize.evaluate import FailureExample, PromptEvaluation, base_query_id, evaluate_prompt, summarise
from sensei_eval.optimize.routing import Routing, RoutingError, resolve_routing
from sensei_eval.optimize.state import (
    STATE_VERSION,
    CandidateResult,
    ComponentState,
    OptimizeConfig,
    OptimizeState,
    PromptSuggestion,
    Split,
    ValidationTest,
)
from sensei_eval.optimize.variants import CallLimits, VariantGenerator

__all__ = ('SequentialOptimizer', 'build_suggestions', 'order_components', 'route_failures')

T = TypeVar('T')


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
    routing: Routing = field(init=False)
    split: Split = field(init=False)

    def __post_init__(self) -> None:
        self.config = self.config.model_copy(
            update={'query_ids': [q.query_id for q in self.queries], 'judges': [j.name for j in self.judges]}
        )
        # refuses a split whose test could accept nothing; a stratified split replaces it after the baseline
        self.split = split_queries([q.query_id for q in self.queries], self.config)
        profile = run_profile(self.config.profile, self.queries)
        try:
            self.routing = resolve_routing(
                self.components.names,
                user_map=self.config.component_map,
                profile_map=profile.component_map,
                profile=profile.name,
            )
        except RoutingError as e:
            raise RoutingError(f'{self.components.source}: {e}') from None
        self._by_id = {q.query_id: q for q in self.queries}
        self._use_split(self.split)

    def _use_split(self, split: Split) -> None:
        self.split = split
        self._train = [self._by_id[i] for i in split.train]
        self._validation = [self._by_id[i] for i in split.validation]

    @property
    def _stratified(self) -> bool:
        return self.config.stratify and self.config.validation_queries is None

    async def run(self) -> OptimizeState:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        state = self._load_or_start()
        current = await self._baseline(state)
        if state.stopped is None and not state.order:
            texts = state.current
            routed, unrouted = route_failures(current[0], self.routing, texts)
            state.routing, state.routing_detail = self.routing.source, self.routing.describe()
            state.unrouted_failures = len(unrouted)
            state.order = _order(self.components.names, routed)
            for name in self.components.names:
                cs = state.components.setdefault(name, ComponentState(name=name))
                cs.failures = len(routed.get(name, []))
                cs.failure_queries = _by_judge(routed.get(name, []))
                cs.issue_counts = {label: len(group) for label, group in _groups(routed.get(name, []))}
                if name not in state.order:
                    cs.status = 'skipped'
                    cs.reason = 'no failure found on the training queries was routed to it'
            self._event(
                f'routing: {state.routing_detail}; failures per component: '
                + (', '.join(f'{n} {state.components[n].failures}' for n in state.order) or 'none')
                + (f'; {len(unrouted)} failure(s) of modes the map does not name were not routed' if unrouted else '')
            )
            if self.config.all_components:
                state.order += [n for n in self.components.names if n not in state.order]
                for n in state.order:
                    if state.components[n].status == 'skipped':
                        state.components[n].status, state.components[n].reason = 'pending', None
            state.alpha_per_test, state.plan = acceptance_plan(self.config, self.split, len(state.order))
            self._event(state.plan)
            self._save(state)
        visited = sum(1 for n in state.order if state.components[n].status == 'done')
        for name in state.order:
            if state.stopped is not None:
                break
            cs = state.components[name]
            if cs.status == 'done':
                current = self._frozen_evals(state, name) or current
                continue
            if self.config.max_components is not None and visited >= self.config.max_components:
                state.stopped = f'max_components ({self.config.max_components}) reached'
                break
            current = await self._component(state, cs, current)
            visited += 1
        if state.stopped is None:
            state.stopped = 'complete'
        self._finish(state)
        return state

    # -- steps -----------------------------------------------------------------------------------------

    async def _baseline(self, state: OptimizeState) -> tuple[PromptEvaluation, PromptEvaluation]:
        path = self.run_dir / 'candidates' / 'baseline.json'
        if path.is_file():
            data = json.loads(path.read_text())
            return PromptEvaluation.model_validate(data['evaluation']), PromptEvaluation.model_validate(data['validation'])
        prompt = self._current_components(state).build()
        if self._stratified:
            # every query once, so the split can put each group of queries that fail the same modes on both sides
            self._event(f'baseline: evaluating the prompt as it is on all {len(self.queries)} queries')
            evaluation, reports = await self._evaluate_full(prompt, self.queries, 1)
            self._spend(state, evaluation, len(self.queries))
            strata = {q: '+'.join(sorted(m)) or 'no failure' for q, m in evaluation.failing_modes.items()}
            self._use_split(split_queries([q.query_id for q in self.queries], self.config, strata))
            state.split = self.split
            train = _restrict(prompt, evaluation, reports, self.split.train)
            if self.config.runs == 1:
                validation = _restrict(prompt, evaluation, reports, self.split.validation)
            else:
                validation = await self._evaluate(prompt, self._validation, self.config.runs)
                self._spend(state, validation, len(self._validation) * self.config.runs)
            groups = sorted(set(strata.values()))
            self._event(f'split stratified by the failure modes seen ({len(groups)} group(s): {", ".join(groups)})')
        else:
            self._event(
                f'baseline: evaluating the prompt as it is on {len(self._train)} train and {len(self._validation)} '
                f'validation queries ({self.config.runs} run(s) each on validation)'
            )
            train = await self._evaluate(prompt, self._train, 1)
            self._spend(state, train, len(self._train))
            validation = await self._evaluate(prompt, self._validation, self.config.runs)
            self._spend(state, validation, len(self._validation) * self.config.runs)
        state.baseline_score = state.current_score = train.score
        state.baseline_validation_score = state.current_validation_score = validation.score
        write_text_atomic(
            path, _dump({'prompt': prompt, 'evaluation': train.model_dump(), 'validation': validation.model_dump()})
        )
        self._save(state)
        self._event(
            f'baseline: train {_fmt(train.score)}, validation {_fmt(validation.score)} '
            f'({train.errors + validation.errors} error(s), {train.model_calls + validation.model_calls} model calls)'
        )
        return train, validation

    async def _component(
        self, state: OptimizeState, cs: ComponentState, current: tuple[PromptEvaluation, PromptEvaluation]
    ) -> tuple[PromptEvaluation, PromptEvaluation]:
        """Rounds on one component: each generates variants from the failures still routed to it and
        tests the best; a next round only after an accepted one, while failures are left."""
        if cs.status != 'evaluating':
            cs.score_before = state.current_score
            cs.validation_before = state.current_validation_score
        cs.status = 'evaluating'
        while True:
            current, accepted = await self._round(state, cs, current)
            if state.stopped is not None or not accepted:
                break
            routed, _ = route_failures(current[0], self.routing, state.current)
            if cs.round >= self.config.rounds or not routed.get(cs.name):
                break
            cs.round += 1
            cs.variants, cs.shown_queries, cs.generator_errors = None, [], []
            self._save(state)
        if state.stopped is None or accepted:
            cs.status = 'done'
            cs.score_after, cs.validation_after = state.current_score, state.current_validation_score
            if cs.accepted_rounds:
                cs.reason = f'{cs.accepted_rounds} round(s) accepted; {cs.reason}'
        self._save(state)
        return current

    async def _round(
        self, state: OptimizeState, cs: ComponentState, current: tuple[PromptEvaluation, PromptEvaluation]
    ) -> tuple[tuple[PromptEvaluation, PromptEvaluation], bool]:
        """One round; (the evaluations of the current prompt, whether a variant was accepted).

        Generate variants from the failures routed here (once: a resumed round keeps them), score each on
        train, rank those that beat the current text there, and test them in turn on held-out queries:
        the first accepted is frozen."""
        if cs.variants is None and not await self._generate(state, cs, current):
            return current, False
        mine = await self._score_variants(state, cs, current)
        if state.stopped is not None and len(mine) < len(cs.variants or []):
            self._save(state)
            return current, False  # unfinished: resumed later, nothing frozen from half a comparison
        ranked = self._ranked(state, cs, mine)
        if not ranked:
            return current, False
        return await self._test_ranked(state, cs, current, ranked)

    async def _generate(
        self, state: OptimizeState, cs: ComponentState, current: tuple[PromptEvaluation, PromptEvaluation]
    ) -> bool:
        """Ask the generator for this round's variants (stored in `cs.variants`); False when there are none
        (the budget stopped the run, or the generator gave nothing usable)."""
        name, r = cs.name, cs.round
        if self._over_budget(state, self.generator.max_calls(self.config.variants), 0):
            state.stopped = f'budget reached before generating variants for {name}'
            self._save(state)
            return False
        routed = route_failures(current[0], self.routing, state.current)[0].get(name, [])
        groups, shown = _grouped(routed, self.config.examples_per_issue)
        cs.target_modes = sorted({e.failure_mode for e in routed if e.failure_mode})
        successes = [e for e in current[0].success_examples][: self.config.success_examples]
        cs.shown_queries = sorted(shown | {e.query_id for e in successes})
        components = self._current_components(state)
        self._event(
            f'{name}: round {r}: generating {self.config.variants} variant(s) from {len(groups)} kind(s) of failure '
            f'({sum(len(g) for _, g in _groups(routed))} finding(s)) and {len(successes)} passing run(s)'
        )
        before = self.generator.lm_calls
        out = await _in_daemon_thread(
            self.generator,
            component_name=name,
            current_text=components[name],
            rest_of_prompt='\n\n'.join(f'## {n}\n{t}' for n, t in components.sections if n != name),
            failure_examples=groups,
            num_variants=self.config.variants,
            seed=self.config.seed * 100 + r,
            **_supported(
                type(self.generator).forward,
                limits=CallLimits(self.config.generator_timeout_s, self.config.generator_max_tokens),
                successful_runs=[e.render() for e in successes],
            ),
        )
        calls_made = self.generator.lm_calls - before
        cs.generator_calls += calls_made
        state.generator_calls += calls_made
        cs.variants = list(out.variants)
        cs.generator_errors = list(getattr(out, 'errors', []) or [])
        self._save(state)
        if not cs.variants:
            why = '; '.join(cs.generator_errors[-2:]) or 'no answer'
            cs.reason = f'round {r}: the generator produced no usable variant in {calls_made} call(s): {why}'
            self._event(f'{name}: {cs.reason}')
            return False
        return True

    async def _score_variants(
        self, state: OptimizeState, cs: ComponentState, current: tuple[PromptEvaluation, PromptEvaluation]
    ) -> list[CandidateResult]:
        """This round's candidates, each variant scored on train (those scored before a resume kept);
        stops early (setting `state.stopped`) when the budget would run out."""
        name, r, variants = cs.name, cs.round, cs.variants or []
        mine = [c for c in cs.candidates if c.round == r]
        done = {c.index for c in mine}
        for k, text in enumerate(variants):
            if k in done:
                continue
            if self._over_budget(state, current[0].model_calls, len(self._train)):
                state.stopped = f'budget reached while evaluating {name} (round {r}, variant {k + 1} of {len(variants)})'
                break
            self._event(f'{name}: round {r}: evaluating variant {k + 1}/{len(variants)} on train')
            candidate = await self._score_variant(state, cs, k, text)
            cs.candidates.append(candidate)
            mine.append(candidate)
            self._save(state)
            self._event(f'{name}: variant {k + 1} train {_fmt(candidate.score)} (current {_fmt(state.current_score)})')
        return mine

    async def _score_variant(self, state: OptimizeState, cs: ComponentState, k: int, text: str) -> CandidateResult:
        """Variant `k` of this round evaluated on train, its evaluation written under `candidates/`."""
        name, r = cs.name, cs.round
        prompt = self._current_components(state).with_text(name, text).build()
        evaluation = await self._evaluate(prompt, self._train, 1)
        self._spend(state, evaluation, len(self._train))
        path = self.run_dir / 'candidates' / _safe(name) / f'r{r}-{k}.json'
        record = {'component': name, 'round': r, 'index': k, 'text': text, 'prompt': prompt}
        write_text_atomic(path, _dump({**record, 'evaluation': evaluation.model_dump()}))
        return CandidateResult(
            component=name,
            round=r,
            index=k,
            text=text,
            score=evaluation.score,
            model_calls=evaluation.model_calls,
            errors=evaluation.errors,
            path=str(path.relative_to(self.run_dir)),
        )

    def _ranked(self, state: OptimizeState, cs: ComponentState, mine: list[CandidateResult]) -> list[CandidateResult]:
        """The best on train that beat the current text there, top k (empty: the round keeps the text, and
        says why). Each is then tested at alpha / (components x variants)."""
        beat = [c for c in mine if c.score is not None and (state.current_score is None or c.score > state.current_score)]
        ranked = sorted(beat, key=lambda c: (-(c.score or 0.0), c.index))[: self.config.top_k]
        if not ranked:
            best = max((c.score for c in mine if c.score is not None), default=None)
            why = 'no variant scored' if best is None else f'no variant beat it on train (best {_fmt(best)})'
            cs.reason = f'round {cs.round}: kept the current text: {why}'
            self._event(f'{cs.name}: {cs.reason}')
        return ranked

    async def _test_ranked(
        self,
        state: OptimizeState,
        cs: ComponentState,
        current: tuple[PromptEvaluation, PromptEvaluation],
        ranked: list[CandidateResult],
    ) -> tuple[tuple[PromptEvaluation, PromptEvaluation], bool]:
        """Test the ranked candidates in turn on held-out queries; freeze the first accepted."""
        alpha = state.alpha_per_test or self.config.alpha
        unseen = [q for q in self.split.train if q not in set(cs.shown_queries)]
        failed: list[str] = []
        for candidate in ranked:
            test = candidate.validation or await self._validate(state, cs, current, candidate, alpha, unseen)
            if test is None:
                return current, False
            if not test.accepted:
                failed.append(f'variant {candidate.index + 1}: {test.reason}')
                continue
            self._freeze(state, cs, candidate, test, alpha)
            return self._frozen_evals(state, cs.name) or current, True
        cs.reason = f'round {cs.round}: kept the current text: ' + '; '.join(failed)
        self._event(f'{cs.name}: {cs.reason}')
        return current, False

    async def _validate(
        self,
        state: OptimizeState,
        cs: ComponentState,
        current: tuple[PromptEvaluation, PromptEvaluation],
        candidate: CandidateResult,
        alpha: float,
        unseen: list[str],
    ) -> ValidationTest | None:
        """Evaluate `candidate` on the validation queries and run its acceptance test against the current
        prompt (on validation plus the train queries the generator was not shown); the result goes into
        the candidate and its file. None when the budget stopped the run first."""
        name, runs = cs.name, self.config.runs
        if self._over_budget(state, current[1].model_calls, len(self._validation) * runs):
            state.stopped = f'budget reached before validating {name} round {cs.round} variant {candidate.index + 1}'
            self._save(state)
            return None
        self._event(
            f'{name}: testing variant {candidate.index + 1} on {len(self._validation)} held-out queries '
            f'(+{len(unseen)} train queries the generator was not shown)'
        )
        prompt = self._current_components(state).with_text(name, candidate.text).build()
        validation = await self._evaluate(prompt, self._validation, runs)
        self._spend(state, validation, len(self._validation) * runs)
        path = self.run_dir / candidate.path
        data = json.loads(path.read_text())
        train = PromptEvaluation.model_validate(data['evaluation'])
        data['validation'] = validation.model_dump()
        candidate.validation_score = validation.score
        candidate.validation = validation_test(
            _joined(current[1], current[0], unseen),
            _joined(validation, train, unseen),
            alpha=alpha,
            margin=self.config.margin,
            modes=cs.target_modes or None,
        )
        data['validation_test'] = candidate.validation.model_dump()
        write_text_atomic(path, _dump(data))
        self._save(state)
        return candidate.validation

    def _freeze(
        self, state: OptimizeState, cs: ComponentState, candidate: CandidateResult, test: ValidationTest, alpha: float
    ) -> None:
        """Make an accepted candidate the component's text from now on."""
        state.current[cs.name] = candidate.text
        state.current_score = candidate.score
        state.current_validation_score = candidate.validation_score
        cs.frozen_index, cs.frozen_path = candidate.index, candidate.path
        cs.accepted_rounds += 1
        cs.reason = f'round {cs.round}: variant {candidate.index + 1} accepted: {test.reason}'
        self._event(
            f'{cs.name}: round {cs.round}: froze variant {candidate.index + 1} (train {_fmt(cs.score_before)} -> '
            f'{_fmt(candidate.score)}, validation {_fmt(cs.validation_before)} -> {_fmt(candidate.validation_score)}, '
            f'p={test.p_value:.4f} < {alpha:.4g})'
        )
        self._save(state)

    async def _evaluate(self, prompt: str, queries: Sequence[Query], runs: int) -> PromptEvaluation:
        evaluation, _ = await self._evaluate_full(prompt, queries, runs)
        return evaluation

    async def _evaluate_full(
        self, prompt: str, queries: Sequence[Query], runs: int
    ) -> tuple[PromptEvaluation, list[RecordReport]]:
        return await evaluate_prompt(
            prompt,
            queries,
            self.runner,
            self.judges,
            self.judge_model,
            concurrency=self.config.concurrency,
            cache=self.cache,
            runs=runs,
        )

    # -- bookkeeping -----------------------------------------------------------------------------------

    def _load_or_start(self) -> OptimizeState:
        path = self.run_dir / 'state.json'
        if path.is_file():
            raw = json.loads(path.read_text())
            if raw.get('version', 1) < STATE_VERSION:
                raise ConfigError(
                    f'{path}: written by an older optimizer (another search and acceptance rule); '
                    'it cannot be resumed, use a new --out'
                )
            state = OptimizeState.model_validate(raw)
            if state.original != self.components.as_dict():
                raise ConfigError(f'{path}: this run folder optimizes other prompt components; use a new --out')
            if state.config.query_ids != self.config.query_ids or state.config.judges != self.config.judges:
                raise ConfigError(f'{path}: this run folder used other queries or judges; use a new --out')
            if not self._stratified and state.split is not None and state.split != self.split:
                raise ConfigError(f'{path}: this run folder split the queries differently; use a new --out')
            if state.split is not None:
                self._use_split(state.split)
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
            split=None if self._stratified else self.split,
        )
        self._save(state)
        return state

    def _current_components(self, state: OptimizeState) -> PromptComponents:
        components = self.components
        for name, text in state.current.items():
            components = components.with_text(name, text)
        return components

    def _frozen_evals(self, state: OptimizeState, name: str) -> tuple[PromptEvaluation, PromptEvaluation] | None:
        cs = state.components[name]
        if cs.frozen_path is None:
            return None
        data = json.loads((self.run_dir / cs.frozen_path).read_text())
        return PromptEvaluation.model_validate(data['evaluation']), PromptEvaluation.model_validate(data['validation'])

    def _spend(self, state: OptimizeState, evaluation: PromptEvaluation, metric_calls: int) -> None:
        state.agent_calls += evaluation.agent_calls
        state.judge_calls += evaluation.judge_calls
        state.metric_calls += metric_calls

    def _over_budget(self, state: OptimizeState, model_calls: int, metric_calls: int) -> bool:
        cfg = self.config
        if cfg.budget_calls is not None and state.model_calls + model_calls > cfg.budget_calls:
            return True
        return cfg.max_metric_calls is not None and state.metric_calls + metric_calls > cfg.max_metric_calls

    def _save(self, state: OptimizeState) -> None:
        write_text_atomic(self.run_dir / 'state.json', state.model_dump_json(indent=2))

    def _finish(self, state: OptimizeState) -> None:
        self._save(state)
        optimized = self._current_components(state)
        save_components(optimized, self.components, self.run_dir)
        suggestions = build_suggestions(state, self.run_dir, [j.name for j in self.judges])
        write_text_atomic(self.run_dir / 'suggestions.json', _dump([s.model_dump() for s in suggestions]))
        self._event(
            f'done ({state.stopped}): train {_fmt(state.baseline_score)} -> {_fmt(state.current_score)}, validation '
            f'{_fmt(state.baseline_validation_score)} -> {_fmt(state.current_validation_score)}; '
            f'{len(suggestions)} suggestion(s) in {self.run_dir}/suggestions.json'
        )

    def _event(self, message: str) -> None:
        if self.on_event is not None:
            self.on_event(message)


def route_failures(
    evaluation: PromptEvaluation, routing: Routing, components: Mapping[str, str]
) -> tuple[dict[str, list[FailureExample]], list[FailureExample]]:
    """The evaluation's failure examples by the component the routing sends them to, and those it sends nowhere."""
    routed: dict[str, list[FailureExample]] = {}
    unrouted: list[FailureExample] = []
    for example in evaluation.failure_examples:
        targets = routing.route(example.failure_mode, example.routing_text(), components)
        if not targets:
            unrouted.append(example)
        for name in targets:
            routed.setdefault(name, []).append(example)
    return routed, unrouted


def order_components(components: PromptComponents, evaluation: PromptEvaluation, routing: Routing | None = None) -> list[str]:
    """Components that failures were routed to, most failures first (ties in prompt order). Lexical routing
    unless `routing` is given."""
    routing = routing or resolve_routing(components.names)
    routed, _ = route_failures(evaluation, routing, components.as_dict())
    return _order(components.names, routed)


def build_suggestions(state: OptimizeState, run_dir: Path, judge_names: Sequence[str]) -> list[PromptSuggestion]:
    """One suggestion per frozen component: what failed and how often (the findings routed to it), and the
    measured gain of the judges that ran, with its interval and p-value."""
    out = []
    split = state.split or Split(train=state.config.query_ids, validation=[])
    ran = _judges_that_ran(run_dir, judge_names)
    for name in state.order:
        cs = state.components[name]
        if cs.frozen_path is None:
            continue
        by_judge = cs.failure_queries
        n_train = len(split.train)
        kinds = ', '.join(f'{label} ×{n}' for label, n in cs.issue_counts.items())
        runs = len({q for qs in by_judge.values() for q in qs})
        pattern = f'{kinds} (in {runs} of {n_train} training runs)' if kinds else ''
        test = next((c.validation for c in cs.candidates if c.path == cs.frozen_path), None)
        gain = ''
        if test is not None and test.delta is not None:
            interval = '' if test.ci_low is None else f', 95% interval {test.ci_low:+.3f} … {test.ci_high:+.3f}'
            gain = (
                f'; expected gain of the overall score (the scale `validate` reports) on its {test.pairs} test '
                f'queries {test.delta:+.3f}{interval}, one-sided exact sign-flip p={test.p_value:.4f} < {test.alpha:.3g}'
            )
        out.append(
            PromptSuggestion(
                failure_pattern=pattern or 'no routed failure (visited with --all-components)',
                affected_queries=sorted({q for qs in by_judge.values() for q in qs}),
                current_prompt_section=name,
                suggested_change=state.current[name],
                expected_improvement=(
                    f'overall score (judges: {", ".join(ran) or "no judge ran"}) on {len(split.train)} training queries '
                    f'{_fmt(cs.score_before)} -> {_fmt(cs.score_after)}; on {len(split.validation)} held-out validation '
                    f'queries ({state.config.runs} run(s) each) {_fmt(cs.validation_before)} -> {_fmt(cs.validation_after)}'
                    f'{gain}. Routing: {state.routing_detail or state.routing}. '
                    'Check it on your own held-out queries with `sensei-eval validate` before applying.'
                ),
                diff=section_diff(name, state.original[name], state.current[name]),
                score_before=cs.score_before,
                score_after=cs.score_after,
                validation_before=cs.validation_before,
                validation_after=cs.validation_after,
                p_value=None if test is None else test.p_value,
                validation_gain=None if test is None else test.delta,
                gain_interval=interval_pair(test.ci_low, test.ci_high) if test is not None else None,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------------
# Helpers


def _order(names: Sequence[str], routed: Mapping[str, Sequence[FailureExample]]) -> list[str]:
    failing = [n for n in names if routed.get(n)]
    return sorted(failing, key=lambda n: (-len(routed[n]), list(names).index(n)))


def _by_judge(examples: Sequence[FailureExample]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in examples:
        if e.query_id not in out.setdefault(e.judge, []):
            out[e.judge].append(e.query_id)
    return out


def _groups(examples: Sequence[FailureExample]) -> list[tuple[str, list[FailureExample]]]:
    """Findings grouped by what went wrong (`FailureExample.label`), most frequent first."""
    groups: dict[str, list[FailureExample]] = {}
    for e in examples:
        groups.setdefault(e.label or e.summary, []).append(e)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _grouped(examples: Sequence[FailureExample], per: int) -> tuple[list[str], set[str]]:
    """The generator's failure input — per kind of failure its count and `per` examples from distinct
    queries — and the queries those examples come from (left out of the acceptance test)."""
    out: list[str] = []
    shown: set[str] = set()
    for label, group in _groups(examples):
        picked: list[FailureExample] = []
        for e in sorted(group, key=lambda e: (e.query_id not in shown, e.query_id)):
            if len(picked) < per and all(p.query_id != e.query_id for p in picked):
                picked.append(e)
        shown.update(e.query_id for e in picked)
        modes = ', '.join(sorted({f'{e.failure_mode or "-"}, {e.judge}' for e in group}))
        queries = len({e.query_id for e in group})
        lines = [f'{label} ×{len(group)} in {queries} run(s) ({modes}), e.g.:']
        lines += [f'  {e.render()}' for e in picked]
        out.append('\n'.join(lines))
    return out, shown


def _restrict(prompt: str, evaluation: PromptEvaluation, reports: Sequence[RecordReport], ids: Sequence[str]) -> PromptEvaluation:
    """`evaluation` as if only the queries `ids` had been run."""
    keep = set(ids)
    chosen = [r for r in reports if base_query_id(r.query_id) in keep]
    errors = [e for e in evaluation.agent_errors if any(e.startswith(f'{q}: ') for q in keep)]
    part = summarise(prompt, [], chosen, errors)
    # its share of the cost (already counted once), what the budget check expects a like evaluation to cost
    share = len(chosen) / len(reports) if reports else 0.0
    return part.model_copy(
        update={'agent_calls': round(evaluation.agent_calls * share), 'judge_calls': round(evaluation.judge_calls * share)}
    )


def _joined(validation: PromptEvaluation, train: PromptEvaluation, unseen: Sequence[str]) -> PromptEvaluation:
    """The test queries of one side: the validation queries and the train queries the generator was not shown."""
    extra = {q: train.per_query[q] for q in unseen if q in train.per_query}
    per_query = {**validation.per_query, **extra}
    per_mode = {**validation.per_query_mode, **{q: train.per_query_mode[q] for q in unseen if q in train.per_query_mode}}

    def mine(errors: Sequence[str]) -> list[str]:
        return [e for e in errors if any(e.startswith(f'{q}: ') or e.startswith(f'{q}#') for q in unseen)]

    return PromptEvaluation(
        prompt_version=validation.prompt_version,
        score=sum(per_query.values()) / len(per_query) if per_query else None,
        n_scores=len(per_query),
        per_query=per_query,
        per_query_mode=per_mode,
        judge_errors=[*validation.judge_errors, *mine(train.judge_errors)],
        agent_errors=[*validation.agent_errors, *mine(train.agent_errors)],
    )


def _judges_that_ran(run_dir: Path, judge_names: Sequence[str]) -> list[str]:
    """The judges with at least one verdict on the baseline (a judge that never applied or always errored
    is not claimed as evidence)."""
    path = run_dir / 'candidates' / 'baseline.json'
    if not path.is_file():
        return list(judge_names)
    data = json.loads(path.read_text())
    ran = {j for side in ('evaluation', 'validation') for j in (data.get(side) or {}).get('per_judge', {})}
    return [j for j in judge_names if j in ran]


def _supported(fn: Callable[..., Any], **kwargs: Any) -> dict[str, Any]:
    """The keyword arguments `fn` accepts (a user's own generator may not take the time and token limits)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


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
