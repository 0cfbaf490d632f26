"""What the console prints: progress that reaches its total, tables printed whole in a CI log, repeated errors
folded into one line, and untrusted text (query ids, reasons) never reaching the terminal as Rich markup or
as control sequences."""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

from sensei_eval.agents.runner import AgentRuns, PydanticAIRunner, Query, run_and_judge_many
from sensei_eval.cli import judge as judge_cli
from sensei_eval.cli import judge_console
from sensei_eval.cli.base import LOG_WIDTH, SafeConsole, make_console
from sensei_eval.data import SAMPLE_DATASET
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging import run as judging_run
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.models import retry
from sensei_eval.models.judge_model import JudgeModel

from .helpers import openai_record


def _sample_line(query_id: str) -> dict[str, Any]:
    for line in Path(SAMPLE_DATASET).read_text(encoding='utf-8').splitlines():
        if line.strip() and json.loads(line)['query_id'] == query_id:
            return dict(json.loads(line))
    raise KeyError(query_id)


# ---------------------------------------------------------------------------------------------------
# Progress


def test_plain_progress_counts_bad_lines_and_ends_on_the_total(tmp_path: Path) -> None:
    """Three good lines and three bad ones: the last progress line says 6/6, not 3/6."""
    good = [openai_record(f'g{i}').model_dump_json() for i in range(3)]
    dataset = tmp_path / 'd.jsonl'
    dataset.write_text('\n'.join([good[0], '{"query_id": "b1"}', good[1], 'not json', good[2], '{"messages": []}']) + '\n')
    result = CliRunner().invoke(judge_cli.app, ['--dataset', str(dataset), '--judges', 'checks', '--out', str(tmp_path / 'o')])
    assert result.exit_code == 1  # the bad lines are errors
    progress = [line for line in result.output.splitlines() if line.startswith('progress: ')]
    assert progress and progress[-1].startswith('progress: 6/6 records'), result.output


def test_validate_judging_total_is_what_the_runner_reports() -> None:
    """The judging bar counts to the results the runner gives: checks the profile leaves out are not
    counted ahead (validate's bar used to stop at 48/96)."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart('Set it in config.toml.')])

    runner = PydanticAIRunner(Agent(FunctionModel(answer, model_name='agent')))
    totals: dict[str, int] = {}
    seen: Counter[str] = Counter()
    judges = make_judges(['checks'])  # the documentation checks are not in the default profile
    asyncio.run(
        run_and_judge_many(
            {'old': 'You are terse.', 'new': 'You are brief.'},
            [Query('q1', 'How do I configure it?'), Query('q2', 'And test it?')],
            AgentRuns(runner, 2, 2),
            JudgeRunOptions(judges),
            on_judging=lambda side, total: totals.__setitem__(side, total),
            on_judge=lambda side, event: seen.update([side]),
        )
    )
    assert totals == dict(seen) and totals['old'] > 0, (totals, seen)


# ---------------------------------------------------------------------------------------------------
# Width


def test_tables_are_printed_whole_without_a_terminal() -> None:
    from sensei_eval.validate.render import print_comparison
    from sensei_eval.validate.results import Comparison, GateResult, MetricComparison, SideSummary, Thresholds

    long_name = 'tool_selection/docs_tool_check_for_the_whole_documentation_agent'
    metric = MetricComparison(metric=long_name, kind='judge', n_pairs=3, old_mean=1.0, new_mean=0.5, delta=-0.5)
    comparison = Comparison(
        thresholds=Thresholds(),
        old=SideSummary(label='old'),
        new=SideSummary(label='new'),
        metrics=[metric],
        gate=GateResult(exit_code=0, passed=True),
    )
    piped = make_console()
    piped.file = io.StringIO()
    assert not piped.is_terminal and piped.width == 80 and piped.table_width == LOG_WIDTH
    print_comparison(comparison, piped)
    text = piped.file.getvalue()
    assert long_name in text and 'd_z' in text and 'noise ±' in text, text  # every column, the name uncut
    narrow = SafeConsole(file=io.StringIO(), width=80)  # a terminal of 80 columns keeps the short table
    print_comparison(comparison, narrow)
    assert 'd_z' not in narrow.file.getvalue()


# ---------------------------------------------------------------------------------------------------
# Folded errors


def test_one_failing_server_gives_one_folded_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, 'BASE_BACKOFF_S', 0.0)
    calls = [0]

    def failing(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls[0] += 1
        raise ModelHTTPError(500, 'judge', body=f'internal error, request id req_{calls[0]:012d}')

    model = JudgeModel(FunctionModel(failing, model_name='judge'), 'judge')
    monkeypatch.setattr(judging_run, 'resolve_model', lambda *a, **k: model)
    dataset = tmp_path / 'd.jsonl'
    dataset.write_text(''.join(openai_record(f'r{i}').model_dump_json() + '\n' for i in range(3)))
    args = ['--dataset', str(dataset), '--judges', 'hallucination,completeness', '--no-cache', '--out', str(tmp_path / 'o')]
    result = CliRunner().invoke(judge_cli.app, args)
    assert result.exit_code == 1
    block = result.output.split('judge error(s):\n', 1)[1].split('reports: ', 1)[0]
    folded = ' '.join(block.split())  # the console wraps the one line at 80 columns
    # both judges answer in one fused call: its error, once per judge, folded into one line
    assert folded.startswith('6× fused:hallucination+completeness: model call to model judge failed'), result.output
    assert folded.count('×') == 1, result.output
    assert folded.endswith('(records: r0, r1, r2; judges: hallucination, completeness)'), folded


def test_fold_errors_keeps_different_errors_apart() -> None:
    lines = judge_console.fold_errors(
        ['a: j: timed out after 120 s', 'b: j: timed out after 121 s', 'c: k: 401 key rejected', 'd: j: timed out after 9 s']
    )
    assert lines == ['3× timed out after 120 s (records: a, b, d; judges: j)', 'c: k: 401 key rejected']


# ---------------------------------------------------------------------------------------------------
# Untrusted text on the terminal

EVIL_ID = '[link=https://evil.example/x]evil[/link]\x1b[2J'
OSC8 = '\x1b]8;;https://evil.example/y\x1b\\click\x1b]8;;\x1b\\'


def test_query_ids_and_reasons_reach_the_terminal_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal (the live progress bar included): a query id with Rich markup and a raw clear-screen
    sequence, and an answer with an OSC-8 hyperlink, print as visible characters."""
    record = _sample_line('docs-009')  # the greeting check fails it, quoting the answer
    record['query_id'] = EVIL_ID
    answer = record['messages'][-1]['parts'][-1]
    answer['content'] = 'Hello! ' + OSC8 + ' ' + answer['content']
    dataset = tmp_path / 'd.jsonl'
    dataset.write_text(json.dumps(record) + '\n')
    err, out = io.StringIO(), io.StringIO()
    monkeypatch.setattr(judge_console, 'err', SafeConsole(file=err, force_terminal=True, width=100))
    monkeypatch.setattr(judge_console, 'out', SafeConsole(file=out, force_terminal=True, width=100))
    args = ['--dataset', str(dataset), '--judges', 'checks', '--profile', 'docs-agent', '--out', str(tmp_path / 'o'), '-v']
    result = CliRunner().invoke(judge_cli.app, args)
    assert result.exit_code == 0, result.output
    written = err.getvalue() + out.getvalue()
    assert 'evil' in written and 'greeting_check' in written
    assert '\x1b[2J' not in written and '\x1b]8;' not in written  # no clear screen, no hyperlink
    assert 'https://evil.example/x' in written  # the markup printed as the characters it is
    # nothing but Rich's own style and cursor codes (CSI ... m / K / A / ?25) is an escape sequence
    assert set(re.findall(r'\x1b\[[0-9;?]*([A-Za-z])', written)) <= {'m', 'K', 'A', 'l', 'h', 'G'}, written


