"""Format judge: is what the agent sends written for whoever reads it?

The `agent_format` failure mode, in words that hold for any agent: the form its instructions ask for, or
failing that the form its reader needs (a person in a chat, a program parsing the output, another agent).
What a particular agent's reader expects (a documentation agent's answers read by other agents, with no chat;
an SRE report's sections) is added by its profile (`judging.profiles`). One issue per distinct problem,
each costing its severity's share of the mode's score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.evaluators.base import FailureModeJudge, register_judge

__all__ = ('AgentFormat',)


@register_judge
@dataclass(repr=False)
class AgentFormat(FailureModeJudge):
    """Output in the form its instructions ask for and its reader needs."""

    name: ClassVar[str] = 'agent_format'
    failure_mode: ClassVar[str | None] = 'agent_format'
    question: ClassVar[str] = "Is the agent's output in the form its instructions ask for and its reader needs?"
    rubric: ClassVar[str] = """
First settle who reads the agent's messages and what form they need: what the instructions say about
format, length, tone and structure, and otherwise what the reader evidently is (a person in a
conversation, a program or another agent consuming the output). Then check the agent's messages to that
reader against it. What counts as a format problem:
- A format rule of the instructions broken: a required structure, section, notice, language, length or
  markup left out or done otherwise.
- Greetings, pleasantries or sign-offs where the instructions or the reader rule them out.
- Filler that carries no information: narrating its own thinking, restating the request, padding,
  needless apologies.
- Content that needs structure (steps, options, several values to compare) given as one wall of text,
  where the reader can take structure.
- Values a reader must copy exactly (codes, commands, ids, paths) not set apart, or several options run
  together into one sentence.

Severity: output a program or agent then could not parse or use, or a required notice left out, is major;
everything else here (tone, filler, structure a person can still follow) is minor.

Not a problem: a short plain reply to a simple question; friendly wording in a conversation with a person
when nothing rules it out; the agent's notes between tool calls when the reader never sees them.

For each problem give `problem_type`: `greeting` (a salutation, pleasantry or sign-off), `filler` (words
that carry no information), `unstructured` (content that needs structure but comes as running prose) or
`missing_formatting` (a required or needed format, markup or notice missing); `example_text` (the
offending text, quoted, shortened if long) and `suggested_fix` (what to write instead, concretely). One
issue per distinct problem; several greetings, or several fillers, count as one issue of their type."""
