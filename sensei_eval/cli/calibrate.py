"""`sensei-eval calibrate`: the command over `validate.calibrate` (labels, a judge run or a benchmark, the printed figures)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sensei_eval.cli.common import ModelFlags, make_app, make_console, print_table, setup_judge_model, split_names
from sensei_eval.core.extras import exit_on_missing_extra
from sensei_eval.core.files import write_text_atomic
from sensei_eval.data import BENCHMARKS
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.validate.calibrate import CalibrationResult, JudgeAgreement, OutcomeCalibration, calibrate

app = make_app(help='Compare a judge run with labels: how well the judges predict failed runs and agree with labels.')


@app.command()
def main(
    reports: Annotated[Path | None, typer.Option('--reports', help='A judge run folder (reports/<run-id>).')] = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            '--labels',
            help='JSONL labels: query_id with failure_mode + label, and/or outcome, passed, reward, rating, '
            'mistake_step, mistake_agent (other keys ignored).',
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help='Where to write the JSON (default RUN_DIR/calibration.json).')] = None,
    reward_threshold: Annotated[
        float, typer.Option('--reward-threshold', help='A run whose `reward` is below this failed (0 < T ≤ 1).')
    ] = 1.0,
    step_base: Annotated[
        int | None,
        typer.Option(
            '--step-base',
            help='Read mistake_step as a message index from 0 or 1 (Who&When: 0). Default: transcript step numbers.',
        ),
    ] = None,
    benchmark: Annotated[
        str | None,
        typer.Option(
            '--benchmark',
            help=f'Judge labelled runs, then compare: a shipped set ({", ".join(BENCHMARKS)}) or a folder '
            'with records.jsonl and labels.jsonl. Replaces --reports/--labels.',
        ),
    ] = None,
    judge_names: Annotated[
        list[str] | None, typer.Option('--judges', help='With --benchmark: judges to measure (default core,checks).')
    ] = None,
    model: Annotated[str | None, typer.Option(help='With --benchmark: the judge model (default as `judge`).')] = None,
    base_url: Annotated[str | None, typer.Option('--base-url', help='With --benchmark: OpenAI-compatible server.')] = None,
    limit: Annotated[int | None, typer.Option(min=1, help='With --benchmark: judge only the first N runs.')] = None,
    run_dir: Annotated[
        Path | None, typer.Option('--run-dir', help='With --benchmark: where the judged runs go (default: a temp folder).')
    ] = None,
) -> None:
    """Compare a judge run with labels: outcome AUROC/F1, accuracy, Cohen's κ, Spearman ρ, step accuracy, noise."""
    console = make_console()
    if benchmark is not None:
        _benchmark(benchmark, judge_names, model, base_url, limit, run_dir, console)
        return
    if reports is None or labels is None:
        console.print('[red]error:[/] give --reports and --labels, or --benchmark')
        raise typer.Exit(2)
    if not reports.is_dir():
        console.print(f'[red]error:[/] no run folder at {reports}')
        raise typer.Exit(2)
    if not labels.is_file():
        console.print(f'[red]error:[/] no label file at {labels}')
        raise typer.Exit(2)
    if not 0 < reward_threshold <= 1:
        console.print(f'[red]error:[/] --reward-threshold must be in (0, 1], got {reward_threshold}')
        raise typer.Exit(2)
    if step_base not in (None, 0, 1):
        console.print(f'[red]error:[/] --step-base must be 0 or 1, got {step_base}')
        raise typer.Exit(2)
    result = calibrate(reports, labels, reward_threshold=reward_threshold, step_base=step_base)
    _print_result(result, console)
    target = out or reports / 'calibration.json'
    write_text_atomic(target, json.dumps(result.model_dump(mode='json'), indent=2))
    console.print(f'written: {target}')
    raise typer.Exit(1 if result.problems else 0)


