"""Output judges: is what the agent told the user true, complete, faithful to its tools, well reported and traceable?

The standard `hallucination`, `completeness` and `synthesis_quality`, and `reporting_quality` and
`citation_quality`, in words that hold for any agent talking to a user across a conversation: every
message the agent sent the user is a statement to check, not only the last one, and the request is what
the user asked over the whole conversation.

Hallucination and synthesis quality differ in what the run said on the point: a statement nothing in the
run supports (no tool result, not the agent's instructions, not the user) is a hallucination; a statement
that contradicts, misreads or drops what a tool did return is a synthesis problem. Every finding costs its
severity's share of the mode's score (`core.verdicts.SEVERITY_COST`); reporting and citation quality are
assessments of the run, at most one issue each. An agent's own conventions (a documentation agent's
`<source>` citations, an SRE report's evidence chain) are added by its profile (`judging.profiles`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.evaluators.base import FailureModeJudge, register_judge

__all__ = ('CitationQuality', 'Completeness', 'Hallucination', 'ReportingQuality', 'SynthesisQuality')


@register_judge
@dataclass(repr=False)
class Hallucination(FailureModeJudge):
    """Statements to the user that nothing in the run supports."""

    name: ClassVar[str] = 'hallucination'
    failure_mode: ClassVar[str | None] = 'hallucination'
    question: ClassVar[str] = 'Did the agent tell the user things that nothing in the run supports?'
    rubric: ClassVar[str] = """
Check each concrete statement in the agent's messages to the user (amounts, dates, names, ids, counts,
statuses, eligibility, rules, what the agent did or will do, what a tool or feature does) against what
backs it in the run: the tool results, the agent's instructions (the rules and facts they state), and what
the user said. What counts as a hallucination:
- A fact, figure or status that no tool result, instruction or user message gives.
- A rule, entitlement or limit attributed to the agent's instructions (or its organisation) that they do
  not state, or state differently.
- A claim that something was done, changed, sent or checked when no tool call in the run did it, or a
  promise the agent has no tool or permission to keep.
- An identity, history or circumstance attributed to the user (a status, a past purchase, a reason) that
  neither the user nor a tool result stated.
- A cause, diagnosis or conclusion asserted with certainty where the run shows no evidence for it.

Severity: a false statement the user acted on or agreed to (an amount, a date, an eligibility) is
critical; a false answer to something the user asked, or a false account of what was done for them,
major; a side remark the user did not ask about and did not act on (a courtesy claim, a description of
a process, what someone else might do for them later), minor.

Not a hallucination: general knowledge that needs no source; a statement the agent clearly marks as
unverified or as its own assumption; a faithful paraphrase of a tool result or an instruction; a
statement contradicting a tool result (synthesis_quality: the run did say something on the point).

For each unsupported statement give `hallucinated_claim` (quote it, with its step),
`what_tools_actually_said` (what the tool results, the instructions or the user say on that point, or
that nothing in the run does) and `severity`."""


@register_judge
@dataclass(repr=False)
class Completeness(FailureModeJudge):
    """Everything the user asked, across the conversation, done or answered, or honestly declined."""

    name: ClassVar[str] = 'completeness'
    failure_mode: ClassVar[str | None] = 'completeness'
    question: ClassVar[str] = 'Did the agent address everything the user asked over the conversation?'
    rubric: ClassVar[str] = """
List what the user asked for over the whole conversation: each question, each action wanted, each
constraint (a date, a limit, a preference), including requests added or changed in later turns, and the
final state of the request where the user changed their mind. Then check how the agent dealt with each.
What counts as a completeness problem:
- A question or action the user asked for that was neither done, answered, nor explicitly declined with
  a reason: it was forgotten, or dropped when the conversation moved on.
- Part of a multi-part request handled and the rest left silently.
- A constraint the user stated that the outcome ignores.
- The agent stopped (ended the conversation, handed off, went silent) with a request still open and
  without telling the user what remains and why.

Severity: the user's main request left undone without telling them is major (critical if the agent
told them it was done); a secondary question left unanswered, major; a small detail or courtesy left out,
minor.

