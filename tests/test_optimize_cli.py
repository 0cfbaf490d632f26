"""`python -m sensei_eval.optimize` end to end on the example agent, offline.

The judges are the deterministic checks; the models the CLI would resolve (judge and generator) are
replaced by a scripted JudgeModel and the example's scripted proposer (it writes variants from the
judges' feedback). The saved optimized prompt is loaded back and validated: it is the prompt the
optimizer evaluated, and scores the same.
"""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sensei_eval.cli.optimize as cli
from examples.docs_agent.proposer import proposer_lm
from sensei_eval.agents.components import load_components
from sensei_eval.agents.runner import AgentRuns, load_queries, load_runner
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.run_folder import RunFolder
from sensei_eval.optimize.evaluate import evaluate_prompt
from sensei_eval.optimize.scripted import ScriptedLM
from sensei_eval.validate import ValidateOptions, validate_prompts
from tests.helpers import ScriptedJudge, no_issues

ROOT = Path(__file__).resolve().parents[1]
BASE = [
    '--prompts', 'examples/docs_agent/prompts.py', '--agent', 'examples.docs_agent.agent:make_agent',
    '--dataset', 'examples/docs_agent/queries.jsonl', '--judges', 'checks', '--num-examples', '19',
]  # fmt: skip


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedLM:
    lm = proposer_lm()
    monkeypatch.setattr(cli, 'resolve_model', lambda *a, **k: ScriptedJudge(no_issues).model())
    monkeypatch.setattr(cli, 'dspy_lm', lambda model: lm)
    monkeypatch.chdir(ROOT)
    return lm


def _invoke(args: list[str]) -> Any:
    result = CliRunner().invoke(cli.app, args)
    result.text = ' '.join(result.output.split())
    result.flat = ''.join(result.output.split())  # rich wraps long paths
    return result


