"""Calibration: how far to trust the judges, measured against human labels.

`python -m sensei_eval.calibrate --reports RUN_DIR --labels FILE` reads a judge run and a JSONL file
of labels, `{"query_id": ..., "failure_mode": <mode> | "overall", "label": ...}`:

* a failure-mode label is `pass` or `fail` (booleans true/false are read as pass/fail). Every judge
  of that mode in the run (an LLM judge and a deterministic check are scored separately) is compared
  with it: accuracy, Cohen's κ and the confusion matrix (rows: label pass/fail; columns: judge
  pass/fail). A judge that errored on a record is left out of its figures and counted in `errors`.
* an `overall` label is a rating (a number, e.g. 1-5): Spearman's ρ between the reports'
  `overall_score` and those ratings. ρ against the ratings the records carry themselves (the calling
  agent's `/rate`) is reported too.
* with `--repeat` runs in the folder, each judge's own disagreement rate on the same transcript:
  the share of pairs of repeats of one record that reached different verdicts (judge noise).

Statistics come from scikit-learn and scipy. A label naming a record or mode the run doesn't have is
reported, not dropped. Output: tables on the console and every number in JSON
(`RUN_DIR/calibration.json` unless `--out`).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, Field, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .reports import FAILURE_MODES, EvaluationReport, load_reports, write_json_atomic

__all__ = ('CalibrationResult', 'JudgeAgreement', 'Label', 'app', 'calibrate', 'load_labels')

PASS, FAIL = 'pass', 'fail'


class Label(BaseModel):
    query_id: str = Field(min_length=1)
    failure_mode: str = Field(min_length=1)
    label: str | bool | float


class JudgeAgreement(BaseModel):
    judge: str
    failure_mode: str
    n: int
    errors: int
    accuracy: float | None
    cohen_kappa: float | None
    confusion_matrix: list[list[int]] = Field(description='rows: label pass, fail; columns: judge pass, fail')


class JudgeNoise(BaseModel):
    judge: str
    records: int
    pairs: int
    disagreement_rate: float | None


class CalibrationResult(BaseModel):
    run_dir: str
    labels_file: str
    judges: list[JudgeAgreement]
    spearman_overall_vs_labels: dict[str, Any]
    spearman_overall_vs_record_ratings: dict[str, Any]
    noise: list[JudgeNoise]
    problems: list[str]


@dataclass
class _LabelSet:
    verdicts: dict[tuple[str, str], str]
    ratings: dict[str, float]
    problems: list[str]


def load_labels(path: str | Path) -> _LabelSet:
    """Read a label file; bad lines are reported with their line number, the rest are used."""
    path = Path(path)
    verdicts: dict[tuple[str, str], str] = {}
    ratings: dict[str, float] = {}
    problems: list[str] = []
    for lineno, line in enumerate(path.read_text(encoding='utf-8').splitlines(), start=1):
        if not line.strip():
            continue
        try:
            label = Label.model_validate_json(line)
        except ValidationError as e:
            err = e.errors()[0]
            problems.append(f'{path}:{lineno}: field `{".".join(map(str, err["loc"])) or "-"}`: {err["msg"]}')
            continue
        if label.failure_mode == 'overall':
            if isinstance(label.label, bool) or not isinstance(label.label, int | float):
                problems.append(
                    f'{path}:{lineno}: field `label`: an overall label must be a number (a rating), got {label.label!r}'
                )
                continue
            ratings[label.query_id] = float(label.label)
        elif label.failure_mode not in FAILURE_MODES:
            problems.append(f'{path}:{lineno}: field `failure_mode`: unknown failure mode {label.failure_mode!r}')
        else:
            verdict = _verdict(label.label)
            if verdict is None:
                problems.append(f'{path}:{lineno}: field `label`: expected pass or fail, got {label.label!r}')
                continue
            verdicts[(label.query_id, label.failure_mode)] = verdict
    return _LabelSet(verdicts, ratings, problems)


def _verdict(value: str | bool | float) -> str | None:
    if isinstance(value, bool):
        return PASS if value else FAIL
    if isinstance(value, str) and value.strip().lower() in (PASS, FAIL):
        return value.strip().lower()
    return None


def calibrate(run_dir: str | Path, labels_path: str | Path) -> CalibrationResult:
    from scipy.stats import spearmanr
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    reports = load_reports(run_dir)
    labels = load_labels(labels_path)
    problems = list(labels.problems)
    first = _first_repeat(reports)

    known_ids = set(first)
    for qid, mode in labels.verdicts:
        if qid not in known_ids:
            problems.append(f'label for {qid!r} ({mode}): no such record in the run')
    for qid in labels.ratings:
        if qid not in known_ids:
            problems.append(f'overall label for {qid!r}: no such record in the run')

    agreements: list[JudgeAgreement] = []
    judges = sorted({(name, r.failure_mode) for rep in first.values() for name, r in rep.judges.items() if r.failure_mode})
    for judge, mode in judges:
        assert mode is not None
        truth, pred, errors = [], [], 0
        for (qid, label_mode), verdict in labels.verdicts.items():
            if label_mode != mode or qid not in first or judge not in first[qid].judges:
                continue
            result = first[qid].judges[judge]
            if result.status != 'ok' or result.passed is None:
                errors += 1
                continue
            truth.append(verdict)
            pred.append(PASS if result.passed else FAIL)
        if not truth and not errors:
            continue
        n = len(truth)
        accuracy = sum(t == p for t, p in zip(truth, pred, strict=True)) / n if n else None
        kappa = _finite(cohen_kappa_score(truth, pred, labels=[PASS, FAIL])) if n else None
        matrix = confusion_matrix(truth, pred, labels=[PASS, FAIL]).tolist() if n else [[0, 0], [0, 0]]
        agreements.append(
            JudgeAgreement(
                judge=judge, failure_mode=mode, n=n, errors=errors, accuracy=accuracy, cohen_kappa=kappa, confusion_matrix=matrix
            )
        )

    def rho(pairs: list[tuple[float, float]]) -> dict[str, Any]:
        if len(pairs) < 3:
            return {'n': len(pairs), 'rho': None, 'p_value': None, 'note': 'needs at least 3 records'}
        xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
        if len(set(xs)) == 1 or len(set(ys)) == 1:
            return {'n': len(pairs), 'rho': None, 'p_value': None, 'note': 'one side is constant: ρ is undefined'}
        res = spearmanr(xs, ys)
        return {'n': len(pairs), 'rho': _finite(res.statistic), 'p_value': _finite(res.pvalue)}

    scores = {q: rep.overall_score for q, rep in first.items() if rep.overall_score is not None}
    vs_labels = [(scores[q], r) for q, r in labels.ratings.items() if q in scores]
    vs_records = [(scores[q], rep.agent_rating.mean) for q, rep in first.items() if q in scores and rep.agent_rating]
    return CalibrationResult(
        run_dir=str(run_dir),
        labels_file=str(labels_path),
        judges=agreements,
        spearman_overall_vs_labels=rho(vs_labels),
        spearman_overall_vs_record_ratings=rho(vs_records),
        noise=_noise(reports),
        problems=problems,
    )


def _first_repeat(reports: list[EvaluationReport]) -> dict[str, EvaluationReport]:
    first: dict[str, EvaluationReport] = {}
    for r in sorted(reports, key=lambda r: r.repeat):
        first.setdefault(r.query_id, r)
    return first


def _noise(reports: list[EvaluationReport]) -> list[JudgeNoise]:
    """Per judge: share of repeat pairs, on an identical transcript, whose verdicts differ."""
    groups: dict[tuple[str, str | None], list[EvaluationReport]] = defaultdict(list)
    for r in reports:
        groups[(r.query_id, r.transcript_sha256)].append(r)
    per_judge: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # records, pairs, disagreeing pairs
    for group in groups.values():
        if len(group) < 2:
            continue
        names = set().union(*(r.judges.keys() for r in group))
        for name in names:
            verdicts = [r.judges[name].passed for r in group if name in r.judges and r.judges[name].status == 'ok']
            verdicts = [v for v in verdicts if v is not None]
            pairs = list(combinations(verdicts, 2))
            if not pairs:
                continue
            stats = per_judge[name]
            stats[0] += 1
            stats[1] += len(pairs)
            stats[2] += sum(a != b for a, b in pairs)
    return [
        JudgeNoise(judge=name, records=s[0], pairs=s[1], disagreement_rate=s[2] / s[1] if s[1] else None)
        for name, s in sorted(per_judge.items())
    ]


def _finite(value: Any) -> float | None:
    f = float(value)
    return None if math.isnan(f) or math.isinf(f) else f


# ---------------------------------------------------------------------------------------------------
# CLI

app = typer.Typer(add_completion=False)


@app.command()
def main(
    reports: Annotated[Path, typer.Option('--reports', help='A judge run folder (reports/<run-id>).')],
    labels: Annotated[Path, typer.Option('--labels', help='JSONL labels: {query_id, failure_mode or "overall", label}.')],
    out: Annotated[Path | None, typer.Option(help='Where to write the JSON (default RUN_DIR/calibration.json).')] = None,
) -> None:
    """Compare a judge run with human labels: accuracy, Cohen's κ, confusion, Spearman ρ, judge noise."""
    console = Console()
    if not reports.is_dir():
        console.print(f'[red]error:[/] no run folder at {reports}')
        raise typer.Exit(2)
    if not labels.is_file():
        console.print(f'[red]error:[/] no label file at {labels}')
        raise typer.Exit(2)
    result = calibrate(reports, labels)
    table = Table(title='Judges vs labels', box=None, pad_edge=False)
    for column in ('judge', 'mode', 'n', 'errors', 'accuracy', "Cohen's κ", escape('confusion [[pp, pf], [fp, ff]]')):
        table.add_column(column, no_wrap=True)
    for a in result.judges:
        row = (
            a.judge,
            a.failure_mode,
            str(a.n),
            str(a.errors),
            _fmt(a.accuracy),
            _fmt(a.cohen_kappa),
            escape(str(a.confusion_matrix)),
        )
        table.add_row(*row)
    console.print(table)
    for title, r in (
        ('labels', result.spearman_overall_vs_labels),
        ("records' own ratings", result.spearman_overall_vs_record_ratings),
    ):
        console.print(f'Spearman ρ, overall_score vs {title}: {_fmt(r.get("rho"))} (p={_fmt(r.get("p_value"))}, n={r["n"]})')
    if result.noise:
        noise = Table('judge', 'records', 'pairs', 'disagreement', title='Judge noise across repeats')
        for n in result.noise:
            noise.add_row(n.judge, str(n.records), str(n.pairs), _fmt(n.disagreement_rate))
        console.print(noise)
    for p in result.problems:
        console.print(f'[yellow]label problem:[/] {p}', highlight=False)
    target = out or reports / 'calibration.json'
    write_json_atomic(target, json.dumps(result.model_dump(mode='json'), indent=2))
    console.print(f'written: {target}')
    raise typer.Exit(1 if result.problems else 0)


def _fmt(value: float | None) -> str:
    return '-' if value is None else f'{value:.3f}'


if __name__ == '__main__':
    app(prog_name='python -m sensei_eval.calibrate')
