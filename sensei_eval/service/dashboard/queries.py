"""The dashboard's reads: the filtered session list, one session's view, and the patterns aggregate.

Read-only queries over the service's tables (`store`), kept here rather than in `repository` so the
dashboard can grow without touching the service's write path. Semantics a reader must know:

* "the score" of a session is its latest *completed* scoring; "the scoring state" its latest scoring
  of any status (so a list can show "Scoring…" while a re-score runs over an older score);
* a session's judgement is its latest *completed* evaluation as the verdict model reads it
  (`service.verdict_cache`, over `core.verdicts`): failure modes, failed judges, the overall score (null: not
  judged, never 1.0) and the coverage beside it. Nothing here decides pass or fail or computes a score;
* the patterns page counts only work done under today's criteria: scores whose `prompt_hash` is the
  configured scorer's current hash, and failure modes whose judges' criteria hashes are current —
  otherwise a rubric change would mix old and new verdicts in one chart;
* scores and evaluations made by the embedded model are `smoke` (a model too small to judge): shown,
  greyed, in the list and the session page, and left out of the patterns unless `include_smoke`;
* a score's four-category breakdown and its missing tools are read from what the worker kept of the
  investigation judge's typed result (a scoring job's `score_detail`), for both variants; no text is
  parsed here. Scorings and evaluations are jobs of one table (`session_evaluations`): a scoring has its
  `scoring` variant set, and each read here names which of the two it reads.

Filters run in SQL (the list pages through thousands of sessions): score range, agent, status, query id,
prompt version, days and sort over the stored columns; the judgement filters (failure mode, failed judge,
failed, overall score) over the stored verdict summary (`session_evaluations.verdict_cache`) when it was made under
today's verdict rules, the other evaluations' verdicts recomputed. Patterns selects its runs (agent, prompt
version, days, smoke) in SQL too, and reads only the selected runs' latest score and evaluation.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator
from sqlalchemy import Select, and_, false, func, select
from sqlalchemy.orm import Session

from sensei_eval.core.explain import ScoreExplanation, explain_score
from sensei_eval.core.modes import MODES
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.transcript import render_transcript
from sensei_eval.core.verdicts import RecordVerdict, judge_status, record_verdict
from sensei_eval.evaluators.investigation import (
    CATEGORIES,
    CATEGORY_POINTS,
    PROMPT_HASH,
    STRUCTURED_PROMPT_HASH,
    is_current_prompt,
)
from sensei_eval.evaluators.registry import JUDGES
from sensei_eval.service import previews, repository
from sensei_eval.service.schemas import MAX_OFFSET, EvaluationOut, ScoreOut
from sensei_eval.service.store import EvaluationRow, JobStatus, SessionRow, SessionStatus, Store
from sensei_eval.service.verdict_cache import (
    Coverage,
    VerdictSummary,
    cached_verdict,
    known_verdicts,
    rules_fingerprint,
    stored_results,
    stored_summary,
    summarise,
)

__all__ = (
    'CategoryOut',
    'DashboardPage',
    'DashboardRow',
    'IssueOut',
    'JudgementView',
    'Patterns',
    'Rate',
    'RatePoint',
    'RateSeries',
    'SessionView',
    'StepOut',
    'VerdictOut',
    'current_hash',
    'list_sessions',
    'patterns',
    'session_view',
)

SortKey = Literal['date', 'score']
Order = Literal['asc', 'desc']

# Histogram buckets of the score distribution: ten points wide, the last one 90-100.
_BUCKET = 10
# The characters of a judge's name (registry names, user modules' too): a name with others ran on no run.
_JUDGE_NAME_CHARS = frozenset('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-')
# Ids per `IN (...)` list: well under SQLite's bound-parameter limit and PostgreSQL's comfort.
_IN_CHUNK = 500


class DashboardRow(BaseModel):
    """One line of the session list."""

    session_id: str
    query_id: str
    query: str
    agent: str | None
    status: str
    created_at_us: int
    rating: float | None = Field(description='Mean of the record rating (1-5), if rated.')
    scoring_status: str = Field(description='Latest scoring of any status, or not_scored.')
    total_score: int | None = Field(description='The latest completed score.')
    smoke: bool = Field(default=False, description='That score was made by the embedded model (smoke test, not a verdict).')
    current_prompt_used: bool | None
    failure_modes: list[str]
    is_alert: bool = Field(default=False, description='The record has alert_data: the investigation scorer applies.')
    prompt_version: str | None = None
    evaluation_status: str | None = Field(default=None, description='Latest failure-mode evaluation of any status.')
    overall_score: float | None = Field(
        default=None, description="The latest completed evaluation's overall score (0-1; the verdict model's); null: not judged."
    )
    coverage: Coverage | None = Field(default=None, description='How much of the run that evaluation judged.')
    evaluation_smoke: bool = False
    failed_judges: list[str] = Field(default_factory=list, description='Judges whose verdict failed in that evaluation.')


class DashboardPage(BaseModel):
    items: list[DashboardRow]
    total: int
    limit: int
    offset: int
    agents: list[str] = Field(description='Every agent seen, for the filter menu.')
    failure_modes: list[str] = Field(description='Every failure mode a judge can report, for the filter menu.')
    judges: list[str] = Field(default_factory=list, description='Every judge the service knows, for the filter menu.')


class StepOut(BaseModel):
    number: int
    kind: str
    text: str
    tool_name: str | None
    speaker: str | None = None  # who spoke at this step (multi-agent runs)


class IssueOut(BaseModel):
    """One finding of a failure-mode judge, flattened for display: the mode, cited steps, other fields."""

    failure_mode: str
    steps: list[int]
    source: str
    fields: dict[str, Any]


class VerdictOut(BaseModel):
    """One judge's verdict on one failure mode (the verdict model's `ModeVerdict`): its status (pass, fail,
    inconclusive, error, smoke), why, what it cited. A judge of several modes has one per mode."""

    judge: str
    failure_mode: str | None
    status: str
    passed: bool | None
    score: float | None
    reasoning: str | None
    error: str | None
    issues: list[IssueOut]


class JudgementView(BaseModel):
    """The run's latest evaluation as the page shows it."""

    evaluation_id: str
    status: str
    judges: list[str] = Field(description='The judges asked for (names and groups).')
    model: str | None
    smoke: bool
    completed_at_us: int | None
    error: str | None
    overall_score: float | None = Field(description="The verdict model's overall score; null: not judged.")
    coverage: Coverage | None = Field(description='How much was judged; its label goes beside the score.')
    judges_run: list[str] = Field(default_factory=list, description='The judges that ran on the run (asked, and applied).')
    category_scores: dict[str, float]
    primary_failure_mode: str | None
    failure_modes: list[str]
    verdicts: list[VerdictOut]
    skipped: dict[str, str]
    judge_statuses: dict[str, str] = Field(
        default_factory=dict, description="Each judge's verdict over all its modes (`core.verdicts.judge_status`): one per judge."
    )
    why: ScoreExplanation | None = Field(
        default=None,
        description='Why the score is what it is (`core.explain`): what cost points, what did not count, what was skipped.',
    )


