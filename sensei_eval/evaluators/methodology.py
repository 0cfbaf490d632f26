"""Methodology judges: did the agent work the way a careful agent in its role works?

The five `methodology` failure modes, in words that hold for any tool-using agent; a profile adds its agent's
own method (`judging.profiles`: the documentation agent's prompt sections, an SRE investigation's readings):

| judge | the method, for any agent |
|---|---|
| `confidence_communication` | say how sure it is, as sure as the evidence behind a statement allows |
| `query_decomposition` | see the parts of a compound request and handle each |
| `research_depth` | gather enough evidence before concluding or acting |
| `solution_evaluation` | weigh the options it has instead of taking the first |
| `ambiguity_handling` | ask, or state its assumptions, when the request leaves something open |

Each mode is an assessment of the whole run: at most one issue, whose fields grade how the run fell short,
or none when the run followed the method. Every issue costs its severity's share of the mode's score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.evaluators.base import FailureModeJudge, register_judge

__all__ = (
    'AmbiguityHandling',
    'ConfidenceCommunication',
    'QueryDecomposition',
    'ResearchDepth',
    'SolutionEvaluation',
)


@register_judge
@dataclass(repr=False)
class ConfidenceCommunication(FailureModeJudge):
    """Statements made as sure as the evidence behind them allows, and said so where it matters."""

    name: ClassVar[str] = 'confidence_communication'
    failure_mode: ClassVar[str | None] = 'confidence_communication'
    question: ClassVar[str] = 'Did the agent convey how sure it is, as sure as its evidence allows?'
    # Where a statement's support comes from, for any agent; a profile may name its own kinds of source.
    VOCABULARY: ClassVar[dict[str, tuple[str, ...]]] = {
        'source_type': ('tool_result', 'instructions', 'user', 'inference', 'model_knowledge'),
    }
    rubric: ClassVar[str] = """
A statement deserves the confidence its support allows: high when a tool result or the agent's
instructions state it directly, lower when it is inferred from indirect signals, and plainly uncertain
when it rests on the agent's own knowledge or nothing in the run. Where a user will rely on a statement,
the agent should make clear how firm it is (by naming what it rests on, or saying how sure it is).

What counts as a confidence problem:
- A statement presented as settled fact that rests on inference or on nothing in the run.
- Hedging or doubt on something a tool result or the instructions state plainly, so the user is left
  unsure of a firm answer.
- A statement that names the wrong support ("the records show" for something no tool returned).
- No hint of how firm the key statements are, where the user needed to weigh them.

Severity: a guess presented as fact on something the user will act on is major; other mismatches
between stated and warranted confidence, minor.

Not a problem: confidence conveyed in any words, as long as it is clear; statements the run backs
directly, stated plainly; side remarks.

