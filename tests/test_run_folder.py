"""The run folder (`RunFolder`), the library-built `RunSummary`, and the validator's independence from the optimizer."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import sensei_eval
from sensei_eval.core.reports import RunFacts, RunSummary
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.run_folder import RunFolder, RunFolderError, load_reports, new_run_id
from sensei_eval.judging.runner import judge_records

from .helpers import ScriptedJudge, no_issues, openai_record

VALIDATE = Path(sensei_eval.__file__).parent / 'validate'


def _judged(folder: RunFolder | None = None) -> list[sensei_eval.RecordReport]:
    records = [openai_record('a'), openai_record('b/c'), openai_record('CON')]
    judges = make_judges(['mvp', 'checks'])
    return asyncio.run(
        judge_records(records, JudgeRunOptions(judges, ScriptedJudge(no_issues).model()), run_id='r', run_dir=folder)
    )


def test_run_folder_round_trip(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path / 'out')
    assert folder.path.parent == tmp_path / 'out' and folder.path.is_dir()
    assert len(folder.run_id.split('-')) == 3 and new_run_id() != new_run_id()
    reports = _judged(folder)  # the runner writes each report through the folder
    summary = RunSummary.build(folder.run_id, reports, make_judges(['mvp', 'checks']), RunFacts(started_at=datetime.now(UTC)))
    folder.write_summary(summary)
    assert sorted(p.name for p in folder.path.iterdir()) == ['records', 'summary.json']
    assert sorted(p.name for p in folder.report_paths()) == ['%43ON.json', 'a.json', 'b%2Fc.json']
    loaded = folder.load()
    assert loaded.problems == []
    assert sorted(r.query_id for r in loaded.reports) == ['CON', 'a', 'b/c']
    assert {r.query_id: r for r in loaded.reports} == {r.query_id: r for r in reports}
    assert folder.load_summary() == summary
    assert load_reports(folder.path) == folder.load_reports()  # the old entry point reads the same


def test_corrupt_report_is_located_and_the_rest_still_load(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, 'r')
    _judged(folder)
    (folder.report_path('a')).write_text('{"query_id": "a", "run_id": ', encoding='utf-8')
    (folder.report_path('zz')).write_text('{"query_id": "zz"}', encoding='utf-8')
    loaded = folder.load()
    assert sorted(r.query_id for r in loaded.reports) == ['CON', 'b/c']
    assert [p.path.name for p in loaded.problems] == ['a.json', 'zz.json']
    assert 'json' in loaded.problems[0].message.lower()
    assert 'field `run_id`' in loaded.problems[1].message
    with pytest.raises(RunFolderError) as e:
        folder.load_reports()
    assert '2 unreadable report(s)' in str(e.value) and str(folder.report_path('zz')) in str(e.value)
    with pytest.raises(FileNotFoundError):
        RunFolder(tmp_path / 'missing').load()
    (tmp_path / 'empty').mkdir()
    assert RunFolder(tmp_path / 'empty').load_reports() == []
    with pytest.raises(RunFolderError, match='no judge reports'):
        RunFolder(tmp_path / 'empty').load_reports(require=True)


def test_old_layout_still_loads(tmp_path: Path) -> None:
    report = _judged()[0]
    (tmp_path / 'a.json').write_text(report.model_dump_json(), encoding='utf-8')
    (tmp_path / 'summary.json').write_text('{"run_id": "r"}', encoding='utf-8')
    (tmp_path / 'comparison.json').write_text('{}', encoding='utf-8')
    assert RunFolder(tmp_path).load_reports() == [report]


def test_summary_counts_per_judge() -> None:
    reports = _judged()
    judges = make_judges(['mvp', 'checks'])
    summary = RunSummary.build('r', reports, judges, RunFacts(started_at=datetime.now(UTC), load_errors=['x: bad']))
    assert summary.exit_code == 1 and summary.records_judged == 3 and summary.judge_errors == []
    hallucination = summary.per_judge['hallucination']
    assert (hallucination.ok, hallucination.errors, hallucination.pass_rate, hallucination.mean_score) == (3, 0, 1.0, 1.0)
    dumped = summary.model_dump(mode='json')
    assert set(dumped['per_judge']['hallucination']) == {
        'criteria_hash', 'ok', 'errors', 'inconclusive', 'smoke', 'not_applicable', 'pass_rate', 'mean_score',
        'input_tokens', 'output_tokens',
    }  # fmt: skip


def _imports_of(path: Path) -> set[str]:
    """Every module a file of `sensei_eval.validate` imports, relative imports resolved."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ['sensei_eval', 'validate'][: 2 - (node.level - 1)] if node.level else []
            module = '.'.join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f'{module}.{a.name}' for a in node.names)  # `from .. import optimize`
    return names


def test_validate_imports_nothing_from_optimize() -> None:
    for path in sorted(VALIDATE.glob('*.py')):
        bad = {n for n in _imports_of(path) if n == 'sensei_eval.optimize' or n.startswith('sensei_eval.optimize.')}
        assert not bad, f'{path.name} imports {bad}'
    code = (
        'import sys, sensei_eval.validate, sensei_eval.cli.validate, sensei_eval.validate.run\n'
        "print(sorted(m for m in sys.modules if m.startswith('sensei_eval.optimize')))"
    )
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == '[]'


def test_package_exports_load_lazily() -> None:
    code = (
        'import sys, sensei_eval\n'
        "heavy = [m for m in ('dspy', 'scipy', 'sklearn', 'fastapi', 'pandas', 'sensei_eval.validate') if m in sys.modules]\n"
        'print(heavy)\n'
        'for name in sensei_eval.__all__: getattr(sensei_eval, name)\n'
        "print('ok')"
    )
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ['[]', 'ok']
    with pytest.raises(AttributeError):
        sensei_eval.no_such_name  # noqa: B018
