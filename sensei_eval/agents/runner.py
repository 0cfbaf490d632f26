"""The agent runner: (system prompt, query) → a `QueryRecord` the judges can read.

The optimizer and the validator both need to run the *user's* agent under a prompt of our choosing and
keep the full message history. `AgentRunner` is that contract; `PydanticAIRunner` fulfils it for any
pydantic-ai `Agent` and captures `all_messages()` as pydantic-ai message JSON. The prompt under test
must be the *only* prompt the agent sees, wherever the agent keeps its own:

* built with `instructions=` text: replaced for one run with `Agent.override(instructions=…)` (a
  context variable, so concurrent runs with different prompts don't see each other's);
* built with `system_prompt=` text: `override()` cannot replace system prompts, but pydantic-ai adds an
  agent's system prompts only to a run that starts without message history, so the run starts from a
  history holding one `SystemPromptPart` with the prompt under test (the record shows one request with
  that part and the query, as the model saw it);
* system prompt or instruction *functions* (`@agent.system_prompt`, `@agent.instructions`, dynamic or
  not), or both `instructions=` and `system_prompt=` text: refused when the runner is built
  (`AgentPromptError`), because their text is computed per run and may be context rather than prompt —
  silently dropping or keeping it would test another agent. `PydanticAIRunner(agent,
  replace_whole_prompt=True)` opts in to replacing all of it; a factory taking the prompt lets the
  user decide where it goes.

`load_runner("package.module:factory")` (or `path/to/file.py:factory`) imports a factory. One taking no
arguments may return an `Agent` (wrapped) or anything with the runner's `run` method; one taking a
single required argument is called with each prompt under test and returns the `Agent` built with it
(`PromptFactoryRunner`).

A run that raises is not a record: `run_query` turns it into an `AgentRunError` the callers count as
an error, so a crashing agent can never look like a clean (or a bad) run.

`run_and_judge(prompt, queries, AgentRuns(runner), JudgeRunOptions(judges, model))` runs the agent under
a prompt on every query and judges what came out: the one "run, then judge" the optimizer and the validator share
(`run_and_judge_many` for several prompts on the same queries, interleaved).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_ai import Agent
from pydantic_ai.agent import AgentRunResult
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, SystemPromptPart
from pydantic_ai.usage import UsageLimits

from sensei_eval.agents.components import PromptComponents
from sensei_eval.core.errors import ConfigError, LoadError, SenseiError, describe_error, json_error_text, validation_load_error
from sensei_eval.core.records import ExpectedToolCall, QueryRecord
from sensei_eval.core.reports import RecordReport
from sensei_eval.core.user_modules import import_spec
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.record import JudgeEvent, count_judge_calls
from sensei_eval.judging.run_folder import RunFolder
from sensei_eval.judging.runner import judge_records

__all__ = (
    'AgentPromptError',
    'AgentPromptParts',
    'AgentRunError',
    'AgentRunner',
    'AgentRuns',
    'FailedRun',
    'JudgedRuns',
    'PromptFactoryRunner',
    'PydanticAIRunner',
    'Query',
    'RunEvent',
    'agent_prompt_parts',
    'check_agent_prompt',
    'load_queries',
    'load_runner',
    'prompt_text',
    'prompt_version',
    'run_and_judge',
    'run_and_judge_many',
    'run_query',
    'run_record_id',
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


class AgentRunError(SenseiError, RuntimeError):
    """The agent failed on one query; carries the query id so reports can name it."""

    def __init__(self, query_id: str, message: str) -> None:
        super().__init__(message)
        self.query_id = query_id

    def __str__(self) -> str:
        return f'{self.query_id}: {self.message}'

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.query_id, self.message))


class AgentPromptError(ConfigError):
    """The agent keeps a prompt the prompt under test cannot replace cleanly; says how to fix it."""


@dataclass(frozen=True)
class AgentPromptParts:
    """Where a pydantic-ai agent keeps its prompt: static texts and functions, per kind."""

    instructions: int = 0
    instruction_functions: tuple[str, ...] = ()
    system_prompts: int = 0
    system_prompt_functions: tuple[str, ...] = ()

    @property
    def functions(self) -> tuple[str, ...]:
        return self.instruction_functions + self.system_prompt_functions

    @property
    def uses_system_prompt(self) -> bool:
        return bool(self.system_prompts or self.system_prompt_functions)


def agent_prompt_parts(agent: Agent[Any, Any]) -> AgentPromptParts:
    """What the agent was built with. pydantic-ai has no public accessor: this reads the attributes
    `Agent.__init__`, `@agent.instructions` and `@agent.system_prompt` fill (read only)."""
    instructions = [getattr(i, 'instruction', i) for i in getattr(agent, '_instructions', ())]
    system_functions = getattr(agent, '_system_prompt_functions', ())
    return AgentPromptParts(
        instructions=sum(1 for i in instructions if not callable(i)),
        instruction_functions=tuple(f'@agent.instructions {_function_name(i)}' for i in instructions if callable(i)),
        system_prompts=len(getattr(agent, '_system_prompts', ())),
        system_prompt_functions=tuple(
            f'@agent.system_prompt{"(dynamic=True)" if getattr(r, "dynamic", False) else ""} {_function_name(r.function)}'
            for r in system_functions
        ),
    )


_PROMPT_FIX = (
    'Build the agent with its prompt as plain `instructions=` (or `system_prompt=`) text and pass run-time context '
    'in the query or deps; or give --agent a factory taking the prompt (`def make_agent(prompt: str) -> Agent`) so '
    'you decide where it goes; or return `PydanticAIRunner(agent, replace_whole_prompt=True)` from the factory to '
    'have the prompt under test replace all of it.'
)


def check_agent_prompt(agent: Agent[Any, Any], *, replace_whole_prompt: bool = False) -> AgentPromptParts:
    """Refuse (`AgentPromptError`) an agent whose own prompt the prompt under test would not cleanly replace."""
    parts = agent_prompt_parts(agent)
    if replace_whole_prompt:
        return parts
    name = agent.name or 'the agent'
    if parts.functions:
        raise AgentPromptError(
            f'{name} has prompt function(s) {", ".join(parts.functions)}: their text is computed on every run, so the '
            f'prompt under test can neither replace them (it would drop what they add) nor run beside them (the '
            f'agent would be told two prompts). {_PROMPT_FIX}'
        )
    if parts.instructions and parts.system_prompts:
        raise AgentPromptError(
            f'{name} has both instructions= and system_prompt= text: which of them does the prompt under test '
            f'replace? Keep one of them. {_PROMPT_FIX}'
        )
    return parts


@dataclass
class PydanticAIRunner:
    """Runs a pydantic-ai `Agent` with its own prompt replaced by the system prompt under test.

    Where the prompt under test goes follows the agent (see the module docstring): `instructions=` agents
    get `override(instructions=…)`, `system_prompt=` agents a first `SystemPromptPart`. Prompt functions, or
    instructions and system prompt text together, are refused unless `replace_whole_prompt` is set: then
    the prompt under test is everything the agent is told (a system prompt when the agent had any)."""

    agent: Agent[Any, Any]
    deps: Any = None
    usage_limits: UsageLimits | None = field(default_factory=lambda: UsageLimits(request_limit=25))
    replace_whole_prompt: bool = False
    parts: AgentPromptParts = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.parts = check_agent_prompt(self.agent, replace_whole_prompt=self.replace_whole_prompt)

    async def run(self, system_prompt: str, query: Query) -> QueryRecord:
        start = time.perf_counter()
        if self.parts.uses_system_prompt:
            # system prompts are added only to a run without history: start it from our own
            history = [ModelRequest(parts=[SystemPromptPart(system_prompt)])]
            if self.parts.instructions or self.parts.instruction_functions:
                with self.agent.override(instructions=None):
                    result = await self._run(query, history)
            else:
                result = await self._run(query, history)
        else:
            with self.agent.override(instructions=system_prompt):
                result = await self._run(query, None)
        messages = _messages(result)
        _check_told(messages, system_prompt, self.parts.uses_system_prompt)
        return _record(query, system_prompt, result, messages, start)

    async def _run(self, query: Query, history: list[Any] | None) -> AgentRunResult[Any]:
        return await self.agent.run(query.query, message_history=history, deps=self.deps, usage_limits=self.usage_limits)


@dataclass
class PromptFactoryRunner:
    """Runs the agent `factory(prompt)` builds for each prompt under test: for agents that take their prompt
    when they are built, wherever they put it. The agents of the last few prompts are kept."""

    factory: Callable[[str], Any]
    deps: Any = None
    usage_limits: UsageLimits | None = field(default_factory=lambda: UsageLimits(request_limit=25))
    keep: int = 8
    _agents: OrderedDict[str, Agent[Any, Any]] = field(default_factory=OrderedDict, init=False, repr=False)

    def agent_for(self, system_prompt: str) -> Agent[Any, Any]:
        agent = self._agents.get(system_prompt)
        if agent is None:
            agent = self.factory(system_prompt)
            if not isinstance(agent, Agent):
                raise ConfigError(f'the agent factory returned {type(agent).__name__}, expected a pydantic-ai Agent')
            self._agents[system_prompt] = agent
            while len(self._agents) > self.keep:
                self._agents.popitem(last=False)
        self._agents.move_to_end(system_prompt)
        return agent

    async def run(self, system_prompt: str, query: Query) -> QueryRecord:
        start = time.perf_counter()
        agent = self.agent_for(system_prompt)
        result = await agent.run(query.query, deps=self.deps, usage_limits=self.usage_limits)
        return _record(query, system_prompt, result, _messages(result), start)


def _check_told(messages: list[dict[str, Any]], system_prompt: str, as_system_prompt: bool) -> None:
    """The model must have been told the prompt under test, and as the only system prompt: a capability
    or history processor of the agent (e.g. `ReinjectSystemPrompt(replace_existing=True)`) can put the
    agent's own prompt back, and a run under the wrong prompt must not pass for a run under ours."""
    first = next((m for m in messages if m.get('kind') == 'request'), {})
    system = [p.get('content') for p in first.get('parts') or () if p.get('part_kind') == 'system-prompt']
    if as_system_prompt and system != [system_prompt]:
        told = '; '.join(repr(str(t)[:80]) for t in system) or 'none'
        raise AgentPromptError(
            f'the model was not told the prompt under test as the system prompt (system prompts it got: {told}); '
            'something in the agent (a capability such as ReinjectSystemPrompt, a history processor) replaces it'
        )
    if not as_system_prompt and (system or system_prompt not in str(first.get('instructions') or '')):
        raise AgentPromptError(
            'the model was not told the prompt under test as its instructions'
            + (f' (it also got system prompt(s): {"; ".join(repr(str(t)[:80]) for t in system)})' if system else '')
            + '; something in the agent (a capability, a history processor) changes them'
        )


