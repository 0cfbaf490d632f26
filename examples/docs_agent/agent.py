"""`make_agent()`: the example documentation agent the optimizer and validator run on.

A pydantic-ai `Agent` with the four tools of `tools.py` and the system prompt of `prompts.py` as its
instructions. The optimizer runs it as `with agent.override(instructions=p): await agent.run(query)`,
so a prompt under test replaces `prompts.build_prompt()` for that run only.

The model is, in order: the `model` argument, `$SENSEI_EVAL_AGENT_MODEL` (any pydantic-ai model string,
e.g. `openai:gpt-5.2-mini`), else the scripted offline model of `simulated.py` — so
`--agent examples.docs_agent.agent:make_agent` works on a fresh clone with no key.
"""

from __future__ import annotations

import os

from pydantic_ai import Agent
from pydantic_ai.models import Model

from . import prompts, tools
from .simulated import simulated_model

__all__ = ('AGENT_MODEL_ENV', 'make_agent')

AGENT_MODEL_ENV = 'SENSEI_EVAL_AGENT_MODEL'


def make_agent(model: Model | str | None = None) -> Agent[None, str]:
    """The documentation agent; see the module docstring for how its model is chosen."""
    chosen: Model | str = model or os.environ.get(AGENT_MODEL_ENV) or simulated_model()
    agent: Agent[None, str] = Agent(chosen, instructions=prompts.build_prompt(), name='docs_agent')

    @agent.tool_plain
    def context7_resolve_library_id(library_name: str) -> str:
        """Find the Context7 library id (e.g. '/pydantic/pydantic') for a library name."""
        return tools.context7_resolve_library_id(library_name)

    @agent.tool_plain
    def context7_get_docs(library_id: str, topic: str, version: str | None = None) -> str:
        """Official documentation of a library (id from context7_resolve_library_id) on a topic.

        Args:
            library_id: the Context7 library id, e.g. '/vercel/next.js'.
            topic: what to look up, e.g. 'route handler caching'.
            version: the library version the question is about, e.g. '15' or 'v2'; latest when omitted.
        """
        return tools.context7_get_docs(library_id, topic, version)

    @agent.tool_plain
    def scout_grep(pattern: str) -> str:
        """Regex search (case-insensitive) over the code examples of the documentation; returns file:line matches."""
        return tools.scout_grep(pattern)

    @agent.tool_plain
    def tavily_search(query: str) -> str:
        """Web search: blog posts and community answers (with their publication dates) and other pages."""
        return tools.tavily_search(query)

    return agent
