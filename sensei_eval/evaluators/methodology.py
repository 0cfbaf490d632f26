"""Methodology judges: did the agent research the way its system prompt told it to?

The five `methodology` failure modes, each tied to one section of the documentation agent's prompt:

| judge | prompt section | the method |
|---|---|---|
| `confidence_communication` | CONFIDENCE_LEVELS | state confidence, graded by the source behind a claim |
| `query_decomposition` | QUERY_DECOMPOSITION | split compound queries, search the cache, fan out to subagents |
| `research_depth` | RESEARCH_METHODOLOGY | go wide, go deep on promising paths, zoom out when needed |
| `solution_evaluation` | ENGINEERING_JUDGMENT | weigh approaches by authority, alignment, simplicity, recency |
| `ambiguity_handling` | HANDLING_AMBIGUITY | make reasonable assumptions and state them, or ask |

The judge never sees the agent's system prompt (a transcript shows only its length), so each rubric
restates its section in our own words. Each rubric also says how to read the method for a TARSy SRE
investigation (kubectl and log tools, an alert instead of a question), where it differs.

Every mode here is an assessment of the whole run: the judge emits at most one issue, whose fields grade
how the run fell short, or none when the run followed the method. The fields that measure severity set
the issue's weight (see each `issue_weight`), so the score keeps more than pass/fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.core.issues import (
    AmbiguityIssue,
    ConfidenceIssue,
    DecompositionIssue,
    Issue,
    ResearchDepthIssue,
    SolutionEvaluationIssue,
)
from sensei_eval.evaluators.base import FailureModeJudge

__all__ = (
    'AmbiguityHandling',
    'ConfidenceCommunication',
    'QueryDecomposition',
    'ResearchDepth',
    'SolutionEvaluation',
)

# The confidence levels in order, for measuring how far a stated confidence is from the warranted one.
_CONFIDENCE_RANK = {'uncertain': 0, 'low': 1, 'medium': 2, 'high': 3}

# Score taken off by how shallow the research was.
_DEPTH_WEIGHT = {'shallow': 1.0, 'moderate': 0.5, 'deep': 0.25}


@dataclass(repr=False)
class ConfidenceCommunication(FailureModeJudge):
    """Confidence stated, and matched to the trust of the source behind each key claim."""

    name: ClassVar[str] = 'confidence_communication'
    failure_mode: ClassVar[str | None] = 'confidence_communication'
    question: ClassVar[str] = 'Did the agent communicate its confidence appropriately for its sources?'
    rubric: ClassVar[str] = """