def _messages(result: AgentRunResult[Any]) -> list[dict[str, Any]]:
    return _merge_leading_requests(ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode='json'))


def _record(
    query: Query, system_prompt: str, result: AgentRunResult[Any], messages: list[dict[str, Any]], start: float
) -> QueryRecord:
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
        raise AgentRunError(query.query_id, f'agent run failed: {describe_error(e)}') from e


def load_runner(spec: str) -> AgentRunner:
    """Import `module:factory` (a dotted module or a .py path) and build the runner it describes.

    A factory with one required argument takes the prompt under test (`PromptFactoryRunner`); otherwise it
    is called with no arguments. An `Agent` whose own prompt can't be replaced cleanly is refused here,
    before anything runs (`AgentPromptError`, a `ValueError`)."""
    module_name, sep, attr = spec.rpartition(':')
    if not sep or not module_name or not attr:
        raise ConfigError(f'--agent wants MODULE:FACTORY (e.g. examples.docs_agent.agent:make_agent), got {spec!r}')
    try:
        module = import_spec(module_name)
    except Exception as e:
        raise ConfigError(f'cannot import {module_name!r} for --agent: {describe_error(e)}') from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise ConfigError(f'{module_name!r} has no attribute {attr!r}')
    if isinstance(factory, Agent):
        return PydanticAIRunner(factory)
    if callable(factory) and _required_arguments(factory) == 1:
        return PromptFactoryRunner(factory)
    if callable(factory) and _required_arguments(factory) > 1:
        raise ConfigError(f'{spec} needs {_required_arguments(factory)} arguments: a factory takes none, or only the prompt')
    obj = factory() if callable(factory) else factory
    if isinstance(obj, Agent):
        try:
            return PydanticAIRunner(obj)
        except AgentPromptError as e:
            raise AgentPromptError(f'{spec}: {e}') from None
    if isinstance(obj, AgentRunner):
        return obj
    raise ConfigError(f'{spec} returned {type(obj).__name__}: expected a pydantic-ai Agent or an AgentRunner')


