"""Issue reports: what a run of the judges wrote, per record and per run.

One `RecordReport` per record (the issues found, by failure mode, plus per judge: criteria hash, model, status,
error, tokens, latency, truncation) is written atomically to `<out>/<run-id>/records/<id>.json` as soon
as its judges finish, so a crash loses at most the records in flight (`<id>` is the query id, encoded
so that no id can collide with another or with a run file: `encode_query_id`). `summary.json` at the
top of the run folder describes the run. Folders written before `records/` existed (reports at the
top) still load. `to_dataframe(run_dir)` reads a run back as pandas; `to_pydantic_evals_report`
turns one into a pydantic-evals `EvaluationReport` for its console table and baseline comparison.

Scoring, from the judges that ran without error (an errored judge is an error, never a 0):

* a failure mode's score is `1 - Σ issue weights`, floored at 0 (weight 0.5 per issue; hallucinations
  weigh 0.25 / 0.5 / 1.0 for minor / major / critical), and it passes when it found no issue;
* a category's score (tool usage, sources, output, format, methodology, instructions) is the mean of its modes' scores;
* `overall_score` = Π over the failure modes judged of `score_m ** confidence_m`: every finding lowers
  it by its severity (through the mode's score: a check's minor finding costs less than a major one),
  weighted by how far the verdict can be trusted (`confidence_m`: 1 for a deterministic check, 0.8 for
  an LLM judge — `MODEL_CONFIDENCE`), and findings in several modes compound, so runs rank by how much
  went wrong rather than falling into a few buckets; None when no judge gave a verdict (errored and
  inconclusive judges never count as a score);
* `primary_failure_mode` is the failed mode with the lowest score (ties: more issues, then seed order).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field, SerializeAsAny, ValidationError, field_validator

from sensei_eval.core import modes
from sensei_eval.core.issues import Issue
from sensei_eval.core.records import QueryRecord, Rating
from sensei_eval.core.transcript import Transcript, Truncation

if TYPE_CHECKING:
    from pydantic_evals.reporting import EvaluationReport as PydanticEvalsReport

__all__ = (
    'MODEL_CONFIDENCE',
    'JudgeResult',
    'JudgeStatus',
    'JudgeSummary',
    'ModeVerdict',
    'RecordReport',
    'RunFacts',
    'RunSummary',
    'RunTally',
    'build_report',
    'decode_query_id',
    'encode_query_id',
    'mode_verdicts',
    'rebuild_report',
    'report_filename',
    'report_path',
    'to_pydantic_evals_report',
    'write_json_atomic',
)

# `inconclusive`: the judge answered, but its answer shows it did not judge (reasoning copied from the
# prompt, citations of steps that do not exist, ...). Kept with its raw output, never scored.
JudgeStatus = Literal['ok', 'error', 'inconclusive']
# Files in a run folder that are about the run, not a record's report.
RUN_FILES = frozenset({'summary.json', 'calibration.json'})


class _NamedJudge(Protocol):
    """What a run summary needs of a judge (`evaluators.base.Judge` has it)."""

    @property
    def name(self) -> str: ...

    def criteria_hash(self) -> str: ...


class JudgeResult(BaseModel):
    """One judge on one record: its verdict, or the error that stopped it, and what it cost."""

    judge: str
    failure_mode: str | None
    category: str | None
    criteria_hash: str
    model: str | None
    status: JudgeStatus
    error: str | None = Field(default=None, description='Why the judge errored, or why its answer is inconclusive.')
    reasoning: str | None = None
    issues: list[dict[str, Any]] = Field(default_factory=list)
    score: float | None = None
    # A judge that scores several failure modes (the reference check: tool_selection and tool_parameters)
    # gives each its own score here, and tags each issue with its mode (`"failure_mode"` key).
    mode_scores: dict[str, float] = Field(default_factory=dict)
    passed: bool | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    latency_s: float = 0.0
    cached: bool = False
    truncation: Truncation | None = None
    warnings: list[str] = Field(default_factory=list)
    raw_output: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class RecordReport(BaseModel):
    """The evaluation report of one record, plus what the judges cost and how they ran."""

    query_id: str
    run_id: str
    repeat: int = 1
    evaluated_at: datetime

    query: str
    messages: list[dict[str, Any]]
    message_format: str | None = None
    agent_rating: Rating | None = None
    prompt_version: str | None = None
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="The record's metadata (speaker prefixes, tool definitions): rebuilt as judged."
    )

    issues: dict[str, list[SerializeAsAny[Issue]]] = Field(
        default_factory=dict,
        description="The issues found, by failure mode (a name in `modes.MODES`), each as its mode's issue model; "
        'modes with none are left out.',
    )

    overall_score: float | None = None
    category_scores: dict[str, float] = Field(default_factory=dict)
    primary_failure_mode: str | None = None
    failure_modes: list[str] = Field(default_factory=list)
    decisive_step: int | None = Field(
        default=None, description='The earliest transcript step cited by the primary failure mode: where the run went wrong.'
    )
    decisive_agent: str | None = Field(default=None, description='Who spoke at `decisive_step` (multi-agent runs).')
    profile: str | None = Field(default=None, description='The agent profile whose checks ran on this record.')
    inconclusive: list[str] = Field(default_factory=list, description='Judges whose answer showed they did not judge.')

    model: str | None = None
    criteria_hashes: dict[str, str] = Field(default_factory=dict)
    judges: dict[str, JudgeResult] = Field(default_factory=dict)
    skipped: dict[str, str] = Field(default_factory=dict, description='Judges that do not apply to this record, and why.')
    errors: list[str] = Field(default_factory=list)
    input_warnings: list[str] = Field(
        default_factory=list, description="What the loader changed in the record's text (lone surrogates, NULs)."
    )
    truncation: Truncation | None = None
    transcript_sha256: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0

    @field_validator('issues', mode='before')
    @classmethod
    def _as_mode_models(cls, value: Any) -> Any:
        """Each mode's issues as the table's issue model of that mode, so every field a judge wrote is kept
        (the declared `Issue` would drop them); a key that names no failure mode is an error."""
        if not isinstance(value, dict):
            return value
        out: dict[Any, Any] = {}
        errors: list[Any] = []  # each located under its mode and index: `issues.hallucination.0.severity`
        for mode, found in value.items():
            if mode not in modes.MODES:
                problem = ValueError(f'{mode!r} is not a failure mode (known: {", ".join(modes.MODES)})')
                errors.append({'type': 'value_error', 'loc': (mode,), 'input': mode, 'ctx': {'error': problem}})
                continue
            model = modes.MODES[mode].issue_model
            if isinstance(found, list):
                found = list(found)
                for n, issue in enumerate(found):
                    try:
                        found[n] = issue if isinstance(issue, model) else model.model_validate(issue)
                    except ValidationError as e:
                        errors.extend({**err, 'loc': (mode, n, *err['loc'])} for err in e.errors(include_url=False))
            out[mode] = found
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return out

    def issues_of(self, mode: str) -> list[Issue]:
        """The issues found for a failure mode (none when the report holds none of it)."""
        if mode not in modes.MODES:
            raise KeyError(f'{mode!r} is not a failure mode')
        return self.issues.get(mode, [])


class JudgeSummary(BaseModel):
    """One judge over a run: how many verdicts, errors and set-aside answers, how it scored, what it cost."""

    criteria_hash: str
    ok: int = 0
    errors: int = 0
    inconclusive: int = 0
    pass_rate: float | None = Field(default=None, description='Share of ok verdicts that passed; None without one.')
    mean_score: float | None = Field(default=None, description='Mean score over ok verdicts; None without one.')
    input_tokens: int = 0
    output_tokens: int = 0

    @classmethod
    def of(cls, criteria_hash: str, results: Sequence[JudgeResult]) -> JudgeSummary:
        ok = [x for x in results if x.status == 'ok']
        return cls(
            criteria_hash=criteria_hash,
            ok=len(ok),
            errors=sum(1 for x in results if x.status == 'error'),
            inconclusive=sum(1 for x in results if x.status == 'inconclusive'),
            pass_rate=(sum(1 for x in ok if x.passed) / len(ok)) if ok else None,
            mean_score=(sum(x.score for x in ok if x.score is not None) / len(ok)) if ok else None,
            input_tokens=sum(x.input_tokens for x in results),
            output_tokens=sum(x.output_tokens for x in results),
        )


class RunSummary(BaseModel):
    """`summary.json`: what ran, on what, and how it went. `RunSummary.build` makes one from the reports."""

    run_id: str
    started_at: datetime
    finished_at: datetime
    model: str | None
    judges: dict[str, str]
    datasets: list[str]
    records_loaded: int
    records_judged: int
    load_errors: list[str]
    judge_errors: list[str]
    inconclusive: list[str] = Field(default_factory=list, description='`query_id: judge: why` per verdict set aside.')
    profile: str | None = None
    repeat: int
    per_judge: dict[str, JudgeSummary]
    mean_overall_score: float | None
    input_tokens: int
    output_tokens: int
    model_requests: int
    cache_hits: int
    truncated_records: list[str]
    exit_code: int

    @classmethod
    def build(cls, run_id: str, reports: Sequence[RecordReport], judges: Iterable[_NamedJudge], facts: RunFacts) -> RunSummary:
        """The summary of a run from its reports and the `facts` they do not tell. Tokens and requests
        count only what was not a cache hit. The same arithmetic as a `RunTally` fed one report at a time."""
        tally = RunTally(judges)
        for seq, report in enumerate(reports):
            tally.add(report, seq)
        return tally.summary(run_id, facts)


@dataclass(frozen=True)
class RunFacts:
    """What a run's summary says that its reports do not: when it ran, the model's name, the datasets,
    `records_loaded` (default: the records judged) and `load_errors`, the repeats, the cache hits, the
    profile, and `exit_code` (default: 1 when a record failed to load or a judge errored, else 0)."""

    started_at: datetime
    finished_at: datetime | None = None
    model: str | None = None
    datasets: Iterable[str | os.PathLike[str]] = ()
    records_loaded: int | None = None
    load_errors: Sequence[str] = ()
    repeat: int = 1
    cache_hits: int = 0
    profile: str | None = None
    exit_code: int | None = None


class _ExactSum:
    """A float sum that does not depend on the order of its terms and takes a term back exactly (the
    partials of `math.fsum`), so a summary built as a stream, with reports replaced, equals one built at once."""

    __slots__ = ('_partials',)

    def __init__(self) -> None:
        self._partials: list[float] = []

    def add(self, x: float) -> None:
        i = 0
        for y in self._partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                self._partials[i] = lo
                i += 1
            x = hi
        self._partials[i:] = [x]

    @property
    def value(self) -> float:
        return math.fsum(self._partials)


class _JudgeTally:
    """One judge's counts and sums over the reports seen so far."""

    __slots__ = ('errors', 'inconclusive', 'input_tokens', 'ok', 'output_tokens', 'passed', 'scores')

    def __init__(self) -> None:
        self.ok = self.errors = self.inconclusive = self.passed = 0
        self.input_tokens = self.output_tokens = 0
        self.scores = _ExactSum()

    def add(self, result: JudgeResult, sign: int) -> None:
        if result.status == 'ok':
            self.ok += sign
            self.passed += sign * bool(result.passed)
            if result.score is not None:
                self.scores.add(sign * result.score)
        elif result.status == 'error':
            self.errors += sign
        else:
            self.inconclusive += sign
        self.input_tokens += sign * result.input_tokens
        self.output_tokens += sign * result.output_tokens

    def summary(self, criteria_hash: str) -> JudgeSummary:
        return JudgeSummary(
            criteria_hash=criteria_hash,
            ok=self.ok,
            errors=self.errors,
            inconclusive=self.inconclusive,
            pass_rate=self.passed / self.ok if self.ok else None,
            mean_score=self.scores.value / self.ok if self.ok else None,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
        )


