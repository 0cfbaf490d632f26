"""Calibration: how far to trust the judges, measured against labels people (or benchmarks) gave.

`python -m sensei_eval.calibrate --reports RUN_DIR --labels FILE` (or `sensei-eval calibrate`) reads a
judge run and a JSONL file of labels. Each line names a record (`query_id`) and carries one or more
labels; keys it does not know are ignored, so a dataset's own label file (e.g. tau2-bench's `reward`,
`passed`, `db_match`, ...) is read as it is. The name of a field says what its value is:

* `failure_mode` + `label`: a verdict on one failure mode, `pass` or `fail` (also `true`/`false`), or
  MAST-style `1`/`0` (1: the failure mode occurred, so `fail`; 0: `pass`). A mode name that is not one
  of ours (a published taxonomy's, e.g. MAST's "1.1 Disobey Task Specification") is kept and noted
  (`notes`): no judge of ours reports it, so it is not compared, and the other labels are used.
  With `"failure_mode": "overall"` the label is about the whole run: `pass`/`fail`/a boolean is the
  run's **outcome**, a number is a **rating** (as it always was: a number under `overall` is never read
  as a reward; write `reward` for that).
* `outcome` or `passed`: the run's outcome, `pass`/`fail` or a boolean.
* `reward`: a number in [0, 1]; the run failed when `reward < --reward-threshold` (default 1: anything
  short of full reward is a failure). An `outcome`/`passed` on the same line wins over the reward; if
  the two disagree, that is reported.
* `rating`: a number on any scale (e.g. 1-5).
* `mistake_step`: where the run went wrong, a number or a numeric string ("12"). By default the
  transcript step (the numbers judges cite, from 1); with `--step-base 0` (or 1) the index of the
  message in the record's `messages`, counted from 0 (or 1) — Who&When's labels are 0-based message
  indices — mapped to the transcript step that message renders as.
* `mistake_agent`: who made that mistake (multi-agent runs); compared without case and outer spaces.

A bad field is reported and left out; the line's other fields are still used. Bad lines are reported
as `file:line: field `name`: message` and the other lines are still used; so are labels naming a
record the run does not have, and a second, different label for the same thing (the first is kept).
Nothing is dropped silently: every such case is in `problems` (exit code 1).

Figures, all on each record's first repeat:

* **Failure-mode labels**: every judge of that mode (an LLM judge and a deterministic check are scored
  separately): accuracy, Cohen's κ, confusion matrix (rows: label pass/fail; columns: judge pass/fail).
* **Outcomes** (predicting a failed run; failed is the positive class): for `overall_score` and each
  judge's `score`, lower meaning more likely failed: AUROC, the best F1 over thresholds (a run is
  flagged when its score is ≤ the threshold) with precision, recall and accuracy there, and the share of
  passed runs flagged (false alarms: `overall_score < 1`, a judge's verdict fail) and of failed runs
  flagged. A score that is the same on every labelled run separates nothing: it gets AUROC 0.5 and the
  note "separates nothing", and no F1, precision, recall or accuracy (a constant that flags every run
  would otherwise claim the always-fail baseline's F1). Beside them the always-fail baseline: AUROC
  0.5, F1 2p/(1+p), accuracy p (p: failed share).
  AUROC needs both classes: with one, it is None and the reason is in `problems`.
* **Ratings**: Spearman's ρ between `overall_score` and the ratings; also against the ratings the
  records carry themselves (the calling agent's `/rate`).
* **Where it went wrong** (each record rebuilt with its metadata, so the speakers are the ones the
  judges saw): the report's `decisive_step` (earliest step cited by the primary failure
  mode) against `mistake_step`, exact and within ±1; `decisive_agent` against `mistake_agent`
  (case and surrounding spaces ignored). Labelled runs without a decisive step/agent are counted, and
  beside each figure its trivial baseline: the last step, and the first agent that is not the user.
* **Judge noise**, with `--repeat` runs in the folder: per judge, the share of pairs of repeats on the
  same transcript that reached different verdicts.

A judge that errored, or was `inconclusive` (its answer showed it did not judge), is left out of the
figures and counted (`errors`, `inconclusive`). Statistics come from scikit-learn and scipy; their
warnings about undefined values are silenced, as such cases are reported here. Output: tables on the
console and every number in JSON (`RUN_DIR/calibration.json` unless `--out`).
"""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

