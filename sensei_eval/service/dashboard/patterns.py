"""The patterns page's aggregate: what the judges found, under today's criteria, over the runs a filter selects.

Only work done under today's criteria counts: scores whose `prompt_hash` is the configured scorer's current
hash, and failure modes whose judges' criteria hashes are current (otherwise a rubric change would mix old and
new verdicts in one chart); smoke results (the embedded model) only with `include_smoke`. The runs are selected
in SQL (agent, prompt version, days, smoke), and only their latest score and evaluation are read
(`dashboard.latest`); every figure reads the verdict model.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from sensei_eval.core.modes import MODES
from sensei_eval.core.reports import JudgeResult
from sensei_eval.evaluators.registry import JUDGES
from sensei_eval.service.dashboard.latest import (
    IN_CHUNK,
    LatestEvaluation,
    count_latest_evaluations,
    current_hash,
    day_bounds,
    judge_hashes,
    judge_results,
    latest_completed_scores,
    latest_evaluations,
    missing_tool_names,
    stored_prompt_version,
    with_results,
)
from sensei_eval.service.dashboard.views import (
    Bar,
    Bucket,
    Group,
    PatternFilters,
    Patterns,
    Rate,
    RatePoint,
    RateSeries,
    TrendPoint,
)
from sensei_eval.service.store import SessionRow, Store
from sensei_eval.service.verdict_cache import (
    VerdictSummary,
    summarise,
)

__all__ = ('patterns',)

# Histogram buckets of the score distribution: ten points wide, the last one 90-100.
_BUCKET = 10


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
        stored_tools = missing_tool_names(db, [r.score_id for r in scores])
        judged, smoke_evaluations = _pattern_judgements(db, runs, filters)
        agents = sorted(a for a in db.scalars(select(SessionRow.agent).distinct()) if a)
        versions = sorted({str(v) for v in db.scalars(select(stored_prompt_version()).distinct()) if v})
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


def _selected_runs(filters: PatternFilters) -> Select[Any] | None:
    """The ids of the runs the patterns' filters select (agent, prompt version, ingest days), as a query; None
    when they select every run."""
    low, high = day_bounds(filters.since, filters.until)
    conditions = []
    if filters.agent:
        conditions.append(SessionRow.agent == filters.agent)
    if filters.prompt_version:
        conditions.append(stored_prompt_version() == filters.prompt_version)
    if low is not None:
        conditions.append(SessionRow.created_at_us >= low)
    if high is not None:
        conditions.append(SessionRow.created_at_us < high)
    return select(SessionRow.session_id).where(*conditions) if conditions else None


def _pattern_scores(db: Session, prompt_hash: str, runs: Select[Any] | None, include_smoke: bool) -> tuple[list[Any], int]:
    """The selected runs' latest completed scores under today's criteria (`prompt_hash`), and how many smoke
    scores were left out (none when `include_smoke`)."""
    latest = latest_completed_scores()
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
    evaluations = latest_evaluations(db, sessions=runs, smoke=smoke)
    smoke_left_out = 0 if smoke is None else count_latest_evaluations(db, runs, smoke=True)
    known = judge_hashes()
    judge = filters.judge
    if judge:  # only that judge's result of each run is read
        full = {eid: [result] for eid, result in judge_results(db, list(evaluations.values()), judge).items()}
    else:
        outdated = [e.evaluation_id for e in evaluations.values() if _outdated(e, known)]
        full = {eid: results for eid, (results, _) in with_results(db, outdated).items()}
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
    column = SessionRow.agent if group == 'agent' else stored_prompt_version()
    out: dict[str, tuple[str, int]] = {}
    for start in range(0, len(session_ids), IN_CHUNK):
        chunk = session_ids[start : start + IN_CHUNK]
        query = select(SessionRow.session_id, column, SessionRow.created_at_us).where(SessionRow.session_id.in_(chunk))
        for sid, value, created in db.execute(query):
            out[sid] = ('all' if group == 'all' else str(value) if value else '(none)', created)
    return out


def _outdated(e: LatestEvaluation, known: dict[str, tuple[str, str | None]]) -> bool:
    """Some judge of this evaluation judged under criteria other than today's."""
    hashes = e.hashes if isinstance(e.hashes, dict) else {}
    return any(name in known and hashes.get(name) != known[name][0] for name in e.summary.judges)


def _counted_summary(
    e: LatestEvaluation, full: dict[str, list[JudgeResult]], judge: str | None, known: dict[str, tuple[str, str | None]]
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
