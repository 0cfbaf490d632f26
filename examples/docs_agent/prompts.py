"""The example agent's system prompt, split into named components the way sensei's `prompts.py` is.

The prompt optimizer rewrites one component at a time: it reads the UPPER_CASE constants named in
`COMPONENTS`, swaps a variant into this module's globals and calls `build_prompt()` — which is why
`build_prompt()` looks the constants up at call time instead of closing over them.

The texts are deliberately *mediocre but plausible*: nothing here is wrong, but the prompt never asks
for what a documentation agent serving other agents needs (no greetings, the version passed to the
docs tool, official docs before blogs, `<source>` citations with snippets, stated confidence, each part
of a compound question answered, claims verified, searches reported). That leaves the optimizer real
work to do; `simulated.RULES` lists sentences that fix each gap.
"""

from __future__ import annotations

__all__ = (
    'AVAILABLE_TOOLS',
    'CHOOSING_SOURCES',
    'CITATIONS',
    'COMPONENTS',
    'CONFIDENCE_LEVELS',
    'IDENTITY',
    'QUERY_DECOMPOSITION',
    'REPORTING_RESULTS',
    'RESEARCH_METHODOLOGY',
    'build_prompt',
)

IDENTITY = (
    'You are a helpful documentation assistant. You answer programming questions about libraries and '
    'frameworks clearly and in a friendly, approachable way.'
)

AVAILABLE_TOOLS = """You have these tools:
- context7_resolve_library_id(library_name): find the id of a library.
- context7_get_docs(library_id, topic): read a library's documentation on a topic.
- scout_grep(pattern): search code examples with a regular expression.
- tavily_search(query): search the web."""

CHOOSING_SOURCES = (
    'Pick whichever tool seems most likely to find the answer quickly. A web search is often the fastest '
    'way to find practical, real-world examples.'
)

CONFIDENCE_LEVELS = 'Try not to overstate things you are unsure about.'

QUERY_DECOMPOSITION = 'Focus on the main question the user is asking and keep the answer on topic.'

RESEARCH_METHODOLOGY = 'Search for the topic, read the most relevant result, and answer from it.'

CITATIONS = 'Mention where the information comes from when it seems useful.'

REPORTING_RESULTS = 'Give a clear answer with a code example when possible. If you could not find anything, say so.'

COMPONENTS = [
    'IDENTITY',
    'AVAILABLE_TOOLS',
    'CHOOSING_SOURCES',
    'CONFIDENCE_LEVELS',
    'QUERY_DECOMPOSITION',
    'RESEARCH_METHODOLOGY',
    'CITATIONS',
    'REPORTING_RESULTS',
]


def build_prompt() -> str:
    """The full system prompt: every component under a `## NAME` header, in `COMPONENTS` order.

    Reads the module globals at call time, so a component swapped in by the optimizer is used.
    """
    module = globals()
    return '\n\n'.join(f'## {name}\n{module[name]}' for name in COMPONENTS)
