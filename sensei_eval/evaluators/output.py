"""Output judges: is the answer true to the tool results, and does it answer the whole question?

Seed 004's `hallucination` and `completeness` (and, with the other families, synthesis, reporting
and citations). A hallucination weighs by severity: a minor one costs a quarter of the mode's score,
a critical one all of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..issues import CompletenessIssue, HallucinationIssue, Issue
from .base import FailureModeJudge

__all__ = ('Completeness', 'Hallucination')

# Score taken off per hallucination, by its severity.
_SEVERITY_WEIGHT = {'minor': 0.25, 'major': 0.5, 'critical': 1.0}


@dataclass(repr=False)
class Hallucination(FailureModeJudge):
    """Claims in the answer that no tool result supports."""

    name: ClassVar[str] = 'hallucination'
    failure_mode: ClassVar[str | None] = 'hallucination'
    category: ClassVar[str | None] = 'output'
    issue_model: ClassVar[type[Issue]] = HallucinationIssue
    question: ClassVar[str] = 'Did the agent claim things that its tool results do not support?'
    rubric: ClassVar[str] = """
Check each concrete claim in the final answer against the tool results in the transcript:
- Functions, methods, classes, parameters, flags or configuration options named in the answer that no
  tool result mentions (invented APIs).
- Features attributed to a version, or version numbers, that the tool results do not state.
- Behaviour, defaults or limits described differently from what the tool results say.
- For an investigation: causes, classifications or confidence asserted with no supporting observation.

General knowledge that needs no source (what HTTP is, Python syntax) is not a hallucination. A claim the
agent clearly marks as unverified or as its own assumption is not a hallucination either.

For each unsupported claim give `hallucinated_claim` (quote it), `what_tools_actually_said` (what the
results say on that point, or that they say nothing) and `severity`: `minor` (a side detail a reader
would not act on), `major` (a reader acting on it would hit an error or wrong behaviour), `critical`
(the core of the answer is invented)."""

    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, HallucinationIssue)
        return _SEVERITY_WEIGHT[issue.severity]


@dataclass(repr=False)
class Completeness(FailureModeJudge):
    """Every part of the query answered."""

    name: ClassVar[str] = 'completeness'
    failure_mode: ClassVar[str | None] = 'completeness'
    category: ClassVar[str | None] = 'output'
    issue_model: ClassVar[type[Issue]] = CompletenessIssue
    question: ClassVar[str] = 'Did the final answer address every part of the query?'
    rubric: ClassVar[str] = """
Split the query into the things it asks (questions, sub-questions, constraints such as a version,
language or environment) and check that the final answer addresses each one:
- A multi-part question where one part gets no answer, or only a vague mention.
- A constraint in the query (a version, a platform, "without X") that the answer ignores.
- Context from earlier turns that the answer should have taken into account but did not.
- Edge cases or caveats the query explicitly asked about that are left out.

An honest "I could not find this, here is what I searched" counts as addressing a part. Extra material
beyond the query is not a completeness problem.

For each gap give `missed_aspects` (the parts of the query left unanswered) and `reasoning`."""
