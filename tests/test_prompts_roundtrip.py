"""Any agent's prompt: where the prompt under test goes, saved prompts that load back into the same prompt,
prompts modules imported from another tree.

Offline: agents run on pydantic-ai `FunctionModel`s that record what they were told.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.agents.components import ComponentsError, PromptComponents, load_components, save_components, saved_prompt_path
from sensei_eval.agents.runner import AgentPromptError, PromptFactoryRunner, PydanticAIRunner, Query, load_runner
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import render_transcript

ROOT = Path(__file__).resolve().parents[1]
DOCS_AGENT = ROOT / 'examples' / 'docs_agent'


@dataclass
class Told:
    """A FunctionModel that answers with what it was told: its system prompt parts and instructions."""

    seen: list[tuple[list[str], str | None]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        system = [p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, SystemPromptPart)]
        self.seen.append((system, info.instructions))
        query = next(p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart))
        return ModelResponse(parts=[TextPart(f'answer to {query} under {system or info.instructions}')])


def run(runner: PydanticAIRunner | PromptFactoryRunner, prompt: str, query: str = 'What is x?') -> QueryRecord:
    return asyncio.run(runner.run(prompt, Query('q1', query)))


# ---------------------------------------------------------------------------------------------------
# The prompt under test is the only prompt the agent sees


def test_system_prompt_agent_is_told_only_the_prompt_under_test() -> None:
    told = Told()
    runner = PydanticAIRunner(Agent(FunctionModel(told), system_prompt='OWN PROMPT'))
    record = run(runner, 'CANDIDATE')
    assert told.seen == [(['CANDIDATE'], None)]
    # the record shows it as the model got it: one request with the system prompt part and the query
    requests = [m for m in record.messages if m['kind'] == 'request']
    assert [p['part_kind'] for p in requests[0]['parts']] == ['system-prompt', 'user-prompt']
    assert not requests[0].get('instructions')
    transcript = render_transcript(record).text
    assert transcript.count('CANDIDATE') >= 1 and 'OWN PROMPT' not in transcript


def test_concurrent_runs_under_different_prompts_do_not_mix() -> None:
    told = Told()
    runner = PydanticAIRunner(Agent(FunctionModel(told), system_prompt='OWN'))

    async def both() -> list[QueryRecord]:
        return await asyncio.gather(*(runner.run(p, Query(p, f'q {p}')) for p in ('A', 'B', 'C', 'D')))

    records = asyncio.run(both())
    assert sorted(s for s, _ in told.seen) == [['A'], ['B'], ['C'], ['D']]
    assert [r.final_answer() for r in records] == [f"answer to q {p} under ['{p}']" for p in 'ABCD']


def test_instructions_agent_gets_the_prompt_as_instructions() -> None:
    told = Told()
    record = run(PydanticAIRunner(Agent(FunctionModel(told), instructions='OWN')), 'CANDIDATE')
    assert told.seen == [([], 'CANDIDATE')]
    assert record.messages[0]['instructions'] == 'CANDIDATE'


def test_prompt_functions_are_refused_with_the_fix() -> None:
    agent = Agent(FunctionModel(Told()), system_prompt='OWN', name='helper')
    calls: list[str] = []

    @agent.system_prompt(dynamic=True)
    def today() -> str:
        calls.append('today')
        return 'Today is Monday.'

    with pytest.raises(AgentPromptError) as refused:
        PydanticAIRunner(agent)
    message = str(refused.value)
    assert 'helper has prompt function(s) @agent.system_prompt(dynamic=True)' in message and 'today' in message
    assert 'instructions=' in message and 'def make_agent(prompt: str)' in message and 'replace_whole_prompt=True' in message

    other = Agent(FunctionModel(Told()), instructions='OWN')
    other.instructions(lambda: 'per-run context')
    with pytest.raises(AgentPromptError, match=r'@agent\.instructions'):
        PydanticAIRunner(other)


def test_replace_whole_prompt_drops_functions_and_both_texts() -> None:
    told = Told()
    agent = Agent(FunctionModel(told), system_prompt='OWN SYSTEM', instructions='OWN INSTRUCTIONS')
    calls: list[str] = []

    @agent.system_prompt
    def extra() -> str:
        calls.append('extra')
        return 'EXTRA'

    @agent.instructions
    def more() -> str:
        calls.append('more')
        return 'MORE'

    runner = PydanticAIRunner(agent, replace_whole_prompt=True)
    run(runner, 'CANDIDATE')
    assert told.seen == [(['CANDIDATE'], None)]
    assert calls == []


def test_instructions_and_system_prompt_text_together_are_refused() -> None:
    with pytest.raises(AgentPromptError, match='both instructions= and system_prompt='):
        PydanticAIRunner(Agent(FunctionModel(Told()), system_prompt='A', instructions='B'))


def test_a_capability_that_restores_the_agents_own_prompt_is_an_error_not_a_run() -> None:
    from pydantic_ai.capabilities import ReinjectSystemPrompt

    from sensei_eval.agents.runner import AgentRunError, run_query

    told = Told()
    agent = Agent(FunctionModel(told), system_prompt='OWN', capabilities=[ReinjectSystemPrompt(replace_existing=True)])
    with pytest.raises(AgentRunError, match=r"not told the prompt under test .*system prompts it got: 'OWN'"):
        asyncio.run(run_query(PydanticAIRunner(agent), 'CANDIDATE', Query('q1', 'What is x?')))
    assert told.seen == [(['OWN'], None)], 'the agent really ran under its own prompt: that run must not count'


def test_load_runner_factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / 'my_agents.py'
    module.write_text(
        textwrap.dedent(
            """
            from pydantic_ai import Agent
            from pydantic_ai.messages import ModelResponse, TextPart
            from pydantic_ai.models.function import FunctionModel

            def _echo(messages, info):
                return ModelResponse(parts=[TextPart(str(messages[0].parts[0].content))])

            BUILT = []

            def with_prompt(prompt: str) -> Agent:
                BUILT.append(prompt)
                return Agent(FunctionModel(_echo), system_prompt=prompt)

            def dynamic() -> Agent:
                agent = Agent(FunctionModel(_echo), system_prompt='x')
                agent.system_prompt(dynamic=True)(lambda: 'now')
                return agent
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    runner = load_runner('my_agents.py:with_prompt')
    assert isinstance(runner, PromptFactoryRunner)
    assert run(runner, 'PROMPT ONE').final_answer() == 'PROMPT ONE'
    run(runner, 'PROMPT ONE')
    assert run(runner, 'PROMPT TWO').final_answer() == 'PROMPT TWO'
    assert sys.modules[runner.factory.__module__].BUILT == ['PROMPT ONE', 'PROMPT TWO']  # one agent per prompt
    with pytest.raises(AgentPromptError, match=r'my_agents.py:dynamic: .*prompt function'):
        load_runner('my_agents.py:dynamic')