class RunTally:
    """A run's summary built one report at a time: counts, exact sums, and the few lists `summary.json`
    carries (judge errors, inconclusive verdicts, truncated records), never the reports themselves.

    `add(report, seq)` counts a report; `replace(old, new, seq)` swaps one already counted (the run-wide
    rules rewrite reports after the fact); `seq` orders the lists as the reports were ordered. What grows
    with the run besides those lists is one query id per record (`records_judged` counts distinct ids)."""

    def __init__(self, judges: Iterable[_NamedJudge]) -> None:
        # a fused judge (several failure modes in one call) reports, and is counted, as its members
        judges = [m for j in judges for m in (getattr(j, 'members', None) or [j])]
        self.judges = {j.name: j.criteria_hash() for j in judges}
        self._per_judge = {name: _JudgeTally() for name in self.judges}
        self._ids: set[str] = set()
        self._overall = _ExactSum()
        self._overall_n = 0
        self._judge_errors: dict[int, list[str]] = {}
        self._inconclusive: dict[int, list[str]] = {}
        self._truncated: set[str] = set()
        self.reports = 0
        self.input_tokens = self.output_tokens = self.model_requests = 0

    def add(self, report: RecordReport, seq: int) -> None:
        """Count one report; `seq` is its place in the run (the order of the summary's lists)."""
        self._ids.add(report.query_id)
        self.reports += 1
        if report.truncation is not None:
            self._truncated.add(report.query_id)
        self._count(report, seq, +1)

    def replace(self, old: RecordReport, new: RecordReport, seq: int) -> None:
        """Swap a counted report for its rewritten version (same record and repeat)."""
        self._count(old, seq, -1)
        self._count(new, seq, +1)

    def _count(self, report: RecordReport, seq: int, sign: int) -> None:
        if report.overall_score is not None:
            self._overall.add(sign * report.overall_score)
            self._overall_n += sign
        for result in report.judges.values():
            if not result.cached:
                self.input_tokens += sign * result.input_tokens
                self.output_tokens += sign * result.output_tokens
                self.model_requests += sign * result.requests
            if (tally := self._per_judge.get(result.judge)) is not None:
                tally.add(result, sign)
        errors = [f'{report.query_id}: {e}' for e in report.errors]
        inconclusive = [
            f'{report.query_id}: {name}: {report.judges[name].error}' for name in report.inconclusive if name in report.judges
        ]
        for lists, lines in ((self._judge_errors, errors), (self._inconclusive, inconclusive)):
            if sign > 0 and lines:
                lists.setdefault(seq, []).extend(lines)
            elif sign < 0 and seq in lists:
                kept = [x for x in lists.pop(seq) if x not in lines]
                if kept:
                    lists[seq] = kept

    @property
    def records_judged(self) -> int:
        return len(self._ids)

    def per_judge(self) -> dict[str, JudgeSummary]:
        return {name: self._per_judge[name].summary(h) for name, h in self.judges.items()}

    def judge_errors(self) -> list[str]:
        return [x for seq in sorted(self._judge_errors) for x in self._judge_errors[seq]]

    def inconclusive(self) -> list[str]:
        return [x for seq in sorted(self._inconclusive) for x in self._inconclusive[seq]]

    def summary(self, run_id: str, facts: RunFacts) -> RunSummary:
        """The `RunSummary` of what was counted, with the `facts` the counts do not tell."""
        f = facts
        load_errors, records_loaded, exit_code = f.load_errors, f.records_loaded, f.exit_code
        judge_errors = self.judge_errors()
        judged = self.records_judged
        return RunSummary(
            run_id=run_id,
            started_at=f.started_at,
            finished_at=f.finished_at or datetime.now(UTC),
            model=f.model,
            judges=dict(self.judges),
            datasets=[str(d) for d in f.datasets],
            records_loaded=judged if records_loaded is None else records_loaded,
            records_judged=judged,
            load_errors=list(load_errors),
            judge_errors=judge_errors,
            inconclusive=self.inconclusive(),
            profile=f.profile,
            repeat=f.repeat,
            per_judge=self.per_judge(),
            mean_overall_score=self._overall.value / self._overall_n if self._overall_n else None,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            model_requests=self.model_requests,
            cache_hits=f.cache_hits,
            truncated_records=sorted(self._truncated),
            exit_code=(1 if (load_errors or judge_errors) else 0) if exit_code is None else exit_code,
        )


