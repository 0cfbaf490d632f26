"""The dashboard's reads: the filtered session list, one session's view, and the patterns aggregate.

Read-only queries over the service's tables (`store`), kept here rather than in `repository` so the
dashboard can grow without touching the service's write path. Semantics a reader must know:

* "the score" of a session is its latest *completed* scoring; "the scoring state" its latest scoring
  of any status (so a list can show "Scoring…" while a re-score runs over an older score);
* a session's failure modes are those of its latest *completed* evaluation (`EvaluationReport.failure_modes`);
* the patterns page counts only work done under today's criteria: scores whose `prompt_hash` is the
  configured scorer's current hash, and failure modes whose judges' criteria hashes are current —
  otherwise a rubric change would mix old and new verdicts in one chart;
* scores and evaluations made by the embedded model are `smoke` (a model too small to judge): shown,
  greyed, in the list and the session page, and left out of the patterns unless `include_smoke`;
* a score's four-category breakdown and its missing tools are read from what the worker stored from
  the scorer's typed result — the `breakdown_*` columns and the `score_missing_tools` rows, for both
  scorer variants; no text is parsed here.

Score range, agent, status and sort run in SQL (the list pages through thousands of sessions); the
failure-mode filter reads one small JSON field per evaluated session and filters by id.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import Select, and_, func, select
from sqlalchemy.orm import Session

from ...evaluators.investigation import PROMPT_HASH, STRUCTURED_PROMPT_HASH, is_current_prompt
from ...evaluators.registry import JUDGES
from ...records import QueryRecord
from ...reports import FAILURE_MODES
from ...transcript import render_transcript
from .. import repository
from ..schemas import ScoreOut
from ..store import EvaluationRow, JobStatus, MissingToolRow, ScoreRow, SessionRow, Store

__all__ = (
    'CATEGORY_LABELS',
    'DashboardPage',
    'DashboardRow',
    'IssueOut',
    'Patterns',
    'SessionView',
    'StepOut',
    'current_hash',
    'list_sessions',
    'patterns',
    'session_view',
)

SortKey = Literal['date', 'score']
Order = Literal['asc', 'desc']

# The four categories of the investigation rubric, keyed as the structured scorer keys them.
CATEGORY_LABELS: dict[str, str] = {
    'logical_flow': 'Logical Flow',
    'consistency': 'Consistency',
    'tool_relevance': 'Tool Relevance',
    'synthesis_quality': 'Synthesis Quality',
}
# Histogram buckets of the score distribution: ten points wide, the last one 90-100.
_BUCKET = 10


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


class DashboardPage(BaseModel):
    items: list[DashboardRow]
    total: int
    limit: int
    offset: int
    agents: list[str] = Field(description='Every agent seen, for the filter menu.')
    failure_modes: list[str] = Field(description='Every failure mode a judge can report, for the filter menu.')


class StepOut(BaseModel):
    number: int
    kind: str
    text: str
    tool_name: str | None


class IssueOut(BaseModel):
    """One finding of a failure-mode judge, flattened for display: the mode, cited steps, other fields."""

    failure_mode: str
    steps: list[int]
    source: str
    fields: dict[str, Any]


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
    evaluation_status: str | None
    evaluation_error: str | None
    failure_modes: list[str]
    issues: list[IssueOut]


class Bar(BaseModel):
    label: str
    count: int


class TrendPoint(BaseModel):
    day: str
    mean_score: float
    count: int


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


def _current_modes(report_modes: Any, hashes: Any) -> list[str]:
    """The failure modes of a report whose judges all ran under today's criteria."""
    if not isinstance(report_modes, list):
        return []
    hashes = hashes if isinstance(hashes, dict) else {}
    known = _judge_hashes()
    out = []
    for mode in report_modes:
        judges = [j for j, (_, m) in known.items() if m == mode and j in hashes]
        if judges and all(hashes[j] == known[j][0] for j in judges):
            out.append(str(mode))
    return out


# ---------------------------------------------------------------------------------------------------
# Queries


def _latest_completed_scores() -> Any:
    """Subquery: per session, its latest completed score (session_id, score_id, total_score, prompt_hash, completed_at_us)."""
    newest = (
        select(ScoreRow.session_id, func.max(ScoreRow.started_at_us).label('started'))
        .where(ScoreRow.status == JobStatus.COMPLETED.value)
        .group_by(ScoreRow.session_id)
        .subquery()
    )
    return (
        select(
            ScoreRow.session_id,
            ScoreRow.score_id,
            ScoreRow.total_score,
            ScoreRow.prompt_hash,
            ScoreRow.completed_at_us,
            ScoreRow.variant,
            ScoreRow.smoke,
        )
        .join(newest, and_(ScoreRow.session_id == newest.c.session_id, ScoreRow.started_at_us == newest.c.started))
        .where(ScoreRow.status == JobStatus.COMPLETED.value)
        .subquery()
    )


