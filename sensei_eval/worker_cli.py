"""`sensei-eval worker` and `sensei-eval judge --queue`: a judge run spread over processes and machines.

A thin layer over `sensei_eval.work_queue`: `judge --queue URL` enqueues the run (one job per record and
repeat), then collects the workers' reports into the run folder and ends like a local run (summary,
exit code); `worker --queue URL` claims jobs and judges them. See docs/workers.md.

Exit codes of `worker`: 0 when it stopped (signal, or `--exit-when-idle` with nothing left); 2 for
usage errors (a bad queue URL or model spec, a model that cannot be set up); 1 when the judge model
stopped answering (its jobs went back to the queue).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic_ai.models import Model
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .cache import JudgeCache
from .cli import BaseUrlOption, ModelOption, make_app, setup_judge_model
from .evaluators.base import Judge
from .extras import requires_extra
from .models import JudgeModel, ModelSetupError, resolve_model
from .profiles import Profile
from .reports import EvaluationReport
from .run_folder import RunFolder
from .runner import report_judges

if TYPE_CHECKING:
    from .judge import _RecordSource
    from .work_queue import Job, WorkQueue

# the work queue needs the "service" extra (SQLAlchemy, psycopg): imported when a command uses it
DEFAULT_LEASE_S = 60.0
DEFAULT_MAX_ATTEMPTS = 3

__all__ = ('app', 'judge_queued', 'load_model_factory', 'open_queue', 'worker')

app = make_app(help=__doc__.split('\n\n')[0] if __doc__ else None)
err = Console(stderr=True)

QueueOption = Annotated[
    str,
    typer.Option(
        '--queue',
        envvar='SENSEI_EVAL_QUEUE',
        help='Queue database: postgresql://user@host/db (any number of machines), or a SQLite file (one machine).',
    ),
]


def open_queue(url: str, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> WorkQueue:
    """The queue at `url`, migrated to the current schema; a bad URL or an unreachable database exits 2."""
    with requires_extra('service', 'the work queue'):
        from .work_queue import WorkQueue

    try:
        return WorkQueue(url, max_attempts=max_attempts)
    except Exception as e:
        err.print(f'[red]error:[/] cannot open the queue {_safe(url)}: {type(e).__name__}: {_first_line(e)}', highlight=False)
        raise typer.Exit(2) from None


def load_model_factory(spec: str) -> JudgeModel:
    """`MODULE:FUNCTION` → the judge model it returns (a `JudgeModel`, or a pydantic-ai `Model`)."""
    module_name, _, attr = spec.partition(':')
    if not module_name or not attr:
        raise ModelSetupError(f'--model-factory {spec!r}: use MODULE:FUNCTION (e.g. mypkg.judging:make_model)')
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ModelSetupError(f'--model-factory {spec!r}: {e}') from None
    made = factory()
    if isinstance(made, JudgeModel):
        return made
    if isinstance(made, Model):
        return resolve_model(made)
    raise ModelSetupError(f'--model-factory {spec!r} returned {type(made).__name__}, not a JudgeModel or pydantic-ai Model')


# ---------------------------------------------------------------------------------------------------
# sensei-eval worker


@app.command()
def worker(
    queue: QueueOption,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    model_factory: Annotated[
        str | None,
        typer.Option(
            '--model-factory',
            help='MODULE:FUNCTION returning the judge model (a pydantic-ai Model or a JudgeModel). '
            'Default: --model, else the model each run was enqueued with.',
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help='Records judged at once by this worker.')] = 4,
    lease: Annotated[
        float, typer.Option(min=1.0, help="Seconds a claimed job stays this worker's without renewal (renewed every third).")
    ] = DEFAULT_LEASE_S,
    max_attempts: Annotated[
        int, typer.Option(min=1, help='Claims of a job whose workers all died before it is failed.')
    ] = DEFAULT_MAX_ATTEMPTS,
    poll: Annotated[float, typer.Option(min=0.01, help='Seconds between looks at an empty queue.')] = 0.5,
    no_cache: Annotated[bool, typer.Option('--no-cache', help='Ignore and do not write the on-disk judge cache.')] = False,
    exit_when_idle: Annotated[
        bool, typer.Option('--exit-when-idle', help='Stop once no job is pending or in progress (default: wait for more).')
    ] = False,
    quiet: Annotated[bool, typer.Option('--quiet', '-q', help='No line per job.')] = False,
) -> None:
    """Claim judge jobs from the queue and judge them, until stopped (Ctrl-C or SIGTERM finish the jobs in hand)."""
    logging.basicConfig(level=logging.WARNING, format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    judge_model: JudgeModel | None = None
    if model_factory is not None:
        try:
            judge_model = load_model_factory(model_factory)
        except ModelSetupError as e:
            err.print(f'[red]error:[/] {e}', highlight=False)
            raise typer.Exit(2) from None
    elif model is not None or base_url is not None:
        judge_model = setup_judge_model(model, base_url, err=err)
    work = open_queue(queue, max_attempts=max_attempts)
    from .work_queue import WorkerStopped, run_worker, worker_name

    owner = worker_name()
    cache = None if no_cache else JudgeCache()
    err.print(f'worker {owner} on {_safe(queue)} · {concurrency} record(s) at once', highlight=False)

    def on_job(job: Job, report: EvaluationReport | None, outcome: str) -> None:
        if quiet:
            return
        what = f'{job.query_id}' + (f' (r{job.repeat})' if job.repeat > 1 else '')
        errors = f' · {len(report.errors)} error(s)' if report is not None and report.errors else ''
        err.print(f'{job.run_id} · {what} · {outcome}{errors}', highlight=False, markup=False)

    async def main() -> Any:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        signals = [0]

        def on_signal() -> None:
            signals[0] += 1
            if signals[0] > 1:  # a second signal: leave now; the jobs in hand return to the queue after the lease
                raise SystemExit(130)
            err.print('stopping: finishing the jobs in hand (again to leave now)', highlight=False)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        return await run_worker(
            work, owner=owner, concurrency=concurrency, lease_s=lease, poll_s=poll, model=judge_model, cache=cache,
            stop=stop, exit_when_idle=exit_when_idle, on_job=on_job,
        )  # fmt: skip

    try:
        stats = asyncio.run(main())
    except WorkerStopped as e:
        err.print(f'[red]error:[/] {e}; the jobs in hand went back to the queue', highlight=False)
        raise typer.Exit(e.exit_code) from None
    finally:
        work.close()
        if cache is not None:
            cache.close()
        if judge_model is not None:
            judge_model.close()
    err.print(
        f'worker {owner}: {stats.completed} job(s) completed, {stats.failed} failed, {stats.lost} lost their lease, '
        f'{stats.released} given back',
        highlight=False,
    )


# ---------------------------------------------------------------------------------------------------
# sensei-eval judge --queue


def judge_queued(
    queue: str,
    source: _RecordSource,
    judges: Sequence[Judge],
    *,
    fuse: list[str] | None,
    profile: Profile,
    model: str | None,
    base_url: str | None,
    max_transcript_tokens: int | None,
    cache: bool,
    folder: RunFolder,
    repeat: int,
    wait: bool,
    datasets: Sequence[Path],
    started: datetime,
    verbose: bool,
) -> None:
    """`judge --queue`: enqueue the run, then (unless `wait` is False) collect the workers' reports into
    `folder`, write the summary and end like a local run. Always ends with `typer.Exit`."""
    from . import judge as judge_cli

    with requires_extra('service', 'the work queue'):
        from .work_queue import QueueError, QueueRun, profile_data

    if model is None and base_url is None:  # the enqueuing machine's default, else each worker's own
        import os

        model = os.environ.get('SENSEI_EVAL_MODEL') or None
        base_url = os.environ.get('SENSEI_EVAL_BASE_URL') or None
    if (model is not None or base_url is not None) and any(j.needs_model for j in judges):
        try:  # the spec is checked here (prefix, provider, key), the endpoint by each worker
            resolve_model(model, base_url=base_url, transcript_budget=max_transcript_tokens).close()
        except ModelSetupError as e:
            err.print(f'[red]error:[/] {e}', highlight=False)
            raise typer.Exit(2) from None
    config = QueueRun(
        judges=[j.name for j in report_judges(judges)], fuse=list(fuse or []), profile=profile_data(profile),
        model=model, base_url=base_url, max_transcript_tokens=max_transcript_tokens, cache=cache,
    )  # fmt: skip
    work = open_queue(queue)
    run_id = folder.run_id
    try:
        try:
            added = work.enqueue(run_id, source, config, repeat=repeat)
        except QueueError as e:
            err.print(f'[red]error:[/] {e}', highlight=False)
            raise typer.Exit(2) from None
        counts = work.counts(run_id)
        total = sum(n for status, n in counts.items() if status != 'collected')
        again = f'{total - added} already queued' if total > added else 'none queued before'
        err.print(f'run {run_id}: {added} job(s) enqueued ({again}) on {_safe(queue)}', highlight=False)
        if not wait:
            err.print(
                f'collect the reports later with the same command and --run-id {run_id} '
                '(workers: sensei-eval worker --queue URL)',
                highlight=False,
            )
            raise typer.Exit(0)
        failures = judge_cli._Failures()
        cached = [0]
        models: dict[str, int] = {}

        def count(report: EvaluationReport, path: Path | None) -> None:
            failures.add(report)
            cached[0] += sum(1 for r in report.judges.values() if r.cached)
            if report.model:
                models[report.model] = models.get(report.model, 0) + 1

        try:
            run = _collect(work, run_id, folder, judges, total, count)
        except KeyboardInterrupt:
            err.print(
                f'interrupted: the jobs stay queued and workers keep judging; collect with the same command and '
                f'--run-id {run_id}',
                highlight=False,
            )
            raise typer.Exit(130) from None
    finally:
        work.close()
    failures.forget(run.same_text)
    summary = run.tally.summary(
        run_id,
        started_at=started,
        model=', '.join(sorted(models, key=lambda m: -models[m])) or model,
        datasets=datasets,
        records_loaded=source.loaded,
        load_errors=source.finish(),
        repeat=repeat,
        cache_hits=cached[0],
        profile=profile.name,
    )
    judge_cli.finish_run(folder, summary, run.reports, failures, verbose=verbose)


def _collect(work: WorkQueue, run_id: str, folder: RunFolder, judges: Sequence[Judge], total: int, count: Any) -> Any:
    """Collect with a progress bar: reports written / jobs, and what the queue holds."""
    from .work_queue import collect_run

    with Progress(
        TextColumn('[bold]collecting'), BarColumn(), MofNCompleteColumn(), TextColumn('{task.description}'),
        TimeElapsedColumn(), console=err, transient=False, disable=total == 0,
    ) as progress:  # fmt: skip
        task = progress.add_task('', total=total)
        written = [0]

        def on_report(report: EvaluationReport, path: Path | None) -> None:
            count(report, path)
            written[0] += 1
            progress.update(task, completed=min(total, written[0]))

        def on_progress(counts: dict[str, int]) -> None:
            progress.update(
                task,
                description=f'{counts.get("pending", 0)} pending · {counts.get("in_progress", 0)} in progress',
            )

        run = collect_run(work, run_id, folder, judges, on_report=on_report, on_progress=on_progress)
        progress.update(task, total=total, completed=total)
        return run


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url if '://' in url else f'sqlite:///{url}').render_as_string(hide_password=True)
    except Exception:
        return url.split('@')[-1]


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [''])[0][:300]


def main() -> None:
    app(prog_name='python -m sensei_eval.worker_cli')


if __name__ == '__main__':
    main()