class ModeVerdict(BaseModel):
    """One judge's verdict on one failure mode of one record (see `mode_verdicts`)."""

    judge: str
    failure_mode: str | None = Field(description='The mode of the findings; None for a judge without one.')
    status: JudgeStatus
    score: float | None = None
    passed: bool | None = None
    issues: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = None


def mode_verdicts(report: RecordReport) -> dict[tuple[str, str | None], ModeVerdict]:
    """(judge, failure mode) -> that judge's verdict on that mode, for every judge result of `report`.

    The one place that maps findings to failure modes: each issue counts for the mode it is tagged with
    (`"failure_mode"` key), else the judge's own mode, so a judge that reports two modes (the reference
    check: tool_selection and tool_parameters) gives two verdicts. A mode's score is its `mode_scores`
    entry, else the judge's score when the judge has only that mode; it passes when it has no issue
    (a single-mode judge: the judge's own `passed`). An errored or inconclusive judge gives one entry
    under its own mode with that status and no score. The optimizer, GEPA feedback and the validator
    all read verdicts through this function.
    """
    out: dict[tuple[str, str | None], ModeVerdict] = {}
    for name, result in report.judges.items():
        if result.status != 'ok':
            out[(name, result.failure_mode)] = ModeVerdict(
                judge=name, failure_mode=result.failure_mode, status=result.status, error=result.error
            )
            continue
        by_mode: dict[str | None, list[dict[str, Any]]] = {}
        for issue in result.issues:
            by_mode.setdefault(issue.get('failure_mode') or result.failure_mode, []).append(issue)
        found: list[str | None] = list(dict.fromkeys([*result.mode_scores, *by_mode]))
        if not found:
            found = [result.failure_mode]
        single = len(found) == 1
        for mode in found:
            issues = by_mode.get(mode, [])
            score = result.mode_scores.get(mode) if mode is not None else None
            if score is None and single:
                score = result.score
            passed = result.passed if single else (None if result.passed is None else not issues)
            out[(name, mode)] = ModeVerdict(judge=name, failure_mode=mode, status='ok', score=score, passed=passed, issues=issues)
    return out


