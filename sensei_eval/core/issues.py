"""Issue models: what each failure mode's judge reports, one model per mode (`sensei_eval.core.modes` pairs them).

Every model carries the fields of the standard failure-mode definitions, plus three shared ones:

* `steps` — the transcript step numbers the issue rests on, so a reader (and the dashboard) can jump
  to the evidence;
* `source` — `judge` for an LLM judge's finding, `check` for a deterministic check's;
* `severity` — `minor` / `major` / `critical`, what the finding did to the user or the world
  (`SEVERITIES`; the rule is `core.verdicts`: only major and critical findings fail a mode). Every LLM
  judge must give it; a finding loaded without one (an old report) counts as major.

Fields whose values name one agent's world (where a documentation agent's claims come from, its kinds of
question) are plain strings here: each judge lists the values it accepts in the schema it sends, and an
agent profile may swap them for its own (`evaluators.base.FailureModeJudge.vocabulary`).

A judge answers with a `Verdict`: a short `reasoning` first (the model thinks before it lists), then
the issues. No issues means the run passed that failure mode.
"""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = (
    'SEVERITIES',
    'AgentFormatIssue',
    'AmbiguityIssue',
    'CitationIssue',
    'CompletenessIssue',
    'ConfidenceIssue',
    'DecompositionIssue',
    'HallucinationIssue',
    'InstructionIssue',
    'Issue',
    'IssueSource',
    'ReportingIssue',
    'ResearchDepthIssue',
    'Severity',
    'SolutionEvaluationIssue',
    'SourceQualityIssue',
    'SourceSelectionIssue',
    'SynthesisIssue',
    'ToolParameterIssue',
    'ToolSelectionIssue',
    'Verdict',
)

IssueSource = Literal['judge', 'check']
Severity = Literal['minor', 'major', 'critical']
# In order of weight; what each means is stated once, for every judge, in `SEVERITY_GUIDE`
# (`evaluators.base`), and its cost in `core.verdicts.SEVERITY_COST`.
SEVERITIES: tuple[Severity, ...] = ('minor', 'major', 'critical')


class Issue(BaseModel):
    """Fields every issue shares."""

    model_config = ConfigDict(extra='ignore')

    steps: list[int] = Field(default_factory=list, description='Transcript step numbers this issue rests on.')
    source: IssueSource = Field(default='judge', description='Leave as "judge".')
    # required in the schema a judge answers in (`evaluators.base`); None only in reports written before
    # every finding had one, read as major
    severity: Severity | None = Field(
        default=None, description='minor, major or critical: what this problem did to the user or the world.'
    )


class ToolSelectionIssue(Issue):
    missed_tools: list[str] = Field(description='Tools that should have been used but were not.')
    unnecessary_tools: list[str] = Field(description='Tools that were used but not needed.')
    reasoning: str


class ToolParameterIssue(Issue):
    tool_name: str
    parameter: str
    actual_value: str
    suggested_value: str
    reasoning: str


class SourceQualityIssue(Issue):
    source_used: str
    better_source: str
    why_better: str


class SynthesisIssue(Issue):
    claim_in_answer: str
    tool_output_reality: str
    discrepancy: str


class CompletenessIssue(Issue):
    missed_aspects: list[str] = Field(description='Parts of the query the answer did not address.')
    reasoning: str


class HallucinationIssue(Issue):
    hallucinated_claim: str
    what_tools_actually_said: str


class AgentFormatIssue(Issue):
    problem_type: Literal['greeting', 'filler', 'unstructured', 'missing_formatting']
    example_text: str
    suggested_fix: str


class ConfidenceIssue(Issue):
    claim: str
    # what the claim rests on, in the judge's vocabulary (`evaluators.methodology.ConfidenceCommunication`)
    source_type: str
    stated_confidence: Literal['high', 'medium', 'low', 'uncertain', 'none']
    expected_confidence: Literal['high', 'medium', 'low', 'uncertain']
    reasoning: str


class DecompositionIssue(Issue):
    query_complexity: Literal['simple', 'compound', 'complex']
    identified_parts: list[str]
    missed_parts: list[str]
    cache_searched: bool
    subagents_used: bool
    should_have_used_subagents: bool
    reasoning: str


class ResearchDepthIssue(Issue):
    query_phrasings_tried: int
    sources_consulted: int
    depth_of_investigation: Literal['shallow', 'moderate', 'deep']
    missed_exploration: list[str]
    premature_conclusion: bool
    reasoning: str


class SolutionEvaluationIssue(Issue):
    approaches_considered: int
    signals_evaluated: list[Literal['authority', 'alignment', 'simplicity', 'recency']]
    red_flags_present: list[str]
    red_flags_acknowledged: bool
    reasoning: str


class AmbiguityIssue(Issue):
    query_ambiguity: Literal['clear', 'slightly_ambiguous', 'highly_ambiguous']
    assumptions_made: list[str]
    assumptions_stated: list[str]
    should_have_clarified: bool
    reasoning: str


class ReportingIssue(Issue):
    result_type: Literal['found', 'not_found', 'partial']
    search_explained: bool
    debugging_context: bool
    underlying_concepts: bool
    edge_cases_noted: bool
    reasoning: str


class CitationIssue(Issue):
    uncited_claims: list[str]
    citations_without_snippets: int
    citations_with_snippets: int
    vague_refs: list[str]
    citation_balance: Literal['under', 'appropriate', 'over']
    reasoning: str


class SourceSelectionIssue(Issue):
    # the request's goal and the trust levels, in the judge's vocabulary (`evaluators.sources.SourceSelection`)
    goal_type: str
    sources_used: list[str]
    trust_levels_used: list[str]
    better_sources_available: list[str]
    trust_hierarchy_violated: bool
    reasoning: str


class InstructionIssue(Issue):
    """A rule the agent's own instructions state, broken in the run (not one of the 15 standard modes)."""

    rule: str = Field(description="The rule as the agent's instructions state it, quoted or closely paraphrased.")
    violation: str = Field(description='What the agent did (or failed to do) that breaks it.')
    reasoning: str


IssueT = TypeVar('IssueT', bound=Issue)


class Verdict(BaseModel, Generic[IssueT]):
    """A judge's answer for one record and one failure mode."""

    reasoning: str = Field(description='Two to five sentences weighing the evidence, citing [step] numbers.')
    issues: list[IssueT] = Field(description='One entry per problem found; an empty list when there is none.')
