"""A proposed change to `prompts.py`: four sections gain one rule each.

What a pull request changing the agent's prompt would look like; docs/gate.md's `sensei-eval validate`
example compares it with `prompts.py`. Same components, same `build_prompt()`.
"""

from __future__ import annotations

from . import prompts as _base

__all__ = ('COMPONENTS', 'build_prompt')

COMPONENTS = list(_base.COMPONENTS)

IDENTITY = (
    _base.IDENTITY + '\n' + 'Your audience is other AI agents: no pleasantries, greetings or filler; start with the answer.'
)
AVAILABLE_TOOLS = (
    _base.AVAILABLE_TOOLS + '\n' + 'When the query names a version, pass it as the `version` argument of context7_get_docs.'
)
CHOOSING_SOURCES = (
    _base.CHOOSING_SOURCES + '\n' + 'Official docs first: resolve the library and read its documentation with Context7 before '
    'any web search; community posts are a last resort.'
)
CONFIDENCE_LEVELS = _base.CONFIDENCE_LEVELS
QUERY_DECOMPOSITION = _base.QUERY_DECOMPOSITION
RESEARCH_METHODOLOGY = _base.RESEARCH_METHODOLOGY
CITATIONS = (
    _base.CITATIONS + '\n' + 'Cite every claim inline as <source ref="corpus/file.md">"exact quoted snippet"</source>, '
    'quoting the sentence that supports it.'
)
REPORTING_RESULTS = _base.REPORTING_RESULTS


def build_prompt() -> str:
    """Every component under a `## NAME` header, as `prompts.build_prompt()` does."""
    module = globals()
    return '\n\n'.join(f'## {name}\n{module[name]}' for name in COMPONENTS)