def build_report(
    record: QueryRecord,
    results: Sequence[JudgeResult],
    *,
    run_id: str,
    repeat: int = 1,
    model: str | None = None,
    transcript: Transcript | None = None,
    skipped: dict[str, str] | None = None,
    profile: str | None = None,
) -> RecordReport:
    """Assemble a record's report from its judges' results and compute the summary scores.

    `transcript` (the one the judges read) gives the report its truncation and hash, and the speaker of
    each step (multi-agent runs) for `decisive_agent`.
    """
    truncation = transcript.truncation if transcript is not None else None
    transcript_sha256 = transcript.sha256 if transcript is not None else None
    speakers = transcript.speakers if transcript is not None else None
    report = RecordReport(
        query_id=record.query_id,
        run_id=run_id,
        repeat=repeat,
        evaluated_at=datetime.now(UTC),
        query=record.query,
        messages=record.messages,
        message_format=record.message_format,
        agent_rating=record.rating,
        prompt_version=record.prompt_version,
        metadata=dict(record.metadata),
        model=model,
        truncation=truncation,
        transcript_sha256=transcript_sha256,
        skipped=skipped or {},
        profile=profile,
        input_warnings=list(record.input_warnings),
    )
    _score(report, results, speakers)
    return report


def rebuild_report(
    report: RecordReport, results: Sequence[JudgeResult], speakers: dict[int, str] | None = None
) -> RecordReport:
    """The report with its judges' results replaced and every score, issue list and verdict recomputed;
    the record's fields, and errors that are not a judge's (an unknown profile), are kept. How the
    run-wide rules rewrite a written report without the record it came from."""
    judge_errors = {f'{r.judge}: {r.error}' for r in report.judges.values() if r.status == 'error'}
    fresh = report.model_copy(
        update={
            'issues': {},
            'overall_score': None,
            'category_scores': {},
            'primary_failure_mode': None,
            'failure_modes': [],
            'decisive_step': None,
            'decisive_agent': None,
            'inconclusive': [],
            'criteria_hashes': {},
            'judges': {},
            'errors': [],
            'input_tokens': 0,
            'output_tokens': 0,
            'latency_s': 0.0,
        }
    )
    _score(fresh, results, speakers)
    fresh.errors.extend(e for e in report.errors if e not in judge_errors)
    return fresh


