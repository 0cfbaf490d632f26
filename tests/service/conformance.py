"""A scripted judge model whose verdicts depend only on what it is asked, for the conformance tests.

The same record must get the same verdict whichever surface judged it (`sensei-eval judge`, the
service API, the dashboard's "Judge run"), so the scripted answer is a pure function of the prompt:
never of call order or concurrency. Per record (the prompt's text before the task section, which every
judge of a record shares) one in four gets no verdict from any LLM judge (an empty reasoning: the
verdict is inconclusive, so only the checks judge that run); otherwise each failure mode passes or
fails by a hash of record and mode, with a reasoning of its own per transcript (the same text on
every record would itself be inconclusive) that cites a step. Failing answers carry an issue in their
mode's own issue model.

`judge_dataset` judges a dataset as `sensei-eval judge` does (`judging.run.run_dataset`) on that model and
returns the per-record reports it wrote.
"""

from __future__ import annotations

import hashlib
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from sensei_eval.core.reports import RecordReport
from sensei_eval.judging.run import RunSpec, run_dataset
from sensei_eval.judging.run_folder import decode_query_id
from tests.helpers import ScriptedJudge

__all__ = ('ISSUES', 'conformance_judge', 'judge_dataset', 'record_key', 'verdict_facts')

_TASK = re.compile(r'## Your task: judge `([a-z_]+)`')
# One issue per failure mode the scripted model may report (the mvp judges and the rest of the table).
ISSUES: dict[str, dict[str, Any]] = {
    'tool_selection': {'steps': [1], 'missed_tools': ['lookup'], 'unnecessary_tools': [], 'reasoning': 'skipped a lookup'},
    'hallucination': {
        'steps': [1],
        'hallucinated_claim': 'the answer states more than the tool returned',
        'what_tools_actually_said': 'less than that',
        'severity': 'major',
    },
    'completeness': {'steps': [1], 'missed_aspects': ['the second part of the question'], 'reasoning': 'half answered'},
}


def record_key(prompt: str) -> str:
    """What a prompt says about the record alone: everything before its task section."""
    match = _TASK.search(prompt)
    head = prompt[: match.start()] if match else prompt
    return hashlib.sha256(head.encode()).hexdigest()


def _answer(prompt: str, _n: int) -> dict[str, Any]:
    match = _TASK.search(prompt)
    mode = match.group(1) if match else 'unknown'
    key = record_key(prompt)
    if int(key[:8], 16) % 4 == 0:  # this record: no LLM judge gives a verdict
        return {'reasoning': '', 'issues': []}
    h = int(hashlib.sha256(f'{key}|{mode}'.encode()).hexdigest()[:8], 16)
    if h % 3 == 0 and mode in ISSUES:
        return {'reasoning': f'Step [1] falls short on {mode} (case {key[:10]}).', 'issues': [ISSUES[mode]]}
    return {'reasoning': f'Step [1] holds up for {mode}: the answer follows the tool output (case {key[:10]}).', 'issues': []}


def conformance_judge() -> ScriptedJudge:
    """A fresh scripted judge (it records its calls) answering as described above."""
    return ScriptedJudge(_answer)


def judge_dataset(dataset: Path, out: Path, judge: ScriptedJudge, judges: str | None = None) -> dict[str, RecordReport]:
    """`dataset` judged as `sensei-eval judge --dataset <dataset>` judges it (`judging.run.run_dataset`), with
    `judge` as the model and `judges` (default: the command's); query id → report."""
    spec = RunSpec(datasets=[dataset], out_dir=out, run_id='cli', cache=False, model=judge.model())
    if judges is not None:
        spec = replace(spec, judges=judges.split(','))
    # in a thread of its own: the run has its own event loop, and a caller (Playwright's sync API) may have one
    # running in this thread
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(run_dataset, spec).result()
    assert run.summary.exit_code in (0, 1), run.summary  # 1: some record failed a judge (a verdict, not a crash)
    reports: dict[str, RecordReport] = {}
    for path in sorted((out / 'cli' / 'records').glob('*.json')):
        report = RecordReport.model_validate(json.loads(path.read_text()))
        assert decode_query_id(path.stem) is not None
        reports[report.query_id] = report
    assert reports, run.summary
    return reports


def verdict_facts(report: RecordReport | dict[str, Any]) -> dict[str, Any]:
    """What must agree across surfaces: per judge its status, pass/fail, score and issues; the overall score,
    the failure modes and the primary one."""
    r = report if isinstance(report, RecordReport) else RecordReport.model_validate(report)
    return {
        'overall_score': r.overall_score,
        'failure_modes': r.failure_modes,
        'primary_failure_mode': r.primary_failure_mode,
        'judges': {name: (j.status, j.passed, j.score, j.mode_scores, len(j.issues)) for name, j in sorted(r.judges.items())},
        'skipped': sorted(r.skipped),
    }
