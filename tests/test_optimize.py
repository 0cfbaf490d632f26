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

from sensei_eval.evaluators.registry import make_judges
from sensei_eval.optimize.agent import PydanticAIRunner, Query, load_queries, load_runner
from sensei_eval.optimize.components import ComponentsError, PromptComponents, load_components
from sensei_eval.optimize.loop import OptimizeConfig, OptimizeState, SequentialOptimizer
from sensei_eval.optimize.metrics import AgentProgram, JudgeMetric
from sensei_eval.optimize.scripted import ScriptedLM
from sensei_eval.optimize.variants import VariantGenerator
from sensei_eval.profiles import BUILTIN_PROFILES
from sensei_eval.records import QueryRecord

CITE_RULE = 'Cite every claim with <source ref="..."> tags that quote a snippet.'
NO_GREETING_RULE = 'No greetings or filler: your reader is another agent.'

COMPONENTS = PromptComponents.from_mapping(
    {
        'IDENTITY': 'You are a documentation research agent.',
        'CHOOSING_SOURCES': 'Prefer good sources.',
        'CITATIONS': 'Mention where facts come from.',
    }
)
# a documentation agent's queries: its conventions (citations, no greetings) are checked under its profile
QUERIES = [Query(f'q{i}', f'How do I configure FastAPI feature {i}?', metadata={'profile': 'docs-agent'}) for i in range(1, 5)]


@dataclass
class RuleAgent:
    """An AgentRunner whose run follows the rules its system prompt states (and nothing else)."""

    prompts: list[str] = field(default_factory=list)
    fail_on: set[str] = field(default_factory=set)

    async def run(self, system_prompt: str, query: Query) -> QueryRecord:
        self.prompts.append(system_prompt)
        if query.query_id in self.fail_on:
            raise RuntimeError('tool server down')
        answer = 'Set `app.state` in the lifespan handler.'
        if '<source' in system_prompt:
            answer += ' <source ref="fastapi/lifespan.md">"use the lifespan parameter"</source>'
        if 'greeting' not in system_prompt.lower():
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


def proposer(good: dict[str, str], bad: dict[str, str] | None = None) -> ScriptedLM:
    """A generator LM that proposes, for each component, a worse and (when it has one) a better text."""

    def respond(messages: list[dict[str, Any]]) -> dict[str, Any]:
        prompt = messages[-1]['content']
        name = prompt.split('[[ ## component_name ## ]]')[1].split('[[')[0].strip()
        variants = [(bad or {}).get(name, f'{name}: be thorough.'), good.get(name, f'{name}: be careful.')]
        return {'variants': json.dumps(variants)}

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