from sensei_eval.core.errors import field_path
from sensei_eval.core.extras import require_extra
from sensei_eval.core.modes import MODES
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import RecordReport
from sensei_eval.core.transcript import Step, render_transcript
from sensei_eval.core.verdicts import judge_status, mode_verdicts
from sensei_eval.judging.run_folder import load_reports

__all__ = (
    'AgentAccuracy',
    'CalibrationResult',
    'JudgeAgreement',
    'JudgeNoise',
    'Label',
    'LabelSet',
    'OutcomeCalibration',
    'OutcomeFigures',
    'StepAccuracy',
    'calibrate',
    'load_labels',
)

PASS, FAIL = 'pass', 'fail'
OVERALL = 'overall'
BASELINE = 'always fail'
_RECORD_FIELDS = ('outcome', 'passed', 'reward', 'rating', 'mistake_step', 'mistake_agent')


class Label(BaseModel):
    """One line of a label file. Keys not listed here are ignored (a dataset's own fields may stay)."""

    query_id: str = Field(min_length=1)
    failure_mode: str | None = Field(default=None, min_length=1)
    label: str | bool | float | None = None
    outcome: StrictStr | StrictBool | None = None
    passed: StrictStr | StrictBool | None = None
    reward: float | None = Field(default=None, ge=0, le=1)
    rating: float | None = None
    mistake_step: StrictInt | None = Field(default=None, ge=0)
    mistake_agent: StrictStr | None = None

    @field_validator('mistake_step', mode='before')
    @classmethod
    def _a_step(cls, value: Any) -> Any:
        # label files often write the step as text ("12"): read it, but not a fraction or a word
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
        return value

    @field_validator('reward', 'rating', mode='before')
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        # pydantic would read `true` as 1 and "0.5" as 0.5: a label that is not a number is a mistake
        if isinstance(value, bool | str):
            raise ValueError(f'must be a number, got {value!r}')
        return value


class JudgeAgreement(BaseModel):
    judge: str
    failure_mode: str
    n: int
    errors: int
    inconclusive: int = 0
    accuracy: float | None
    cohen_kappa: float | None
    confusion_matrix: list[list[int]] = Field(description='rows: label pass, fail; columns: judge pass, fail')


class OutcomeFigures(BaseModel):
    """How well one score separates failed runs from passed ones (failed is the positive class)."""

    predictor: str = Field(description=f'`overall_score`, a judge name, or `{BASELINE}`')
    n: int = Field(description='labelled runs this predictor scored')
    failed: int
    errors: int = 0
    inconclusive: int = 0
    not_scored: int = Field(0, description='labelled runs the predictor did not score: judge skipped or absent')
    auroc: float | None = None
    best_f1: float | None = None
    best_f1_threshold: float | None = Field(None, description='flagged when score ≤ this (the best-F1 threshold)')
    precision: float | None = Field(None, description='at the best-F1 threshold')
    recall: float | None = Field(None, description='at the best-F1 threshold')
    accuracy: float | None = Field(None, description='at the best-F1 threshold')
    false_alarm_rate: float | None = Field(
        None, description='share of passed runs flagged: overall_score < 1, or a judge verdict fail'
    )
    detection_rate: float | None = Field(None, description='share of failed runs flagged, by the same rule')
    note: str | None = None


class OutcomeCalibration(BaseModel):
    reward_threshold: float = Field(description='a reward below this is a failed run')
    labelled: int = Field(description='runs of the folder with an outcome label')
    failed: int
    baseline: OutcomeFigures
    predictors: list[OutcomeFigures] = Field(description='overall_score first, then the judges by name')


class StepAccuracy(BaseModel):
    """`decisive_step` against `mistake_step`: does the judge point at where the run went wrong?"""

    labelled: int = Field(description='runs of the folder with a mistake_step label')
    compared: int = Field(description='of those, runs with a decisive_step')
    no_decisive_step: int
    exact: float | None
    within_one: float | None
    step_base: str = Field('transcript step (from 1)', description='how mistake_step was read')
    exact_over_labelled: float | None = Field(None, description='exact hits over every labelled run (no step: a miss)')
    baseline_last_step: float | None = Field(None, description='share of labelled runs whose mistake is the last step')


