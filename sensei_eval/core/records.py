"""Rated query histories: one agent run, as the judges see it.

A `QueryRecord` carries the user query (or a TARSy alert), the agent's full message history, an
optional rating from the calling agent or a human, the prompt version that produced it and, when
known, the tool calls a good run would make.

Messages arrive in one of three formats, named by `message_format` or detected from their shape:

* `pydantic-ai` — the JSON of `pydantic_ai.messages.ModelMessagesTypeAdapter`;
* `openai` — chat-completions messages (`system`/`user`/`assistant` with `tool_calls`, `tool` results);
* `tarsy` — TARSy sessions: `{role, content}` turns with tool use written ReAct-style in the text
  (`Action:` / `Action Input:` in an assistant turn, `Observation:` in the next user turn).

Whatever the format, the record is normalised once, at validation time, into pydantic-ai
`ModelMessage`s (`QueryRecord.model_messages`), so the rest of the library reads one shape. A message
history that can't be normalised is a validation error that names the offending field
(`messages[3].tool_calls[0].function.arguments`), never a silently shorter history.

A dataset is a JSONL file, one record a line; `sensei_eval.core.datasets` reads it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)

from sensei_eval.core.errors import LoadError, RecordFieldError
from sensei_eval.core.message_formats import (
    FINAL_ANSWER_TOOLS,
    MessageFormat,
    alert_summary,
    call_args,
    detect_format,
    first_user_text,
    parse_messages,
    strip_final_answer_marker,
    tool_answer,
)

__all__ = (
    'MAX_RECORD_BYTES',
    'RATING_DIMENSIONS',
    'ExpectedToolCall',
    'LoadResult',
    'QueryRecord',
    'Rating',
    'ToolCall',
    'ToolSpec',
    'looks_like_error',
    'pair_tool_calls',
)

# How close an unknown field name must be to a known one for "did you mean" (difflib's ratio): `ratings` and
# `rating` are 0.92 apart, `expected_calls` and `expected_tool_calls` 0.85; unrelated names stay under 0.6.
_DID_YOU_MEAN_CUTOFF = 0.6


# One JSONL line larger than this is refused: a record that big is almost always a mistake (a log dump
# pasted into a tool result), and reading it would stall the whole run. Override per call when needed.
MAX_RECORD_BYTES = 16 * 1024 * 1024


# The dimensions of the agent's `/rate` endpoint, each on the rating's scale.
RATING_DIMENSIONS = ('correctness', 'relevance', 'usefulness')
_RATING_HELP = (
    'give correctness, relevance and/or usefulness (1-5 unless "max" says otherwise), '
    'a "score" with its scale (e.g. {"score": 7, "max": 10}), or "thumbs_up": true/false'
)


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


class Rating(BaseModel):
    """The calling agent's (or a human's) rating of a run, in whichever shape the user has it:

    * the agent's `/rate` endpoint: `correctness`, `relevance`, `usefulness`, each 1-5, any of them
      (`{"correctness": 4}` alone is a rating);
    * one overall `score` on a scale with a stated maximum: `{"score": 7, "max": 10}` (`max` also sets the
      scale of the dimensions above: `{"correctness": 8, "max": 10}`); `min` is 1 on the default 1-5
      scale and 0 once `max` is given, unless stated (`{"score": 3, "min": 1, "max": 7}`);
    * thumbs: `{"thumbs_up": true}` (or false).

    `value` puts every shape on one scale, 0 (worst) to 1 (best); `mean` and `lowest` on the 1-5 scale.
    A value off its scale or a rating with no value is a located error (`rating.score`)."""

    model_config = ConfigDict(extra='forbid')

    correctness: int | float | None = None
    relevance: int | float | None = None
    usefulness: int | float | None = None
    score: int | float | None = None
    max: int | float | None = None
    min: int | float | None = None
    thumbs_up: bool | None = None
    reasoning: str | None = None
    agent_model: str | None = None
    agent_system: str | None = None
    agent_version: str | None = None

    @model_validator(mode='before')
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise RecordFieldError('rating', f'a bare {str(data).lower()}: write thumbs as {{"thumbs_up": {str(data).lower()}}}')
        if isinstance(data, int | float):
            raise RecordFieldError('rating', f'a bare number ({data}) has no scale: {_RATING_HELP}')
        if isinstance(data, dict):
            for name in (*RATING_DIMENSIONS, 'score', 'max', 'min'):
                value = data.get(name)
                if isinstance(value, bool):
                    raise RecordFieldError(f'rating.{name}', 'expected a number, got true/false (thumbs go in "thumbs_up")')
                if value is not None and not isinstance(value, int | float) and not _is_number(value):
                    raise RecordFieldError(f'rating.{name}', f'expected a number, got {json.dumps(value)[:40]}')
                if value is not None and not cls._finite(value):
                    # NaN and ±Infinity (as numbers or as the text "Infinity") are no point on any scale, and
                    # a JSON store would keep them as null: an empty rating where the user sent one
                    raise RecordFieldError(f'rating.{name}', f'expected a finite number, got {cls._shown(value)}')
        return data

    @staticmethod
    def _finite(value: int | float | str) -> bool:
        try:
            return math.isfinite(float(value))
        except OverflowError:  # an integer past a float's range
            return False

    @staticmethod
    def _shown(value: int | float | str) -> str:
        if isinstance(value, int) and value.bit_length() > 64:
            return f'an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits'
        return json.dumps(value)[:40]

    @model_validator(mode='after')
    def _check_scale(self) -> Rating:
        low, high = self.scale
        if high <= low:
            raise RecordFieldError('rating.max', f'the scale {low:g}-{high:g} is empty: "max" must be above "min"')
        given = self._values()
        if not given and self.thumbs_up is None:
            raise RecordFieldError('rating', f'no rating value: {_RATING_HELP}')
        for name, value in given:
            if not low <= value <= high:
                hint = ' (the default scale is 1-5: state yours, e.g. {"score": 7, "max": 10})' if self.max is None else ''
                raise RecordFieldError(f'rating.{name}', f'{value:g} is outside the scale {low:g}-{high:g}{hint}')
        return self

    def _values(self) -> list[tuple[str, float]]:
        return [(n, float(v)) for n in (*RATING_DIMENSIONS, 'score') if (v := getattr(self, n)) is not None]

    @property
    def scale(self) -> tuple[float, float]:
        """The (lowest, highest) value of this rating's scale."""
        high = 5.0 if self.max is None else float(self.max)
        low = float(self.min) if self.min is not None else (1.0 if self.max is None else 0.0)
        return low, high

    def _normalised(self) -> list[float]:
        low, high = self.scale
        parts = [(v - low) / (high - low) for _, v in self._values()]
        if self.thumbs_up is not None:
            parts.append(1.0 if self.thumbs_up else 0.0)
        return parts

    @property
    def value(self) -> float:
        """The rating from 0 (worst) to 1 (best): the mean of every value given, each on its scale."""
        parts = self._normalised()
        return sum(parts) / len(parts)

    @property
    def mean(self) -> float:
        """`value` on the 1-5 scale (for 1-5 dimensions: their mean)."""
        return 1 + 4 * self.value

    @property
    def lowest(self) -> float:
        """The lowest value given, on the 1-5 scale (thumbs down is 1, thumbs up 5)."""
        return 1 + 4 * min(self._normalised())


