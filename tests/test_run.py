"""Runner, cache, reports and the judge CLI, with scripted judges."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.core.evaluator_outputs import to_pydantic_evals_report
from sensei_eval.core.reports import RecordReport, RunFacts, RunSummary, build_report
from sensei_eval.evaluators.registry import DEFAULT_JUDGES, make_judges
from sensei_eval.judging import run as judging_run
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.run_folder import RunFolder, load_reports, to_dataframe
from sensei_eval.judging.runner import judge_records

from .helpers import ScriptedJudge, about, no_issues, openai_record


def _hallucinates(prompt: str, n: int) -> dict[str, Any]:
    if '## Your task: judge `hallucination`' in prompt and 'retry_policy' in prompt:
        return {
            'reasoning': '[5] names an API absent from [4].',
            'issues': [
                {
                    'steps': [5],
                    'hallucinated_claim': 'retry_policy',
                    'what_tools_actually_said': 'nothing',
                    'severity': 'critical',
                }
            ],
        }
    if '## Your task: judge `completeness`' in prompt and 'BROKEN' in prompt:
        return 'no json here'
    return {'reasoning': f'fine ({about(prompt)})', 'issues': []}


def test_cache_hit_makes_no_model_call(tmp_path: Path) -> None:
    scripted = ScriptedJudge(no_issues)
    records = [openai_record('a'), openai_record('b')]
    cache = JudgeCache(tmp_path / 'c')
    first = asyncio.run(judge_records(records, JudgeRunOptions(make_judges(['mvp']), scripted.model(), cache=cache), run_id='r1'))
    assert len(scripted.calls) == 2 and cache.hits == 0  # the three mvp judges fused: one call per record
    second = asyncio.run(
        judge_records(
            records, JudgeRunOptions(make_judges(['mvp']), scripted.model(), cache=JudgeCache(tmp_path / 'c')), run_id='r2'
        )
    )
    assert len(scripted.calls) == 2  # nothing new asked
    assert all(r.cached for rep in second for r in rep.judges.values())
    assert [r.overall_score for r in first] == [r.overall_score for r in second]
    # a transcript change is a cache miss for that record only
    changed = [openai_record('a', tool_result='Depends() declares a dependency. Changed.'), openai_record('b')]
    asyncio.run(
        judge_records(
            changed, JudgeRunOptions(make_judges(['mvp']), scripted.model(), cache=JudgeCache(tmp_path / 'c')), run_id='r3'
        )
    )
    assert len(scripted.calls) == 3


def test_errors_are_not_cached(tmp_path: Path) -> None:
    scripted = ScriptedJudge(lambda p, n: 'no json')
    for _ in range(2):
        asyncio.run(
            judge_records(
                [openai_record()],
                JudgeRunOptions(make_judges(['completeness']), scripted.model(), cache=JudgeCache(tmp_path)),
                run_id='r',
            )
        )
    assert len(scripted.calls) == 2 * 3  # 1 try + 2 output retries, twice


def test_scores_summary_and_errored_judge(tmp_path: Path) -> None:
    record = openai_record(answer='Use `Client.retry_policy`. BROKEN')
    [report] = asyncio.run(
        judge_records(
            [record], JudgeRunOptions(make_judges(['mvp']), ScriptedJudge(_hallucinates).model()), run_id='r', run_dir=tmp_path
        )
    )
    assert report.judges['completeness'].status == 'error'
    assert report.judges['completeness'].score is None
    assert report.errors and report.errors[0].startswith('completeness:')
    assert report.failure_modes == ['hallucination']
    assert report.primary_failure_mode == 'hallucination'
    assert report.issues_of('hallucination')[0].severity == 'critical'
    # output = hallucination only (completeness errored, so it is left out, not counted as 0)
    assert report.category_scores == {'tool_usage': 1.0, 'output': 0.0}
    # a critical hallucination scores its mode 0: a run an LLM judge failed, low in the model-failed band
    # [0.25, 0.5) (`core.verdicts`): 0.25 + 0.25 * (1 - 0.8 * (1 - 0))
    assert report.overall_score == pytest.approx(0.3)
    on_disk = RecordReport.model_validate_json((tmp_path / 'records' / 'r1.json').read_text())
    assert on_disk == report


def test_overall_is_none_when_every_judge_errored() -> None:
    report = build_report(openai_record(), [], run_id='x')
    assert report.overall_score is None and report.primary_failure_mode is None


def test_dataframe_and_pydantic_evals_report(tmp_path: Path) -> None:
    records = [openai_record('a', answer='Use `Client.retry_policy`. BROKEN'), openai_record('b')]
    asyncio.run(
        judge_records(
            records, JudgeRunOptions(make_judges(['mvp']), ScriptedJudge(_hallucinates).model()), run_id='r', run_dir=tmp_path
        )
    )
    df = to_dataframe(tmp_path)
    assert len(df) == 6
    row = df[(df.query_id == 'a') & (df.judge == 'completeness')].iloc[0]
    assert row.status == 'error' and row.score != row.score  # NaN, never 0
    pe = to_pydantic_evals_report(load_reports(tmp_path))
    case_a = next(c for c in pe.cases if c.name == 'a')
    assert [f.name for f in case_a.evaluator_failures] == ['completeness']
    assert case_a.assertions['hallucination'].value is False


def test_query_ids_with_unsafe_characters_get_distinct_files(tmp_path: Path) -> None:
    records = [openai_record('team/a'), openai_record('team_a')]
    asyncio.run(
        judge_records(
            records,
            JudgeRunOptions(make_judges(['tool_selection']), ScriptedJudge(no_issues).model()),
            run_id='r',
            run_dir=tmp_path,
        )
    )
    assert len(list((tmp_path / 'records').glob('*.json'))) == 2


def test_truncation_goes_into_the_report(tmp_path: Path) -> None:
    record = openai_record(tool_result='x' * 20_000)
    scripted = ScriptedJudge(no_issues)
    [report] = asyncio.run(
        judge_records([record], JudgeRunOptions(make_judges(['tool_selection']), scripted.model(budget=800)), run_id='r')
    )
    assert report.truncation is not None and report.truncation.steps_cut == [4]
    assert report.judges['tool_selection'].truncation == report.truncation
    assert 'tokens dropped to fit the budget' in str(scripted.calls[0])


# ---------------------------------------------------------------------------------------------------
# CLI


def _dataset(tmp_path: Path, extra_lines: list[str] | None = None) -> Path:
    lines = [
        openai_record('good-1').model_dump_json(),
        openai_record('good-2', answer='Use `Client.retry_policy`.').model_dump_json(),
    ]
    path = tmp_path / 'd.jsonl'
    path.write_text('\n'.join(lines + (extra_lines or [])) + '\n')
    return path


@pytest.fixture
def scripted_cli(monkeypatch: pytest.MonkeyPatch) -> ScriptedJudge:
    scripted = ScriptedJudge(_hallucinates)
    monkeypatch.setattr(judging_run, 'resolve_model', lambda *a, **k: scripted.model())
    return scripted


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(judge_cli.app, list(args))


def test_cli_clean_run_exits_0_and_writes_a_report_per_record(tmp_path: Path, scripted_cli: ScriptedJudge) -> None:
    result = _invoke('--dataset', str(_dataset(tmp_path)), '--out', str(tmp_path / 'out'), '--run-id', 'run1')
    assert result.exit_code == 0, result.output
    run = tmp_path / 'out' / 'run1'
    assert sorted(p.name for p in run.glob('*.json')) == ['summary.json']
    assert sorted(p.name for p in (run / 'records').glob('*.json')) == ['good-1.json', 'good-2.json']
    summary = json.loads((run / 'summary.json').read_text())
    assert summary['records_judged'] == 2 and summary['exit_code'] == 0
    # the default is the core LLM judges plus the model-free checks
    assert {'tool_selection', 'tool_parameters', 'hallucination', 'completeness', 'citation_check'} <= summary['judges'].keys()
    assert summary['model_requests'] == 2  # the 5 core judges fused: one call per record (the records have instructions)
    report = json.loads((run / 'records' / 'good-2.json').read_text())
    assert 'hallucination' in report['failure_modes']
    # a re-run is served from the cache
    again = _invoke('--dataset', str(_dataset(tmp_path)), '--out', str(tmp_path / 'out'), '--run-id', 'run2')
    assert again.exit_code == 0
    rerun = json.loads((tmp_path / 'out' / 'run2' / 'summary.json').read_text())
    assert rerun['model_requests'] == 0 and rerun['cache_hits'] >= 10
    assert len(scripted_cli.calls) == 2


def test_cli_summary_is_the_library_summary(tmp_path: Path, scripted_cli: ScriptedJudge) -> None:
    """`summary.json` is exactly `RunSummary.build` over the run folder's reports (run times aside)."""
    line = openai_record('broken', answer='BROKEN').model_dump_json()
    result = _invoke('--dataset', str(_dataset(tmp_path, [line])), '--out', str(tmp_path / 'o'), '--run-id', 'r', '--no-cache')
    assert result.exit_code == 1
    folder = RunFolder(tmp_path / 'o' / 'r')
    written = folder.load_summary()
    assert written is not None
    built = RunSummary.build(
        'r',
        folder.load_reports(),
        make_judges(DEFAULT_JUDGES),
        RunFacts(
            started_at=written.started_at,
            finished_at=written.finished_at,
            model=written.model,
            datasets=[tmp_path / 'd.jsonl'],
            records_loaded=3,
            profile='default',
        ),
    )
    assert built == written
    assert built.exit_code == 1 and built.per_judge['completeness'].errors == 1
    assert json.loads(folder.summary_path.read_text())['per_judge']['completeness']['errors'] == 1


