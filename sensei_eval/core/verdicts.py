"""The verdict model: what a record's judges decided, computed in one place and read by every surface.

The console table, the reports, `view`, the service and its dashboard, production alerts, the
validator, the optimizer and the DSPy metric all read a record's verdicts through this module, so one
run gets one judgement wherever it is looked at. Nothing else turns judge results into pass / fail or
a score.

Per record: its verdicts, its overall score and its coverage, under one severity rule.

* **verdicts** — each judge's verdict per failure mode (`ModeVerdict`, from `mode_verdicts`), with a
  status:

  - `pass` / `fail`: the judge judged this mode;
  - `inconclusive`: the judge answered, but its answer shows it did not judge (never a pass);
  - `error`: the judge could not answer (never a 0, never a pass);
  - `smoke`: the answer came from the embedded SmolLM2 model (its model name starts with
    `embedded:`). That model proves the pipeline runs; it cannot judge, so its answers are never a
    verdict, never in a score, a pass rate, an alert or the optimizer. A stored smoke answer carries
    `passed: null` (what the model said is kept as `details.smoke_answer.passed`, `smoke_answer_fields`),
    so no reader of the report JSON can take it for a pass;
  - `not_applicable`: the judge ran and had nothing to inspect (a tool-call check on a run without a
    tool call, an answer check on a run without an answer), with the reason. **Nothing inspected
    never passes**: it is no verdict, not counted as applied or judged in the coverage, never in a
    score, a pass rate or an error rate. A run where nothing applied is "not judged". This is not a
    judge skipped by the profile or by `applies_to` (that never ran, `RecordReport.skipped`): a not
    applicable result is the judge's own finding about the run, kept in `judges` with its reason.

  A judge that reports several modes (the reference check: `tool_selection` and `tool_parameters`)
  gives one verdict per mode; each finding counts for the mode it is tagged with (`"failure_mode"`
  key), else the judge's own mode. **A mode's verdict is decided the same way whatever the number of
  modes the judge reports**: it fails when it has a failing finding, or when the judge's own `passed`
  is False and none of its modes has a failing finding (a judge that fails without saying why fails
  its own mode). A judge that gives a score and no pass/fail at all (`passed` None, no finding: a
  rubric scorer) is judged, its verdict `pass` with `score_only` set and `passed` None.

* **severity rule** — every finding has a severity (`core.issues.SEVERITIES`): `critical` (a wrong,
  unrequested or forbidden state change; a false statement the user acts on), `major` (a wrong,
  incomplete or misleading result, a request left undone, a rule broken, nothing irreversible done) or
  `minor` (time or polish only: a redundant read, wording). Only major and critical findings fail a
  mode; a minor one is reported and lowers the mode's score by its cost (`SEVERITY_COST`). A finding
  without a severity (a report written before every finding had one) counts as major. The rule is the
  same for LLM judges, checks and multi-mode judges (`is_failing`). Every finding states why it
  was raised (`finding_reason`; `ModeVerdict.reasons` lists them, minor ones marked), so a score below
  1.00, a pass with minor findings included, is never shown without its reason.

* **overall score** — says first what kind of run it is, then what its findings cost:

  - `[0.50, 1.00]`: no mode failed. 1.00 means no finding at all; each minor finding (and a score-only
    judge's score below 1) takes a share of the upper half, so minor findings can never fail a run;
  - `[0.25, 0.50)`: a mode failed, and only LLM judges failed it (a model's verdict);
  - `[0.00, 0.25)`: a deterministic check failed a mode (certain of what it read).

  Within its band the position is `P = Π_m (1 - c_m · (1 - s_m))` over the judged modes, where `s_m` is
  the mode's score (a mode judged twice keeps its worse score; a verdict without a score counts 1 for a
  pass, 0 for a fail) and `c_m` its confidence, 1 for a deterministic check and `MODEL_CONFIDENCE` = 0.8
  for an LLM judge: pass `0.5 + 0.5 P`, model-failed `0.25 + 0.25 P`, check-failed `0.25 P`. A critical
  finding costs its mode's whole score, so it always fails the run and sits low in its band. A mode
  outside the failure-mode table counts under its judge. `None` exactly when no judge gave a pass/fail
  verdict ("not judged"): a run nothing judged never looks like a pass.

* **coverage** — how much of the record was actually judged (`Coverage`): the judges that gave a
  pass/fail verdict out of the judges that applied (skipped judges and not applicable ones do not
  apply; the latter are counted in `not_applicable`), and whether the LLM judges judged. Its `label`
  goes beside the score: `all 11 judges`, `checks only, 8 of 11 judges`, `9 of 11 judges`, `not
  judged`. A partly judged record's score is computed from what was judged and is always shown with
  its coverage.

`build_report` / `rebuild_report` (`core.reports`) store the overall score and the coverage on the
`RecordReport`; reports written before coverage existed get it computed when loaded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, computed_field

from sensei_eval.core import modes

__all__ = (
    'MODEL_CONFIDENCE',
    'SEVERITY_COST',
    'SMOKE_MODEL_PREFIX',
    'Coverage',
    'ModeVerdict',
    'RecordVerdict',
    'VerdictStatus',
    'coverage_of',
    'finding_reason',
    'is_failing',
    'is_judged',
    'is_missing_verdict',
    'is_smoke',
    'judge_status',
    'mode_verdicts',
    'passes',
    'record_verdict',
    'result_verdicts',
    'severity_cost',
    'smoke_answer_fields',
    'verdicts_of',
)

VerdictStatus = Literal['pass', 'fail', 'inconclusive', 'error', 'smoke', 'not_applicable']

# How far an LLM judge's verdict is trusted next to a deterministic check's (1): the share of its mode's
# lost score that counts in the overall score, so a model's finding lowers it less than a check's equal one.
MODEL_CONFIDENCE = 0.8
# What one finding takes off its mode's score, by severity: a critical one all of it, a major one half (so a
# failing mode is at most 0.5), a minor one a tenth (ten minor findings in one mode cost as much as one
# critical, but never fail it).
SEVERITY_COST: dict[str, float] = {'minor': 0.1, 'major': 0.5, 'critical': 1.0}
# Where the overall score's bands start (module docstring): a passed run, a run failed by LLM judges only.
_PASS_FLOOR = 0.5
_MODEL_FAIL_FLOOR = 0.25
# The judge model name the embedded SmolLM2 model reports (`models.judge_model.embedded_model`): its
# answers are smoke, never verdicts.
SMOKE_MODEL_PREFIX = 'embedded:'


class JudgeResultLike(Protocol):
    """What the verdict model reads of a judge result (`core.reports.JudgeResult` has it)."""

    @property
    def judge(self) -> str: ...
    @property
    def failure_mode(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def issues(self) -> list[dict[str, Any]]: ...
    @property
    def score(self) -> float | None: ...
    @property
    def mode_scores(self) -> dict[str, float]: ...
    @property
    def passed(self) -> bool | None: ...


class _HasJudges(Protocol):
    @property
    def judges(self) -> Mapping[str, Any]: ...


class ModeVerdict(BaseModel):
    """One judge's verdict on one failure mode of one record (see the module docstring)."""

    judge: str
    failure_mode: str | None = Field(description='The mode of the findings; None for a judge without one.')
    status: VerdictStatus
    score: float | None = Field(default=None, description="The mode's score; None unless the status is pass or fail.")
    issues: list[dict[str, Any]] = Field(default_factory=list, description='The findings of this mode (minor ones too).')
    error: str | None = Field(
        default=None, description='Why the judge errored, why its answer does not count, or why it did not apply.'
    )
    confidence: float = Field(default=1.0, description='1 for a check, MODEL_CONFIDENCE for an LLM judge.')
    score_only: bool = Field(
        default=False, description='A judge that gives a score and no pass/fail (a rubric scorer): judged, `passed` None.'
    )

    @property
    def judged(self) -> bool:
        """A pass or a fail: the only statuses that count in a score, a pass rate or a decision."""
        return self.status in ('pass', 'fail')

    @property
    def passed(self) -> bool | None:
        """True for a pass, False for a fail, None for anything that is not a verdict (or a score-only one)."""
        if self.score_only:
            return None
        return True if self.status == 'pass' else False if self.status == 'fail' else None

    @property
    def reasons(self) -> list[str]:
        """Why this verdict is what it is, one line per finding, minor ones marked (`finding_reason`): what a
        surface shows beside a score below 1.00, a pass with minor findings included; for a status that is
        no verdict, why (the error, why it is inconclusive or smoke, why it was not applicable)."""
        if not self.judged:
            return [f'{self.status}: {self.error}'] if self.error else [self.status]
        return [f'{i.get("severity") or "major"}: {finding_reason(i)}' for i in self.issues]


