"""Issue reports: what a run of the judges wrote, per record and per run.

One `RecordReport` per record (the issues found, by failure mode, plus per judge: criteria hash, model, status,
error, tokens, latency, truncation) and one `RunSummary` per run: what they hold and how they are scored.
Where they are written (the run folder's layout, file names of record ids) is `judging.run_folder`'s;
how they read as pydantic-evals outputs and reports is `core.evaluator_outputs`'.

Scoring is the verdict model's (`core.verdicts`, the one place that turns judge results into pass /
fail / inconclusive / error / smoke, an overall score and a coverage): `build_report` and `rebuild_report`
store its overall score (None when nothing was judged), its coverage, category scores and failure modes
on the `RecordReport`. A report written before coverage existed gets it computed when loaded (and no
overall score if nothing in it was judged).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, SerializeAsAny, ValidationError, field_validator, model_validator

from sensei_eval.core import modes
from sensei_eval.core.issues import Issue
from sensei_eval.core.records import QueryRecord, Rating
from sensei_eval.core.transcript import Transcript, Truncation
from sensei_eval.core.verdicts import (
    MODEL_CONFIDENCE,
    Coverage,
    ModeVerdict,
    coverage_of,
    judge_status,
    mode_verdicts,
    record_verdict,
    smoke_answer_fields,
)

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
    'mode_verdicts',
    'rebuild_report',
)
# `MODEL_CONFIDENCE`, `ModeVerdict` and `mode_verdicts` live in `core.verdicts` (the verdict model) and
# are re-exported here for the code that imported them from reports.

# `inconclusive`: the judge answered, but its answer shows it did not judge (reasoning copied from the
# prompt, citations of steps that do not exist, ...). Kept with its raw output, never scored.
# `not_applicable`: the judge ran and had nothing to inspect (`error` says why: "no tool calls in this
# run"); never a pass, never scored (`core.verdicts`).
JudgeStatus = Literal['ok', 'error', 'inconclusive', 'not_applicable']


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
    error: str | None = Field(
        default=None,
        description='Why the judge errored, why its answer is inconclusive, or why it was not applicable (nothing to inspect).',
    )
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

    @model_validator(mode='after')
    def _smoke_is_no_pass(self) -> JudgeResult:
        """An embedded model's answer is stored with `passed` and `score` null (`core.verdicts.smoke_answer_fields`)."""
        if (fields := smoke_answer_fields(self, self.details)) is not None:
            for name, value in fields.items():
                setattr(self, name, value)
        return self


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
    expected_outputs: list[str] | None = Field(
        default=None,
        description="The record's required outputs (what the agent had to tell the user); None: no reference for outputs.",
    )

    issues: dict[str, list[SerializeAsAny[Issue]]] = Field(
        default_factory=dict,
        description="The issues found, by failure mode (a name in `modes.MODES`), each as its mode's issue model; "
        'modes with none are left out.',
    )

    overall_score: float | None = Field(
        default=None, description='The verdict model\'s overall score (`core.verdicts`); None: "not judged".'
    )
    coverage: Coverage | None = Field(
        default=None, description='How much was judged (`core.verdicts.Coverage`); computed on load for older reports.'
    )
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

    @model_validator(mode='after')
    def _coverage_of_older_reports(self) -> RecordReport:
        """A report written before the verdict model stored coverage: compute it, and take the overall
        score back from the verdict model when nothing was judged or the embedded model (smoke) was counted."""
        if self.coverage is None and self.judges:
            self.coverage = coverage_of(self.judges.values())
            if self.coverage.judged == 0 or self.coverage.smoke:
                self.overall_score = record_verdict(self).overall_score
        return self

    def issues_of(self, mode: str) -> list[Issue]:
        """The issues found for a failure mode (none when the report holds none of it)."""
        if mode not in modes.MODES:
            raise KeyError(f'{mode!r} is not a failure mode')
        return self.issues.get(mode, [])