def test_cli_bad_record_exits_1_and_judges_the_rest(tmp_path: Path, scripted_cli: ScriptedJudge) -> None:
    bad = json.dumps({'query_id': 'bad', 'messages': [{'role': 'robot', 'content': 'hi'}]})
    data = _dataset(tmp_path, [bad])
    result = _invoke(
        '--dataset', str(data), '--out', str(tmp_path / 'out'), '--run-id', 'r', '--query-id', 'good-1', '--query-id', 'nope'
    )
    assert result.exit_code == 1
    assert f'{data}:3' in result.output and 'messages[0].role' in result.output
    assert "'nope' not found" in result.output
    assert (tmp_path / 'out' / 'r' / 'records' / 'good-1.json').exists()
    assert not (tmp_path / 'out' / 'r' / 'records' / 'good-2.json').exists()  # filtered by --query-id


def test_cli_judge_error_exits_1(tmp_path: Path, scripted_cli: ScriptedJudge) -> None:
    line = openai_record('broken', answer='BROKEN').model_dump_json()
    result = _invoke('--dataset', str(_dataset(tmp_path, [line])), '--out', str(tmp_path / 'o'), '--run-id', 'r', '--no-cache')
    assert result.exit_code == 1
    assert 'broken: completeness: invalid output' in result.output
    assert len(list((tmp_path / 'o' / 'r' / 'records').glob('*.json'))) == 3
    assert (tmp_path / 'o' / 'r' / 'summary.json').is_file()


