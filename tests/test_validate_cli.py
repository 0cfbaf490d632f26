"""`python -m sensei_eval.validate`: both modes, outputs, exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

from sensei_eval.cli import validate as cli
from sensei_eval.core.files import write_text_atomic
from sensei_eval.judging.run_folder import report_filename
from tests.test_validate import MVP, side, truth_for


def _greeter(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A docs agent that opens with chat filler when its prompt says GREET (the `greeting_check` fires)."""
    answer = 'Set `timeout` in the client.'
    if 'GREET' in (info.instructions or ''):
        answer = 'Hello! Great question. ' + answer
    return ModelResponse(parts=[TextPart(answer)])


def make_agent() -> Agent[None, str]:
    """The --agent factory the CLI tests load as `tests.test_validate_cli:make_agent`."""
    return Agent(FunctionModel(_greeter, model_name='greeter'))


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli.app, list(args))


def _write_run(folder: Path, reports: list[Any]) -> Path:
    for r in reports:
        write_text_atomic(folder / report_filename(r.query_id, r.repeat), r.model_dump_json())
    write_text_atomic(folder / 'summary.json', '{}')  # a run's summary is not a report
    return folder


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(11)
    truth = truth_for(MVP, 30, rng, pass_rate=0.9)
    worse = {**truth, 'completeness': [t and i % 5 == 0 for i, t in enumerate(truth['completeness'])]}
    return _write_run(tmp_path / 'before', side(truth)), _write_run(tmp_path / 'after', side(worse))


def _agent_inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    (tmp_path / 'old.txt').write_text('You are a docs agent. Start with the answer.')
    (tmp_path / 'new.txt').write_text('You are a friendly docs agent. GREET the user first.')
    dataset = tmp_path / 'queries.jsonl'
    # a documentation agent's queries: greeting_check is one of its profile's checks
    meta = {'profile': 'docs-agent'}
    lines = ({'query_id': f'q{i}', 'query': f'How do I set timeout {i}?', 'metadata': meta} for i in range(8))
    dataset.write_text(''.join(json.dumps(line) + '\n' for line in lines))
    return tmp_path / 'old.txt', tmp_path / 'new.txt', dataset


def test_report_dirs_regression_exits_1_and_writes_json_and_markdown(tmp_path: Path) -> None:
    before, after = _runs(tmp_path)
    out = tmp_path / 'cmp'
    result = _invoke('--old-reports', str(before), '--new-reports', str(after), '--out', str(out))
    assert result.exit_code == 1, result.output
    data = json.loads((out / 'comparison.json').read_text())
    completeness = next(m for m in data['metrics'] if m['metric'] == 'completeness')
    assert completeness['verdict'] == 'regressed' and completeness['ci_high'] < 0
    assert data['gate']['exit_code'] == 1 and data['old']['source'] == str(before)
    assert '| `completeness` |' in (out / 'comparison.md').read_text()
    assert 'regressed' in result.stdout and 'gate: failed' in result.stdout
    # the other way round it is an improvement, and the gate passes
    back = _invoke('--old-reports', str(after), '--new-reports', str(before), '--out', str(tmp_path / 'cmp2'), '--cases')
    assert back.exit_code == 0, back.output
    assert 'improved' in back.stdout
    assert 'completeness' in back.stdout and 'q00' in back.stdout  # pydantic-evals' per-case table (--cases)


def test_agent_mode_catches_a_planted_regression(tmp_path: Path) -> None:
    old, new, dataset = _agent_inputs(tmp_path)
    out = tmp_path / 'v'
    args = ['--agent', 'tests.test_validate_cli:make_agent', '--dataset', str(dataset), '--judges', 'greeting_check']
    result = _invoke('--old-prompt', str(old), '--new-prompt', str(new), *args, '--runs', '2', '--out', str(out))
    assert result.exit_code == 1, result.output
    data = json.loads((out / 'comparison.json').read_text())
    agent_format = next(m for m in data['metrics'] if m['metric'] == 'agent_format/greeting_check')
    assert agent_format['verdict'] == 'regressed' and agent_format['old_mean'] == 1.0 and agent_format['new_mean'] == 0.5
    assert agent_format['mcnemar_b'] == 8 and agent_format['mcnemar_p'] < 0.01
    assert len(list((out / 'old' / 'records').glob('*.json'))) == 16 and len(list((out / 'new' / 'records').glob('*.json'))) == 16
    same = _invoke('--old-prompt', str(old), '--new-prompt', str(old), *args, '--out', str(tmp_path / 'same'))
    assert same.exit_code == 0, same.output


def test_input_errors_exit_2_and_name_the_problem(tmp_path: Path) -> None:
    before, _ = _runs(tmp_path)
    old, new, dataset = _agent_inputs(tmp_path)
    agent = ['--agent', 'tests.test_validate_cli:make_agent']

    missing = _invoke('--old-reports', str(before), '--new-reports', str(tmp_path / 'nope'))
    assert missing.exit_code == 2 and 'no such folder' in missing.output and 'nope' in missing.output

    broken = tmp_path / 'broken'
    _write_run(broken, [])
    (broken / 'q1.json').write_text('{"query_id": "q1"}')
    bad = _invoke('--old-reports', str(before), '--new-reports', str(broken))
    assert bad.exit_code == 2 and 'q1.json' in bad.output and 'field' in bad.output

    empty = tmp_path / 'empty'
    empty.mkdir()
    assert _invoke('--old-reports', str(before), '--new-reports', str(empty)).exit_code == 2

    both = _invoke('--old-reports', str(before), '--new-reports', str(before), '--old-prompt', str(old))
    assert both.exit_code == 2 and 'not both' in both.output

    half = _invoke('--old-prompt', str(old), '--new-prompt', str(new))
    assert half.exit_code == 2 and '--agent' in half.output and '--dataset' in half.output

    lines = dataset.read_text().splitlines()
    lines.insert(2, '{"query_id": "q-bad"}')
    bad_dataset = tmp_path / 'bad.jsonl'
    bad_dataset.write_text('\n'.join(lines) + '\n')
    r = _invoke('--old-prompt', str(old), '--new-prompt', str(new), *agent, '--dataset', str(bad_dataset))
    assert r.exit_code == 2 and 'bad.jsonl:3' in r.output and 'query' in r.output

    r = _invoke('--old-prompt', str(old), '--new-prompt', str(new), *agent, '--dataset', str(dataset), '--judges', 'nonsense')
    assert r.exit_code == 2 and 'nonsense' in r.output

    r = _invoke('--old-prompt', str(tmp_path / 'missing.txt'), '--new-prompt', str(new), *agent, '--dataset', str(dataset))
    assert r.exit_code == 2 and '--old-prompt' in r.output and 'missing.txt' in r.output

    r = _invoke('--old-prompt', str(old), '--new-prompt', str(new), '--agent', 'no_such_module:f', '--dataset', str(dataset))
    assert r.exit_code == 2 and 'no_such_module' in r.output

    r = _invoke('--old-reports', str(before), '--new-reports', str(before), '--alpha', '2')
    assert r.exit_code == 2
