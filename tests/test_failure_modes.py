"""All fifteen standard failure-mode judges, driven by scripted FunctionModels."""

from __future__ import annotations

import re
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from sensei_eval.core.issues import (
    AgentFormatIssue,
    AmbiguityIssue,
    CitationIssue,
    CompletenessIssue,
    ConfidenceIssue,
    DecompositionIssue,
    HallucinationIssue,
    Issue,
    ReportingIssue,
    ResearchDepthIssue,
    SolutionEvaluationIssue,
    SourceQualityIssue,
    SourceSelectionIssue,
    SynthesisIssue,
    ToolParameterIssue,
    ToolSelectionIssue,
)
from sensei_eval.core.modes import MODES
from sensei_eval.core.transcript import FENCE_END, FENCE_START, render_transcript
from sensei_eval.core.verdicts import SEVERITY_COST
from sensei_eval.evaluators import format as format_judges
from sensei_eval.evaluators import methodology, output, sources, tool_usage
from sensei_eval.evaluators.base import JUDGE_SYSTEM_PROMPT, FailureModeJudge
from sensei_eval.evaluators.format import AgentFormat
from sensei_eval.evaluators.methodology import (
    AmbiguityHandling,
    ConfidenceCommunication,
    QueryDecomposition,
    ResearchDepth,
    SolutionEvaluation,
)
from sensei_eval.evaluators.output import (
    CitationQuality,
    Completeness,
    Hallucination,
    ReportingQuality,
    SynthesisQuality,
)
from sensei_eval.evaluators.sources import SourceQuality, SourceSelection
from sensei_eval.evaluators.tool_usage import ToolParameters, ToolSelection
from sensei_eval.judging.profiles import BUILTIN_PROFILES

from .helpers import ScriptedJudge, no_issues, openai_record, user_prompt

JUDGES: list[type[FailureModeJudge]] = [
    ToolSelection,
    ToolParameters,
    SourceQuality,
    SynthesisQuality,
    Completeness,
    Hallucination,
    AgentFormat,
    ConfidenceCommunication,
    QueryDecomposition,
    ResearchDepth,
    SolutionEvaluation,
    AmbiguityHandling,
    ReportingQuality,
    CitationQuality,
    SourceSelection,
]

# The standard failure modes' categories as the product documents them (the table in
# `sensei_eval.core.modes` must say the same; `tests/test_modes.py` checks that nothing else lists them).
STANDARD_CATEGORIES = {
    'tool_selection': 'tool_usage',
    'tool_parameters': 'tool_usage',
    'source_quality': 'sources',
    'synthesis_quality': 'output',
    'completeness': 'output',
    'hallucination': 'output',
    'agent_format': 'format',
    'confidence_communication': 'methodology',
    'query_decomposition': 'methodology',
    'research_depth': 'methodology',
    'solution_evaluation': 'methodology',
    'ambiguity_handling': 'methodology',
    'reporting_quality': 'output',
    'citation_quality': 'output',
    'source_selection': 'sources',
}

# Modes 7-15: judged against the agent's own prompt, which the rubric must restate.
PROMPT_DERIVED: set[type[FailureModeJudge]] = {
    AgentFormat,
    ConfidenceCommunication,
    QueryDecomposition,
    ResearchDepth,
    SolutionEvaluation,
    AmbiguityHandling,
    ReportingQuality,
    CitationQuality,
    SourceSelection,
}

# Issue models that assess the whole run: at most one issue, none when the method was followed.
ASSESSMENTS: set[type[FailureModeJudge]] = {
    QueryDecomposition,
    ResearchDepth,
    SolutionEvaluation,
    AmbiguityHandling,
    ReportingQuality,
    CitationQuality,
    SourceSelection,
    ConfidenceCommunication,
}

# The record's transcript: [1] system, [2] user, [3] tool_call, [4] tool_result, [5] assistant.
ANSWER = 'Hello! Great question. FastAPI dependencies are injected with `Depends()`; the FastAPI docs say it caches them.'

