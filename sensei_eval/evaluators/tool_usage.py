"""Tool-usage judges: did the agent pick the right tools, and call them with the right arguments?

The standard `tool_selection` and `tool_parameters`. The signals are those of a documentation-research
agent — library questions belong to the docs tool (Context7), requests for real code to code search
(Scout/grep), news and releases to web search (Tavily); a library id must be spelled right and a version
the query names passed on — and they read just as well for an SRE agent's kubectl and log tools (the
right namespace, pod, selector and time window). Both judges list one issue per problem found, each
costing the default half of the mode's score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.evaluators.base import FailureModeJudge

__all__ = ('ToolParameters', 'ToolSelection')


@dataclass(repr=False)
class ToolSelection(FailureModeJudge):
    """Right tools for the query: nothing obvious missed, nothing pointless called."""

    name: ClassVar[str] = 'tool_selection'
    failure_mode: ClassVar[str | None] = 'tool_selection'
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


@dataclass(repr=False)
class ToolParameters(FailureModeJudge):
    """The right arguments in each tool call: names, versions, the scope of searches."""

    name: ClassVar[str] = 'tool_parameters'
    failure_mode: ClassVar[str | None] = 'tool_parameters'
    question: ClassVar[str] = 'Were the tools called with the correct parameters?'
    rubric: ClassVar[str] = """
Read the arguments of every tool_call step against the query and what the run had learned by then.
What counts as a tool-parameter problem:
- A library, package or repository named wrongly: a typo, the wrong casing or the wrong owner in a
  library id or repo path (e.g. `/fastapi/fast-api` for `/fastapi/fastapi`), or a different library than
  the one the query is about.
- The query names a version (or the run found out which version is in use), but no call that could take
  it passes it on — in a version argument, the library id, the topic or the search string — so the
  results may describe another version.
- A search string too broad to find the answer (one vague word, the whole question pasted in when a
  focused term was needed) or too narrow (an exact error text full of local paths, an invented name).
- Arguments that break the call: the wrong type or format, a required argument left out, an argument
  the tool does not take — seen as an error in the tool_result — and above all the same bad call repeated.
- For an infrastructure investigation (kubectl, log and metrics tools): the wrong namespace, cluster,
  pod, container or label selector; a time window (`--since`, start/end) that misses the alert's time;
  no `--previous` when the crash was in an earlier container; a line or size limit that cuts off the
  output that mattered.

What is not a problem: a value you would have phrased differently that still returned what was needed;
an optional argument left at a default that suits the query; a call that failed and was fixed on the
very next attempt (exploring is normal; report it only when the mistake repeats or the answer relies on
the bad call's result).

For each problem give `tool_name` (the tool as the transcript names it), `parameter` (the argument's
name; `query` for a free-text search string), `actual_value` (what was passed, quoted; `(missing)` when
the argument was left out), `suggested_value` (what should have been passed, concretely) and a short
`reasoning` (why the value was wrong and what it cost the run). Use one issue per wrong argument; the
same mistake repeated over several calls is one issue citing all of them."""