class AgentAccuracy(BaseModel):
    """`decisive_agent` against `mistake_agent` (case and surrounding spaces ignored)."""

    labelled: int
    compared: int
    no_decisive_agent: int
    accuracy: float | None
    accuracy_over_labelled: float | None = Field(None, description='hits over every labelled run (no agent: a miss)')
    baseline_first_agent: float | None = Field(
        None, description='share of labelled runs blaming the first speaker that is not the user'
    )


class JudgeNoise(BaseModel):
    judge: str
    records: int
    pairs: int
    disagreement_rate: float | None


class CalibrationResult(BaseModel):
    run_dir: str
    labels_file: str
    judges: list[JudgeAgreement]
    outcomes: OutcomeCalibration | None = None
    spearman_overall_vs_labels: dict[str, Any]
    spearman_overall_vs_record_ratings: dict[str, Any]
    steps: StepAccuracy | None = None
    agents: AgentAccuracy | None = None
    noise: list[JudgeNoise]
    problems: list[str]
    notes: list[str] = Field(default_factory=list, description='How labels were read (MAST-style 0/1, modes not ours).')


@dataclass
class LabelSet:
    """The labels of a file, by kind and record; `outcomes` values are `pass`/`fail`."""

    verdicts: dict[tuple[str, str], str] = field(default_factory=dict)
    ratings: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    rewards: dict[str, float] = field(default_factory=dict)
    mistake_steps: dict[str, int] = field(default_factory=dict)
    mistake_agents: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load_labels(path: str | Path, *, reward_threshold: float = 1.0) -> LabelSet:
    """Read a label file; bad lines are reported with their line number, the rest are used."""
    reader = _LabelReader(Path(path), reward_threshold)
    for lineno, line in enumerate(reader.path.read_text(encoding='utf-8').splitlines(), start=1):
        if line.strip():
            reader.read_line(line, lineno)
    return reader.finish()


