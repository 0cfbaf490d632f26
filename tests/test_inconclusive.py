"""A verdict that did not judge is `inconclusive`: kept with its raw output, out of the scores, counted —
never a pass."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.core.issues import ToolSelectionIssue
from sensei_eval.core.transcript import render_transcript
from sensei_eval.evaluators.base import JUDGE_SYSTEM_PROMPT
from sensei_eval.evaluators.inconclusive import copied_from, same_text_everywhere, why_inconclusive
from sensei_eval.evaluators.output import Hallucination
from sensei_eval.evaluators.tool_usage import ToolSelection
from sensei_eval.judging import run as judging_run
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from tests.helpers import ScriptedJudge, openai_record

# What the embedded model answered on 49 of 51 calls: the schema's own field description as its reasoning.
ECHO = {'reasoning': 'Two to five sentences weighing the evidence, citing [step] numbers.', 'issues': []}


def _prompt() -> str:
    return f'{JUDGE_SYSTEM_PROMPT}\n{ToolSelection().task_prompt()}'


def test_copied_schema_text_is_detected_and_real_reasoning_is_not() -> None:
    assert why_inconclusive(ECHO['reasoning'], [], 5, _prompt()) is not None
    # a near copy (one word changed) is still a copy
    near = 'Two to five sentences weighing all the evidence, citing [step] numbers.'
    assert copied_from(near, _prompt())
    real = 'The agent looked up the FastAPI docs at [3] before answering at [5]; no tool was missing or wasted.'
    assert why_inconclusive(real, [], 5, _prompt()) is None
    # quoting the transcript is evidence, not copying: the transcript is not part of what is compared
    quoting = 'Step [4] says "Depends() declares a dependency", which the answer repeats.'
    assert why_inconclusive(quoting, [], 5, _prompt()) is None
    # short stock phrases are too common to call copies
    assert why_inconclusive('No issues found.', [], 5, _prompt()) is None


# A run as a judge sees it, for the rules that compare the reasoning with the transcript.
RUN = (
    '[1] user: How do I declare a dependency in FastAPI?\n'
    '[2] tool_call context7_get_docs {"library_id": "/tiangolo/fastapi", "topic": "dependencies"}\n'
    '[3] tool_result context7_get_docs: Depends() declares a dependency; pass a callable.\n'
    '[4] assistant: Use `Depends(get_db)` in the path operation signature.'
)


@pytest.mark.parametrize(
    'reasoning',
    [
        'Two to five sentences citing [step] numbers, and no more.',  # the schema description, reworded
        'Five sentences or two, citing the step numbers, weighing evidence.',
        'The answer weighs the evidence and cites the relevant steps as asked.',  # generic: nothing of the run
        'The agent did what was asked and the answer is complete and correct.',
    ],
)
def test_paraphrased_or_run_free_reasoning_is_inconclusive(reasoning: str) -> None:
    assert why_inconclusive(reasoning, [], 4, _prompt(), RUN) is not None


@pytest.mark.parametrize(
    'reasoning',
    [
        'The agent looked up the FastAPI docs at [2] and answered with Depends(get_db) at [4]; nothing is missing.',
        'The answer recommends Depends(get_db), which is what the context7 lookup returned about dependencies.',
        'Step 3 says Depends() takes a callable and the final answer passes get_db, so it is grounded.',
        'No tool was wasted: one docs lookup for /tiangolo/fastapi covered the question.',
    ],
)
def test_genuine_reasoning_that_names_the_run_is_not_caught(reasoning: str) -> None:
    assert why_inconclusive(reasoning, [], 4, _prompt(), RUN) is None


def test_empty_reasoning_and_phantom_steps() -> None:
    assert why_inconclusive('  ... ', [], 5, _prompt()) == 'empty reasoning'
    phantom = ToolSelectionIssue(steps=[41, 42], missed_tools=['x'], unnecessary_tools=[], reasoning='missing x')
    assert 'do not exist' in (why_inconclusive('Step [41] shows a problem with the run.', [phantom], 5, _prompt()) or '')
    partly = ToolSelectionIssue(steps=[2, 42], missed_tools=['x'], unnecessary_tools=[], reasoning='missing x')
    assert why_inconclusive('Step [2] shows a missing lookup in this run.', [partly], 5, _prompt()) is None


def test_issues_copied_from_the_rubric_are_inconclusive() -> None:
    copied = ToolSelectionIssue(
        steps=[2], missed_tools=['Tools that should have been used but were not.'], unnecessary_tools=[],
        reasoning='Tools that were used but not needed.',
    )  # fmt: skip
    why = why_inconclusive('The agent at [2] skipped a documentation lookup.', [copied], 5, _prompt())
    assert 'repeats the schema' in (why or '')


def test_an_echoed_verdict_is_inconclusive_in_the_result_and_the_report() -> None:
    record = openai_record()
    result = asyncio.run(Hallucination().judge(record, render_transcript(record), ScriptedJudge(lambda p, n: ECHO).model()))
    assert result.status == 'inconclusive' and result.passed is None and result.score is None
    assert 'copied' in (result.error or '') and result.raw_output is not None and 'Two to five' in result.raw_output
    [report] = asyncio.run(
        judge_records([record], JudgeRunOptions([Hallucination()], ScriptedJudge(lambda p, n: ECHO).model()), run_id='r')
    )
    assert report.inconclusive == ['hallucination']
    assert report.overall_score is None and not report.errors and 'hallucination' not in report.category_scores


def _varied(prompt: str, n: int) -> dict[str, Any]:
    return {'reasoning': f'Call {n}: the answer at [5] matches the tool result at [4] on this record.', 'issues': []}


def test_the_same_reasoning_on_every_record_is_inconclusive(tmp_path: Path) -> None:
    records = [openai_record(f'r{i}', tool_result=f'Depends() declares dependency number {i}.') for i in range(3)]
    same = ScriptedJudge(lambda p, n: {'reasoning': 'Depends() from the tool output at [3] answers it.', 'issues': []})
    reports = asyncio.run(judge_records(records, JudgeRunOptions([Hallucination()], same.model()), run_id='s', run_dir=tmp_path))
    assert all(r.inconclusive == ['hallucination'] for r in reports)
    assert all('same reasoning on all 3 records' in (r.judges['hallucination'].error or '') for r in reports)
    written = [json.loads(p.read_text()) for p in tmp_path.rglob('r*.json')]
    assert len(written) == 3 and all(w['judges']['hallucination']['status'] == 'inconclusive' for w in written)
    varied = asyncio.run(judge_records(records, JudgeRunOptions([Hallucination()], ScriptedJudge(_varied).model()), run_id='v'))
    assert all(r.judges['hallucination'].status == 'ok' for r in varied)


def test_same_text_rule_needs_three_different_transcripts() -> None:
    assert not same_text_everywhere([('a', 'x'), ('b', 'x')])
    assert not same_text_everywhere([('a', 'x'), ('a', 'x'), ('a', 'x')])  # repeats of one record
    assert same_text_everywhere([('a', 'x'), ('b', 'X '), ('c', 'x')])
    assert not same_text_everywhere([('a', 'x'), ('b', 'x'), ('c', 'y')])


@pytest.mark.parametrize('n', [1])
def test_cli_counts_inconclusive_verdicts_and_keeps_them_out_of_the_pass_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    scripted = ScriptedJudge(lambda p, k: ECHO)
    monkeypatch.setattr(judging_run, 'resolve_model', lambda *a, **k: scripted.model())

    async def fine(*a: object, **k: object) -> None:
        return None

    monkeypatch.setattr(judging_run, 'preflight', fine)
    dataset = tmp_path / 'one.jsonl'
    dataset.write_text(openai_record().model_dump_json() + '\n')
    result = CliRunner().invoke(
        judge_cli.app, ['--dataset', str(dataset), '--evaluators', 'hallucination', '--out', str(tmp_path), '--run-id', 'x']
    )
    assert result.exit_code == 0, result.output
    assert f'{n} verdict(s) inconclusive' in result.output
    summary = json.loads((tmp_path / 'x' / 'summary.json').read_text())
    assert summary['per_judge']['hallucination']['inconclusive'] == 1
    assert summary['per_judge']['hallucination']['pass_rate'] is None
    assert len(summary['inconclusive']) == 1