# ---------------------------------------------------------------------------------------------------
# Saved prompts load back into the prompt that was evaluated

TRICKY = 'Cite "every" claim.\nQuote {braces}, a back\\slash, \'single\' quotes and ünïcode.\n\n  Indented line.'


def test_module_round_trip_keeps_build_prompt_and_the_rest(tmp_path: Path) -> None:
    original = load_components(DOCS_AGENT / 'prompts.py')
    optimized = original.with_text('CITATIONS', TRICKY).with_text('IDENTITY', 'You research documentation.\nNo greetings.')
    primary = save_components(optimized, original, tmp_path)
    assert primary == tmp_path / 'prompts.py' == saved_prompt_path(tmp_path)
    saved = load_components(primary)
    assert saved.build() == optimized.build()
    assert '## CITATIONS\n' + TRICKY in saved.build(), 'the headers build_prompt() adds are kept'
    # only the two constants changed: every other line of the module is there as it was
    before = (DOCS_AGENT / 'prompts.py').read_text().splitlines()
    after = primary.read_text().splitlines()
    assert 'def build_prompt() -> str:' in after and before[-1] == after[-1]
    assert sum(line not in after for line in before) <= 4  # the two old values (two lines each)
    # a YAML copy records the module's assembly (a `## NAME` header per section, blank lines between)
    as_yaml = load_components(tmp_path / 'prompts.yaml')
    assert as_yaml.template == '## {name}\n{text}' and as_yaml.build() == optimized.build()
    assert '+' + TRICKY.split('\n')[0] in (tmp_path / 'prompts.diff').read_text()


def test_module_with_relative_imports_round_trips(tmp_path: Path) -> None:
    original = load_components(DOCS_AGENT / 'prompts_v2.py')
    optimized = original.with_text('REPORTING_RESULTS', 'Report every search you ran.')
    primary = save_components(optimized, original, tmp_path)
    assert 'from examples.docs_agent import prompts as _base' in primary.read_text()
    assert load_components(primary).build() == optimized.build()


