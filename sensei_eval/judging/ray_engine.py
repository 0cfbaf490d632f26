"""Judge runs on Ray: the model calls of a run made by workers of a Ray cluster (`judge --ray`).

The process that starts the run (the driver) does what a local run does, with the same code
(`runner.judge_stream`): it reads the datasets as a stream, renders each transcript, looks the judge
calls up in its cache, runs the checks that need no model, writes every report to the run folder and
the summary at the end. Only the model calls a record needs and the cache does not answer leave it:
all of one record in one Ray actor task (`runner.JudgeCall`s in, results out), and their results are
written to the driver's cache when they come back. Workers never touch the cache or the run folder.
So a run on Ray writes the run folder a local run writes (same reports apart from timings, same
`summary.json`, same exit code), a re-run is answered from the cache without calling the model, and
an interrupted run resumes like a local one: started again with the same `--run-id`, every call the
cache holds is not made again.

* **Workers** are Ray actors (`RayJudging.workers` of them, default: one per CPU of the cluster), each
  an asyncio actor with its own judge model and up to `concurrency` model calls in flight
  (`runner.RemoteJudgeCalls`): judging is IO-bound, so one worker process keeps many calls waiting.
  The driver sends each record to the least busy worker and keeps at most `records_per_worker` records
  in flight per worker: its memory does not grow with the dataset.
* **A lost worker** (its process or node died) is Ray's to handle: the actor is restarted
  (`max_restarts`) and the records it held are sent again (`max_task_retries`). Only such system
  failures are retried: a judge that fails returns an error result, it does not raise. A record
  whose worker is lost more often than that has its judges reported as errors ("not judged: …"),
  never as verdicts.
* **Secrets never travel**: workers get the judge model's configuration (`ModelSpec`: model string,
  base URL, settings, transcript budget), never an API key; each worker resolves the model with its
  own environment (`OPENAI_API_KEY`, … set on the cluster, or in the job's `runtime_env`). Each worker
  checks its model once (`models.preflight`) before the run starts, and the driver takes the model's
  name, settings and transcript budget (what the cache key and the reports need) from the workers.

Ray is imported only here, and only when a run uses it: without the `ray` extra the error is the
usual one line naming the pip command (`extras.MissingExtraError`). See docs/ray.md.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sensei_eval.core.errors import describe_error
from sensei_eval.core.extras import requires_extra
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport
from sensei_eval.core.transcript import Transcript
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.record import JudgeCall, JudgeEvent, RemoteJudgeCalls
from sensei_eval.judging.run_folder import RunFolder
from sensei_eval.judging.runner import Records, StreamedRun, judge_stream
from sensei_eval.models.judge_model import (
    JudgeModel,
    ModelSetupError,
    ModelUnreachableError,
    ModelUsageError,
    preflight,
    resolve_model,
)

__all__ = (
    'MAX_RESTARTS',
    'MAX_TASK_RETRIES',
    'ModelSpec',
    'RayCluster',
    'RayJudging',
    'judge_on_ray',
)

# How often Ray restarts a worker whose process died, and sends its records again, before the records
# it held are reported as errors: enough for a node lost to a spot reclaim or an OOM kill, few enough
# that a record that kills every worker it lands on does not loop forever.
MAX_RESTARTS = 4
MAX_TASK_RETRIES = 3
# Records in flight per worker, per model call it may have in flight: a record's calls arrive
# together, so twice the calls keeps the worker busy while the driver turns results into reports.
RECORDS_PER_CALL = 2
# What a worker tells the driver of its judge model (`_Worker.describe`): `JudgeModel` fields, by name.
_DESCRIBED_FIELDS = (
    'name',
    'transcript_budget',
    'settings',
    'json_schema_constrained',
    'embedded',
    'default_concurrency',
    'spec',
)


@dataclass(frozen=True)
class ModelSpec:
    """The judge model as each worker builds it: no secret in here (keys come from the worker's environment).

    `model` / `base_url` / `transcript_budget` mean what they mean to `models.resolve_model` (none of
    them: the worker's `SENSEI_EVAL_MODEL`, else the embedded model); `settings` are laid over the
    resolved model's settings; `factory` (`MODULE:FUNCTION`, importable on the workers) returns the
    judge model instead: a `JudgeModel` or a pydantic-ai `Model` (e.g. a test's `FunctionModel`)."""

    model: str | None = None
    base_url: str | None = None
    transcript_budget: int | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    factory: str | None = None
    call_timeout_s: float | None = None  # `--timeout`: each judge call's deadline on the worker (None: the model's default)

    def build(self) -> JudgeModel:
        """The judge model, resolved in this process (a worker)."""
        if self.factory is not None:
            made = _from_factory(self.factory)
            if self.transcript_budget is not None:
                made.transcript_budget = self.transcript_budget
        else:
            made = resolve_model(self.model, base_url=self.base_url, transcript_budget=self.transcript_budget)
        if self.settings:
            made.settings = {**made.settings, **self.settings}  # type: ignore[typeddict-item]
        if self.call_timeout_s is not None:
            made.call_timeout_s = self.call_timeout_s
        return made


def _from_factory(spec: str) -> JudgeModel:
    from pydantic_ai.models import Model

    module_name, _, attr = spec.partition(':')
    if not module_name or not attr:
        raise ModelUsageError(f'model factory {spec!r}: use MODULE:FUNCTION')
    try:
        made = getattr(importlib.import_module(module_name), attr)()
    except (ImportError, AttributeError) as e:
        raise ModelUsageError(f'model factory {spec!r}: {e}') from None
    if isinstance(made, JudgeModel):
        return made
    if isinstance(made, Model):
        return resolve_model(made)
    raise ModelUsageError(f'model factory {spec!r} returned {type(made).__name__}, not a JudgeModel or pydantic-ai Model')


class _Worker:
    """One Ray worker (an asyncio actor): the run's judges, profiles and its own judge model. `options` come
    without model, cache or tracer provider: the worker builds its model from `spec`."""

    def __init__(self, spec: ModelSpec, options: JudgeRunOptions) -> None:
        self.problem: tuple[str, int] | None = None
        self.model: JudgeModel | None = None
        try:
            self.model = spec.build()
        except ModelSetupError as e:  # said by describe(): an exception here would only say "actor died"
            self.problem = (str(e), e.exit_code)
        except Exception as e:
            self.problem = (f'cannot set up the judge model: {describe_error(e)}', 1)
        self.calls = RemoteJudgeCalls(replace(options, model=self.model))

    async def describe(self) -> dict[str, Any]:
        """The model as the driver needs it (name, settings, budget), after one check that it answers;
        or `problem`: why this worker cannot judge, and the exit code a local run would give."""
        if self.problem is None and self.model is not None:
            try:
                await preflight(self.model)
            except ModelSetupError as e:
                self.problem = (str(e), e.exit_code)
        if self.problem is not None or self.model is None:
            message, code = self.problem or ('no judge model', 1)
            return {'problem': message, 'exit_code': code}
        return {f: getattr(self.model, f) for f in _DESCRIBED_FIELDS} | {'settings': dict(self.model.settings)}

    async def judge(
        self, record: QueryRecord, transcript: Transcript, calls: list[JudgeCall], repeat: int
    ) -> list[list[JudgeResult]]:
        return await self.calls.run(record, transcript, calls, repeat)


@dataclass(frozen=True)
class RayCluster:
    """Where and how the workers run. `address`: the cluster (`ray://host:10001`, `host:6379`, `auto`); None:
    `$RAY_ADDRESS`, else a local Ray started here (and stopped by `close`). `workers`: how many (default:
    the cluster's CPUs); `cpus_per_worker`: what each reserves (judging waits on the model: a fraction
    lets more workers share a CPU). `records_per_worker`: records in flight per worker (default: twice
    its model calls). `runtime_env`: the workers' Ray runtime environment (e.g.
    `{"pip": ["sensei-eval[ray]"], "env_vars": {...}}`; none: the job's)."""

    address: str | None = None
    workers: int | None = None
    cpus_per_worker: float = 1.0
    records_per_worker: int | None = None
    runtime_env: Mapping[str, Any] | None = None


class RayJudging:
    """Workers on a Ray cluster making a run's model calls: `start()`, pass it as `judge_stream(remote=...)`
    with `model` and `window` in the options, then `close()` (or use `with`).

    The run's `options` give the judges, profiles and `concurrency` (model calls in flight per worker,
    default: the model's); their model and cache stay here. A Ray already initialised in this process is
    used as it is."""

    def __init__(self, options: JudgeRunOptions, spec: ModelSpec, cluster: RayCluster | None = None) -> None:
        cluster = cluster or RayCluster()
        self.options = replace(options, model=None, cache=None, tracer_provider=None)  # what travels to the workers
        self.judges = list(options.judges)
        self.spec = spec
        self.address = cluster.address
        self.workers = cluster.workers
        self.cpus_per_worker = cluster.cpus_per_worker
        self.concurrency = options.concurrency
        self.records_per_worker = cluster.records_per_worker
        self.runtime_env = dict(cluster.runtime_env) if cluster.runtime_env else None
        self.model: JudgeModel | None = None
        self._actors: list[Any] = []
        self._load: list[int] = []
        self._started_ray = False

    # -- set-up -------------------------------------------------------------------------------------

    def start(self) -> RayJudging:
        """Connect to (or start) Ray, start the workers, check their model; a model that cannot be used
        is a `ModelSetupError` (its `exit_code`: 2 usage, 1 unreachable), as in a local run."""
        with requires_extra('ray', 'judging on Ray (judge --ray)'):
            import ray

        if not ray.is_initialized():
            ray.init(
                address=self.address or os.environ.get('RAY_ADDRESS') or None,
                include_dashboard=False,
                log_to_driver=True,
                configure_logging=False,
            )
            self._started_ray = True
        if not any(j.needs_model for j in self.judges):
            return self  # checks only: nothing to send
        try:
            cpus = float(ray.cluster_resources().get('CPU', 1))  # type: ignore[no-untyped-call]
            count = self.workers or max(1, int(cpus // max(self.cpus_per_worker, 1e-3)))
            actor = ray.remote(_Worker).options(
                num_cpus=self.cpus_per_worker,
                max_restarts=MAX_RESTARTS,
                max_task_retries=MAX_TASK_RETRIES,
                max_concurrency=max(1, self.records_per_worker or 1000),
                **({'runtime_env': self.runtime_env} if self.runtime_env else {}),
            )
            self._actors = [actor.remote(self.spec, self.options) for _ in range(count)]
            self._load = [0] * count
            described = ray.get([a.describe.remote() for a in self._actors])
        except BaseException:
            self.close()
            raise
        problems = [d for d in described if 'problem' in d]
        if problems:
            self.close()
            code = max(int(p['exit_code']) for p in problems)
            error = ModelUsageError if code == 2 else ModelUnreachableError
            raise error(f'on the Ray workers: {problems[0]["problem"]}')
        names = {d['name'] for d in described}
        if len(names) > 1:
            self.close()
            raise ModelUsageError(f'the Ray workers resolved different judge models: {", ".join(sorted(names))}')
        d = described[0]
        self.model = JudgeModel(model=d['name'], **d)  # `model` by its name: the workers hold the real one
        if self.records_per_worker is None:
            self.records_per_worker = RECORDS_PER_CALL * max(1, self.concurrency or self.model.default_concurrency)
        return self

    @property
    def window(self) -> int:
        """Records in flight on the whole run: what keeps every worker busy, and no more."""
        return max(1, len(self._actors) * (self.records_per_worker or 1))

    def close(self) -> None:
        """Stop the workers, and Ray when `start` started it."""
        if not self._actors and not self._started_ray:
            return
        import ray

        for a in self._actors:
            ray.kill(a, no_restart=True)
        self._actors, self._load = [], []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def __enter__(self) -> RayJudging:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the calls ----------------------------------------------------------------------------------

    async def __call__(
        self, record: QueryRecord, transcript: Transcript, calls: list[JudgeCall], repeat: int
    ) -> list[list[JudgeResult]]:
        """One record's model calls on the least busy worker (`runner.RemoteJudge`)."""
        if not self._actors:
            raise RuntimeError('RayJudging.start() was not called, or no judge needs a model')
        i = min(range(len(self._actors)), key=self._load.__getitem__)
        self._load[i] += 1
        try:
            result: list[list[JudgeResult]] = await self._actors[i].judge.remote(record, transcript, calls, repeat)
            return result
        finally:
            if i < len(self._load):
                self._load[i] -= 1


async def judge_on_ray(
    records: Records,
    options: JudgeRunOptions,
    spec: ModelSpec,
    *,
    run_dir: RunFolder | Path,
    cluster: RayCluster | None = None,
    on_judge: Callable[[JudgeEvent], None] | None = None,
    on_report: Callable[[RecordReport, Path | None], None] | None = None,
) -> tuple[StreamedRun, JudgeModel | None]:
    """`runner.judge_stream` with the model calls made by workers on Ray (see the module docstring):
    the run's counts, and the judge model as the workers resolved it (its name goes in the summary).
    The driver's `options.model`, `window` and `concurrency` are set here from the workers (the model they
    resolved from `spec`)."""
    session = RayJudging(options, spec, cluster)
    session.start()  # blocks, before anything else runs: ray.init wants the main thread
    try:
        run = await judge_stream(
            records,
            replace(options, model=session.model, window=session.window, concurrency=None),  # the workers bound the calls
            run_dir=run_dir,
            on_judge=on_judge,
            on_report=on_report,
            remote=session if session.model is not None else None,
        )
    finally:
        session.close()
    return run, session.model