class _LabelReader:
    """Reads a label file line by line into a `LabelSet`: each line's failure-mode label, outcome (from
    `label: overall`, `outcome`, `passed` or `reward`, which must agree), rating, mistake step and agent."""

    def __init__(self, path: Path, reward_threshold: float) -> None:
        self.path = path
        self.reward_threshold = reward_threshold
        self.labels = LabelSet()
        self.first_line: dict[tuple[int, Any], int] = {}  # (which store, key) → line of the label kept
        self.mast = 0  # failure-mode labels written 1/0 (MAST-style)
        self.foreign: dict[str, int] = {}  # failure modes that are not ours -> labels

    def problem(self, text: str) -> None:
        self.labels.problems.append(text)

    def put(self, store: dict[Any, Any], key: Any, value: Any, lineno: int, name: str) -> None:
        """Keep the first label for a thing; a different second one is reported, not silently used."""
        slot = (id(store), key)  # by store: a rating may come from `rating` or an overall `label`
        if key in store and store[key] != value:
            self.problem(
                f'{self.path}:{lineno}: field `{name}`: {key!r} already has {store[key]!r} (line {self.first_line[slot]}); '
                f'kept that, not {value!r}'
            )
            return
        store.setdefault(key, value)
        self.first_line.setdefault(slot, lineno)

    def read_line(self, line: str, lineno: int) -> None:
        where = f'{self.path}:{lineno}'
        label = _label_of(line, where, self.labels.problems)
        if label is None:
            return
        missing = _missing_label(label)
        if missing is not None:
            self.problem(f'{where}: {missing}')
            return
        explicit = self._mode_label(label, lineno, where)  # (field, pass/fail) from the fields that name an outcome
        explicit += self._outcome_fields(label, where)
        self._outcome(label, explicit, lineno, where)
        self._record_fields(label, lineno, where)

    def _mode_label(self, label: Label, lineno: int, where: str) -> list[tuple[str, str]]:
        """The line's `failure_mode`/`label` pair: a verdict on a mode, or for `overall` a rating or an outcome
        (returned, to be checked against the line's other outcome fields)."""
        if label.failure_mode is None or label.label is None:
            return []
        if label.failure_mode == OVERALL:
            if isinstance(label.label, int | float) and not isinstance(label.label, bool):
                self.put(self.labels.ratings, label.query_id, float(label.label), lineno, 'label')
            elif (verdict := _verdict(label.label)) is not None:
                return [('label', verdict)]
            else:
                self.problem(
                    f'{where}: field `label`: an overall label is pass/fail (the outcome) or a number (a rating), '
                    f'got {label.label!r}'
                )
            return []
        verdict = _verdict(label.label)
        if verdict is None and isinstance(label.label, int | float) and label.label in (0, 1):
            verdict = FAIL if label.label == 1 else PASS
            self.mast += 1
        if verdict is None:
            self.problem(f'{where}: field `label`: expected pass or fail (or 1/0), got {label.label!r}')
            return []
        if label.failure_mode not in MODES:
            self.foreign[label.failure_mode] = self.foreign.get(label.failure_mode, 0) + 1
        self.put(self.labels.verdicts, (label.query_id, label.failure_mode), verdict, lineno, 'label')
        return []

    def _outcome_fields(self, label: Label, where: str) -> list[tuple[str, str]]:
        """The outcome named by `outcome` and `passed` (a value that is not pass/fail is a problem)."""
        explicit: list[tuple[str, str]] = []
        for name in ('outcome', 'passed'):
            value = getattr(label, name)
            if value is None:
                continue
            if (verdict := _verdict(value)) is None:
                self.problem(f'{where}: field `{name}`: expected pass or fail (or true/false), got {value!r}')
            else:
                explicit.append((name, verdict))
        return explicit

    def _outcome(self, label: Label, explicit: list[tuple[str, str]], lineno: int, where: str) -> None:
        """The run's outcome: the fields that name one (when they agree), else the reward against the threshold."""
        if len({v for _, v in explicit}) > 1:
            said = ', '.join(f'{n}={v}' for n, v in explicit)
            self.problem(f'{where}: field `{explicit[1][0]}`: the line contradicts itself ({said}); no outcome used')
            explicit = []
        outcome = explicit[0][1] if explicit else None
        if label.reward is not None:
            self.put(self.labels.rewards, label.query_id, label.reward, lineno, 'reward')
            by_reward = FAIL if label.reward < self.reward_threshold else PASS
            if outcome is None:
                outcome = by_reward
            elif outcome != by_reward:
                self.problem(
                    f'{where}: field `reward`: reward {label.reward:g} means {by_reward} '
                    f'(threshold {self.reward_threshold:g}) but `{explicit[0][0]}` says {outcome}; used {outcome}'
                )
        if outcome is not None:
            self.put(self.labels.outcomes, label.query_id, outcome, lineno, explicit[0][0] if explicit else 'reward')

    def _record_fields(self, label: Label, lineno: int, where: str) -> None:
        """The rating, the step where the run went wrong, and the agent that made the mistake."""
        qid = label.query_id
        if label.rating is not None:
            self.put(self.labels.ratings, qid, label.rating, lineno, 'rating')
        if label.mistake_step is not None:
            self.put(self.labels.mistake_steps, qid, label.mistake_step, lineno, 'mistake_step')
        if label.mistake_agent is not None:
            if not label.mistake_agent.strip():
                self.problem(f'{where}: field `mistake_agent`: empty')
            else:
                self.put(self.labels.mistake_agents, qid, label.mistake_agent.strip(), lineno, 'mistake_agent')

    def finish(self) -> LabelSet:
        """The labels, with notes on 1/0 failure-mode labels and on failure modes that are not ours."""
        path, labels = self.path, self.labels
        if self.mast:
            labels.notes.append(
                f'{path}: {self.mast} failure-mode label(s) given as 1/0, read MAST-style: 1 = the mode occurred (fail)'
            )
        for mode, n in self.foreign.items():
            labels.notes.append(
                f'{path}: failure mode {mode!r} ({n} label(s)) is not one of ours: kept, but no judge reports it, '
                f'so it is not compared (ours: {", ".join(MODES)})'
            )
        return labels


