"""The failure-mode table: the one place a failure mode is spelled out.

Each entry gives a mode's name, its category, its issue model, the `RecordReport` field that holds
its issues, the prompt components a fix for it goes into, and whether it is one of the fifteen standard
failure modes. Everything else that lists modes reads this table: `reports.FAILURE_MODES` and
`reports.CATEGORIES`, the report's per-mode issue fields, the judge groups and `COMPONENTS` of
`evaluators.registry`, and a judge's `category` (a judge declares only its `failure_mode`). Adding a
mode is one entry here, or one `register_mode` call from outside the library.

Why the modules that derive from the table subscribe to it (`on_change`) instead of this module
building their objects: this module sits below everything (it imports only the issue models), so the
report, the judges and the registry can all import it without a cycle; they re-derive their views when
the table changes, which is what lets a mode registered at runtime get a report field, a judge and a
group without being registered before anything is imported.

Why the report's issue fields are added to `RecordReport` in place rather than written out or
inherited from a generated base class: a mode registered after `sensei_eval.core.reports` is imported must
still get its field, and code holding `RecordReport` (every `from .reports import ...`) must see
it, so the class is kept and its fields are rebuilt. The fields sit where they always were in the
JSON (after the record, before the scores), under the names saved reports use. The type checker cannot
see fields made from data, so library code reads them with `report.issues_of(mode)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from sensei_eval.core.issues import (
    AgentFormatIssue,
    AmbiguityIssue,
    CitationIssue,
    CompletenessIssue,
    ConfidenceIssue,
    DecompositionIssue,
    HallucinationIssue,
    InstructionIssue,
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


class JudgeClass(Protocol):
    """What the table needs of a judge class (the judges live above this module: `evaluators`)."""

    name: str
    failure_mode: str | None

__all__ = (
    'MODES',
    'FailureMode',
    'ModeCategory',
    'categories',
    'category_of',
    'on_change',
    'register_mode',
    'registered_judges',
    'unregister_mode',
)


@dataclass(frozen=True)
class FailureMode:
    """One failure mode: what judges it report, where its issues go, what prompt section it points at."""

    name: str
    category: str
    issue_model: type[Issue]
    # The `RecordReport` field holding its issues (not always `<name>_issues`: saved reports fix them).
    field: str
    # Prompt components a fix for this mode goes into (the optimizer's evaluator → component mapping).
    components: tuple[str, ...] = ()
    # One of the fifteen standard failure modes, which ask what a good run of any agent does.
    standard: bool = False


# The standard modes in their standard order, which breaks ties between equally bad modes. The components
# are the sections of the documentation-research agent's prompt (examples/docs_agent/prompts.py): the
# section a mode's definition names, else the one that tells the agent how to call tools or which sources
# to trust; synthesis_quality points at none.
_STANDARD: tuple[FailureMode, ...] = (
    FailureMode('tool_selection', 'tool_usage', ToolSelectionIssue, 'tool_selection_issues',
                ('CHOOSING_SOURCES', 'AVAILABLE_TOOLS')),
    FailureMode('tool_parameters', 'tool_usage', ToolParameterIssue, 'tool_parameter_issues', ('AVAILABLE_TOOLS',)),
    FailureMode('source_quality', 'sources', SourceQualityIssue, 'source_quality_issues', ('CHOOSING_SOURCES',)),
    FailureMode('synthesis_quality', 'output', SynthesisIssue, 'synthesis_issues'),
    FailureMode('completeness', 'output', CompletenessIssue, 'completeness_issues',
                ('QUERY_DECOMPOSITION', 'REPORTING_RESULTS')),
    FailureMode('hallucination', 'output', HallucinationIssue, 'hallucination_issues',
                ('CONFIDENCE_LEVELS', 'CITATIONS')),
    FailureMode('agent_format', 'format', AgentFormatIssue, 'agent_format_issues', ('IDENTITY',)),
    FailureMode('confidence_communication', 'methodology', ConfidenceIssue, 'confidence_issues',
                ('CONFIDENCE_LEVELS',)),
    FailureMode('query_decomposition', 'methodology', DecompositionIssue, 'decomposition_issues',
                ('QUERY_DECOMPOSITION',)),
    FailureMode('research_depth', 'methodology', ResearchDepthIssue, 'research_depth_issues',
                ('RESEARCH_METHODOLOGY',)),
    FailureMode('solution_evaluation', 'methodology', SolutionEvaluationIssue, 'solution_evaluation_issues',
                ('ENGINEERING_JUDGMENT',)),
    FailureMode('ambiguity_handling', 'methodology', AmbiguityIssue, 'ambiguity_issues', ('HANDLING_AMBIGUITY',)),
    FailureMode('reporting_quality', 'output', ReportingIssue, 'reporting_issues', ('REPORTING_RESULTS',)),
    FailureMode('citation_quality', 'output', CitationIssue, 'citation_issues', ('CITATIONS',)),
    FailureMode('source_selection', 'sources', SourceSelectionIssue, 'source_selection_issues',
                ('CHOOSING_SOURCES',)),
)  # fmt: skip

MODES: dict[str, FailureMode] = {
    m.name: m
    for m in (
        *(replace(m, standard=True) for m in _STANDARD),
        # Did the run keep the rules its own instructions state? Asked of one agent, not of every agent.
        FailureMode('instruction_following', 'instructions', InstructionIssue, 'instruction_issues'),
    )
}

# Judges of modes registered at runtime; the library's own judges are listed in `evaluators.registry`.
_judges: dict[str, type[JudgeClass]] = {}
_listeners: list[Callable[[], None]] = []


def categories() -> tuple[str, ...]:
    """The categories, in the order their first mode appears."""
    return tuple(dict.fromkeys(m.category for m in MODES.values()))


def category_of(mode: str | None) -> str | None:
    return MODES[mode].category if mode in MODES else None


class ModeCategory:
    """A judge's `category`, read from the table through its `failure_mode` (None for a judge of no mode)."""

    def __get__(self, obj: object, owner: Any = None) -> str | None:
        return category_of(getattr(owner if owner is not None else type(obj), 'failure_mode', None))