def test_sequential_run_saves_the_evaluated_prompt_and_resumes(tmp_path: Path, scripted: ScriptedLM) -> None:
    result = _invoke([*BASE, '--variants', '2', '--out', str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert 'sequential optimization: complete' in result.text
    assert 'routing: profile map' in result.text
    run_dir = next(tmp_path.glob('optimize-*'))
    state = json.loads((run_dir / 'state.json').read_text())
    frozen = [name for name, cs in state['components'].items() if cs['frozen_index'] is not None]
    assert frozen, "the proposer turns the checks' feedback into rules the example agent follows"
    assert f'optimizedprompt:{run_dir}/prompts.py' in result.flat
    assert f'+++ b/{frozen[0]}' in (run_dir / 'prompts.diff').read_text()

    # the saved prompt is the prompt the optimizer evaluated when it froze the last change
    saved = load_components(run_dir / 'prompts.py')
    last = state['components'][frozen[-1]]
    candidate = json.loads((run_dir / last['frozen_path']).read_text())
    assert saved.build() == candidate['prompt']
    assert saved.as_dict() == state['current']

    # ... and validating it scores it as the optimizer's metric does, query by query, judge by judge
    original = load_components('examples/docs_agent/prompts.py')
    queries = load_queries('examples/docs_agent/queries.jsonl')[0][:19]
    runner, judges = load_runner('examples.docs_agent.agent:make_agent'), make_judges(['checks'])
    evaluation, reports = asyncio.run(evaluate_prompt(candidate['prompt'], queries, runner, judges, None))
    out = tmp_path / 'validate'
    comparison = asyncio.run(
        validate_prompts(original, saved, AgentRuns(runner), queries, JudgeRunOptions(judges), ValidateOptions(out_dir=out))
    )
    assert comparison.new.source == str(run_dir / 'prompts.py')
    validated = {(r.query_id, name): j.score for r in RunFolder(out / 'new').load_reports() for name, j in r.judges.items()}
    expected = {(r.query_id, name): j.score for r in reports for name, j in r.judges.items()}
    assert validated == expected and evaluation.score is not None

    again = _invoke([*BASE, '--variants', '2', '--resume', str(run_dir)])
    assert again.exit_code == 0, again.output
    assert 'resuming' in again.text


def test_map_routes_failures_to_the_named_components(tmp_path: Path, scripted: ScriptedLM) -> None:
    args = [*BASE, '--variants', '1', '--out', str(tmp_path), '--max-components', '1']
    held = ['--validation-queries', 'ex-001,ex-002,ex-003', '--validation-queries', 'ex-004,ex-005']
    result = _invoke([*args, *held, '--map', 'citation_quality=CITATIONS', '--map', 'agent_format=IDENTITY,REPORTING_RESULTS'])
    assert result.exit_code == 0, result.output
    assert 'routing: user map' in result.text
    state = json.loads((next(tmp_path.glob('optimize-*')) / 'state.json').read_text())
    assert state['config']['component_map'] == {
        'citation_quality': ['CITATIONS'],
        'agent_format': ['IDENTITY', 'REPORTING_RESULTS'],
    }
    assert state['routing'] == 'user map'
    assert state['split']['validation'] == ['ex-001', 'ex-002', 'ex-003', 'ex-004', 'ex-005']


def test_run_config_fills_options_and_the_map(tmp_path: Path, scripted: ScriptedLM) -> None:
    config = tmp_path / 'run.yaml'
    config.write_text(
        textwrap.dedent(
            f"""
            prompts: examples/docs_agent/prompts.py
            agent: examples.docs_agent.agent:make_agent
            dataset: examples/docs_agent/queries.jsonl
            judges: checks
            num-examples: 12
            variants: 1
            max_components: 1
            validation_fraction: 0.6
            alpha: 0.1
            generator-max-tokens: 200
            out: {tmp_path / 'runs'}
            components:
              citation_quality: CITATIONS
              agent_format: [IDENTITY]
            """
        )
    )
    result = _invoke(['--config', str(config), '--num-examples', '19', '--generator-timeout', '30'])  # the command line wins
    assert result.exit_code == 0, result.output
    state = json.loads((next((tmp_path / 'runs').glob('optimize-*')) / 'state.json').read_text())
    assert len(state['config']['query_ids']) == 19
    assert state['config']['variants'] == 1 and state['config']['validation_fraction'] == 0.6
    assert state['config']['alpha'] == 0.1 and state['config']['generator_max_tokens'] == 200
    assert state['config']['generator_timeout_s'] == 30
    assert len(state['split']['validation']) == 12  # ceil(0.6 * 19)
    assert state['config']['component_map'] == {'citation_quality': ['CITATIONS'], 'agent_format': ['IDENTITY']}

    toml = tmp_path / 'run.toml'
    toml.write_text('variants = 1\n[components]\ncitation_quality = ["CITATIONS", "NOPE"]\n')
    bad = _invoke([*BASE, '--config', str(toml)])
    assert bad.exit_code == 2
    assert f'{toml}: components.citation_quality:' in bad.text and "has no component 'NOPE'" in bad.text


@pytest.mark.parametrize(
    ('config', 'message'),
    [
        ('variants: 0\n', r'run.yaml:1: variants: bad value 0: .*greater than or equal to 1'),
        ('nosuch: 1\n', r'run.yaml:1: nosuch: unknown key; keys: components, .*num_examples'),
        ('variants: 1\ncomponents:\n  not_a_mode: CITATIONS\n',
         r"run.yaml:3: components.not_a_mode: unknown failure mode 'not_a_mode'; known failure modes: .*citation_quality"),
        ('components:\n  citation_quality: CITES\n',
         r"run.yaml:2: components.citation_quality: .*has no component 'CITES'; its components: IDENTITY, AVAILABLE_TOOLS"),
        ('components:\n  citation_quality: [1]\n', r'run.yaml:2: components.citation_quality: bad value \[1\]'),
        ('components: [a]\n', r'run.yaml:1: components: expected a mapping'),
        ('variants: [\n', r'run.yaml:2: not valid YAML'),
    ],
)  # fmt: skip
def test_run_config_errors_name_file_line_key_and_value(config: str, message: str, tmp_path: Path, scripted: ScriptedLM) -> None:
    path = tmp_path / 'run.yaml'
    path.write_text(config)
    result = _invoke([*BASE, '--config', str(path)])
    assert result.exit_code == 2, result.output
    assert re.search(re.escape(str(path)) + message.removeprefix('run.yaml'), result.text), result.text


@pytest.mark.parametrize(
    ('entry', 'message'),
    [
        ('citation_quality', "--map 'citation_quality': expected FAILURE_MODE=COMPONENT"),
        ('citation_quality=', 'expected FAILURE_MODE=COMPONENT'),
        ('not_a_mode=CITATIONS', "--map not_a_mode=CITATIONS: unknown failure mode 'not_a_mode'; known failure modes:"),
        ('citation_quality=CITATIONS,CITES', "--map citation_quality=CITATIONS,CITES: examples/docs_agent/prompts.py has no "
                                             "component 'CITES'; its components: IDENTITY,"),
    ],
)  # fmt: skip
def test_map_errors(entry: str, message: str, scripted: ScriptedLM) -> None:
    result = _invoke([*BASE, '--map', entry])
    assert result.exit_code == 2, result.output
    assert message in result.text


def test_agent_with_prompt_functions_is_refused(tmp_path: Path, scripted: ScriptedLM) -> None:
    module = tmp_path / 'dyn_agent.py'
    module.write_text(
        textwrap.dedent(
            """
            from pydantic_ai import Agent
            from pydantic_ai.models.test import TestModel

            def make_agent():
                agent = Agent(TestModel(), system_prompt='You help.', name='dated')
                agent.system_prompt(dynamic=True)(lambda: 'Today is Monday.')
                return agent
            """
        )
    )
    args = list(BASE)
    args[args.index('--agent') + 1] = f'{module}:make_agent'
    result = _invoke(args)
    assert result.exit_code == 2, result.output
    assert 'dated has prompt function(s) @agent.system_prompt(dynamic=True)' in result.text
    assert 'a factory taking the prompt' in result.text


def test_gepa_strategy(tmp_path: Path, scripted: ScriptedLM) -> None:
    held_out = ['ex-002', 'ex-004', 'ex-006', 'ex-008', 'ex-010', 'ex-012']
    args = [*BASE, '--strategy', 'gepa', '--max-metric-calls', '40', '--validation-queries', ','.join(held_out)]
    args += ['--out', str(tmp_path)]
    result = _invoke(args)
    assert result.exit_code == 0, result.output
    assert 'GEPA (round-robin over components)' in result.text
    run_dir = next(tmp_path.glob('optimize-*'))
    done = json.loads((run_dir / 'gepa_result.json').read_text())
    assert done['metric_calls'] > 0
    # the CLI's split reaches GEPA: its valset is the validation queries asked for, apart from train
    assert sorted(done['validation_queries']) == held_out and not set(held_out) & set(done['train'])


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        (['--prompts', 'missing.py'], 'missing.py: no such file'),
        (['--agent', 'nocolon'], 'MODULE:FACTORY'),
        (['--judges', 'nosuchjudge'], "unknown judge or group 'nosuchjudge'"),
        (['--dataset', 'missing.jsonl'], 'no such dataset'),
        (['--resume', 'nowhere'], 'holds no optimizer run'),
        (['--config', 'run.ini'], 'run.ini: cannot read the run config'),
    ],
)
def test_usage_errors_exit_2(change: list[str], message: str, scripted: ScriptedLM) -> None:
    args = list(BASE)
    for flag, value in zip(change[::2], change[1::2], strict=True):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    result = _invoke(args)
    assert result.exit_code == 2, result.output
    assert message in result.text


def test_missing_required_options_name_them(scripted: ScriptedLM) -> None:
    result = _invoke(['--prompts', 'examples/docs_agent/prompts.py'])
    assert result.exit_code == 2
    assert 'missing --agent, --dataset (give it on the command line or in --config)' in result.text
