"""Output judges: is the answer true to the tool results, complete, well reported and well cited?

The standard `hallucination`, `completeness` and `synthesis_quality` (judged from the transcript alone),
and `reporting_quality` and `citation_quality` (judged against the agent's REPORTING_RESULTS and
CITATIONS instructions, which each rubric restates since the judge never sees the agent's system prompt).

Hallucination and synthesis quality differ in what the tools said: a claim on a point no tool result
covers is a hallucination; a claim that contradicts, misreads or drops what a tool did return is a
synthesis problem. A hallucination weighs by severity: a minor one costs a quarter of the mode's score,
a critical one all of it. Reporting and citation quality are assessments: at most one issue per run,
whose fields grade the shortfall and set its weight (see each `issue_weight`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sensei_eval.core.issues import CitationIssue, HallucinationIssue, Issue, ReportingIssue
from sensei_eval.evaluators.base import FailureModeJudge

__all__ = ('CitationQuality', 'Completeness', 'Hallucination', 'ReportingQuality', 'SynthesisQuality')

# Score taken off per hallucination, by its severity.
_SEVERITY_WEIGHT = {'minor': 0.25, 'major': 0.5, 'critical': 1.0}


@dataclass(repr=False)
class Hallucination(FailureModeJudge):
    """Claims in the answer that no tool result supports."""

    name: ClassVar[str] = 'hallucination'
    failure_mode: ClassVar[str | None] = 'hallucination'
    question: ClassVar[str] = 'Did the agent claim things that its tool results do not support?'
    rubric: ClassVar[str] = """
Check each concrete claim in the final answer against the tool results in the transcript:
- Functions, methods, classes, parameters, flags or configuration options named in the answer that no
  tool result mentions (invented APIs).
- Features attributed to a version, or version numbers, that the tool results do not state.
- Behaviour, defaults or limits described differently from what the tool results say.
- For an investigation: causes, classifications or confidence asserted with no supporting observation.

General knowledge that needs no source (what HTTP is, Python syntax) is not a hallucination. A claim the
agent clearly marks as unverified or as its own assumption is not a hallucination either.

For each unsupported claim give `hallucinated_claim` (quote it), `what_tools_actually_said` (what the
results say on that point, or that they say nothing) and `severity`: `minor` (a side detail a reader
would not act on), `major` (a reader acting on it would hit an error or wrong behaviour), `critical`
(the core of the answer is invented)."""

    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, HallucinationIssue)
        return _SEVERITY_WEIGHT[issue.severity]


@dataclass(repr=False)
class Completeness(FailureModeJudge):
    """Every part of the query answered."""

    name: ClassVar[str] = 'completeness'
    failure_mode: ClassVar[str | None] = 'completeness'
    question: ClassVar[str] = 'Did the final answer address every part of the query?'
    rubric: ClassVar[str] = """
Split the query into the things it asks (questions, sub-questions, constraints such as a version,
language or environment) and check that the final answer addresses each one:
- A multi-part question where one part gets no answer, or only a vague mention.
- A constraint in the query (a version, a platform, "without X") that the answer ignores.
- Context from earlier turns that the answer should have taken into account but did not.
- Edge cases or caveats the query explicitly asked about that are left out.

An honest "I could not find this, here is what I searched" counts as addressing a part. Extra material
beyond the query is not a completeness problem.

For each gap give `missed_aspects` (the parts of the query left unanswered) and `reasoning`."""


@dataclass(repr=False)
class SynthesisQuality(FailureModeJudge):
    """The answer says what the tool results said: no contradiction, misreading or dropped key fact."""

    name: ClassVar[str] = 'synthesis_quality'
    failure_mode: ClassVar[str | None] = 'synthesis_quality'
    question: ClassVar[str] = 'Does the final answer accurately reflect what the tools returned?'
    rubric: ClassVar[str] = """
Set the final answer beside the tool results it draws on. What counts as a synthesis problem:
- The answer contradicts a tool result: another default, signature, argument order, limit or version
  than the result gives, or a recommendation of something the source warns against.
- A key fact from the results is left out, so the answer misleads: a caveat, a deprecation notice, a
  required extra step or setting, a condition under which the solution does not work.
- A code example or command from the results misread or rewritten wrongly: names or imports changed,
  sync code where the example is async, an argument dropped, the pattern applied where the source says
  it does not apply.
- Results from different sources or versions merged as if they agreed when they do not.
- For an infrastructure investigation: a log line, event, exit code, restart count, timestamp or metric
  read wrongly (e.g. exit code 137, a kill for memory, reported as an application crash), evidence
  pinned on the wrong pod, node or service, or a decisive error in the output left out of the analysis.

This mode is about misrepresenting what the tools did return. A claim on a point the results say nothing
about is a hallucination (another judge), and a part of the query left unanswered is a completeness
problem; neither belongs here. Not a problem either: a paraphrase or summary that keeps the meaning;
tool output irrelevant to the query left out; several results combined correctly.

For each discrepancy give `claim_in_answer` (quote the answer; for an omission, the statement that needed
the missing fact), `tool_output_reality` (what the tool result says on that point, quoted briefly, with
its step) and `discrepancy` (how the two differ and what a reader acting on the answer would get wrong).
Use one issue per discrepancy."""


# Reporting: a "not found" that does not say what was searched leaves the caller nothing to act on, so
# it costs the whole score; otherwise each missing piece of troubleshooting context costs a quarter,
# on top of a quarter for being flagged at all (so one gap costs half, three gaps all of it).
def _reporting_weight(issue: ReportingIssue) -> float:
    if issue.result_type != 'found' and not issue.search_explained:
        return 1.0
    flags = (issue.debugging_context, issue.underlying_concepts, issue.edge_cases_noted)
    gaps = 0 if issue.result_type == 'not_found' else sum(not f for f in flags)
    return min(1.0, 0.25 + 0.25 * gaps)


@dataclass(repr=False)
class ReportingQuality(FailureModeJudge):
    """Results reported with context: what was searched when nothing was found, the why and the caveats when it was."""

    name: ClassVar[str] = 'reporting_quality'
    failure_mode: ClassVar[str | None] = 'reporting_quality'
    question: ClassVar[str] = 'Did the agent report its results with the context the caller needs?'
    rubric: ClassVar[str] = """