class ExpectedToolCall(BaseModel):
    """A tool call a good run of this query makes; `args` None means any arguments will do.

    `required` False makes a missing call an advisory finding rather than a failed run; None leaves it
    to the reference check (read-only tools are advisory by default: `evaluators.reference`)."""

    model_config = ConfigDict(extra='forbid')

    tool_name: str = Field(min_length=1)
    args: dict[str, Any] | None = None
    required: bool | None = None


class ToolSpec(BaseModel):
    """A tool the agent had: what a judge needs to tell "a tool that should have been called" from guesswork.

    Written as an OpenAI function definition, either shape: `{"type": "function", "function": {"name": ...,
    "description": ..., "parameters": {...}}}` or the inner object alone (`{"name": ..., "description": ...,
    "parameters": {...}}`, the shape of MCP's `tools/list` without `inputSchema`'s name, and of the OTel GenAI
    `gen_ai.tool.definitions`). `inputSchema` (MCP) is read as `parameters`."""

    model_config = ConfigDict(extra='ignore')

    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None

    @model_validator(mode='before')
    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        if isinstance(data, dict):
            inner = data.get('function')
            if data.get('type') == 'function' and isinstance(inner, dict):
                data = inner
            if 'parameters' not in data and isinstance(data.get('inputSchema'), dict):
                data = {**data, 'parameters': data['inputSchema']}
        return data


