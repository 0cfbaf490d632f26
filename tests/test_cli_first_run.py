"""The first run a newcomer makes: no judge model named, so the deterministic checks give the verdicts, each
LLM judge says it did not run and how to name a model, and the embedded model runs only when named.

Also the same rule in Python: a judge with no model configured is a clear error naming `model=` and
`SENSEI_EVAL_MODEL`, never a silent fall-back to the embedded model.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from pydantic_evals import Case, Dataset
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.cli.app import app as root
from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators.registry import GROUPS, make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from sensei_eval.models.judge_model import NO_JUDGE_MODEL, NoJudgeModelError, resolve_model

from .helpers import openai_record

ROOT = Path(__file__).resolve().parents[1]


def test_no_model_in_python_is_an_error_naming_model_and_the_variable() -> None:
    with pytest.raises(NoJudgeModelError) as info:
        resolve_model()
    message = str(info.value)
    assert 'model=' in message and 'SENSEI_EVAL_MODEL' in message and "model='embedded'" in message
    assert info.value.exit_code == 2


def test_a_judge_in_a_pydantic_evals_dataset_with_no_model_fails_with_that_error() -> None:
    """The judge does not fall back to the embedded model (which answered "smoke" before): pydantic-evals
    records an evaluator failure that says how to name a model."""
    from sensei_eval.evaluators.base import use_judge_model

    use_judge_model(None)
    [judge] = make_judges(['hallucination'])
    dataset = Dataset[QueryRecord, QueryRecord, None](
        name='first-run', cases=[Case(name='r1', inputs=openai_record())], evaluators=[judge]
    )
    report = dataset.evaluate_sync(lambda record: record, progress=False)
    [failure] = report.cases[0].evaluator_failures
    assert 'no judge model configured' in failure.error_message and 'SENSEI_EVAL_MODEL' in failure.error_message
    assert 'smoke: ' not in failure.error_message  # not the embedded model's answer


def test_the_runner_without_a_model_reports_the_llm_judges_as_not_run(tmp_path: Path) -> None:
    [report] = asyncio.run(judge_records([openai_record()], JudgeRunOptions(make_judges(['mvp', 'checks'])), run_id='r'))
    for name in ('tool_selection', 'hallucination', 'completeness'):
        assert report.skipped[name] == NO_JUDGE_MODEL and name not in report.judges
    assert report.judges and all(r.model is None for r in report.judges.values())  # the checks judged
    assert report.overall_score is not None and not report.errors


def test_the_main_job_judges_with_the_checks_and_names_the_llm_judges_not_run(tmp_path: Path) -> None:
    """`python -m sensei_eval.judge` on a fresh machine: real verdicts, exit 0, no embedded model started,
    one line per LLM judge that did not run, and how to name a model."""
    result = subprocess.run(
        [sys.executable, '-m', 'sensei_eval.judge', '--out', str(tmp_path), '--run-id', 'first'],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in ('SENSEI_EVAL_MODEL', 'SENSEI_EVAL_BASE_URL')},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    ran = 'judges (13): 8 ran; did not run: tool_selection, tool_parameters, hallucination,\n'
    assert ran + '  completeness, instruction_following' in out
    assert 'overall score 0.58 · checks only: all 8 judges, 5 LLM judge(s) not run' in out
    assert 'failed verdicts (11):' in out
    not_run = out.split('LLM judges not run (no judge model named):\n', 1)[1].splitlines()
    assert not_run[:5] == [f'  {n}: needs a judge model' for n in GROUPS['core']]
    assert '--model openai:gpt-5.2' in out and 'SENSEI_EVAL_MODEL' in out and '--model embedded' in out
    assert 'starting the embedded model' not in result.stderr and 'smoke' not in result.stderr
    assert all(len(line) <= 80 for line in out.splitlines()), out
    summary = json.loads((tmp_path / 'first' / 'summary.json').read_text())
    assert summary['model'] is None and summary['exit_code'] == 0 and summary['model_requests'] == 0
    report = json.loads((tmp_path / 'first' / 'records' / 'docs-001.json').read_text())
    assert report['skipped']['hallucination'] == NO_JUDGE_MODEL


def test_commands_that_need_a_model_say_how_to_name_one(tmp_path: Path) -> None:
    """Without a model, validate, optimize, calibrate and serve stop with exit 2 before doing anything
    (`setup_judge_model`), naming --model, SENSEI_EVAL_MODEL and --model embedded."""
    from sensei_eval.cli.base import make_console
    from sensei_eval.cli.common import NO_MODEL_HELP, ModelFlags, setup_judge_model

    with pytest.raises(typer.Exit) as info:
        setup_judge_model(ModelFlags(), err=make_console(stderr=True))
    assert info.value.exit_code == 2
    assert '--model' in NO_MODEL_HELP and 'SENSEI_EVAL_MODEL' in NO_MODEL_HELP and '--model embedded' in NO_MODEL_HELP
    pytest.importorskip('fastapi')
    result = CliRunner().invoke(root, ['serve', '--db', str(tmp_path / 's.db')])
    assert result.exit_code == 2, result.output
    assert 'no judge model' in result.output and '--model embedded' in ' '.join(result.output.split())
    assert not (tmp_path / 's.db').exists()  # nothing created before the model check


def test_the_embedded_model_is_used_when_named(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip('llama_cpp')
    model = resolve_model('embedded')
    assert model.embedded
    model.close()
    monkeypatch.setenv('SENSEI_EVAL_MODEL', 'embedded')
    model = resolve_model()
    assert model.embedded
    model.close()


def test_judge_model_help_names_embedded_as_opt_in() -> None:
    result = CliRunner().invoke(judge_cli.app, ['--help'], terminal_width=100)
    assert 'embedded (the offline smoke model' in ' '.join(result.output.split())