def test_cli_usage_errors_exit_2(tmp_path: Path, scripted_cli: ScriptedJudge) -> None:
    assert _invoke('--evaluators', 'nonsense', '--dataset', str(_dataset(tmp_path))).exit_code == 2
    assert _invoke('--dataset', str(tmp_path / 'missing.jsonl')).exit_code == 2
    assert _invoke('--repeat', '0').exit_code == 2


def test_cli_repeat_writes_one_report_per_repeat(tmp_path: Path, scripted_cli: ScriptedJudge) -> None:
    result = _invoke(
        '--dataset',
        str(_dataset(tmp_path)),
        '--out',
        str(tmp_path / 'o'),
        '--run-id',
        'r',
        '--repeat',
        '2',
        '--evaluators',
        'tool_selection',
    )
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in (tmp_path / 'o' / 'r' / 'records').glob('*.json'))
    assert names == ['good-1.json', 'good-1.r2.json', 'good-2.json', 'good-2.r2.json']
    assert len(scripted_cli.calls) == 4  # repeats are separate cache entries


def test_cli_list(scripted_cli: ScriptedJudge) -> None:
    result = _invoke('--list')
    assert result.exit_code == 0
    for name in ('tool_selection', 'hallucination', 'completeness'):
        assert name in result.output


def test_a_whole_run_from_the_library_is_the_commands_run(tmp_path: Path) -> None:
    """`sensei_eval.run_dataset(RunSpec(...))` is what `sensei-eval judge` runs: a run folder, its summary, the
    core LLM judges fused into one call per record, and a second run answered from the cache."""
    import sensei_eval

    scripted = ScriptedJudge(_hallucinates)
    spec = sensei_eval.RunSpec(
        datasets=[_dataset(tmp_path)], model=scripted.model(), out_dir=tmp_path / 'out', run_id='lib1', cache=True
    )
    run = sensei_eval.run_dataset(spec)
    assert run.reports == 2 and run.folder.path == tmp_path / 'out' / 'lib1'
    assert run.summary.records_judged == 2 and run.summary.exit_code == 0
    assert run.summary.model_requests == 2  # one fused call per record
    saved = json.loads((tmp_path / 'out' / 'lib1' / 'summary.json').read_text())
    assert saved['model_requests'] == 2 and saved['records_judged'] == 2
    report = json.loads((tmp_path / 'out' / 'lib1' / 'records' / 'good-2.json').read_text())
    assert 'hallucination' in report['failure_modes']
    again = sensei_eval.run_dataset(dataclasses.replace(spec, run_id='lib2'))
    assert again.summary.model_requests == 0 and again.summary.cache_hits >= 10
