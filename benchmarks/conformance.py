"""One run, one verdict: the same records judged through every library surface, compared record by record.

The records are the packaged sample (`sensei_eval/data/sample.jsonl`) and the 50 tau2-airline runs
(`sensei_eval/data/tau2_airline/records.jsonl`); the judges are the default `core,checks`; the LLM
judges' model is a scripted pydantic-ai `FunctionModel` whose answer depends only on the record (its
first user message) and the judge (its rubric): no issue, one major finding, or an answer that does
not judge (inconclusive), so every status the verdict model has but `smoke` and `error` turns up. A fused
prompt (several failure modes in one call) gets answers of its own, per member, different from the
member's single answer: a surface that fused where the reference did not (or the reverse) disagrees.

The surfaces, each asked for each record's per-judge verdicts (status and score), its per-mode verdicts
and its overall score where the surface has them:

* `judge` — `sensei-eval judge` (typer's CliRunner, the judge model swapped for the scripted one), which
  fuses the LLM judges by default: the reference every other surface is compared with;
* `judge (cached)` — the same run twice on one cache: the second is answered from the cache alone;
* `judge --ray` — on a local Ray (workers build the scripted model by name);
* `judge --fuse none` — each failure mode in its own call: the reference of the one surface that cannot
  fuse, `pydantic-evals judges`;
* `pydantic-evals judges` — a pydantic-evals `Dataset.evaluate` with the judges as its evaluators (per
  judge: its score and `<judge>_passed`; an inconclusive answer is an evaluator failure): pydantic-evals
  calls each evaluator alone, so each judge is its own call, compared with `judge --fuse none`;
* `pydantic-evals Verdicts` — the same with `judging.evaluation.Verdicts` (every judge in one evaluator,
  fused as a run fuses): per judge its status label, and the overall score;
* `validate` — an A/A `compare_reports` of the CLI's reports against themselves: the cells it reads
  per (judge, mode) and `overall`, and no change anywhere;
* `optimizer` — `optimize.evaluate.evaluate_prompt` with an agent that replays the stored runs;
* `dspy-metric` — `optimize.metrics.JudgeMetric`: its report and the score it returns;
* `service API` and `dashboard page` — the scoring service (`benchmarks/conformance_service.py`): each
  record posted as a session and evaluated with the service's default judges, read back from the API and
  from the dashboard's session page.

Every surface judges each record under its agent profile (the record's `metadata.profile`, else `default`).

Prints per surface the share of records whose verdicts and overall score agree with their reference
(expected 100%). `tests/test_conformance.py` asserts the same.

    python benchmarks/conformance.py [--quick [--ray]] [--no-ray] [--no-service]

`--quick`: the sample and the first 10 tau2 runs, without Ray (with `--ray`: Ray on the sample only).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import RecordReport
from sensei_eval.core.verdicts import judge_status, mode_verdicts
from sensei_eval.data import SAMPLE_DATASET
from sensei_eval.evaluators.registry import DEFAULT_JUDGES
from sensei_eval.models.judge_model import JudgeModel

ROOT = Path(__file__).resolve().parents[1]
TAU2 = ROOT / 'sensei_eval' / 'data' / 'tau2_airline' / 'records.jsonl'
# what every surface judges with when none are named (the `core` LLM judges and the checks)
JUDGES = ','.join(DEFAULT_JUDGES)
MODEL_NAME = 'function:conformance'
ModelFactory = Callable[[], JudgeModel]

# One finding that validates as the issue model of every `core` mode (issue models ignore extra keys).
_FINDING = {
    'missed_tools': ['the lookup'], 'unnecessary_tools': [], 'reasoning': 'The run skipped a step it needed.',
    'hallucinated_claim': 'the answer states a fee', 'what_tools_actually_said': 'no tool result gives a fee',
    'severity': 'major', 'missed_aspects': ['the second question'], 'steps': [2],
    'tool_name': 'lookup', 'parameter': 'id', 'actual_value': '(missing)', 'suggested_value': 'the id the user gave',
    'rule': 'confirm before changing anything', 'violation': 'changed it without asking',
}  # fmt: skip
_FENCE_END = re.compile(r'</transcript>|\n-{3,}\n', re.IGNORECASE)


_FUSED = re.compile(r'## Your task: judge \d+ kinds of failure: ([^\n]+)')


def _answer_for(prompt: str) -> dict[str, Any]:
    """The scripted answer: a function of the record's first user message and the judge's rubric only,
    so every surface (whatever transcript budget or framing it uses) gets the same answer; a fused prompt
    gets one verdict per member, each a function of the record and the member's name (and unlike its
    single answer)."""
    user = re.search(r'\[\d+\] user: ([^\n]*)', prompt)
    head = user.group(1) if user else prompt[:200]
    fused = _FUSED.search(prompt)
    if fused:
        names = [n.strip().strip('`') for n in fused.group(1).split(',')]
        return {name: _verdict(f'{head}\x00fused\x00{name}') for name in names}
    return _verdict(head + '\x00' + prompt[-600:])


def _verdict(key: str) -> dict[str, Any]:
    digest = hashlib.sha256(key.encode()).hexdigest()
    kind = int(digest[:4], 16) % 5
    if kind == 4:  # an answer that does not judge: no reasoning at all
        return {'reasoning': '', 'issues': []}
    reasoning = f'Step [2] was checked against the tool results of this run ({digest[:8]}).'
    return {'reasoning': reasoning, 'issues': [dict(_FINDING)] if kind == 3 else []}


def _user_prompt(messages: list[ModelMessage]) -> str:
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    return p.content
    return ''


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(json.dumps(_answer_for(_user_prompt(messages))))])


def conformance_model() -> JudgeModel:
    """The scripted judge model (a Ray worker builds it by name: `benchmarks.conformance:conformance_model`)."""
    return JudgeModel(FunctionModel(_respond, model_name='conformance'), MODEL_NAME, 60_000)


def load_records(quick: bool = False) -> list[QueryRecord]:
    """The packaged sample plus the tau2-airline runs (the first 10 with `quick`)."""
    tau2 = load_dataset(TAU2).records
    return [*load_dataset(SAMPLE_DATASET).records, *(tau2[:10] if quick else tau2)]


# ---------------------------------------------------------------------------------------------------
# What a surface says about a record


@dataclass
class Seen:
    """What one surface says about one record: per judge (status, score), per (judge, mode) (status,
    score) and the overall score, each None where the surface does not show it."""

    judges: dict[str, tuple[str, float | None]]
    modes: dict[tuple[str, str | None], tuple[str, float | None]] | None = None
    overall: float | None = None
    has_overall: bool = False


def seen_in_report(report: RecordReport) -> Seen:
    """A report as the verdict model reads it."""
    judges = {}
    for name, result in report.judges.items():
        status = judge_status(result)
        judges[name] = (status, result.score if status in ('pass', 'fail') else None)
    modes = {k: (v.status, v.score) for k, v in mode_verdicts(report).items()}
    return Seen(judges, modes, report.overall_score, True)


def differences(reference: Seen, other: Seen) -> list[str]:
    """What `other` says differently from `reference`, on what both show."""
    out = []
    if reference.judges != other.judges:
        out.append(f'judges {reference.judges} != {other.judges}')
    if other.modes is not None and reference.modes != other.modes:
        out.append(f'modes {reference.modes} != {other.modes}')
    if other.has_overall and reference.overall != other.overall:
        out.append(f'overall {reference.overall} != {other.overall}')
    return out


@dataclass
class Surface:
    name: str
    seen: dict[str, Seen] = field(default_factory=dict)
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    against: Surface | None = None  # the reference it is compared with (None: the run's reference)


def _key(report: RecordReport) -> str:
    return report.query_id if report.repeat == 1 else f'{report.query_id}#{report.repeat}'


# ---------------------------------------------------------------------------------------------------
# The surfaces


@contextmanager
def _patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextmanager
def _environ(name: str, value: Path | None) -> Iterator[None]:
    old = os.environ.get(name)
    if value is not None:
        os.environ[name] = str(value)
    try:
        yield
    finally:
        if value is not None:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def _write_dataset(records: Sequence[QueryRecord], folder: Path) -> Path:
    """The records' own lines from the shipped files (what a user passes to `--dataset`), in one file."""
    wanted = {r.query_id for r in records}
    lines = [
        line
        for path in (Path(str(SAMPLE_DATASET)), TAU2)
        for line in path.read_text(encoding='utf-8').splitlines()
        if line.strip() and json.loads(line).get('query_id') in wanted
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / 'records.jsonl'
    path.write_text('\n'.join(lines) + '\n', encoding='utf-8')
    return path


def via_cli(
    records: Sequence[QueryRecord],
    folder: Path,
    *,
    ray: bool = False,
    judges: str = JUDGES,
    model: ModelFactory | None = None,
    extra: Sequence[str] = (),
    cache: Path | None = None,
    name: str | None = None,
) -> tuple[Surface, list[RecordReport]]:
    """`sensei-eval judge` (with `ray`: `--ray`; `extra`: more flags; `cache`: the judge cache's folder, else
    `--no-cache`), the judge model swapped for the scripted one."""
    from typer.testing import CliRunner

    from sensei_eval.cli import judge as judge_cli
    from sensei_eval.judging import run as judging_run
    from sensei_eval.judging.run_folder import RunFolder

    dataset = _write_dataset(records, folder)
    run_id = 'ray' if ray else 'cli'
    make = model or conformance_model
    args = ['--dataset', str(dataset), '--judges', judges, '--out', str(folder), '--run-id', run_id, *extra]
    args += [] if cache is not None else ['--no-cache']
    start = time.perf_counter()
    with _patched(judging_run, 'resolve_model', lambda *a, **k: make()), _environ('SENSEI_EVAL_CACHE', cache):
        if ray:
            import functools

            from sensei_eval.judging import ray_engine

            spec = functools.partial(ray_engine.ModelSpec, factory='benchmarks.conformance:conformance_model')
            with _patched(ray_engine, 'ModelSpec', spec):
                result = CliRunner().invoke(judge_cli.app, [*args, '--ray', '--ray-workers', '2'])
        else:
            result = CliRunner().invoke(judge_cli.app, args)
    surface = Surface(name or ('judge --ray' if ray else 'judge'), seconds=time.perf_counter() - start)
    if result.exit_code not in (0, 1):
        surface.problems.append(f'exit {result.exit_code}: {result.output[-2000:]}')
        return surface, []
    reports = RunFolder(folder / run_id).load_reports()
    surface.seen = {_key(r): seen_in_report(r) for r in reports}
    return surface, reports


def via_pydantic_evals(
    records: Sequence[QueryRecord], *, judges: str = JUDGES, model: ModelFactory | None = None, together: bool = False
) -> Surface:
    """A pydantic-evals `Dataset.evaluate` with the same judges on every case (the record engine each judge's
    `evaluate()` runs applies the case's agent profile, as a run does), the judges' default model scripted:
    each judge as its own evaluator, or
    (`together`) all of them in one `judging.evaluation.Verdicts`, which adds the overall score (and fuses
    the LLM judges as a run does: each judge on its own cannot)."""
    from pydantic_evals import Case, Dataset

    from sensei_eval.evaluators import base
    from sensei_eval.evaluators.registry import make_judges
    from sensei_eval.judging.evaluation import Verdicts

    made = make_judges(judges.split(','))
    dataset = Dataset[QueryRecord, QueryRecord, Any](
        name='conformance',
        cases=[Case(name=r.query_id, inputs=r) for r in records],
        evaluators=[Verdicts(made)] if together else list(made),
    )

    async def task(record: QueryRecord) -> QueryRecord:
        return record

    start = time.perf_counter()
    with _patched(base, '_default_model', (model or conformance_model)()):
        report = dataset.evaluate_sync(task, progress=False, max_concurrency=8)
    name = 'pydantic-evals Verdicts' if together else 'pydantic-evals judges'
    surface = Surface(name, seconds=time.perf_counter() - start)
    for case in report.cases:
        judges_seen: dict[str, tuple[str, float | None]] = {}
        if together:
            for label, value in case.labels.items():
                if label.endswith('_status'):
                    judge = label.removesuffix('_status')
                    score = case.scores.get(judge)
                    judged = value.value in ('pass', 'fail')
                    judges_seen[judge] = (str(value.value), float(score.value) if score and judged else None)
            overall = case.scores.get('overall')
            seen = Seen(judges_seen, overall=float(overall.value) if overall else None, has_overall=True)
        else:
            for name_, passed in case.assertions.items():
                judge = name_.removesuffix('_passed')
                score = case.scores.get(judge)
                judges_seen[judge] = ('pass' if passed.value else 'fail', float(score.value) if score else None)
            for failure in case.evaluator_failures:  # 'JudgeError: <judge>: <status>: <why>'
                found = re.match(r'(?:\w+Error: )?([^:]+): (\w+)', failure.error_message)
                judges_seen[found.group(1) if found else failure.name] = (found.group(2) if found else 'error', None)
            seen = Seen(judges_seen)
        for failure in case.evaluator_failures if together else ():
            surface.problems.append(f'{case.name}: {failure.name}: {failure.error_message}')
        surface.seen[case.name] = seen
    for failure in report.failures:
        surface.problems.append(f'{failure.name}: {failure.error_message}')
    return surface


def via_validate(reports: Sequence[RecordReport]) -> Surface:
    """An A/A `validate`: the CLI's reports on both sides. What it reads per record, and no change."""
    from sensei_eval.validate import Resampling, compare_reports
    from sensei_eval.validate.compare import OVERALL, _extract, metric_name

    start = time.perf_counter()
    comparison = compare_reports(list(reports), list(reports), resampling=Resampling(seed=0))
    obs = _extract(list(reports))
    surface = Surface('validate (A/A)', seconds=time.perf_counter() - start)
    # the gate may still fail an A/A on its error-rate rule (inconclusive verdicts count there); no metric may move
    gate = comparison.gate
    if gate.regressed or gate.improved or any(m.flips or m.fixes for m in comparison.metrics):
        surface.problems.append(f'A/A changed something: regressed {gate.regressed}, improved {gate.improved}')
    for report in reports:
        reference = seen_in_report(report)
        modes: dict[tuple[str, str | None], tuple[str, float | None]] = {}
        for (judge, mode), (status, _) in (reference.modes or {}).items():
            cell = obs.metrics.get(metric_name(judge, mode), {}).get(report.query_id, {}).get(1, {}).get(report.repeat)
            if cell is None:
                modes[(judge, mode)] = ('absent', None)
            elif cell.error:
                modes[(judge, mode)] = (status if status not in ('pass', 'fail') else 'error', None)
            else:
                modes[(judge, mode)] = ('pass' if cell.passed else 'fail' if cell.passed is False else status, cell.score)
        overall_cell = obs.metrics.get(OVERALL, {}).get(report.query_id, {}).get(1, {}).get(report.repeat)
        overall = None if overall_cell is None or overall_cell.error else overall_cell.score
        seen = Seen(reference.judges, modes, overall, has_overall=not report.errors)
        surface.seen[_key(report)] = seen
    return surface


class _Replay:
    """An agent that gives back the stored run of each query (the optimizer's evaluation, judging only)."""

    def __init__(self, records: Sequence[QueryRecord]) -> None:
        self.records = {r.query_id: r for r in records}

    async def run(self, system_prompt: str, query: Any) -> QueryRecord:
        return self.records[query.query_id]


def via_optimizer(records: Sequence[QueryRecord], *, judges: str = JUDGES, model: ModelFactory | None = None) -> Surface:
    """`optimize.evaluate.evaluate_prompt` on the stored runs: its reports and its failing modes."""
    from sensei_eval.agents.runner import Query
    from sensei_eval.evaluators.registry import make_judges
    from sensei_eval.optimize.evaluate import evaluate_prompt

    made = make_judges(judges.split(','))
    queries = [Query.from_record(r) for r in records]
    start = time.perf_counter()
    replay = _Replay(records)
    evaluation, reports = asyncio.run(evaluate_prompt('system', queries, replay, made, (model or conformance_model)()))
    surface = Surface('optimizer evaluation', seconds=time.perf_counter() - start)
    for report in reports:
        seen = seen_in_report(report)
        failing = evaluation.failing_modes.get(report.query_id, [])
        if sorted(failing) != sorted(report.failure_modes):
            surface.problems.append(f'{report.query_id}: optimizer failing modes {failing} != {report.failure_modes}')
        surface.seen[_key(report)] = seen
    return surface


def via_dspy_metric(records: Sequence[QueryRecord], *, judges: str = JUDGES, model: ModelFactory | None = None) -> Surface:
    """`optimize.metrics.JudgeMetric`: the report it judges and the score it returns (an error when not judged)."""
    from types import SimpleNamespace

    from sensei_eval.evaluators.registry import make_judges
    from sensei_eval.optimize.metrics import JudgeError, JudgeMetric

    made = make_judges(judges.split(','))
    # on_error='skip': a partly judged run scores its overall score (counted and warned about, not raised:
    # the default 'raise' makes DSPy count it as a failed example); a run no judge judged still raises
    metric = JudgeMetric(made, (model or conformance_model)(), record_adapter=lambda example, pred: pred.record, on_error='skip')
    surface = Surface('DSPy JudgeMetric')
    start = time.perf_counter()
    for record in records:
        seen = seen_in_report(metric.report(record))
        try:
            score: float | None = float(metric(None, SimpleNamespace(record=record)))
        except JudgeError:
            score = None
        seen.overall = score
        surface.seen[record.query_id] = seen
    surface.seconds = time.perf_counter() - start
    return surface


# ---------------------------------------------------------------------------------------------------
# Running and printing


def agreement(reference: Surface, other: Surface) -> tuple[int, int, list[str]]:
    """(records that agree, records compared, what differs)."""
    agree, problems = 0, list(other.problems)
    for key, seen in reference.seen.items():
        mine = other.seen.get(key)
        if mine is None:
            problems.append(f'{key}: missing')
            continue
        diff = differences(seen, mine)
        if diff:
            problems.append(f'{key}: {"; ".join(diff)}')
        else:
            agree += 1
    return agree, len(reference.seen), problems


def run_surfaces(
    records: Sequence[QueryRecord],
    folder: Path,
    *,
    ray_records: Sequence[QueryRecord] | None = None,
    judges: str = JUDGES,
    model: ModelFactory | None = None,
    service: bool = True,
) -> tuple[Surface, list[Surface]]:
    """The CLI's surface (the reference) and every other one (`judge --ray` on `ray_records`, when given;
    the service's two with `service`), each with the reference it is compared with."""
    kw: dict[str, Any] = {'judges': judges, 'model': model}
    reference, reports = via_cli(records, folder / 'cli', **kw)
    unfused, _ = via_cli(records, folder / 'unfused', extra=['--fuse', 'none'], name='judge --fuse none', **kw)
    cached = via_cached_cli(records, folder / 'cached', **kw)
    each = via_pydantic_evals(records, **kw)
    each.against = unfused
    others = [
        cached, unfused, each, via_pydantic_evals(records, together=True, **kw), via_validate(reports),
        via_optimizer(records, **kw), via_dspy_metric(records, **kw),
    ]  # fmt: skip
    unfused.against = _fused_differs(folder / 'cli' / 'cli', unfused, folder / 'unfused' / 'cli')
    if ray_records is not None:
        ray_surface, _ = via_cli(ray_records, folder / 'ray', ray=True, **kw)
        others.insert(0, ray_surface)
    if service:
        if str(ROOT) not in sys.path:  # `python benchmarks/conformance.py` finds its sibling
            sys.path.insert(0, str(ROOT))
        from benchmarks.conformance_service import via_service

        api, page, _ = via_service(records, folder / 'service', judges=judges, model=model)
        others += [api, page]
    return reference, others


def via_cached_cli(records: Sequence[QueryRecord], folder: Path, **kw: Any) -> Surface:
    """`sensei-eval judge` twice on one judge cache: the second run, which must make no model request."""
    from sensei_eval.core.reports import RunSummary

    cache = folder / 'cache'
    via_cli(records, folder / 'first', cache=cache, **kw)
    surface, _ = via_cli(records, folder / 'again', cache=cache, name='judge (cached)', **kw)
    summary = RunSummary.model_validate_json((folder / 'again' / 'cli' / 'summary.json').read_text(encoding='utf-8'))
    if summary.model_requests or (summary.cache_hits == 0 and any(s.judges for s in surface.seen.values())):
        surface.problems.append(f'the re-run made {summary.model_requests} model request(s), {summary.cache_hits} cache hit(s)')
    return surface


def _fused_differs(reference: Path, unfused: Surface, folder: Path) -> Surface:
    """`judge --fuse none` is compared with itself (it is a reference); that the default run fused is checked
    here: it made fewer model requests than the unfused one (one per record instead of one per LLM judge)."""
    from sensei_eval.core.reports import RunSummary

    fused, alone = (RunSummary.model_validate_json((p / 'summary.json').read_text(encoding='utf-8')) for p in (reference, folder))
    if alone.model_requests and fused.model_requests >= alone.model_requests:
        unfused.problems.append(f'the default run made {fused.model_requests} model request(s), unfused {alone.model_requests}')
    return unfused


def _start_ray() -> Callable[[], None]:
    import ray

    path = os.pathsep.join([str(ROOT), *(p for p in sys.path if p)])
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False,
             runtime_env={'env_vars': {'PYTHONPATH': path}})  # fmt: skip
    return ray.shutdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true', help='the sample and 10 tau2 runs, no Ray (unless --ray)')
    parser.add_argument('--no-ray', action='store_true', help='leave out judge --ray')
    parser.add_argument('--ray', action='store_true', help='with --quick: judge --ray on the sample too')
    parser.add_argument('--no-service', action='store_true', help='leave out the scoring service')
    args = parser.parse_args()
    if args.quick and not args.ray:
        args.no_ray = True  # starting a local Ray alone takes longer than the rest of the quick run
    records = load_records(args.quick)
    sample = load_dataset(SAMPLE_DATASET).records
    stop = None if args.no_ray else _start_ray()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ray_records = None if args.no_ray else (sample if args.quick else records)
            reference, others = run_surfaces(records, Path(tmp), ray_records=ray_records, service=not args.no_service)
    finally:
        if stop is not None:
            stop()
    statuses: dict[str, int] = {}
    for seen in reference.seen.values():
        for status, _ in seen.judges.values():
            statuses[status] = statuses.get(status, 0) + 1
    not_judged = sum(1 for s in reference.seen.values() if s.overall is None)
    print(f'{len(reference.seen)} records ({len(sample)} sample + tau2-airline), judges {JUDGES}, scripted model')
    print('judge verdicts in the CLI run: ' + ', '.join(f'{k} {v}' for k, v in sorted(statuses.items())))
    print(f'records not judged (no overall score): {not_judged}')
    sys.exit(1 if print_agreement(reference, others, subsets=('judge --ray',)) else 0)


def print_agreement(reference: Surface, surfaces: Sequence[Surface], *, subsets: Sequence[str] = ()) -> bool:
    """Print each surface's agreement with `reference` (a table, and its first differences); True when any
    differs. A surface named in `subsets` was run on part of the records (Ray on the sample only) and is
    compared on those."""
    print(f'{"surface":<24} {"records":>8} {"agree":>8} {"agreement":>10} {"seconds":>8}  compared with')
    print(f'{reference.name:<24} {len(reference.seen):>8} {"(ref)":>8} {"":>10} {reference.seconds:>8.1f}')
    failed = False
    for surface in surfaces:
        ref = surface.against or reference
        if surface.name in subsets and len(surface.seen) != len(ref.seen):
            ref = Surface(ref.name, {k: v for k, v in ref.seen.items() if k in surface.seen})
        agree, total, problems = agreement(ref, surface)
        share = agree / total if total else 0.0
        print(f'{surface.name:<24} {total:>8} {agree:>8} {share:>10.1%} {surface.seconds:>8.1f}  {ref.name}')
        for problem in problems[:5]:
            print(f'    {problem[:160]}')
        failed = failed or bool(problems) or agree != total
    return failed


if __name__ == '__main__':
    main()
