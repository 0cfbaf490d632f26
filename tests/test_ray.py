"""Judge runs on Ray (`sensei_eval.judging.ray_engine`, `judge --ray`) on a local Ray of 2 CPUs, started once
for this module: a run on Ray writes the run folder a local run writes, a re-run is answered from
the cache, and a worker killed mid-run loses no report and doubles none."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sensei_eval.core.reports import RunFacts
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.run_folder import RunFolder
from sensei_eval.judging.runner import judge_stream
from tests.helpers import openai_record
from tests.ray_helpers import KILL_MARKER_ENV, fake_model

ray = pytest.importorskip('ray')

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module', autouse=True)
def local_ray() -> Iterator[None]:
    """One local Ray for the module (starting one costs seconds): 2 CPUs, the repository importable
    on the workers (the test helpers' models are built there by name)."""
    ray.init(
        num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False,
        runtime_env={'env_vars': {'PYTHONPATH': str(ROOT)}},
    )  # fmt: skip
    try:
        yield
    finally:
        ray.shutdown()


def _records(n: int) -> list[Any]:
    return [openai_record(f'r{i}', tool_result=f'Depends() declares dependency number {i}.') for i in range(n)]


def _timeless(data: dict[str, Any]) -> dict[str, Any]:
    """A report or summary without what differs between two runs of the same judging: times, run id."""
    drop = {'evaluated_at', 'run_id', 'latency_s', 'started_at', 'finished_at', 'duration_s', 'wall_s'}
    return {k: _timeless(v) if isinstance(v, dict) else v for k, v in data.items() if k not in drop}


def _reports(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.name: _timeless(json.loads(p.read_text())) for p in sorted((folder / 'records').glob('*.json'))}


def _ray_run(records: list[Any], out: Path, factory: str, cache: JudgeCache | None = None, **kw: Any) -> Any:
    from sensei_eval.judging.ray_engine import ModelSpec, RayCluster, judge_on_ray

    options = JudgeRunOptions(make_judges(['hallucination', 'completeness', 'checks']), concurrency=4, cache=cache)
    cluster = RayCluster(workers=2, cpus_per_worker=0.5, **kw)
    return asyncio.run(judge_on_ray(iter(records), options, ModelSpec(factory=factory), run_dir=out, cluster=cluster))


def test_a_run_on_ray_writes_the_reports_of_a_local_run(tmp_path: Path) -> None:
    records = _records(12)
    judges = make_judges(['hallucination', 'completeness', 'checks'])
    local = asyncio.run(judge_stream(iter(records), JudgeRunOptions(judges, fake_model()), run_dir=tmp_path / 'local' / 'run'))
    on_ray, model = _ray_run(records, tmp_path / 'ray' / 'run', 'tests.ray_helpers:fake_model')
    assert model is not None and model.name == 'function:ray-fake'
    assert on_ray.reports == local.reports == 12
    local_reports, ray_reports = _reports(tmp_path / 'local' / 'run'), _reports(tmp_path / 'ray' / 'run')
    assert len(ray_reports) == 12 and ray_reports == local_reports
    statuses = {r['judges']['hallucination']['status'] for r in ray_reports.values()}
    assert statuses == {'ok'}  # real verdicts came back, not "not judged" errors
    assert on_ray.tally.summary('run', RunFacts(started_at=_now())).model_dump(exclude={'started_at', 'finished_at'}) == (
        local.tally.summary('run', RunFacts(started_at=_now())).model_dump(exclude={'started_at', 'finished_at'})
    )


def test_a_rerun_on_ray_is_answered_from_the_drivers_cache(tmp_path: Path) -> None:
    records = _records(6)
    cache = JudgeCache(tmp_path / 'c')
    first, _ = _ray_run(records[:3], tmp_path / 'out' / 'run', 'tests.ray_helpers:fake_model', cache=cache)
    assert cache.hits == 0 and first.reports == 3
    # the "interrupted" run started again on the whole dataset with the same run folder: the first
    # three records' model calls are not made again (no worker is asked), the rest are
    again, _ = _ray_run(records, tmp_path / 'out' / 'run', 'tests.ray_helpers:fake_model', cache=cache)
    assert cache.hits == 3 * 2  # 3 records × 2 model judges (cached one by one, judged in one fused call)
    summary = again.tally.summary('run', RunFacts(started_at=_now()))
    assert summary.records_judged == 6 and summary.model_requests == 3  # one fused call per record
    assert len(list((tmp_path / 'out' / 'run' / 'records').glob('*.json'))) == 6


def test_a_killed_worker_loses_no_report_and_doubles_none(tmp_path: Path) -> None:
    marker = tmp_path / 'killed'
    records = _records(16)
    run, _ = _ray_run(
        records, tmp_path / 'run', 'tests.ray_helpers:killing_model',
        runtime_env={'env_vars': {KILL_MARKER_ENV: str(marker), 'PYTHONPATH': str(ROOT)}},
    )  # fmt: skip
    assert marker.exists(), 'no worker was killed: the test did not test anything'
    reports = RunFolder(tmp_path / 'run').load_reports()
    assert sorted(r.query_id for r in reports) == sorted(r.query_id for r in records)  # each once
    assert run.reports == 16
    for report in reports:  # the killed worker's records were judged again, not reported lost
        assert {r.status for r in report.judges.values()} == {'ok'}, report.errors


def test_judge_cli_with_ray_ends_like_a_local_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sensei_eval.cli.judge import app

    data = tmp_path / 'd.jsonl'
    data.write_text(''.join(r.model_dump_json() + '\n' for r in _records(5)) + '{"broken": \n')
    # pydantic-ai's deterministic `test` model: resolved by name on the workers and here alike
    common = ['--dataset', str(data), '--judges', 'hallucination,checks', '--model', 'test', '--run-id', 'r', '--no-cache']
    runner = CliRunner()
    local = runner.invoke(app, [*common, '--out', str(tmp_path / 'local')])
    on_ray = runner.invoke(app, [*common, '--out', str(tmp_path / 'ray'), '--ray', '--ray-workers', '2'])
    assert on_ray.exit_code == local.exit_code == 1, on_ray.output  # the bad line: exit 1 in both
    assert _reports(tmp_path / 'ray' / 'r') == _reports(tmp_path / 'local' / 'r') and len(_reports(tmp_path / 'ray' / 'r')) == 5
    summaries = [_timeless(json.loads((tmp_path / d / 'r' / 'summary.json').read_text())) for d in ('local', 'ray')]
    assert summaries[0] == summaries[1]
    assert 'could not be loaded' in on_ray.output
    unusable = runner.invoke(app, [*common[:-1], '--out', str(tmp_path / 'x'), '--ray', '--model', 'gpt-5.2'])
    assert unusable.exit_code == 2 and 'no provider prefix' in unusable.output


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 1, 1, tzinfo=UTC)


def test_without_the_extra_the_error_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from sensei_eval.core.extras import MissingExtraError
    from sensei_eval.judging.ray_engine import ModelSpec, RayJudging

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == 'ray' or name.startswith('ray.'):
            raise ImportError(f'No module named {name!r}', name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, '__import__', no_ray)
    with pytest.raises(MissingExtraError) as e:
        RayJudging(JudgeRunOptions(make_judges(['hallucination'])), ModelSpec()).start()
    assert str(e.value) == 'sensei-eval: judging on Ray (judge --ray) needs the "ray" extra: pip install "sensei-eval[ray]"'
    assert os.environ.get(KILL_MARKER_ENV) is None