class CategoryOut(BaseModel):
    """One rubric category as the session page draws it (served, so the page holds no list of its own)."""

    key: str
    label: str
    points: int = CATEGORY_POINTS


# The rubric's categories in the order the page shows a breakdown (`evaluators.investigation.CATEGORIES`).
RUBRIC = [CategoryOut(key=key, label=label) for key, label in CATEGORIES]


class ScoreView(BaseModel):
    score: ScoreOut
    breakdown: dict[str, int] | None
    missing_tools: list[str]


class SessionView(BaseModel):
    session_id: str
    query_id: str
    query: str
    alert_data: dict[str, Any] | str | None
    final_answer: str | None
    agent: str | None
    status: str
    created_at_us: int
    rating: dict[str, Any] | None
    steps: list[StepOut]
    scoring_status: str
    latest_scoring: ScoreOut | None
    score: ScoreView | None
    history: list[ScoreView]
    categories: list[CategoryOut] = Field(default_factory=lambda: list(RUBRIC))
    evaluation_status: str | None
    evaluation_error: str | None
    failure_modes: list[str]
    issues: list[IssueOut]
    is_alert: bool = False
    prompt_version: str | None = None
    expected_outputs: list[str] | None = Field(default=None, description='What the agent had to tell the user (the reference).')
    judgement: JudgementView | None = None
    service_judges: list[str] = Field(
        default_factory=list, description='The judges "Judge run" runs: the service\'s (`serve --judges`), groups expanded.'
    )


class Bar(BaseModel):
    label: str
    count: int


class TrendPoint(BaseModel):
    day: str
    mean_score: float
    count: int


class Rate(BaseModel):
    """A pass or failure rate with its denominator: `count` of `total`."""

    label: str
    count: int
    total: int
    rate: float | None
    errors: int = 0
    inconclusive: int = 0


class RatePoint(BaseModel):
    period: str = Field(description='The day (YYYY-MM-DD) or the Monday of the ISO week.')
    until: str = Field(description='The last day of the period.')
    failed: int
    evaluated: int
    rate: float


class RateSeries(BaseModel):
    group: str = Field(description='The agent or prompt version ("all" when not grouped).')
    points: list[RatePoint]


class Patterns(BaseModel):
    prompt_hash: str
    scored_sessions: int
    evaluated_sessions: int
    include_smoke: bool = False
    smoke_left_out: int = Field(default=0, description='Smoke scores and evaluations (embedded model) not counted.')
    failure_modes: list[Bar]
    missing_tools: list[Bar]
    histogram: list[Bar]
    trend: list[TrendPoint]
    judge_pass_rates: list[Rate] = Field(
        default_factory=list, description="Per judge: passes of its pass/fail verdicts (the verdict model's judge_status)."
    )
    mode_failure_rates: list[Rate] = Field(
        default_factory=list, description='Per failure mode: runs that failed it, of the runs a judge of it judged.'
    )
    failure_trend: list[RateSeries] = Field(default_factory=list, description='Share of judged runs that failed, per period.')
    overall_histogram: list[Bar] = Field(default_factory=list, description='Overall scores (0-1) of the latest evaluations.')
    agents: list[str] = Field(default_factory=list)
    prompt_versions: list[str] = Field(default_factory=list)
    judges: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------------
# Scores as the page shows them


def _score_view(score: ScoreOut) -> ScoreView:
    """A score with its stored breakdown (columns) and missing tool names (rows), as read from the store."""
    tools = list(dict.fromkeys(t.tool_name for t in score.missing_tools or []))
    return ScoreView(score=score, breakdown=score.score_breakdown or None, missing_tools=tools)


# ---------------------------------------------------------------------------------------------------
# Criteria hashes


def current_hash(variant: str) -> str:
    """The criteria hash new scorings of this variant get."""
    return STRUCTURED_PROMPT_HASH if variant == 'structured' else PROMPT_HASH


@functools.cache
def _judge_hashes() -> dict[str, tuple[str, str | None]]:
    """Judge name → (today's criteria hash, the failure mode it reports on)."""
    out: dict[str, tuple[str, str | None]] = {}
    for name, cls in JUDGES.items():
        try:
            out[name] = (cls().criteria_hash(), cls.failure_mode)
        except Exception:  # a judge that cannot build without configuration has no comparable hash
            continue
    return out


# ---------------------------------------------------------------------------------------------------
# Queries


# The jobs asked for as scorings (the investigation judge) and as evaluations: each read names its kind.
_SCORING = EvaluationRow.scoring.is_not(None)
_EVALUATION = EvaluationRow.scoring.is_(None)


def _latest_completed_scores() -> Any:
    """Subquery: per session, its latest completed score (session_id, score_id, total_score, prompt_hash, completed_at_us)."""
    newest = (
        select(EvaluationRow.session_id, func.max(EvaluationRow.started_at_us).label('started'))
        .where(EvaluationRow.status == JobStatus.COMPLETED.value, _SCORING)
        .group_by(EvaluationRow.session_id)
        .subquery()
    )
    return (
        select(
            EvaluationRow.session_id,
            EvaluationRow.evaluation_id.label('score_id'),
            EvaluationRow.total_score,
            EvaluationRow.prompt_hash,
            EvaluationRow.completed_at_us,
            EvaluationRow.scoring.label('variant'),
            EvaluationRow.smoke,
        )
        .join(newest, and_(EvaluationRow.session_id == newest.c.session_id, EvaluationRow.started_at_us == newest.c.started))
        .where(EvaluationRow.status == JobStatus.COMPLETED.value, _SCORING)
        .subquery()
    )