def _missing_label(label: Label) -> str | None:
    """What a line lacks to say anything (a problem naming the field), else None."""
    if label.failure_mode is None and label.label is not None:
        return 'field `failure_mode`: a `label` needs a failure mode (or "overall")'
    if label.failure_mode is not None and label.label is None:
        return f'field `label`: `failure_mode` {label.failure_mode!r} has no label'
    if label.failure_mode is None and all(getattr(label, f) is None for f in _RECORD_FIELDS):
        return f'field `-`: no label on this line: give `failure_mode` and `label`, or any of {", ".join(_RECORD_FIELDS)}'
    return None


def _label_of(line: str, where: str, problems: list[str]) -> Label | None:
    """One line as a `Label`: a bad field is reported and dropped, the rest of the line kept."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        problems.append(f'{where}: field `-`: not valid JSON ({e.msg})')
        return None
    if not isinstance(data, dict):
        problems.append(f'{where}: field `-`: expected a JSON object')
        return None
    while True:
        try:
            return Label.model_validate(data)
        except ValidationError as e:
            dropped = False
            for err in e.errors():
                name = str(err['loc'][0]) if err['loc'] else '-'
                problems.append(f'{where}: field `{field_path(err["loc"]).lstrip(".") or "-"}`: {err["msg"]}')
                if name in data and name != 'query_id':
                    del data[name]
                    dropped = True
            if not dropped:
                return None  # no query_id (or none usable): nothing on the line can be placed


def _verdict(value: str | bool | float) -> str | None:
    if isinstance(value, bool):
        return PASS if value else FAIL
    if isinstance(value, str):
        text = value.strip().lower()
        return {PASS: PASS, FAIL: FAIL, 'true': PASS, 'false': FAIL}.get(text)
    return None


def calibrate(
    run_dir: str | Path, labels_path: str | Path, *, reward_threshold: float = 1.0, step_base: int | None = None
) -> CalibrationResult:
    """Every figure for one run folder against one label file (see the module docstring)."""
    require_extra('stats', 'calibration', 'sklearn.metrics', 'scipy.stats')
    reports = load_reports(run_dir)
    labels = load_labels(labels_path, reward_threshold=reward_threshold)
    problems = list(labels.problems)
    first = _first_repeat(reports)

    for qid, mode in labels.verdicts:
        if qid not in first:
            problems.append(f'label for {qid!r} ({mode}): no such record in the run')
    for qid in labels.ratings:
        if qid not in first:
            problems.append(f'overall label for {qid!r}: no such record in the run')
    record_kinds: dict[str, list[str]] = defaultdict(list)
    for kind, store in (
        ('outcome', labels.outcomes),
        ('mistake_step', labels.mistake_steps),
        ('mistake_agent', labels.mistake_agents),
    ):
        for qid in store:
            if qid not in first:
                record_kinds[qid].append(kind)
    problems.extend(f'{", ".join(k)} label for {q!r}: no such record in the run' for q, k in record_kinds.items())

    with _quiet():
        agreements = _agreements(first, labels)
        outcomes = _outcomes(first, labels, reward_threshold, problems) if labels.outcomes else None
        scores = {q: rep.overall_score for q, rep in first.items() if rep.overall_score is not None}
        vs_labels = [(scores[q], r) for q, r in labels.ratings.items() if q in scores]
        vs_records = [(scores[q], rep.agent_rating.mean) for q, rep in first.items() if q in scores and rep.agent_rating]
        rho_labels, rho_records = _rho(vs_labels), _rho(vs_records)
    return CalibrationResult(
        run_dir=str(run_dir),
        labels_file=str(labels_path),
        judges=agreements,
        outcomes=outcomes,
        spearman_overall_vs_labels=rho_labels,
        spearman_overall_vs_record_ratings=rho_records,
        steps=_steps(first, labels, step_base, problems),
        agents=_agents(first, labels),
        noise=_noise(reports),
        problems=problems,
        notes=list(labels.notes),
    )


@contextmanager
def _quiet() -> Iterator[None]:
    """scikit-learn and scipy warn about undefined figures; we report those cases ourselves."""
    from sklearn.exceptions import UndefinedMetricWarning

    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UndefinedMetricWarning)
        warnings.simplefilter('ignore', RuntimeWarning)
        yield


def _agreements(first: dict[str, RecordReport], labels: LabelSet) -> list[JudgeAgreement]:
    """Per judge of a labelled failure mode: accuracy, κ and confusion against the verdict labels."""
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    agreements: list[JudgeAgreement] = []
    judges = sorted({(name, r.failure_mode) for rep in first.values() for name, r in rep.judges.items() if r.failure_mode})
    for judge, mode in judges:
        truth, pred, errors, inconclusive = [], [], 0, 0
        for (qid, label_mode), verdict in labels.verdicts.items():
            if label_mode != mode or qid not in first or judge not in first[qid].judges:
                continue
            # the judge's verdict on this mode, as every surface reads it (`core.verdicts`)
            found = mode_verdicts(first[qid]).get((judge, mode))
            status = found.status if found is not None else 'error'
            if status in ('inconclusive', 'smoke'):
                inconclusive += 1
                continue
            if status == 'error' or found is None or found.passed is None:
                errors += 1
                continue
            truth.append(verdict)
            pred.append(PASS if found.passed else FAIL)
        if not truth and not errors and not inconclusive:
            continue
        n = len(truth)
        agreements.append(
            JudgeAgreement(
                judge=judge,
                failure_mode=mode,
                n=n,
                errors=errors,
                inconclusive=inconclusive,
                accuracy=sum(t == p for t, p in zip(truth, pred, strict=True)) / n if n else None,
                cohen_kappa=_finite(cohen_kappa_score(truth, pred, labels=[PASS, FAIL])) if n else None,
                confusion_matrix=confusion_matrix(truth, pred, labels=[PASS, FAIL]).tolist() if n else [[0, 0], [0, 0]],
            )
        )
    return agreements


@dataclass
class _Scored:
    """One predictor's scores on the labelled runs, and why the others have none."""

    failed: list[bool] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    flagged: list[bool] = field(default_factory=list)
    errors: int = 0
    inconclusive: int = 0
    not_scored: int = 0


