"""Tool-usage judges: did the agent pick the right tools, and call them with the right arguments?

Seed 004's `tool_selection` (and, with the other families, `tool_parameters`). The signals are those of
a documentation-research agent — library questions belong to the docs tool (Context7), requests for
real code to code search (Scout/grep), news and releases to web search (Tavily) — and they read just
as well for an SRE agent's kubectl and log tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..issues import Issue, ToolSelectionIssue
from .base import FailureModeJudge

__all__ = ('ToolSelection',)


@dataclass(repr=False)
class ToolSelection(FailureModeJudge):
    """Right tools for the query: nothing obvious missed, nothing pointless called."""

    name: ClassVar[str] = 'tool_selection'
    failure_mode: ClassVar[str | None] = 'tool_selection'
    category: ClassVar[str | None] = 'tool_usage'
    issue_model: ClassVar[type[Issue]] = ToolSelectionIssue
    question: ClassVar[str] = 'Did the agent use the right tools for this query?'
    rubric: ClassVar[str] = """
What counts as a tool-selection problem:
- The query is about a named library, framework or API, yet no documentation tool (e.g. a Context7 docs
  lookup) was called, and the answer leans on memory, a blog or a web search instead.
- The query asks for real code, usage examples or how something is implemented, yet no code-search or
  file-reading tool (e.g. Scout grep / read file) was called.
- The query is about recent releases, news or current events, yet no web search (e.g. Tavily) was used.
- For an infrastructure investigation: evidence that a listed tool could have fetched directly (logs,
  events, files, processes) was guessed or inferred instead.
- A tool was called that could not help with this query (wasted calls), or the same lookup was repeated
  without reason.

What is not a problem: a cheaper tool that fully answered the question; skipping a tool whose
information was already obtained another way.

For each problem give `missed_tools` (tools that should have been called, by the names seen in the
transcript or the obvious kind of tool), `unnecessary_tools` (tools called for no benefit) and a short
`reasoning`. Use one issue per distinct problem."""