@dataclass(frozen=True)
class _Eval:
    """What the list and the patterns need of a session's latest completed evaluation: the summary of its
    verdict (the verdict model's, `service.verdict_cache.VerdictSummary`) and, where read, its judge results."""

    evaluation_id: str
    hashes: Any
    smoke: bool
    summary: VerdictSummary
    results: list[JudgeResult] | None = None

    @property
    def modes(self) -> list[str]:
        return self.summary.failure_modes

    @property
    def overall(self) -> float | None:
        return self.summary.overall_score

    def failed_judges(self) -> list[str]:
        return self.summary.failed_judges


def _latest_evaluation_query(
    columns: list[Any], session_ids: list[str] | None, sessions: Select[Any] | None, smoke: bool | None, where: Sequence[Any] = ()
) -> Select[Any]:
    """Per session (of `session_ids`, and of the `sessions` query, when given): its latest completed
    evaluation's `columns`, kept when its smoke mark is `smoke` (any, when None)."""
    newest = (
        select(EvaluationRow.session_id, func.max(EvaluationRow.started_at_us).label('started'))
        .where(EvaluationRow.status == JobStatus.COMPLETED.value, _EVALUATION)
        .group_by(EvaluationRow.session_id)
    )
    if session_ids is not None:
        newest = newest.where(EvaluationRow.session_id.in_(session_ids))
    if sessions is not None:
        newest = newest.where(EvaluationRow.session_id.in_(sessions))
    sub = newest.subquery()
    latest = (
        select(*columns)
        .join(sub, and_(EvaluationRow.session_id == sub.c.session_id, EvaluationRow.started_at_us == sub.c.started))
        .where(EvaluationRow.status == JobStatus.COMPLETED.value, _EVALUATION, *where)
    )
    return latest if smoke is None else latest.where(EvaluationRow.smoke == smoke)


def _count_latest_evaluations(db: Session, sessions: Select[Any] | None, *, smoke: bool) -> int:
    """How many of these sessions' latest completed evaluations have this smoke mark."""
    latest = _latest_evaluation_query([EvaluationRow.session_id], None, sessions, smoke).subquery()
    return db.scalar(select(func.count(func.distinct(latest.c.session_id)))) or 0


def _latest_evaluations(
    db: Session,
    session_ids: list[str] | None = None,
    *,
    sessions: Select[Any] | None = None,
    smoke: bool | None = None,
    where: Sequence[Any] = (),
) -> dict[str, _Eval]:
    """Per session (of `session_ids`, and of the `sessions` query, when given): its latest completed
    evaluation (criteria hashes, smoke, the summary of its verdict), when its smoke mark is `smoke` (any, when
    None). The stored summary is read when the verdict rules it was made under are today's; otherwise the
    verdict is recomputed from the report's judge results (`_with_results`)."""
    columns = [
        EvaluationRow.session_id,
        EvaluationRow.evaluation_id,
        EvaluationRow.report['criteria_hashes'],
        EvaluationRow.smoke,
        EvaluationRow.verdict_cache,
    ]
    latest = _latest_evaluation_query(columns, session_ids, sessions, smoke, where)
    out: dict[str, _Eval] = {}
    unsummarised: list[str] = []
    rows = list(db.execute(latest))
    for sid, evaluation_id, hashes, smoke, stored in rows:
        summary = stored_summary(stored)
        if summary is None:
            unsummarised.append(evaluation_id)
            continue
        out[sid] = _Eval(evaluation_id, hashes, bool(smoke), summary)
    full = _with_results(db, unsummarised)
    for sid, evaluation_id, hashes, smoke, _ in rows:
        if evaluation_id in full:
            results, verdict = full[evaluation_id]
            out[sid] = _Eval(evaluation_id, hashes, bool(smoke), summarise(results, verdict), results)
    return out


def _judge_results(db: Session, evaluations: list[_Eval], judge: str) -> dict[str, JudgeResult]:
    """One judge's stored result in each of these completed evaluations that ran it (the report's
    `judges.<judge>` alone: the rest of the report is not read)."""
    out: dict[str, JudgeResult] = {}
    if not judge or not set(judge) <= _JUDGE_NAME_CHARS:
        return out  # no judge is named so (and the name goes into a JSON path)
    ids = [e.evaluation_id for e in evaluations if judge in e.summary.judges]
    for start in range(0, len(ids), _IN_CHUNK):
        chunk = ids[start : start + _IN_CHUNK]
        query = select(EvaluationRow.evaluation_id, EvaluationRow.report['judges'][judge]).where(
            EvaluationRow.evaluation_id.in_(chunk)
        )
        for evaluation_id, raw in db.execute(query):
            if raw is not None:
                out[evaluation_id] = stored_results({judge: raw}, where=f'evaluation {evaluation_id}')[0]
    return out


def _with_results(db: Session, evaluation_ids: list[str]) -> dict[str, tuple[list[JudgeResult], RecordVerdict]]:
    """The judge results and verdict of these completed evaluations: from this process's cache, else read
    (only the report's `judges`) and computed."""
    known = known_verdicts(evaluation_ids)
    missing = [evaluation_id for evaluation_id in evaluation_ids if evaluation_id not in known]
    for start in range(0, len(missing), _IN_CHUNK):
        chunk = missing[start : start + _IN_CHUNK]
        query = select(EvaluationRow.evaluation_id, EvaluationRow.report['judges']).where(EvaluationRow.evaluation_id.in_(chunk))
        for evaluation_id, judges in db.execute(query):
            known[evaluation_id] = cached_verdict(evaluation_id, judges)
    return known


