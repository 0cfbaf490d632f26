"""The latest job of each session, as the dashboard's pages read it: its latest completed scoring (a job of
the investigation judge) and evaluation, their states, and what the pages derive from them.

A scoring and an evaluation are jobs of one table (`session_evaluations`); every read here names which of the
two it reads (`SCORING`, `EVALUATION`). An evaluation's verdict is the stored summary of the verdict model
(`service.verdict_cache`) when it was made under today's rules, else recomputed from the report's judge
results; a score's breakdown and missing tools are what the worker kept of the judge's typed result.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Select, and_, func, select
from sqlalchemy.orm import Session

from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.verdicts import RecordVerdict
from sensei_eval.evaluators.investigation_prompts import PROMPT_HASH, STRUCTURED_PROMPT_HASH
from sensei_eval.evaluators.registry import JUDGES
from sensei_eval.service.dashboard.views import ScoreView
from sensei_eval.service.schemas import ScoreOut
from sensei_eval.service.store import EvaluationRow, JobStatus, SessionRow
from sensei_eval.service.verdict_cache import (
    VerdictSummary,
    cached_verdict,
    known_verdicts,
    stored_results,
    stored_summary,
    summarise,
)

__all__ = (
    'EVALUATION',
    'IN_CHUNK',
    'JUDGE_NAME_CHARS',
    'SCORING',
    'LatestEvaluation',
    'count_latest_evaluations',
    'current_hash',
    'day_bounds',
    'evaluation_states',
    'is_alert',
    'judge_hashes',
    'judge_results',
    'latest_completed_scores',
    'latest_evaluation_query',
    'latest_evaluations',
    'missing_tool_names',
    'score_view',
    'scoring_states',
    'stored_prompt_version',
    'with_results',
)

# The characters of a judge's name (registry names, user modules' too): a name with others ran on no run.
JUDGE_NAME_CHARS = frozenset('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-')
# Ids per `IN (...)` list: well under SQLite's bound-parameter limit and PostgreSQL's comfort.
IN_CHUNK = 500


# ---------------------------------------------------------------------------------------------------
# Scores as the page shows them


def score_view(score: ScoreOut) -> ScoreView:
    """A score with its stored breakdown (columns) and missing tool names (rows), as read from the store."""
    tools = list(dict.fromkeys(t.tool_name for t in score.missing_tools or []))
    return ScoreView(score=score, breakdown=score.score_breakdown or None, missing_tools=tools)


# ---------------------------------------------------------------------------------------------------
# Criteria hashes


def current_hash(variant: str) -> str:
    """The criteria hash new scorings of this variant get."""
    return STRUCTURED_PROMPT_HASH if variant == 'structured' else PROMPT_HASH


@functools.cache
def judge_hashes() -> dict[str, tuple[str, str | None]]:
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
SCORING = EvaluationRow.scoring.is_not(None)
EVALUATION = EvaluationRow.scoring.is_(None)


def latest_completed_scores() -> Any:
    """Subquery: per session, its latest completed score (session_id, score_id, total_score, prompt_hash, completed_at_us)."""
    newest = (
        select(EvaluationRow.session_id, func.max(EvaluationRow.started_at_us).label('started'))
        .where(EvaluationRow.status == JobStatus.COMPLETED.value, SCORING)
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
        .where(EvaluationRow.status == JobStatus.COMPLETED.value, SCORING)
        .subquery()
    )


@dataclass(frozen=True)
class LatestEvaluation:
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


def latest_evaluation_query(
    columns: list[Any], session_ids: list[str] | None, sessions: Select[Any] | None, smoke: bool | None, where: Sequence[Any] = ()
) -> Select[Any]:
    """Per session (of `session_ids`, and of the `sessions` query, when given): its latest completed
    evaluation's `columns`, kept when its smoke mark is `smoke` (any, when None)."""
    newest = (
        select(EvaluationRow.session_id, func.max(EvaluationRow.started_at_us).label('started'))
        .where(EvaluationRow.status == JobStatus.COMPLETED.value, EVALUATION)
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
        .where(EvaluationRow.status == JobStatus.COMPLETED.value, EVALUATION, *where)
    )
    return latest if smoke is None else latest.where(EvaluationRow.smoke == smoke)


def count_latest_evaluations(db: Session, sessions: Select[Any] | None, *, smoke: bool) -> int:
    """How many of these sessions' latest completed evaluations have this smoke mark."""
    latest = latest_evaluation_query([EvaluationRow.session_id], None, sessions, smoke).subquery()
    return db.scalar(select(func.count(func.distinct(latest.c.session_id)))) or 0


