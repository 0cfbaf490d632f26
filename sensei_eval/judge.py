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
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .cache import JudgeCache
from .evaluators.base import Judge
from .evaluators.registry import EXTRA_MODES, GROUPS, JUDGES, UnknownJudgeError, make_judges
from .models import EMBEDDED_NOTICE, JudgeModel, ModelSetupError, preflight, resolve_model
from .profiles import BUILTIN_PROFILES, Profile, ProfileError, resolve_profile
from .records import QueryRecord, load_datasets
from .reports import EvaluationReport, RunSummary, dump_summary, to_pydantic_evals_report, write_json_atomic
from .runner import JudgeEvent, count_judge_calls, judge_records

__all__ = ('app', 'main')

DEFAULT_DATASET = Path('datasets/sample.jsonl')

app = typer.Typer(add_completion=False, help=__doc__.split('\n\n')[0] if __doc__ else None)
err = Console(stderr=True)
out = Console()


@app.command()
def judge(
    dataset: Annotated[list[Path] | None, typer.Option('--dataset', help='JSONL dataset; repeat for several.')] = None,
    query_id: Annotated[list[str] | None, typer.Option('--query-id', help='Judge only this record; repeatable.')] = None,
    evaluators: Annotated[
        list[str] | None, typer.Option('--evaluators', help='Judge names or groups (mvp, all), comma-separated or repeated.')
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help='Any pydantic-ai model string, e.g. openai:gpt-5.2. Default: $SENSEI_EVAL_MODEL, else the embedded model.'
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help='An OpenAI-compatible server (Ollama, vLLM, llama.cpp); --model names the model there.')
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help='Judge calls in flight at once (default 1 for the embedded model, 4 otherwise).')
    ] = None,
    out_dir: Annotated[Path, typer.Option('--out', help='Where run folders go.')] = Path('reports'),
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
) -> None:
    """Judge rated query histories and write one JSON issue report per record."""
    if list_judges:
        _print_judges()
        return
    try:
        judges = make_judges(evaluators or ['mvp', 'checks'])
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

    run_id = run_id or f'{started:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}'
    run_dir = out_dir / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    cache = None if no_cache else JudgeCache()
    try:
        reports = _run(records, judges, judge_model, run_id, run_dir, concurrency, repeat, cache, run_profile)
    finally:
        if judge_model is not None:
            judge_model.close()

    judge_errors = [f'{r.query_id}: {e}' for r in reports for e in r.errors]
    exit_code = 1 if (load_errors or judge_errors) else 0
    summary = _summary(
        run_id,
        started,
        judge_model,
        judges,
        datasets,
        loaded.records,
        reports,
        load_errors,
        judge_errors,
        repeat,
        cache,
        exit_code,
        run_profile.name,
    )
    write_json_atomic(run_dir / 'summary.json', dump_summary(summary))

    stopped = judge_model.connection.stopped if judge_model else None
    if reports:
        shown = reports if stopped is None else [_shorten_stopped(r, stopped) for r in reports]
        to_pydantic_evals_report(shown, name=run_id).print(include_durations=False, console=out)
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
    try:
        judge_model = resolve_model(model, base_url=base_url, transcript_budget=max_transcript_tokens)
    except ModelSetupError as e:
        err.print(f'[red]error:[/] {e}', highlight=False)
        raise typer.Exit(e.exit_code) from None
    except Exception as e:
        err.print(f'[red]error:[/] cannot set up the judge model: {e}', highlight=False)
        raise typer.Exit(1) from None
    if judge_model.embedded:
        err.print(f'[yellow]note:[/] {EMBEDDED_NOTICE}')
    try:
        asyncio.run(preflight(judge_model))
    except ModelSetupError as e:
        judge_model.close()
        err.print(f'[red]error:[/] {e}', highlight=False)
        raise typer.Exit(e.exit_code) from None
    return judge_model


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


def _summary(
    run_id: str,
    started: datetime,
    judge_model: JudgeModel | None,
    judges: Sequence[Judge],
    datasets: Sequence[Path],
    loaded: Sequence[QueryRecord],
    reports: Sequence[EvaluationReport],
    load_errors: list[str],
    judge_errors: list[str],
    repeat: int,
    cache: JudgeCache | None,
    exit_code: int,
    profile: str,
) -> RunSummary:
    per_judge: dict[str, dict[str, object]] = {}
    for j in judges:
        results = [r.judges[j.name] for r in reports if j.name in r.judges]
        ok = [x for x in results if x.status == 'ok']
        per_judge[j.name] = {
            'criteria_hash': j.criteria_hash(),
            'ok': len(ok),
            'errors': sum(1 for x in results if x.status == 'error'),
            'inconclusive': sum(1 for x in results if x.status == 'inconclusive'),
            'pass_rate': (sum(1 for x in ok if x.passed) / len(ok)) if ok else None,
            'mean_score': (sum(x.score for x in ok if x.score is not None) / len(ok)) if ok else None,
            'input_tokens': sum(x.input_tokens for x in results),
            'output_tokens': sum(x.output_tokens for x in results),
        }
    overall = [r.overall_score for r in reports if r.overall_score is not None]
    all_results = [x for r in reports for x in r.judges.values()]
    return RunSummary(
        run_id=run_id,
        started_at=started,
        finished_at=datetime.now(UTC),
        model=judge_model.name if judge_model else None,
        judges={j.name: j.criteria_hash() for j in judges},
        datasets=[str(d) for d in datasets],
        records_loaded=len(loaded),
        records_judged=len({r.query_id for r in reports}),
        load_errors=load_errors,
        judge_errors=judge_errors,
        inconclusive=[
            f'{r.query_id}: {name}: {r.judges[name].error}' for r in reports for name in r.inconclusive if name in r.judges
        ],
        profile=profile,
        repeat=repeat,
        per_judge=per_judge,
        mean_overall_score=sum(overall) / len(overall) if overall else None,
        input_tokens=sum(x.input_tokens for x in all_results if not x.cached),
        output_tokens=sum(x.output_tokens for x in all_results if not x.cached),
        model_requests=sum(x.requests for x in all_results if not x.cached),
        cache_hits=cache.hits if cache else 0,
        truncated_records=sorted({r.query_id for r in reports if r.truncation is not None}),
        exit_code=exit_code,
    )


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


def main() -> None:
    app(prog_name='python -m sensei_eval.judge')


if __name__ == '__main__':
    main()