def _evaluation_states(db: Session, session_ids: list[str]) -> dict[str, str]:
    """Per session: the status of its latest evaluation of any status."""
    return _job_states(db, session_ids, _EVALUATION)


def _job_states(db: Session, session_ids: list[str], kind: Any) -> dict[str, str]:
    """Per session: the status of its latest job of `kind` (scorings or evaluations), of any status."""
    if not session_ids:
        return {}
    newest = (
        select(EvaluationRow.session_id, func.max(EvaluationRow.started_at_us).label('started'))
        .where(EvaluationRow.session_id.in_(session_ids), kind)
        .group_by(EvaluationRow.session_id)
        .subquery()
    )
    query = (
        select(EvaluationRow.session_id, EvaluationRow.status)
        .join(newest, and_(EvaluationRow.session_id == newest.c.session_id, EvaluationRow.started_at_us == newest.c.started))
        .where(kind)
    )
    return {sid: status for sid, status in db.execute(query)}


def _day_bounds(since: str | None, until: str | None) -> tuple[int | None, int | None]:
    """`since`/`until` (YYYY-MM-DD, UTC, both days included) as microsecond bounds."""
    low = int(datetime.strptime(since, '%Y-%m-%d').replace(tzinfo=UTC).timestamp() * 1e6) if since else None
    try:
        high = (
            int((datetime.strptime(until, '%Y-%m-%d').replace(tzinfo=UTC) + timedelta(days=1)).timestamp() * 1e6)
            if until
            else None
        )
    except OverflowError:  # until=9999-12-31: the day after is past the calendar, so no upper bound
        high = None
    return low, high


# A day, YYYY-MM-DD (UTC): the date filters of the list and the patterns (an empty value means no filter).
_DAY = r'^(\d{4}-\d{2}-\d{2})?$'


class _Filters(BaseModel):
    """Query parameters where an empty value means no filter (`?agent=` is every agent)."""

    @field_validator('*', mode='after')
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == '' else value

    @field_validator('since', 'until', mode='after', check_fields=False)
    @classmethod
    def _calendar_day(cls, value: Any) -> Any:
        """A day the calendar has (2024-13-01 and 2024-02-30 match the pattern but are not): a 422 naming it."""
        if isinstance(value, str) and value:
            try:
                datetime.strptime(value, '%Y-%m-%d')
            except ValueError:
                raise ValueError(f'{value} is not a day of the calendar (YYYY-MM-DD)') from None
        return value


class SessionFilters(_Filters):
    """The session list's query (`GET /api/v1/dashboard/sessions`): a page (`limit`, `offset`), filters,
    and the sort. The judgement filters read each session's latest completed evaluation: `judge` (that
    judge's verdict failed), `failed` (any failure mode / none), `min_overall`..`max_overall` (overall
    score, 0-1); `since`/`until` are days (YYYY-MM-DD, UTC, both included); `q` a part of the query id."""

    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    agent: str | None = Field(None, max_length=255)
    status: SessionStatus | None = None
    min_score: int | None = Field(None, ge=0, le=100)
    max_score: int | None = Field(None, ge=0, le=100)
    scored: bool | None = None
    failure_mode: str | None = None
    q: str | None = Field(None, max_length=200)
    sort: SortKey = 'date'
    order: Order = 'desc'
    judge: str | None = Field(None, max_length=100)
    failed: bool | None = None
    min_overall: float | None = Field(None, ge=0, le=1)
    max_overall: float | None = Field(None, ge=0, le=1)
    prompt_version: str | None = Field(None, max_length=255)
    since: str | None = Field(None, pattern=_DAY)
    until: str | None = Field(None, pattern=_DAY)


def list_sessions(store: Store, filters: SessionFilters) -> DashboardPage:
    """One page of sessions, filtered and sorted (`SessionFilters`); unscored sessions sort last by score."""
    with store.read() as db:
        latest = _latest_completed_scores()
        conditions = _list_conditions(filters, latest)
        if _judgement_filtered(filters):
            conditions.append(SessionRow.session_id.in_(_judged_matching(db, filters, latest, conditions)))
        base = _list_query(latest).where(and_(*conditions)) if conditions else _list_query(latest)
        total = db.scalar(select(func.count()).select_from(base.subquery())) or 0
        page = base.order_by(*_list_ordering(filters, latest), SessionRow.session_id).limit(filters.limit).offset(filters.offset)
        items = _dashboard_rows(db, list(db.execute(page)))
        agents = sorted(a for a in db.scalars(select(SessionRow.agent).distinct()) if a)
    return DashboardPage(
        items=items,
        total=total,
        limit=filters.limit,
        offset=filters.offset,
        agents=agents,
        failure_modes=list(MODES),
        judges=sorted(JUDGES),
    )


def _list_query(latest: Any) -> Select[Any]:
    """Each session with its latest completed score: only what a line shows (of the stored record, bounded
    previews and the rating's numbers, cut by the database: `previews`)."""
    return select(
        SessionRow.session_id,
        SessionRow.query_id,
        SessionRow.agent,
        SessionRow.status,
        SessionRow.created_at_us,
        previews.query_preview_column().label('query'),
        previews.alert_preview_column().label('alert'),
        previews.rating_preview_column().label('rating'),
        previews.prompt_version_preview_column().label('prompt_version'),
        latest.c.total_score,
        latest.c.prompt_hash,
        latest.c.smoke,
    ).outerjoin(latest, latest.c.session_id == SessionRow.session_id)


def _list_conditions(f: SessionFilters, latest: Any) -> list[Any]:
    """The list's filters that the stored columns answer: agent, status, score range, scored, query id, prompt
    version, days (the judgement filters are `_judged_matching`)."""
    conditions: list[Any] = []
    if f.agent:
        conditions.append(SessionRow.agent == f.agent)
    if f.status:
        conditions.append(SessionRow.status == f.status.value)
    if f.min_score is not None:
        conditions.append(latest.c.total_score >= f.min_score)
    if f.max_score is not None:
        conditions.append(latest.c.total_score <= f.max_score)
    if f.scored is True:
        conditions.append(latest.c.total_score.is_not(None))
    elif f.scored is False:
        conditions.append(latest.c.total_score.is_(None))
    if f.q:  # a part of the query id, taken literally: % and _ are not wildcards here
        literal = f.q.lower().replace('\\', '\\\\').replace('%', '\\%').replace('_', '\\_')
        conditions.append(func.lower(SessionRow.query_id).like(f'%{literal}%', escape='\\'))
    if f.prompt_version:
        conditions.append(_stored_prompt_version() == f.prompt_version)
    low, high = _day_bounds(f.since, f.until)
    if low is not None:
        conditions.append(SessionRow.created_at_us >= low)
    if high is not None:
        conditions.append(SessionRow.created_at_us < high)
    return conditions


