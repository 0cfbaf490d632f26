"""The optimizer: components, agent runner, variant generator, sequential loop, DSPy metrics, GEPA.

Offline throughout: the agent is scripted (its answer depends on the rules its system prompt states),
the judges are the deterministic checks or a FunctionModel judge, and DSPy runs on a `ScriptedLM`
whose answers depend on the component it is asked to rewrite.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.agents.components import ComponentsError, PromptComponents, load_components
from sensei_eval.agents.runner import PydanticAIRunner, Query, load_queries, load_runner
from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.profiles import BUILTIN_PROFILES
from sensei_eval.optimize.acceptance import split_queries, validation_test
from sensei_eval.optimize.loop import SequentialOptimizer
from sensei_eval.optimize.metrics import AgentProgram, JudgeMetric
from sensei_eval.optimize.scripted import ScriptedLM
from sensei_eval.optimize.state import OptimizeConfig, OptimizeState
from sensei_eval.optimize.variants import VariantGenerator

ROOT = Path(__file__).resolve().parents[1]

CITE_RULE = 'Cite every claim with <source ref="..."> tags that quote a snippet.'
NO_GREETING_RULE = 'No greetings or filler: your reader is another agent.'
NOOP = 'Be concise and precise.'

COMPONENTS = PromptComponents.from_mapping(
    {
        'IDENTITY': 'You are a documentation research agent.',
        'CHOOSING_SOURCES': 'Prefer good sources.',
        'CITATIONS': 'Mention where facts come from.',
    }
)
# a documentation agent's queries: its conventions (citations, no greetings) are checked under its profile;
# twelve, so that the six held out for validation can show a gain (the exact test's smallest p is 0.5^6)
QUERIES = [Query(f'q{i}', f'How do I configure FastAPI feature {i}?', metadata={'profile': 'docs-agent'}) for i in range(1, 13)]
N_TRAIN, N_VAL = 6, 6


@dataclass
class RuleAgent:
    """An AgentRunner whose run follows the rules its system prompt states (and nothing else).

    `only_for`: the rules are followed only on these query ids (an agent whose gain does not generalise)."""

    prompts: list[str] = field(default_factory=list)
    fail_on: set[str] = field(default_factory=set)
    only_for: set[str] | None = None
    query_ids: list[str] = field(default_factory=list)

    async def run(self, system_prompt: str, query: Query) -> QueryRecord:
        self.prompts.append(system_prompt)
        self.query_ids.append(query.query_id)
        if query.query_id in self.fail_on:
            raise RuntimeError('tool server down')
        follows = self.only_for is None or query.query_id in self.only_for
        answer = 'Set `app.state` in the lifespan handler.'
        if '<source' in system_prompt and follows:
            answer += ' <source ref="fastapi/lifespan.md">"use the lifespan parameter"</source>'
        if 'greeting' not in system_prompt.lower() or not follows:
            answer = "Hello! I'd be happy to help. " + answer
        return QueryRecord.model_validate(
            {
                'query_id': query.query_id,
                'query': query.query,
                'message_format': 'openai',
                'messages': [
                    {'role': 'system', 'content': system_prompt},
                    {'role': 'user', 'content': query.query},
                    {'role': 'assistant', 'content': None, 'tool_calls': [
                        {'id': 'c1', 'type': 'function',
                         'function': {'name': 'context7_get_docs', 'arguments': '{"library_id": "/fastapi/fastapi"}'}}]},
                    {'role': 'tool', 'tool_call_id': 'c1', 'content': 'use the lifespan parameter of FastAPI()'},
                    {'role': 'assistant', 'content': answer},
                ],
                'metadata': {'agent_requests': 2, **query.metadata},
            }
        )  # fmt: skip


def _section(messages: list[dict[str, Any]]) -> str:
    return str(messages[-1]['content']).split('Section to rewrite: ')[1].split('\n')[0].strip()


def proposer(good: dict[str, str], bad: dict[str, str] | None = None) -> ScriptedLM:
    """A generator LM that proposes, for each component, first a worse text and then (when it has one) a better
    one: one variant per call, as the generator asks."""

    def respond(messages: list[dict[str, Any]]) -> str:
        name = _section(messages)
        again = 'Already proposed' in messages[-1]['content']
        text = good.get(name, f'{name}: be careful.') if again else (bad or {}).get(name, f'{name}: be thorough.')
        return json.dumps({'variant': text})

    return ScriptedLM(respond)


def optimizer(tmp_path: Path, lm: ScriptedLM, agent: RuleAgent | None = None, **config: Any) -> SequentialOptimizer:
    return SequentialOptimizer(
        components=COMPONENTS,
        runner=agent or RuleAgent(),
        queries=QUERIES,
        judges=make_judges(['greeting_check', 'citation_check']),
        judge_model=None,
        generator=VariantGenerator(lm),
        run_dir=tmp_path / 'run',
        config=OptimizeConfig(**{'variants': 2, **config}),
    )


def generated_for(lm: ScriptedLM) -> list[str]:
    """The components the generator was asked about, once per component (in order)."""
    return list(dict.fromkeys(_section(c) for c in lm.calls))


# ---------------------------------------------------------------------------------------------------
# Components


def test_module_components_mirror_build_prompt(tmp_path: Path) -> None:
    module = tmp_path / 'prompts.py'
    module.write_text(
        textwrap.dedent(
            """
            IDENTITY = "You are sensei."
            CITATIONS = "Cite."
            helper = "not a component"
            MAX_STEPS = 3

            def build_prompt() -> str:
                return f"# Identity\\n{IDENTITY}\\n# Citations\\n{CITATIONS}\\n(tools: a, b)"
            """
        )
    )
    components = load_components(module)
    assert components.names == ['IDENTITY', 'CITATIONS']
    assert components.build() == '# Identity\nYou are sensei.\n# Citations\nCite.\n(tools: a, b)'
    variant = components.with_text('CITATIONS', 'Cite with <source> tags.')
    assert variant.build() == '# Identity\nYou are sensei.\n# Citations\nCite with <source> tags.\n(tools: a, b)'
    assert components.build().endswith('Cite.\n(tools: a, b)'), 'the module is restored after assembling'
    assert '-Cite.\n+Cite with <source> tags.\n' in variant.diff(components)


def test_yaml_and_text_components_and_errors(tmp_path: Path) -> None:
    (tmp_path / 'p.yaml').write_text('components:\n  - name: A\n    text: first\n  - name: B\n    text: second\n')
    components = load_components(tmp_path / 'p.yaml')
    assert components.build() == 'first\n\nsecond'
    roundtrip = tmp_path / 'again.yaml'
    roundtrip.write_text(components.with_text('B', 'two\nlines').to_yaml())
    assert load_components(roundtrip).as_dict() == {'A': 'first', 'B': 'two\nlines'}
    (tmp_path / 'p.txt').write_text('One plain prompt.\n')
    assert load_components(tmp_path / 'p.txt').as_dict() == {'PROMPT': 'One plain prompt.'}
    (tmp_path / 'bad.yaml').write_text('components:\n  - name: A\n    txt: oops\n')
    with pytest.raises(ComponentsError, match=r'bad.yaml: field "components\[0\]"'):
        load_components(tmp_path / 'bad.yaml')
    with pytest.raises(ComponentsError, match='no such file'):
        load_components(tmp_path / 'missing.py')


# ---------------------------------------------------------------------------------------------------
# Agent runner


def _tool_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('lookup', {'topic': 'x'})])
    said = 'terse' if 'terse' in (info.instructions or '') else 'verbose'
    return ModelResponse(parts=[TextPart(f'{said} answer')])


def test_pydantic_ai_runner_overrides_instructions_and_keeps_history() -> None:
    agent = Agent(FunctionModel(_tool_then_answer), instructions='Be verbose.')

    @agent.tool_plain
    def lookup(topic: str) -> str:
        return f'doc about {topic}'

    import asyncio

    runner = PydanticAIRunner(agent)
    record = asyncio.run(runner.run('Be terse.', Query('q1', 'What is x?')))
    assert record.final_answer() == 'terse answer'
    assert [c.tool_name for c in record.tool_calls()] == ['lookup']
    assert record.tool_calls()[0].result == 'doc about x'
    assert record.metadata['agent_requests'] == 2
    assert record.prompt_version and record.prompt_version.startswith('sha256:')
    assert asyncio.run(runner.run('Be verbose.', Query('q1', 'What is x?'))).final_answer() == 'verbose answer'


def test_load_runner_and_queries_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match='MODULE:FACTORY'):
        load_runner('no_colon')
    with pytest.raises(ValueError, match='cannot import'):
        load_runner('no.such.module:make')
    data = tmp_path / 'q.jsonl'
    data.write_text('{"query_id": "a", "query": "A?"}\nnot json\n{"query_id": "b"}\n{"query_id": "a", "query": "again"}\n')
    queries, errors = load_queries(data)
    assert [q.query_id for q in queries] == ['a']
    assert [(e.line, e.field) for e in errors] == [(2, None), (3, 'query'), (4, 'query_id')]


# ---------------------------------------------------------------------------------------------------
# The sequential loop


async def test_better_variant_frozen_worse_not_and_routing_order(tmp_path: Path) -> None:
    lm = proposer(good={'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE + ' You research documentation.'})
    opt = optimizer(tmp_path, lm)
    state = await opt.run()
    # both checks fail on every baseline run; the docs-agent profile's map sends citation_quality to CITATIONS and
    # agent_format to IDENTITY; equal issue counts, so prompt order breaks the tie
    assert state.routing == 'profile map'
    assert state.order == ['IDENTITY', 'CITATIONS']
    assert state.components['IDENTITY'].failures == N_TRAIN and state.components['CITATIONS'].failures == N_TRAIN
    assert state.components['CHOOSING_SOURCES'].status == 'skipped'
    assert state.current['IDENTITY'] == NO_GREETING_RULE + ' You research documentation.'
    assert state.current['CITATIONS'] == CITE_RULE
    assert state.components['IDENTITY'].frozen_index == 1  # the better of the two, not the first
    # the overall score (validate's scale): both checks failing, the band of runs a check failed: 0.25 × 0.5 × 0.5
    assert state.baseline_score == 0.0625 and state.current_score == 1.0
    assert state.baseline_validation_score == 0.0625 and state.current_validation_score == 1.0
    test = state.components['CITATIONS'].candidates[1].validation
    # tested on the validation queries and the train queries whose runs the generator was not shown
    shown = set(state.components['CITATIONS'].shown_queries)
    assert state.split is not None and shown < set(state.split.train)
    assert test is not None and test.accepted and test.p_value < test.alpha
    assert test.pairs == N_VAL + len(set(state.split.train) - shown)
    assert test.alpha == pytest.approx(0.05 / 2 / state.config.variants)  # two components tested, their variants
    assert state.stopped == 'complete'
    assert set(state.split.train).isdisjoint(state.split.validation) if state.split else False
    suggestions = json.loads((tmp_path / 'run' / 'suggestions.json').read_text())
    assert [s['current_prompt_section'] for s in suggestions] == ['IDENTITY', 'CITATIONS']
    assert suggestions[1]['affected_queries'] == sorted(state.split.train)
    # after IDENTITY's fix one check still fails: overall 0.25 x 0.5 (a check failed the run; the mean of the two
    # checks would say 0.75)
    assert suggestions[1]['validation_before'] == 0.125 and suggestions[1]['validation_after'] == 1.0
    assert 'held-out validation queries' in suggestions[1]['expected_improvement']
    assert 'the scale `validate` reports' in suggestions[1]['expected_improvement']
    assert suggestions[1]['failure_pattern'].startswith('citation_quality')
    assert suggestions[1]['gain_interval'] is not None and suggestions[1]['validation_gain'] == test.delta
    assert '+' + CITE_RULE in suggestions[1]['diff']
    assert CITE_RULE in (tmp_path / 'run' / 'prompts.yaml').read_text()
    # the generator saw the failures routed to the component it rewrote
    cit_prompt = next(c[-1]['content'] for c in lm.calls if _section(c) == 'CITATIONS')
    assert 'citation_check' in cit_prompt and 'greeting_check' not in cit_prompt


async def test_worse_variants_are_not_frozen(tmp_path: Path) -> None:
    lm = proposer(good={}, bad={})  # neither variant contains a rule the agent follows
    state = await optimizer(tmp_path, lm).run()
    assert state.current == COMPONENTS.as_dict()
    assert all(state.components[n].frozen_index is None for n in state.order)
    assert 'no variant beat it on train' in (state.components['CITATIONS'].reason or '')
    assert json.loads((tmp_path / 'run' / 'suggestions.json').read_text()) == []


async def test_a_train_only_gain_is_rejected_on_validation(tmp_path: Path) -> None:
    agent = RuleAgent()
    opt = optimizer(tmp_path, proposer(good={'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE}), agent)
    agent.only_for = set(opt.split.train)  # the rules help on the training queries only
    state = await opt.run()
    assert state.current == COMPONENTS.as_dict()
    for name in ('IDENTITY', 'CITATIONS'):
        cs = state.components[name]
        best = cs.candidates[1]
        assert best.score is not None and cs.score_before is not None and best.score > cs.score_before  # better on train
        assert best.validation is not None and not best.validation.accepted
        # the unseen train queries it helps are too few to pass the test: rejected
        assert 'kept the current text' in (cs.reason or '') and 'test queries' in (cs.reason or '')
    assert state.current_validation_score == state.baseline_validation_score


async def test_margin_blocks_a_gain_smaller_than_it(tmp_path: Path) -> None:
    lm = proposer(good={'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE})
    state = await optimizer(tmp_path, lm, margin=0.3).run()
    # each component's fix raises the mean score by 0.25, below the 0.3 margin
    assert state.current == COMPONENTS.as_dict()
    assert 'not above margin 0.3' in (state.components['IDENTITY'].reason or '')


def test_split_is_deterministic_configurable_and_refuses_too_few_queries() -> None:
    ids = [f'q{i}' for i in range(1, 21)]
    first, again = split_queries(ids, OptimizeConfig(seed=3)), split_queries(ids, OptimizeConfig(seed=3))
    assert first == again and len(first.validation) == 10 and set(first.train) | set(first.validation) == set(ids)
    assert split_queries(ids, OptimizeConfig(seed=4)) != first
    assert len(split_queries(ids, OptimizeConfig(validation_fraction=0.3)).validation) == 6
    chosen = split_queries(ids, OptimizeConfig(validation_queries=ids[:7]))
    assert chosen.validation == ids[:7] and chosen.train == ids[7:]
    with pytest.raises(ValueError, match='no such query id'):
        split_queries(ids, OptimizeConfig(validation_queries=['q1', 'nope']))
    with pytest.raises(ValueError, match=r'too few validation queries: 4 of 8 held out.*at least 5'):
        split_queries(ids[:8], OptimizeConfig())
    assert len(split_queries(ids[:8], OptimizeConfig(alpha=0.1)).validation) == 4  # 0.5^4 < 0.1


def test_validation_test_is_paired_and_one_sided() -> None:
    from sensei_eval.optimize.evaluate import PromptEvaluation

    def ev(scores: list[float], errors: int = 0) -> PromptEvaluation:
        return PromptEvaluation(
            prompt_version='x', score=sum(scores) / len(scores), per_query={f'v{i}': s for i, s in enumerate(scores)},
            agent_errors=['e'] * errors,
        )  # fmt: skip

    before = ev([0.5] * 6)
    assert validation_test(before, ev([0.5] * 6), alpha=0.05, margin=0.01).p_value == 1.0
    gain = validation_test(before, ev([1.0] * 6), alpha=0.05, margin=0.01)
    assert gain.accepted and gain.p_value == pytest.approx(1 / 64)
    assert not validation_test(before, ev([0.0] * 6), alpha=0.05, margin=0.01).accepted  # worse: never accepted
    assert not validation_test(before, ev([1.0, 1.0, 0.5, 0.5, 0.5, 0.5]), alpha=0.05, margin=0.01).accepted  # p = 1/4
    crashes = validation_test(before, ev([1.0] * 6, errors=1), alpha=0.05, margin=0.01)
    assert not crashes.accepted and 'more errors' in crashes.reason


async def test_runs_repeat_the_validation_queries(tmp_path: Path) -> None:
    agent = RuleAgent()
    state = await optimizer(tmp_path, proposer(good={}), agent, runs=3, max_components=1).run()
    baseline = json.loads((tmp_path / 'run' / 'candidates' / 'baseline.json').read_text())
    assert set(baseline['validation']['per_query']) == set(state.split.validation if state.split else [])
    # baseline: every query once (the stratified split), then validation 3x; then 2 variants on train
    assert len(agent.prompts) == N_TRAIN + N_VAL + 3 * N_VAL + 2 * N_TRAIN
    assert state.metric_calls == len(agent.prompts)


async def test_budget_stops_the_run(tmp_path: Path) -> None:
    lm = proposer(good={'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE})
    # baseline costs 24 agent calls (12 runs); a train evaluation 12; generation up to 3 calls (2 used)
    state = await optimizer(tmp_path, lm, budget_calls=45).run()
    assert state.stopped is not None and state.stopped.startswith('budget reached')
    assert state.model_calls <= 45
    assert state.components['IDENTITY'].status == 'evaluating'
    assert len(state.components['IDENTITY'].candidates) == 1


async def test_killed_run_resumes_without_repeating_candidates(tmp_path: Path) -> None:
    good = {'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE}
    agent = RuleAgent()
    first = optimizer(tmp_path, proposer(good), agent, budget_calls=45)
    await first.run()  # stops inside IDENTITY after one of its two candidates, like a kill after a checkpoint
    runs_before = len(agent.prompts)
    lm = proposer(good)
    resumed = optimizer(tmp_path, lm, agent)
    state = await resumed.run()
    assert state.stopped == 'complete'
    # IDENTITY's variants were reused (no new generation for it); its first candidate was not re-run
    assert generated_for(lm) == ['CITATIONS']
    # resumed: IDENTITY variant 2 (train) and its validation, CITATIONS' two variants and a validation; no baseline
    assert len(agent.prompts) - runs_before == N_TRAIN + N_VAL + 2 * N_TRAIN + N_VAL
    assert state.current == {**COMPONENTS.as_dict(), **good}


async def test_agent_errors_are_excluded_and_counted(tmp_path: Path) -> None:
    lm = proposer(good={'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE})
    opt = optimizer(tmp_path, lm, RuleAgent(fail_on={'q4'}), max_components=1)
    state = await opt.run()
    baseline = json.loads((tmp_path / 'run' / 'candidates' / 'baseline.json').read_text())
    side = 'evaluation' if 'q4' in opt.split.train else 'validation'
    assert baseline[side]['agent_errors'] == ['q4: agent run failed: RuntimeError: tool server down']
    assert 'q4' not in baseline[side]['per_query']
    assert state.stopped == 'max_components (1) reached'
    assert [n for n in state.order if state.components[n].status == 'done'] == ['IDENTITY']


# ---------------------------------------------------------------------------------------------------
# DSPy metrics and GEPA


def test_judge_metric_scores_and_gives_component_feedback() -> None:
    agent = RuleAgent()
    program = AgentProgram(COMPONENTS, agent)
    judges = make_judges(['greeting_check', 'citation_check'])
    docs_agent = BUILTIN_PROFILES['docs-agent']  # a query of its own, outside the run's: the profile comes from here
    metric = JudgeMetric(judges, None, profile=docs_agent)
    with dspy.context(trace=[]):
        pred = program(query='How do I configure FastAPI?')
        trace = dspy.settings.trace
    assert [t[0] for t in trace] == [program.IDENTITY, program.CHOOSING_SOURCES, program.CITATIONS]
    # the record's overall score (`core.verdicts`), as `judge` and `validate` report it: two failed checks, in the
    # band of runs a check failed: 0.25 * 0.5 * 0.5
    assert metric(dspy.Example(query='q'), pred) == metric.report(pred.record).overall_score == 0.0625
    gepa_metric = JudgeMetric(judges, None, feedback=True, profile=docs_agent)
    out = gepa_metric(dspy.Example(query='q'), pred, None, 'CITATIONS', None)
    assert out.score == 0.0625
    assert 'citation_check' in out.feedback and 'greeting_check' not in out.feedback
    assert gepa_metric.calls == 1
    gepa_metric(dspy.Example(query='q'), pred, None, 'IDENTITY', None)
    assert gepa_metric.calls == 1, 'the same run is judged once'


def test_judge_metric_raises_when_no_judge_scored() -> None:
    from sensei_eval.evaluators.base import JudgeError

    record = RuleAgent()
    program = AgentProgram(COMPONENTS, record)
    pred = program(query='How?')
    metric = JudgeMetric(make_judges(['reference_check']), None)  # needs expected_tool_calls: not applicable
    with pytest.warns(UserWarning, match='not judged'), pytest.raises(JudgeError, match='not judged: no judge applied'):
        metric(dspy.Example(query='How?'), pred)
    assert metric.errors


def test_gepa_learns_on_train_keeps_its_front_on_validation_and_is_held_to_the_same_test(tmp_path: Path) -> None:
    from sensei_eval.judging.options import JudgeRunOptions
    from sensei_eval.optimize.gepa import GepaSettings, run_gepa

    def reflect(messages: list[dict[str, Any]]) -> str:
        # GEPA's proposer (JSON adapter) shows a component's text and the judges' feedback on its runs
        text = messages[-1]['content']
        if 'citation_check: {' in text:
            new = CITE_RULE
        elif 'greeting_check: {' in text:
            new = NO_GREETING_RULE
        else:
            new = 'Keep it short.'
        return json.dumps({'new_instruction': new})

    reflection = ScriptedLM(reflect)
    agent = RuleAgent()
    config = OptimizeConfig(seed=0)
    split = split_queries([q.query_id for q in QUERIES], config)
    result = run_gepa(
        COMPONENTS,
        agent,
        QUERIES,
        JudgeRunOptions(make_judges(['greeting_check', 'citation_check'])),
        GepaSettings(reflection, max_metric_calls=60),
        run_dir=tmp_path / 'gepa',
        config=config,
    )
    assert result.train == split.train and result.validation_queries == split.validation
    # GEPA first scores the seed prompt on its valset: exactly the validation queries
    assert sorted(agent.query_ids[:N_VAL]) == sorted(split.validation)
    assert result.baseline_score == 0.0625  # the seed's overall score: both checks fail (0.25 * 0.5 * 0.5)
    assert result.best_score is not None and result.best_score > 0.0625
    assert result.validation is not None and result.validation.pairs == N_VAL
    assert result.accepted == result.validation.accepted
    assert (result.components != COMPONENTS.as_dict()) == result.accepted
    assert result.metric_calls <= 60 + len(QUERIES)
    assert set(result.components) == set(COMPONENTS.names)
    assert reflection.calls, 'GEPA asked the reflection LM for new component texts'


def test_state_file_is_valid_after_run(tmp_path: Path) -> None:
    import asyncio

    lm = proposer(good={'CITATIONS': CITE_RULE})
    asyncio.run(optimizer(tmp_path, lm, max_components=1).run())
    state = OptimizeState.model_validate_json((tmp_path / 'run' / 'state.json').read_text())
    assert state.metric_calls == N_TRAIN + N_VAL + 2 * N_TRAIN  # baseline on both sides + two candidates on train


class _Killed(BaseException):
    """Stands in for SIGKILL: nothing after it runs, not even the loop's own bookkeeping."""


