"""Judge names and groups: what `--evaluators` accepts, and what each judge needs.

A name is a judge's `name`; a group is a named list of judges. There is a group per failure-mode
category (`tool_usage`, `sources`, `output`, `format`, `methodology`, `instructions`, and any a
registered mode brings), plus `mvp` (the first three judges worth running), `checks` (deterministic, no
model), `investigation` (the TARSy scorer) and `all`. `EXTRA_MODES` names the judges of modes beyond
the fifteen standard ones, so `--list` can say so. Unknown names fail with the list of known ones, never
silently run less than asked. `make_judges(..., fuse=...)` answers groups of LLM judges with one model
call each (`sensei_eval.evaluators.fused`). Which checks run on a record is then up to its agent profile
(`sensei_eval.judging.profiles`).

The groups, `JUDGES`, `EXTRA_MODES` and `COMPONENTS` (failure mode → prompt components, as data the
optimizer reads) follow the failure-mode table (`sensei_eval.core.modes`), also when a mode is registered
at runtime; they are updated in place, so a module that imported them sees the change.
"""

from __future__ import annotations

from collections.abc import Iterable

from sensei_eval.core import modes
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.checks import CHECKS
from sensei_eval.evaluators.format import AgentFormat
from sensei_eval.evaluators.fused import FuseSpecError, fuse_judges
from sensei_eval.evaluators.instructions import InstructionFollowing
from sensei_eval.evaluators.investigation import InvestigationScorer, StructuredInvestigationScorer
from sensei_eval.evaluators.methodology import (
    AmbiguityHandling,
    ConfidenceCommunication,
    QueryDecomposition,
    ResearchDepth,
    SolutionEvaluation,
)
from sensei_eval.evaluators.output import CitationQuality, Completeness, Hallucination, ReportingQuality, SynthesisQuality
from sensei_eval.evaluators.reference import ReferenceCheck
from sensei_eval.evaluators.sources import SourceQuality, SourceSelection
from sensei_eval.evaluators.tool_usage import ToolParameters, ToolSelection

__all__ = (
    'COMPONENTS',
    'EXTRA_MODES',
    'GROUPS',
    'JUDGES',
    'FuseSpecError',
    'UnknownJudgeError',
    'make_judges',
    'resolve_names',
)

# The LLM judge of each of the library's failure modes (in any order: the table orders them).
_MODE_JUDGES: tuple[type[Judge], ...] = (
    ToolSelection, ToolParameters, SourceQuality, SynthesisQuality, Completeness, Hallucination, AgentFormat,
    ConfidenceCommunication, QueryDecomposition, ResearchDepth, SolutionEvaluation, AmbiguityHandling,
    ReportingQuality, CitationQuality, SourceSelection, InstructionFollowing,
)  # fmt: skip
_CHECKS: tuple[type[Judge], ...] = (*CHECKS, ReferenceCheck)
_MVP = ('tool_selection', 'hallucination', 'completeness')

JUDGES: dict[str, type[Judge]] = {}
GROUPS: dict[str, tuple[str, ...]] = {}
COMPONENTS: dict[str, tuple[str, ...]] = {}
EXTRA_MODES: set[str] = set()


def _derive_from_modes() -> None:
    by_mode: dict[str | None, type[Judge]] = {cls.failure_mode: cls for cls in _MODE_JUDGES}
    by_mode.update(modes.registered_judges())
    if missing := [m for m in modes.MODES if m not in by_mode]:
        raise ValueError(f'failure modes without a judge: {", ".join(missing)}')
    mode_judges = [by_mode[m] for m in modes.MODES]
    every: tuple[type[Judge], ...] = (*mode_judges, *_CHECKS, InvestigationScorer, StructuredInvestigationScorer)
    if len({cls.name for cls in every}) != len(every):
        raise ValueError('two judges share a name: ' + ', '.join(cls.name for cls in every))
    JUDGES.clear()
    JUDGES.update({cls.name: cls for cls in every})
    GROUPS.clear()
    GROUPS.update(
        {
            'mvp': _MVP,
            **{c: tuple(cls.name for cls in mode_judges if cls.category == c) for c in modes.categories()},
            'checks': tuple(cls.name for cls in _CHECKS),
            'investigation': (InvestigationScorer.name,),
            'all': tuple(cls.name for cls in every if cls is not StructuredInvestigationScorer),
        }
    )
    COMPONENTS.clear()
    COMPONENTS.update({m.name: m.components for m in modes.MODES.values() if m.components})
    EXTRA_MODES.clear()
    EXTRA_MODES.update(by_mode[m.name].name for m in modes.MODES.values() if not m.standard)


modes.on_change(_derive_from_modes)


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


def make_judges(spec: Iterable[str], *, fuse: Iterable[str] | None = None) -> list[Judge]:
    """The judges `spec` names, in order; with `fuse`, the LLM judges of each fuse group answered by one
    model call (`evaluators.fused.fuse_judges`; `FuseSpecError` on a bad group)."""
    judges = [JUDGES[name]() for name in resolve_names(spec)]
    return fuse_judges(judges, fuse) if fuse else judges
