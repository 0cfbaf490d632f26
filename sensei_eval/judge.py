"""`python -m sensei_eval.judge`: judge rated query histories and write issue reports.

A thin layer over the library: load datasets (`records`), pick judges (`evaluators.registry`), resolve
the model (`models`), run (`runner`), write and show reports (`reports`).

Exit codes: 0 when every record loaded and every judge ran (issues found are not errors); 1 when any
record failed to load, an asked-for query id was not found, or any judge errored — everything else is
still judged and written; 1 too when there is nothing to judge (an empty, blank or BOM-only dataset,
no loadable record, or every record filtered out) and when the judge model's server cannot be reached
(checked once before judging: `models.preflight`); 2 for usage errors, including a model string
without a provider prefix, an unknown provider, or a missing or rejected API key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .cache import JudgeCache
from .cli import BaseUrlOption, ModelOption, OutOption, make_app, quiet_third_party, setup_judge_model, split_names
from .data import SAMPLE_DATASET
from .evaluators.base import Judge
from .evaluators.registry import EXTRA_MODES, GROUPS, JUDGES, UnknownJudgeError, make_judges
from .extras import exit_on_missing_extra
from .models import JudgeModel, preflight, resolve_model
from .profiles import BUILTIN_PROFILES, Profile, ProfileError, resolve_profile
from .records import QueryRecord, load_datasets
from .reports import EvaluationReport, JudgeResult, RunSummary, to_pydantic_evals_report
from .run_folder import RunFolder
from .runner import JudgeEvent, count_judge_calls, judge_records

__all__ = ('app', 'main')

DEFAULT_DATASET = SAMPLE_DATASET  # the packaged sample (sensei_eval/data/), found wherever the command runs

app = make_app(help=__doc__.split('\n\n')[0] if __doc__ else None)
err = Console(stderr=True)
out = Console()


@app.command()
def judge(
    dataset: Annotated[list[Path] | None, typer.Option('--dataset', help='JSONL dataset; repeat for several.')] = None,
    query_id: Annotated[list[str] | None, typer.Option('--query-id', help='Judge only this record; repeatable.')] = None,
    judge_names: Annotated[
        list[str] | None,
        typer.Option(
            '--judges',
            '--evaluators',
            help='Judge names or groups (mvp, checks, all); comma-separated or repeated. '
            'Default: mvp,checks. --evaluators is the old name.',
            show_default=False,
        ),
    ] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help='Judge calls in flight at once (default 1 for the embedded model, 4 otherwise).')
    ] = None,
    out_dir: OutOption = Path('reports'),
    repeat: Annotated[int, typer.Option(min=1, help='Judge every record N times (to measure judge noise).')] = 1,
    no_cache: Annotated[bool, typer.Option('--no-cache', help='Ignore and do not write the on-disk judge cache.')] = False,
    run_id: Annotated[str | None, typer.Option(help='Name of the run folder (default: a timestamp).')] = None,
    max_transcript_tokens: Annotated[
        int | None, typer.Option(min=200, help="Transcript budget (default: fits the model's context).")
    ] = None,
    profile: Annotated[
        str,
        typer.Option(
            help='Agent profile: which checks fit this agent (default, docs-agent, tarsy, or a YAML/TOML file). '
            "A record's metadata.profile overrides it."
        ),
    ] = 'default',
    list_judges: Annotated[bool, typer.Option('--list', help='List the judges and groups, then exit.')] = False,
    verbose: Annotated[
        bool, typer.Option('--verbose', '-v', help="Also print pydantic-evals' per-record table of every score.")
    ] = False,
) -> None:
    """Judge rated query histories and write one JSON issue report per record."""
    quiet_third_party()
    if list_judges:
        _print_judges()
        return
    try:
        judges = make_judges(split_names(judge_names))
    except UnknownJudgeError as e:
        err.print(f'[red]error:[/] {e}')
        raise typer.Exit(2) from None
    try:
        run_profile = resolve_profile(profile)
    except ProfileError as e:
        err.print(f'[red]error:[/] {e}', highlight=False)
        raise typer.Exit(2) from None
    datasets = dataset or [DEFAULT_DATASET]
    missing = [p for p in datasets if not p.is_file()]
    if missing:
        err.print(f'[red]error:[/] no such dataset: {", ".join(map(str, missing))}')
        raise typer.Exit(2)

    started = datetime.now(UTC)
    loaded = load_datasets(datasets)
    load_errors = [str(e) for e in loaded.errors]
    for message in load_errors:
        err.print(f'[red]bad record:[/] {message}', highlight=False)
    records = loaded.records
    if query_id:
        wanted = list(dict.fromkeys(query_id))
        known = {r.query_id for r in records}
        for q in wanted:
            if q not in known:
                load_errors.append(f'query id {q!r} not found in {", ".join(map(str, datasets))}')
                err.print(f'[red]error:[/] query id {q!r} not found in the dataset(s)', highlight=False)
        records = [r for r in records if r.query_id in wanted]
    if not records:
        err.print(f'[red]error:[/] nothing to judge: {_why_nothing(datasets, loaded.records, load_errors)}', highlight=False)
        raise typer.Exit(1)

    judge_model: JudgeModel | None = None
    if any(j.needs_model for j in judges):
        judge_model = _judge_model(model, base_url, max_transcript_tokens)

    folder = RunFolder.create(out_dir, run_id)
    run_id, run_dir = folder.run_id, folder.path
    cache = None if no_cache else JudgeCache()
    try:
        reports = _run(records, judges, judge_model, run_id, run_dir, concurrency, repeat, cache, run_profile)
    finally:
        if judge_model is not None:
            judge_model.close()

    summary = RunSummary.build(
        run_id,
        reports,
        judges,
        started_at=started,
        model=judge_model.name if judge_model else None,
        datasets=datasets,
        records_loaded=len(loaded.records),
        load_errors=load_errors,
        repeat=repeat,
        cache_hits=cache.hits if cache else 0,
        profile=run_profile.name,
    )
    folder.write_summary(summary)
    exit_code = summary.exit_code

    stopped = judge_model.connection.stopped if judge_model else None
    if reports and verbose:
        shown = reports if stopped is None else [_shorten_stopped(r, stopped) for r in reports]
        to_pydantic_evals_report(shown, name=run_id).print(include_durations=False, console=out)
    if reports:
        _print_compact(reports, judges, stopped)
    _print_footer(summary, run_dir, stopped)
    raise typer.Exit(exit_code)


def _shorten_stopped(report: EvaluationReport, stopped: str) -> EvaluationReport:
    """For the table: judges the "first failure" rule stopped say so briefly; the footer gives the reason once."""
    judges = {
        name: r.model_copy(update={'error': 'not run (judge model unreachable, see below)'}) if r.error == stopped else r
        for name, r in report.judges.items()
    }
    return report.model_copy(update={'judges': judges})


def _why_nothing(datasets: Sequence[Path], loaded: Sequence[QueryRecord], load_errors: Sequence[str]) -> str:
    names = ', '.join(map(str, datasets))
    if loaded:
        return f'no record of {names} matches --query-id'
    if load_errors:
        return f'no record of {names} could be loaded ({len(load_errors)} error(s), listed above)'
    return f'{names} has no records (the file is empty or blank)' if len(datasets) == 1 else f'{names} have no records'


def _judge_model(model: str | None, base_url: str | None, max_transcript_tokens: int | None) -> JudgeModel:
    """Resolve the judge model and check, with one request, that it answers; a problem ends the run here."""
    # this module's names, so tests can replace them here
    return setup_judge_model(
        model, base_url, err=err, transcript_budget=max_transcript_tokens, resolve=resolve_model, check=preflight
    )


def _run(
    records: Sequence[QueryRecord],
    judges: Sequence[Judge],
    judge_model: JudgeModel | None,
    run_id: str,
    run_dir: Path,
    concurrency: int | None,
    repeat: int,
    cache: JudgeCache | None,
    profile: Profile,
) -> list[EvaluationReport]:
    total = repeat * count_judge_calls(records, judges, profile)
    with Progress(
        TextColumn('[bold]judging'), BarColumn(), MofNCompleteColumn(), TextColumn('{task.description}'), TimeElapsedColumn(),
        console=err, transient=False, disable=total == 0,
    ) as progress:  # fmt: skip
        task = progress.add_task('', total=total)

        def on_judge(event: JudgeEvent) -> None:
            mark = 'cached' if event.result.cached else event.result.status
            progress.update(task, advance=1, description=f'{event.query_id} · {event.result.judge} · {mark}')

        return asyncio.run(
            judge_records(
                records, judges, judge_model, run_id=run_id, run_dir=run_dir, concurrency=concurrency,
                repeat=repeat, cache=cache, on_judge=on_judge, profile=profile,
            )
        )  # fmt: skip


def _print_compact(reports: Sequence[EvaluationReport], judges: Sequence[Judge], stopped: str | None) -> None:
    """The run at a glance: one row per judge, then each failed verdict as record · judge · short reason.
    Errors and inconclusive verdicts are counted here and listed by the footer."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False, title='judges', title_justify='left', title_style='bold')
    table.add_column('judge', overflow='fold')
    for column in ('ok', 'pass', 'score', 'err', 'inc'):
        table.add_column(column, justify='right', no_wrap=True)
    failures: list[tuple[str, str, str]] = []
    for j in judges:
        results = [(r, r.judges[j.name]) for r in reports if j.name in r.judges]
        ok = [x for _, x in results if x.status == 'ok']
        scores = [x.score for x in ok if x.score is not None]
        table.add_row(
            j.name,
            str(len(ok)),
            f'{sum(1 for x in ok if x.passed) / len(ok):.0%}' if ok else '-',
            f'{sum(scores) / len(scores):.2f}' if scores else '-',
            str(sum(1 for _, x in results if x.status == 'error')),
            str(sum(1 for _, x in results if x.status == 'inconclusive')),
        )
        failures += [(_record_label(r), j.name, _short_reason(x)) for r, x in results if x.status == 'ok' and x.passed is False]
    out.print(table)
    if failures:
        out.print(f'[bold]failed verdicts[/] ({len(failures)}):')
        width = max(40, out.width)
        for record, name, reason in failures:
            line = f'  {record} · {name} · {reason}'
            if len(line) > width:
                line = line[: width - 1] + '…'
            out.print(line, highlight=False, markup=False, soft_wrap=True)
    elif stopped is None:
        out.print('no failed verdicts')