def _latest_evaluations(db: Session, session_ids: list[str] | None = None) -> dict[str, tuple[Any, Any, bool]]:
    """Per session: (failure_modes, criteria_hashes, smoke) of its latest completed evaluation."""
    newest = (
        select(EvaluationRow.session_id, func.max(EvaluationRow.started_at_us).label('started'))
        .where(EvaluationRow.status == JobStatus.COMPLETED.value)
        .group_by(EvaluationRow.session_id)
    )
    if session_ids is not None:
        newest = newest.where(EvaluationRow.session_id.in_(session_ids))
    sub = newest.subquery()
    query = select(
        EvaluationRow.session_id,
        EvaluationRow.report['failure_modes'],
        EvaluationRow.report['criteria_hashes'],
        EvaluationRow.smoke,
    ).join(sub, and_(EvaluationRow.session_id == sub.c.session_id, EvaluationRow.started_at_us == sub.c.started))
    rows = db.execute(query.where(EvaluationRow.status == 'completed'))
    return {sid: (modes, hashes, bool(smoke)) for sid, modes, hashes, smoke in rows}


def list_sessions(
    store: Store,
    *,
    limit: int,
    offset: int,
    agent: str | None = None,
    status: str | None = None,
    min_score: int | None = None,
    max_score: int | None = None,
    scored: bool | None = None,
    failure_mode: str | None = None,
    q: str | None = None,
    sort: SortKey = 'date',
    order: Order = 'desc',
) -> DashboardPage:
    """One page of sessions, filtered and sorted; unscored sessions sort last by score."""
    with store.read() as db:
        latest = _latest_completed_scores()
        base: Select[Any] = select(SessionRow, latest.c.total_score, latest.c.prompt_hash, latest.c.smoke).outerjoin(
            latest, latest.c.session_id == SessionRow.session_id
        )
        conditions = []
        if agent:
            conditions.append(SessionRow.agent == agent)
        if status:
            conditions.append(SessionRow.status == status)
        if min_score is not None:
            conditions.append(latest.c.total_score >= min_score)
        if max_score is not None:
            conditions.append(latest.c.total_score <= max_score)
        if scored is True:
            conditions.append(latest.c.total_score.is_not(None))
        elif scored is False:
            conditions.append(latest.c.total_score.is_(None))
        if q:
            pattern = f'%{q.lower()}%'
            conditions.append(func.lower(SessionRow.query_id).like(pattern))
        if failure_mode:
            ids = [
                sid for sid, (modes, _, _) in _latest_evaluations(db).items() if isinstance(modes, list) and failure_mode in modes
            ]
            conditions.append(SessionRow.session_id.in_(ids))
        if conditions:
            base = base.where(and_(*conditions))
        total = db.scalar(select(func.count()).select_from(base.subquery())) or 0
        if sort == 'score':
            key = latest.c.total_score.asc() if order == 'asc' else latest.c.total_score.desc()
            ordering = [latest.c.total_score.is_(None), key, SessionRow.created_at_us.desc()]
        else:
            ordering = [SessionRow.created_at_us.asc() if order == 'asc' else SessionRow.created_at_us.desc()]
        rows = list(db.execute(base.order_by(*ordering, SessionRow.session_id).limit(limit).offset(offset)))
        ids = [r[0].session_id for r in rows]
        states = _scoring_states(db, ids)
        evaluations = _latest_evaluations(db, ids)
        agents = sorted(a for a in db.scalars(select(SessionRow.agent).distinct()) if a)
        items = [
            DashboardRow(
                session_id=s.session_id,
                query_id=s.query_id,
                query=_query_text(s.record),
                agent=s.agent,
                status=s.status,
                created_at_us=s.created_at_us,
                rating=_rating_mean(s.record),
                scoring_status=states.get(s.session_id, 'not_scored'),
                total_score=total_score,
                smoke=bool(smoke),
                current_prompt_used=is_current_prompt(prompt_hash) if prompt_hash else None,
                failure_modes=[str(m) for m in (evaluations.get(s.session_id, (None, None, False))[0] or [])],
            )
            for s, total_score, prompt_hash, smoke in rows
        ]
    return DashboardPage(items=items, total=total, limit=limit, offset=offset, agents=agents, failure_modes=list(FAILURE_MODES))


def session_view(store: Store, session_id: str) -> SessionView:
    """Everything the session page shows: record, numbered transcript, scores with history, issues."""
    detail = repository.get_session(store, session_id)  # raises SessionNotFoundError (404)
    history = repository.list_scores(store, session_id)
    record = QueryRecord.model_validate(detail.record)
    transcript = render_transcript(record, include_system=False)
    steps = [StepOut(number=s.number, kind=s.kind, text=s.text, tool_name=s.tool_name) for s in transcript.steps]
    evaluation = detail.latest_evaluation
    issues: list[IssueOut] = []
    modes: list[str] = []
    report = evaluation.report if evaluation is not None else None
    if report:
        modes = [str(m) for m in report.get('failure_modes') or []]
        for mode, (_, _, field_name) in FAILURE_MODES.items():
            for issue in report.get(field_name) or []:
                if isinstance(issue, dict):
                    fields = {k: v for k, v in issue.items() if k not in ('steps', 'source')}
                    steps_cited = [int(n) for n in issue.get('steps') or [] if isinstance(n, int)]
                    issues.append(
                        IssueOut(failure_mode=mode, steps=steps_cited, source=str(issue.get('source', 'judge')), fields=fields)
                    )
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
        failure_modes=modes,
        issues=issues,
    )