class Coverage(BaseModel):
    """How much of a record (or a run) was actually judged: judges, not failure modes."""

    applied: int = Field(
        description='Judges that ran on the record and had something to inspect (skipped and not applicable ones do not apply).'
    )
    judged: int = Field(description='Judges that gave a pass/fail verdict.')
    inconclusive: int = 0
    errors: int = 0
    smoke: int = Field(default=0, description='Judges whose answer came from the embedded model: not a verdict.')
    model_judges: int = Field(default=0, description='Of the judges that applied, those that ask a model (LLM judges).')
    model_judged: int = Field(default=0, description='Of those, the ones that gave a pass/fail verdict.')
    not_applicable: int = Field(
        default=0, description='Judges that ran and had nothing to inspect (no tool call, no answer): neither applied nor judged.'
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        """What goes beside the score: `all 11 judges`, `checks only, 8 of 11 judges`, `not judged`."""
        if self.judged == 0:
            return 'not judged'
        if self.judged == self.applied:
            return f'all {self.applied} judges' if self.applied > 1 else '1 of 1 judge'
        share = f'{self.judged} of {self.applied} judges'
        if self.model_judges and not self.model_judged:
            return f'checks only, {share}'
        return share

    @property
    def complete(self) -> bool:
        """Every judge that applied gave a verdict."""
        return self.applied > 0 and self.judged == self.applied

    def __add__(self, other: Coverage) -> Coverage:
        return Coverage(**{k: getattr(self, k) + getattr(other, k) for k in _COUNTS})


_COUNTS = ('applied', 'judged', 'inconclusive', 'errors', 'smoke', 'model_judges', 'model_judged', 'not_applicable')


class RecordVerdict(BaseModel):
    """A record's verdicts, overall score and coverage, as `record_verdict` computes them."""

    verdicts: list[ModeVerdict]
    overall_score: float | None = Field(description='None when nothing was judged ("not judged").')
    coverage: Coverage
    mode_scores: dict[str, float] = Field(default_factory=dict, description='Each judged mode: its worse score.')
    category_scores: dict[str, float] = Field(default_factory=dict)
    failure_modes: list[str] = Field(default_factory=list, description='Modes with a fail verdict, in the table order.')
    primary_failure_mode: str | None = None

    def by_key(self) -> dict[tuple[str, str | None], ModeVerdict]:
        """(judge, failure mode) -> verdict."""
        return {(v.judge, v.failure_mode): v for v in self.verdicts}

    @property
    def judged(self) -> bool:
        return self.overall_score is not None


# ---------------------------------------------------------------------------------------------------
# Statuses


def is_smoke(result: JudgeResultLike) -> bool:
    """The answer came from the embedded model (smoke: proves the pipeline runs, never a verdict)."""
    return bool(result.model) and str(result.model).startswith(SMOKE_MODEL_PREFIX)


def severity_cost(severity: str | None) -> float:
    """What one finding of this severity takes off its mode's score (None, from an old report: major)."""
    return SEVERITY_COST.get(severity or 'major', SEVERITY_COST['major'])


# The fields a finding states its reason in, in the order they are read (the issue models of `core.issues`).
_REASON_FIELDS = ('reasoning', 'discrepancy', 'why_better', 'violation', 'suggested_fix')


def finding_reason(issue: Mapping[str, Any]) -> str:
    """What a finding says about why it was raised: its reasoning (or the field its mode states a reason in),
    else its other text fields as `name: value`. Every finding has one, so no score below 1 goes unexplained."""
    for name in _REASON_FIELDS:
        value = issue.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    claim, said = issue.get('hallucinated_claim'), issue.get('what_tools_actually_said')
    if isinstance(claim, str) and isinstance(said, str) and claim.strip():  # a claim and what backs it, in one line
        return f'{claim.strip()}: {said.strip()}' if said.strip() else claim.strip()
    fields = [
        f'{k}: {v}'
        for k, v in issue.items()
        if k not in ('steps', 'source', 'severity', 'failure_mode') and v not in (None, '', [])
    ]
    return '; '.join(fields) or 'no reason given'


def is_failing(issue: Mapping[str, Any]) -> bool:
    """A finding fails its mode unless its severity is `minor` (the severity rule, module docstring)."""
    return issue.get('severity') != 'minor'


def passes(issues: Iterable[Mapping[str, Any] | object]) -> bool:
    """No failing finding among `issues` (dicts or issue models): what a judge's own `passed` says."""
    return not any(is_failing(i if isinstance(i, Mapping) else {'severity': getattr(i, 'severity', None)}) for i in issues)


def is_judged(status: str) -> bool:
    """A pass or a fail."""
    return status in ('pass', 'fail')


def is_missing_verdict(status: str) -> bool:
    """The judge had something to judge and gave no verdict (error, inconclusive, smoke): what error
    rates count. A pass, a fail and `not_applicable` (nothing to inspect) are not missing verdicts."""
    return status in ('error', 'inconclusive', 'smoke')


def judge_status(result: JudgeResultLike) -> VerdictStatus:
    """One judge's verdict over all its modes: `fail` when any of its modes fails, else `pass`; or the
    status that is no verdict (`error`, `not_applicable`, `smoke`, `inconclusive`). The same as aggregating
    `result_verdicts`, without building them (it is called per result when a run's summary is counted)."""
    if result.status == 'error':
        return 'error'
    if result.status == 'not_applicable':
        return 'not_applicable'
    if is_smoke(result):
        return 'smoke'
    if result.status != 'ok':
        return 'inconclusive'
    # a mode fails on a failing finding, or the judge's own mode when it failed without one
    return 'fail' if result.passed is False or any(is_failing(i) for i in result.issues) else 'pass'


# Why an embedded model's answer is no verdict (the `error` of its smoke verdicts).
_SMOKE_ANSWER = 'answered by the embedded model: smoke, not a verdict'
# Said for a not applicable result that gave no reason of its own.
_NOTHING_TO_INSPECT = 'nothing to inspect in this run'


def smoke_answer_fields(result: JudgeResultLike, details: Mapping[str, Any]) -> dict[str, Any] | None:
    """How a smoke answer is stored: `passed` null (so no reader of the report JSON counts it as a pass or a
    fail), what the model said kept as `details.smoke_answer.passed`; its `score` stays, as the model's
    number, never in an overall score. None when `result` is no smoke answer or is stored that way already.
    `core.reports.JudgeResult` applies it to every result it holds."""
    if not is_smoke(result) or result.passed is None:
        return None
    return {'passed': None, 'details': {**details, 'smoke_answer': {'passed': result.passed}}}


def _confidence(result: JudgeResultLike) -> float:
    """A deterministic check (no model) is certain of what it read; a model's verdict less so."""
    return 1.0 if result.model is None else MODEL_CONFIDENCE


def result_verdicts(result: JudgeResultLike) -> list[ModeVerdict]:
    """A judge result's verdicts, one per failure mode it reports (module docstring)."""
    name, own = result.judge, result.failure_mode
    if result.status == 'error':
        return [ModeVerdict(judge=name, failure_mode=own, status='error', error=result.error)]
    if result.status == 'not_applicable':
        why = result.error or _NOTHING_TO_INSPECT
        return [ModeVerdict(judge=name, failure_mode=own, status='not_applicable', error=why)]
    smoke = is_smoke(result)
    if result.status != 'ok':
        status: VerdictStatus = 'smoke' if smoke else 'inconclusive'
        return [ModeVerdict(judge=name, failure_mode=own, status=status, error=result.error)]
    by_mode: dict[str | None, list[dict[str, Any]]] = {}
    for issue in result.issues:
        by_mode.setdefault(issue.get('failure_mode') or own, []).append(issue)
    found: list[str | None] = list(dict.fromkeys([*result.mode_scores, *by_mode])) or [own]
    single = len(found) == 1
    # a judge that says it failed with no failing finding fails its own mode (or its only one)
    unexplained = result.passed is False and not any(is_failing(i) for i in result.issues)
    blamed = found[0] if single else own
    out: list[ModeVerdict] = []
    for mode in found:
        issues = by_mode.get(mode, [])
        score = result.mode_scores.get(mode) if mode is not None else None
        if score is None and single:
            score = result.score
        if smoke:
            out.append(ModeVerdict(judge=name, failure_mode=mode, status='smoke', issues=issues, error=_SMOKE_ANSWER))
            continue
        failed = any(is_failing(i) for i in issues) or (unexplained and mode == blamed)
        out.append(
            ModeVerdict(
                judge=name,
                failure_mode=mode,
                status='fail' if failed else 'pass',
                score=score,
                issues=issues,
                confidence=_confidence(result),
                score_only=result.passed is None and not result.issues,
            )
        )
    return out


def verdicts_of(results: Iterable[JudgeResultLike]) -> list[ModeVerdict]:
    """Every (judge, mode) verdict of a record's judge results, in the results' order."""
    return [v for r in results for v in result_verdicts(r)]


def mode_verdicts(report: _HasJudges) -> dict[tuple[str, str | None], ModeVerdict]:
    """(judge, failure mode) -> that judge's verdict on that mode, for every judge result of `report`."""
    return {(v.judge, v.failure_mode): v for v in verdicts_of(report.judges.values())}


def coverage_of(results: Iterable[JudgeResultLike]) -> Coverage:
    """How much the judges that applied actually judged (a judge counts once, whatever its modes)."""
    counts = dict.fromkeys(_COUNTS, 0)
    for result in results:
        status = judge_status(result)
        if status == 'not_applicable':  # nothing to inspect: neither applied nor judged
            counts['not_applicable'] += 1
            continue
        counts['applied'] += 1
        judged = is_judged(status)
        counts['judged'] += judged
        counts['inconclusive'] += status == 'inconclusive'
        counts['errors'] += status == 'error'
        counts['smoke'] += status == 'smoke'
        if result.model is not None:
            counts['model_judges'] += 1
            counts['model_judged'] += judged
    return Coverage(**counts)


def record_verdict(report_or_results: _HasJudges | Sequence[JudgeResultLike]) -> RecordVerdict:
    """A record's verdicts, overall score, coverage and failure modes, from its judge results.

    Takes a `RecordReport` (its `judges`) or the judge results themselves. `build_report` stores what
    this returns, so a report's `overall_score` and `coverage` are always this function's."""
    results = list(report_or_results.judges.values()) if hasattr(report_or_results, 'judges') else list(report_or_results)
    verdicts = verdicts_of(results)
    scores: dict[str, tuple[float, float]] = {}  # mode -> (worse score, confidence of the verdict that gave it)
    issue_counts: dict[str, int] = {}
    failed: dict[str, float] = {}  # failed mode -> the highest confidence among the verdicts that failed it
    for v in verdicts:
        if not v.judged:
            continue
        # a verdict of a mode outside the table (a user's judge) still counts, under its judge's name
        key = v.failure_mode if v.failure_mode in modes.MODES else f'judge:{v.judge}:{v.failure_mode}'
        issue_counts[key] = issue_counts.get(key, 0) + len(v.issues)
        if v.status == 'fail':
            failed[key] = max(failed.get(key, 0.0), v.confidence)
        score = v.score if v.score is not None else float(v.status == 'pass')  # a verdict without a score
        if key not in scores or score < scores[key][0]:
            scores[key] = (score, v.confidence)
    by_category: dict[str, list[float]] = {}
    for mode, (score, _) in scores.items():
        if mode in modes.MODES:
            by_category.setdefault(modes.MODES[mode].category, []).append(score)
    order = list(modes.MODES)
    failure_modes = [m for m in order if m in failed]
    primary = min(failure_modes, key=lambda m: (scores[m][0], -issue_counts.get(m, 0), order.index(m))) if failure_modes else None
    overall = _overall(scores, failed) if scores else None
    return RecordVerdict(
        verdicts=verdicts,
        overall_score=overall,
        coverage=coverage_of(results),
        mode_scores={m: s for m, (s, _) in scores.items() if m in modes.MODES},
        category_scores={c: sum(xs) / len(xs) for c in modes.categories() if (xs := by_category.get(c))},
        failure_modes=failure_modes,
        primary_failure_mode=primary,
    )


def _overall(scores: Mapping[str, tuple[float, float]], failed: Mapping[str, float]) -> float:
    """The overall score's band and position in it (module docstring), from each judged mode's (score,
    confidence) and the failed modes with the confidence of what failed them."""
    position = math.prod(1.0 - c * (1.0 - min(1.0, max(0.0, s))) for s, c in scores.values())
    if not failed:
        return _PASS_FLOOR + (1.0 - _PASS_FLOOR) * position
    if max(failed.values()) >= 1.0:  # a deterministic check failed it
        return _MODEL_FAIL_FLOOR * position
    return _MODEL_FAIL_FLOOR + (_PASS_FLOOR - _MODEL_FAIL_FLOOR) * position
