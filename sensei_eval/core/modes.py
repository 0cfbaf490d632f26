"""The failure-mode table: the one place a failure mode is spelled out.

Each entry gives a mode's name, its category, its issue model, the prompt components a fix for it goes
into, and whether it is one of the fifteen standard failure modes. Everything else that lists modes reads
this table: the keys of `RecordReport.issues` and the model each mode's issues are read as, a judge's
`category` and `issue_model` (a judge declares only its `failure_mode`), and the judge groups and
`COMPONENTS` of `evaluators.registry`. Adding a mode is one entry here, or one `register_mode` call from
outside the library.

Why the registry subscribes to the table (`on_change`) instead of this module building its objects:
this module sits below everything (it imports only the issue models), so the report, the judges and the
registry can all import it without a cycle; the registry re-derives its groups when the table changes,
which is what lets a mode registered at runtime get a judge and a group without being registered before
anything is imported. The report needs no such step: it reads the table each time it validates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from sensei_eval.core.errors import ConfigError
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
    'ModeIssueModel',
    'categories',
    'category_of',
    'on_change',
    'register_mode',
    'registered_judges',
    'unregister_mode',
)


@dataclass(frozen=True)
class FailureMode:
    """One failure mode: what judges it report, what its issues look like, what prompt section it points at."""

    # Also its key in a report's `issues`.
    name: str
    category: str
    issue_model: type[Issue]
    # Prompt components a fix for this mode goes into (the optimizer's evaluator → component mapping).
    components: tuple[str, ...] = ()
    # One of the fifteen standard failure modes, which ask what a good run of any agent does.
    standard: bool = False


# The standard modes in their standard order, which breaks ties between equally bad modes. The components
# are the sections of the documentation-research agent's prompt (examples/docs_agent/prompts.py): the
# section a mode's definition names, else the one that tells the agent how to call tools or which sources
# to trust; synthesis_quality points at none.
_STANDARD: tuple[FailureMode, ...] = (
    FailureMode('tool_selection', 'tool_usage', ToolSelectionIssue, ('CHOOSING_SOURCES', 'AVAILABLE_TOOLS')),
    FailureMode('tool_parameters', 'tool_usage', ToolParameterIssue, ('AVAILABLE_TOOLS',)),
    FailureMode('source_quality', 'sources', SourceQualityIssue, ('CHOOSING_SOURCES',)),
    FailureMode('synthesis_quality', 'output', SynthesisIssue),
    FailureMode('completeness', 'output', CompletenessIssue, ('QUERY_DECOMPOSITION', 'REPORTING_RESULTS')),
    FailureMode('hallucination', 'output', HallucinationIssue, ('CONFIDENCE_LEVELS', 'CITATIONS')),
    FailureMode('agent_format', 'format', AgentFormatIssue, ('IDENTITY',)),
    FailureMode('confidence_communication', 'methodology', ConfidenceIssue, ('CONFIDENCE_LEVELS',)),
    FailureMode('query_decomposition', 'methodology', DecompositionIssue, ('QUERY_DECOMPOSITION',)),
    FailureMode('research_depth', 'methodology', ResearchDepthIssue, ('RESEARCH_METHODOLOGY',)),
    FailureMode('solution_evaluation', 'methodology', SolutionEvaluationIssue, ('ENGINEERING_JUDGMENT',)),
    FailureMode('ambiguity_handling', 'methodology', AmbiguityIssue, ('HANDLING_AMBIGUITY',)),
    FailureMode('reporting_quality', 'output', ReportingIssue, ('REPORTING_RESULTS',)),
    FailureMode('citation_quality', 'output', CitationIssue, ('CITATIONS',)),
    FailureMode('source_selection', 'sources', SourceSelectionIssue, ('CHOOSING_SOURCES',)),
)

MODES: dict[str, FailureMode] = {
    m.name: m
    for m in (
        *(replace(m, standard=True) for m in _STANDARD),
        # Did the run keep the rules its own instructions state? Asked of one agent, not of every agent.
        FailureMode('instruction_following', 'instructions', InstructionIssue),
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


class ModeIssueModel:
    """A judge's `issue_model`, read from the table through its `failure_mode` (`Issue` for a judge of no mode)."""

    def __get__(self, obj: object, owner: Any = None) -> type[Issue]:
        mode = getattr(owner if owner is not None else type(obj), 'failure_mode', None)
        return MODES[mode].issue_model if mode in MODES else Issue


def on_change(derive: Callable[[], None]) -> None:
    """Call `derive` now and whenever the table changes (how the registry keeps in step)."""
    _listeners.append(derive)
    derive()


def registered_judges() -> dict[str, type[JudgeClass]]:
    """The judges of modes added with `register_mode`, by mode."""
    return dict(_judges)


def register_mode(mode: FailureMode, judge: type[JudgeClass]) -> None:
    """Add a failure mode judged by `judge`: it gets a key in reports' `issues`, a judge name and a category group.

    `judge.failure_mode` must be `mode.name`; the judge's issue model and category are the mode's.
    """
    if mode.name in MODES:
        raise ConfigError(f'failure mode {mode.name!r} already exists')
    if judge.failure_mode != mode.name:
        raise ConfigError(f'judge {judge.name!r} declares failure_mode {judge.failure_mode!r}, not {mode.name!r}')
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
        raise ConfigError(f'{name!r} is not a mode added with register_mode')
    del MODES[name], _judges[name]
    _changed()


def _changed() -> None:
    for derive in _listeners:
        derive()
