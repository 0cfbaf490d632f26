"""What an optimizer run is configured with and what it keeps: `OptimizeConfig`, the state saved after every
candidate (`OptimizeState`, `ComponentState`, `CandidateResult`, the query `Split`, a candidate's
`ValidationTest`) and the `PromptSuggestion`s it ends with. The run itself is `optimize.loop`; when a candidate
is accepted, `optimize.acceptance`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = (
    'STATE_VERSION',
    'CandidateResult',
    'ComponentState',
    'OptimizeConfig',
    'OptimizeState',
    'PromptSuggestion',
    'Split',
    'ValidationTest',
)

# How many failure examples the generator sees per component: enough to show a pattern, few enough
# to keep its prompt small for a local model.
STATE_VERSION = 3


class PromptSuggestion(BaseModel):
    """An optimization suggestion: what a human reviews before changing the agent's prompt."""

    failure_pattern: str
    affected_queries: list[str]
    current_prompt_section: str
    suggested_change: str
    expected_improvement: str
    diff: str = ''
    score_before: float | None = None
    score_after: float | None = None
    validation_before: float | None = None
    validation_after: float | None = None
    p_value: float | None = None
    validation_gain: float | None = Field(
        None, description='Mean gain of the overall score (the scale `validate` reports) on the test queries.'
    )
    gain_interval: tuple[float, float] | None = Field(None, description='Its 95% paired bootstrap interval.')


class OptimizeConfig(BaseModel):
    variants: int = Field(3, ge=1)
    margin: float = Field(0.01, ge=0.0, description='A frozen variant must gain more than this on validation (mean).')
    budget_calls: int | None = Field(None, ge=1)
    max_metric_calls: int | None = Field(None, ge=1)
    max_components: int | None = Field(None, ge=1)
    all_components: bool = False
    seed: int = 0
    concurrency: int = Field(4, ge=1)
    judges: list[str] = Field(default_factory=list)
    query_ids: list[str] = Field(default_factory=list)
    validation_fraction: float = Field(0.5, gt=0.0, lt=1.0, description='Share of the queries held out for acceptance.')
    validation_queries: list[str] | None = Field(
        None, description='Query ids held out for acceptance (overrides validation_fraction); the rest are train.'
    )
    runs: int = Field(1, ge=1, description='Agent runs per validation query (the paired test averages them).')
    alpha: float = Field(0.05, gt=0.0, lt=1.0, description='Significance level of the one-sided paired validation test.')
    component_map: dict[str, list[str]] | None = Field(
        None, description='Failure mode -> component names; None: the profile map, else lexical routing.'
    )
    profile: str | None = Field(
        None, description='Agent profile whose component map to use (default: the profile the queries name).'
    )
    generator_timeout_s: float = Field(60.0, gt=0.0, description='Time limit of one variant-generator call.')
    generator_max_tokens: int = Field(
        1024, ge=16, description='Most output tokens of one variant-generator call (less for a short section).'
    )
    top_k: int = Field(2, ge=1, description='Candidates of a round that beat the current text on train and are tested.')
    rounds: int = Field(3, ge=1, description='Most rounds per component; a next round only after one was accepted.')
    examples_per_issue: int = Field(
        2, ge=1, description='Examples the generator sees of each kind of failure (the rest count, unseen).'
    )
    success_examples: int = Field(2, ge=0, description='Runs that passed every judge, shown to the generator.')
    stratify: bool = Field(True, description='Split train/validation within each group of queries failing the same modes.')


class Split(BaseModel):
    """Which queries the loop learns from and which it accepts changes on."""

    train: list[str]
    validation: list[str]


class ValidationTest(BaseModel):
    """The acceptance test of one candidate against the current text on the validation queries."""

    pairs: int
    mean_before: float | None
    mean_after: float | None
    delta: float | None
    p_value: float
    alpha: float
    margin: float
    errors_before: int
    errors_after: int
    accepted: bool
    reason: str
    ci_low: float | None = Field(None, description='95% paired bootstrap interval of the mean gain (queries resampled).')
    ci_high: float | None = None
    modes: list[str] = Field(default_factory=list, description='The failure modes tested (empty: the overall score).')
    unpaired: int = Field(0, description='Test queries scored on one side only (not judged on the other): left out.')
    target_pairs: int = 0
    target_delta: float | None = None


class CandidateResult(BaseModel):
    component: str
    round: int = 1
    index: int
    text: str
    score: float | None = Field(description='Mean overall score on the training queries.')
    model_calls: int
    errors: int
    path: str
    validation_score: float | None = None
    validation: ValidationTest | None = None


class ComponentState(BaseModel):
    name: str
    status: Literal['pending', 'evaluating', 'done', 'skipped'] = 'pending'
    reason: str | None = None
    failures: int = Field(0, description='Failures (issues) found on train that the routing sent to this component.')
    failure_queries: dict[str, list[str]] = Field(default_factory=dict, description='Judge -> train query ids, routed here.')
    variants: list[str] | None = None
    generator_calls: int = 0
    generator_errors: list[str] = Field(default_factory=list)
    candidates: list[CandidateResult] = Field(default_factory=list)
    round: int = Field(1, description='The round in progress (a new round starts after an accepted one).')
    shown_queries: list[str] = Field(
        default_factory=list, description='Train queries whose runs the generator was shown this round (left out of the test).'
    )
    issue_counts: dict[str, int] = Field(default_factory=dict, description='What went wrong -> findings, routed here (round 1).')
    target_modes: list[str] = Field(
        default_factory=list, description="The modes of this round's routed findings: what its acceptance test is on."
    )
    frozen_path: str | None = None
    accepted_rounds: int = 0
    score_before: float | None = Field(None, description='Train score before this component was visited.')
    score_after: float | None = None
    validation_before: float | None = None
    validation_after: float | None = None
    frozen_index: int | None = None


class OptimizeState(BaseModel):
    version: int = STATE_VERSION
    config: OptimizeConfig
    source: str
    original: dict[str, str]
    current: dict[str, str]
    split: Split | None = None
    alpha_per_test: float | None = Field(None, description='Level of each acceptance test (alpha / components / variants).')
    plan: str | None = Field(None, description='The acceptance rule with this split, said before anything is tested.')
    routing: str | None = Field(None, description="'user map', 'profile map' or 'lexical'.")
    routing_detail: str | None = None
    unrouted_failures: int = 0
    order: list[str] = Field(default_factory=list)
    components: dict[str, ComponentState] = Field(default_factory=dict)
    baseline_score: float | None = Field(None, description='Train score of the prompt as it was.')
    current_score: float | None = Field(None, description='Train score of the prompt with every frozen variant.')
    baseline_validation_score: float | None = None
    current_validation_score: float | None = None
    agent_calls: int = 0
    judge_calls: int = 0
    generator_calls: int = 0
    metric_calls: int = 0
    notes: list[str] = Field(default_factory=list)
    stopped: str | None = None

    @property
    def model_calls(self) -> int:
        return self.agent_calls + self.judge_calls + self.generator_calls

    @property
    def train_score(self) -> float | None:
        return self.current_score

    @property
    def validation_score(self) -> float | None:
        return self.current_validation_score

    @property
    def accepted(self) -> list[str]:
        """The components whose variant passed the validation test, in the order they were frozen."""
        return [n for n in self.order if self.components[n].frozen_index is not None]
