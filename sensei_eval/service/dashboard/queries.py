"""The dashboard's reads of sessions: the filtered session list and one session's view (the patterns aggregate
is `dashboard.patterns`; the models the pages read, `dashboard.views`).

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

from typing import Any

from sqlalchemy import Select, and_, false, func, select
from sqlalchemy.orm import Session

from sensei_eval.core.explain import explain_score
from sensei_eval.core.modes import MODES
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.transcript import render_transcript
from sensei_eval.core.verdicts import RecordVerdict, judge_status, record_verdict
from sensei_eval.evaluators.investigation_prompts import is_current_prompt
from sensei_eval.evaluators.registry import JUDGES
from sensei_eval.service import previews, repository
from sensei_eval.service.dashboard.latest import (
    JUDGE_NAME_CHARS,
    LatestEvaluation,
    day_bounds,
    evaluation_states,
    latest_completed_scores,
    latest_evaluation_query,
    latest_evaluations,
    score_view,
    scoring_states,
    stored_prompt_version,
)
from sensei_eval.service.dashboard.views import (
    DashboardPage,
    DashboardRow,
    IssueOut,
    JudgementView,
    SessionFilters,
    SessionView,
    StepOut,
    VerdictOut,
)
from sensei_eval.service.schemas import EvaluationOut
from sensei_eval.service.store import EvaluationRow, SessionRow, Store
from sensei_eval.service.verdict_cache import (
    rules_fingerprint,
    stored_results,
)

__all__ = ('list_sessions', 'session_view')


def list_sessions(store: Store, filters: SessionFilters) -> DashboardPage:
    """One page of sessions, filtered and sorted (`SessionFilters`); unscored sessions sort last by score."""
    with store.read() as db:
        latest = latest_completed_scores()
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
        conditions.append(stored_prompt_version() == f.prompt_version)
    low, high = day_bounds(f.since, f.until)
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
    or one made under other rules) are read and their verdict recomputed (`latest_evaluations`)."""
    runs = select(SessionRow.session_id).outerjoin(latest, latest.c.session_id == SessionRow.session_id).where(*conditions)
    rules = func.coalesce(EvaluationRow.verdict_cache['rules'].as_string(), '')
    current = latest_evaluation_query([EvaluationRow.session_id], None, runs, None).where(rules == rules_fingerprint())
    matching = list(db.scalars(current.where(*_verdict_conditions(f))))
    others = latest_evaluations(db, sessions=runs, where=[rules != rules_fingerprint()])
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
        if not set(f.judge) <= JUDGE_NAME_CHARS:
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
    states = scoring_states(db, ids)
    evaluations = latest_evaluations(db, ids)
    evaluated = evaluation_states(db, ids)
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
            evaluation_status=evaluated.get(s.session_id),
            overall_score=e.overall if e else None,
            coverage=e.summary.coverage if e else None,
            evaluation_smoke=e.smoke if e else False,
            failed_judges=e.failed_judges() if e else [],
        )
        items.append(item)
    return items


def _matches(
    e: LatestEvaluation,
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
        score=score_view(detail.score) if detail.score is not None else None,
        history=[score_view(s) for s in history],
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