def test_module_assembly_yaml_cannot_record_gets_no_yaml(tmp_path: Path) -> None:
    module = tmp_path / 'src' / 'titled.py'
    module.parent.mkdir()
    module.write_text(
        textwrap.dedent(
            """
            COMPONENTS = {"IDENTITY": "You are sensei.", "CITATIONS": "Cite.", "TONE": "Be terse."}

            def build_prompt() -> str:
                return "\\n".join(f"# {name.title()}\\n{text}" for name, text in COMPONENTS.items()) + "\\n(tools: a, b)"
            """
        )
    )
    original = load_components(module)
    optimized = original.with_text('CITATIONS', TRICKY)
    with pytest.raises(ComponentsError, match='YAML cannot record how the prompt is built'):
        optimized.to_yaml()
    primary = save_components(optimized, original, tmp_path / 'out')
    assert primary.name == 'prompts.py' and not (tmp_path / 'out' / 'prompts.yaml').exists()
    assert load_components(primary).build() == optimized.build()
    assert '# Citations\n' + TRICKY + '\n# Tone\nBe terse.\n(tools: a, b)' in optimized.build()


def test_component_not_assigned_plainly_is_appended(tmp_path: Path) -> None:
    module = tmp_path / 'src' / 'looped.py'
    module.parent.mkdir()
    module.write_text('for _n in ("A", "B"):\n    globals()[_n] = _n.lower()\nCOMPONENTS = ["A", "B"]\n')
    original = load_components(module)
    optimized = original.with_text('B', 'new B')
    primary = save_components(optimized, original, tmp_path / 'out')
    assert load_components(primary).as_dict() == {'A': 'a', 'B': 'new B'}
    assert primary.read_text().rstrip().endswith("B = 'new B'")


def test_components_mapping_built_by_a_call_is_patched_in_place(tmp_path: Path) -> None:
    module = tmp_path / 'src' / 'mapped.py'
    module.parent.mkdir()
    module.write_text(
        'COMPONENTS = dict(ROLE="You help.", RULES="Be brief.")\n\n'
        'def build_prompt():\n    return "\\n---\\n".join(COMPONENTS.values())\n'
    )
    original = load_components(module)
    optimized = original.with_text('RULES', TRICKY)
    primary = save_components(optimized, original, tmp_path / 'out')
    assert primary.name == 'prompts.py'
    assert load_components(primary).build() == optimized.build() == 'You help.\n---\n' + TRICKY
    assert "COMPONENTS['RULES'] = " in primary.read_text()


def test_a_copy_that_cannot_rebuild_the_prompt_falls_back_to_the_exact_text(tmp_path: Path) -> None:
    package = tmp_path / 'elsewhere' / 'mypkg'
    package.mkdir(parents=True)
    (package / '__init__.py').write_text('')
    (package / 'helpers.py').write_text('HEADER = "# Rules"\n')
    (package / 'prompts.py').write_text(
        'from .helpers import HEADER\n\nRULES = "Be brief."\n\ndef build_prompt():\n    return HEADER + "\\n" + RULES\n'
    )
    original = load_components(package / 'prompts.py')  # imported as part of mypkg, which is not on sys.path
    optimized = original.with_text('RULES', TRICKY)
    with pytest.warns(UserWarning, match=r'could not write a patched copy .*ModuleNotFoundError.*in prompts.yaml'):
        primary = save_components(optimized, original, tmp_path / 'out')
    assert primary.name == 'prompts.yaml' and not (tmp_path / 'out' / 'prompts.py').exists()
    assert saved_prompt_path(tmp_path / 'out') == primary
    assert load_components(primary).build() == optimized.build() == '# Rules\n' + TRICKY
    # a build_prompt() YAML can't record either: the exact text
    (package / 'prompts.py').write_text(
        'from .helpers import HEADER\n\nRULES = "Be brief."\nTONE = "Terse."\nSTYLE = "Plain."\n\n'
        'def build_prompt():\n    return HEADER + "\\n" + RULES.upper() + "|" + TONE + "/" + STYLE\n'
    )
    (package / 'other.py').write_text((package / 'prompts.py').read_text())
    original = load_components(package / 'other.py')
    optimized = original.with_text('TONE', 'Warm.')
    with pytest.warns(UserWarning, match=r'could not write a patched copy .*in prompts.txt'):
        primary = save_components(optimized, original, tmp_path / 'out2')
    assert primary.name == 'prompts.txt' and saved_prompt_path(tmp_path / 'out2') == primary
    assert load_components(primary).build() == optimized.build() == '# Rules\nBE BRIEF.|Warm./Plain.'