def _benchmark(
    name: str,
    judge_names: list[str] | None,
    model: str | None,
    base_url: str | None,
    limit: int | None,
    run_dir: Path | None,
    console: Console,
) -> None:
    """Judge a labelled benchmark with the chosen judges and print how they agree with its labels, beside
    the checks alone and the always-fail baseline: measure a judge model before trusting it."""
    from sensei_eval.core.datasets import load_dataset
    from sensei_eval.evaluators.registry import UnknownJudgeError, make_judges
    from sensei_eval.judging.options import JudgeRunOptions
    from sensei_eval.judging.runner import judge_records

    folder = BENCHMARKS.get(name) or Path(name)
    records_file, labels_file = folder / 'records.jsonl', folder / 'labels.jsonl'
    if not records_file.is_file() or not labels_file.is_file():
        known = ', '.join(BENCHMARKS)
        console.print(
            f'[red]error:[/] {name!r} is neither a shipped benchmark ({known}) nor a folder with records.jsonl and labels.jsonl'
        )
        raise typer.Exit(2)
    try:
        judges = make_judges(split_names(judge_names))
    except UnknownJudgeError as e:
        console.print(f'[red]error:[/] {e}')
        raise typer.Exit(2) from None
    loaded = load_dataset(records_file)
    for error in loaded.errors:
        console.print(f'[yellow]bad record:[/] {escape(str(error))}', highlight=False)
    records = loaded.records[:limit]
    root = run_dir or Path(tempfile.mkdtemp(prefix='sensei-calibrate-'))
    wanted = {r.query_id for r in records}
    subset = root / 'labels.jsonl'
    root.mkdir(parents=True, exist_ok=True)
    lines = [ln for ln in labels_file.read_text(encoding='utf-8').splitlines() if ln.strip()]
    subset.write_text('\n'.join(ln for ln in lines if json.loads(ln).get('query_id') in wanted) + '\n', encoding='utf-8')
    judge_model = _judge_model(model, base_url, console) if any(j.needs_model for j in judges) else None
    console.print(f'{name}: judging {len(records)} labelled run(s) with {", ".join(j.name for j in judges)}')
    try:
        asyncio.run(judge_records(records, JudgeRunOptions(judges, judge_model), run_id='judged', run_dir=root / 'judged'))
    finally:
        if judge_model is not None:
            judge_model.close()
    checks = make_judges(['checks'])
    asyncio.run(judge_records(records, JudgeRunOptions(checks), run_id='checks', run_dir=root / 'checks'))
    judged = calibrate(root / 'judged', subset)
    baseline = calibrate(root / 'checks', subset)
    _print_result(judged, console)
    if baseline.outcomes is not None and baseline.outcomes.predictors:
        f = baseline.outcomes.predictors[0]  # overall_score of the checks alone
        console.print(
            f'checks only (no model): AUROC {_fmt(f.auroc)}, F1 {_fmt(f.best_f1)}, '
            f'false alarms {_fmt(f.false_alarm_rate)}, detected {_fmt(f.detection_rate)}'
        )
    both = {'judged': judged.model_dump(mode='json'), 'checks_only': baseline.model_dump(mode='json')}
    write_text_atomic(root / 'calibration.json', json.dumps(both, indent=2))
    console.print(f'written: {root / "calibration.json"}')


def _judge_model(model: str | None, base_url: str | None, console: Console) -> JudgeModel:
    """The judge model, checked with one request (tests replace this name)."""
    return setup_judge_model(ModelFlags(model, base_url), err=console)