The agent was told (its CONFIDENCE_LEVELS instructions, paraphrased) to always say how sure it is, and
to base that on where the information came from: high confidence for official documentation (llms.txt,
the official site, Context7), in words like "the FastAPI docs state..."; medium for GitHub repositories,
the source code and well-maintained libraries ("the source code shows..."); low for blogs, tutorials,
forums and its own training data ("some tutorials suggest...", "from my training data, which may be out
of date..."); and uncertain when it has gone through the sources without finding a clear answer ("I
couldn't find official documentation on this; based on related concepts...").

What counts as a confidence problem:
- A claim stated as settled fact, or with explicit high confidence, that rests on a low-trust source: a
  blog or forum post presented as authoritative, or the agent's memory presented as documentation.
- Hedging or doubt ("I think", "possibly") on something official documentation in the results states plainly.
- No indication of confidence at all: the answer never says where its key claims come from or how sure
  it is, so the caller cannot weigh them.
- A stated confidence that does not match the source the claim really rests on (e.g. "according to the
  docs" for something that came from a GitHub issue or from no tool at all).
- For an SRE investigation: a root cause stated as certain when it is inferred from indirect signals,
  or hedged when a log line or event shows it directly; a conclusion with no statement of certainty.

What is not a problem: a confidence level put in other words than the examples above, as long as the
level is clear; naming the source of a claim ("the docs state...") already conveys its confidence; side
remarks without one.

Emit at most one issue: when confidence is misstated or missing, a single assessment of the key claim
where stated and warranted confidence differ most (or of the main claim, when confidence is never
stated), with every field filled in. When confidence is communicated fittingly, answer with an empty
"issues" list. Fields:
- `claim`: that claim, quoted briefly.
- `source_type`: what the claim actually rests on: `official_docs` (official documentation, llms.txt,
  Context7), `source_code` (the library's code or type definitions; for an investigation, a direct
  observation of the system such as a log line, event or resource state), `github` (repositories,
  issues, discussions), `community` (blogs, tutorials, Stack Overflow, forums), `training_data` (no tool
  result behind it; the agent's own knowledge).
- `stated_confidence`: what the answer conveys: `high`, `medium`, `low`, `uncertain` (it says it found no
  clear answer) or `none` (no indication of confidence at all).
- `expected_confidence`: what that source warrants by the rules above: `high`, `medium`, `low` or
  `uncertain` (for an investigation, a cause seen directly in the system's own output can warrant `high`).
- `reasoning`: why the stated confidence does not fit, citing steps."""

    # Overstating confidence misleads the caller into trusting a weak claim: half the score per level of
    # overstatement. Understating only makes the caller check again: a quarter per level, at most half.
    # Saying nothing about confidence: the default half.
    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, ConfidenceIssue)
        if issue.stated_confidence == 'none':
            return 0.5
        gap = _CONFIDENCE_RANK[issue.stated_confidence] - _CONFIDENCE_RANK[issue.expected_confidence]
        if gap > 0:
            return min(1.0, 0.5 * gap)
        if gap < 0:
            return min(0.5, 0.25 * -gap)
        return 0.25  # levels match, yet the judge saw a problem (e.g. the wrong source named)


@dataclass(repr=False)
class QueryDecomposition(FailureModeJudge):
    """Compound queries split into their independent parts, the cache searched, subagents used where they pay."""

    name: ClassVar[str] = 'query_decomposition'
    failure_mode: ClassVar[str | None] = 'query_decomposition'
    question: ClassVar[str] = 'Did the agent decompose the query appropriately before researching it?'
    rubric: ClassVar[str] = """
The agent was told (its QUERY_DECOMPOSITION instructions, paraphrased) to look at the shape of a request
before researching. Compound queries often bundle independent topics, and splitting them makes each part
a reusable building block: "why does my Next.js app fail to reach Postgres on Vercel?" splits into
serverless database connections, Vercel's execution model and connection poolers. Before fresh research
it searches its knowledge cache (Kura, e.g. a `kura_search` call) for the query or its parts, since
cached parts can be reused. When parts miss the cache, a coordinating agent should seriously consider
spawning subagents to research them in parallel, each in depth, and then put their results together.
Simple, focused questions need no decomposition and go straight to research.

What counts as a decomposition problem:
- A multi-part question handled as one lump: the parts are not researched or answered separately, and
  some get little or nothing.
- Independent topics in the query not recognised: all the searches target one of them, or the answer
  merges them.
- Research started without searching the cache, when the transcript shows a cache tool exists (for
  instance, it is called later).
- Independent parts that each needed substantial research done one after another and thinly, where
  parallel subagents would have gone deeper.
- For an SRE investigation: an alert whose explanation spans several components or hypotheses (the pod,
  its node, a dependency, a recent change) followed as a single thread, leaving some unchecked. Cache
  and subagent tools usually do not exist there: record `cache_searched` and `subagents_used` as they
  are and do not count their absence against the run.

What is not a problem: a simple query answered directly; no cache search when no cache tool appears in
the transcript; no subagents when the parts were small or the cache covered them.

Emit at most one issue: a single assessment of how the run handled the query's structure when it falls
short of the above, with every field filled in. When the query was simple, or was decomposed as it
should be, answer with an empty "issues" list. Fields:
- `query_complexity`: `simple` (one focused topic), `compound` (two or more independent parts that could
  be researched separately), `complex` (several interrelated parts, or a design decision drawing on
  several domains).
- `identified_parts`: the parts the agent did treat separately, in distinct searches, subagent tasks or
  sections of the answer.
- `missed_parts`: the parts it should have identified but did not, or left unresearched.
- `cache_searched`: whether it searched the knowledge cache before researching.
- `subagents_used`: whether it spawned any subagent.
- `should_have_used_subagents`: true only when independent parts each needed their own substantial
  research, the cache did not cover them, and doing them in one thread visibly left some thin.
- `reasoning`: what the run did with the query's parts and what it should have done, citing steps."""

    # Parts of the query that were never identified go unresearched, so the answer is incomplete: the
    # whole score. Process gaps with every part still covered (no cache search, no subagents): half.
    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, DecompositionIssue)
        return 1.0 if issue.missed_parts else 0.5


@dataclass(repr=False)
class ResearchDepth(FailureModeJudge):
    """Wide-then-deep exploration before settling: several phrasings, sources read properly, leads followed."""

    name: ClassVar[str] = 'research_depth'
    failure_mode: ClassVar[str | None] = 'research_depth'
    question: ClassVar[str] = 'Did the agent explore sufficiently before settling on an answer?'
    rubric: ClassVar[str] = """
The agent was told (its RESEARCH_METHODOLOGY instructions, paraphrased) to research like a senior
engineer looking for the right answer rather than the first one, moving between wide and deep. Wide
first: several phrasings of the search (e.g. "React context", "useContext hook", "React state
sharing"), adjacent topics, and a note of the different approaches it meets. Then deep on the promising
candidates: the full documentation rather than a snippet, the examples, and a check that this is the
designed way and not a workaround. And wide again when the deep dive points to a better approach, hits
a dead end or starts to feel hacky.

What counts as a depth problem:
- A single phrasing of the search when the first results were thin, off-target or ambiguous and other
  phrasings would have helped.
- The first result taken as the answer, without reading it properly or checking it against anything.
- Adjacent topics that bear on the answer left unexplored (a related API, the configuration it depends
  on, the changelog of the version asked about).
- Only snippets or search previews read; no promising path followed into the full page, the source or
  the examples.
- Giving up, or concluding "not found", after one or two attempts; answering right after a tool error
  without retrying or trying something else.
- For an SRE investigation: a root cause declared after one command; one kind of evidence only (logs but
  not events, the pod but not its node or dependencies); a suspicious log line or event not followed up;
  no look at what changed around the alert's time.

What is not a problem: a simple lookup settled by the first authoritative result; a cache hit that fully
answers the question; stopping once the answer is confirmed; short runs on easy questions.

Emit at most one issue: a single assessment of the run's exploration when it falls short of the above,
with every field filled in. When the research was as wide and deep as the query needed, answer with an
empty "issues" list. Fields:
- `query_phrasings_tried`: how many distinct search queries or phrasings the run tried (for an
  investigation, distinct queries and commands: selectors, namespaces, time windows).
- `sources_consulted`: how many distinct sources it actually read (documents, pages, files,
  repositories; for an investigation, distinct kinds of evidence such as logs, events, metrics,
  resource descriptions).
- `depth_of_investigation`: `shallow` (only search results or snippets skimmed; nothing read in full or
  followed up), `moderate` (at least one source read properly, but no verification, comparison or
  follow-up of leads), `deep` (promising paths followed into full docs, source or examples and
  cross-checked, yet something still fell short).
- `missed_exploration`: the phrasings, topics, sources or checks that should have been tried.
- `premature_conclusion`: true when it answered, or declared nothing found, before its evidence settled
  the question.
- `reasoning`: where the exploration stopped short, citing steps."""

    # Weighted by how shallow the research was (all the score for shallow, half for moderate, a quarter
    # for deep), plus a quarter when it also concluded before the evidence settled the question.
    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, ResearchDepthIssue)
        return min(1.0, _DEPTH_WEIGHT[issue.depth_of_investigation] + (0.25 if issue.premature_conclusion else 0.0))


@dataclass(repr=False)
class SolutionEvaluation(FailureModeJudge):
    """Competing approaches weighed with engineering judgment, red flags named, not the first that works."""

    name: ClassVar[str] = 'solution_evaluation'
    failure_mode: ClassVar[str | None] = 'solution_evaluation'
    question: ClassVar[str] = 'Did the agent weigh the possible approaches with engineering judgment?'
    rubric: ClassVar[str] = """
The agent was told (its ENGINEERING_JUDGMENT instructions, paraphrased) that when it finds several ways
to do something it must weigh them rather than take the first that works. What makes a solution good,
weighed by context rather than ticked off: authority (official docs and examples above community
answers, and those above Stack Overflow workarounds), alignment with the library's design (working with
its patterns and primitives rather than against them), simplicity (fewer moving parts, less code, fewer
dependencies) and recency (in a maintained project, the newer approach is usually the idiomatic one).
Red flags that an approach is wrong: it patches around the library instead of using its primitives, it
needs warnings or type checks turned off, it takes several workarounds to fit, or its own source calls
it hacky, temporary or a workaround. If it feels like fighting the framework, the agent should step back
and look for the way the designers intended.

What counts as a solution-evaluation problem:
- Only one approach considered where the results (or common practice) offer several.
- The first solution found recommended without comparing it to the alternatives in the results.
- Approaches compared with no regard to authority, alignment, simplicity or recency; e.g. a deprecated
  or community workaround picked over the official, current way shown in the same results.
- Red flags in the recommended approach passed over in silence.
- For an SRE investigation: approaches are the candidate causes and remediations. A single remediation
  proposed without weighing others (restart vs. fix the configuration vs. scale), or one that only masks
  the symptom (restarting a crash-looping pod, raising a limit with no cause found, silencing the alert,
  disabling a health check) recommended without saying so.

What is not a problem: a question with one canonical answer (a signature, a default, a single supported
way) needs no comparison; the judgment need not name the four criteria, reasoning such as "prefer X:
Y is deprecated" counts; alternatives mentioned briefly and dismissed with a reason.

Emit at most one issue: a single assessment of how the run chose its solution when it falls short of
the above, with every field filled in. When it weighed the approaches soundly, or there was only one,
answer with an empty "issues" list. Fields:
- `approaches_considered`: how many distinct approaches the run looked at or mentioned.
- `signals_evaluated`: which criteria it visibly weighed: `authority` (how trustworthy the source of an
  approach is), `alignment` (whether it works with the library's or system's design), `simplicity`
  (moving parts, code, dependencies), `recency` (newer, idiomatic vs. older or deprecated); an empty list
  when none.
- `red_flags_present`: the red flags in the recommended approach (or in the approaches found), described
  briefly; an empty list when none.
- `red_flags_acknowledged`: whether the answer tells the caller about every red flag listed (true when
  the list is empty).
- `reasoning`: what the comparison lacked and what a better choice would have been, citing steps."""

    # Recommending an approach with red flags and not telling the caller hands over a hack as the
    # answer: the whole score. A thin comparison that still lands on a sound approach: half.
    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, SolutionEvaluationIssue)
        return 1.0 if issue.red_flags_present and not issue.red_flags_acknowledged else 0.5


@dataclass(repr=False)
class AmbiguityHandling(FailureModeJudge):
    """An under-specified query met with stated, reasonable assumptions, or a request for clarification."""

    name: ClassVar[str] = 'ambiguity_handling'
    failure_mode: ClassVar[str | None] = 'ambiguity_handling'
    question: ClassVar[str] = 'Did the agent handle ambiguity in the query appropriately?'
    rubric: ClassVar[str] = """
The agent was told (its HANDLING_AMBIGUITY instructions, paraphrased): when a question leaves out
context it needs, make sensible assumptions (the most common framework or library when none is named,
the standard use case unless the question hints otherwise) and state them up front ("Assuming you're
using Next.js with the App Router..."), so the research can go ahead while the caller can still correct
course. When the question is too ambiguous for a reasonable assumption, or the answer would change a lot
with the missing context, it may ask the caller instead.

What counts as an ambiguity problem:
- The answer relies on assumptions (a framework, version, platform, use case, environment) that it
  never states.
- Stated assumptions that the answer does not follow (it says "assuming v2", then shows v1 code).
- A question too open for any single reasonable assumption, answered by silently picking one instead of
  asking or at least laying out the main alternatives.
- An answer kept so generic, to avoid committing to any assumption, that it fits no real case.
- For an SRE investigation: the alert leaves something open (which replica, cluster or time window;
  whether a threshold breach is real or an artefact of the metric) and the report picks one reading
  without saying so. An automated investigation can rarely ask; there, clarifying means flagging the
  ambiguity in the report and what the other reading would change.

What is not a problem: a clear query needs no stated assumptions; details that the query or earlier
turns settle; a short "it depends: if A..., if B..." that covers the main cases; asking for
clarification when the query is genuinely ambiguous.

Emit at most one issue: a single assessment of how the run dealt with what the query left open, when it
falls short of the above, with every field filled in. When the query was clear, or its gaps were handled
as above, answer with an empty "issues" list. Fields:
- `query_ambiguity`: `clear` (everything needed is given or obvious), `slightly_ambiguous` (something is
  missing but one reasonable default exists), `highly_ambiguous` (the answer depends heavily on missing
  context and no single default is safe).
- `assumptions_made`: the assumptions the answer relies on, stated or not.
- `assumptions_stated`: those it states explicitly, quoted briefly.
- `should_have_clarified`: true when it should have asked the caller (or flagged the ambiguity and laid
  out the alternatives) instead of settling on one assumption.
- `reasoning`: what was left open and how the answer handled it, citing steps."""

    # Answering a question it should have asked about likely answers a different question from the
    # caller's: the whole score. An unstated or unfollowed assumption the caller can spot and fix: half.
    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, AmbiguityIssue)
        return 1.0 if issue.should_have_clarified else 0.5