Not a completeness problem: a request the agent declined and explained (whether the refusal was right
is instruction_following's question); a request the user withdrew; material beyond what was asked; a
part that could not be done, when the agent said so and why.

For each gap give `missed_aspects` (what was asked and left open, in the user's terms, with the step it
was asked in) and `reasoning`."""


@register_judge
@dataclass(repr=False)
class SynthesisQuality(FailureModeJudge):
    """What the agent told the user says what its tools returned: no contradiction, misreading or dropped key fact."""

    name: ClassVar[str] = 'synthesis_quality'
    failure_mode: ClassVar[str | None] = 'synthesis_quality'
    question: ClassVar[str] = "Do the agent's messages accurately reflect what its tools returned?"
    rubric: ClassVar[str] = """
Set the agent's messages to the user beside the tool results they draw on. What counts as a synthesis
problem:
- A message contradicts a tool result: another value, status, date, count or condition than the result
  gives.
- A tool result misread: the wrong record or field taken, an error read as success (or the reverse),
  a total or comparison computed wrongly from the results.
- A key fact from the results left out so that the message misleads: a condition, a fee, a limit, a
  warning, a required next step.
- Results from different calls or entities merged as if they were one, or as if they agreed when they
  do not.

Severity: a misreading the user is likely to act on (an amount, a date, an eligibility, whether
something was done) is critical; one that misleads about the result, major; a small slip in a detail
nobody would act on, minor.

Not this judge's problem: a statement on a point no tool result covers (hallucination), a part of the
request left unanswered (completeness). Not a problem at all: a paraphrase or summary that keeps the
meaning; results irrelevant to the request left out.

For each discrepancy give `claim_in_answer` (quote the agent's message, with its step; for an omission,
the statement that needed the missing fact), `tool_output_reality` (what the tool result says, quoted
briefly, with its step) and `discrepancy` (how they differ and what a user acting on the message would
get wrong). One issue per discrepancy."""


@register_judge
@dataclass(repr=False)
class ReportingQuality(FailureModeJudge):
    """Outcomes reported with what the user needs: what was done or found, what was not and why, what to check."""

    name: ClassVar[str] = 'reporting_quality'
    failure_mode: ClassVar[str | None] = 'reporting_quality'
    question: ClassVar[str] = 'Did the agent report its results with the context the user needs?'
    rubric: ClassVar[str] = """
Judge how the agent reported the outcome of its work to the user: what it found or did, what it could
not, and what the user needs to rely on the result. A good report says plainly whether the request was
done, partly done or not done; when nothing was found or nothing could be done, it says what was tried
and why it fell short, so the user can point the agent elsewhere or act themselves; when it gives a
result, it gives the user what they need to trust and use it: the essential conditions, the reason
behind a decision, and what to check if it does not work.

What counts as a reporting problem:
- "Not found" or "cannot be done", or a vague non-answer, with no account of what was tried or why.
- A result with nothing to act on if it fails: no condition, no next step, no way to check it.
- A decision (a refusal, a choice among options, a conclusion) given without the reason behind it.
- Conditions, limits or side effects that could make the result fail or surprise the user left unsaid.

Severity: a report that leaves the user unable to tell whether their request was done is major; missing
reasons or conditions that the user needs to act correctly, major; a thinner report than ideal that
still lets the user act, minor.

Not a problem: a short, direct reply to a simple question; an honest "not found" that says what was
tried.

Emit at most one issue: a single assessment of the reporting when it falls short of the above, with
every field filled in. When the reporting meets the standard, answer with an empty "issues" list. Fields:
- `result_type`: `found` (the agent gives a result or says it did what was asked), `not_found` (it
  reports that it found nothing or could not do it), `partial` (part done or answered, with gaps).
- `search_explained`: whether it says what it tried (what matters for `not_found` and `partial`).
- `debugging_context`: whether the user gets what they need to check or act if the result fails.
- `underlying_concepts`: whether it gives the reason behind its result or decision.
- `edge_cases_noted`: whether it states the conditions, limits or side effects that could matter.
- `reasoning`: what is missing and what the user loses, citing steps.
Set a flag that does not apply to true (`search_explained` for a `found` result; the other three for a
`not_found` one or a simple question), so that false always marks a real gap."""


@register_judge
@dataclass(repr=False)
class CitationQuality(FailureModeJudge):
    """Key statements traceable to the evidence behind them, when the agent's instructions or role call for it."""

    name: ClassVar[str] = 'citation_quality'
    failure_mode: ClassVar[str | None] = 'citation_quality'
    question: ClassVar[str] = 'Did the agent point to the evidence behind its key statements where it was expected to?'
    rubric: ClassVar[str] = """
Some agents must let the reader trace their key statements back to the evidence: their instructions ask
for references, or their reader is expected to check and dig further. Judge this only when the agent's
instructions ask for references or evidence, or its role plainly implies it (a research or analysis
report). When neither is the case, answer with an empty "issues" list.

A good reference says exactly where to look (the tool call, the record, the page or file and place) and
quotes the evidence's own words, so the reader can find and verify it. Key statements, figures and
non-obvious conclusions carry one; general knowledge and every sentence do not need one.

What counts as a citation problem:
- Key statements or figures with no reference when references were expected.
- References without the quoted evidence: bare pointers, empty or malformed references.
- Vague or broken references: "the records show", a reference to nothing a tool in the run returned.
- References out of balance: too few for the statements made, or one on nearly every sentence so the
  important ones drown.

Severity: a reference to evidence the run never had (a fabricated reference) is critical; key
statements the reader cannot trace at all, major; missing quotes or uneven references that still let
the reader find the evidence, minor.

Not a problem: general knowledge left untraced; an exact pointer with quoted evidence in any markup; a
run whose tools returned nothing that could be referenced.

Emit at most one issue: a single assessment of the references when they fall short of the above, with
every field filled in. Fields:
- `uncited_claims`: the key statements that needed a reference and had none, quoted briefly.
- `citations_without_snippets`: how many references carry no quoted evidence.
- `citations_with_snippets`: how many carry one.
- `vague_refs`: the vague or broken references, quoted.
- `citation_balance`: `under` (important statements go untraced), `appropriate` (the amount is right;
  the problem lies in quotes or pointers), `over` (nearly everything referenced, burying what matters).
- `reasoning`: what is wrong and what the reader cannot verify because of it, citing steps."""