def _judgement_filtered(f: SessionFilters) -> bool:
    """Some filter reads the sessions' latest evaluations."""
    return bool(f.failure_mode or f.judge or f.failed is not None or f.min_overall is not None or f.max_overall is not None)


def _judged_matching(db: Session, f: SessionFilters, latest: Any, conditions: list[Any]) -> list[str]:
    """The sessions the other filters select whose latest completed evaluation's verdict matches the
    judgement filters (failure mode, failed judge, failed or not, overall score range).

    A verdict summary stored under today's verdict rules is filtered in SQL; the other evaluations (no summary,
    or one made under other rules) are read and their verdict recomputed (`_latest_evaluations`)."""
    runs = select(SessionRow.session_id).outerjoin(latest, latest.c.session_id == SessionRow.session_id).where(*conditions)
    rules = func.coalesce(EvaluationRow.verdict_cache['rules'].as_string(), '')
    current = _latest_evaluation_query([EvaluationRow.session_id], None, runs, None).where(rules == rules_fingerprint())
    matching = list(db.scalars(current.where(*_verdict_conditions(f))))
    others = _latest_evaluations(db, sessions=runs, where=[rules != rules_fingerprint()])
    return matching + [
        sid for sid, e in others.items() if _matches(e, f.failure_mode, f.judge, f.failed, f.min_overall, f.max_overall)
    ]


def _verdict_conditions(f: SessionFilters) -> list[Any]:
    """The judgement filters as conditions on a stored verdict summary (`VerdictSummary`, `verdict` column)."""
    verdict = EvaluationRow.verdict_cache
    conditions: list[Any] = []
    if f.failure_mode:  # the summary's failure modes are the table's names (no quote, escaped or not)
        if f.failure_mode not in MODES:
            return [false()]
        name = f.failure_mode.replace('_', '\\_')
        conditions.append(verdict['failure_modes'].as_string().like(f'%"{name}"%', escape='\\'))
    if f.judge:  # the name goes into a JSON path: a name with other characters ran on no run
        if not set(f.judge) <= _JUDGE_NAME_CHARS:
            return [false()]
        conditions.append(verdict['judges'][f.judge].as_string() == 'fail')
    if f.failed is not None:
        conditions.append(verdict['failed'].as_boolean() == f.failed)
    if f.min_overall is not None:
        conditions.append(verdict['overall_score'].as_float() >= f.min_overall)
    if f.max_overall is not None:
        conditions.append(verdict['overall_score'].as_float() <= f.max_overall)
    return conditions


def _list_ordering(f: SessionFilters, latest: Any) -> list[Any]:
    """By date, or by score with unscored sessions last (newest first among equals)."""
    if f.sort == 'score':
        key = latest.c.total_score.asc() if f.order == 'asc' else latest.c.total_score.desc()
        return [latest.c.total_score.is_(None), key, SessionRow.created_at_us.desc()]
    return [SessionRow.created_at_us.asc() if f.order == 'asc' else SessionRow.created_at_us.desc()]


def _dashboard_rows(db: Session, rows: list[Any]) -> list[DashboardRow]:
    """The page's lines: each session with its scoring state, its latest evaluation and that one's state."""
    ids = [r.session_id for r in rows]
    states = _scoring_states(db, ids)
    evaluations = _latest_evaluations(db, ids)
    evaluation_states = _evaluation_states(db, ids)
    items = []
    for s in rows:
        e = evaluations.get(s.session_id)
        item = DashboardRow(
            session_id=s.session_id,
            query_id=s.query_id,
            query=previews.cut(s.query)[0] if s.query else previews.alert_line(s.alert),
            agent=s.agent,
            status=s.status,
            created_at_us=s.created_at_us,
            rating=previews.rating_mean(s.rating),
            scoring_status=states.get(s.session_id, 'not_scored'),
            total_score=s.total_score,
            smoke=bool(s.smoke),
            current_prompt_used=is_current_prompt(s.prompt_hash) if s.prompt_hash else None,
            failure_modes=list(e.modes) if e else [],
            is_alert=s.alert not in (None, 'null'),
            prompt_version=previews.cut(s.prompt_version)[0] or None,
            evaluation_status=evaluation_states.get(s.session_id),
            overall_score=e.overall if e else None,
            coverage=e.summary.coverage if e else None,
            evaluation_smoke=e.smoke if e else False,
            failed_judges=e.failed_judges() if e else [],
        )
        items.append(item)
    return items


def _matches(
    e: _Eval,
    failure_mode: str | None,
    judge: str | None,
    failed: bool | None,
    min_overall: float | None,
    max_overall: float | None,
) -> bool:
    if failure_mode and failure_mode not in e.modes:
        return False
    if judge and judge not in e.failed_judges():
        return False
    if failed is not None and e.summary.failed != failed:
        return False
    if min_overall is not None and (e.overall is None or e.overall < min_overall):
        return False
    return not (max_overall is not None and (e.overall is None or e.overall > max_overall))