def _print_result(result: CalibrationResult, console: Console) -> None:
    """The figures as tables with short headers (readable at 80 columns); the JSON has every number."""
    if result.outcomes is not None:
        _print_outcomes(result.outcomes, console)
    if result.judges:
        _print_judges(result.judges, console)
    _print_correlations(result, console)
    if result.steps is not None:
        s = result.steps
        console.print(
            f'decisive_step vs mistake_step ({s.step_base}): exact {_fmt(s.exact)}, ±1 {_fmt(s.within_one)} '
            f'(n={s.compared}; {s.no_decisive_step} labelled run(s) without a decisive step); over all '
            f'{s.labelled} labelled: {_fmt(s.exact_over_labelled)}, baseline last step {_fmt(s.baseline_last_step)}'
        )
    if result.agents is not None:
        g = result.agents
        console.print(
            f'decisive_agent vs mistake_agent: {_fmt(g.accuracy)} '
            f'(n={g.compared}; {g.no_decisive_agent} labelled run(s) without a decisive agent); over all '
            f'{g.labelled} labelled: {_fmt(g.accuracy_over_labelled)}, baseline first agent {_fmt(g.baseline_first_agent)}'
        )
    if result.noise:
        noise = Table('judge', 'records', 'pairs', 'disagreement', title='Judge noise across repeats', box=None, pad_edge=False)
        for n in result.noise:
            noise.add_row(escape(n.judge), str(n.records), str(n.pairs), _fmt(n.disagreement_rate))
        print_table(console, noise)
    for p in result.problems:
        console.print(f'[yellow]label problem:[/] {escape(p)}', highlight=False)
    for note in result.notes:
        console.print(f'note: {escape(note)}', highlight=False)


def _print_outcomes(o: OutcomeCalibration, console: Console) -> None:
    """How well each predictor (and the baseline) predicts a failed run."""
    table = Table(
        title=f'Predicting a failed run: {o.labelled} labelled, {o.failed} failed (reward < {o.reward_threshold:g} fails)',
        caption='F1, acc: at the best-F1 threshold. FA: passed runs flagged; det: failed runs flagged '
        '(flagged: overall_score < 1, a judge verdict fail). err/inc: errored/inconclusive, left out.',
        caption_justify='left',
        box=None,
        pad_edge=False,
    )
    table.add_column('predictor', overflow='fold')
    for column in ('n', 'err', 'inc', 'AUROC', 'F1', 'acc', 'FA', 'det'):
        table.add_column(column, no_wrap=True, justify='right')
    for f in (o.baseline, *o.predictors):
        table.add_row(
            escape(f.predictor),
            str(f.n),
            str(f.errors),
            str(f.inconclusive),
            *(_fmt(x) for x in (f.auroc, f.best_f1, f.accuracy, f.false_alarm_rate, f.detection_rate)),
        )
    print_table(console, table)
    for f in o.predictors:
        if f.not_scored:
            console.print(f'{escape(f.predictor)}: {f.not_scored} labelled run(s) not scored (judge skipped or absent)')


def _print_judges(judges: list[JudgeAgreement], console: Console) -> None:
    """Each judge's agreement with the failure-mode labels."""
    table = Table(
        title='Judges vs failure-mode labels',
        caption='confusion: label pass → judge pass, fail / label fail → judge pass, fail',
        caption_justify='left',
        box=None,
        pad_edge=False,
    )
    table.add_column('judge', overflow='fold')
    table.add_column('mode', overflow='fold')
    for column in ('n', 'err', 'inc', 'acc', 'κ', 'confusion'):
        table.add_column(column, no_wrap=True, justify='right')
    for a in judges:
        (pp, pf), (fp, ff) = a.confusion_matrix
        table.add_row(
            escape(a.judge),
            escape(a.failure_mode),
            str(a.n),
            str(a.errors),
            str(a.inconclusive),
            _fmt(a.accuracy),
            _fmt(a.cohen_kappa),
            f'{pp} {pf} / {fp} {ff}',
        )
    print_table(console, table)


def _print_correlations(result: CalibrationResult, console: Console) -> None:
    """Spearman's ρ of the overall score against the labels' and the records' own ratings (when there are any)."""
    for title, r in (
        ('labels', result.spearman_overall_vs_labels),
        ("records' own ratings", result.spearman_overall_vs_record_ratings),
    ):
        if r['n'] == 0:
            continue  # no ratings of that kind: nothing to say (the JSON still has n=0)
        console.print(f'Spearman ρ, overall_score vs {title}: {_fmt(r.get("rho"))} (p={_fmt(r.get("p_value"))}, n={r["n"]})')


def _fmt(value: float | None) -> str:
    return '-' if value is None else f'{value:.3f}'


@exit_on_missing_extra
def run() -> None:
    """`python -m sensei_eval.calibrate` (`main` is the command itself)."""
    app(prog_name='python -m sensei_eval.calibrate')
