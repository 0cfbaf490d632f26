"""`python -m sensei_eval.judge`: judge rated query histories and write issue reports.

A thin layer over the library: load datasets (`records`), pick judges (`evaluators.registry`), resolve
the model (`models`), run (`runner`), write and show reports (`reports`).

With no judge model named (`--model`, `--base-url`, `SENSEI_EVAL_MODEL`, `SENSEI_EVAL_BASE_URL`) the
deterministic checks judge and each LLM judge is reported as not run, with how to name a model; the
embedded model runs only when named (`--model embedded`).

Exit codes (docs/cli.md lists every command's): 0 when every record loaded and every judge that ran
answered (issues found are not errors, LLM judges not run for want of a model are not errors); 1 when any
record failed to load, an asked-for query id was not found, or any judge errored — everything else is
still judged and written; 1 too when there is nothing to judge (an empty, blank or BOM-only dataset,
no loadable record, or every record filtered out) and when the judge model's server cannot be reached
(checked once before judging: `models.preflight`); 2 for usage errors, including a model string
without a provider prefix, an unknown provider, or a missing or rejected API key.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import stat
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sensei_eval.cli.common import (
    BaseUrlOption,
    EmbeddedThreadsOption,
    ModelFlags,
    ModelOption,
    NoCacheOption,
    OutOption,
    TimeoutOption,
    make_app,
    make_console,
    print_table,
    quiet_third_party,
    setup_judge_model,
    setup_telemetry,
    shown,
    split_names,
)
from sensei_eval.core.datasets import dataset_format, iter_datasets
from sensei_eval.core.documents import DATASET_FORMATS, DatasetFormat
from sensei_eval.core.errors import LoadError, LoadNotice
from sensei_eval.core.explain import explain_score
from sensei_eval.core.extras import exit_on_missing_extra
from sensei_eval.core.records import MAX_RECORD_BYTES, QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, RunFacts, RunSummary, RunTally, to_pydantic_evals_report
from sensei_eval.core.verdicts import judge_status
from sensei_eval.data import SAMPLE_DATASET
from sensei_eval.evaluators.base import FailureModeJudge, Judge
from sensei_eval.evaluators.registry import (
    EXTRA_MODES,
    GROUPS,
    JUDGES,
    FuseSpecError,
    UnknownJudgeError,
    fuse_judges,
    make_judges,
)
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import BUILTIN_PROFILES, Profile, ProfileError, resolve_profile
from sensei_eval.judging.run_folder import RunFolder, RunIdError, validate_run_id
from sensei_eval.judging.runner import JudgeEvent, StreamedRun, judge_stream, report_judges
from sensei_eval.models.judge_model import EMBEDDED_NOTICE, NO_JUDGE_MODEL, JudgeModel, preflight, resolve_model

if TYPE_CHECKING:
    from sensei_eval.judging.ray_engine import RayJudging

__all__ = ('app', 'main')

DEFAULT_DATASET = SAMPLE_DATASET  # the packaged sample (sensei_eval/data/), found wherever the command runs

app = make_app(help=__doc__.split('\n\n')[0] if __doc__ else None)
err = make_console(stderr=True)
out = make_console()


@app.command()
def judge(
    dataset: Annotated[
        list[Path] | None, typer.Option('--dataset', metavar='FILE', help='JSONL dataset; repeat for several.')
    ] = None,
    dataset_format: Annotated[
        str,
        typer.Option(
            '--format',
            help='How to read --dataset: auto (told from the content), jsonl, json (an array of records), otlp, '
            'spans (SDK span dumps), tau-bench, who-and-when.',
        ),
    ] = 'auto',
    query_id: Annotated[
        list[str] | None, typer.Option('--query-id', metavar='ID', help='Judge only this record; repeatable.')
    ] = None,
    judge_names: Annotated[
        list[str] | None,
        typer.Option(
            '--judges',
            '--evaluators',
            metavar='NAMES',
            help='Judge names or groups (core, checks, all); comma-separated or repeated. '
            'Default: core,checks. --evaluators is the old name.',
            show_default=False,
        ),
    ] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    timeout: TimeoutOption = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help='Judge calls in flight at once (default 1 for the embedded model, 4 otherwise).')
    ] = None,
    out_dir: OutOption = Path('reports'),
    repeat: Annotated[int, typer.Option(min=1, help='Judge every record N times (to measure judge noise).')] = 1,
    no_cache: NoCacheOption = False,
    run_id: Annotated[str | None, typer.Option(metavar='NAME', help='Name of the run folder (default: a timestamp).')] = None,
    max_record_bytes: Annotated[
        int,
        typer.Option(
            metavar='BYTES',
            min=1024,
            max=1024**3,
            help='Largest dataset line (one record) read, in bytes; a longer line is a located error and the run goes on.',
        ),
    ] = MAX_RECORD_BYTES,
    max_transcript_tokens: Annotated[
        int | None,
        typer.Option(
            min=200,
            metavar='TOKENS',
            help='Transcript budget, tokens (default 60,000; embedded model 600, capped to the context).',
        ),
    ] = None,
    profile: Annotated[
        str,
        typer.Option(
            metavar='NAME',
            help='Agent profile: which checks fit this agent (default, docs-agent, tarsy, or a YAML/TOML file). '
            "A record's metadata.profile overrides it.",
        ),
    ] = 'default',
    batch: Annotated[
        bool,
        typer.Option(
            '--batch',
            help='Send the judge calls through the OpenAI Batch API (about half the price, answers within 24 hours). '
            'An interrupted run resumes its batches when started again with the same --run-id.',
        ),
    ] = False,
    fuse: Annotated[
        list[str] | None,
        typer.Option(
            '--fuse',
            metavar='GROUPS',
            help='Judge several failure modes in one model call per group: categories or judge names joined '
            'with +, groups separated by commas, all, or none (e.g. output,methodology). See docs/fused.md. '
            'Default: none; all with the embedded model (one call per record).',
            show_default=False,
        ),
    ] = None,
    ray: Annotated[
        bool,
        typer.Option(
            '--ray',
            help='Make the model calls on Ray workers (the "ray" extra): on the cluster at --ray-address, else a '
            'local Ray; reports, summary and cache stay here. See docs/ray.md.',
        ),
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(
            '--ray-address',
            envvar='RAY_ADDRESS',
            metavar='ADDRESS',
            help='With --ray: the cluster (ray://head:10001, or head:6379 on a node).',
        ),
    ] = None,
    ray_workers: Annotated[
        int | None, typer.Option('--ray-workers', min=1, help='With --ray: worker processes (default: one per cluster CPU).')
    ] = None,
    list_judges: Annotated[bool, typer.Option('--list', help='List the judges and groups, then exit.')] = False,
    verbose: Annotated[
        bool,
        typer.Option('--verbose', '-v', help="Also list every failed verdict and print pydantic-evals' per-record table."),
    ] = False,
    embedded_threads: EmbeddedThreadsOption = None,
) -> None:
    """Judge rated query histories and write one JSON issue report per record."""
    quiet_third_party()
    if list_judges:
        _print_judges()
        return
    judges, run_profile, datasets = _check_usage(judge_names, fuse, profile, dataset, run_id)
    started = datetime.now(UTC)
    source = _open_source(datasets, dataset_format, query_id, max_record_bytes)

    setup_telemetry(err)
    flags = ModelFlags(model, base_url, max_transcript_tokens, embedded_threads, timeout)
    options = JudgeRunOptions(judges, concurrency=concurrency, repeat=repeat, profile=run_profile)
    options, judge_model, remote = _setup_model(
        options, flags, fuse=fuse, batch=batch, no_cache=no_cache, ray=ray, ray_address=ray_address, ray_workers=ray_workers
    )

    _print_header(datasets, options.judges, judge_model)
    folder = RunFolder.create(out_dir, run_id)
    cache = None if no_cache else JudgeCache()
    if batch and judge_model is not None:
        judge_model = _batched(judge_model, folder.path)
    failures = _Failures()
    options = replace(options, model=judge_model, cache=cache)
    run = _run_until_done(source, options, folder, failures, remote, batch=batch, datasets=datasets, started=started)
    failures.forget(run.same_text)  # those verdicts were set aside as inconclusive after the fact

    summary = run.tally.summary(
        folder.run_id,
        RunFacts(
            started_at=started,
            model=judge_model.name if judge_model else None,
            datasets=datasets,
            records_loaded=source.loaded,
            load_errors=source.finish(),
            repeat=repeat,
            cache_hits=cache.hits if cache else 0,
            profile=run_profile.name,
        ),
    )
    stopped = judge_model.connection.stopped if judge_model else None
    finish_run(folder, summary, run.reports, failures, verbose=verbose, stopped=stopped)


def _usage_error(message: str) -> NoReturn:
    """A usage error printed (markup escaped), exit code 2."""
    err.print(f'[red]error:[/] {escape(message)}', highlight=False)
    raise typer.Exit(2)


def _check_usage(
    judge_names: list[str] | None,
    fuse: list[str] | None,
    profile: str,
    dataset: list[Path] | None,
    run_id: str | None,
) -> tuple[list[Judge], Profile, list[Path]]:
    """The judges, the agent profile and the datasets asked for; a usage error (exit 2) ends the run here."""
    try:
        judges = make_judges(split_names(judge_names), fuse=fuse)
    except (UnknownJudgeError, FuseSpecError) as e:
        _usage_error(str(e))
    try:
        run_profile = resolve_profile(profile)
    except ProfileError as e:
        _usage_error(str(e))
    datasets = dataset or [DEFAULT_DATASET]
    unreadable = [problem for p in datasets if (problem := _dataset_problem(p)) is not None]
    if unreadable:
        for problem in unreadable:
            err.print(f'[red]error:[/] {escape(problem)}', highlight=False)
        raise typer.Exit(2)
    if run_id is not None:
        try:
            validate_run_id(run_id)
        except RunIdError as e:
            _usage_error(str(e))
    return judges, run_profile, datasets


def _open_source(
    datasets: Sequence[Path], dataset_format: str, query_id: list[str] | None, max_record_bytes: int
) -> _RecordSource:
    """The records to judge, read up to the first one; a bad --format is a usage error (exit 2), nothing to
    judge ends the run with exit code 1."""
    if dataset_format not in DATASET_FORMATS:
        _usage_error(f'--format {dataset_format} is not one of {", ".join(DATASET_FORMATS)}')
    wanted = list(dict.fromkeys(query_id)) if query_id else None
    source = _RecordSource(datasets, wanted, cast(DatasetFormat, dataset_format), max_record_bytes)
    if source.peek() is None:  # the whole input read: no record to judge
        load_errors = source.finish()
        why = _why_nothing(datasets, source.loaded, load_errors)
        err.print(f'[red]error:[/] nothing to judge: {escape(why)}', highlight=False)
        raise typer.Exit(1)
    return source


def _setup_model(
    options: JudgeRunOptions,
    flags: ModelFlags,
    *,
    fuse: list[str] | None,
    batch: bool,
    no_cache: bool,
    ray: bool,
    ray_address: str | None,
    ray_workers: int | None,
) -> tuple[JudgeRunOptions, JudgeModel | None, RayJudging | None]:
    """The judge model (none when every judge is a deterministic check, or when no model is named: the
    runner then reports the LLM judges as not run; with --ray a model must be named), or the Ray workers
    that hold it; with the embedded model, several failure-mode judges fused into one call per record."""
    if ray:  # the model calls on Ray workers (docs/ray.md); everything else stays here
        if batch:
            err.print('[red]error:[/] --batch and --ray do not go together (Ray workers call the model live)')
            raise typer.Exit(2)
        remote = _ray_workers(flags, ray_address, ray_workers, options)
        return options, remote.model, remote
    judges = options.judges
    if not any(j.needs_model for j in judges):
        return options, None, None
    judge_model = _judge_model(flags)
    if judge_model is None:  # none named: the runner reports the LLM judges as not run
        return options, None, None
    # the embedded server loads while the run sets up, unless the cache may answer everything (a re-run)
    now = no_cache or not JudgeCache().db_path.exists()
    judge_model.start_server(lambda line: err.print(line, highlight=False), now=now)
    if judge_model.embedded and fuse is None and sum(isinstance(j, FailureModeJudge) for j in judges) >= 2:
        judges = fuse_judges(judges, ['all'])  # smoke: one call per record (see docs/embedded.md)
        options = replace(options, judges=judges)
    return options, judge_model, None


def _run_until_done(
    source: _RecordSource,
    options: JudgeRunOptions,
    folder: RunFolder,
    failures: _Failures,
    remote: RayJudging | None,
    *,
    batch: bool,
    datasets: Sequence[Path],
    started: datetime,
) -> StreamedRun:
    """The run; Ctrl-C ends it with exit code 130 and says how to resume. The model (or the Ray workers)
    closed either way."""
    judge_model = options.model
    try:
        return _run(source, options, folder, failures, remote)
    except KeyboardInterrupt:
        if remote is not None:
            err.print(
                f'interrupted: resume with the same command and --run-id {folder.run_id}\n(the cache keeps what was judged)'
            )
            raise typer.Exit(130) from None
        if not batch:
            _interrupted(folder, options, source, datasets, started)
        err.print(
            f'interrupted: submitted batches keep running at the provider;\n'
            f'resume them with the same command and --run-id {folder.run_id}',
            highlight=False,
        )
        raise typer.Exit(130) from None
    finally:
        if remote is not None:
            remote.close()
        elif judge_model is not None:
            judge_model.close()


def _dataset_problem(path: Path) -> str | None:
    """Why `path` cannot be read as a dataset (missing, a folder, a FIFO or device), or None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f'no such dataset: {path}'
    except OSError as e:
        return f'cannot read the dataset {path}: {e.strerror or e}'
    if stat.S_ISREG(mode):
        return None
    kind = (
        'a folder'
        if stat.S_ISDIR(mode)
        else 'a FIFO'
        if stat.S_ISFIFO(mode)
        else 'a device'
        if (stat.S_ISCHR(mode) or stat.S_ISBLK(mode))
        else 'a socket'
        if stat.S_ISSOCK(mode)
        else 'not a regular file'
    )
    return f'dataset {path} is {kind}: --dataset takes a JSONL file (or an .otlp.jsonl trace file)'