def session_view(store: Store, session_id: str) -> SessionView:
    """Everything the session page shows: record, numbered transcript, scores with history, issues."""
    detail = repository.get_session(store, session_id)  # raises SessionNotFoundError (404)
    history = repository.list_scores(store, session_id)
    record = QueryRecord.model_validate(detail.record)
    transcript = render_transcript(record, include_system=False)
    steps = [
        StepOut(number=s.number, kind=s.kind, text=s.text, tool_name=s.tool_name, speaker=s.speaker) for s in transcript.steps
    ]
    evaluation = detail.latest_evaluation
    where = f'evaluation {evaluation.evaluation_id}' if evaluation else ''
    results = stored_results((evaluation.report or {}).get('judges'), where=where) if evaluation else []
    verdict = record_verdict(results) if evaluation is not None and evaluation.report else None
    # the findings of every judged mode (a pass's minor findings too), in the failure-mode table's order
    order = {m: n for n, m in enumerate(MODES)}
    judged = [v for v in (verdict.verdicts if verdict else []) if v.judged and v.failure_mode in MODES]
    issues = [
        _issue_out(v.failure_mode, i)
        for v in sorted(judged, key=lambda v: order[str(v.failure_mode)])
        for i in v.issues
        if isinstance(i, dict)
    ]
    return SessionView(
        session_id=detail.session_id,
        query_id=detail.query_id,
        query=record.query,
        alert_data=record.alert_data,
        final_answer=record.final_answer(),
        agent=detail.agent,
        status=detail.status.value,
        created_at_us=detail.created_at_us,
        rating=record.rating.model_dump() | {'mean': round(record.rating.mean, 2)} if record.rating else None,
        steps=steps,
        scoring_status=detail.scoring_status,
        latest_scoring=detail.latest_scoring,
        score=_score_view(detail.score) if detail.score is not None else None,
        history=[_score_view(s) for s in history],
        evaluation_status=evaluation.status.value if evaluation is not None else None,
        evaluation_error=evaluation.error_message if evaluation is not None else None,
        failure_modes=verdict.failure_modes if verdict else [],
        issues=issues,
        is_alert=record.alert_data is not None,
        prompt_version=record.prompt_version,
        expected_outputs=record.expected_outputs,
        judgement=_judgement(evaluation, results, verdict) if evaluation is not None else None,
    )


def _issue_out(mode: str | None, issue: dict[str, Any]) -> IssueOut:
    fields = {k: v for k, v in issue.items() if k not in ('steps', 'source')}
    steps_cited = [int(n) for n in issue.get('steps') or [] if isinstance(n, int)]
    return IssueOut(failure_mode=mode or '', steps=steps_cited, source=str(issue.get('source', 'judge')), fields=fields)


def _judgement(evaluation: EvaluationOut, results: list[JudgeResult], verdict: RecordVerdict | None) -> JudgementView:
    """An evaluation with its verdicts (one per judge and failure mode, from the verdict model), each with the
    judge's reasoning and the issues it cited; the overall score and the coverage are the verdict model's."""
    report = evaluation.report or {}
    by_judge = {r.judge: r for r in results}
    verdicts = [
        VerdictOut(
            judge=v.judge,
            failure_mode=v.failure_mode,
            status=v.status,
            passed=v.passed,
            score=v.score,
            reasoning=by_judge[v.judge].reasoning if v.judge in by_judge else None,
            error=v.error,
            issues=[_issue_out(v.failure_mode, i) for i in v.issues if isinstance(i, dict)],
        )
        for v in (verdict.verdicts if verdict else [])
    ]
    # failed verdicts first, then errors, inconclusive and smoke answers, then passes
    rank = {'fail': 0, 'error': 1, 'inconclusive': 2, 'smoke': 3, 'not_applicable': 3, 'pass': 4}
    verdicts.sort(key=lambda v: (rank.get(v.status, 1), v.judge, v.failure_mode or ''))
    skipped = report.get('skipped')
    skipped_judges = {str(k): str(v) for k, v in skipped.items()} if isinstance(skipped, dict) else {}
    return JudgementView(
        evaluation_id=evaluation.evaluation_id,
        status=evaluation.status.value,
        judges=list(evaluation.judges),
        model=evaluation.model,
        smoke=evaluation.smoke,
        completed_at_us=evaluation.completed_at_us,
        error=evaluation.error_message,
        overall_score=verdict.overall_score if verdict else None,
        coverage=verdict.coverage if verdict else None,
        judges_run=[r.judge for r in results],
        category_scores=dict(verdict.category_scores) if verdict else {},
        primary_failure_mode=verdict.primary_failure_mode if verdict else None,
        failure_modes=list(verdict.failure_modes) if verdict else [],
        verdicts=verdicts,
        skipped=skipped_judges,
        judge_statuses={r.judge: judge_status(r) for r in results},
        why=explain_score(results, skipped_judges) if results else None,
    )


Bucket = Literal['day', 'week']
Group = Literal['all', 'agent', 'prompt_version']


class PatternFilters(_Filters):
    """The patterns' query (`GET /api/v1/dashboard/patterns`): which runs (`agent`, `prompt_version`,
    `since`/`until` days, smoke results or not), which judge, and the failure-rate buckets and groups."""

    include_smoke: bool = False
    agent: str | None = Field(None, max_length=255)
    prompt_version: str | None = Field(None, max_length=255)
    since: str | None = Field(None, pattern=_DAY)
    until: str | None = Field(None, pattern=_DAY)
    judge: str | None = Field(None, max_length=100)
    bucket: Bucket = 'day'
    group: Group = 'all'