def _record_label(report: EvaluationReport) -> str:
    return report.query_id if report.repeat == 1 else f'{report.query_id} (r{report.repeat})'


def _short_reason(result: JudgeResult) -> str:
    """One line: the judge's reasoning, or the first issue's first sentence-like text."""
    texts = [result.reasoning or '']
    for issue in result.issues[:1]:
        texts += [v for k, v in issue.items() if isinstance(v, str) and k != 'source']
    text = next((t for t in texts if ' ' in t.strip()), texts[0] if texts[0] else 'failed')
    return ' '.join(text.split())


def _print_footer(summary: RunSummary, run_dir: Path, stopped: str | None = None) -> None:
    err.print(
        f'{summary.records_judged} record(s) judged by {len(summary.judges)} judge(s) · '
        f'{summary.model_requests} model request(s), {summary.cache_hits} cached · '
        f'{summary.input_tokens:,} tokens in / {summary.output_tokens:,} out',
        highlight=False,
    )
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
        for e in summary.judge_errors:
            if e not in shared:
                err.print(f'  {e}', highlight=False)
        if shared:
            err.print(f'  {len(shared)} judge(s) not run: {stopped}', highlight=False)
    if summary.inconclusive:
        err.print(
            f'[yellow]{len(summary.inconclusive)} verdict(s) inconclusive[/] (the judge answered without judging; '
            'left out of the scores, raw output kept in the reports):'
        )
        for line in summary.inconclusive[:10]:
            err.print(f'  {line}', highlight=False)
        if len(summary.inconclusive) > 10:
            err.print(f'  … and {len(summary.inconclusive) - 10} more (summary.json lists them all)', highlight=False)
    err.print(f'reports: {run_dir}/', highlight=False)


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
    out.print(table)
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
