"""Every command's exit codes, as docs/cli.md lists them in one table: each row is either triggered here or
names the test elsewhere that triggers it (that test must assert the code), so the table cannot drift
from what the commands do. Plus the errors a newcomer meets first: a port in use (exit 2 with a `--port`
hint, before the database is touched) and a misspelt record field (did-you-mean)."""

from __future__ import annotations

import ast
import json
import re
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sensei_eval.cli.app import COMMANDS
from sensei_eval.cli.app import app as root
from sensei_eval.core.records import QueryRecord

from .helpers import openai_record

ROOT = Path(__file__).resolve().parents[1]
TABLE = (ROOT / 'docs' / 'cli.md').read_text(encoding='utf-8').split('## Exit codes', 1)[1].split('\n## ', 1)[0]


def _documented() -> list[tuple[str, int]]:
    rows = re.findall(r'^\| (`[a-z]+`|every command) \| (\d+) \|', TABLE, flags=re.MULTILINE)
    return [(command.strip('`'), int(code)) for command, code in rows]


# (command, code) -> the test (file::function) that asserts it, for the rows not triggered in this file
ELSEWHERE = {
    ('judge', 0): 'tests/test_cli_first_run.py::test_the_main_job_judges_with_the_checks_and_names_the_llm_judges_not_run',
    ('judge', 1): 'tests/test_cli_console.py::test_plain_progress_counts_bad_lines_and_ends_on_the_total',
    (
        'judge',
        130,
    ): 'tests/test_bad_input_never_stops_a_run.py::test_ctrl_c_writes_the_summary_of_what_finished_and_the_command_that_resumes',
    ('optimize', 0): 'tests/test_optimize_cli.py::test_sequential_run_saves_the_evaluated_prompt_and_resumes',
    ('optimize', 2): 'tests/test_optimize_cli.py::test_usage_errors_exit_2',
    ('validate', 0): 'tests/test_validate_cli.py::test_report_dirs_regression_exits_1_and_writes_json_and_markdown',
    ('validate', 1): 'tests/test_validate_cli.py::test_report_dirs_regression_exits_1_and_writes_json_and_markdown',
    ('calibrate', 0): 'tests/test_calibrate.py::test_cli_on_tau2_shaped_labels_prints_readable_tables_at_80_columns',
    ('calibrate', 1): 'tests/test_calibrate.py::test_cli_writes_json_and_exits_1_on_label_problems',
    ('calibrate', 2): 'tests/test_calibrate.py::test_cli_writes_json_and_exits_1_on_label_problems',
    ('sample', 0): 'tests/test_sampler.py::test_sample_command_over_a_trace_file',
    ('view', 0): 'tests/test_view.py::test_cli_writes_the_file_and_refuses_a_missing_folder',
    ('serve', 0): 'tests/service/test_service_cli.py::test_serve_command_runs_the_service',
    ('cache', 0): 'tests/test_cache.py::test_cache_command_stats_prune_clear',
    ('cache', 2): 'tests/test_cache.py::test_cache_command_stats_prune_clear',
}


def _asserts_code(reference: str, code: int) -> bool:
    """The named test exists and asserts this exit code (`exit_code == N`, `returncode == N`, or one of a tuple)."""
    file, name = reference.split('::')
    tree = ast.parse((ROOT / file).read_text(encoding='utf-8'))
    [function] = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    source = ast.get_source_segment((ROOT / file).read_text(encoding='utf-8'), function) or ''
    return bool(re.search(rf'(exit_code|returncode|wait\(timeout=\d+\)) (==|in) \(?[^\n]*\b{code}\b', source))


# ---------------------------------------------------------------------------------------------------
# Triggered here


def _judge_2(tmp: Path) -> int:
    return int(CliRunner().invoke(root, ['judge', '--format', 'yaml', '--out', str(tmp)]).exit_code)


def _every_command_2(tmp: Path) -> int:
    codes = {CliRunner().invoke(root, [name, '--no-such-option']).exit_code for name in COMMANDS}
    assert codes == {2}, codes
    return 2


def _optimize_1(tmp: Path) -> int:
    """A dataset with one bad line: the rest is optimized and saved, the exit code says a line was bad."""
    import sensei_eval.cli.optimize as cli
    from examples.docs_agent.proposer import proposer_lm

    from .helpers import ScriptedJudge, no_issues

    dataset = tmp / 'queries.jsonl'
    dataset.write_text((ROOT / 'examples/docs_agent/queries.jsonl').read_text(encoding='utf-8') + '{"query": 7}\n')
    args = ['--prompts', 'examples/docs_agent/prompts.py', '--agent', 'examples.docs_agent.agent:make_agent']
    args += ['--dataset', str(dataset), '--judges', 'checks', '--num-examples', '19', '--variants', '1', '--out', str(tmp)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli, 'resolve_model', lambda *a, **k: ScriptedJudge(no_issues).model())
        mp.setattr(cli, 'dspy_lm', lambda model: proposer_lm())
        mp.chdir(ROOT)
        return int(CliRunner().invoke(cli.app, args).exit_code)