def _score(report: RecordReport, results: Sequence[JudgeResult], speakers: dict[int, str] | None) -> None:
    """Fill a report from its judges' results: issue lists, scores, errors, the primary failure mode."""
    mode_scores: dict[str, tuple[float, int]] = {}
    confidence: dict[str, float] = {}  # mode -> confidence of the verdict that gave its score
    for result in results:
        report.judges[result.judge] = result
        report.criteria_hashes[result.judge] = result.criteria_hash
        report.input_tokens += result.input_tokens
        report.output_tokens += result.output_tokens
        report.latency_s += result.latency_s
        if result.status == 'error':
            report.errors.append(f'{result.judge}: {result.error}')
            continue
        if result.status == 'inconclusive':
            report.inconclusive.append(result.judge)
            continue
        by_mode: dict[str, list[dict[str, Any]]] = {}
        for issue in result.issues:
            by_mode.setdefault(issue.get('failure_mode') or result.failure_mode or '', []).append(issue)
        scores = result.mode_scores or (
            {result.failure_mode: result.score} if result.failure_mode and result.score is not None else {}
        )
        for mode in dict.fromkeys([*by_mode, *scores]):
            if mode not in modes.MODES:
                continue
            issue_model = modes.MODES[mode].issue_model
            found = by_mode.get(mode, [])
            if found:
                report.issues.setdefault(mode, []).extend(issue_model.model_validate(i) for i in found)
            if mode in scores:
                previous = mode_scores.get(mode)
                # a mode judged twice (an LLM judge and a check) keeps its worse score
                if previous is None or scores[mode] < previous[0]:
                    mode_scores[mode] = (scores[mode], len(found) + (previous[1] if previous else 0))
                    confidence[mode] = _confidence(result)
                else:
                    mode_scores[mode] = (previous[0], previous[1] + len(found))
    report.issues = {m: report.issues[m] for m in modes.MODES if m in report.issues}  # in the table's order
    _summarise(report, mode_scores, confidence)
    if report.primary_failure_mode is not None:
        cited = [s for i in report.issues_of(report.primary_failure_mode) for s in i.steps]
        report.decisive_step = min(cited) if cited else None
        if report.decisive_step is not None and speakers:
            report.decisive_agent = speakers.get(report.decisive_step)


