"""Compatibility: the agent runner lives in `sensei_eval.agents`."""

from __future__ import annotations

from ..agents import (
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