# A tool result that reports a failure: error words where tools put their status (the start), an error
# field, or a short "not found". Docs that merely discuss errors further in don't count.
_ERROR_START = re.compile(
    r'^\W{0,3}(error|exception|traceback|failed|failure|fatal)\b|^\{\s*"errors?"\s*:|"status"\s*:\s*"(error|failed)"'
    r'|^(404|500|502|503)\b',
    re.IGNORECASE,
)
_SHORT_FAILURE = re.compile(r'\b(not found|no such|does not exist|forbidden|unauthorized)\b', re.IGNORECASE)


def looks_like_error(text: str) -> bool:
    """Whether a tool result reports a failure rather than content."""
    text = text.strip()
    return bool(_ERROR_START.search(text[:400])) or (len(text) < 300 and bool(_SHORT_FAILURE.search(text)))


@dataclass(frozen=True)
class ToolCall:
    """A tool call as it happened in the record, with its result (None when it never came back).

    `call_at` and `result_at` are (message, part) positions in `QueryRecord.model_messages`, so the
    transcript can map a call and its result to their step numbers."""

    tool_name: str
    args: dict[str, Any] | str
    tool_call_id: str
    result: str | None
    call_at: tuple[int, int] | None = None
    result_at: tuple[int, int] | None = None

    @property
    def failed(self) -> bool:
        return self.result is not None and looks_like_error(self.result)


_Located = tuple[int, int, Any]  # (message index, part index, part)


def pair_tool_calls(messages: Sequence[ModelMessage]) -> list[tuple[_Located, _Located | None]]:
    """Each tool call with its result, by order within the turn; the id is only a hint.

    Many real logs reuse ids (restarting at `call_0` each turn, or one id for every call), so a
    result is paired with a call still waiting for one: among the waiting calls with its id, the one
    of the latest turn (the earliest of that turn); failing that, the earliest waiting call of the
    latest turn with its tool name; failing that, the earliest waiting call of the latest turn.
    A call whose result never came is paired with None."""
    pending: list[tuple[int, _Located, int]] = []  # (turn, call, its index in `pairs`) waiting for a result
    pairs: list[tuple[_Located, _Located | None]] = []
    turn = 0
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            turn += 1
            for j, rpart in enumerate(message.parts):
                if isinstance(rpart, ToolCallPart):
                    pending.append((turn, (i, j, rpart), len(pairs)))
                    pairs.append(((i, j, rpart), None))
        else:
            for j, qpart in enumerate(message.parts):
                if not isinstance(qpart, ToolReturnPart | RetryPromptPart) or not pending:
                    continue
                if isinstance(qpart, RetryPromptPart) and qpart.tool_name is None:
                    continue
                pick = _pick_waiting(pending, qpart.tool_call_id, qpart.tool_name)
                if pick is None:
                    continue
                _, call, index = pending.pop(pick)
                if isinstance(qpart, ToolReturnPart):
                    pairs[index] = (call, (i, j, qpart))
    return pairs


def _pick_waiting(pending: list[tuple[int, _Located, int]], call_id: str, tool_name: str | None) -> int | None:
    """The waiting call a result belongs to (see `pair_tool_calls`), as an index into `pending`."""
    tests: tuple[Callable[[Any], bool], ...] = (
        lambda c: c.tool_call_id == call_id,
        lambda c: c.tool_name == tool_name,
        lambda c: True,
    )
    for wanted in tests:
        fitting = [k for k, (_, c, _) in enumerate(pending) if wanted(c[2])]
        if fitting:
            latest = max(pending[k][0] for k in fitting)
            return next(k for k in fitting if pending[k][0] == latest)
    return None