EXAMPLES: dict[type[FailureModeJudge], Issue] = {
    ToolSelection: ToolSelectionIssue(
        severity='major',
        steps=[3, 5],
        missed_tools=['scout_grep'],
        unnecessary_tools=[],
        reasoning='The query asks how dependencies work in code, but no code search was made.',
    ),
    ToolParameters: ToolParameterIssue(
        severity='major',
        steps=[3],
        tool_name='context7_get_docs',
        parameter='topic',
        actual_value='(missing)',
        suggested_value='dependencies',
        reasoning='Without a topic the docs call returned one generic line instead of the dependency guide.',
    ),
    SourceQuality: SourceQualityIssue(
        severity='major',
        steps=[3, 4],
        source_used='context7_get_docs /fastapi/fastapi (no topic)',
        better_source='the FastAPI tutorial page "Dependencies" (fastapi.tiangolo.com/tutorial/dependencies/)',
        why_better='It documents sub-dependencies and caching; the result used is a one-line summary.',
    ),
    SynthesisQuality: SynthesisIssue(
        severity='major',
        steps=[4, 5],
        claim_in_answer='the FastAPI docs say it caches them',
        tool_output_reality='[4] says only "Depends() declares a dependency."',
        discrepancy='The answer attributes caching behaviour to a result that does not describe it.',
    ),
    Completeness: CompletenessIssue(
        severity='major',
        steps=[2, 5],
        missed_aspects=['how sub-dependencies are resolved'],
        reasoning='The query asks how dependencies work; the answer names the function only.',
    ),
    Hallucination: HallucinationIssue(
        severity='minor',
        steps=[4, 5],
        hallucinated_claim='it caches them',
        what_tools_actually_said='nothing about caching',
    ),
    AgentFormat: AgentFormatIssue(
        severity='major',
        steps=[5],
        problem_type='greeting',
        example_text='Hello! Great question.',
        suggested_fix='Drop the greeting; open with the answer.',
    ),
    ConfidenceCommunication: ConfidenceIssue(
        severity='major',
        steps=[4, 5],
        claim='the FastAPI docs say it caches them',
        source_type='model_knowledge',
        stated_confidence='high',
        expected_confidence='low',
        reasoning='Presented as documented, but no tool result says it; it comes from memory.',
    ),
    QueryDecomposition: DecompositionIssue(
        severity='major',
        steps=[2, 3],
        query_complexity='compound',
        identified_parts=['Depends() basics'],
        missed_parts=['sub-dependencies', 'dependency caching per request'],
        cache_searched=False,
        subagents_used=False,
        should_have_used_subagents=False,
        reasoning='One docs call covered one part; the other parts were never searched.',
    ),
    ResearchDepth: ResearchDepthIssue(
        severity='major',
        steps=[3, 4, 5],
        query_phrasings_tried=1,
        sources_consulted=1,
        depth_of_investigation='shallow',
        missed_exploration=['"FastAPI sub-dependencies"', 'the "Dependencies" tutorial page'],
        premature_conclusion=True,
        reasoning='One generic lookup returned one line [4] and the agent answered at once [5].',
    ),
    SolutionEvaluation: SolutionEvaluationIssue(
        severity='major',
        steps=[5],
        approaches_considered=1,
        signals_evaluated=[],
        red_flags_present=['global singletons instead of Depends()'],
        red_flags_acknowledged=False,
        reasoning='Only one approach named, with no comparison to class-based dependencies.',
    ),
    AmbiguityHandling: AmbiguityIssue(
        severity='major',
        steps=[2, 5],
        query_ambiguity='slightly_ambiguous',
        assumptions_made=['path-operation dependencies, not router-level ones'],
        assumptions_stated=[],
        should_have_clarified=False,
        reasoning='The answer assumes one kind of dependency without saying so.',
    ),
    ReportingQuality: ReportingIssue(
        severity='major',
        steps=[5],
        result_type='found',
        search_explained=True,
        debugging_context=False,
        underlying_concepts=False,
        edge_cases_noted=True,
        reasoning='A bare recipe: no explanation of how injection resolves, nothing to check if it fails.',
    ),
    CitationQuality: CitationIssue(
        severity='major',
        steps=[5],
        uncited_claims=['Depends() caches dependencies'],
        citations_without_snippets=0,
        citations_with_snippets=0,
        vague_refs=['the FastAPI docs say'],
        citation_balance='under',
        reasoning='No <source> tag at all; the one reference is vague.',
    ),
    SourceSelection: SourceSelectionIssue(
        severity='major',
        steps=[3, 5],
        goal_type='explanation',
        sources_used=['context7 /fastapi/fastapi', 'training data'],
        trust_levels_used=['primary', 'model_knowledge'],
        better_sources_available=['the official "Dependencies" guide via a topic-specific docs lookup'],
        trust_hierarchy_violated=True,
        reasoning='The caching claim comes from memory though the official guide was one call away.',
    ),
}