def _outcomes(
    first: dict[str, RecordReport], labels: LabelSet, reward_threshold: float, problems: list[str]
) -> OutcomeCalibration:
    """AUROC, best F1 and flag rates of overall_score and of each judge's score, beside always-fail."""
    labelled = {q: o == FAIL for q, o in labels.outcomes.items() if q in first}
    n_failed = sum(labelled.values())
    overall = _Scored()
    per_judge: dict[str, _Scored] = {}
    names = sorted({name for q in labelled for name in first[q].judges})
    for qid, failed in labelled.items():
        report = first[qid]
        if report.overall_score is not None:
            overall.failed.append(failed)
            overall.scores.append(report.overall_score)
            overall.flagged.append(report.overall_score < 1)
        elif 'error' not in (statuses := {r.status for r in report.judges.values()}) and (
            'inconclusive' in statuses or report.inconclusive
        ):
            overall.inconclusive += 1
        else:
            overall.errors += 1
        for name in names:
            scored = per_judge.setdefault(name, _Scored())
            result = report.judges.get(name)
            if result is None:
                scored.not_scored += 1
            elif (status := judge_status(result)) in ('inconclusive', 'smoke'):
                scored.inconclusive += 1
            elif status == 'error':
                scored.errors += 1
            elif result.score is None:
                scored.not_scored += 1
            else:
                scored.failed.append(failed)
                scored.scores.append(result.score)
                scored.flagged.append(status == 'fail')

    one_class = None
    if labelled and n_failed in (0, len(labelled)):
        one_class = f'all {len(labelled)} labelled runs {"failed" if n_failed else "passed"}: AUROC is undefined'
        problems.append(f'outcome labels: {one_class}')
    predictors = [_figures('overall_score', overall, one_class, problems)]
    predictors += [
        _figures(name, s, one_class, problems) for name, s in per_judge.items() if s.scores or s.errors or s.inconclusive
    ]
    return OutcomeCalibration(
        reward_threshold=reward_threshold,
        labelled=len(labelled),
        failed=n_failed,
        baseline=_baseline(len(labelled), n_failed),
        predictors=predictors,
    )


