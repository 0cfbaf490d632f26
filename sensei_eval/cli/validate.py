"""`python -m sensei_eval.validate`: compare an old and a new prompt (or two judge runs) and gate on it.

Two modes:

* `--old-prompt OLD --new-prompt NEW --agent MODULE:FACTORY --dataset QUERIES.jsonl`: run the agent on
  every query R times under each prompt, judge every run J times with the same judges, compare;
* `--old-reports RUN_DIR --new-reports RUN_DIR`: compare two finished judge runs, no agent.

A thin layer over `validate.run` / `validate.compare`. Writes `comparison.json` (every number) and
`comparison.md` (for a pull-request comment) to `--out`, plus the judge reports `old/` and `new/` when it
ran the agent. Two judge runs whose judges differ are refused (exit 2) unless `--common-judges`, which
compares only the judges both ran. Prints the comparison table (and pydantic-evals' per-case before/after table with
`--cases`) on stdout, progress on stderr.

Exit codes: 0 no significant regression (or only in modes named by --allow, reported as warnings); 1 a
metric regressed significantly in any mode (its flips or its scores, whatever the overall score did), the
overall mean dropped more than --max-drop and the drop is significant in the --alpha family (a drop it does
not reject is a warning), a metric could not be compared, or errors exceeded --max-error-rate; 2 usage or
input errors (nothing is run then).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, NamedTuple

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from sensei_eval.agents.components import ComponentsError, PromptComponents, load_components
from sensei_eval.agents.runner import AgentRunner, AgentRuns, Query, load_queries, load_runner
from sensei_eval.cli.common import (
    BaseUrlOption,
    JudgesOption,
    ModelFlags,
    ModelOption,
    NoCacheOption,
    TimeoutOption,
    make_app,
    make_console,
    quiet_third_party,
    setup_judge_model,
    setup_telemetry,
    shown,
    split_names,
)
from sensei_eval.core.errors import InputError, describe_error
from sensei_eval.core.evaluator_outputs import to_pydantic_evals_report
from sensei_eval.core.extras import exit_on_missing_extra
from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.registry import UnknownJudgeError, make_judges
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.record import JudgeEvent
from sensei_eval.judging.run_folder import RunFolder, RunFolderError
from sensei_eval.judging.view import write_view
from sensei_eval.models.judge_model import JudgeModel, preflight, resolve_model
from sensei_eval.validate import stats
from sensei_eval.validate.compare import JudgeSetError, Resampling, compare_reports
from sensei_eval.validate.gate import EXIT_INPUT_ERROR
from sensei_eval.validate.render import print_comparison, to_markdown
from sensei_eval.validate.results import Comparison, Thresholds
from sensei_eval.validate.run import RunEvent, ValidateOptions, validate_prompts

__all__ = ('app', 'load_report_dir', 'main', 'write_outputs')

app = make_app(help=__doc__.split('\n\n')[0] if __doc__ else None)
err = make_console(stderr=True)
out = make_console()


@app.command()
def validate(
    old_prompt: Annotated[
        str | None,
        typer.Option(
            '--old-prompt',
            help='Old prompt: a prompts module (dotted or .py, also in a git worktree), YAML components, a text file, '
            "or an optimizer run's prompts.py/.yaml/.txt.",
        ),
    ] = None,
    new_prompt: Annotated[str | None, typer.Option('--new-prompt', help='New prompt, same forms as --old-prompt.')] = None,
    agent: Annotated[
        str | None, typer.Option('--agent', help='MODULE:FACTORY: an Agent, an AgentRunner, or a factory taking the prompt.')
    ] = None,
    dataset: Annotated[
        Path | None, typer.Option('--dataset', help='JSONL of queries ({query_id, query} lines or full records).')
    ] = None,
    old_reports: Annotated[Path | None, typer.Option('--old-reports', help='A finished judge run folder (old side).')] = None,
    new_reports: Annotated[Path | None, typer.Option('--new-reports', help='A finished judge run folder (new side).')] = None,
    runs: Annotated[int, typer.Option('--runs', min=1, help='Agent runs per query and prompt (measures agent noise).')] = 1,
    judge_repeats: Annotated[
        int, typer.Option('--judge-repeats', min=1, help='Judgings of every transcript (measures judge noise).')
    ] = 1,
    judges: JudgesOption = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    timeout: TimeoutOption = None,
    out_dir: Annotated[Path | None, typer.Option('--out', help='Output folder (default reports/validate-<timestamp>).')] = None,
    alpha: Annotated[float, typer.Option(min=0.0001, max=0.5, help='Family-wise significance level (Tarone–Holm).')] = 0.05,
    max_drop: Annotated[float, typer.Option('--max-drop', min=0.0, max=1.0, help='Tolerated overall drop (in-family).')] = 0.05,
    min_effect: Annotated[
        float, typer.Option('--min-effect', min=0.0, max=1.0, help='Smallest |Δ| that counts as a change.')
    ] = 0.0,
    max_error_rate: Annotated[
        float, typer.Option('--max-error-rate', min=0.0, max=1.0, help='Tolerated fraction of failed agent runs / judge calls.')
    ] = 0.0,
    seed: Annotated[int, typer.Option(help='Seed of the bootstrap and permutation resampling.')] = 0,
    bootstrap: Annotated[int, typer.Option(min=100, help='Bootstrap resamples.')] = stats.DEFAULT_BOOTSTRAP,
    permutations: Annotated[int, typer.Option(min=100, help='Permutation-test resamples.')] = stats.DEFAULT_PERMUTATIONS,
    agent_concurrency: Annotated[int, typer.Option(min=1, help='Agent runs in flight at once.')] = 4,
    concurrency: Annotated[int | None, typer.Option(min=1, help='Judge calls in flight at once.')] = None,
    no_cache: NoCacheOption = False,
    cases: Annotated[
        bool, typer.Option('--cases/--no-cases', help="Also print pydantic-evals' per-case before/after table.")
    ] = False,
    common_judges: Annotated[
        bool,
        typer.Option('--common-judges', help='Runs with different judges: compare only the judges both ran (else exit 2).'),
    ] = False,
    allow: Annotated[
        list[str] | None,
        typer.Option(
            '--allow',
            help='A failure mode (or metric, mode/judge) allowed to regress: reported as a warning, not gated. Repeatable.',
        ),
    ] = None,
) -> None:
    """Compare the old and the new prompt (or two judge runs) per failure mode, and gate on regressions."""
    quiet_third_party()
    allowed = tuple(n.strip() for value in allow or () for n in value.split(',') if n.strip())  # `a,b` or repeated
    thresholds = Thresholds(alpha=alpha, max_drop=max_drop, min_effect=min_effect, max_error_rate=max_error_rate, allow=allowed)
    resampling = Resampling(seed, bootstrap, permutations)
    started = datetime.now(UTC)
    out_dir = out_dir or Path('reports') / f'validate-{started:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}'
    agent_mode = [old_prompt, new_prompt, agent, dataset]
    try:
        if old_reports is not None or new_reports is not None:
            if any(x is not None for x in agent_mode):
                raise InputError(
                    'give either --old-reports/--new-reports or --old-prompt/--new-prompt/--agent/--dataset, not both'
                )
            if old_reports is None or new_reports is None:
                raise InputError('--old-reports and --new-reports go together')
            if runs != 1 or judge_repeats != 1 or judges:
                raise InputError('--runs, --judge-repeats and --judges apply when running the agent, not to finished reports')
            comparison, old, new = _compare_runs(old_reports, new_reports, thresholds, resampling, common_judges)
        elif old_prompt is not None and new_prompt is not None and agent is not None and dataset is not None:
            setup = _setup(old_prompt, new_prompt, agent, dataset, split_names(judges))
            setup_telemetry(err)
            judge_model = _judge_model(setup[4], model, base_url, timeout)
            settings = ValidateOptions(thresholds, resampling, out_dir, run_id=out_dir.name)
            judging = _Judging(judge_model, not no_cache, concurrency, judge_repeats)
            comparison = _compare_prompts(setup, judging, settings, runs, agent_concurrency)
            old, new = _load_sides(out_dir) if cases else ([], [])
        else:
            raise _missing_agent_options(agent_mode)
    except InputError as e:
        err.print(f'[red]error:[/] {e}', highlight=False, soft_wrap=True)  # one line per message line, unwrapped
        raise typer.Exit(EXIT_INPUT_ERROR) from None
    write_outputs(comparison, out_dir)
    _print_outputs(comparison, out_dir, old, new, cases=cases)
    sides = [old_reports, new_reports] if old_reports is not None else [out_dir / 'old', out_dir / 'new']
    _write_side_by_side_view([p for p in sides if p is not None], out_dir, comparison)
    raise typer.Exit(comparison.exit_code)


def _compare_runs(
    old_reports: Path,
    new_reports: Path,
    thresholds: Thresholds,
    resampling: Resampling,
    common_judges: bool,
) -> tuple[Comparison, list[RecordReport], list[RecordReport]]:
    """Report mode: two finished judge run folders compared (and their reports, for the per-case table)."""
    old = load_report_dir(old_reports, '--old-reports')
    new = load_report_dir(new_reports, '--new-reports')
    try:
        comparison = compare_reports(old, new, thresholds=thresholds, resampling=resampling, common_judges=common_judges)
    except JudgeSetError as e:
        raise InputError(str(e)) from None
    comparison.old.source, comparison.new.source = str(old_reports), str(new_reports)
    return comparison, old, new


class _Judging(NamedTuple):
    """How agent mode judges: the judge model (None: checks only), the cache on or off, calls in flight,
    judgings of every transcript."""

    model: JudgeModel | None
    cache: bool
    concurrency: int | None
    repeat: int


def _compare_prompts(
    setup: _Setup, judging: _Judging, settings: ValidateOptions, runs: int, agent_concurrency: int
) -> Comparison:
    """Agent mode: the agent run under both prompts, judged and compared; the judge model closed after."""
    try:
        cache = JudgeCache() if judging.cache else None
        options = JudgeRunOptions(setup[4], judging.model, cache=cache, concurrency=judging.concurrency, repeat=judging.repeat)
        return _run(setup, options, settings, runs, agent_concurrency)
    finally:
        if judging.model is not None:
            judging.model.close()


def _load_sides(out_dir: Path) -> tuple[list[RecordReport], list[RecordReport]]:
    """The reports agent mode wrote for each prompt (for the per-case table)."""
    return load_report_dir(out_dir / 'old', 'old'), load_report_dir(out_dir / 'new', 'new')


def _missing_agent_options(agent_mode: Sequence[object]) -> InputError:
    names = ('--old-prompt', '--new-prompt', '--agent', '--dataset')
    missing = [n for n, x in zip(names, agent_mode, strict=True) if x is None]
    return InputError(
        'give --old-prompt, --new-prompt, --agent and --dataset (missing: ' + ', '.join(missing) + '), '
        'or --old-reports and --new-reports'
    )


def _print_outputs(
    comparison: Comparison, out_dir: Path, old: list[RecordReport], new: list[RecordReport], *, cases: bool
) -> None:
    """The per-case table (`--cases`), the comparison, and where its files are."""
    if cases and (old or new):
        with out.wide():  # pydantic-evals' table, whole in a CI log
            to_pydantic_evals_report(new, name='new').print(
                baseline=to_pydantic_evals_report(old, name='old'), console=out, include_durations=False
            )
    print_comparison(comparison, out)
    err.print(f'comparison: {out_dir}/comparison.json, {out_dir}/comparison.md', highlight=False)


def _write_side_by_side_view(sides: list[Path], out_dir: Path, comparison: Comparison) -> None:
    """The two runs side by side, as one HTML file with this gate's decision on it (an extra: the gate's
    verdict stands without it)."""
    if len(sides) == 2 and all(p.is_dir() for p in sides):
        try:
            err.print(f'view: {write_view(sides, out_dir / "view.html", gate=comparison)}', highlight=False, markup=False)
        except (OSError, ValueError) as e:
            err.print(f'[yellow]warning:[/] no view.html: {e}', highlight=False)


def write_outputs(comparison: Comparison, out_dir: Path) -> None:
    """`comparison.json` (every number) and `comparison.md` (the pull-request comment) in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / 'comparison.json', comparison.model_dump_json(indent=2))
    write_text_atomic(out_dir / 'comparison.md', to_markdown(comparison))


