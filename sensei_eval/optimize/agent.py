"""The agent runner: (system prompt, query) → a `QueryRecord` the judges can read.

The optimizer and the validator both need to run the *user's* agent under a prompt of our choosing and
keep the full message history. `AgentRunner` is that contract; `PydanticAIRunner` fulfils it for any
pydantic-ai `Agent` by overriding its instructions for one run (`Agent.override(instructions=…)`, a
context variable, so concurrent runs with different prompts don't see each other's) and capturing
`all_messages()` as pydantic-ai message JSON.

`load_runner("package.module:factory")` (or `path/to/file.py:factory`) imports a factory and calls it
with no arguments; it may return an `Agent` (wrapped) or anything with the runner's `run` method.

A run that raises is not a record: `run_query` turns it into an `AgentRunError` the callers count as
an error, so a crashing agent can never look like a clean (or a bad) run.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.usage import UsageLimits

from ..records import ExpectedToolCall, LoadError, QueryRecord, json_error_text, validation_load_error
from .modules import import_spec

__all__ = (
    'AgentRunError',
    'AgentRunner',
    'PydanticAIRunner',
    'Query',
    'load_queries',
    'load_runner',
    'run_query',
)


@dataclass(frozen=True)
class Query:
    """A query to put to the agent: what the optimizer and validator train and test on."""

    query_id: str
    query: str
    expected_tool_calls: list[ExpectedToolCall] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: QueryRecord) -> Query:
        return cls(record.query_id, record.query, record.expected_tool_calls, dict(record.metadata))


class _QueryLine(BaseModel):
    model_config = ConfigDict(extra='ignore')

    query_id: str = Field(min_length=1)
    query: str = Field(min_length=1)
    expected_tool_calls: list[ExpectedToolCall] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def load_queries(path: str | Path) -> tuple[list[Query], list[LoadError]]:
    """The queries of a JSONL file, line by line: a full `QueryRecord` (its history is not used) or a
    `{query_id, query}` line. Bad lines come back as located errors; the good ones are still used."""
    path = Path(path)
    queries: list[Query] = []
    errors: list[LoadError] = []
    try:
        lines = path.read_text(encoding='utf-8-sig').splitlines()
    except (OSError, UnicodeDecodeError) as e:
        return [], [LoadError(str(path), 0, None, f'cannot read the dataset: {e}')]
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        query, error = _query_line(str(path), lineno, line)
        if error is not None:
            errors.append(error)
            continue
        assert query is not None
        if query.query_id in seen:
            message = f'duplicate query_id {query.query_id!r} (first on line {seen[query.query_id]}); this line is skipped'
            errors.append(LoadError(str(path), lineno, 'query_id', message, query.query_id))
            continue
        seen[query.query_id] = lineno
        queries.append(query)
    return queries, errors


def _query_line(file: str, lineno: int, line: str) -> tuple[Query | None, LoadError | None]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        return None, LoadError(file, lineno, None, f'not valid JSON: {json_error_text(e)}')
    if not isinstance(data, dict):
        return None, LoadError(file, lineno, None, f'expected a JSON object, got {type(data).__name__}')
    query_id = data.get('query_id') if isinstance(data.get('query_id'), str) else None
    try:
        if 'messages' in data:
            return Query.from_record(QueryRecord.model_validate(data)), None
        item = _QueryLine.model_validate(data)
    except ValidationError as e:
        return None, validation_load_error(file, lineno, e, query_id)
    return Query(item.query_id, item.query, item.expected_tool_calls, item.metadata), None


@runtime_checkable
class AgentRunner(Protocol):
    """Runs the agent once with `system_prompt` on `query` and returns the run as a record."""

    async def run(self, system_prompt: str, query: Query) -> QueryRecord: ...


class AgentRunError(RuntimeError):
    """The agent failed on one query; carries the query id so reports can name it."""

    def __init__(self, query_id: str, message: str) -> None:
        super().__init__(f'{query_id}: {message}')
        self.query_id = query_id
        self.message = message


@dataclass
class PydanticAIRunner:
    """Runs a pydantic-ai `Agent` with its instructions replaced by the system prompt under test."""

    agent: Agent[Any, Any]
    deps: Any = None
    usage_limits: UsageLimits | None = field(default_factory=lambda: UsageLimits(request_limit=25))

    async def run(self, system_prompt: str, query: Query) -> QueryRecord:
        start = time.perf_counter()
        with self.agent.override(instructions=system_prompt):
            result = await self.agent.run(query.query, deps=self.deps, usage_limits=self.usage_limits)
        messages = ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode='json')
        usage = result.usage
        return QueryRecord(
            query_id=query.query_id,
            query=query.query,
            message_format='pydantic-ai',
            messages=_with_system_prompt(messages, system_prompt),
            prompt_version=prompt_version(system_prompt),
            expected_tool_calls=query.expected_tool_calls,
            metadata={
                **query.metadata,
                'agent_requests': usage.requests,
                'agent_input_tokens': usage.input_tokens,
                'agent_output_tokens': usage.output_tokens,
                'agent_latency_s': round(time.perf_counter() - start, 4),
            },
        )


def prompt_version(system_prompt: str) -> str:
    """A short, stable name for a prompt text: what `QueryRecord.prompt_version` carries for our runs."""
    return 'sha256:' + hashlib.sha256(system_prompt.encode()).hexdigest()[:12]


async def run_query(runner: AgentRunner, system_prompt: str, query: Query) -> QueryRecord:
    """One agent run; any failure becomes an `AgentRunError` naming the query."""
    try:
        return await runner.run(system_prompt, query)
    except AgentRunError:
        raise
    except Exception as e:
        raise AgentRunError(query.query_id, f'agent run failed: {type(e).__name__}: {str(e)[:500]}') from e


def load_runner(spec: str) -> AgentRunner:
    """Import `module:factory` (a dotted module or a .py path) and build the runner it describes."""
    module_name, sep, attr = spec.rpartition(':')
    if not sep or not module_name or not attr:
        raise ValueError(f'--agent wants MODULE:FACTORY (e.g. examples.docs_agent.agent:make_agent), got {spec!r}')
    try:
        module = import_spec(module_name)
    except Exception as e:
        raise ValueError(f'cannot import {module_name!r} for --agent: {type(e).__name__}: {e}') from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise ValueError(f'{module_name!r} has no attribute {attr!r}')
    obj = factory() if callable(factory) and not isinstance(factory, Agent) else factory
    if isinstance(obj, Agent):
        return PydanticAIRunner(obj)
    if isinstance(obj, AgentRunner):
        return obj
    raise ValueError(f'{spec} returned {type(obj).__name__}: expected a pydantic-ai Agent or an AgentRunner')


# ---------------------------------------------------------------------------------------------------
# Helpers


def _with_system_prompt(messages: list[dict[str, Any]], system_prompt: str) -> list[dict[str, Any]]:
    """Instructions are not a message part in pydantic-ai; put the prompt in the first request's
    `instructions` when it is missing, so the stored record shows what the agent was told."""
    for message in messages:
        if message.get('kind') == 'request':
            if not message.get('instructions'):
                message['instructions'] = system_prompt
            break
    return messages
