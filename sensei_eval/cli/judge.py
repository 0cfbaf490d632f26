"""`python -m sensei_eval.judge`: judge rated query histories and write issue reports.

A thin layer over the library: the flags become a `judging.run.RunSpec`, `judging.run.run_dataset` runs it
(datasets, judges, model and preflight, fusing, batch or Ray, the run folder, resume, the summary), and
`cli.judge_console` shows it as it goes and when it ends.

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

import warnings
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.markup import escape

from sensei_eval.cli.common import (
    BaseUrlOption,
    EmbeddedThreadsOption,
    ModelOption,
    NoCacheOption,
    OutOption,
    TimeoutOption,
    make_app,
    quiet_third_party,
    setup_telemetry,
    split_names,
)
from sensei_eval.cli.judge_console import JudgeConsole, err, print_judges
from sensei_eval.core.errors import ModelCallError
from sensei_eval.core.extras import MissingExtraError, exit_on_missing_extra
from sensei_eval.core.records import MAX_RECORD_BYTES
from sensei_eval.judging.run import NothingToJudgeError, RayOptions, RunInterrupted, RunSpec, RunUsageError, run_dataset
from sensei_eval.models.judge_model import ModelChoice

__all__ = ('app', 'main')

app = make_app(help=__doc__.split('\n\n')[0] if __doc__ else None)


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
            metavar='NAMES',
            help='Judge names or groups (core, checks, all); comma-separated or repeated. Default: core,checks.',
            show_default=False,
        ),
    ] = None,
    old_judge_names: Annotated[
        list[str] | None, typer.Option('--evaluators', hidden=True, help='The old name of --judges (deprecated).')
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
            help='Transcript budget, tokens (default 60,000; embedded model 250, capped to the context).',
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
            'with +, groups separated by commas, all, or none (each mode alone; e.g. output,methodology). '
            'See docs/fused.md. Default: all (one call per record) when a judge model is named.',
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
        print_judges()
        return
    if old_judge_names:  # the old spelling, accepted for one release
        warnings.warn('--evaluators is deprecated: use --judges', DeprecationWarning, stacklevel=1)
        err.print('[yellow]deprecated:[/] --evaluators is the old name of --judges (accepted for one more release)')
        judge_names = [*(judge_names or []), *old_judge_names]
    spec = RunSpec(
        datasets=dataset or (),
        format=dataset_format,
        query_ids=query_id,
        max_record_bytes=max_record_bytes,
        judges=split_names(judge_names),
        fuse=fuse,
        profile=profile,
        model=ModelChoice(model, base_url, max_transcript_tokens, embedded_threads, timeout),
        concurrency=concurrency,
        repeat=repeat,
        out_dir=out_dir,
        run_id=run_id,
        cache=not no_cache,
        batch=batch,
        ray=RayOptions(ray_address, ray_workers) if ray else None,
    )
    setup_telemetry(err)
    console = JudgeConsole()
    try:
        run = run_dataset(spec, console.hooks())
    except RunUsageError as e:
        _fail(e.problems, 2)
    except NothingToJudgeError as e:
        _fail([str(e)], 1)
    except MissingExtraError:
        raise  # one plain line with the pip command, printed by the entry point (`exit_on_missing_extra`)
    except ModelCallError as e:  # the model cannot be used (a missing key, an unreachable server, no Batch API)
        console.stop_progress()
        _fail([str(e)], getattr(e, 'exit_code', 1))
    except RunInterrupted as e:
        raise typer.Exit(console.interrupted(e)) from None
    except BaseException:
        console.stop_progress()
        raise
    raise typer.Exit(console.show(run, verbose=verbose))


def _fail(lines: list[str], code: int) -> NoReturn:
    """Each line an error (markup escaped), then the exit code."""
    for line in lines:
        err.print(f'[red]error:[/] {escape(line)}', highlight=False)
    raise typer.Exit(code)


@exit_on_missing_extra
def main() -> None:
    app(prog_name='python -m sensei_eval.judge')


if __name__ == '__main__':
    main()