# How far an LLM judge's verdict is trusted next to a deterministic check's (1): the exponent its mode
# score gets in `overall_score`, so a model's finding lowers the score less than a check's equal one.
MODEL_CONFIDENCE = 0.8


def _confidence(result: JudgeResult) -> float:
    """A deterministic check (no model) is certain of what it read; a model's verdict less so."""
    return 1.0 if result.model is None else MODEL_CONFIDENCE


def _summarise(report: RecordReport, mode_scores: dict[str, tuple[float, int]], confidence: dict[str, float]) -> None:
    by_category: dict[str, list[float]] = {}
    for mode, (score, _) in mode_scores.items():
        by_category.setdefault(modes.MODES[mode].category, []).append(score)
    report.category_scores = {c: sum(v) / len(v) for c in modes.categories() if (v := by_category.get(c))}
    if mode_scores:
        report.overall_score = math.prod(max(0.0, s) ** confidence.get(m, 1.0) for m, (s, _) in mode_scores.items())
    order = list(modes.MODES)
    failed = [m for m in order if m in mode_scores and report.issues.get(m)]
    report.failure_modes = failed
    if failed:
        report.primary_failure_mode = min(failed, key=lambda m: (mode_scores[m][0], -mode_scores[m][1], order.index(m)))


# ---------------------------------------------------------------------------------------------------
# Files


RECORDS_DIR = 'records'
_SAFE_CHARS = frozenset('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-')
# Names Windows reserves whatever the extension (`con.json`, `NUL.txt`, ...).
_RESERVED_NAMES = frozenset(
    {'con', 'prn', 'aux', 'nul', 'conin$', 'conout$'} | {f'{p}{n}' for p in ('com', 'lpt') for n in '123456789¹²³'}
)
# An encoded id longer than this is cut and given a hash suffix (file names are capped at 255 bytes).
_MAX_NAME = 150
_REPEAT_TAIL = re.compile(r'\.r[0-9]+$')


def _percent(c: str) -> str:
    return ''.join(f'%{b:02X}' for b in c.encode('utf-8'))


def encode_query_id(query_id: str) -> str:
    """A record id as a file-name stem that no other id, run file or repeat suffix can collide with.

    Reversible (`decode_query_id`) unless over the length cap: every character outside
    `[A-Za-z0-9._-]` is percent-encoded as UTF-8 (`/` -> `%2F`, `%` -> `%25`), and so are a leading `.`
    (`..`, hidden files), a trailing `.` (Windows drops it), the dot of a trailing `.r<N>` (that is the
    repeat suffix) and the first letter of a Windows-reserved name (`CON` -> `%43ON`). An encoded id over
    150 characters is cut and gets `~` and 12 hex digits of the id's SHA256 (`~` is always encoded, so it
    only ever marks a hash); the full id is in the report itself.
    """
    encoded = ''.join(c if c in _SAFE_CHARS else _percent(c) for c in query_id)
    if encoded.startswith('.'):
        encoded = '%2E' + encoded[1:]
    if encoded.endswith('.'):
        encoded = encoded[:-1] + '%2E'
    if (tail := _REPEAT_TAIL.search(encoded)) is not None:
        encoded = encoded[: tail.start()] + '%2E' + encoded[tail.start() + 1 :]
    if encoded.split('.', 1)[0].lower() in _RESERVED_NAMES:
        encoded = _percent(encoded[0]) + encoded[1:]
    if not encoded:
        encoded = '~empty'
    if len(encoded) > _MAX_NAME:
        import hashlib

        cut = encoded[: _MAX_NAME - 13]
        if '%' in cut[-2:]:  # never split a %XX escape
            cut = cut[: cut.rindex('%')]
        encoded = f'{cut}~{hashlib.sha256(query_id.encode()).hexdigest()[:12]}'
    return encoded


