"""A judge run over datasets, from files to a run folder: `run_dataset`, what `sensei-eval judge` calls.

The command line only parses flags and prints; everything a run decides is here, so a script, a test or a
notebook runs exactly what the command runs:

1. **usage** (`RunSpec` checked before anything is read or started): the judges and groups named
   (`evaluators.registry.make_judges`), the `fuse` groups, the agent profile, the datasets (regular files),
   the run id and the dataset format; a mistake is a `RunUsageError` (the command's exit code 2);
2. **records**: the datasets streamed (`core.datasets.DatasetStream`), read up to the first record to judge;
   none at all is a `NothingToJudgeError` (exit code 1);
3. **the model**: resolved and checked with one request (`models.judge_model.open_judge_model`; none named:
   the checks judge alone and each LLM judge is skipped with how to name a model), or held by Ray workers
   (`ray`, `judging.ray_engine`), or answering through the Batch API (`batch`, `judging.batch`); with a model,
   the LLM judges are fused by the run's rule (`JudgeRunOptions.fused`: one call per record by default);
4. **the run**: the run folder created (`judging.run_folder.RunFolder`), the records judged as a stream
   (`judging.runner.judge_stream`, each record by the record engine, `judging.record`), the cache read and
   written (`judging.cache.JudgeCache`, unless `cache=False`);
5. **the summary**: `summary.json` written with the run's facts (model, datasets, load errors, cache hits,
   profile) and returned with the run (`DatasetRun`); its `exit_code` is the command's.

Ctrl-C (`KeyboardInterrupt`) ends a run with `RunInterrupted`: a local run first writes `summary.json` of the
reports written so far (exit code 130); every finished judge call is in the cache, so the same run started
again with the same `run_id` finishes it (a run on Ray, or through the Batch API, resumes its calls or
batches the same way). The model (or the Ray workers) is closed either way.

What happens along the way is told through `RunHooks` (a notice, the run about to start, each judge
result, each report), never printed here.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sensei_eval.core.datasets import DatasetStream, dataset_problem
from sensei_eval.core.documents import DATASET_FORMATS, DatasetFormat
from sensei_eval.core.errors import ConfigError, SenseiError
from sensei_eval.core.records import MAX_RECORD_BYTES
from sensei_eval.core.reports import RecordReport, RunFacts, RunSummary, RunTally
from sensei_eval.data import SAMPLE_DATASET
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.registry import DEFAULT_JUDGES, FuseSpecError, UnknownJudgeError, make_judges
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions, report_judges
from sensei_eval.judging.profiles import Profile, ProfileError, resolve_profile
from sensei_eval.judging.record import JudgeEvent
from sensei_eval.judging.run_folder import RunFolder, RunIdError, validate_run_id
from sensei_eval.judging.runner import StreamedRun, judge_stream
from sensei_eval.models.judge_model import EMBEDDED_NOTICE, JudgeModel, ModelChoice, open_judge_model, preflight, resolve_model

if TYPE_CHECKING:
    from sensei_eval.judging.ray_engine import RayJudging

__all__ = (
    'DEFAULT_DATASET',
    'DatasetRun',
    'NothingToJudgeError',
    'RayOptions',
    'RunHooks',
    'RunInterrupted',
    'RunSpec',
    'RunStart',
    'RunUsageError',
    'check_run',
    'run_dataset',
)

DEFAULT_DATASET = SAMPLE_DATASET  # the packaged sample (sensei_eval/data/), found wherever the run starts


class RunUsageError(ConfigError):
    """A run asked for something that cannot be: the command's usage error (exit code 2). `problems`: one
    line each (several unreadable datasets are all named)."""

    exit_code = 2

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__('\n'.join(problems))
        self.problems = list(problems)


class NothingToJudgeError(ConfigError):
    """The datasets hold no record to judge (empty, nothing loadable, or every record filtered out): exit code 1."""

    exit_code = 1


class RunInterrupted(SenseiError):
    """Ctrl-C ended the run: `folder` holds what was written; `reports` were written before it (a local run
    wrote `summary.json` of them, exit code 130); `kind`: `local`, `ray` or `batch` (what resuming means)."""

    exit_code = 130

    def __init__(self, folder: RunFolder, kind: str, reports: int = 0, *, cached: bool = True) -> None:
        super().__init__(f'interrupted: {reports} report(s) written to {folder.path}', file=str(folder.path))
        self.folder, self.kind, self.reports, self.cached = folder, kind, reports, cached


@dataclass(frozen=True)
class RayOptions:
    """The model calls made on Ray workers (`judging.ray_engine`): the cluster at `address` (None: a local
    Ray, or `$RAY_ADDRESS`), `workers` worker processes (None: one per cluster CPU); `factory`
    (`MODULE:FUNCTION`, importable on the workers) builds their judge model instead of resolving it."""

    address: str | None = None
    workers: int | None = None
    factory: str | None = None


@dataclass(frozen=True)
class RunSpec:
    """What to judge and how: the judge command's flags as library values.

    `judges`: names and groups (`core`, `checks`, `all`, ...) or judges already built; `fuse`: fused groups
    (None: the run's rule, `JudgeRunOptions.fused`; `('none',)`: each failure mode alone); `profile`: an agent
    profile or its name or file; `model`: the judge model (None with nothing in the environment: the checks
    judge alone), or a resolved `JudgeModel` (checked with one request all the same); `cache`: read and
    write the on-disk judge cache; `batch`: the OpenAI Batch API; `ray`: the model calls on Ray workers."""

    datasets: Sequence[Path] = ()
    format: str = 'auto'
    query_ids: Sequence[str] | None = None
    max_record_bytes: int = MAX_RECORD_BYTES
    judges: Sequence[str] | Sequence[Judge] = DEFAULT_JUDGES
    fuse: Sequence[str] | None = None
    profile: str | Profile = 'default'
    model: ModelChoice | JudgeModel = field(default_factory=ModelChoice)
    concurrency: int | None = None
    repeat: int = 1
    out_dir: Path = Path('reports')
    run_id: str | None = None
    cache: bool = True
    batch: bool = False
    ray: RayOptions | None = None


@dataclass(frozen=True)
class RunStart:
    """The run about to start (`RunHooks.on_start`): its datasets, judges (fused as they will run), model
    (None: the checks alone, or the Ray workers' model) and `stream`, whose `expected(repeat)` is what a
    progress bar counts to and whose `load_errors` grow as bad lines are met."""

    datasets: Sequence[Path]
    judges: Sequence[Judge]
    model: JudgeModel | None
    stream: DatasetStream
    repeat: int


@dataclass
class RunHooks:
    """What a run tells its caller as it goes, all optional.

    `on_notice(kind, subject)`: `skipped`, `bad_record`, `input_warnings`, `not_found` (from the datasets:
    `core.datasets.DatasetStream`), `smoke` and `unreachable` (the model), `server` (the embedded model
    server's start-up lines), `batch` (a batch's state, a `BatchProgress`); `on_start(RunStart)` once the
    model is ready, before the run folder is created; `on_judge` each judge result; `on_report(report,
    path)` each report written (again when the run-wide rule rewrites one)."""

    on_notice: Callable[[str, Any], None] | None = None
    on_start: Callable[[RunStart], None] | None = None
    on_judge: Callable[[JudgeEvent], None] | None = None
    on_report: Callable[[RecordReport, Path | None], None] | None = None

    def notice(self, kind: str, subject: Any) -> None:
        if self.on_notice is not None:
            self.on_notice(kind, subject)


@dataclass
class DatasetRun:
    """A finished run: its `summary` (written to the folder's `summary.json`; `summary.exit_code` is the
    command's), its `folder`, the reports written, the judges whose verdicts the run-wide rule set aside
    (`same_text`: judge -> verdicts) and, when the "first failure" rule stopped the model calls, why
    (`stopped`)."""

    summary: RunSummary
    folder: RunFolder
    reports: int
    same_text: dict[str, int]
    stopped: str | None = None


@dataclass(frozen=True)
class _Checked:
    judges: list[Judge]
    profile: Profile
    datasets: list[Path]
    format: DatasetFormat


def check_run(spec: RunSpec) -> _Checked:
    """The judges, profile, datasets and format `spec` asks for; `RunUsageError` naming every problem of
    the first kind met (judges and fuse groups, profile, datasets, run id, format)."""
    try:
        given = spec.judges
        judges = make_judges(cast(Sequence[str], given)) if _names(given) else list(cast(Sequence[Judge], given))
        JudgeRunOptions(judges, fuse=spec.fuse).fused(model=True)  # a bad --fuse group is a usage error now
    except (UnknownJudgeError, FuseSpecError) as e:
        raise RunUsageError([str(e)]) from None
    try:
        profile = spec.profile if isinstance(spec.profile, Profile) else resolve_profile(spec.profile)
    except ProfileError as e:
        raise RunUsageError([str(e)]) from None
    datasets = list(spec.datasets) or [Path(str(DEFAULT_DATASET))]
    unreadable = [problem for p in datasets if (problem := dataset_problem(p)) is not None]
    if unreadable:
        raise RunUsageError(unreadable)
    if spec.run_id is not None:
        try:
            validate_run_id(spec.run_id)
        except RunIdError as e:
            raise RunUsageError([str(e)]) from None
    if spec.format not in DATASET_FORMATS:
        raise RunUsageError([f'--format {spec.format} is not one of {", ".join(DATASET_FORMATS)}'])
    if spec.batch and spec.ray is not None:
        raise RunUsageError(['--batch and --ray do not go together (Ray workers call the model live)'])
    return _Checked(judges, profile, datasets, cast(DatasetFormat, spec.format))


def _names(judges: Sequence[str] | Sequence[Judge]) -> bool:
    return all(isinstance(j, str) for j in judges)


def run_dataset(spec: RunSpec, hooks: RunHooks | None = None) -> DatasetRun:
    """Judge `spec.datasets` into a run folder and return the run (see the module docstring). Raises
    `RunUsageError`, `NothingToJudgeError`, `ModelSetupError` (the model cannot be used), `BatchError`
    (no Batch API there) or `RunInterrupted` (Ctrl-C), each before or instead of a summary."""
    hooks = hooks or RunHooks()
    checked = check_run(spec)
    started = datetime.now(UTC)
    stream = DatasetStream(checked.datasets, spec.query_ids, checked.format, spec.max_record_bytes, hooks.on_notice)
    if stream.peek() is None:  # the whole input read: no record to judge
        stream.finish()
        raise NothingToJudgeError(f'nothing to judge: {stream.why_nothing()}')
    options = JudgeRunOptions(
        checked.judges, concurrency=spec.concurrency, repeat=spec.repeat, profile=checked.profile, fuse=spec.fuse
    )
    options, judge_model, remote = _setup_model(options, spec, hooks)
    try:
        options = options.fused(model=judge_model is not None or remote is not None)
        start = RunStart(checked.datasets, options.judges, judge_model, stream, spec.repeat)
        if hooks.on_start is not None:
            hooks.on_start(start)
        folder = RunFolder.create(spec.out_dir, spec.run_id)
        cache = JudgeCache() if spec.cache else None
        if spec.batch and judge_model is not None:
            judge_model = _batched(judge_model, folder.path, hooks)
        options = replace(options, model=judge_model, cache=cache)
        run = _run_until_done(stream, options, folder, hooks, remote, batch=spec.batch, started=started)
    finally:
        if remote is not None:
            remote.close()
        elif judge_model is not None:
            judge_model.close()
    summary = run.tally.summary(
        folder.run_id,
        RunFacts(
            started_at=started,
            model=judge_model.name if judge_model else None,
            datasets=checked.datasets,
            records_loaded=stream.loaded,
            load_errors=stream.finish(),
            repeat=spec.repeat,
            cache_hits=cache.hits if cache else 0,
            profile=checked.profile.name,
        ),
    )
    folder.write_summary(summary)
    stopped = judge_model.connection.stopped if judge_model else None
    return DatasetRun(summary, folder, run.reports, dict(run.same_text), stopped)


def _setup_model(
    options: JudgeRunOptions, spec: RunSpec, hooks: RunHooks
) -> tuple[JudgeRunOptions, JudgeModel | None, RayJudging | None]:
    """The judge model (none when every judge is a deterministic check, or when no model is named: the
    runner then reports the LLM judges as not run; with Ray a model must be named), or the Ray workers
    that hold it."""
    if spec.ray is not None:  # the model calls on Ray workers (docs/ray.md); everything else stays here
        remote = _ray_workers(spec, options, hooks)
        return options, remote.model, remote
    if not any(j.needs_model for j in options.judges):
        return options, None, None
    if isinstance(spec.model, JudgeModel):
        judge_model: JudgeModel | None = _checked(spec.model, hooks)
    else:
        # this module's names, so a test can give its own model and check here
        judge_model = open_judge_model(spec.model, none_ok=True, resolve=resolve_model, check=preflight, on_notice=hooks.notice)
    if judge_model is None:  # none named: the runner reports the LLM judges as not run
        return options, None, None
    # the embedded server loads while the run sets up, unless the cache may answer everything (a re-run)
    now = not spec.cache or not JudgeCache().db_path.exists()
    judge_model.start_server(lambda line: hooks.notice('server', line), now=now)
    return options, judge_model, None


def _checked(judge_model: JudgeModel, hooks: RunHooks) -> JudgeModel:
    """A model the caller resolved, checked with one request like one resolved here (closed when it fails)."""
    if judge_model.embedded:
        hooks.notice('smoke', EMBEDDED_NOTICE)
    try:
        asyncio.run(preflight(judge_model))
    except BaseException:
        judge_model.close()
        raise
    return judge_model


def _ray_workers(spec: RunSpec, options: JudgeRunOptions, hooks: RunHooks) -> RayJudging:
    """Ray workers started and their judge model checked (resolved on the workers, with their keys); a
    problem is a `ModelSetupError` with a local run's exit code. This machine's model choice
    (`SENSEI_EVAL_MODEL` / `SENSEI_EVAL_BASE_URL`) is what the workers resolve."""
    from sensei_eval.judging.ray_engine import ModelSpec, RayCluster, RayJudging

    assert spec.ray is not None
    choice = spec.model if isinstance(spec.model, ModelChoice) else ModelChoice()
    model = choice.model if isinstance(choice.model, str) or choice.model is None else None
    base_url = choice.base_url
    if model is None and base_url is None:
        model = os.environ.get('SENSEI_EVAL_MODEL') or None
        base_url = os.environ.get('SENSEI_EVAL_BASE_URL') or None
    factory: dict[str, Any] = {'factory': spec.ray.factory} if spec.ray.factory else {}
    model_spec = ModelSpec(
        model=model,
        base_url=base_url,
        transcript_budget=choice.transcript_budget,
        call_timeout_s=choice.timeout,
        **factory,
    )
    session = RayJudging(options.fused(model=True), model_spec, RayCluster(address=spec.ray.address, workers=spec.ray.workers))
    session.start()
    if session.model is not None and session.model.embedded:
        hooks.notice('smoke', EMBEDDED_NOTICE)
    return session


def _batched(judge_model: JudgeModel, run_dir: Path, hooks: RunHooks) -> JudgeModel:
    """The judge model calling through the Batch API, its batches kept in the run folder; state changes told."""
    from sensei_eval.judging.batch import BatchError, batch_judge_model, check_batch_api

    try:
        asyncio.run(check_batch_api(judge_model))  # one message now, rather than one 404 per judge
        return batch_judge_model(judge_model, run_dir, on_progress=lambda p: hooks.notice('batch', p))
    except BatchError:
        judge_model.close()
        raise


def _run_until_done(
    stream: DatasetStream,
    options: JudgeRunOptions,
    folder: RunFolder,
    hooks: RunHooks,
    remote: RayJudging | None,
    *,
    batch: bool,
    started: datetime,
) -> StreamedRun:
    """The run; Ctrl-C ends it with `RunInterrupted` (after `summary.json` of what a local run wrote)."""
    workers = remote if remote is not None and remote.model is not None else None
    if workers is not None:
        options = replace(options, window=workers.window)
    try:
        stream_run = judge_stream(
            stream, options, run_dir=folder, on_judge=hooks.on_judge, on_report=hooks.on_report, remote=workers
        )
        return asyncio.run(stream_run)
    except KeyboardInterrupt:
        if remote is not None:
            raise RunInterrupted(folder, 'ray') from None
        if batch:
            raise RunInterrupted(folder, 'batch') from None
        reports = _interrupted_summary(folder, options, stream, started)
        raise RunInterrupted(folder, 'local', reports, cached=options.cache is not None) from None


def _interrupted_summary(folder: RunFolder, options: JudgeRunOptions, stream: DatasetStream, started: datetime) -> int:
    """Ctrl-C: `summary.json` of the reports written so far (exit code 130); how many there are."""
    tally = RunTally(report_judges(options.judges))
    for seq, report in enumerate(folder.load().reports):
        tally.add(report, seq)
    summary = tally.summary(
        folder.run_id,
        RunFacts(
            started_at=started,
            model=options.model.name if options.model else None,
            datasets=stream.datasets,
            records_loaded=stream.loaded,
            load_errors=list(stream.load_errors),
            repeat=options.repeat,
            cache_hits=options.cache.hits if options.cache else 0,
            profile=options.profile.name,
            exit_code=130,
        ),
    )
    folder.write_summary(summary)
    return tally.reports
