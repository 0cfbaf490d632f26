"""What the dashboard's pages ask and answer: the query of the session list and of the patterns (empty
values mean no filter; days are YYYY-MM-DD, UTC), and the JSON each page reads (`DashboardPage`, `SessionView`,
`Patterns`). The reads that fill them are `dashboard.queries` (the list and a session's page) and
`dashboard.patterns`; the shared "latest job of each session" reads are `dashboard.latest`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from sensei_eval.core.explain import ScoreExplanation
from sensei_eval.evaluators.investigation_answers import CATEGORIES, CATEGORY_POINTS
from sensei_eval.service.schemas import MAX_OFFSET, ScoreOut
from sensei_eval.service.store import SessionStatus
from sensei_eval.service.verdict_cache import (
    Coverage,
)

__all__ = (
    'DAY',
    'RUBRIC',
    'Bar',
    'CategoryOut',
    'DashboardPage',
    'DashboardRow',
    'Filters',
    'IssueOut',
    'JudgementView',
    'PatternFilters',
    'Patterns',
    'Rate',
    'RatePoint',
    'RateSeries',
    'ScoreView',
    'SessionFilters',
    'SessionView',
    'StepOut',
    'TrendPoint',
    'VerdictOut',
)

SortKey = Literal['date', 'score']
Order = Literal['asc', 'desc']


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


# The rubric's categories in the order the page shows a breakdown (`evaluators.investigation_answers.CATEGORIES`).
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


# A day, YYYY-MM-DD (UTC): the date filters of the list and the patterns (an empty value means no filter).
DAY = r'^(\d{4}-\d{2}-\d{2})?$'


class Filters(BaseModel):
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


class SessionFilters(Filters):
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
    since: str | None = Field(None, pattern=DAY)
    until: str | None = Field(None, pattern=DAY)


Bucket = Literal['day', 'week']
Group = Literal['all', 'agent', 'prompt_version']


class PatternFilters(Filters):
    """The patterns' query (`GET /api/v1/dashboard/patterns`): which runs (`agent`, `prompt_version`,
    `since`/`until` days, smoke results or not), which judge, and the failure-rate buckets and groups."""

    include_smoke: bool = False
    agent: str | None = Field(None, max_length=255)
    prompt_version: str | None = Field(None, max_length=255)
    since: str | None = Field(None, pattern=DAY)
    until: str | None = Field(None, pattern=DAY)
    judge: str | None = Field(None, max_length=100)
    bucket: Bucket = 'day'
    group: Group = 'all'