def decode_query_id(stem: str) -> str | None:
    """The record id `encode_query_id` encoded into `stem`; None for a cut (hashed) name."""
    from urllib.parse import unquote

    if '~' in stem:
        return None
    return unquote(stem, errors='strict')


def report_filename(query_id: str, repeat: int = 1) -> str:
    """The file name of a record's report inside a run folder's `records/` (see `encode_query_id`)."""
    suffix = '' if repeat == 1 else f'.r{repeat}'
    return f'{encode_query_id(query_id)}{suffix}.json'


def report_path(run_dir: Path, query_id: str, repeat: int = 1) -> Path:
    """Where a record's report goes: `<run_dir>/records/<encoded id>[.r<N>].json`, apart from the run's files."""
    return run_dir / RECORDS_DIR / report_filename(query_id, repeat)


def write_json_atomic(path: Path, data: str, *, durable: bool = True) -> None:
    """Write via a temp file and rename, so a reader never sees half a report.

    `durable` also flushes the file to disk before the rename (it then survives a power cut, not just
    a crash of the process); that costs milliseconds a file, which a run's per-record reports skip."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f'.{path.name}.', suffix='.tmp')
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def to_pydantic_evals_report(
    reports: Sequence[RecordReport], name: str = 'sensei-eval'
) -> PydanticEvalsReport[Any, Any, Any]:
    """The run as a pydantic-evals report: scores per judge, a pass assertion each, failures as failures."""
    from pydantic_evals.evaluators import EvaluationResult, EvaluatorFailure
    from pydantic_evals.evaluators.spec import EvaluatorSpec
    from pydantic_evals.reporting import EvaluationReport as PEReport
    from pydantic_evals.reporting import ReportCase

    cases: list[ReportCase[Any, Any, Any]] = []
    for report in reports:
        scores: dict[str, EvaluationResult[int | float]] = {}
        assertions: dict[str, EvaluationResult[bool]] = {}
        failures: list[EvaluatorFailure] = []
        for judge, result in report.judges.items():
            spec = EvaluatorSpec(name=judge, arguments=None)
            version = result.criteria_hash[:12]
            if result.status != 'ok':
                failures.append(
                    EvaluatorFailure(
                        name=judge,
                        error_message=f'{result.status}: {result.error or "no reason given"}',
                        error_stacktrace='',
                        source=spec,
                        evaluator_version=version,
                    )
                )
                continue
            reason = result.reasoning
            if result.score is not None:
                scores[judge] = EvaluationResult(
                    name=judge, value=result.score, reason=reason, source=spec, evaluator_version=version
                )
            if result.passed is not None:
                assertions[judge] = EvaluationResult(
                    name=judge, value=result.passed, reason=reason, source=spec, evaluator_version=version
                )
        if report.overall_score is not None:
            overall_spec = EvaluatorSpec(name='overall', arguments=None)
            scores['overall'] = EvaluationResult(name='overall', value=report.overall_score, reason=None, source=overall_spec)
        name_ = report.query_id if report.repeat == 1 else f'{report.query_id}#{report.repeat}'
        cases.append(
            ReportCase(
                name=name_,
                inputs=report.query,
                metadata={'prompt_version': report.prompt_version},
                expected_output=None,
                output=None,
                metrics={'input_tokens': report.input_tokens, 'output_tokens': report.output_tokens},
                attributes={},
                scores=scores,
                labels={},
                assertions=assertions,
                task_duration=0.0,
                total_duration=report.latency_s,
                source_case_name=report.query_id if report.repeat != 1 else None,
                evaluator_failures=failures,
            )
        )
    return PEReport(name=name, cases=cases)


def dump_report(report: RecordReport) -> str:
    return report.model_dump_json(indent=2)


def dump_summary(summary: RunSummary) -> str:
    return json.dumps(summary.model_dump(mode='json'), indent=2)