def _required_arguments(factory: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin or a class without a readable signature: call it bare
        return 0
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in positional and p.default is inspect.Parameter.empty)


# ---------------------------------------------------------------------------------------------------
# Helpers


def _with_system_prompt(messages: list[dict[str, Any]], system_prompt: str) -> list[dict[str, Any]]:
    """Instructions are not a message part in pydantic-ai; put the prompt in the first request's
    `instructions` when it carries neither instructions nor a system prompt part, so the stored record
    shows what the agent was told (once)."""
    for message in messages:
        if message.get('kind') == 'request':
            has_system = any(p.get('part_kind') == 'system-prompt' for p in message.get('parts') or ())
            if not message.get('instructions') and not has_system:
                message['instructions'] = system_prompt
            break
    return messages


def _merge_leading_requests(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history we start a `system_prompt=` agent's run from is a request of its own; the model gets
    it merged with the query's request, and the record shows it so: one request."""
    if len(messages) < 2 or messages[0].get('kind') != 'request' or messages[1].get('kind') != 'request':
        return messages
    first, second = messages[0], messages[1]
    if not all(p.get('part_kind') == 'system-prompt' for p in first.get('parts') or ()):
        return messages
    return [{**second, 'parts': [*first['parts'], *second.get('parts', [])]}, *messages[2:]]


def _function_name(fn: Any) -> str:
    return str(getattr(fn, '__qualname__', None) or getattr(fn, '__name__', None) or type(fn).__name__)


# ---------------------------------------------------------------------------------------------------
# Run the agent, then judge: what the optimizer and the validator both do


@dataclass(frozen=True)
class RunEvent:
    """Progress: one agent run finished (`error` is None when it produced a record)."""

    label: str
    query_id: str
    run: int
    error: str | None

    @property
    def side(self) -> str:
        """The label, under the validator's name for it (`old` / `new`)."""
        return self.label


@dataclass(frozen=True)
class FailedRun:
    """An agent run that raised: never a record, never a score, counted as an error."""

    query_id: str
    run: int
    error: AgentRunError

    @property
    def message(self) -> str:
        return self.error.message


@dataclass
class JudgedRuns:
    """One prompt's agent runs and their judging: the records, the runs that failed, the reports."""

    label: str
    prompt: str
    records: list[QueryRecord] = field(default_factory=list)
    failed: list[FailedRun] = field(default_factory=list)
    attempts: int = 0
    reports: list[RecordReport] = field(default_factory=list)


def run_record_id(query_id: str, run: int, runs: int) -> str:
    """The record id of run `run` of a query: `q#r<run>`, or plain `q` when there is a single run."""
    return query_id if runs == 1 else f'{query_id}#r{run}'


def prompt_text(prompt: str | PromptComponents) -> str:
    """The full system prompt: built from components, or the text itself."""
    return prompt.build() if isinstance(prompt, PromptComponents) else prompt


@dataclass(frozen=True)
class AgentRuns:
    """The agent side of a run: the `runner`, `runs` runs per query, at most `concurrency` at once, and
    `on_run` told of each run as it ends."""

    runner: AgentRunner
    runs: int = 1
    concurrency: int = 4
    on_run: Callable[[RunEvent], None] | None = None


async def run_and_judge(
    prompt: str | PromptComponents,
    queries: Sequence[Query],
    agent: AgentRuns,
    options: JudgeRunOptions,
    *,
    run_id: str | None = None,
    run_dir: RunFolder | Path | None = None,
    on_judge: Callable[[JudgeEvent], None] | None = None,
) -> JudgedRuns:
    """Run the agent under `prompt` on every query (`agent.runs` times each), then judge every record that
    came out (`options.repeat` times each). Run r of query `q` is the record `q#r<r>` (plain `q` when
    `runs` is 1); a run that raises is a `FailedRun`. Reports go to `run_dir` when given; `run_id`
    defaults to the prompt's version."""
    text = prompt_text(prompt)
    done = await run_and_judge_many(
        {'': prompt},
        queries,
        agent,
        options,
        run_ids={'': run_id or prompt_version(text)},
        run_dirs={'': run_dir},
        on_judge=None if on_judge is None else (lambda _label, event: on_judge(event)),
    )
    return done['']


async def run_and_judge_many(
    prompts: Mapping[str, str | PromptComponents],
    queries: Sequence[Query],
    agent: AgentRuns,
    options: JudgeRunOptions,
    *,
    run_ids: Mapping[str, str] | None = None,
    run_dirs: Mapping[str, RunFolder | Path | None] | None = None,
    on_judging: Callable[[str, int], None] | None = None,
    on_judge: Callable[[str, JudgeEvent], None] | None = None,
) -> dict[str, JudgedRuns]:
    """`run_and_judge` for several prompts (label → prompt) on the same queries: the agent runs share one
    concurrency limit and are interleaved (query 1 run 1 under each prompt, then the next …) so a drifting
    backend hits every prompt alike; then each prompt's records are judged, in label order.
    `on_judging(label, total judge calls)` is called before a label is judged."""
    runner, runs, on_run, judges, repeat = agent.runner, agent.runs, agent.on_run, options.judges, options.repeat
    if runs < 1 or repeat < 1:
        raise ConfigError('runs and repeat must be at least 1')
    semaphore = asyncio.Semaphore(max(1, agent.concurrency))
    sides = {label: JudgedRuns(label, prompt_text(p), attempts=len(queries) * runs) for label, p in prompts.items()}

    async def one(label: str, query: Query, run: int) -> None:
        side = sides[label]
        async with semaphore:
            try:
                record = await run_query(runner, side.prompt, query)
            except AgentRunError as e:
                side.failed.append(FailedRun(query.query_id, run, e))
                if on_run is not None:
                    on_run(RunEvent(label, query.query_id, run, e.message))
                return
        record = record.model_copy(
            update={
                'query_id': run_record_id(query.query_id, run, runs),
                'prompt_version': record.prompt_version or prompt_version(side.prompt),
                'metadata': {**record.metadata, 'agent_run': {'label': label, 'query_id': query.query_id, 'run': run}},
            }
        )
        side.records.append(record)
        if on_run is not None:
            on_run(RunEvent(label, query.query_id, run, None))

    await asyncio.gather(*(one(label, q, r) for q in queries for r in range(1, runs + 1) for label in prompts))
    order = {run_record_id(q.query_id, r, runs): i for i, q in enumerate(queries) for r in range(1, runs + 1)}
    for side in sides.values():
        side.records.sort(key=lambda rec: order.get(rec.query_id, len(order)))
        if on_judging is not None:
            # what the runner will report: profiles and fused members counted as it counts them
            on_judging(side.label, repeat * count_judge_calls(side.records, judges, options.profile, options.profiles))
        if not side.records or not judges:
            continue

        def tracked(event: JudgeEvent, label: str = side.label) -> None:
            if on_judge is not None:
                on_judge(label, event)

        side.reports = await judge_records(
            side.records,
            options,
            run_id=(run_ids or {}).get(side.label) or prompt_version(side.prompt),
            run_dir=(run_dirs or {}).get(side.label),
            on_judge=tracked,
        )
    return sides