def patterns(store: Store, variant: str, filters: PatternFilters, *, top: int = 15) -> Patterns:
    """What the judges found, under today's criteria, over the runs the filters select.

    Every figure reads the verdict model (`core.verdicts`) over the judges under today's criteria. Pass rate
    per judge (passes of its pass/fail verdicts; errors, and inconclusive or smoke answers, counted beside it),
    failure rate per failure mode (runs that failed it, of the runs a judge of it judged), the share of
    judged runs that failed per day or ISO week (grouped by agent or prompt version), the overall-score
    distribution; and, for alert runs, the investigation scores (histogram, daily mean, missing tools).
    A run's date is when it was ingested. `judge` narrows every judgement figure to that judge.
    Smoke scores and evaluations (the embedded model's) are left out unless `include_smoke`.

    The runs are selected in SQL (agent, prompt version, days, smoke); only the selected runs' latest
    score and evaluation are read."""
    prompt_hash = current_hash(variant)
    runs = _selected_runs(filters)
    with store.read() as db:
        scores, smoke_scores = _pattern_scores(db, prompt_hash, runs, filters.include_smoke)
        stored_tools = _missing_tool_names(db, [r.score_id for r in scores])
        judged, smoke_evaluations = _pattern_judgements(db, runs, filters)
        agents = sorted(a for a in db.scalars(select(SessionRow.agent).distinct()) if a)
        versions = sorted({str(v) for v in db.scalars(select(_stored_prompt_version()).distinct()) if v})
    tally = _JudgementTally()
    for summary, key, created in judged:
        tally.add(summary, key, _period(created, filters.bucket), whole_run=not filters.judge)
    histogram, trend, tools = _score_figures(scores, stored_tools)
    return Patterns(
        prompt_hash=prompt_hash,
        scored_sessions=len(scores),
        evaluated_sessions=tally.evaluated,
        include_smoke=filters.include_smoke,
        smoke_left_out=smoke_scores + smoke_evaluations,
        failure_modes=[Bar(label=m, count=n) for m, n in tally.modes.most_common()],
        missing_tools=[Bar(label=t, count=n) for t, n in tools.most_common(top)],
        histogram=histogram,
        trend=trend,
        judge_pass_rates=tally.judge_rates(),
        mode_failure_rates=tally.mode_rates(),
        failure_trend=tally.failure_trend(filters.bucket),
        overall_histogram=[Bar(label=f'{i / 10:.1f}-{(i + 1) / 10:.1f}', count=n) for i, n in enumerate(tally.overall)],
        agents=agents,
        prompt_versions=versions,
        judges=sorted(JUDGES),
    )


def _stored_prompt_version() -> Any:
    """A run's prompt version, as the database reads it from the stored record."""
    return SessionRow.record['prompt_version'].as_string()


def _selected_runs(filters: PatternFilters) -> Select[Any] | None:
    """The ids of the runs the patterns' filters select (agent, prompt version, ingest days), as a query; None
    when they select every run."""
    low, high = _day_bounds(filters.since, filters.until)
    conditions = []
    if filters.agent:
        conditions.append(SessionRow.agent == filters.agent)
    if filters.prompt_version:
        conditions.append(_stored_prompt_version() == filters.prompt_version)
    if low is not None:
        conditions.append(SessionRow.created_at_us >= low)
    if high is not None:
        conditions.append(SessionRow.created_at_us < high)
    return select(SessionRow.session_id).where(*conditions) if conditions else None


def _pattern_scores(db: Session, prompt_hash: str, runs: Select[Any] | None, include_smoke: bool) -> tuple[list[Any], int]:
    """The selected runs' latest completed scores under today's criteria (`prompt_hash`), and how many smoke
    scores were left out (none when `include_smoke`)."""
    latest = _latest_completed_scores()
    query = select(latest.c.score_id, latest.c.total_score, latest.c.completed_at_us).where(latest.c.prompt_hash == prompt_hash)
    if runs is not None:
        query = query.where(latest.c.session_id.in_(runs))
    if include_smoke:
        return list(db.execute(query)), 0
    smoke = db.scalar(select(func.count()).select_from(query.where(latest.c.smoke.is_(True)).subquery()))
    return list(db.execute(query.where(latest.c.smoke.is_(False)))), smoke or 0