async def test_better_variant_frozen_worse_not_and_mapping_order(tmp_path: Path) -> None:
    lm = proposer(good={'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE + ' You research documentation.'})
    opt = optimizer(tmp_path, lm)
    state = await opt.run()
    # both checks fail on every baseline run; citation_quality maps to CITATIONS, agent_format to IDENTITY;
    # equal issue counts, so prompt order breaks the tie
    assert state.order == ['IDENTITY', 'CITATIONS']
    assert state.components['CHOOSING_SOURCES'].status == 'skipped'
    assert state.current['IDENTITY'] == NO_GREETING_RULE + ' You research documentation.'
    assert state.current['CITATIONS'] == CITE_RULE
    assert state.components['IDENTITY'].frozen_index == 1  # the better of the two, not the first
    assert state.baseline_score == 0.5 and state.current_score == 1.0
    assert state.stopped == 'complete'
    suggestions = json.loads((tmp_path / 'run' / 'suggestions.json').read_text())
    assert [s['current_prompt_section'] for s in suggestions] == ['IDENTITY', 'CITATIONS']
    assert suggestions[1]['affected_queries'] == ['q1', 'q2', 'q3', 'q4']
    assert '+' + CITE_RULE in suggestions[1]['diff']
    assert CITE_RULE in (tmp_path / 'run' / 'prompts.yaml').read_text()
    # the generator saw the failures of the judges mapped to the component it rewrote
    cit_prompt = next(c[-1]['content'] for c in lm.calls if 'CITATIONS\n' in c[-1]['content'].split('[[ ## current_text')[0])
    assert 'citation_check' in cit_prompt and 'greeting_check' not in cit_prompt


async def test_worse_variants_are_not_frozen(tmp_path: Path) -> None:
    lm = proposer(good={}, bad={})  # neither variant contains a rule the agent follows
    state = await optimizer(tmp_path, lm).run()
    assert state.current == COMPONENTS.as_dict()
    assert all(state.components[n].frozen_index is None for n in state.order)
    assert 'kept the current text' in (state.components['CITATIONS'].reason or '')
    assert json.loads((tmp_path / 'run' / 'suggestions.json').read_text()) == []


async def test_margin_blocks_a_gain_smaller_than_it(tmp_path: Path) -> None:
    lm = proposer(good={'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE})
    state = await optimizer(tmp_path, lm, margin=0.3).run()
    # each component's fix raises the mean score by 0.25, below the 0.3 margin
    assert state.current == COMPONENTS.as_dict()


async def test_budget_stops_the_run(tmp_path: Path) -> None:
    lm = proposer(good={'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE})
    # baseline costs 8 agent calls; each candidate 8 more; generation 1 call (max 3 reserved)
    state = await optimizer(tmp_path, lm, budget_calls=20).run()
    assert state.stopped is not None and state.stopped.startswith('budget reached')
    assert state.model_calls <= 20
    assert state.components['IDENTITY'].status == 'evaluating'
    assert len(state.components['IDENTITY'].candidates) == 1


async def test_killed_run_resumes_without_repeating_candidates(tmp_path: Path) -> None:
    good = {'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE}
    agent = RuleAgent()
    first = optimizer(tmp_path, proposer(good), agent, budget_calls=20)
    await first.run()  # stops inside IDENTITY after one of its two candidates, like a kill after a checkpoint
    runs_before = len(agent.prompts)
    lm = proposer(good)
    resumed = optimizer(tmp_path, lm, agent)
    state = await resumed.run()
    assert state.stopped == 'complete'
    # IDENTITY's variants were reused (no new generation for it); its first candidate was not re-run
    generated_for = [c[-1]['content'].split('[[ ## component_name ## ]]')[1].split('[[')[0].strip() for c in lm.calls]
    assert generated_for == ['CITATIONS']
    # resumed: IDENTITY variant 2 (4 runs) + CITATIONS two variants (8 runs); no baseline again
    assert len(agent.prompts) - runs_before == 12
    assert state.current == {**COMPONENTS.as_dict(), **good}


async def test_agent_errors_are_excluded_and_counted(tmp_path: Path) -> None:
    lm = proposer(good={'CITATIONS': CITE_RULE, 'IDENTITY': NO_GREETING_RULE})
    opt = optimizer(tmp_path, lm, RuleAgent(fail_on={'q4'}), max_components=1)
    state = await opt.run()
    baseline = json.loads((tmp_path / 'run' / 'candidates' / 'baseline.json').read_text())['evaluation']
    assert baseline['agent_errors'] == ['q4: agent run failed: RuntimeError: tool server down']
    assert set(baseline['per_query']) == {'q1', 'q2', 'q3'}
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
    assert metric(dspy.Example(query='q'), pred) == 0.5
    gepa_metric = JudgeMetric(judges, None, feedback=True, profile=docs_agent)
    out = gepa_metric(dspy.Example(query='q'), pred, None, 'CITATIONS', None)
    assert out.score == 0.5
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
    with pytest.raises(JudgeError, match='no judge produced a score'):
        metric(dspy.Example(query='How?'), pred)
    assert metric.errors


def test_gepa_baseline_runs_on_the_same_components(tmp_path: Path) -> None:
    from sensei_eval.optimize.gepa import run_gepa

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
    result = run_gepa(
        COMPONENTS,
        agent,
        QUERIES,
        make_judges(['greeting_check', 'citation_check']),
        None,
        reflection_lm=reflection,
        max_metric_calls=40,
        run_dir=tmp_path / 'gepa',
        seed=0,
    )
    assert result.baseline_score == 0.5
    assert result.best_score is not None and result.best_score > 0.5
    assert result.metric_calls <= 40 + len(QUERIES)
    assert set(result.components) == set(COMPONENTS.names)
    assert reflection.calls, 'GEPA asked the reflection LM for new component texts'


def test_state_file_is_valid_after_run(tmp_path: Path) -> None:
    import asyncio

    lm = proposer(good={'CITATIONS': CITE_RULE})
    asyncio.run(optimizer(tmp_path, lm, max_components=1).run())
    state = OptimizeState.model_validate_json((tmp_path / 'run' / 'state.json').read_text())
    assert state.metric_calls == len(QUERIES) * 3  # baseline + two candidates


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

    # baseline (4 runs) + IDENTITY variant 1 (4 runs) + 2 runs into variant 2, then the process dies
    agent = DiesAfter(limit=10)
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
    # only IDENTITY's unfinished variant (4 runs) and CITATIONS' two (8 runs) ran again; no baseline
    assert len(survivor.prompts) == 12
    generated_for = [c[-1]['content'].split('[[ ## component_name ## ]]')[1].split('[[')[0].strip() for c in lm.calls]
    assert generated_for == ['CITATIONS'], 'IDENTITY reused the variants saved before the kill'


def test_load_queries_reads_records_and_query_lines_in_one_file(tmp_path: Path) -> None:
    records = (Path(__file__).resolve().parents[1] / 'datasets' / 'sample.jsonl').read_text().splitlines()[:2]
    data = tmp_path / 'mixed.jsonl'
    data.write_text('\n'.join([*records, '{"query_id": "x1", "query": "What?"}', '{"query_id": "y", "messages": []}']) + '\n')
    queries, errors = load_queries(data)
    assert [q.query_id for q in queries] == ['docs-001', 'docs-002', 'x1']
    assert queries[1].expected_tool_calls, 'a full record keeps its expected tool calls'
    assert [(e.line, e.field, e.message) for e in errors] == [(4, 'messages', 'the message history is empty')]
