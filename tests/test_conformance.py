"""One run, one verdict: the packaged sample and the 50 tau2-airline runs, judged with a scripted model
through every surface (`judge`, its cached re-run, `judge --ray`, a pydantic-evals `Dataset`, an A/A
`validate`, the optimizer's evaluation, the DSPy metric, the scoring service's API and dashboard page), give
the same per-record verdicts and overall scores; each judge as its own pydantic-evals evaluator (which
cannot fuse) gives those of `judge --fuse none`.

The surfaces and the scripted model are `benchmarks/conformance.py`'s (which prints the same agreement).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from benchmarks.conformance import (
    ROOT,
    TAU2,
    Surface,
    agreement,
    load_records,
    run_surfaces,
)
from sensei_eval.core.datasets import load_dataset
from sensei_eval.data import SAMPLE_DATASET
from sensei_eval.judging import run as judging_run
from sensei_eval.models.judge_model import JudgeModel
from tests.helpers import member_prompts, user_prompt


def _assert_agree(reference: Surface, others: list[Surface]) -> None:
    for surface in others:
        ref = surface.against or reference
        if len(surface.seen) < len(ref.seen):  # a surface run on part of the records (Ray: the sample)
            ref = Surface(ref.name, {k: v for k, v in ref.seen.items() if k in surface.seen})
        agree, total, problems = agreement(ref, surface)
        assert problems == [] and agree == total > 0, (surface.name, problems[:3])


@pytest.fixture(scope='module')
def local_ray() -> Iterator[None]:
    ray = pytest.importorskip('ray')
    ray.init(
        num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False,
        runtime_env={'env_vars': {'PYTHONPATH': str(ROOT)}},
    )  # fmt: skip
    try:
        yield
    finally:
        ray.shutdown()


def test_every_surface_gives_the_same_verdicts_and_overall_scores(tmp_path: Path, local_ray: None) -> None:
    records = load_records()
    sample = load_dataset(SAMPLE_DATASET).records
    assert len(records) == len(sample) + 50
    reference, others = run_surfaces(records, tmp_path, ray_records=sample)
    assert [s.name for s in others] == [
        'judge --ray', 'judge (cached)', 'judge --fuse none', 'pydantic-evals judges', 'pydantic-evals Verdicts',
        'validate (A/A)', 'optimizer evaluation', 'DSPy JudgeMetric', 'service API', 'dashboard page',
    ]  # fmt: skip
    # the one surface that cannot fuse (pydantic-evals calls each evaluator alone) is held to the unfused run
    assert [s.name for s in others if s.against is not None] == ['judge --fuse none', 'pydantic-evals judges']
    assert len(reference.seen) == len(records)
    # the scripted model gives every status the verdict model has but smoke and error: the comparison means something
    statuses = {status for seen in reference.seen.values() for status, _ in seen.judges.values()}
    assert statuses == {'pass', 'fail', 'inconclusive'}
    assert any(seen.modes and len({m for j, m in seen.modes if j == 'reference_check'}) == 2 for seen in reference.seen.values())
    _assert_agree(reference, others)


def _never_judges(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    blank = {'reasoning': '', 'issues': []}
    members = member_prompts(user_prompt(messages))  # a fused call: the same blank answer from each member
    return ModelResponse(parts=[TextPart(json.dumps(blank if members is None else dict.fromkeys(members, blank)))])


def _not_judging() -> JudgeModel:
    return JudgeModel(FunctionModel(_never_judges, model_name='blank'), 'function:blank', 60_000)


def test_a_run_no_judge_judged_is_not_judged_on_every_surface(tmp_path: Path) -> None:
    records = load_dataset(SAMPLE_DATASET).records[:4]
    reference, others = run_surfaces(records, tmp_path, judges='mvp', model=_not_judging)
    assert {s.overall for s in reference.seen.values()} == {None}
    assert {status for s in reference.seen.values() for status, _ in s.judges.values()} == {'inconclusive'}
    _assert_agree(reference, others)
    dspy_metric = next(s for s in others if s.name == 'DSPy JudgeMetric')
    assert {s.overall for s in dspy_metric.seen.values()} == {None}  # the metric raised: no score, never 1.0


def test_the_console_shows_coverage_beside_the_score_and_not_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from sensei_eval.cli import judge as judge_cli

    monkeypatch.setattr(judging_run, 'resolve_model', lambda *a, **k: _not_judging())
    monkeypatch.chdir(tmp_path)
    args = ['--dataset', str(SAMPLE_DATASET), '--out', 'reports', '--no-cache']
    partly = CliRunner().invoke(judge_cli.app, [*args, '--judges', 'mvp,checks', '--run-id', 'p'])
    lines = partly.output.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    overall = [line for line in lines if line.startswith('overall score ')]
    assert len(overall) == 1 and 'checks only, ' in overall[0], partly.output
    header = [line.split() for line in lines if line.split()[:2] == ['judge', 'judged']]
    assert header == [['judge', 'judged', 'passed', 'score', 'inconclusive', 'errors']], partly.output
    assert any(line.startswith('judged: gave a pass/fail verdict') for line in lines)  # the legend
    assert 'next: sensei-eval view reports/p\n' in partly.output
    summary = json.loads((tmp_path / 'reports' / 'p' / 'summary.json').read_text())
    assert summary['coverage']['label'].startswith('checks only, ')

    # rows only for judges that applied: the documentation agent's checks never apply to the airline runs,
    # and are named above the table as judges that did not run
    airline = CliRunner().invoke(
        judge_cli.app, ['--dataset', str(TAU2), '--out', 'reports', '--judges', 'checks', '--run-id', 'a', '--no-cache']
    )
    rows = {line.split()[0] for line in airline.output.splitlines() if len(line.split()) == 6 and line.split()[1].isdigit()}
    assert 'reference_check' in rows and 'version_check' not in rows and 'citation_check' not in rows, airline.output
    assert 'judges (8): 4 ran; did not run: version_check, docs_tool_check, greeting_check,' in airline.output

    nothing = CliRunner().invoke(judge_cli.app, [*args, '--judges', 'mvp', '--run-id', 'n'])
    assert 'overall: not judged (no judge gave a pass/fail verdict)' in nothing.output, nothing.output
    assert json.loads((tmp_path / 'reports' / 'n' / 'summary.json').read_text())['mean_overall_score'] is None
