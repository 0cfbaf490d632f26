"""Format judge: is the final answer written for the agent that reads it?

The `agent_format` failure mode, checked against the agent's IDENTITY instructions (restated in the rubric,
since the judge never sees the agent's system prompt): the reader is another AI agent, so the answer
is structured, parseable and free of chat. Only the final answer is judged; the agent's messages between
tool calls are working notes. For an SRE investigation the same reading applies to the report an
on-call engineer or an automation receives.

One issue per distinct problem. Greetings and filler only waste the reader's tokens, so each costs a
quarter of the score; an unstructured or unformatted answer costs the reader real work to parse, half.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.core.issues import AgentFormatIssue, Issue
from sensei_eval.evaluators.base import FailureModeJudge

__all__ = ('AgentFormat',)

# Score taken off per format problem, by its type.
_PROBLEM_WEIGHT = {'greeting': 0.25, 'filler': 0.25, 'unstructured': 0.5, 'missing_formatting': 0.5}


@dataclass(repr=False)
class AgentFormat(FailureModeJudge):
    """An answer for an agent: structured, formatted, no greetings or filler."""

    name: ClassVar[str] = 'agent_format'
    failure_mode: ClassVar[str | None] = 'agent_format'
    question: ClassVar[str] = 'Is the final answer formatted for consumption by another agent?'
    rubric: ClassVar[str] = """
The agent was told who reads its answers (its IDENTITY instructions, paraphrased): other AI agents, such
as coding agents calling it as a tool, not people. Its answer should be structured and easy to parse
rather than conversational, carry exact references and snippets to dig further, include code examples
where they help, and contain nothing but the information: no pleasantries, greetings or filler.

What counts as a format problem (judge the final answer):
- Greetings and pleasantries: "Hello!", "Great question!", "I'd be happy to help", sign-offs such as
  "Hope this helps!" or "Let me know if you need anything else".
- Filler that carries no information: narrating its own thinking ("Let me think about this..."),
  restating the question, padding, apologies.
- Unstructured prose where structure would help: a wall of text mixing steps, options and caveats that
  headings, a numbered list or a table would separate.
- Missing formatting: code, commands, configuration or file paths outside code blocks or inline code;
  multi-line code without a fence; a list of options run together into one sentence.
- For an SRE investigation report (read by an on-call engineer or an automation): the same rules;
  findings, root cause, evidence and next steps kept apart, commands and log lines in code formatting,
  no chat.

What is not a problem: a short answer in plain sentences to a simple question; one line stating an
assumption or a confidence level (the agent is told to give those); prose explaining a concept where a
list would not be clearer; the agent's messages between tool calls.

For each problem give `problem_type`: `greeting` (a salutation, pleasantry or sign-off), `filler` (words
that carry no information), `unstructured` (content that needs structure but comes as running prose) or
`missing_formatting` (code, commands or identifiers without code formatting, or other missing markup);
`example_text` (the offending text, quoted, shortened if long) and `suggested_fix` (what to write
instead, concretely). Use one issue per distinct problem; several greetings, or several fillers, count
as one issue of their type."""

    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, AgentFormatIssue)
        return _PROBLEM_WEIGHT[issue.problem_type]
