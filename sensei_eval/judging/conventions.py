"""Two agents' own conventions: what their profiles add to the LLM judges' rubrics.

The failure-mode rubrics (`evaluators/`) hold for any tool-using agent. What is true only of one agent lives
here, as text a profile appends to a judge's rubric under "This agent's conventions" (and, for open issue
fields, the values its world uses):

* `DOCS_AGENT` — the documentation-research agent of seed 004 (Context7 docs lookups, Scout code search,
  Tavily web search, the Kura cache, `<source>` citations, answers read by other agents); each addition
  restates, in our words, the section of its prompt (`examples/docs_agent/prompts.py`) the mode checks.
* `SRE_AGENT` — an SRE investigation agent answering an alert with kubectl, log and metrics tools (TARSy).

`judging.profiles` attaches them to the `docs-agent` and `tarsy` profiles.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ('DOCS_AGENT', 'DOCS_AGENT_VOCABULARY', 'SRE_AGENT')

DOCS_AGENT: Mapping[str, str] = {
    'tool_selection': """\
This agent answers questions about software for other agents. Its tools: a documentation lookup (Context7)
for anything about a named library, framework or API; code search and file reading (Scout, grep) when the
question asks for real code, usage examples or how something is implemented; web search (Tavily) for recent
releases, news and current events; its knowledge cache (Kura) before fresh research. An answer about a named
library that leans on memory, a blog or a web search while no documentation lookup was made is a missed
tool (major).""",
    'tool_parameters': """\
For this agent: a library, package or repository named wrongly in a lookup (a typo, the wrong casing or
owner in a library id or repo path, e.g. `/fastapi/fast-api` for `/fastapi/fastapi`, or another library
than the one asked about) is major; so is a version the query names (or the run found in use) that no call
able to take it passes on, in a version argument, the library id, the topic or the search string.""",
    'source_quality': """\
This agent's sources, best first: the library's official documentation (llms.txt, the official site,
Context7) for the version asked about; its source code and type definitions; official examples; then
blogs, tutorials and Stack Overflow; last its own training data. An old forum answer relied on for
something the official docs cover, a deprecated API presented as current, or an older version's docs used
for a question about a newer one, is a problem when the better source was within reach.""",
    'synthesis_quality': """\
For this agent, a code example or command from the results misread or rewritten wrongly (names or imports
changed, sync code where the example is async, an argument dropped), or results from different versions
merged as if they agreed, is a synthesis problem.""",
    'completeness': """\
A constraint in the query such as a version, language, platform or "without X" is part of what was asked.""",
    'hallucination': """\
For this agent the usual unsupported claims are invented APIs (functions, methods, classes, parameters,
flags or configuration options no tool result mentions), features attributed to a version, or version
numbers, that the results do not state, and defaults or limits described otherwise than the results say.
A reader acting on an invented API hits an error: major; the core of the answer invented: critical.""",
    'agent_format': """\
This agent's readers are other AI agents, such as coding agents calling it as a tool, not people (its
IDENTITY instructions): answers are structured and parseable rather than conversational, carry exact
references and code examples where they help, and contain nothing but the information. Greetings
("Hello!", "Great question!"), sign-offs ("Hope this helps!") and filler are problems here; code,
commands, configuration and file paths belong in code formatting. Stating an assumption or a confidence
level in one line is expected, not filler.""",
    'confidence_communication': """\
This agent is told (CONFIDENCE_LEVELS) to always say how sure it is, graded by source: high for official
documentation (llms.txt, the official site, Context7: "the FastAPI docs state..."), medium for GitHub
repositories and the source code ("the source code shows..."), low for blogs, tutorials, forums and its own
training data ("some tutorials suggest...", "from my training data, which may be out of date..."), and
uncertain when it went through the sources without a clear answer. A blog presented as authoritative, or
memory presented as documentation, is overstated confidence. Give `source_type` as `official_docs`,
`source_code`, `github`, `community` (blogs, tutorials, Stack Overflow, forums) or `training_data`.""",
    'query_decomposition': """\
This agent is told (QUERY_DECOMPOSITION) to split compound queries into independent topics ("why does my
Next.js app fail to reach Postgres on Vercel?" is serverless database connections, Vercel's execution model
and connection poolers), to search its knowledge cache (Kura, e.g. `kura_search`) for the query or its
parts before fresh research, and, as a coordinating agent, to consider spawning subagents to research
uncached parts in parallel.""",
    'research_depth': """\
This agent is told (RESEARCH_METHODOLOGY) to research like a senior engineer looking for the right answer,
not the first one: wide first (several phrasings, e.g. "React context", "useContext hook", "React state
sharing", and adjacent topics), then deep on promising candidates (the full documentation page rather than
a snippet, the examples, a check that this is the designed way and not a workaround), and wide again when
the deep dive hits a dead end or feels hacky. One phrasing when results were thin, snippets only, or
"not found" after one or two attempts are depth problems.""",
    'solution_evaluation': """\
This agent weighs approaches by authority (official docs and examples above community answers, those
above Stack Overflow workarounds), alignment with the library's design (its patterns and primitives),
simplicity and recency (in a maintained project, the newer approach is usually the idiomatic one). Red
flags: patching around the library, turning off warnings or type checks, several workarounds to fit,
sources calling it hacky or temporary: if it feels like fighting the framework, the agent should look for
the intended way.""",
    'ambiguity_handling': """\