@pytest.fixture
def record() -> Any:
    return openai_record(answer=ANSWER)


def _ids(cls: type[FailureModeJudge]) -> str:
    return cls.name


def _case_id(value: object) -> str | None:
    return value.name if isinstance(value, type) and issubclass(value, FailureModeJudge) else None


def _verdict(issue: Issue) -> dict[str, Any]:
    return {'reasoning': 'The answer at [5] goes beyond [4].', 'issues': [issue.model_dump(mode='json', exclude={'source'})]}


def test_fifteen_distinct_judges() -> None:
    assert len(JUDGES) == 15
    assert [j.name for j in JUDGES] == list(STANDARD_CATEGORIES)
    assert set(EXAMPLES) == set(JUDGES)


@pytest.mark.parametrize('cls', JUDGES, ids=_ids)
def test_identity_matches_the_table(cls: type[FailureModeJudge]) -> None:
    assert cls.failure_mode == cls.name
    assert cls.category == STANDARD_CATEGORIES[cls.name]
    mode = MODES[cls.name]
    assert mode.standard and (cls.category, cls.issue_model) == (mode.category, mode.issue_model)
    assert cls.question.endswith('?')


@pytest.mark.parametrize('cls', JUDGES, ids=_ids)
def test_exported_from_its_module(cls: type[FailureModeJudge]) -> None:
    modules = (tool_usage, output, sources, format_judges, methodology)
    owner = next(m for m in modules if getattr(m, cls.__name__, None) is cls)
    assert cls.__name__ in owner.__all__
    assert owner.__doc__ and cls.name in owner.__doc__


@pytest.mark.parametrize('cls', JUDGES, ids=_ids)
async def test_prompt_is_transcript_then_rubric(cls: type[FailureModeJudge], record: Any) -> None:
    transcript = render_transcript(record)
    scripted = ScriptedJudge(no_issues)
    judge = cls()
    await judge.judge(record, transcript, scripted.model())
    prompt = user_prompt(scripted.calls[0])
    rubric = cls.rubric.strip()
    assert prompt.startswith(transcript.fenced())
    assert prompt.startswith(FENCE_START)
    assert rubric in prompt and cls.question in prompt
    assert prompt.index(FENCE_END) < prompt.index(cls.question) < prompt.index(rubric)
    assert '[5] assistant: Hello! Great question.' in prompt
    assert prompt == judge.build_prompt(transcript)
    assert scripted.instructions == [JUDGE_SYSTEM_PROMPT]


@pytest.mark.parametrize('cls', JUDGES, ids=_ids)
async def test_one_issue_verdict_fails_the_mode(cls: type[FailureModeJudge], record: Any) -> None:
    issue = EXAMPLES[cls]
    assert type(issue) is cls.issue_model and issue.steps
    judge = cls()
    result = await judge.judge(record, render_transcript(record), ScriptedJudge(lambda p, n: _verdict(issue)).model())
    assert result.status == 'ok', result.error
    # the severity rule (`core.verdicts`): a minor finding lowers the score but does not fail the mode
    minor = getattr(issue, 'severity', None) == 'minor'
    assert result.passed is minor and result.score is not None and result.score < 1
    assert (result.judge, result.failure_mode, result.category) == (cls.name, cls.name, cls.category)
    assert result.criteria_hash == judge.criteria_hash()
    assert result.warnings == []
    assert len(result.issues) == 1
    back = cls.issue_model.model_validate(result.issues[0])
    assert back == issue and back.source == 'judge'
    weight = judge.issue_weight(back)
    assert 0 < weight <= 1
    assert result.score == pytest.approx(1.0 - weight)