def _interrupted(
    folder: RunFolder, options: JudgeRunOptions, source: _RecordSource, datasets: Sequence[Path], started: datetime
) -> NoReturn:
    """Ctrl-C: `summary.json` of the reports written so far, and the command that finishes the run."""
    judges, judge_model, repeat, cache, profile = options.judges, options.model, options.repeat, options.cache, options.profile
    tally = RunTally(report_judges(judges))
    for seq, report in enumerate(folder.load().reports):
        tally.add(report, seq)
    summary = tally.summary(
        folder.run_id,
        RunFacts(
            started_at=started,
            model=judge_model.name if judge_model else None,
            datasets=datasets,
            records_loaded=source.loaded,
            load_errors=list(source.load_errors),
            repeat=repeat,
            cache_hits=cache.hits if cache else 0,
            profile=profile.name,
            exit_code=130,
        ),
    )
    folder.write_summary(summary)
    again = 'finished judge calls come from the cache' if cache is not None else 'every record is judged again'
    err.print(
        f'\ninterrupted: {tally.reports} report(s) written, summary in\n  {folder.summary_path}\n'
        f'to finish the run ({again}):\n  {_resume_command(folder.run_id)}',
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(130)


def _resume_command(run_id: str) -> str:
    """This command line again, with `--run-id run_id` (replacing any given)."""
    args = sys.argv[1:]
    if not args or args[0] != 'judge':
        args = ['judge', *args]
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == '--run-id':
            skip = True
        elif not arg.startswith('--run-id='):
            kept.append(arg)
    return shlex.join(['sensei-eval', *kept, '--run-id', run_id])


def finish_run(
    folder: RunFolder, summary: RunSummary, reports: int, failures: _Failures, *, verbose: bool, stopped: str | None = None
) -> NoReturn:
    """Write `summary.json`, show the run (the compact table, or with `verbose` every record) and exit with
    the summary's code."""
    folder.write_summary(summary)
    if reports and verbose:
        loaded = folder.load_reports()  # the per-record detail: the whole run in memory, on request only
        listed = loaded if stopped is None else [_shorten_stopped(r, stopped) for r in loaded]
        with out.wide():  # pydantic-evals' table, whole in a CI log
            to_pydantic_evals_report(listed, name=summary.run_id).print(include_durations=False, console=out)
        failures = _Failures(limit=None, full=True)
        for report in loaded:
            failures.add(report)
    if reports:
        _print_compact(summary, failures, stopped)
    _print_footer(summary, folder.path, stopped)
    raise typer.Exit(summary.exit_code)


# Records whose input warnings the console prints (one folded line each) before it only counts them.
_WARNED_SHOWN = 10


class _RecordSource:
    """The records to judge, read from the datasets as the run needs them: a bad line is printed when
    it is met and kept for the summary, `--query-id` filters, and nothing else is held."""

    def __init__(
        self,
        datasets: Sequence[Path],
        wanted: list[str] | None,
        format: DatasetFormat = 'auto',
        max_record_bytes: int = MAX_RECORD_BYTES,
    ) -> None:
        self.datasets = datasets
        self.format = format
        self.max_record_bytes = max_record_bytes
        self.wanted = wanted
        self.loaded = 0
        self.load_errors: list[str] = []
        self.warned_records = 0  # records that came with input warnings (printed folded, `_WARNED_SHOWN` of them)
        self._found: set[str] = set()
        self._items = self._records()
        self._head: list[QueryRecord] = []
        self._finished: list[str] | None = None

    def _records(self) -> Iterator[QueryRecord]:
        for item in iter_datasets(self.datasets, format=self.format, max_record_bytes=self.max_record_bytes):
            if isinstance(item, LoadNotice):  # skipped on purpose (a trace holding no run): information, not a failure
                err.print(f'[dim]skipped:[/] {escape(str(item))}', highlight=False)
                continue
            if isinstance(item, LoadError):
                self.load_errors.append(str(item))
                err.print(f'[red]bad record:[/] {escape(str(item))}', highlight=False)
                continue
            self.loaded += 1
            if item.input_warnings:
                self._warned(item)
            if self.wanted is None or item.query_id in self.wanted:
                self._found.add(item.query_id)
                yield item

    def _warned(self, record: QueryRecord) -> None:
        """A record's input warnings, folded: its first one and how many more (all are in its report), for the
        first `_WARNED_SHOWN` records; then one line counting the rest."""
        self.warned_records += 1
        if self.warned_records <= _WARNED_SHOWN:
            warnings = record.input_warnings
            more = f' (+{len(warnings) - 1} more in its report)' if len(warnings) > 1 else ''
            line = f'input warning: {record.query_id}: {" ".join(warnings[0].split())}{more}'
            err.print(f'[yellow]{escape(line)}[/]', highlight=False)
        elif self.warned_records == _WARNED_SHOWN + 1:
            err.print('[yellow]more records have input warnings: see input_warnings in their reports[/]', highlight=False)

    def peek(self) -> QueryRecord | None:
        """The first record to judge (reading up to it), or None when there is none at all."""
        if not self._head:
            self._head = [r for r in [next(self._items, None)] if r is not None]
        return self._head[0] if self._head else None

    def __iter__(self) -> Iterator[QueryRecord]:
        yield from self._head
        self._head = []
        yield from self._items

    def finish(self) -> list[str]:
        """Every load error, the asked-for ids never found last (once the input is read to its end)."""
        if self._finished is None:
            for q in self.wanted or []:
                if q not in self._found:
                    self.load_errors.append(f'query id {q!r} not found in {", ".join(map(str, self.datasets))}')
                    err.print(f'[red]error:[/] query id {escape(repr(q))} not found in the dataset(s)', highlight=False)
            self._finished = self.load_errors
        return self._finished

    def expected(self, repeat: int) -> int:
        """How many reports the run will write, at most (a line count: what the progress bar counts to)."""
        if self.wanted is not None:
            return len(self.wanted) * repeat
        return repeat * sum(_count_records(p, self.format) for p in self.datasets)


def _count_records(path: Path, format: DatasetFormat) -> int:
    """A JSONL file's lines; the records of any other file (a document's lines say nothing of its runs)."""
    if dataset_format(path, format) == 'jsonl':
        return _count_lines(path)
    return sum(1 for item in iter_datasets([path], format=format) if not isinstance(item, LoadError))


def _count_lines(path: Path) -> int:
    lines, last = 0, b'\n'
    try:
        with path.open('rb') as f:
            while chunk := f.read(1 << 20):
                lines += chunk.count(b'\n')
                last = chunk[-1:]
    except OSError:
        return 0
    return lines + (last != b'\n')


class _Failures:
    """What the console lists after the table, gathered as reports come: the first `limit` failed verdicts
    (all with `--verbose`), the judges skipped and why (counted once per record and repeat), and with
    `--verbose` why each score below 1.00 is what it is (`core.explain`)."""

    def __init__(self, limit: int | None = 20, *, full: bool = False) -> None:
        self.limit = limit
        self.full = full  # --verbose: every reason in full, not cut to one line
        self.shown: dict[tuple[str, str], str] = {}
        self.skipped: dict[str, Counter[str]] = {}  # judge -> why -> records
        self.explained: dict[str, list[str]] = {}  # --verbose: record -> the lines explaining its score
        self._seen: set[tuple[str, int]] = set()

    def add(self, report: RecordReport) -> None:
        key = (report.query_id, report.repeat)
        if key not in self._seen:  # a report rewritten by the run-wide rules keeps its skipped judges
            self._seen.add(key)
            for name, why in report.skipped.items():
                self.skipped.setdefault(name, Counter())[why] += 1
        if self.full:
            explanation = explain_score(list(report.judges.values()))
            if not explanation.full_marks:
                score = f'{explanation.overall_score:.2f}' if explanation.overall_score is not None else 'not judged'
                head = f'{_record_label(report)} · {score}' + (f' · {explanation.coverage}' if explanation.coverage else '')
                self.explained[head] = explanation.lines()
        for name, result in report.judges.items():
            if self.limit is not None and len(self.shown) >= self.limit:
                return
            if judge_status(result) == 'fail':  # the verdict model's: a minor finding is not a failure
                reason = _full_reason(result) if self.full else _short_reason(result)
                self.shown.setdefault((_record_label(report), name), reason)

    def forget(self, judges: Iterable[str]) -> None:
        gone = set(judges)
        self.shown = {k: v for k, v in self.shown.items() if k[1] not in gone}


def _shorten_stopped(report: RecordReport, stopped: str) -> RecordReport:
    """For the table: judges the "first failure" rule stopped say so briefly; the footer gives the reason once."""
    judges = {
        name: r.model_copy(update={'error': 'not run (judge model unreachable, see below)'}) if r.error == stopped else r
        for name, r in report.judges.items()
    }
    return report.model_copy(update={'judges': judges})


def _why_nothing(datasets: Sequence[Path], loaded: int, load_errors: Sequence[str]) -> str:
    names = ', '.join(map(str, datasets))
    if loaded:
        return f'no record of {names} matches --query-id'
    if load_errors:
        return f'no record of {names} could be loaded ({len(load_errors)} error(s), listed above)'
    return f'{names} has no records (the file is empty or blank)' if len(datasets) == 1 else f'{names} have no records'


def _judge_model(flags: ModelFlags) -> JudgeModel | None:
    """Resolve the judge model and check, with one request, that it answers; a problem ends the run here.
    None when no model is named."""
    # this module's names, so tests can replace them here
    return setup_judge_model(flags, err=err, resolve=resolve_model, check=preflight, none_ok=True)


def _ray_workers(flags: ModelFlags, address: str | None, workers: int | None, options: JudgeRunOptions) -> RayJudging:
    """Ray workers started and their judge model checked (resolved on the workers, with their keys); a
    problem ends the run here with a local run's exit code. This machine's model choice
    (`SENSEI_EVAL_MODEL` / `SENSEI_EVAL_BASE_URL`) is what the workers resolve."""
    import os

    from sensei_eval.judging.ray_engine import ModelSpec, RayCluster, RayJudging
    from sensei_eval.models.judge_model import ModelSetupError

    model, base_url = flags.model, flags.base_url
    if model is None and base_url is None:
        model = os.environ.get('SENSEI_EVAL_MODEL') or None
        base_url = os.environ.get('SENSEI_EVAL_BASE_URL') or None
    spec = ModelSpec(model=model, base_url=base_url, transcript_budget=flags.transcript_budget, call_timeout_s=flags.timeout)
    session = RayJudging(options, spec, RayCluster(address=address, workers=workers))
    try:
        session.start()
    except ModelSetupError as e:
        err.print(f'[red]error:[/] {escape(str(e))}', highlight=False)
        raise typer.Exit(e.exit_code) from None
    if session.model is not None and session.model.embedded:
        err.print(f'[yellow]smoke:[/] {EMBEDDED_NOTICE}', highlight=False)
    return session


def _batched(judge_model: JudgeModel, run_dir: Path) -> JudgeModel:
    """The judge model calling through the Batch API, its batches kept in the run folder; state changes printed."""
    from sensei_eval.judging.batch import BatchError, batch_judge_model, check_batch_api

    try:
        asyncio.run(check_batch_api(judge_model))  # one message now, rather than one 404 per judge
        return batch_judge_model(judge_model, run_dir, on_progress=lambda p: err.print(p.describe(), highlight=False))
    except BatchError as e:
        judge_model.close()
        err.print(f'[red]error:[/] {escape(str(e))}', highlight=False)
        raise typer.Exit(2) from None


# Without a terminal (CI, a log file) a progress line goes out at least this often, and at every
# `_PLAIN_STEP` of the records (but not more than once every `_PLAIN_MIN_S`: a fast run is not a wall of
# progress lines), so a long run is never silent; the last line always says where the run ended.
_PLAIN_EVERY_S = 10.0
_PLAIN_STEP = 0.05
_PLAIN_MIN_S = 1.0


class _PlainProgress:
    """Progress as plain lines for a console that is not a terminal: records done (bad lines included, as
    the bar counts them), errors, model calls and tokens, every `_PLAIN_EVERY_S` seconds (a ticker
    thread, so a slow judge call is not silence) and at every 5% of the records."""

    def __init__(self, total: int, console: Console) -> None:
        self.total, self.console = total, console
        self.records = self.errors = self.calls = self.tokens = 0
        self._start = self._last = time.monotonic()
        self._last_records = 0
        self._shown: tuple[int, int, int] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name='sensei-eval-progress', daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self._maybe_print()

    def judged(self, event: JudgeEvent) -> None:
        result = event.result
        with self._lock:
            self.errors += result.status == 'error'
            if not result.cached:
                self.calls += result.requests
                self.tokens += result.input_tokens + result.output_tokens
        self._maybe_print()

    def reported(self, done: int) -> None:
        with self._lock:
            self.records = done
        self._maybe_print()

    def _maybe_print(self, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            state = (self.records, self.errors, self.calls)
            by_time = now - self._last >= _PLAIN_EVERY_S
            stepped = self.records - self._last_records >= max(1, int(self.total * _PLAIN_STEP))
            by_step = stepped and now - self._last >= _PLAIN_MIN_S
            if not (by_time or by_step or (force and state != self._shown)):
                return
            self._last, self._last_records, self._shown = now, self.records, state
            line = (
                f'progress: {self.records}/{self.total} records · {self.errors} error(s) · {self.calls} model '
                f'call(s) · {self.tokens:,} tokens · {now - self._start:.0f} s'
            )
        self.console.print(line, highlight=False, markup=False)

    def finish(self, total: int | None = None) -> None:
        """The last line: `total` is what the run really had (the bar's count was read ahead from line counts)."""
        self._stop.set()
        self._ticker.join(2)
        if total is not None:
            with self._lock:
                self.total = self.records = total
        self._maybe_print(force=True)


def _print_header(datasets: Sequence[Path], judges: Sequence[Judge], judge_model: JudgeModel | None) -> None:
    """What the run is about to do, before it does it: the model and its URL (credentials redacted),
    the dataset(s) and the judges."""
    model = judge_model.where if judge_model is not None else 'none (deterministic checks only)'
    if judge_model is None and any(j.needs_model for j in judges):
        model = 'none named (the checks judge; LLM judges do not run, see the end)'
    if judge_model is not None and judge_model.embedded:  # its server starts in the background (see above)
        model = judge_model.name
    if judge_model is not None:
        model += f' · deadline {judge_model.timeout_s:g} s per judge call'
    err.print(f'judge model: {model}', highlight=False, markup=False)
    err.print(f'dataset(s): {", ".join(map(str, datasets))}', highlight=False, markup=False, soft_wrap=True)
    err.print(f'judges ({len(judges)}): {", ".join(j.name for j in judges)}', highlight=False, markup=False)


def _run(
    source: _RecordSource, options: JudgeRunOptions, folder: RunFolder, failures: _Failures, remote: RayJudging | None = None
) -> StreamedRun:
    """The run with a progress bar (plain progress lines without a terminal); `remote`: Ray workers. Both
    count a bad line as a record done, and end on the run's real count (the total was read ahead)."""
    repeat = options.repeat
    workers = remote if remote is not None and remote.model is not None else None
    if workers is not None:
        options = replace(options, window=workers.window)
    total = source.expected(repeat)
    plain = None if err.is_terminal else _PlainProgress(total, err)
    columns = (
        TextColumn('[bold]judging'),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn('{task.description}'),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=False, disable=total == 0 or plain is not None) as progress:
        task = progress.add_task('', total=total)
        done = [0]

        def records_done() -> int:
            return done[0] + repeat * len(source.load_errors)

        def on_judge(event: JudgeEvent) -> None:
            mark = 'cached' if event.result.cached else event.result.status
            # a description is markup to Rich: a query id is text (`[link=…]` stays brackets)
            progress.update(task, description=shown(f'{event.query_id} · {event.result.judge} · {mark}'))
            if plain is not None:
                plain.judged(event)

        def on_report(report: RecordReport, path: Path | None) -> None:
            failures.add(report)
            done[0] += 1  # a report rewritten at the end is capped
            progress.update(task, completed=min(total, records_done()))
            if plain is not None:
                plain.reported(min(total, records_done()))

        try:
            stream = judge_stream(source, options, run_dir=folder, on_judge=on_judge, on_report=on_report, remote=workers)
            run = asyncio.run(stream)
        except BaseException:
            if plain is not None:
                plain.finish()
            raise
        done[0] = run.reports
        final = records_done()
        progress.update(task, total=final, completed=final, description='')
        if plain is not None:
            plain.finish(final)
        return run


# The width the lines under the table wrap at (reasons, lists): a terminal's 80 columns.
_WIDTH = 80


def _wrap(text: str, width: int, *, initial_indent: str = '', subsequent_indent: str = '') -> list[str]:
    """`textwrap.wrap` at spaces only: `docs-agent` and `--profile` stay whole."""
    return textwrap.wrap(text, width, initial_indent=initial_indent, subsequent_indent=subsequent_indent, break_on_hyphens=False)


_LEGEND = 'judged: gave a pass/fail verdict · passed: share of those · score: mean'


def _print_compact(summary: RunSummary, failures: _Failures, stopped: str | None) -> None:
    """The run at a glance, read from the verdict model (`core.verdicts`): one row per judge that ran
    (verdicts, share passed, mean score, inconclusive, errors), the judges that ran on no record named in
    its title, a legend, the overall score beside its coverage, the judges skipped and why, then failed
    verdicts as record · judge · reason (the first ones; all, in full, with -v) and, with -v, why each
    score below 1.00 is what it is; last, the LLM judges that had no model, and how to name one."""
    from rich.table import Table

    rows = {n: j for n, j in summary.per_judge.items() if j.ok or j.errors or j.inconclusive or j.smoke}
    smoke = any(j.smoke for j in rows.values())
    idle = [n for n in summary.per_judge if n not in rows]  # asked for, ran on no record: named, not hidden
    title = f'judges ({len(summary.per_judge)})' + (f': {len(rows)} ran; did not run: {", ".join(idle)}' if idle else '')
    for line in _wrap(title, _WIDTH, subsequent_indent='  '):
        out.print(line, style='bold', highlight=False, markup=False)
    table = Table(box=None, pad_edge=False)
    table.add_column('judge', overflow='fold')
    columns = ('judged', 'passed', 'score', 'inconclusive', 'errors', *(('smoke',) if smoke else ()))
    for column in columns:
        table.add_column(column, justify='right', no_wrap=True)
    failed = 0
    for name, j in rows.items():
        failed += j.ok - round((j.pass_rate or 0.0) * j.ok)
        cells = [
            str(j.ok),
            f'{j.pass_rate:.0%}' if j.pass_rate is not None else '-',
            f'{j.mean_score:.2f}' if j.mean_score is not None else '-',
            str(j.inconclusive),
            str(j.errors),
            *((str(j.smoke),) if smoke else ()),
        ]
        table.add_row(name, *cells)
    print_table(out, table)
    legend = _LEGEND + (' · smoke: embedded model, not a verdict' if smoke else '')
    for line in _wrap(legend, _WIDTH):
        out.print(line, style='dim', highlight=False, markup=False)
    out.print(_overall_line(summary, failures), highlight=False, markup=False)
    _print_skipped(failures)
    if failed:
        out.print(f'[bold]failed verdicts[/] ({failed}):')
        cut = False
        for (record, name), reason in failures.shown.items():
            head = f'  {record} · {name} · '
            if failures.full:  # every word, each part of the reason wrapped to the width on its own lines
                first, *rest = reason.split('\n')
                lines = _wrap(head + first.strip(), _WIDTH, subsequent_indent='    ')
                for part in rest:
                    lines += _wrap(part.strip(), _WIDTH, initial_indent='    ', subsequent_indent='    ')
            else:
                line = head + reason
                if len(line) > _WIDTH:
                    line, cut = line[: _WIDTH - 3] + '...', True
                lines = [line]
            for line in lines:
                out.print(line, highlight=False, markup=False)
        if cut:
            out.print('  (reasons cut to one line: --verbose prints them in full)', highlight=False, markup=False)
        if failed > len(failures.shown):
            more = failed - len(failures.shown)
            out.print(f'  and {more} more (--verbose lists them all)', highlight=False, markup=False)
    elif stopped is None:
        out.print('no failed verdicts')
    if failures.explained:
        out.print(f'[bold]why each score is below 1.00[/] ({len(failures.explained)} record(s)):')
        for head, lines in failures.explained.items():
            out.print(f'  {head}', highlight=False, markup=False)
            for line in lines:
                for part in _wrap(line, _WIDTH, initial_indent='    ', subsequent_indent='      '):
                    out.print(part, highlight=False, markup=False)
    _print_not_run(failures)


def _print_skipped(failures: _Failures) -> None:
    """The judges that did not run on some records, with their most common reason, judges with the same
    reason and count on one line (the LLM judges that had no model are `_print_not_run`'s)."""
    groups: dict[tuple[str, int, int], list[str]] = {}
    for name, whys in failures.skipped.items():
        why, n = whys.most_common(1)[0]
        if why != NO_JUDGE_MODEL:
            groups.setdefault((why, n, sum(whys.values()) - n), []).append(name)
    if not groups:
        return
    out.print('[bold]skipped[/] (the judge does not apply there):')
    for (why, n, others), names in groups.items():
        more = f' (and {others} record(s) for other reasons)' if others else ''
        line = f'  {", ".join(names)}: {n} record(s): {why}{more}'
        for part in _wrap(line, _WIDTH, subsequent_indent='    '):
            out.print(part, highlight=False, markup=False)


def _print_not_run(failures: _Failures) -> None:
    """One line per LLM judge that did not run for want of a model, then how to name one."""
    names = [n for n, whys in failures.skipped.items() if NO_JUDGE_MODEL in whys]
    if not names:
        return
    out.print('[bold]LLM judges not run[/] (no judge model named):')
    for name in names:
        out.print(f'  {name}: needs a judge model', highlight=False, markup=False)
    for line in _NAME_A_MODEL:
        out.print(line, highlight=False, markup=False)


# How to name a judge model, printed under the LLM judges that did not run.
_NAME_A_MODEL = (
    'name a model to run them: --model openai:gpt-5.2 (any pydantic-ai model string),',
    '  --base-url URL --model NAME (Ollama, vLLM), or SENSEI_EVAL_MODEL=...;',
    '  --model embedded runs the offline smoke model ("embedded" extra): it checks',
    '  the LLM pipeline, it cannot judge',
)


def _overall_line(summary: RunSummary, failures: _Failures) -> str:
    """The run's overall score beside its coverage; "not judged" when no record has a score."""
    coverage = summary.coverage.label if summary.coverage is not None else 'not judged'
    not_run = sum(1 for whys in failures.skipped.values() if NO_JUDGE_MODEL in whys)
    if summary.mean_overall_score is None:  # no record has a score: no judge gave a verdict
        return 'overall: not judged (no judge gave a pass/fail verdict)'
    line = f'overall score {summary.mean_overall_score:.2f} · {coverage}'
    if not_run:  # the coverage counts the judges that ran: say the LLM judges were not among them
        line = f'overall score {summary.mean_overall_score:.2f} · checks only: {coverage}, {not_run} LLM judge(s) not run'
    unscored = summary.records_judged - summary.records_scored
    if unscored > 0:
        line += f' · {unscored} record(s) not judged'
    if summary.records_partly_judged:
        line += f' · {summary.records_partly_judged} partly judged'
    return line


def _record_label(report: RecordReport) -> str:
    return report.query_id if report.repeat == 1 else f'{report.query_id} (r{report.repeat})'


def _short_reason(result: JudgeResult) -> str:
    """One line: the judge's reasoning, or the first issue's first sentence-like text."""
    texts = [result.reasoning or '']
    for issue in result.issues[:1]:
        texts += [v for k, v in issue.items() if isinstance(v, str) and k != 'source']
    text = next((t for t in texts if ' ' in t.strip()), texts[0] if texts[0] else 'failed')
    return ' '.join(text.split())


def _full_reason(result: JudgeResult) -> str:
    """Every word of why a verdict failed (--verbose): the reasoning, then each issue's text fields."""
    parts = [result.reasoning.strip()] if result.reasoning and result.reasoning.strip() else []
    for issue in result.issues:
        fields = [f'{k}: {v}' for k, v in issue.items() if k not in ('source', 'steps') and v not in (None, '', [])]
        steps = issue.get('steps')
        cited = f' (steps {", ".join(map(str, steps))})' if isinstance(steps, list) and steps else ''
        if fields:
            parts.append('; '.join(fields) + cited)
    return '\n    '.join(parts) or 'failed'


def _print_footer(summary: RunSummary, run_dir: Path, stopped: str | None = None) -> None:
    ran = sum(1 for j in summary.per_judge.values() if j.ok or j.errors or j.inconclusive or j.smoke)
    judges = f'{ran} of {len(summary.judges)}' if ran < len(summary.judges) else str(len(summary.judges))
    calls = (
        f'{summary.model_requests} model request(s), {summary.cache_hits} cached · '
        f'{summary.input_tokens:,} tokens in / {summary.output_tokens:,} out'
        if summary.model_requests or summary.cache_hits or summary.model
        else 'no model requests'
    )
    err.print(f'{summary.records_judged} record(s) judged by {judges} judge(s) · {calls}', highlight=False)
    if summary.truncated_records:
        err.print(
            f'transcripts cut to the token budget: {", ".join(summary.truncated_records)} (see "truncation" in their reports)'
        )
    if summary.load_errors:
        err.print(f'[red]{len(summary.load_errors)} record(s) could not be loaded[/] (listed above)')
    if summary.judge_errors:
        err.print(f'[red]{len(summary.judge_errors)} judge error(s):[/]')
        # after the "first failure" rule stopped the run, its one reason is printed once, not per judge
        shared = [e for e in summary.judge_errors if stopped is not None and e.endswith(stopped)]
        for folded in fold_errors([e for e in summary.judge_errors if e not in shared]):
            for line in _wrap(folded, _WIDTH, initial_indent='  ', subsequent_indent='    '):
                err.print(line, highlight=False, markup=False)
        if shared:
            err.print(f'  {len(shared)} judge(s) not run: {stopped}', highlight=False, markup=False)
    if summary.inconclusive:
        err.print(
            f'[yellow]{len(summary.inconclusive)} verdict(s) inconclusive[/] (the judge answered without judging; '
            'left out of the scores, raw output kept in the reports):'
        )
        for line in summary.inconclusive[:10]:
            err.print(f'  {line}', highlight=False, markup=False)
        if len(summary.inconclusive) > 10:
            err.print(f'  … and {len(summary.inconclusive) - 10} more (summary.json lists them all)', highlight=False)
    err.print(f'reports: {run_dir}/', highlight=False, markup=False)
    # relative to the working directory when it can be (`reports/<run>`), so the command fits the 80 columns
    err.print(f'next: sensei-eval view {_shown_path(run_dir)}', highlight=False, markup=False)


# What makes two error messages "the same" for folding: numbers and long hex runs (ports, request ids,
# timings, attempt counts) are masked before comparing.
_VARYING = re.compile(r'\b[0-9a-f]{8,}\b|\d+(?:\.\d+)?')
# Records and judges named in a folded error line; the rest are counted.
_FOLD_NAMES = 3


def fold_errors(errors: Sequence[str]) -> list[str]:
    """`record: judge: message` lines with near-identical messages folded into one, with a count and the
    records and judges it happened to (one failing server gives one line, not one per call)."""
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for line in errors:
        record, _, rest = line.partition(': ')
        judge, _, why = rest.partition(': ')
        groups.setdefault(_VARYING.sub('#', why or rest), []).append((record, judge, why or rest))
    out = []
    for items in groups.values():
        if len(items) == 1:
            out.append(': '.join(p for p in items[0] if p))
            continue
        records = list(dict.fromkeys(r for r, _, _ in items))
        judges = list(dict.fromkeys(j for _, j, _ in items))
        out.append(f'{len(items)}× {items[0][2]} (records: {_few(records)}; judges: {_few(judges)})')
    return out


def _few(names: Sequence[str]) -> str:
    shown_ = ', '.join(names[:_FOLD_NAMES])
    return shown_ + (f' and {len(names) - _FOLD_NAMES} more' if len(names) > _FOLD_NAMES else '')


def _shown_path(path: Path) -> str:
    """`path` relative to the working directory when it is under it (`reports/<run>`), else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _print_judges() -> None:
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    table.add_column('judge', no_wrap=True)
    table.add_column('groups')
    table.add_column('model', no_wrap=True)
    table.add_column('criteria hash', no_wrap=True)
    for name, cls in JUDGES.items():
        groups = ','.join(g for g, names in GROUPS.items() if name in names and g != 'all') or '-'
        mark = '*' if name in EXTRA_MODES else ''
        table.add_row(name + mark, groups, 'yes' if cls.needs_model else 'no', cls().criteria_hash()[:12])
    print_table(out, table)
    out.print('* beyond the 15 standard failure modes: judges the run against its own instructions')
    out.print('profiles (--profile, or metadata.profile per record):')
    for p in BUILTIN_PROFILES.values():
        out.print(f'  {p.name}: {p.description} Checks: {", ".join(p.checks)}.', highlight=False)
    out.print('group all: every judge above except investigation_score_structured')


@exit_on_missing_extra
def main() -> None:
    app(prog_name='python -m sensei_eval.judge')


if __name__ == '__main__':
    main()
