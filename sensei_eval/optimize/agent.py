"""Compatibility: the agent runner lives in `sensei_eval.agents.runner`."""

from __future__ import annotations

from sensei_eval.agents.runner import (
    AgentPromptError,
    AgentRunError,
    AgentRunner,
    PromptFactoryRunner,
    PydanticAIRunner,
    Query,
    load_queries,
    load_runner,
    prompt_version,
    run_query,
)

__all__ = (
    'AgentPromptError',
    'AgentRunError',
    'AgentRunner',
    'PromptFactoryRunner',
    'PydanticAIRunner',
    'Query',
    'load_queries',
    'load_runner',
    'prompt_version',
    'run_query',
)