def load_report_dir(path: Path, option: str) -> list[RecordReport]:
    """Every report of a judge run folder (`RunFolder.load_reports`: `records/*.json`, or the top-level
    reports of a folder written before `records/`); an unusable folder or file is an `InputError` naming it."""
    if not path.exists():
        raise InputError(f'{option}: no such folder: {path}')
    try:
        return RunFolder(path).load_reports(require=True)
    except RunFolderError as e:
        raise InputError(f'{option}: {e}') from None


# ---------------------------------------------------------------------------------------------------
# Agent mode


_Setup = tuple[PromptComponents, PromptComponents, AgentRunner, list[Query], list[Judge]]


def _setup(old_prompt: str, new_prompt: str, agent: str, dataset: Path, judge_names: Sequence[str]) -> _Setup:
    """Everything the user gave, checked before anything runs: each problem is an `InputError`."""
    try:
        judges = make_judges(judge_names)
    except UnknownJudgeError as e:
        raise InputError(f'--judges: {e}') from None
    prompts: list[PromptComponents] = []
    for option, source in (('--old-prompt', old_prompt), ('--new-prompt', new_prompt)):
        try:
            prompts.append(load_components(source))
        except ComponentsError as e:
            raise InputError(f'{option}: {e}') from None
        except Exception as e:  # importing a prompts module runs its code
            raise InputError(f'{option}: cannot load {source!r}: {describe_error(e)}') from None
    if not dataset.is_file():
        raise InputError(f'--dataset: no such file: {dataset}')
    queries, errors = load_queries(dataset)
    if errors:
        raise InputError(f'--dataset: {len(errors)} unusable line(s):\n  ' + '\n  '.join(str(e) for e in errors))
    if not queries:
        raise InputError(f'--dataset: no queries in {dataset}')
    try:
        runner = load_runner(agent)
    except ValueError as e:
        raise InputError(f'--agent: {e}') from None
    except Exception as e:  # the factory itself failed
        raise InputError(f'--agent: {agent} failed: {describe_error(e)}') from None
    return prompts[0], prompts[1], runner, queries, judges


