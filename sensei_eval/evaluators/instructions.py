"""The instruction-following judge: did the run keep the rules its own instructions state?

Not one of the fifteen standard failure modes, which ask what a good run of *any* agent does. This one
holds the run to the agent's own instructions (its system prompt, shown in full as a transcript step),
so it catches what only the agent's owner wrote down: a customer-service policy ("confirm with the user
before any booking change"), an output contract, a tool the agent must not call. Its group is
`instructions`, its category `instructions`. A run with no system prompt has nothing to hold it to,
so the judge is skipped there rather than asked to guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pydantic_ai.messages import ModelRequest, SystemPromptPart

from sensei_eval.core.issues import Issue
from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators.base import FailureModeJudge

__all__ = ('InstructionFollowing',)

# Weight of one broken rule by severity, as hallucinations weigh.
_SEVERITY_WEIGHT = {'minor': 0.25, 'major': 0.5, 'critical': 1.0}


@dataclass(repr=False)
class InstructionFollowing(FailureModeJudge):
    """Rules stated in the agent's instructions, kept or broken."""

    name: ClassVar[str] = 'instruction_following'
    failure_mode: ClassVar[str | None] = 'instruction_following'
    question: ClassVar[str] = 'Did the agent break a rule that its own instructions (the system step) state?'
    rubric: ClassVar[str] = """
Read the system step(s): they are the agent's instructions. List the concrete rules they state (must,
must not, always, never, only, before/after, limits, required confirmations, the output format). Then
walk the run's steps and check each rule where it applies.

What counts as a broken rule:
- The agent did what a rule forbids, or skipped what a rule requires at that point (e.g. it changed
  something without the confirmation the instructions demand, called a tool it was told not to use,
  promised what the instructions say it cannot, or answered outside the scope it was given).
- The final answer ignores an output rule (format, language, length, what it must contain).
- The agent followed a user's or tool's request that the instructions tell it to refuse.

What is not a problem: a rule that did not apply in this run; a choice the instructions leave open; a
rule the agent kept in substance with different wording; behaviour you find odd but that no rule covers
(other judges look at general quality).

For each broken rule give `rule` (quoted from the system step, or closely paraphrased), `violation`
(what the agent did, citing the step), `severity` (`minor`: form or wording; `major`: the user got a
worse or wrong result; `critical`: an irreversible or forbidden action was taken, or the user was
misled about it) and a short `reasoning`. Cite in `steps` the system step with the rule and the step(s)
where it was broken. One issue per broken rule."""

    def applies_to(self, record: QueryRecord) -> str | None:
        has_instructions = any(
            isinstance(m, ModelRequest) and (m.instructions or any(isinstance(p, SystemPromptPart) for p in m.parts))
            for m in record.model_messages
        )
        return None if has_instructions else 'the record has no system prompt or instructions to hold the run to'

    def issue_weight(self, issue: Issue) -> float:
        severity = getattr(issue, 'severity', 'major')
        return _SEVERITY_WEIGHT.get(severity, 0.5)
