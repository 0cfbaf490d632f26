"""One command line: `sensei-eval judge|optimize|validate|calibrate|serve`, shared options, 80 columns."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.cli import judge_console
from sensei_eval.cli.app import app as root
from sensei_eval.cli.common import split_names
from sensei_eval.judging.run_folder import load_reports

SAMPLE = Path(__file__).resolve().parents[1] / 'datasets' / 'sample.jsonl'
COMMANDS = ('judge', 'optimize', 'validate', 'calibrate', 'serve', 'sample', 'view')


def _run80(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(root, args, env={'COLUMNS': '80'}, terminal_width=80)
    return result.exit_code, result.output


def test_root_help_lists_every_command() -> None:
    code, output = _run80(['--help'])
    assert code == 0, output
    for name in COMMANDS:
        assert f'  {name} ' in output


@pytest.mark.parametrize('command', COMMANDS)
def test_help_fits_80_columns_without_cut_option_names(command: str) -> None:
    code, output = _run80([command, '--help'])
    assert code == 0, output
    assert all(len(line) <= 80 for line in output.splitlines()), output
    assert '…' not in output
    if command in ('judge', 'optimize', 'validate'):
        assert '--judges' in output and '--model' in output and '--base-url' in output


def test_judge_checks_at_80_columns_compact_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge_console.out, 'width', 80)
    monkeypatch.chdir(tmp_path)  # as a user runs it: `next: sensei-eval view c`, not pytest's long temp path
    code, output = _run80(['judge', '--dataset', str(SAMPLE), '--judges', 'checks', '--out', str(tmp_path), '--run-id', 'c'])
    assert code == 0, output
    assert all(len(line) <= 80 for line in output.splitlines()), [x for x in output.splitlines() if len(x) > 80]
    judges = json.loads((tmp_path / 'c' / 'summary.json').read_text())['judges']
    rows = [line for line in output.splitlines() if line.split() and line.split()[0] in judges]
    assert sorted(line.split()[0] for line in rows) == sorted(judges)  # one row per judge
    assert 'Evaluation Summary' not in output  # the per-record table is behind --verbose
    assert 'failed verdicts' in output and 'docs-006 · version_check · ' in output
    # no third-party banner or warning
    assert 'Logfire' not in output and 'logfire' not in output and 'pydantic-ai' not in output.lower().split('judge model')[0]

    code, verbose = _run80(
        ['judge', '--dataset', str(SAMPLE), '--judges', 'checks', '--out', str(tmp_path), '--run-id', 'v', '--verbose']
    )
    assert code == 0, verbose
    assert 'Evaluation Summary' in verbose and 'docs-006' in verbose
    # --verbose: every failed verdict with its full reason, not cut to one line
    flat = ' '.join(verbose.split())
    failed = 0
    for report in load_reports(tmp_path / 'v'):
        for name, result in report.judges.items():
            if result.status == 'ok' and result.passed is False:
                failed += 1
                assert f'{report.query_id} · {name} · ' in flat
                for issue in result.issues:
                    for key, value in issue.items():
                        if isinstance(value, str) and value and key != 'source':
                            assert ' '.join(value.split()) in flat, (name, key, value)
    assert failed


def test_judges_and_the_deprecated_evaluators_mean_the_same_on_judge(tmp_path: Path) -> None:
    for i, option in enumerate(('--judges', '--evaluators')):
        args = ['--dataset', str(SAMPLE), option, 'version_check,greeting_check', option, 'citation_check']
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            result = CliRunner().invoke(judge_cli.app, [*args, '--out', str(tmp_path), '--run-id', f'r{i}'])
        assert result.exit_code == 0, result.output
        summary = json.loads((tmp_path / f'r{i}' / 'summary.json').read_text())
        assert set(summary['judges']) == {'version_check', 'greeting_check', 'citation_check'}
        old = option == '--evaluators'  # the old name: accepted for one release, with a warning
        assert ('deprecated: --evaluators is the old name of --judges' in result.output) is old
        assert any(issubclass(w.category, DeprecationWarning) and '--evaluators' in str(w.message) for w in caught) is old
    # the root command takes the old name too; --help names only the new one
    code, output = _run80(['judge', '--evaluators', 'nonsense', '--dataset', str(SAMPLE)])
    assert code == 2 and "'nonsense'" in output
    code, output = _run80(['judge', '--help'])
    assert code == 0 and '--judges' in output and '--evaluators' not in output


def test_judges_is_the_same_option_on_optimize_and_validate(tmp_path: Path) -> None:
    assert split_names(['a,b', ' c ', '']) == ['a', 'b', 'c'] and split_names(None) == ['core', 'checks']
    # a repeated, comma-separated unknown judge is a usage error naming it, on every command
    data = tmp_path / 'q.jsonl'
    data.write_text('{"query_id": "q1", "query": "hi"}\n')
    common = ['--judges', 'checks,greeting_check', '--judges', 'nosuchjudge']
    agent = ['--agent', 'examples.docs_agent.agent:make_agent', '--dataset', str(data)]
    prompts = 'examples/docs_agent/prompts.py'
    opt = _run80(['optimize', '--prompts', prompts, *agent, *common])
    val = _run80(['validate', '--old-prompt', prompts, '--new-prompt', prompts, *agent, *common])
    jud = _run80(['judge', '--dataset', str(SAMPLE), *common])
    for code, output in (opt, val, jud):
        assert code == 2 and 'nosuchjudge' in output, output