@pytest.mark.parametrize('cls', JUDGES, ids=_ids)
async def test_empty_verdict_passes(cls: type[FailureModeJudge], record: Any) -> None:
    result = await cls().judge(record, render_transcript(record), ScriptedJudge(no_issues).model())
    assert result.status == 'ok'
    assert result.passed is True
    assert result.score == 1.0
    assert result.issues == []


def test_criteria_hashes_are_distinct() -> None:
    hashes = [cls().criteria_hash() for cls in JUDGES]
    assert len(set(hashes)) == 15


@pytest.mark.parametrize('cls', JUDGES, ids=_ids)
def test_rubric_explains_every_field(cls: type[FailureModeJudge]) -> None:
    # the fields the judge is asked for: those of the schema it answers in (a check-only field is not)
    # severity is explained once for every judge, in the system prompt (`SEVERITY_GUIDE`)
    for field in set(cls.issue_model.model_json_schema()['properties']) - {'steps', 'source', 'severity'}:
        assert f'`{field}`' in cls.rubric, f'{cls.name}: rubric does not mention `{field}`'


@pytest.mark.parametrize('cls', JUDGES, ids=_ids)
def test_rubric_explains_every_literal_value(cls: type[FailureModeJudge]) -> None:
    asked = cls.issue_model.model_json_schema()['properties']
    for field, info in cls.issue_model.model_fields.items():
        if field in ('source', 'severity') or field not in asked:
            continue
        for value in [*_literal_values(info.annotation), *cls.VOCABULARY.get(field, ())]:
            assert f'`{value}`' in cls.rubric, f'{cls.name}: rubric does not explain {field}={value!r}'


@pytest.mark.parametrize('cls', JUDGES, ids=_ids)
def test_rubric_says_what_is_not_a_problem(cls: type[FailureModeJudge]) -> None:
    assert re.search(r'not a(?: \w+)? problem|not a hallucination', _flat(cls.rubric), re.IGNORECASE)


@pytest.mark.parametrize('cls', [c for c in JUDGES if c in PROMPT_DERIVED], ids=_ids)
def test_prompt_derived_rubrics_hold_for_any_agent_and_the_docs_profile_restates_the_method(cls: type[FailureModeJudge]) -> None:
    # the rubric speaks of any agent; the documentation agent's prompt section comes with its profile
    assert 'The agent was told' not in cls.rubric
    assert BUILTIN_PROFILES['docs-agent'].conventions.get(cls.name), f'{cls.name}: no docs-agent conventions'


@pytest.mark.parametrize('cls', [c for c in JUDGES if c in ASSESSMENTS], ids=_ids)
def test_assessment_rubrics_ask_for_at_most_one_issue(cls: type[FailureModeJudge]) -> None:
    rubric = _flat(cls.rubric)
    assert 'Emit at most one issue' in rubric
    assert 'empty "issues" list' in rubric


# Weights: what one issue takes off its mode's score is its severity's cost, for every judge (material findings
# decide; a mode's own fields grade the finding, not its weight).
@pytest.mark.parametrize('cls', JUDGES, ids=_ids)
@pytest.mark.parametrize('severity', ['minor', 'major', 'critical'])
def test_issue_weight_is_the_severity_cost(cls: type[FailureModeJudge], severity: str) -> None:
    issue = EXAMPLES[cls].model_copy(update={'severity': severity})
    assert cls().issue_weight(issue) == pytest.approx(SEVERITY_COST[severity])


async def test_two_issues_add_up_and_floor_at_zero(record: Any) -> None:
    issue = EXAMPLES[SynthesisQuality]
    three = {'reasoning': 'r', 'issues': [issue.model_dump(mode='json')] * 3}
    result = await SynthesisQuality().judge(record, render_transcript(record), ScriptedJudge(lambda p, n: three).model())
    assert result.status == 'ok' and result.score == 0.0 and len(result.issues) == 3


def _literal_values(annotation: Any) -> list[str]:
    """The string values of a Literal annotation, also inside list[...]; none for other types."""
    if annotation is None or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return []
    if typing.get_origin(annotation) is typing.Literal:
        return [str(v) for v in typing.get_args(annotation)]
    return [v for arg in typing.get_args(annotation) for v in _literal_values(arg)]


def _flat(text: str) -> str:
    """The text with every run of whitespace (line breaks too) as one space."""
    return ' '.join(text.split())