def test_yaml_round_trip_keeps_the_assembly(tmp_path: Path) -> None:
    source = tmp_path / 'p.yaml'
    source.write_text(
        'prefix: "SYSTEM\\n"\ntemplate: "<{name}>\\n{text}\\n</{name}>"\nseparator: "\\n"\nsuffix: "\\nEND"\n'
        'components:\n  - name: ROLE\n    text: You help.\n  - name: RULES\n    text: Be brief.\n'
    )
    original = load_components(source)
    assert original.build() == 'SYSTEM\n<ROLE>\nYou help.\n</ROLE>\n<RULES>\nBe brief.\n</RULES>\nEND'
    optimized = original.with_text('RULES', TRICKY)
    primary = save_components(optimized, original, tmp_path / 'out')
    assert primary.name == 'prompts.yaml'
    assert load_components(primary).build() == optimized.build()
    with pytest.raises(ComponentsError, match=r'p.yaml: the template .* must hold "\{text\}" exactly once'):
        source.write_text('template: "## {name}"\ncomponents:\n  - name: A\n    text: a\n')
        load_components(source)


def test_text_and_memory_round_trip(tmp_path: Path) -> None:
    (tmp_path / 'p.txt').write_text('One plain prompt.\n')
    original = load_components(tmp_path / 'p.txt')
    optimized = original.with_text('PROMPT', TRICKY)
    primary = save_components(optimized, original, tmp_path / 'out')
    assert primary.name == 'prompts.txt' and load_components(primary).build() == TRICKY
    memory = PromptComponents.from_mapping({'A': 'a', 'B': 'b'})
    primary = save_components(memory.with_text('A', TRICKY), memory, tmp_path / 'mem')
    assert primary.name == 'prompts.yaml' and load_components(primary).build() == TRICKY + '\n\nb'


# ---------------------------------------------------------------------------------------------------
# A prompts module in another tree (a git worktree of an older commit)


def test_prompts_module_with_relative_imports_loads_from_another_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / 'wt' / 'examples'
    shutil.copytree(ROOT / 'examples', tree, ignore=shutil.ignore_patterns('__pycache__', 'corpus'))
    old = tree / 'docs_agent' / 'prompts.py'
    old.write_text(
        old.read_text()
        + '\nfrom .tools import context7_get_docs as _docs  # noqa: E402\n\nIDENTITY = "OLD IDENTITY (" + _docs.__name__ + ")"\n'
    )
    monkeypatch.chdir(ROOT)
    old_components = load_components(old)
    new_components = load_components('examples/docs_agent/prompts.py')
    assert old_components['IDENTITY'] == 'OLD IDENTITY (context7_get_docs)'
    assert new_components['IDENTITY'].startswith('You are a helpful documentation assistant')
    assert old_components.module is not new_components.module
    assert sys.modules['examples.docs_agent.prompts'] is new_components.module, 'the checkout module is untouched'
    # the old tree's prompts_v2 builds on the old tree's prompts (its own `from . import prompts`)
    old_v2 = load_components(tree / 'docs_agent' / 'prompts_v2.py')
    assert old_v2['IDENTITY'].startswith('OLD IDENTITY (context7_get_docs)\nYour audience is other AI agents')
    assert old_v2.build().startswith('## IDENTITY\nOLD IDENTITY')


def test_validate_compares_a_worktree_prompt_with_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from sensei_eval.cli.validate import app

    tree = tmp_path / 'wt' / 'examples'
    shutil.copytree(ROOT / 'examples', tree, ignore=shutil.ignore_patterns('__pycache__', 'corpus'))
    old = tree / 'docs_agent' / 'prompts.py'
    extra = '\nfrom .tools import tavily_search as _web  # noqa: E402\n\nIDENTITY = "OLD " + _web.__name__\n'
    old.write_text(old.read_text() + extra)
    dataset = tmp_path / 'queries.jsonl'
    dataset.write_text(''.join((DOCS_AGENT / 'queries.jsonl').read_text().splitlines(keepends=True)[:4]))
    monkeypatch.chdir(ROOT)
    args = ['--old-prompt', str(old), '--new-prompt', 'examples/docs_agent/prompts_v2.py',
            '--agent', 'examples.docs_agent.agent:make_agent', '--dataset', str(dataset),
            '--judges', 'checks', '--out', str(tmp_path / 'v')]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1), result.output  # ran and gated: no input error
    assert (tmp_path / 'v' / 'old.prompt.txt').read_text().startswith('## IDENTITY\nOLD tavily_search\n\n## AVAILABLE_TOOLS')
    new_prompt = load_components(DOCS_AGENT / 'prompts_v2.py').build()
    assert (tmp_path / 'v' / 'new.prompt.txt').read_text() == new_prompt