def on_change(derive: Callable[[], None]) -> None:
    """Call `derive` now and whenever the table changes (how the report and the registry keep in step)."""
    _listeners.append(derive)
    derive()


def registered_judges() -> dict[str, type[JudgeClass]]:
    """The judges of modes added with `register_mode`, by mode."""
    return dict(_judges)


def register_mode(mode: FailureMode, judge: type[JudgeClass]) -> None:
    """Add a failure mode judged by `judge`: it gets a report field, a judge name and a category group.

    `judge.failure_mode` must be `mode.name`. Pydantic models that embed `RecordReport` and were
    defined before the call keep validating it without the new field.
    """
    if mode.name in MODES:
        raise ValueError(f'failure mode {mode.name!r} already exists')
    if any(m.field == mode.field for m in MODES.values()):
        raise ValueError(f'report field {mode.field!r} already holds another mode')
    if judge.failure_mode != mode.name:
        raise ValueError(f'judge {judge.name!r} declares failure_mode {judge.failure_mode!r}, not {mode.name!r}')
    MODES[mode.name] = mode
    _judges[mode.name] = judge
    try:
        _changed()
    except Exception:  # e.g. the judge's name is taken: leave the table as it was
        del MODES[mode.name], _judges[mode.name]
        _changed()
        raise


def unregister_mode(name: str) -> None:
    """Remove a mode added with `register_mode` (the library's own modes stay)."""
    if name not in _judges:
        raise ValueError(f'{name!r} is not a mode added with register_mode')
    del MODES[name], _judges[name]
    _changed()


def _changed() -> None:
    for derive in _listeners:
        derive()