The agent was told how to report (its REPORTING_RESULTS instructions, paraphrased): finding nothing is an
acceptable outcome, better than a weak or wrong answer, but only once the options are genuinely used up;
and when it finds nothing it says what it searched and where, so the caller can point it elsewhere. When
it does find an answer it gives the caller enough to troubleshoot if the answer does not work: the model
or mechanism underneath (the why, not only the what), the assumptions and edge cases that could make the
solution fail, and related functionality worth knowing — most of all when the answer rests on internal
implementation details.

What counts as a reporting problem:
- "Not found", or a vague non-answer, with no account of what was searched and where.
- A solution with nothing to debug it by when it fails: no what-to-check, no error to expect, no setting
  to verify.
- A bare recipe with no explanation of the mechanism behind it.
- Assumptions or edge cases that would break the solution, left unmentioned.
- For an SRE investigation: an inconclusive report that does not list what was checked (which
  resources, logs, time windows); a root cause given without the evidence chain or the commands to
  confirm it, without the mechanism (e.g. why the memory limit led to the OOMKilled restarts), or
  without caveats (what would disprove it, what was not checked).

What is not a problem: a short, direct answer to a simple factual question (a default value, what a
function returns) needs no essay on concepts or edge cases; an honest "not found" that lists the
searches made is a good report, not a failure.

Emit at most one issue: a single assessment of the final report when it falls short of the above, with
every field filled in. When the report meets the standard, answer with an empty "issues" list. Fields:
- `result_type`: `found` (the answer claims a solution, or a cause for an alert), `not_found` (it reports
  that it found no answer), `partial` (it answers part of the question and reports gaps in the rest).
- `search_explained`: whether it says what it searched and where (what matters for `not_found` and
  `partial`).
- `debugging_context`: whether the caller gets what it needs to troubleshoot if the answer fails.
- `underlying_concepts`: whether the answer explains why its solution works.
- `edge_cases_noted`: whether it states the assumptions, limits or edge cases that could make it fail.
- `reasoning`: what is missing and what the caller loses, citing steps.
Set a flag that does not apply to true — `search_explained` for a `found` result; the other three for a
`not_found` one or for a simple factual question — so that false always marks a real gap."""

    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, ReportingIssue)
        return _reporting_weight(issue)


@dataclass(repr=False)
class CitationQuality(FailureModeJudge):
    """Key claims cited with an exact reference and the snippet behind them, neither too few nor too many."""

    name: ClassVar[str] = 'citation_quality'
    failure_mode: ClassVar[str | None] = 'citation_quality'
    question: ClassVar[str] = 'Did the agent cite its sources properly?'
    rubric: ClassVar[str] = """
The agent was told how to cite (its CITATIONS instructions, paraphrased): its callers are agents that
want to check and dig further, so key claims, code examples and anything non-obvious carry an inline
citation, written `<source ref="...">snippet</source>`. The ref says exactly where to look — a URL with
its anchor, a tool query such as `context7:/vercel/next.js?topic=middleware`, or a file and line range
such as `github:owner/repo/path/file.ts#L42-L50` — and the snippet is the source's own text, with a line
or two around it, so the caller can find and verify the passage. It should not cite every sentence,
only what a caller would want to check or explore.

What counts as a citation problem:
- Key claims, code examples or non-obvious facts with no citation.
- Citations without a snippet: empty or self-closing tags, bare links.
- Vague or broken references: "the docs say", "according to the documentation", a ref with no page or
  location, or a ref to something no tool in the transcript returned.
- Citations out of balance: too few for the claims made, or one on nearly every sentence so that the
  important ones drown.
- For an SRE investigation, citing means pointing at the evidence: the tool call (command, resource,
  time window) and the quoted log line, event or metric a conclusion rests on; `<source>` tags are not
  expected there. A conclusion with no pointer to its evidence is an uncited claim.

What is not a problem: general knowledge left uncited; an exact reference plus a quoted snippet written
in other markup (a link followed by a quote), which counts as a citation with a snippet; a run whose
tools returned nothing citable.

Emit at most one issue: a single assessment of the final answer's citations when they fall short of
the above, with every field filled in. When citing is adequate, answer with an empty "issues" list.
Fields:
- `uncited_claims`: the key claims that needed a citation and had none, quoted briefly.
- `citations_without_snippets`: how many citations in the final answer carry no snippet.
- `citations_with_snippets`: how many carry one.
- `vague_refs`: the vague or broken references, quoted (e.g. "the docs say").
- `citation_balance`: `under` (important claims go uncited), `appropriate` (the amount is right; the
  problem lies in snippets or refs), `over` (nearly everything cited, burying what matters).
- `reasoning`: what is wrong and what the caller cannot verify because of it, citing steps."""

    # Nothing in the answer can be checked when no citation carries a snippet: the whole score. Over-citing
    # only adds noise (everything stays checkable): a quarter. Anything else: the default half.
    def issue_weight(self, issue: Issue) -> float:
        assert isinstance(issue, CitationIssue)
        if issue.citations_with_snippets == 0:
            return 1.0
        if issue.citation_balance == 'over':
            return 0.25
        return 0.5
