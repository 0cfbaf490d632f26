"""Tool-usage judges: did the agent reach for the right tools, and call them with the right arguments?

The standard `tool_selection` and `tool_parameters`, in words that hold for any tool-using agent: the tools it
had (the record's `tools`, shown in the transcript) are what it could have done, its instructions say what it
must check or may change, and the user's words and earlier tool results say what each argument should be. An
agent's own conventions (a documentation agent's lookups, an SRE agent's kubectl scopes) are added by its
profile (`judging.profiles`). Each finding costs its severity's share of the mode's score
(`core.verdicts.SEVERITY_COST`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.evaluators.base import FailureModeJudge, register_judge

__all__ = ('ToolParameters', 'ToolSelection')


@register_judge
@dataclass(repr=False)
class ToolSelection(FailureModeJudge):
    """Right tools for the request: nothing needed left uncalled, nothing pointless or unasked-for called."""

    name: ClassVar[str] = 'tool_selection'
    failure_mode: ClassVar[str | None] = 'tool_selection'
    question: ClassVar[str] = 'Did the agent use the right tools for what the user asked?'
    rubric: ClassVar[str] = """
Go through the points where the agent needed a fact or had to act, and set what it did beside the tools
it had. What counts as a tool-selection problem:
- A fact the agent needed, which one of its tools provides, was never fetched: the agent guessed it,
  relied on the user's word where its instructions say to look it up, asked the user for what it could
  have looked up, or told the user it could not find out.
- An action the request needed and the instructions allow was attempted with a tool meant for something
  else, or handed off (to a person, another agent, the user) although one of its own tools does it.
- A tool that changes something (creates, updates, cancels, sends, pays, deletes) called when neither the
  request nor the situation called for it.
- A call that could not help with the request (a wasted call), or the same lookup repeated with nothing
  changed in between.

Severity: an unrequested or needless state-changing call is critical; a lookup skipped that the user's
own request called for (they asked for the cheapest, the fastest, all of something), so that what they
were given rests on facts never fetched, or an action handed off that the agent could do itself, is
major; a wasted or repeated read is minor.

Not this judge's problem: wrong values in a call (tool_parameters), breaking a rule the instructions
state (instruction_following), what the agent told the user (hallucination), parts of the request left
unanswered (completeness). Not a problem at all: a cheaper tool that fully did the job; skipping a call
whose result the run already had; a lookup that came back empty when trying it was reasonable; a fact
nothing in the run gave reason to doubt, left unchecked.

For each problem give `missed_tools` (tools that should have been called, by their names in the tool
list or the transcript), `unnecessary_tools` (tools called for no benefit, or without being called for)
and a short `reasoning`. One issue per distinct problem."""


@register_judge
@dataclass(repr=False)
class ToolParameters(FailureModeJudge):
    """The right arguments in each call: the values the user gave and earlier results showed."""

    name: ClassVar[str] = 'tool_parameters'
    failure_mode: ClassVar[str | None] = 'tool_parameters'
    question: ClassVar[str] = 'Were the tools called with the correct arguments?'
    rubric: ClassVar[str] = """
Read the arguments of every tool_call step against what the user said, what earlier tool results showed
and what each tool's parameters ask for. What counts as a tool-parameter problem:
- A value that contradicts the user or an earlier result: another id, name, item, amount, date, quantity
  or option than the one asked for or found; a value mixed up between two entities in the run.
- A value the agent made up or assumed where the user or a tool result should have supplied it (an
  invented id, a guessed date, a default picked for the user without asking when the choice mattered).
- A constraint the user stated (a limit, a preference, a scope) left out of a call that could take it,
  so the call did something other than what was asked.
- A search or filter too broad to find the answer or too narrow to match anything, when a better one was
  plain from the request.
- Arguments that break the call (the wrong type or format, a required one missing, one the tool does
  not take), seen as an error in the tool_result, above all the same bad call repeated.

Severity: a wrong or invented value in a call that changes something (books, cancels, pays, updates,
sends) is critical; in a read whose result the user was then told, or that steered the run wrong, major;
a bad call the agent put right on its next attempt, or a clumsy search that still found what was
needed, minor.

Not this judge's problem: calling the wrong tool or none (tool_selection), breaking a rule the
instructions state (instruction_following). Not a problem at all: a value phrased differently that
still did what was needed; an optional argument left at a default that suits the request.

For each problem give `tool_name` (as the transcript names it), `parameter` (the argument's name;
`query` for a free-text search), `actual_value` (what was passed, quoted; `(missing)` when left out),
`suggested_value` (what should have been passed, concretely, from the step that shows it) and a short
`reasoning`. One issue per wrong argument; the same mistake repeated over several calls is one issue
citing all of them."""