def patterns(store: Store, variant: str, *, top: int = 15, include_smoke: bool = False) -> Patterns:
    """Failure-mode frequency, missing tools by name, score histogram and daily trend, under today's criteria.

    Smoke scores and evaluations (the embedded model's) are left out unless `include_smoke`."""
    prompt_hash = current_hash(variant)
    with store.read() as db:
        latest = _latest_completed_scores()
        rows = list(
            db.execute(
                select(
                    latest.c.score_id,
                    latest.c.total_score,
                    latest.c.completed_at_us,
                    latest.c.smoke,
                ).where(latest.c.prompt_hash == prompt_hash)
            )
        )
        smoke_left_out = 0
        if not include_smoke:
            smoke_left_out = sum(1 for r in rows if r.smoke)
            rows = [r for r in rows if not r.smoke]
        stored_tools = _missing_tool_names(db, [r.score_id for r in rows])
        evaluations = _latest_evaluations(db)
    tools: Counter[str] = Counter()
    buckets = [0] * (100 // _BUCKET)
    by_day: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        names = stored_tools.get(r.score_id, [])
        tools.update({n.strip().lower() for n in names if n.strip()})  # one count per session per tool
        if r.total_score is not None:
            score = max(0, min(100, int(r.total_score)))
            buckets[min(score // _BUCKET, len(buckets) - 1)] += 1
            if r.completed_at_us:
                day = datetime.fromtimestamp(r.completed_at_us / 1e6, UTC).strftime('%Y-%m-%d')
                by_day[day].append(score)
    modes: Counter[str] = Counter()
    evaluated = 0
    for report_modes, hashes, smoke in evaluations.values():
        if smoke and not include_smoke:
            smoke_left_out += 1
            continue
        evaluated += 1
        modes.update(_current_modes(report_modes, hashes))
    histogram = [
        Bar(label=f'{i * _BUCKET}-{i * _BUCKET + _BUCKET - 1 if i < len(buckets) - 1 else 100}', count=n)
        for i, n in enumerate(buckets)
    ]
    return Patterns(
        prompt_hash=prompt_hash,
        scored_sessions=len(rows),
        evaluated_sessions=evaluated,
        include_smoke=include_smoke,
        smoke_left_out=smoke_left_out,
        failure_modes=[Bar(label=m, count=n) for m, n in modes.most_common()],
        missing_tools=[Bar(label=t, count=n) for t, n in tools.most_common(top)],
        histogram=histogram,
        trend=[TrendPoint(day=d, mean_score=round(sum(v) / len(v), 1), count=len(v)) for d, v in sorted(by_day.items())],
    )


# ---------------------------------------------------------------------------------------------------
# Helpers


def _missing_tool_names(db: Session, score_ids: list[str]) -> dict[str, list[str]]:
    """Per score: the names of its stored missing tools (`score_missing_tools` rows), in order."""
    names: dict[str, list[str]] = defaultdict(list)
    for start in range(0, len(score_ids), 500):  # bounded IN lists
        chunk = score_ids[start : start + 500]
        query = select(MissingToolRow.score_id, MissingToolRow.tool_name).where(MissingToolRow.score_id.in_(chunk))
        for score_id, name in db.execute(query.order_by(MissingToolRow.id)):
            names[score_id].append(name)
    return names


def _scoring_states(db: Session, session_ids: list[str]) -> dict[str, str]:
    if not session_ids:
        return {}
    newest = (
        select(ScoreRow.session_id, func.max(ScoreRow.started_at_us).label('started'))
        .where(ScoreRow.session_id.in_(session_ids))
        .group_by(ScoreRow.session_id)
        .subquery()
    )
    query = select(ScoreRow.session_id, ScoreRow.status).join(
        newest, and_(ScoreRow.session_id == newest.c.session_id, ScoreRow.started_at_us == newest.c.started)
    )
    return {sid: status for sid, status in db.execute(query)}


def _query_text(record: Any) -> str:
    if not isinstance(record, dict):
        return ''
    query = record.get('query')
    if query:
        return str(query)
    alert = record.get('alert_data')
    if isinstance(alert, dict):
        return ', '.join(f'{k}={v}' for k, v in list(alert.items())[:4])
    return str(alert or '')


def _rating_mean(record: Any) -> float | None:
    rating = record.get('rating') if isinstance(record, dict) else None
    if not isinstance(rating, dict):
        return None
    values = [rating.get(k) for k in ('correctness', 'relevance', 'usefulness')]
    numbers = [v for v in values if isinstance(v, int | float)]
    return round(sum(numbers) / len(numbers), 2) if numbers else None
