"""Judge names and groups: what `--evaluators` accepts, and what each judge needs.

A name is a judge's `name`; a group is a named list of judges. Groups follow seed 004's categories
(`tool_usage`, `sources`, `output`, `format`, `methodology`), plus `mvp` (the seed's first three),
`checks` (deterministic, no model), `instructions` (`instruction_following`, which is not one of the
seed's fifteen failure modes: `EXTRA_MODES` names it so `--list` can say so), `investigation` (the
TARSy scorer) and `all`. Unknown names fail with the list of known ones, never silently run less than
asked. Which checks run on a record is then up to its agent profile (`sensei_eval.profiles`).

`COMPONENTS` is seed 004's evaluator → prompt-component mapping, as data the optimizer reads; modes
the seed's table leaves out take the prompt section their own definition names.
"""

from __future__ import annotations

from collections.abc import Iterable

from .base import Judge
from .checks import CHECKS
from .format import AgentFormat
from .instructions import InstructionFollowing
from .investigation import InvestigationScorer, StructuredInvestigationScorer
from .methodology import AmbiguityHandling, ConfidenceCommunication, QueryDecomposition, ResearchDepth, SolutionEvaluation
from .output import CitationQuality, Completeness, Hallucination, ReportingQuality, SynthesisQuality
from .reference import ReferenceCheck
from .sources import SourceQuality, SourceSelection
from .tool_usage import ToolParameters, ToolSelection

__all__ = ('COMPONENTS', 'EXTRA_MODES', 'GROUPS', 'JUDGES', 'UnknownJudgeError', 'make_judges', 'resolve_names')

_FAILURE_MODE_JUDGES: tuple[type[Judge], ...] = (
    ToolSelection, ToolParameters, SourceQuality, SynthesisQuality, Completeness, Hallucination, AgentFormat,
    ConfidenceCommunication, QueryDecomposition, ResearchDepth, SolutionEvaluation, AmbiguityHandling,
    ReportingQuality, CitationQuality, SourceSelection,
)  # fmt: skip
_CHECKS: tuple[type[Judge], ...] = (*CHECKS, ReferenceCheck)
# Judges of failure modes beyond the seed's fifteen.
_EXTRA_JUDGES: tuple[type[Judge], ...] = (InstructionFollowing,)
EXTRA_MODES = frozenset(cls.name for cls in _EXTRA_JUDGES)
_INVESTIGATION: type[Judge] = InvestigationScorer

_ALL: tuple[type[Judge], ...] = (
    *_FAILURE_MODE_JUDGES, *_EXTRA_JUDGES, *_CHECKS, InvestigationScorer, StructuredInvestigationScorer,
)  # fmt: skip
JUDGES: dict[str, type[Judge]] = {cls.name: cls for cls in _ALL}


def _category(name: str) -> tuple[str, ...]:
    return tuple(cls.name for cls in _FAILURE_MODE_JUDGES if cls.category == name)


GROUPS: dict[str, tuple[str, ...]] = {
    'mvp': ('tool_selection', 'hallucination', 'completeness'),
    'tool_usage': _category('tool_usage'),
    'sources': _category('sources'),
    'output': _category('output'),
    'format': _category('format'),
    'methodology': _category('methodology'),
    'checks': tuple(cls.name for cls in _CHECKS),
    'instructions': tuple(cls.name for cls in _EXTRA_JUDGES),
    'investigation': ('investigation_score',),
    'all': tuple(cls.name for cls in (*_FAILURE_MODE_JUDGES, *_EXTRA_JUDGES, *_CHECKS, _INVESTIGATION)),
}

COMPONENTS: dict[str, tuple[str, ...]] = {
    'tool_selection': ('CHOOSING_SOURCES', 'AVAILABLE_TOOLS'),
    'hallucination': ('CONFIDENCE_LEVELS', 'CITATIONS'),
    'completeness': ('QUERY_DECOMPOSITION', 'REPORTING_RESULTS'),
    'confidence_communication': ('CONFIDENCE_LEVELS',),
    'research_depth': ('RESEARCH_METHODOLOGY',),
    'solution_evaluation': ('ENGINEERING_JUDGMENT',),
    'ambiguity_handling': ('HANDLING_AMBIGUITY',),
    'citation_quality': ('CITATIONS',),
    'source_selection': ('CHOOSING_SOURCES',),
    # not in the seed's table; each takes the "Prompt section" its failure-mode definition names
    'agent_format': ('IDENTITY',),
    'query_decomposition': ('QUERY_DECOMPOSITION',),
    'reporting_quality': ('REPORTING_RESULTS',),
    # in neither the table nor a "Prompt section" line: the sections that tell the agent how to call
    # tools and which sources to trust are where a fix for these goes
    'tool_parameters': ('AVAILABLE_TOOLS',),
    'source_quality': ('CHOOSING_SOURCES',),
}


class UnknownJudgeError(ValueError):
    pass


def resolve_names(spec: Iterable[str]) -> list[str]:
    """Expand names and groups (comma-separated allowed) into judge names, in order, without repeats."""
    names: list[str] = []
    for item in spec:
        for token in (t.strip() for t in item.split(',')):
            if not token:
                continue
            expanded = GROUPS.get(token, (token,))
            for name in expanded:
                if name not in JUDGES:
                    known = ', '.join([*GROUPS, *JUDGES])
                    raise UnknownJudgeError(f'unknown judge or group {token!r}; known: {known}')
                if name not in names:
                    names.append(name)
    return names


def make_judges(spec: Iterable[str]) -> list[Judge]:
    return [JUDGES[name]() for name in resolve_names(spec)]
