"""Source judges: did the agent draw on the best sources within reach, in the order of trust it was taught?

The two `sources` failure modes, which look at the same thing from two sides:

* `source_quality` asks, source by source, whether a better one was available (official docs over an old
  forum answer, the current version's docs over an outdated one, the replacement over a deprecated API).
  One issue per source that had a better alternative, each costing the default half of the score.
* `source_selection` asks whether the run as a whole followed the agent's CHOOSING_SOURCES method: name
  the goal of the query, then use up the most trusted sources for that goal before falling back. It is an
  assessment: at most one issue per run, weighted by whether the trust order was broken.

For an SRE investigation the most trusted source is direct observation of the affected system (its logs,
events, metrics and configuration, through the listed tools); each rubric says how to read it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.core.issues import Issue, SourceSelectionIssue
from sensei_eval.evaluators.base import FailureModeJudge

__all__ = ('SourceQuality', 'SourceSelection')


@dataclass(repr=False)
class SourceQuality(FailureModeJudge):
    """Each source the answer rests on is the best one available: authoritative, current, not deprecated."""

    name: ClassVar[str] = 'source_quality'
    failure_mode: ClassVar[str | None] = 'source_quality'
    question: ClassVar[str] = 'Did the agent use the best available sources?'
    rubric: ClassVar[str] = """
Look at each source the answer draws on (documentation pages, library ids, repositories, web pages,
search hits, the agent's own memory) and ask whether a better one was within reach of its tools. What
counts as a source-quality problem:
- An old Stack Overflow or forum answer, a blog or a tutorial relied on for something the library's
  official documentation covers, when a documentation tool was available or even used.
- Deprecated or removed APIs taken from a source and presented as current, when a newer source (or the
  same results) shows what replaced them.
- Documentation of an older version used when the query is about a newer one (or about "the latest"),
  or the newer version's docs left unread though they were available.
- A second-hand copy (a mirror, an aggregator, a generated summary) used instead of the original it copies.
- For an SRE investigation: stale or indirect evidence (an old log window, a cached status, a generic
  runbook, another namespace or cluster) used when the live data of the affected resource could have
  been fetched with the listed tools.

What is not a problem: a community source used because the official docs do not cover the point or
were searched without result; an older version's docs when the query is about that version; a
secondary source that only confirms what a primary one already showed.

For each problem give `source_used` (the source as the transcript names it: a URL, library id, repo
path, or the tool and query that returned it), `better_source` (the source that should have been used,
named concretely or by its obvious kind, e.g. "the official Pydantic v2 migration guide") and
`why_better` (what it has that the used one lacks: authority, the right version, a current API, direct
observation). Use one issue per source that had a better alternative."""


@dataclass(repr=False)
class SourceSelection(FailureModeJudge):
    """Sources chosen by trust and goal: the trusted ones for the query's goal used up before falling back."""

    name: ClassVar[str] = 'source_selection'
    failure_mode: ClassVar[str | None] = 'source_selection'
    question: ClassVar[str] = 'Did the agent follow the trust hierarchy and match its sources to the goal of the query?'
    rubric: ClassVar[str] = """
The agent was told how to choose sources (its CHOOSING_SOURCES instructions, paraphrased), along two
lines. Trust, from most to least reliable: official documentation (llms.txt, the official site,
Context7's index); the library's source code and type definitions; official examples and tutorials;
well-kept community material (popular repositories using the library, established tutorials); the
general community (blogs, Stack Overflow, forums); and last its own training data, which may be out of
date. Goal, since each kind of question has its best sources: API reference and signatures — source
code, type definitions, official API docs; conceptual understanding — official guides, then the code to
confirm; real-world usage — official examples, GitHub repositories, blog posts; troubleshooting and edge
cases — source code, GitHub issues, Stack Overflow; migration and version differences — changelogs,
release notes, migration guides. It should name the goal first, then use up the trusted sources for that
goal before falling back to less trusted ones, and not skip the official docs because it can read the
code (docs give the intent, code the actual behaviour).

What counts as a source-selection problem:
- A blog post, tutorial or forum answer used while official documentation on the point was available
  and not tried.
- A source that does not fit the goal: an API signature taken from a Stack Overflow answer, a migration
  answered without changelog or migration guide, a bug hunted in the conceptual guide only.
- Community sources consulted before the official docs were tried at all.
- The answer drawn from training data when a tool could have looked it up.
- For an SRE investigation: trust runs from direct observation of the affected system (its logs,
  events, metrics, configuration) to official docs or runbooks for the component, then community
  material, then general knowledge, and the goal is usually `troubleshooting`. A cause taken from
  general knowledge or a generic article while the system's own logs or events could have been read
  breaks the order.

What is not a problem: a less trusted source used after the trusted ones for that goal were searched and
came up short; a community source where it fits the goal best (GitHub issues for a known bug); a trivial
fact answered from knowledge.

Emit at most one issue: a single assessment of the run's choice of sources when it falls short of the
above, with every field filled in. When the choice was sound, answer with an empty "issues" list. Fields:
- `goal_type`: the query's goal: `api_reference` (signatures, parameters, return types), `conceptual`
  (how or why something works), `usage_patterns` (how it is used in practice, examples),
  `troubleshooting` (errors, bugs, unexpected behaviour, edge cases; alert investigations too),
  `migration` (upgrading, differences between versions).
- `sources_used`: the sources the answer rests on, as the transcript names them.
- `trust_levels_used`: the trust levels among them: `official_docs`, `source_code` (implementation and
  type definitions; for an investigation, direct observation of the system), `official_examples`
  (examples and tutorials from the project itself), `community` (any third-party material: repositories,
  tutorials, blogs, Q&A sites, forums), `training_data` (the agent's own knowledge, no tool result behind it).
- `better_sources_available`: the sources that fit the goal and rank higher in trust, which should have
  been tried first.
- `trust_hierarchy_violated`: true when a less trusted source (or training data) was relied on while a
  more trusted one for this goal was within reach and not tried or not used up; false when the problem
  is only a mismatch between source and goal.
- `reasoning`: what the run did and what it should have done, citing steps."""

    # Relying on a less trusted source while a trusted one went untried is the failure this method
    # exists to prevent: the whole score. A source that merely fits the goal badly: the default half.
    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, SourceSelectionIssue)
        return 1.0 if issue.trust_hierarchy_violated else 0.5