def _no_unknown_fields(data: dict[Any, Any], model: type[BaseModel], prefix: str) -> None:
    """Raise a `RecordFieldError` at the first key of `data` that `model` has no field for, with the closest
    field name when one is close enough (`difflib`), else the names it has."""
    import difflib

    known = sorted(model.model_fields)
    for key in data:
        if key in model.model_fields:
            continue
        guess = difflib.get_close_matches(str(key), known, n=1, cutoff=_DID_YOU_MEAN_CUTOFF)
        hint = f'did you mean `{guess[0]}`?' if guess else f'the fields are {", ".join(known)}'
        raise RecordFieldError(f'{prefix}{key}', f'unknown field: {hint}')


class QueryRecord(BaseModel):
    """One rated agent run. `messages` keeps what the user gave; `model_messages` is the normalised form."""

    model_config = ConfigDict(extra='forbid')

    query_id: str = Field(min_length=1)
    query: str = ''
    message_format: MessageFormat | None = None
    messages: list[dict[str, Any]]
    rating: Rating | None = None
    prompt_version: str | None = None
    expected_tool_calls: list[ExpectedToolCall] | None = None
    # What the agent must tell the user, as tau-bench's required outputs: strings its replies must contain
    # (numbers compared as numbers, case and whitespace folded). None: no reference for outputs.
    expected_outputs: list[str] | None = None
    # The tools the agent had (None: the inventory is unknown; []: it had none). Judges are shown them.
    tools: list[ToolSpec] | None = None
    alert_data: dict[str, Any] | str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    _model_messages: list[ModelMessage] = PrivateAttr(default_factory=list)
    _input_warnings: list[str] = PrivateAttr(default_factory=list)

    @field_validator('expected_outputs', mode='before')
    @classmethod
    def _outputs_as_text(cls, value: Any) -> Any:
        """A required output written as a JSON number (`4`) is the text a reply must say (`"4"`)."""
        if isinstance(value, list):
            return [str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for v in value]
        return value

    @model_validator(mode='before')
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        """A field the record (or its rating, or an expected call) does not have is a located error naming the
        closest known field (`ratings`: did you mean `rating`?), not pydantic's bare "extra inputs"."""
        if isinstance(data, dict):
            _no_unknown_fields(data, cls, '')
            if isinstance(rating := data.get('rating'), dict):
                _no_unknown_fields(rating, Rating, 'rating.')
            if isinstance(calls := data.get('expected_tool_calls'), list):
                for n, call in enumerate(calls):
                    if isinstance(call, dict):
                        _no_unknown_fields(call, ExpectedToolCall, f'expected_tool_calls[{n}].')
        return data

    @model_validator(mode='after')
    def _normalise(self) -> QueryRecord:
        if not self.query_id.strip():
            raise RecordFieldError('query_id', 'blank: a query_id needs at least one visible character')
        for n, output in enumerate(self.expected_outputs or []):
            if not output.strip():  # it would be found in every reply: a requirement that requires nothing
                raise RecordFieldError(f'expected_outputs[{n}]', 'blank: a required output needs at least one visible character')
        if not self.messages:
            raise RecordFieldError('messages', 'the message history is empty')
        if self.message_format is None:
            self.message_format = detect_format(self.messages)
        prefix = self.metadata.get('speaker_prefix')
        if prefix is not None and not isinstance(prefix, bool | str):
            raise RecordFieldError('metadata.speaker_prefix', 'expected true, false, "bracket", "colon" or a regular expression')
        self._model_messages = parse_messages(self.messages, self.message_format, speaker_prefix=prefix)
        if not self.query.strip():
            self.query = first_user_text(self._model_messages) or alert_summary(self.alert_data)
        if not self.query.strip():
            raise RecordFieldError('query', 'empty, and no user turn or alert to take it from')
        return self

    @classmethod
    def from_pydantic_ai(cls, run: Any, *, query_id: str | None = None, agent: Any = None, **fields: Any) -> QueryRecord:
        """The record of a pydantic-ai run: `run` is an `AgentRunResult` (or anything with `all_messages()`)
        or a list of `ModelMessage`s. `query_id` defaults to a hash of the messages; other record fields
        (`rating`, `expected_tool_calls`, `metadata`, `tools`, ...) go in `fields`. With `agent`, the record's
        `tools` are the agent's function tools (a run's messages do not carry the tools it had; toolsets
        that list their tools only at run time, such as MCP servers, need `tools=`). A task's output needs
        no glue:

            async def task(query: str) -> QueryRecord:
                return QueryRecord.from_pydantic_ai(await agent.run(query), agent=agent)
        """

        history = run.all_messages() if hasattr(run, 'all_messages') else run
        if not isinstance(history, list | tuple):
            got = type(run).__name__
            raise RecordFieldError('messages', f'expected a pydantic-ai run result or a list of messages, got {got}')
        messages = ModelMessagesTypeAdapter.dump_python(list(history), mode='json')
        if agent is not None and 'tools' not in fields:
            fields['tools'] = _agent_tools(agent)
        return cls._from_messages(messages, 'pydantic-ai', query_id, fields)

    @classmethod
    def from_openai(cls, messages: Sequence[Any], *, query_id: str | None = None, **fields: Any) -> QueryRecord:
        """The record of an OpenAI chat-completions history (dicts, or the SDK's message objects)."""
        plain = [m.model_dump(exclude_none=True) if hasattr(m, 'model_dump') else m for m in messages]
        return cls._from_messages(plain, 'openai', query_id, fields)

    @classmethod
    def _from_messages(
        cls, messages: list[Any], message_format: MessageFormat, query_id: str | None, fields: dict[str, Any]
    ) -> QueryRecord:
        if query_id is None:  # the same run gets the same id, so reports and the cache line up across calls
            blob = json.dumps(messages, sort_keys=True, default=str).encode()
            query_id = f'run-{hashlib.sha256(blob).hexdigest()[:12]}'
        return cls(query_id=query_id, messages=messages, message_format=message_format, **fields)

    @property
    def model_messages(self) -> list[ModelMessage]:
        return self._model_messages

    @property
    def input_warnings(self) -> list[str]:
        """What was changed in the record's text as it was loaded (lone surrogates, NULs); reports carry it."""
        return self._input_warnings

    def tool_calls(self) -> list[ToolCall]:
        """Every tool call in order, each paired with its result (`pair_tool_calls`: the one pairing
        every check, span and report uses)."""
        calls: list[ToolCall] = []
        for call, result in pair_tool_calls(self._model_messages):
            args = call_args(call[2])
            text = result[2].model_response_str() if result is not None else None
            calls.append(ToolCall(call[2].tool_name, args, call[2].tool_call_id, text, call[:2], result[:2] if result else None))
        return calls

    def final_answer(self) -> str | None:
        """The text of the last model response that has text, or the answer it gave through a final-answer
        tool (`FINAL_ANSWER_TOOLS`: smolagents, Google ADK) when that came later; None when the agent never
        answered."""
        for message in reversed(self._model_messages):
            if isinstance(message, ModelResponse):
                text = '\n'.join(p.content for p in message.parts if isinstance(p, TextPart)).strip()
                if text:
                    return strip_final_answer_marker(text)
                for part in reversed(message.parts):
                    if isinstance(part, ToolCallPart) and part.tool_name in FINAL_ANSWER_TOOLS:
                        return tool_answer(part)
        return None


def _agent_tools(agent: Any) -> list[ToolSpec]:
    """The function tools of a pydantic-ai `Agent`, as the record's `tools` (those its toolsets list up front)."""
    specs: list[ToolSpec] = []
    for toolset in getattr(agent, 'toolsets', ()):
        for tool in getattr(toolset, 'tools', {}).values():
            definition = getattr(tool, 'tool_def', None)
            if definition is not None:
                specs.append(
                    ToolSpec(
                        name=definition.name,
                        description=definition.description,
                        parameters=definition.parameters_json_schema,
                    )
                )
    return specs


@dataclass
class LoadResult:
    records: list[QueryRecord]
    errors: list[LoadError]
    lines: dict[str, int] = field(default_factory=dict)  # query_id -> line it was read from