async def test_run_killed_mid_candidate_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    good = {'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE}

    @dataclass
    class DiesAfter(RuleAgent):
        limit: int = 0

        async def run(self, system_prompt: str, query: Query) -> QueryRecord:
            if len(self.prompts) >= self.limit:
                raise _Killed
            return await super().run(system_prompt, query)

    # baseline (12 runs) + IDENTITY variant 1 (6 runs) + 2 runs into variant 2, then the process dies
    agent = DiesAfter(limit=20)
    with pytest.raises(_Killed):
        await optimizer(tmp_path, proposer(good), agent).run()
    saved = OptimizeState.model_validate_json((tmp_path / 'run' / 'state.json').read_text())
    assert [c.index for c in saved.components['IDENTITY'].candidates] == [0]
    assert not (tmp_path / 'run' / 'suggestions.json').exists()

    survivor = RuleAgent()
    lm = proposer(good)
    state = await optimizer(tmp_path, lm, survivor).run()
    assert state.stopped == 'complete'
    assert state.current == {**COMPONENTS.as_dict(), **good}
    # only IDENTITY's unfinished variant and its validation, CITATIONS' two and a validation ran; no baseline
    assert len(survivor.prompts) == N_TRAIN + N_VAL + 2 * N_TRAIN + N_VAL
    assert generated_for(lm) == ['CITATIONS'], 'IDENTITY reused the variants saved before the kill'


def test_load_queries_reads_records_and_query_lines_in_one_file(tmp_path: Path) -> None:
    records = (Path(__file__).resolve().parents[1] / 'datasets' / 'sample.jsonl').read_text().splitlines()[:2]
    data = tmp_path / 'mixed.jsonl'
    data.write_text('\n'.join([*records, '{"query_id": "x1", "query": "What?"}', '{"query_id": "y", "messages": []}']) + '\n')
    queries, errors = load_queries(data)
    assert [q.query_id for q in queries] == ['docs-001', 'docs-002', 'x1']
    assert queries[1].expected_tool_calls, 'a full record keeps its expected tool calls'
    assert [(e.line, e.field, e.message) for e in errors] == [(4, 'messages', 'the message history is empty')]


# ---------------------------------------------------------------------------------------------------
# The example: a change found from judge feedback alone, validated and kept; a no-op never


def _noop_then(lm: ScriptedLM) -> ScriptedLM:
    """The example's proposer, but its first answer for each component is a variant that changes nothing."""

    def respond(messages: list[dict[str, Any]]) -> str:
        if 'Already proposed' not in messages[-1]['content']:
            current = messages[-1]['content'].split('Current text:\n')[1].split('\n\nFailure examples:')[0]
            return json.dumps({'variant': f'{current}\n{NOOP}'})
        return str(lm.respond(messages))

    return ScriptedLM(respond)


@pytest.mark.parametrize('seed', range(5))
async def test_example_keeps_a_fix_found_from_failures_and_never_a_no_op(tmp_path: Path, seed: int) -> None:
    from examples.docs_agent.agent import make_agent
    from examples.docs_agent.proposer import proposer_lm

    queries, _ = load_queries(ROOT / 'examples' / 'docs_agent' / 'queries.jsonl')
    lm = _noop_then(proposer_lm())
    opt = SequentialOptimizer(
        load_components('examples.docs_agent.prompts'), PydanticAIRunner(make_agent()), queries, make_judges(['checks']),
        None, VariantGenerator(lm), tmp_path / 'run', OptimizeConfig(variants=2, seed=seed, max_components=1),
    )  # fmt: skip
    state = await opt.run()
    identity = state.components['IDENTITY']
    assert state.order[0] == 'IDENTITY'
    noop = identity.candidates[0]
    assert noop.text.endswith(NOOP) and noop.score == state.baseline_score  # the no-op changes no run
    assert noop.validation is None  # it did not beat the current text on train, so it was never a contender
    assert identity.frozen_index == 1, identity.reason
    kept = state.current['IDENTITY']
    assert NOOP not in kept and 'start with the answer' in kept  # written from greeting_check's suggested_fix
    test = identity.candidates[1].validation
    assert test is not None and test.accepted and test.p_value < 0.05
    assert state.current_validation_score is not None and state.baseline_validation_score is not None
    assert state.current_validation_score > state.baseline_validation_score


async def test_only_no_op_variants_freeze_nothing(tmp_path: Path) -> None:
    def respond(messages: list[dict[str, Any]]) -> str:
        current = messages[-1]['content'].split('Current text:\n')[1].split('\n\nFailure examples:')[0]
        n = messages[-1]['content'].count('\n- ', messages[-1]['content'].find('Already proposed'))
        return json.dumps({'variant': f'{current}\n{NOOP}' + ' Really.' * n})

    state = await optimizer(tmp_path, ScriptedLM(respond)).run()
    assert state.accepted == [] and state.current == COMPONENTS.as_dict()
    assert all('no variant beat it on train' in (state.components[n].reason or '') for n in state.order)


# ---------------------------------------------------------------------------------------------------
# The variant generator


class _LM:
    """A bare LM callable (no DSPy): answers, or raises, per call; records the response formats asked for."""

    def __init__(self, answers: list[Any], delay: float = 0.0) -> None:
        self.answers, self.delay, self.formats = answers, delay, []  # type: list[Any]

    def __call__(self, messages: list[dict[str, Any]], **kwargs: Any) -> list[str]:
        import time

        self.formats.append((kwargs.get('response_format') or {}).get('type'))
        time.sleep(self.delay)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return [answer]


def _generate(lm: Any, n: int = 2, **kwargs: Any) -> Any:
    return VariantGenerator(lm, **kwargs)(
        component_name='CITATIONS', current_text='Mention sources.', rest_of_prompt='', failure_examples=['x'], num_variants=n
    )


def test_generator_drops_unusable_answers_and_ends_after_two_in_a_row() -> None:
    code = json.dumps({'variant': 'def cite(x):\n    return x\nprint(cite(1))'})
    out = _generate(_LM([json.dumps({'variant': 'Mention sources.'}), code, 'x' * 5000]), n=2)
    assert out.variants == []
    assert 'same as the current text' in out.errors[0] and 'code' in out.errors[1]
    assert out.errors[-1].startswith('two unusable answers in a row')
    out = _generate(_LM(['{"variant": "Cite sources with <source> tags."}', '{"variant": "Quote a snippet per claim."}']))
    assert out.variants == ['Cite sources with <source> tags.', 'Quote a snippet per claim.'] and out.errors == []


def test_generator_steps_down_to_the_format_the_server_accepts() -> None:
    lm = _LM([ValueError('422 Unprocessable Entity: response_format.type'), '{"variant": "Cite sources."}'])
    generator = VariantGenerator(lm)
    out = generator(component_name='C', current_text='Mention.', rest_of_prompt='', failure_examples=[], num_variants=1)
    assert out.variants == ['Cite sources.'] and lm.formats == ['json_schema', 'json_object']
    assert generator.format_in_use == 'json_object'


def test_generator_call_time_limit_ends_the_component() -> None:
    import time

    start = time.perf_counter()
    out = _generate(_LM(['{"variant": "late"}'] * 3, delay=2.0), n=3, timeout_s=0.2)
    assert time.perf_counter() - start < 1.5
    assert out.variants == [] and 'no answer within 0.2 s' in out.errors[0] and len(out.errors) == 1


def test_the_example_proposer_does_not_read_the_answer_key() -> None:
    import ast

    import examples.docs_agent.proposer as proposer_module

    tree = ast.parse(Path(proposer_module.__file__).read_text())
    imported = {n.module or '' for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any('simulated' in m or 'prompts' in m for m in imported), imported
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {'RULES', 'RULE_PATTERNS', 'RULE_COMPONENTS'}


def test_generator_is_not_asked_again_after_missing_the_time_limit_twice() -> None:
    generator = VariantGenerator(_LM(['{"variant": "late"}'] * 2, delay=0.5), timeout_s=0.1)
    for _ in range(2):
        generator(component_name='C', current_text='x', rest_of_prompt='', failure_examples=[], num_variants=1)
    calls = generator.lm_calls
    out = generator(component_name='C', current_text='x', rest_of_prompt='', failure_examples=[], num_variants=1)
    assert generator.lm_calls == calls and out.variants == [] and 'missed the 0.1 s limit 2 times' in out.errors[0]


async def test_a_run_folder_of_an_older_optimizer_is_refused(tmp_path: Path) -> None:
    (tmp_path / 'run').mkdir()
    (tmp_path / 'run' / 'state.json').write_text(json.dumps({'version': 1}))
    with pytest.raises(ValueError, match='older optimizer'):
        await optimizer(tmp_path, proposer(good={})).run()


def test_generator_talks_to_an_openai_compatible_server_with_max_tokens_and_a_schema() -> None:
    """A loopback stand-in for llama-cpp-python's server: it refuses OpenAI's json_schema format (422) and
    reads `max_tokens` (DSPy would send `max_completion_tokens`, which such a server ignores)."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    bodies: list[dict[str, Any]] = []

    class Server(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
            bodies.append(body)
            if (body.get('response_format') or {}).get('type') == 'json_schema':
                reply, status = {'detail': [{'loc': ['body', 'response_format', 'type'], 'msg': 'unexpected'}]}, 422
            else:
                content = json.dumps({'variant': f'Cite your sources ({len(bodies)}).'})
                choice = {'index': 0, 'message': {'role': 'assistant', 'content': content}, 'finish_reason': 'stop'}
                reply, status = {'id': 'x', 'object': 'chat.completion', 'created': 0, 'model': 'm', 'choices': [choice]}, 200
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.end_headers()
            self.wfile.write(json.dumps(reply).encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(('127.0.0.1', 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        lm = dspy.LM('openai/default', api_base=f'http://127.0.0.1:{server.server_port}/v1', api_key='sk-x', cache=False)
        out = _generate(lm, n=2)
    finally:
        server.shutdown()
    assert out.variants == ['Cite your sources (2).', 'Cite your sources (3).'], out.errors
    assert [b['response_format']['type'] for b in bodies] == ['json_schema', 'json_object', 'json_object']
    assert bodies[1]['response_format']['schema']['required'] == ['variant']
    assert all(b['max_tokens'] <= 200 and 'max_completion_tokens' not in b for b in bodies)


@pytest.mark.parametrize(
    'sentence',
    ['Cite sources.', 'Include links to the pages you used.', 'Reference the documentation URLs you relied on.'],
)
async def test_example_agent_follows_a_rule_by_meaning_from_any_component(sentence: str) -> None:
    from examples.docs_agent.agent import make_agent
    from examples.docs_agent.simulated import detect_rules

    components = load_components('examples.docs_agent.prompts')
    assert 'cite_sources' not in detect_rules(components.build())
    moved = components.with_text('IDENTITY', f'{components["IDENTITY"]}\n{sentence}')  # not the CITATIONS section
    query = Query('q', 'How do I run blocking code from an async tokio task?')
    runner = PydanticAIRunner(make_agent())
    before = (await runner.run(components.build(), query)).final_answer() or ''
    after = (await runner.run(moved.build(), query)).final_answer() or ''
    assert '<source ref=' not in before and '<source ref=' in after
