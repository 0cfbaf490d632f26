"""The API's request and response bodies (pydantic), and their mapping from store rows.

`ScoreOut` carries the session score's fields (`score_id` … `current_prompt_used`), which scorer
variant ran, and once completed the points per rubric category (`score_breakdown`) and the missing
tools (`missing_tools`, name and rationale) as the scorer's typed result gave them, for both variants;
`alternative_approaches` for the structured variant. `total_score` and the analyses are null until the scoring completes;
`error_message` is set when it ended failed, timed_out or cancelled, and `raw_output` then keeps what
the model answered (up to 8,000 characters), so a failed parse can be read. `smoke` is true for a
score (or evaluation) made by the embedded model: a model far too small to judge, whose verdicts only
show that the pipeline runs (the dashboard greys them and leaves them out of its pattern analytics).

Shared parameter types: `SessionId` (a path id of at most `MAX_ID_LENGTH` characters), `Limit`,
`Offset` (at most `MAX_OFFSET`: past it, SQLite and PostgreSQL would fail differently).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.sanitize import MAX_ID_LENGTH
from sensei_eval.evaluators.investigation_prompts import is_current_prompt
from sensei_eval.service.previews import PREVIEW_CHARS
from sensei_eval.service.store import EvaluationRow, JobStatus, SessionRow, SessionStatus
from sensei_eval.service.verdict_cache import Coverage, stored_verdict

__all__ = (
    'MAX_OFFSET',
    'EvaluateRequest',
    'EvaluationOut',
    'Limit',
    'MissingToolOut',
    'Offset',
    'ScoreOut',
    'ScoreRequest',
    'SessionCreate',
    'SessionCreated',
    'SessionDetail',
    'SessionId',
    'SessionPage',
    'SessionSummary',
    'SessionUpdate',
    'evaluation_out',
    'score_out',
)


# The largest `offset` a list accepts (far past any real table; 2**63 would overflow both backends).
MAX_OFFSET = 1_000_000_000
SessionId = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH, description='A session id.')]
Limit = Annotated[int, Query(ge=1, le=500)]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]


class SessionCreate(QueryRecord):
    """A `QueryRecord` (same fields, flat) plus the session's status and the agent/chain that ran it."""

    model_config = ConfigDict(extra='forbid')

    status: SessionStatus = SessionStatus.COMPLETED
    agent: str | None = Field(default=None, max_length=255, description='The agent or chain; decides auto-scoring.')

    @field_validator('query_id')
    @classmethod
    def _id_length(cls, value: str) -> str:
        if len(value) > MAX_ID_LENGTH:
            raise ValueError(f'query_id is {len(value)} characters long; at most {MAX_ID_LENGTH} are allowed')
        return value

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
    smoke: bool = Field(default=False, description='Made by the embedded model: a smoke test, not a verdict.')
    raw_output: str | None = Field(default=None, description="The model's raw answer (kept for failed scorings).")
    score_breakdown: dict[str, int] | None = Field(default=None, description='Points (0-25) per rubric category.')
    missing_tools: list[MissingToolOut] | None = Field(default=None, description='Tools that should have been used.')
    alternative_approaches: list[Any] | None = None


class SessionCreated(BaseModel):
    session_id: str
    status: SessionStatus
    auto_score: ScoreOut | None = Field(default=None, description='The scoring started on ingestion, if any.')
    auto_score_error: str | None = Field(default=None, description='Why auto-scoring could not start (fail-open).')
    warnings: list[str] = Field(default_factory=list, description='What ingest changed in the record (text replaced).')


class SessionSummary(BaseModel):
    session_id: str
    query_id: str
    query: str = Field(
        description=f'The query; in a list, its first {PREVIEW_CHARS} characters (`query_truncated`: there is more).'
    )
    query_truncated: bool = Field(default=False, description='A list shows a preview: the session itself has the whole query.')
    agent: str | None
    status: SessionStatus
    created_at_us: int
    updated_at_us: int
    scoring_status: str = Field(description='Status of the latest scoring, or not_scored.')
    score: ScoreOut | None = Field(description='The latest completed score.')