def _figures(name: str, s: _Scored, one_class: str | None, problems: list[str]) -> OutcomeFigures:
    """AUROC and the best-F1 threshold of one score (lower = failed), and its flag rates."""
    from sklearn.metrics import precision_recall_curve, roc_auc_score

    n, n_failed = len(s.scores), sum(s.failed)
    figures = OutcomeFigures(
        predictor=name, n=n, failed=n_failed, errors=s.errors, inconclusive=s.inconclusive, not_scored=s.not_scored
    )
    passed_flags = [f for f, failed in zip(s.flagged, s.failed, strict=True) if not failed]
    failed_flags = [f for f, failed in zip(s.flagged, s.failed, strict=True) if failed]
    figures.false_alarm_rate = sum(passed_flags) / len(passed_flags) if passed_flags else None
    figures.detection_rate = sum(failed_flags) / len(failed_flags) if failed_flags else None
    if n == 0:
        figures.note = 'no labelled run has a score from it'
        return figures
    y_true = [int(f) for f in s.failed]
    y_score = [-x for x in s.scores]  # lower score = more likely failed; negation keeps thresholds exact
    if 0 < n_failed < n:
        figures.auroc = _finite(roc_auc_score(y_true, y_score))
    else:
        figures.note = one_class or f'all {n} runs it scored {"failed" if n_failed else "passed"}: AUROC is undefined'
        if one_class is None:
            problems.append(f'{name}: {figures.note}')
    if n_failed == 0:
        return figures
    if len(set(s.scores)) == 1:
        figures.note = f'the score is {s.scores[0]:g} on every labelled run: it separates nothing (no F1 or accuracy from it)'
        return figures
    precision, recall, thresholds = precision_recall_curve(y_true, y_score)
    best, best_f1 = -1, -1.0
    for i in range(len(thresholds)):  # ties: the highest threshold on -score, i.e. the fewest runs flagged
        p, r = float(precision[i]), float(recall[i])
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        if f1 >= best_f1:
            best, best_f1 = i, f1
    cut = -float(thresholds[best])
    predicted = [x <= cut for x in s.scores]
    figures.best_f1 = best_f1
    figures.best_f1_threshold = cut
    figures.precision = float(precision[best])
    figures.recall = float(recall[best])
    figures.accuracy = sum(p == f for p, f in zip(predicted, s.failed, strict=True)) / n
    return figures


def _baseline(n: int, n_failed: int) -> OutcomeFigures:
    """Always answering "failed": what any score must beat."""
    p = n_failed / n if n else None
    return OutcomeFigures(
        predictor=BASELINE,
        n=n,
        failed=n_failed,
        auroc=0.5 if 0 < n_failed < n else None,
        best_f1=2 * p / (1 + p) if p is not None else None,
        precision=p,
        recall=1.0 if n_failed else None,
        accuracy=p,
        false_alarm_rate=1.0 if n_failed < n else None,
        detection_rate=1.0 if n_failed else None,
    )


def _steps(first: dict[str, RecordReport], labels: LabelSet, step_base: int | None, problems: list[str]) -> StepAccuracy | None:
    """Is the earliest cited step where the labeller says the run went wrong (or next to it)?"""
    pairs: list[tuple[int | None, int, int]] = []  # (decisive step, labelled step, last step)
    for q, step in labels.mistake_steps.items():
        if q not in first:
            continue
        steps = _transcript_steps(first[q])
        if step_base is None and step < 1:
            problems.append(f'mistake_step {step} of {q!r}: transcript steps start at 1 (--step-base for message indices)')
            continue
        if step_base is not None:
            mapped = _message_step(first[q], step - step_base)
            if mapped is None:
                problems.append(f'mistake_step {step} of {q!r}: no such message (base {step_base}); left out')
                continue
            step = mapped
        pairs.append((first[q].decisive_step, step, len(steps)))
    if not pairs:
        return None
    compared = [(d, m) for d, m, _ in pairs if d is not None]
    n = len(compared)
    hits = sum(d == m for d, m in compared)
    return StepAccuracy(
        labelled=len(pairs),
        compared=n,
        no_decisive_step=len(pairs) - n,
        exact=hits / n if n else None,
        within_one=sum(abs(d - m) <= 1 for d, m in compared) / n if n else None,
        step_base='transcript step (from 1)' if step_base is None else f'message index from {step_base}',
        exact_over_labelled=hits / len(pairs),
        baseline_last_step=sum(m == last for _, m, last in pairs) / len(pairs),
    )