def _score_figures(scores: list[Any], stored_tools: dict[str, list[str]]) -> tuple[list[Bar], list[TrendPoint], Counter[str]]:
    """The investigation scores' histogram, daily mean, and missing tools (one count per run per tool)."""
    tools: Counter[str] = Counter()
    buckets = [0] * (100 // _BUCKET)
    by_day: dict[str, list[int]] = defaultdict(list)
    for r in scores:
        names = stored_tools.get(r.score_id, [])
        tools.update({n.strip().lower() for n in names if n.strip()})
        if r.total_score is not None:
            score = max(0, min(100, int(r.total_score)))
            buckets[min(score // _BUCKET, len(buckets) - 1)] += 1
            if r.completed_at_us:
                day = datetime.fromtimestamp(r.completed_at_us / 1e6, UTC).strftime('%Y-%m-%d')
                by_day[day].append(score)
    histogram = [
        Bar(label=f'{i * _BUCKET}-{i * _BUCKET + _BUCKET - 1 if i < len(buckets) - 1 else 100}', count=n)
        for i, n in enumerate(buckets)
    ]
    trend = [TrendPoint(day=d, mean_score=round(sum(v) / len(v), 1), count=len(v)) for d, v in sorted(by_day.items())]
    return histogram, trend, tools


def _pattern_judgements(
    db: Session, runs: Select[Any] | None, filters: PatternFilters
) -> tuple[list[tuple[VerdictSummary, str, int]], int]:
    """Per selected run with a latest completed evaluation that counts: the summary of its verdict over the
    judges that count here, its group (`filters.group`) and its ingest time; and how many smoke evaluations
    were left out.

    A run whose judges all judged under today's criteria reads its stored summary; narrowed to one judge, or
    with a judge under older criteria, its verdict is recomputed over the judges that count."""
    smoke = None if filters.include_smoke else False
    evaluations = _latest_evaluations(db, sessions=runs, smoke=smoke)
    smoke_left_out = 0 if smoke is None else _count_latest_evaluations(db, runs, smoke=True)
    known = _judge_hashes()
    judge = filters.judge
    if judge:  # only that judge's result of each run is read
        full = {eid: [result] for eid, result in _judge_results(db, list(evaluations.values()), judge).items()}
    else:
        outdated = [e.evaluation_id for e in evaluations.values() if _outdated(e, known)]
        full = {eid: results for eid, (results, _) in _with_results(db, outdated).items()}
    groups = _run_groups(db, list(evaluations), filters.group)
    out: list[tuple[VerdictSummary, str, int]] = []
    for sid, e in evaluations.items():
        summary = _counted_summary(e, full, judge, known)
        if summary is not None and sid in groups:
            out.append((summary, *groups[sid]))
    return out, smoke_left_out


def _run_groups(db: Session, session_ids: list[str], group: Group) -> dict[str, tuple[str, int]]:
    """Per run: its group in the failure trend (its agent or prompt version, `(none)` without one; `all`
    when not grouped) and its ingest time."""
    column = SessionRow.agent if group == 'agent' else _stored_prompt_version()
    out: dict[str, tuple[str, int]] = {}
    for start in range(0, len(session_ids), _IN_CHUNK):
        chunk = session_ids[start : start + _IN_CHUNK]
        query = select(SessionRow.session_id, column, SessionRow.created_at_us).where(SessionRow.session_id.in_(chunk))
        for sid, value, created in db.execute(query):
            out[sid] = ('all' if group == 'all' else str(value) if value else '(none)', created)
    return out


def _outdated(e: _Eval, known: dict[str, tuple[str, str | None]]) -> bool:
    """Some judge of this evaluation judged under criteria other than today's."""
    hashes = e.hashes if isinstance(e.hashes, dict) else {}
    return any(name in known and hashes.get(name) != known[name][0] for name in e.summary.judges)


def _counted_summary(
    e: _Eval, full: dict[str, list[JudgeResult]], judge: str | None, known: dict[str, tuple[str, str | None]]
) -> VerdictSummary | None:
    """The summary of an evaluation's verdict over the judges that count (today's criteria; `judge` alone when
    named), or None when that judge did not run on the run under today's criteria."""
    if e.evaluation_id not in full:
        return None if judge else e.summary
    hashes = e.hashes if isinstance(e.hashes, dict) else {}
    current = [
        r
        for r in full[e.evaluation_id]
        if (not judge or r.judge == judge) and (r.judge not in known or hashes.get(r.judge) == known[r.judge][0])
    ]
    if judge and not current:
        return None
    return summarise(current)


class _JudgementTally:
    """The judgement figures of Patterns, counted one judged run at a time (`add`)."""

    def __init__(self) -> None:
        self.evaluated = 0
        self.modes: Counter[str] = Counter()
        self.mode_failed: Counter[str] = Counter()
        self.mode_judged: Counter[str] = Counter()
        self.judges: dict[str, Counter[str]] = defaultdict(Counter)
        self.overall = [0] * 10
        self.periods: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])  # (group, period) -> [failed, judged]

    def add(self, summary: VerdictSummary, group: str, period: str, *, whole_run: bool) -> None:
        """Count one run's verdict; its overall score only when `whole_run` (not narrowed to one judge)."""
        self.evaluated += 1
        self.modes.update(summary.failure_modes)
        for name, status in summary.judges.items():
            tally = self.judges[name]
            if status in ('pass', 'fail'):
                tally['ok'] += 1
                tally['passed'] += status == 'pass'
            elif status in ('inconclusive', 'smoke'):  # an answer that is no verdict
                tally['inconclusive'] += 1
            elif status == 'not_applicable':  # nothing to inspect in the run: neither a verdict nor an error
                continue
            else:
                tally['errors'] += 1
        for m in summary.judged_modes:
            if m in MODES:
                self.mode_judged[m] += 1
                self.mode_failed[m] += m in summary.failure_modes
        if summary.overall_score is not None and whole_run:
            self.overall[min(int(max(0.0, min(1.0, summary.overall_score)) * 10), 9)] += 1
        if summary.coverage.judged:  # a run nothing judged is in no failure rate
            counts = self.periods[(group, period)]
            counts[0] += summary.failed
            counts[1] += 1

    def judge_rates(self) -> list[Rate]:
        return [
            Rate(
                label=name,
                count=t['passed'],
                total=t['ok'],
                rate=round(t['passed'] / t['ok'], 4) if t['ok'] else None,
                errors=t['errors'],
                inconclusive=t['inconclusive'],
            )
            for name, t in sorted(self.judges.items())
        ]

    def mode_rates(self) -> list[Rate]:
        rates = (
            Rate(label=m, count=self.mode_failed[m], total=n, rate=round(self.mode_failed[m] / n, 4))
            for m, n in self.mode_judged.items()
        )
        return sorted(rates, key=lambda r: (-(r.rate or 0), r.label))

    def failure_trend(self, bucket: Bucket) -> list[RateSeries]:
        series: dict[str, list[RatePoint]] = defaultdict(list)
        for (name, period), (n_failed, n_judged) in sorted(self.periods.items()):
            end = datetime.strptime(period, '%Y-%m-%d') + timedelta(days=6 if bucket == 'week' else 0)
            point = RatePoint(
                period=period,
                until=end.strftime('%Y-%m-%d'),
                failed=n_failed,
                evaluated=n_judged,
                rate=round(n_failed / n_judged, 4),
            )
            series[name].append(point)
        return [RateSeries(group=g, points=p) for g, p in sorted(series.items())]


def _period(created_us: int, bucket: Bucket) -> str:
    """The day of a run (UTC), or the Monday of its ISO week."""
    day = datetime.fromtimestamp(created_us / 1e6, UTC)
    if bucket == 'week':
        day -= timedelta(days=day.weekday())
    return day.strftime('%Y-%m-%d')


# ---------------------------------------------------------------------------------------------------
# Helpers


def _missing_tool_names(db: Session, score_ids: list[str]) -> dict[str, list[str]]:
    """Per score: the names of its missing tools as the worker kept them (`score_detail`), in order."""
    names: dict[str, list[str]] = defaultdict(list)
    for start in range(0, len(score_ids), _IN_CHUNK):  # bounded IN lists
        chunk = score_ids[start : start + _IN_CHUNK]
        query = select(EvaluationRow.evaluation_id, EvaluationRow.score_detail['missing_tools']).where(
            EvaluationRow.evaluation_id.in_(chunk)
        )
        for score_id, tools in db.execute(query):
            for tool in tools if isinstance(tools, list) else []:
                if isinstance(tool, dict) and isinstance(tool.get('tool_name'), str):
                    names[score_id].append(tool['tool_name'])
    return names


def _scoring_states(db: Session, session_ids: list[str]) -> dict[str, str]:
    """Per session: the status of its latest scoring of any status."""
    return _job_states(db, session_ids, _SCORING)


def _is_alert(record: Any) -> bool:
    return isinstance(record, dict) and record.get('alert_data') is not None