Emit at most one issue: the key statement where stated and warranted confidence differ most (or the main
statement, when confidence is never conveyed), with every field filled in. When confidence fits the
evidence, answer with an empty "issues" list. Fields:
- `claim`: that statement, quoted briefly.
- `source_type`: what it actually rests on: `tool_result` (a tool result in the run states it),
  `instructions` (the agent's instructions state it), `user` (the user said it), `inference` (drawn from
  indirect signals in the run), `model_knowledge` (nothing in the run; the agent's own knowledge).
- `stated_confidence`: what the message conveys: `high`, `medium`, `low`, `uncertain` (it says it found
  no clear answer) or `none` (no indication at all).
- `expected_confidence`: what that support warrants: `high`, `medium`, `low` or `uncertain`.
- `reasoning`: why the stated confidence does not fit, citing steps."""


@register_judge
@dataclass(repr=False)
class QueryDecomposition(FailureModeJudge):
    """A compound request seen as its parts, each handled."""

    name: ClassVar[str] = 'query_decomposition'
    failure_mode: ClassVar[str | None] = 'query_decomposition'
    question: ClassVar[str] = 'Did the agent break the request into its parts and handle each?'
    rubric: ClassVar[str] = """
Look at the shape of what the user asked before judging the work. A compound request bundles parts that
can be handled one by one (several items to change, several questions, an action plus a question); a
complex one has parts that depend on each other (one result decides the next step). A careful agent
names the parts, handles each (in order where they depend on each other) and keeps track of which are
done. It reuses what it already has (earlier results, a memory or cache tool when the tool list has one)
and hands parts to helpers (other agents, parallel calls) only when it has such tools and the parts are
big enough to need them.

What counts as a decomposition problem:
- A multi-part request handled as one lump: some parts get little or nothing.
- Parts that depend on each other handled in the wrong order, or the second done before the first's
  result was known.
- Work repeated that an earlier result, or a memory or cache tool the agent had, already covered.
- Big independent parts done thinly one after another although the tools offered helpers for them.

Severity: a part of the request lost or done on a wrong premise because of how the request was split is
major; an inefficient but complete handling, minor.

Not a problem: a simple request handled directly; no memory or helper calls when the tool list has none.

Emit at most one issue, with every field filled in; when the request was simple or handled part by part,
answer with an empty "issues" list. Fields:
- `query_complexity`: `simple` (one thing), `compound` (independent parts), `complex` (parts that depend
  on each other).
- `identified_parts`: the parts the agent did handle separately.
- `missed_parts`: the parts it should have identified but did not, or left unhandled.
- `cache_searched`: whether it checked a memory or cache tool first (true when it had none).
- `subagents_used`: whether it handed parts to helpers (other agents or parallel calls).
- `should_have_used_subagents`: true only when it had helper tools, the parts were independent and big,
  and doing them in one thread visibly left some thin.
- `reasoning`: what the run did with the request's parts and what it should have done, citing steps."""


@register_judge
@dataclass(repr=False)
class ResearchDepth(FailureModeJudge):
    """Enough evidence gathered before concluding or acting: leads followed, results checked."""

    name: ClassVar[str] = 'research_depth'
    failure_mode: ClassVar[str | None] = 'research_depth'
    question: ClassVar[str] = 'Did the agent gather enough evidence before concluding or acting?'
    rubric: ClassVar[str] = """
A careful agent gathers what it needs before it concludes or acts: it looks up the facts a decision
depends on, reads results properly rather than skimming the first one, follows a lead that bears on the
answer, tries another way when a lookup comes back empty or fails, and checks a result that looks off.
It stops once the evidence settles the question.

What counts as a depth problem:
- A conclusion or action taken before the facts it depends on were looked up, when the tools could
  have given them.
- The first result taken as the answer without reading it properly or checking it against anything.
- A lookup that failed or came back empty, followed by giving up or guessing, with no retry or other
  approach.
- A lead in the results that bears on the answer (an exception, a second record, a condition) not
  followed up.

Severity: an action or a conclusion the user relies on, taken on evidence that was not gathered, is
major; a thinner exploration that still reached a sound result, minor.

Not a problem: a simple lookup settled by the first authoritative result; stopping once the answer is
confirmed; short runs on easy requests.

Emit at most one issue, with every field filled in; when the evidence gathered was enough, answer with
an empty "issues" list. Fields:
- `query_phrasings_tried`: how many distinct lookups, queries or commands the run tried for the point
  in question.
- `sources_consulted`: how many distinct sources of evidence it actually read (records, results, files,
  pages, outputs).
- `depth_of_investigation`: `shallow` (nothing read properly or followed up), `moderate` (something read
  properly, no check or follow-up), `deep` (leads followed and cross-checked, yet something fell short).
- `missed_exploration`: the lookups, leads or checks that should have been made.
- `premature_conclusion`: true when it concluded or acted before its evidence settled the question.
- `reasoning`: where the gathering stopped short, citing steps."""


@register_judge
@dataclass(repr=False)
class SolutionEvaluation(FailureModeJudge):
    """The options weighed, and their drawbacks named, instead of the first that works."""

    name: ClassVar[str] = 'solution_evaluation'
    failure_mode: ClassVar[str | None] = 'solution_evaluation'
    question: ClassVar[str] = 'Did the agent weigh the available options with sound judgment?'
    rubric: ClassVar[str] = """
When the run offers several ways to meet the request (several options found, several actions possible,
several explanations), a careful agent weighs them before choosing or recommending: how well founded each
is (authority), how well it fits the user's situation and stated preferences and the rules it works
under (alignment), how simple and safe it is (simplicity), how current it is (recency). It names the
drawbacks of what it recommends, and it does not present a workaround that only hides the problem as the
solution.

What counts as a solution-evaluation problem:
- One option taken or recommended where the run showed several, without comparing them.
- The choice ignores what the user said they prefer, or what fits their situation best, among the
  options the run found.
- Drawbacks (costs, risks, conditions, side effects) of the chosen option known from the run but not
  told to the user.
- A workaround that only masks the problem presented as the fix.

Severity: an option chosen against the user's stated preference or interest when a better one was in the
run, or a drawback withheld that the user would act on, is major; a thin comparison that still lands on
a sound option, minor.

Not a problem: a request with one right answer or one possible action; a brief comparison with a reason;
options the user already chose themselves.

Emit at most one issue, with every field filled in; when the options were weighed soundly, or there was
only one, answer with an empty "issues" list. Fields:
- `approaches_considered`: how many distinct options the run looked at or mentioned.
- `signals_evaluated`: which of `authority`, `alignment`, `simplicity`, `recency` it visibly weighed (an
  empty list when none).
- `red_flags_present`: the drawbacks or warning signs of the chosen option, briefly (empty when none).
- `red_flags_acknowledged`: whether the user was told about every one of them (true when none).
- `reasoning`: what the comparison lacked and what a better choice would have been, citing steps."""


@register_judge
@dataclass(repr=False)
class AmbiguityHandling(FailureModeJudge):
    """What the request leaves open: asked about, or a stated reasonable assumption."""

    name: ClassVar[str] = 'ambiguity_handling'
    failure_mode: ClassVar[str | None] = 'ambiguity_handling'
    question: ClassVar[str] = 'Did the agent deal soundly with what the request left open?'
    rubric: ClassVar[str] = """
When the request leaves out something the agent needs (which item, which of several matches, an amount,
a date, a choice between options), a careful agent either asks, or makes the reasonable assumption and
says so, so the user can correct it. It asks when a wrong guess would be costly or hard to undo (above
all before an action that changes something), and assumes when one reading is plainly the usual one.

What counts as an ambiguity problem:
- The agent acted on a guess about something the user left open, without asking, where a wrong guess
  changes the outcome.
- Assumptions the result depends on, never stated to the user.
- A stated assumption the agent then did not follow.
- Several plausible readings, and the agent silently picked one instead of asking or laying out the
  main alternatives.
- A clear request met with needless questions that held the user up.

Severity: a state-changing action taken on an unconfirmed guess is critical; an answer resting on an
unstated assumption the user may not share, major; a needless question or a minor unstated assumption,
minor.

Not a problem: a clear request; details earlier turns or tool results settle; asking when the request is
genuinely open.

Emit at most one issue, with every field filled in; when the request was clear, or what it left open
was handled as above, answer with an empty "issues" list. Fields:
- `query_ambiguity`: `clear`, `slightly_ambiguous` (one reasonable default exists) or
  `highly_ambiguous` (the outcome depends on missing details and no default is safe).
- `assumptions_made`: the assumptions the outcome relies on, stated or not.
- `assumptions_stated`: those it told the user, quoted briefly.
- `should_have_clarified`: true when it should have asked (or laid out the alternatives) instead of
  settling on one assumption.
- `reasoning`: what was left open and how the agent handled it, citing steps."""
