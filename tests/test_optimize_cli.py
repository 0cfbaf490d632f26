"""`python -m sensei_eval.optimize` end to end on the example agent, offline.

The judges are the deterministic checks; the models the CLI would resolve (judge and generator) are
replaced by a scripted JudgeModel and a ScriptedLM that proposes the example's fixing rule for each
component, so the run really freezes variants.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sensei_eval.optimize.__main__ as cli
from examples.docs_agent.simulated import RULE_COMPONENTS, RULES
from sensei_eval.optimize.scripted import ScriptedLM
from tests.helpers import ScriptedJudge, no_issues

ROOT = Path(__file__).resolve().parents[1]
FIX = {RULE_COMPONENTS[name]: sentence for name, sentence in RULES}
BASE = [
    '--prompts', 'examples/docs_agent/prompts.py', '--agent', 'examples.docs_agent.agent:make_agent',
    '--dataset', 'examples/docs_agent/queries.jsonl', '--judges', 'checks', '--num-examples', '8',
]  # fmt: skip


def _field(text: str, name: str) -> str:
    return text.split(f'[[ ## {name} ## ]]\n', 1)[1].split('\n\n[[ ## ', 1)[0].strip()


def _propose(messages: list[dict[str, Any]]) -> dict[str, Any] | str:
    text = messages[-1]['content']
    if '[[ ## component_name ## ]]' in text:
        name, current = _field(text, 'component_name'), _field(text, 'current_text')
        return {'variants': json.dumps([f'{current}\nBe thorough.', f'{current}\n{FIX.get(name, "Be brief.")}'])}
    body = json.loads(text[text.index('{') :]) if text.lstrip().startswith('{') else {}
    return json.dumps({'new_instruction': f'{body.get("current_instruction", "")}\n{FIX["CITATIONS"]}'})


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedLM:
    lm = ScriptedLM(_propose)
    monkeypatch.setattr(cli, 'resolve_model', lambda *a, **k: ScriptedJudge(no_issues).model())
    monkeypatch.setattr(cli, 'dspy_lm', lambda model: lm)
    monkeypatch.chdir(ROOT)
    return lm


def test_sequential_run_resume_and_table(tmp_path: Path, scripted: ScriptedLM) -> None:
    result = CliRunner().invoke(cli.app, [*BASE, '--variants', '2', '--out', str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert 'sequential optimization: complete' in result.output
    run_dir = next(tmp_path.glob('optimize-*'))
    suggestions = json.loads((run_dir / 'suggestions.json').read_text())
    assert {s['current_prompt_section'] for s in suggestions} >= {'IDENTITY', 'CITATIONS'}
    assert FIX['CITATIONS'] in (run_dir / 'prompts.yaml').read_text()
    assert '+' + FIX['IDENTITY'] in (run_dir / 'prompts.diff').read_text()

    again = CliRunner().invoke(cli.app, [*BASE, '--variants', '2', '--resume', str(run_dir)])
    assert again.exit_code == 0, again.output
    assert 'resuming' in again.output


def test_gepa_strategy(tmp_path: Path, scripted: ScriptedLM) -> None:
    result = CliRunner().invoke(cli.app, [*BASE, '--strategy', 'gepa', '--max-metric-calls', '40', '--out', str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert 'GEPA (round-robin over components)' in result.output
    run_dir = next(tmp_path.glob('optimize-*'))
    assert json.loads((run_dir / 'gepa_result.json').read_text())['metric_calls'] > 0


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        (['--prompts', 'missing.py'], 'missing.py: no such file'),
        (['--agent', 'nocolon'], 'MODULE:FACTORY'),
        (['--judges', 'nosuchjudge'], "unknown judge or group 'nosuchjudge'"),
        (['--dataset', 'missing.jsonl'], 'no such dataset'),
        (['--resume', 'nowhere'], 'holds no optimizer run'),
    ],
)
def test_usage_errors_exit_2(change: list[str], message: str, scripted: ScriptedLM) -> None:
    args = list(BASE)
    for flag, value in zip(change[::2], change[1::2], strict=True):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 2, result.output
    assert message in ' '.join(result.output.split())