def _judge_model(
    judges: Sequence[Judge], model: str | None, base_url: str | None, timeout: float | None = None
) -> JudgeModel | None:
    if not any(j.needs_model for j in judges):
        return None
    # a problem is printed and exits as an input error; this module's names, so tests can replace them
    flags = ModelFlags(model, base_url, timeout=timeout)
    return setup_judge_model(flags, err=err, fail_code=EXIT_INPUT_ERROR, resolve=resolve_model, check=preflight)


def _progress_bars() -> Progress:
    """One bar per stage (running each side, judging each side), with the item in progress."""
    columns = (BarColumn(), MofNCompleteColumn(), TextColumn('{task.description}'), TimeElapsedColumn())
    return Progress(TextColumn('[bold]{task.fields[stage]}'), *columns, console=err, transient=False)


def _run(setup: _Setup, options: JudgeRunOptions, validate: ValidateOptions, runs: int, agent_concurrency: int) -> Comparison:
    """The agent runs and judging with a bar per stage; each bar ends on what its stage really did (a bar
    counted ahead from the judges and profiles never stops short of its total)."""
    old, new, runner, queries, _ = setup
    with _progress_bars() as progress:
        agent_task = progress.add_task('', total=2 * len(queries) * runs, stage='agent runs')
        judge_tasks: dict[str, TaskID] = {}

        def on_run(event: RunEvent) -> None:
            mark = 'error' if event.error else 'ok'
            text = shown(f'{event.side} · {event.query_id} · run {event.run} · {mark}')  # markup to Rich: ids are text
            progress.update(agent_task, advance=1, description=text)

        def on_judging(side: str, total: int) -> None:
            judge_tasks[side] = progress.add_task('', total=total, stage=f'judging {side}')

        def on_judge(side: str, event: JudgeEvent) -> None:
            mark = 'cached' if event.result.cached else event.result.status
            text = shown(f'{event.query_id} · {event.result.judge} · {mark}')
            progress.update(judge_tasks[side], advance=1, description=text)

        comparison = asyncio.run(
            validate_prompts(
                old,
                new,
                AgentRuns(runner, runs, agent_concurrency, on_run),
                queries,
                options,
                validate,
                on_judge=on_judge,
                on_judging=on_judging,
            )
        )
        for task in progress.tasks:
            progress.update(task.id, total=task.completed, description='')
        return comparison


@exit_on_missing_extra
def main() -> None:
    app(prog_name='python -m sensei_eval.validate')