def latest_evaluations(
    db: Session,
    session_ids: list[str] | None = None,
    *,
    sessions: Select[Any] | None = None,
    smoke: bool | None = None,
    where: Sequence[Any] = (),
) -> dict[str, LatestEvaluation]:
    """Per session (of `session_ids`, and of the `sessions` query, when given): its latest completed
    evaluation (criteria hashes, smoke, the summary of its verdict), when its smoke mark is `smoke` (any, when
    None). The stored summary is read when the verdict rules it was made under are today's; otherwise the
    verdict is recomputed from the report's judge results (`with_results`)."""
    columns = [
        EvaluationRow.session_id,
        EvaluationRow.evaluation_id,
        EvaluationRow.report['criteria_hashes'],
        EvaluationRow.smoke,
        EvaluationRow.verdict_cache,
    ]
    latest = latest_evaluation_query(columns, session_ids, sessions, smoke, where)
    out: dict[str, LatestEvaluation] = {}
    unsummarised: list[str] = []
    rows = list(db.execute(latest))
    for sid, evaluation_id, hashes, smoke, stored in rows:
        summary = stored_summary(stored)
        if summary is None:
            unsummarised.append(evaluation_id)
            continue
        out[sid] = LatestEvaluation(evaluation_id, hashes, bool(smoke), summary)
    full = with_results(db, unsummarised)
    for sid, evaluation_id, hashes, smoke, _ in rows:
        if evaluation_id in full:
            results, verdict = full[evaluation_id]
            out[sid] = LatestEvaluation(evaluation_id, hashes, bool(smoke), summarise(results, verdict), results)
    return out


def judge_results(db: Session, evaluations: list[LatestEvaluation], judge: str) -> dict[str, JudgeResult]:
    """One judge's stored result in each of these completed evaluations that ran it (the report's
    `judges.<judge>` alone: the rest of the report is not read)."""
    out: dict[str, JudgeResult] = {}
    if not judge or not set(judge) <= JUDGE_NAME_CHARS:
        return out  # no judge is named so (and the name goes into a JSON path)
    ids = [e.evaluation_id for e in evaluations if judge in e.summary.judges]
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        query = select(EvaluationRow.evaluation_id, EvaluationRow.report['judges'][judge]).where(
            EvaluationRow.evaluation_id.in_(chunk)
        )
        for evaluation_id, raw in db.execute(query):
            if raw is not None:
                out[evaluation_id] = stored_results({judge: raw}, where=f'evaluation {evaluation_id}')[0]
    return out


def with_results(db: Session, evaluation_ids: list[str]) -> dict[str, tuple[list[JudgeResult], RecordVerdict]]:
    """The judge results and verdict of these completed evaluations: from this process's cache, else read
    (only the report's `judges`) and computed."""
    known = known_verdicts(evaluation_ids)
    missing = [evaluation_id for evaluation_id in evaluation_ids if evaluation_id not in known]
    for start in range(0, len(missing), IN_CHUNK):
        chunk = missing[start : start + IN_CHUNK]
        query = select(EvaluationRow.evaluation_id, EvaluationRow.report['judges']).where(EvaluationRow.evaluation_id.in_(chunk))
        for evaluation_id, judges in db.execute(query):
            known[evaluation_id] = cached_verdict(evaluation_id, judges)
    return known


def evaluation_states(db: Session, session_ids: list[str]) -> dict[str, str]:
    """Per session: the status of its latest evaluation of any status."""
    return job_states(db, session_ids, EVALUATION)


def job_states(db: Session, session_ids: list[str], kind: Any) -> dict[str, str]:
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


def day_bounds(since: str | None, until: str | None) -> tuple[int | None, int | None]:
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


# ---------------------------------------------------------------------------------------------------
# Helpers


def missing_tool_names(db: Session, score_ids: list[str]) -> dict[str, list[str]]:
    """Per score: the names of its missing tools as the worker kept them (`score_detail`), in order."""
    names: dict[str, list[str]] = defaultdict(list)
    for start in range(0, len(score_ids), IN_CHUNK):  # bounded IN lists
        chunk = score_ids[start : start + IN_CHUNK]
        query = select(EvaluationRow.evaluation_id, EvaluationRow.score_detail['missing_tools']).where(
            EvaluationRow.evaluation_id.in_(chunk)
        )
        for score_id, tools in db.execute(query):
            for tool in tools if isinstance(tools, list) else []:
                if isinstance(tool, dict) and isinstance(tool.get('tool_name'), str):
                    names[score_id].append(tool['tool_name'])
    return names


def scoring_states(db: Session, session_ids: list[str]) -> dict[str, str]:
    """Per session: the status of its latest scoring of any status."""
    return job_states(db, session_ids, SCORING)


def is_alert(record: Any) -> bool:
    return isinstance(record, dict) and record.get('alert_data') is not None


def stored_prompt_version() -> Any:
    """A run's prompt version, as the database reads it from the stored record."""
    return SessionRow.record['prompt_version'].as_string()