class SessionDetail(SessionSummary):
    record: dict[str, Any]
    created_by: str | None
    warnings: list[str] = Field(default_factory=list, description='What ingest changed in the record (text replaced).')
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
    """`POST /sessions/{id}/evaluate`: which judges (as `sensei-eval judge --judges`: names or groups, each
    may be comma-separated), else the service's (`serve --judges`, default core,checks). `evaluators` is the
    old name of `judges`; naming both is an error."""

    model_config = ConfigDict(extra='forbid')

    judges: list[str] | None = Field(
        default=None, description="Judge names or groups (e.g. ['core', 'checks']); default: the service's judges."
    )
    evaluators: list[str] | None = Field(default=None, description='The old name of `judges`.')
    force: bool = Field(default=False, description='Evaluate again even if an evaluation exists.')

    @model_validator(mode='after')
    def _one_name(self) -> EvaluateRequest:
        if self.judges is not None and self.evaluators is not None:
            raise ValueError('name the judges once: `judges` (or its old name `evaluators`), not both')
        return self

    def requested(self) -> list[str] | None:
        """The judges this request names, or None for the service's default."""
        names = self.judges if self.judges is not None else self.evaluators
        return names or None


class EvaluationOut(BaseModel):
    evaluation_id: str
    session_id: str
    status: JobStatus
    judges: list[str] = Field(description='The judge names or groups asked for.')
    evaluators: list[str] = Field(description='The old name of `judges` (deprecated: one more release).', deprecated=True)
    triggered_by: str
    started_at_us: int
    completed_at_us: int | None
    error_message: str | None
    overall_score: float | None = Field(
        description='From the verdict model (`core.verdicts`), as `sensei-eval judge` gives it; null: not judged.'
    )
    coverage: Coverage | None = Field(
        default=None,
        description="How much was judged (its `label`: 'checks only, 8 of 11 judges', 'not judged'); null without results.",
    )
    model: str | None
    smoke: bool = False
    report: dict[str, Any] | None = None


def score_out(row: Any, *, with_raw: bool = True) -> ScoreOut:
    """A scoring as the API returns it, from its job row (`EvaluationRow`, or a row of its score columns):
    the score's fields are the investigation judge's, kept with the job once it completed (`score_detail`).
    Without `with_raw` (a session list's row) the model's raw answer and the missing tools are left out."""
    done = row.status == JobStatus.COMPLETED.value
    detail: dict[str, Any] = (row.score_detail or {}) if done else {}
    missing = detail.get('missing_tools')
    return ScoreOut(
        score_id=row.evaluation_id,
        session_id=row.session_id,
        status=JobStatus(row.status),
        prompt_hash=row.prompt_hash,
        total_score=row.total_score if done else None,
        score_analysis=detail.get('score_analysis') if done else None,
        missing_tools_analysis=detail.get('missing_tools_analysis') if done else None,
        error_message=row.error_message,
        score_triggered_by=row.triggered_by,
        started_at_us=row.started_at_us,
        completed_at_us=row.completed_at_us,
        current_prompt_used=is_current_prompt(row.prompt_hash),
        variant=row.scoring,
        model=row.model,
        smoke=bool(row.smoke),
        raw_output=row.raw_output if with_raw else None,
        score_breakdown=detail.get('score_breakdown') or None,
        missing_tools=[MissingToolOut.model_validate(m) for m in missing] if with_raw and isinstance(missing, list) else None,
        alternative_approaches=detail.get('alternative_approaches'),
    )


def evaluation_out(row: EvaluationRow, with_report: bool = True) -> EvaluationOut:
    """The evaluation as the API returns it; its overall score and coverage are the verdict model's, read from
    the stored per-judge results (rows stored before coverage existed included)."""
    verdict = stored_verdict(row.report, where=f'evaluation {row.evaluation_id}')
    return EvaluationOut(
        evaluation_id=row.evaluation_id,
        session_id=row.session_id,
        status=JobStatus(row.status),
        judges=list(row.judges),
        evaluators=list(row.judges),
        triggered_by=row.triggered_by,
        started_at_us=row.started_at_us,
        completed_at_us=row.completed_at_us,
        error_message=row.error_message,
        overall_score=verdict.overall_score if verdict is not None else None,
        coverage=verdict.coverage if verdict is not None else None,
        model=row.model,
        smoke=bool(row.smoke),
        report=row.report if with_report else None,
    )


def session_query(row: SessionRow) -> str:
    query = row.record.get('query') if isinstance(row.record, dict) else None
    return str(query or '')