def _agents(first: dict[str, RecordReport], labels: LabelSet) -> AgentAccuracy | None:
    """Does the agent who spoke at the decisive step match the one the labeller blames?"""
    pairs = [(first[q].decisive_agent, agent, _first_agent(first[q])) for q, agent in labels.mistake_agents.items() if q in first]
    if not pairs:
        return None
    compared = [(d, m) for d, m, _ in pairs if d is not None and d.strip()]
    n = len(compared)
    hits = sum(_same_agent(d, m) for d, m in compared)
    return AgentAccuracy(
        labelled=len(pairs),
        compared=n,
        no_decisive_agent=len(pairs) - n,
        accuracy=hits / n if n else None,
        accuracy_over_labelled=hits / len(pairs),
        baseline_first_agent=sum(f is not None and _same_agent(f, m) for _, m, f in pairs) / len(pairs),
    )


def _same_agent(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


def _record_of(report: RecordReport, n_messages: int | None = None) -> QueryRecord | None:
    """The record a report was made from (its first `n_messages` messages), or None if it cannot be rebuilt."""
    messages = report.messages if n_messages is None else report.messages[:n_messages]
    try:
        return QueryRecord.model_validate(
            {
                'query_id': report.query_id,
                'query': report.query or '-',
                'messages': messages,
                'message_format': report.message_format,
                'metadata': report.metadata,
            }
        )
    except (ValidationError, ValueError):
        return None


def _transcript_steps(report: RecordReport) -> list[Step]:
    record = _record_of(report)
    return render_transcript(record).steps if record is not None else []


def _message_step(report: RecordReport, index: int) -> int | None:
    """The transcript step message `index` of the record renders as: one past the steps before it."""
    if not 0 <= index < len(report.messages):
        return None
    if index == 0:
        return 1
    before = _record_of(report, index)
    return len(render_transcript(before).steps) + 1 if before is not None else None


def _first_agent(report: RecordReport) -> str | None:
    """The first speaker that is not the user: the trivial blame baseline."""
    for step in _transcript_steps(report):
        if step.speaker and step.kind not in ('user', 'system'):
            return step.speaker
    return None


def _rho(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    """Spearman's ρ, or why there is none."""
    from scipy.stats import spearmanr

    if len(pairs) < 3:
        return {'n': len(pairs), 'rho': None, 'p_value': None, 'note': 'needs at least 3 records'}
    xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
    if len(set(xs)) == 1 or len(set(ys)) == 1:
        return {'n': len(pairs), 'rho': None, 'p_value': None, 'note': 'one side is constant: ρ is undefined'}
    res = spearmanr(xs, ys)
    return {'n': len(pairs), 'rho': _finite(res.statistic), 'p_value': _finite(res.pvalue)}


def _first_repeat(reports: list[RecordReport]) -> dict[str, RecordReport]:
    first: dict[str, RecordReport] = {}
    for r in sorted(reports, key=lambda r: r.repeat):
        first.setdefault(r.query_id, r)
    return first


def _noise(reports: list[RecordReport]) -> list[JudgeNoise]:
    """Per judge: share of repeat pairs, on an identical transcript, whose verdicts differ."""
    groups: dict[tuple[str, str | None], list[RecordReport]] = defaultdict(list)
    for r in reports:
        groups[(r.query_id, r.transcript_sha256)].append(r)
    per_judge: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # records, pairs, disagreeing pairs
    for group in groups.values():
        if len(group) < 2:
            continue
        names = set().union(*(r.judges.keys() for r in group))
        for name in names:
            statuses = [judge_status(r.judges[name]) for r in group if name in r.judges]
            verdicts = [v == 'pass' for v in statuses if v in ('pass', 'fail')]
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