class JudgeSummary(BaseModel):
    """One judge over a run: how many verdicts, errors and set-aside answers, how it scored, what it cost."""

    criteria_hash: str
    ok: int = Field(default=0, description='Pass/fail verdicts (`core.verdicts`; smoke answers are not verdicts).')
    errors: int = 0
    inconclusive: int = 0
    smoke: int = Field(default=0, description='Answers of the embedded model: smoke, never a verdict.')
    not_applicable: int = Field(default=0, description='Records on which the judge had nothing to inspect: no verdict, no error.')
    pass_rate: float | None = Field(default=None, description='Share of verdicts that passed; None without one.')
    mean_score: float | None = Field(default=None, description='Mean score over verdicts; None without one.')
    input_tokens: int = 0
    output_tokens: int = 0

    @classmethod
    def of(cls, criteria_hash: str, results: Sequence[JudgeResult]) -> JudgeSummary:
        tally = _JudgeTally()
        for result in results:
            tally.add(result, +1)
        return tally.summary(criteria_hash)


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
    mean_overall_score: float | None = Field(description='Mean over the records with an overall score; None: not judged.')
    records_scored: int = Field(default=0, description='Records with an overall score (`mean_overall_score` is over them).')
    records_partly_judged: int = Field(default=0, description='Records with a score that some applicable judges did not judge.')
    coverage: Coverage | None = Field(
        default=None,
        description="The run's coverage by judge: a judge counts as judged when it gave at least one verdict.",
    )
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

    __slots__ = (
        'errors',
        'inconclusive',
        'input_tokens',
        'model',
        'not_applicable',
        'ok',
        'output_tokens',
        'passed',
        'scores',
        'smoke',
    )

    def __init__(self) -> None:
        self.ok = self.errors = self.inconclusive = self.passed = self.smoke = self.not_applicable = 0
        self.input_tokens = self.output_tokens = 0
        self.model = False  # the judge asks a model (an LLM judge)
        self.scores = _ExactSum()

    def add(self, result: JudgeResult, sign: int) -> None:
        status = judge_status(result)  # the verdict model's, so smoke and minor findings count as everywhere
        self.model = self.model or result.model is not None
        if status in ('pass', 'fail'):
            self.ok += sign
            self.passed += sign * (status == 'pass')
            if result.score is not None:
                self.scores.add(sign * result.score)
        elif status == 'error':
            self.errors += sign
        elif status == 'smoke':
            self.smoke += sign
        elif status == 'not_applicable':
            self.not_applicable += sign
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
            smoke=self.smoke,
            not_applicable=self.not_applicable,
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
        self._partly = 0
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
            if report.coverage is not None and not report.coverage.complete:
                self._partly += sign
        for result in report.judges.values():
            if not result.cached:
                self.input_tokens += sign * result.input_tokens
                self.output_tokens += sign * result.output_tokens
                self.model_requests += sign * result.requests
            if (tally := self._per_judge.get(result.judge)) is not None:
                tally.add(result, sign)
        errors = [f'{report.query_id}: {e}' for e in report.errors]
        inconclusive = [  # an embedded model's answer is smoke (counted per judge), not an inconclusive verdict
            f'{report.query_id}: {name}: {report.judges[name].error}'
            for name in report.inconclusive
            if name in report.judges and judge_status(report.judges[name]) == 'inconclusive'
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

    def coverage(self) -> Coverage:
        """The run's coverage by judge: applied when it ran on a record with something to inspect, judged when
        it gave a verdict; `not_applicable` counts the judges that had nothing to inspect on any record."""
        tallies = list(self._per_judge.values())
        ran = [t for t in tallies if t.ok or t.errors or t.inconclusive or t.smoke]
        unjudged = [t for t in ran if not t.ok]
        return Coverage(
            applied=len(ran),
            judged=sum(1 for t in ran if t.ok),
            inconclusive=sum(1 for t in unjudged if t.inconclusive),
            errors=sum(1 for t in unjudged if t.errors and not t.inconclusive),
            smoke=sum(1 for t in unjudged if t.smoke and not t.inconclusive and not t.errors),
            model_judges=sum(1 for t in ran if t.model),
            model_judged=sum(1 for t in ran if t.model and t.ok),
            not_applicable=sum(1 for t in tallies if t.not_applicable and t not in ran),
        )

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
            records_scored=self._overall_n,
            records_partly_judged=self._partly,
            coverage=self.coverage(),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            model_requests=self.model_requests,
            cache_hits=f.cache_hits,
            truncated_records=sorted(self._truncated),
            exit_code=(1 if (load_errors or judge_errors) else 0) if exit_code is None else exit_code,
        )


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
        expected_outputs=list(record.expected_outputs) if record.expected_outputs is not None else None,
        model=model,
        truncation=truncation,
        transcript_sha256=transcript_sha256,
        skipped=skipped or {},
        profile=profile,
        input_warnings=list(record.input_warnings),
    )
    _score(report, results, speakers)
    return report


def rebuild_report(report: RecordReport, results: Sequence[JudgeResult], speakers: dict[int, str] | None = None) -> RecordReport:
    """The report with its judges' results replaced and every score, issue list and verdict recomputed;
    the record's fields, and errors that are not a judge's (an unknown profile), are kept. How the
    run-wide rules rewrite a written report without the record it came from."""
    judge_errors = {f'{r.judge}: {r.error}' for r in report.judges.values() if r.status == 'error'}
    fresh = report.model_copy(
        update={
            'issues': {},
            'overall_score': None,
            'coverage': None,
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
    """Fill a report from its judges' results through the verdict model (`core.verdicts.record_verdict`):
    issue lists, scores, coverage, errors, the primary failure mode."""
    for result in results:
        report.judges[result.judge] = result
        report.criteria_hashes[result.judge] = result.criteria_hash
        report.input_tokens += result.input_tokens
        report.output_tokens += result.output_tokens
        report.latency_s += result.latency_s
        if result.status == 'error':
            report.errors.append(f'{result.judge}: {result.error}')
        elif result.status == 'inconclusive':
            report.inconclusive.append(result.judge)
    verdict = record_verdict(results)
    for v in verdict.verdicts:  # the findings of judged verdicts (smoke answers stay with their judge)
        if v.judged and v.failure_mode in modes.MODES and v.issues:
            issue_model = modes.MODES[v.failure_mode].issue_model
            report.issues.setdefault(v.failure_mode, []).extend(issue_model.model_validate(i) for i in v.issues)
    report.issues = {m: report.issues[m] for m in modes.MODES if m in report.issues}  # in the table's order
    report.overall_score = verdict.overall_score
    report.coverage = verdict.coverage
    report.category_scores = verdict.category_scores
    report.failure_modes = verdict.failure_modes
    report.primary_failure_mode = verdict.primary_failure_mode
    if report.primary_failure_mode is not None:
        cited = [s for i in report.issues_of(report.primary_failure_mode) for s in i.steps]
        report.decisive_step = min(cited) if cited else None
        if report.decisive_step is not None and speakers:
            report.decisive_agent = speakers.get(report.decisive_step)


def dump_report(report: RecordReport) -> str:
    return report.model_dump_json(indent=2)


def dump_summary(summary: RunSummary) -> str:
    return json.dumps(summary.model_dump(mode='json'), indent=2)
