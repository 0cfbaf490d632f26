"""Source judges: did the agent rest its work on the most reliable information within its reach?

The two `sources` failure modes, in words that hold for any agent, look at the same thing from two sides:

* `source_quality` asks, source by source, whether a better one was within reach: the system of record
  over a cached or second-hand copy, the current record over an outdated one, a lookup over memory.
* `source_selection` asks whether the run as a whole chose its sources by how far each can be trusted for
  the request's goal. An assessment: at most one issue per run.

What counts as authoritative depends on the agent: the profile of a documentation agent ranks official
documentation, source code and community answers; an SRE agent's ranks direct observation of the system
first (`judging.profiles`), and may give `source_selection` its own vocabulary of goals and trust levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.evaluators.base import FailureModeJudge, register_judge

__all__ = ('SourceQuality', 'SourceSelection')


@register_judge
@dataclass(repr=False)
class SourceQuality(FailureModeJudge):
    """Each source a result rests on is the most reliable one within reach."""

    name: ClassVar[str] = 'source_quality'
    failure_mode: ClassVar[str | None] = 'source_quality'
    question: ClassVar[str] = 'Did the agent use the most reliable sources within its reach?'
    rubric: ClassVar[str] = """
Look at each source the agent's results rest on (tool results, records, pages, files, what the user
said, the agent's own memory) and ask whether a more reliable one was within reach of its tools. What
counts as a source-quality problem:
- The agent's memory, or the user's say-so, relied on for a fact a tool could have looked up in the
  system that holds it.
- A stale, cached, summarised or second-hand result used when the current record or the original was
  available.
- A result about the wrong scope (another account, item, period, environment) used for this one.
- A source the run itself showed to be outdated or superseded, used anyway.

Severity: an outcome or statement the user relies on, resting on an unreliable source when a reliable
one was available, is major; a weaker source that only confirmed what a reliable one already showed,
minor.

Not a problem: a weaker source used after the reliable ones were tried and came up short; general
knowledge for trivial facts.

For each problem give `source_used` (as the transcript names it: the tool and call, the record, the
page, or "the agent's memory"), `better_source` (the one that should have been used, concretely) and
`why_better` (what it has that the used one lacks: authority, currency, the right scope, direct
observation). One issue per source that had a better alternative."""


@register_judge
@dataclass(repr=False)
class SourceSelection(FailureModeJudge):
    """Sources chosen by how far they can be trusted for the request's goal, the trusted ones first."""

    name: ClassVar[str] = 'source_selection'
    failure_mode: ClassVar[str | None] = 'source_selection'
    question: ClassVar[str] = 'Did the agent choose its sources by trust and by the goal of the request?'
    # A request's goal and the trust levels of sources, for any agent; a profile may give its own.
    VOCABULARY: ClassVar[dict[str, tuple[str, ...]]] = {
        'goal_type': ('fact_lookup', 'action', 'explanation', 'troubleshooting', 'comparison'),
        'trust_levels_used': ('system_of_record', 'primary', 'secondary', 'user_statement', 'model_knowledge'),
    }
    rubric: ClassVar[str] = """
A careful agent names the goal of the request, then uses the sources it can trust most for that goal
before falling back to less trusted ones. From most to least trusted, for any agent: the system of
record itself, read through a tool (the live data the request is about); primary material from whoever
owns the subject (their own rules, references, specifications); secondary material (copies, summaries,
third-party accounts); what the user says, when it could be checked; and last the agent's own knowledge.

What counts as a source-selection problem:
- A less trusted source relied on while a more trusted one for this goal was within reach and not
  tried.
- A source that does not fit the goal (a general description used to answer a question about this
  user's own data).
- The agent's own knowledge, or the user's unchecked word, used where a tool could have given the fact.

Severity: a result or action the user relies on, resting on a less trusted source while a trusted one
went untried, is major; a poor fit between source and goal that did not change the outcome, minor.

Not a problem: falling back after the trusted sources came up short; a trivial fact from knowledge.

Emit at most one issue, with every field filled in; when the choice was sound, answer with an empty
"issues" list. Fields:
- `goal_type`: the request's goal: `fact_lookup` (a fact about something specific), `action` (something
  to be done), `explanation` (how or why something works), `troubleshooting` (something went wrong),
  `comparison` (choosing between options).
- `sources_used`: the sources the result rests on, as the transcript names them.
- `trust_levels_used`: their levels: `system_of_record`, `primary`, `secondary`, `user_statement`,
  `model_knowledge`.
- `better_sources_available`: the more trusted sources for this goal that should have been used first.
- `trust_hierarchy_violated`: true when a less trusted source was relied on while a more trusted one was
  within reach and not tried; false when the problem is only a poor fit with the goal.
- `reasoning`: what the run did and what it should have done, citing steps."""