def _optimize_130(tmp: Path) -> int:
    import sensei_eval.cli.optimize as cli

    from .helpers import ScriptedJudge, no_issues

    class Interrupted:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        async def run(self) -> None:
            raise KeyboardInterrupt

    args = ['--prompts', 'examples/docs_agent/prompts.py', '--agent', 'examples.docs_agent.agent:make_agent']
    args += ['--dataset', 'examples/docs_agent/queries.jsonl', '--judges', 'checks', '--num-examples', '19', '--out', str(tmp)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli, 'resolve_model', lambda *a, **k: ScriptedJudge(no_issues).model())
        mp.setattr(cli, 'dspy_lm', lambda model: object())
        mp.setattr(cli, 'SequentialOptimizer', Interrupted)
        mp.chdir(ROOT)
        return int(CliRunner().invoke(cli.app, args).exit_code)


def _validate_2(tmp: Path) -> int:
    return int(CliRunner().invoke(root, ['validate', '--old-reports', str(tmp / 'a'), '--new-reports', str(tmp / 'b')]).exit_code)


def _sample_2(tmp: Path) -> int:
    config = tmp / 'sampling.yaml'
    config.write_text('rate: lots\n')
    dataset = tmp / 'd.jsonl'
    dataset.write_text(openai_record().model_dump_json() + '\n')
    return int(CliRunner().invoke(root, ['sample', '--dataset', str(dataset), '--config', str(config)]).exit_code)


def _view_2(tmp: Path) -> int:
    (tmp / 'empty').mkdir()
    return int(CliRunner().invoke(root, ['view', str(tmp / 'empty')]).exit_code)


def _serve_2(tmp: Path) -> int:
    pytest.importorskip('fastapi')
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(root, ['serve', '--db', str(tmp / 's.db'), '--model', 'test', '--port', str(port)])
    assert f'port {port} on 127.0.0.1 is in use' in result.output and '--port' in result.output, result.output
    assert not (tmp / 's.db').exists()  # refused before the database was created or migrated
    return int(result.exit_code)


def _serve_3(tmp: Path) -> int:
    pytest.importorskip('fastapi')
    with socket.socket() as free:
        free.bind(('127.0.0.1', 0))
        port = free.getsockname()[1]
    command = [sys.executable, '-m', 'sensei_eval', 'serve', '--db', str(tmp / 'missing' / 'x.db'), '--model', 'test']
    command += ['--port', str(port), '--log-level', 'critical']
    return subprocess.run(command, capture_output=True, timeout=120, cwd=tmp).returncode


def _cache_1(tmp: Path) -> int:
    db = tmp / 'judge' / 'cache.sqlite3'
    db.parent.mkdir(parents=True)
    db.write_bytes(b'not a database at all, just text' * 100)
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(db).execute('SELECT 1 FROM sqlite_master').fetchall()
    return int(CliRunner().invoke(root, ['cache', 'stats', '--dir', str(tmp)]).exit_code)


HERE: dict[tuple[str, int], Callable[[Path], int]] = {
    ('every command', 2): _every_command_2,
    ('judge', 2): _judge_2,
    ('optimize', 1): _optimize_1,
    ('optimize', 130): _optimize_130,
    ('validate', 2): _validate_2,
    ('sample', 2): _sample_2,
    ('view', 2): _view_2,
    ('serve', 2): _serve_2,
    ('serve', 3): _serve_3,
    ('cache', 1): _cache_1,
}


def test_the_table_covers_every_command_and_every_row_is_tested() -> None:
    rows = _documented()
    assert {c for c, _ in rows} == {'every command', *COMMANDS}, rows
    assert len(rows) == len(set(rows))
    assert set(rows) == set(HERE) | set(ELSEWHERE), set(rows) ^ (set(HERE) | set(ELSEWHERE))
    for row, reference in ELSEWHERE.items():
        assert _asserts_code(reference, row[1]), (row, reference)


@pytest.mark.parametrize('row', sorted(HERE), ids=lambda r: f'{r[0]}-{r[1]}'.replace(' ', '_'))
def test_the_documented_code(row: tuple[str, int], tmp_path: Path) -> None:
    assert HERE[row](tmp_path) == row[1]


# ---------------------------------------------------------------------------------------------------
# Did you mean


@pytest.mark.parametrize(
    ('change', 'field', 'guess'),
    [
        ({'ratings': {'correctness': 4}}, 'ratings', 'rating'),
        ({'rating': {'corectness': 4}}, 'rating.corectness', 'correctness'),
        ({'expected_tool_calls': [{'tool_nam': 'search'}]}, 'expected_tool_calls[0].tool_nam', 'tool_name'),
        ({'prompt_versoin': 'v2'}, 'prompt_versoin', 'prompt_version'),
    ],
)
def test_an_unknown_record_field_names_the_closest_one(change: dict[str, object], field: str, guess: str, tmp_path: Path) -> None:
    data = json.loads(openai_record('q1').model_dump_json(exclude_none=True)) | change
    dataset = tmp_path / 'd.jsonl'
    dataset.write_text(json.dumps(data) + '\n')
    result = CliRunner().invoke(root, ['judge', '--dataset', str(dataset), '--judges', 'checks', '--out', str(tmp_path)])
    text = ' '.join(result.output.split())
    assert f"d.jsonl:1 (query_id 'q1') field `{field}`: unknown field: did you mean `{guess}`?" in text, text
    assert result.exit_code == 1


def test_an_unknown_field_far_from_any_lists_the_fields() -> None:
    with pytest.raises(ValueError, match=r'unknown field: the fields are alert_data, expected_outputs'):
        QueryRecord.model_validate(json.loads(openai_record().model_dump_json()) | {'zzz': 1})