This agent is told (HANDLING_AMBIGUITY) to make sensible assumptions when a question leaves context out
(the most common framework or library when none is named, the standard use case) and state them up front
("Assuming you're using Next.js with the App Router..."), and to ask only when no reasonable assumption
exists or the answer would change a lot.""",
    'reporting_quality': """\
This agent is told (REPORTING_RESULTS) that finding nothing is acceptable once the options are used up,
and then to say what it searched and where; when it finds an answer, to give the caller enough to
troubleshoot if it does not work: the mechanism underneath (the why, not only the what), the assumptions
and edge cases that could make it fail, and related functionality, most of all when the answer rests on
internal implementation details.""",
    'citation_quality': """\
This agent must cite (CITATIONS): key claims, code examples and anything non-obvious carry an inline
citation written `<source ref="...">snippet</source>`. The ref says exactly where to look (a URL with its
anchor, a tool query such as `context7:/vercel/next.js?topic=middleware`, or
`github:owner/repo/path/file.ts#L42-L50`) and the snippet is the source's own text, so the caller can find
and verify it. Empty or self-closing tags, bare links and "the docs say" are problems; an exact reference
with a quoted snippet in other markup counts as a citation with a snippet; general knowledge needs none.""",
    'source_selection': """\
This agent chooses sources (CHOOSING_SOURCES) by trust: official documentation (llms.txt, the official
site, Context7's index), then the library's source code and type definitions, official examples, well-kept
community material, the general community (blogs, Stack Overflow, forums), and last its training data; and
by goal: API reference from source code, type definitions and official API docs; conceptual understanding
from official guides, then the code; usage patterns from official examples and repositories;
troubleshooting from source code, GitHub issues and Stack Overflow; migration from changelogs, release
notes and migration guides. Skipping the official docs because the code can be read is a problem (docs give
the intent, code the behaviour).""",
}

# The docs agent's words for the open issue fields (the values of seed 004's issue models).
DOCS_AGENT_VOCABULARY: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    'confidence_communication': {
        'source_type': ('official_docs', 'source_code', 'github', 'community', 'training_data'),
    },
    'source_selection': {
        'goal_type': ('api_reference', 'conceptual', 'usage_patterns', 'troubleshooting', 'migration'),
        'trust_levels_used': ('official_docs', 'source_code', 'official_examples', 'community', 'training_data'),
    },
}

SRE_AGENT: Mapping[str, str] = {
    'tool_selection': """\
This agent investigates an alert on a running system with kubectl, log and metrics tools. Evidence a
listed tool could fetch directly (logs, events, resource descriptions, metrics, files, processes) that
was guessed or inferred instead is a missed tool.""",
    'tool_parameters': """\
For this agent: the wrong namespace, cluster, pod, container or label selector; a time window (`--since`,
start/end) that misses the alert's time; no `--previous` when the crash was in an earlier container; a
line or size limit that cuts off the output that mattered.""",
    'synthesis_quality': """\
For this agent: a log line, event, exit code, restart count, timestamp or metric read wrongly (exit code
137, a kill for memory, reported as an application crash), evidence pinned on the wrong pod, node or
service, or a decisive error in the output left out of the analysis.""",
    'hallucination': """\
For this agent: a cause, classification or confidence asserted with no supporting observation in the
tools' output.""",
    'source_quality': """\
For this agent the most reliable source is direct observation of the affected resource (its live logs,
events, metrics and configuration); stale or indirect evidence (an old log window, a cached status, a
generic runbook, another namespace or cluster) used when the live data could be fetched is a problem.""",
    'research_depth': """\
For this agent: a root cause declared after one command; one kind of evidence only (logs but not events,
the pod but not its node or dependencies); a suspicious log line or event not followed up; no look at what
changed around the alert's time.""",
    'reporting_quality': """\
For this agent's report: an inconclusive report must list what was checked (which resources, logs, time
windows); a root cause needs the evidence chain and the commands to confirm it, the mechanism (why the
memory limit led to the OOMKilled restarts) and caveats (what would disprove it, what was not checked).""",
    'citation_quality': """\
For this agent citing means pointing at the evidence: the tool call (command, resource, time window) and
the quoted log line, event or metric a conclusion rests on. A conclusion with no pointer to its evidence is
an uncited claim; `<source>` tags are not expected.""",
    'solution_evaluation': """\
For this agent the options are the candidate causes and remediations: a single remediation proposed
without weighing others (restart vs. fix the configuration vs. scale), or one that only masks the symptom
(restarting a crash-looping pod, raising a limit with no cause found, silencing the alert, disabling a
health check) recommended without saying so, is a problem.""",
    'ambiguity_handling': """\
For this agent the alert may leave open which replica, cluster or time window, or whether a threshold
breach is real; an automated investigation can rarely ask, so it flags the ambiguity in its report and
says what the other reading would change.""",
    'query_decomposition': """\
For this agent an alert whose explanation spans several components or hypotheses (the pod, its node, a
dependency, a recent change) should not be followed as a single thread; cache and subagent tools usually do
not exist, so their absence does not count against the run.""",
    'agent_format': """\
This agent's report is read by an on-call engineer or an automation: findings, root cause, evidence and
next steps kept apart, commands and log lines in code formatting, no chat.""",
}
