"""The API's request and response bodies (pydantic), and their mapping from store rows.

`ScoreOut` carries seed 000's fields (`score_id` … `current_prompt_used`), plus which scorer variant
ran and, for the structured variant (seed 003), `score_breakdown`, `missing_tools` and
`alternative_approaches`. `total_score` and the analyses are null until the scoring completes;
`error_message` is set when it ended failed, timed_out or cancelled.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..evaluators.investigation import is_current_prompt
from ..records import QueryRecord
from .store import EvaluationRow, JobStatus, MissingToolRow, ScoreRow, SessionRow, SessionStatus

__all__ = (
    'EvaluateRequest',
    'EvaluationOut',
    'MissingToolOut',
    'ScoreOut',
    'ScoreRequest',
    'SessionCreate',
    'SessionCreated',
    'SessionDetail',
    'SessionPage',
    'SessionSummary',
    'SessionUpdate',
    'evaluation_out',
    'score_out',
)


class SessionCreate(QueryRecord):
    """A `QueryRecord` (same fields, flat) plus the session's status and the agent/chain that ran it."""

    model_config = ConfigDict(extra='forbid')

    status: SessionStatus = SessionStatus.COMPLETED
    agent: str | None = Field(default=None, max_length=255, description='The agent or chain; decides auto-scoring.')

    def record(self) -> QueryRecord:
        return QueryRecord.model_validate(self.model_dump(mode='json', exclude={'status', 'agent'}))


class SessionUpdate(BaseModel):
    model_config = ConfigDict(extra='forbid')

    status: SessionStatus


class MissingToolOut(BaseModel):
    tool_name: str
    rationale: str


class ScoreOut(BaseModel):
    score_id: str
    session_id: str
    status: JobStatus
    prompt_hash: str
    total_score: int | None
    score_analysis: str | None
    missing_tools_analysis: str | None
    error_message: str | None
    score_triggered_by: str
    started_at_us: int
    completed_at_us: int | None
    current_prompt_used: bool
    variant: str
    model: str | None = None
    score_breakdown: dict[str, Any] | None = None
    missing_tools: list[MissingToolOut] | None = None
    alternative_approaches: list[Any] | None = None


class SessionCreated(BaseModel):
    session_id: str
    status: SessionStatus
    auto_score: ScoreOut | None = Field(default=None, description='The scoring started on ingestion, if any.')
    auto_score_error: str | None = Field(default=None, description='Why auto-scoring could not start (fail-open).')


class SessionSummary(BaseModel):
    session_id: str
    query_id: str
    query: str
    agent: str | None
    status: SessionStatus
    created_at_us: int
    updated_at_us: int
    scoring_status: str = Field(description='Status of the latest scoring, or not_scored.')
    score: ScoreOut | None = Field(description='The latest completed score.')


class SessionDetail(SessionSummary):
    record: dict[str, Any]
    created_by: str | None
    latest_scoring: ScoreOut | None
    latest_evaluation: EvaluationOut | None


class SessionPage(BaseModel):
    items: list[SessionSummary]
    total: int
    limit: int
    offset: int


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra='forbid')

    force_rescore: bool = False


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(extra='forbid')

    evaluators: list[str] | None = Field(default=None, description='Judge names or groups; default: the service setting.')
    force: bool = Field(default=False, description='Evaluate again even if an evaluation exists.')


class EvaluationOut(BaseModel):
    evaluation_id: str
    session_id: str
    status: JobStatus
    evaluators: list[str]
    triggered_by: str
    started_at_us: int
    completed_at_us: int | None
    error_message: str | None
    overall_score: float | None
    model: str | None
    report: dict[str, Any] | None = None


def score_out(row: ScoreRow, missing: list[MissingToolRow] | None = None) -> ScoreOut:
    done = row.status == JobStatus.COMPLETED.value
    return ScoreOut(
        score_id=row.score_id,
        session_id=row.session_id,
        status=JobStatus(row.status),
        prompt_hash=row.prompt_hash,
        total_score=row.total_score if done else None,
        score_analysis=row.score_analysis if done else None,
        missing_tools_analysis=row.missing_tools_analysis if done else None,
        error_message=row.error_message,
        score_triggered_by=row.score_triggered_by,
        started_at_us=row.started_at_us,
        completed_at_us=row.completed_at_us,
        current_prompt_used=is_current_prompt(row.prompt_hash),
        variant=row.variant,
        model=row.model,
        score_breakdown=row.score_breakdown if done else None,
        missing_tools=[MissingToolOut(tool_name=m.tool_name, rationale=m.rationale) for m in missing]
        if (done and missing is not None and row.variant == 'structured')
        else None,
        alternative_approaches=row.alternative_approaches if done else None,
    )


def evaluation_out(row: EvaluationRow, with_report: bool = True) -> EvaluationOut:
    return EvaluationOut(
        evaluation_id=row.evaluation_id,
        session_id=row.session_id,
        status=JobStatus(row.status),
        evaluators=list(row.evaluators),
        triggered_by=row.triggered_by,
        started_at_us=row.started_at_us,
        completed_at_us=row.completed_at_us,
        error_message=row.error_message,
        overall_score=row.overall_score,
        model=row.model,
        report=row.report if with_report else None,
    )


def session_query(row: SessionRow) -> str:
    query = row.record.get('query') if isinstance(row.record, dict) else None
    return str(query or '')