def test_the_console_prints_control_characters_as_their_pictures() -> None:
    console = make_console()
    console.file = io.StringIO()
    console.print(f'{EVIL_ID} {OSC8}', markup=False)
    text = console.file.getvalue()
    assert '\x1b' not in text and '␛[2J' in text and '[link=https://evil.example/x]' in text


def test_sample_prints_a_bad_lines_text_as_text(tmp_path: Path) -> None:
    from sensei_eval.cli.app import app as root

    dataset = tmp_path / 'd.jsonl'
    dataset.write_text(json.dumps({'query_id': EVIL_ID, 'messages': []}) + '\n')
    result = CliRunner().invoke(root, ['sample', '--dataset', str(dataset), '--out', str(tmp_path / 's.jsonl')])
    assert 'warning:' in result.output and '\x1b' not in result.output, result.output


# ---------------------------------------------------------------------------------------------------
# Every score explained (--verbose)


def test_verbose_says_why_each_score_is_below_one(tmp_path: Path) -> None:
    """`judge -v` on the sample: every record below 1.00 is listed with the verdicts that cost it points and
    their findings, read from the verdict model (`core.explain`); the records at 1.00 are not."""
    result = CliRunner().invoke(judge_cli.app, ['--judges', 'checks', '--out', str(tmp_path), '--run-id', 'v', '-v'])
    assert result.exit_code == 0, result.output
    why = result.stdout.split('why each score is below 1.00 (', 1)[1]
    assert why.startswith('8 record(s)):')
    # a check failed the run: the check-failed band (`core.verdicts`), 0.25 x the mode's 0.50
    assert '  docs-006 · 0.12 · all 7 judges\n    version_check · tool_parameters: fail 0.50\n' in why
    assert "      finding: The query names version '15'" in why
    assert '  docs-013 · 0.03 · all 7 judges' in why and 'docs-001 ·' not in why
    assert 'repeated_call_check · tool_parameters: fail 0.50' in why
