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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from sensei_eval.core.errors import LoadError, RecordFieldError, field_path

__all__ = (
    'FINAL_ANSWER_TOOLS',
    'MAX_RECORD_BYTES',
    'RATING_DIMENSIONS',
    'ExpectedToolCall',
    'LoadResult',
    'MessageFormat',
    'QueryRecord',
    'Rating',
    'ToolCall',
    'ToolSpec',
    'detect_format',
    'looks_like_error',
    'pair_tool_calls',
    'parse_messages',
    'speaker_of',
    'speakers_from_prefix',
)

# How close an unknown field name must be to a known one for "did you mean" (difflib's ratio): `ratings` and
# `rating` are 0.92 apart, `expected_calls` and `expected_tool_calls` 0.85; unrelated names stay under 0.6.
_DID_YOU_MEAN_CUTOFF = 0.6

MessageFormat = Literal['pydantic-ai', 'openai', 'tarsy']

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
            self.query = _first_user_text(self._model_messages) or _alert_summary(self.alert_data)
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
        from pydantic_ai.messages import ModelMessagesTypeAdapter

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
            args = _call_args(call[2])
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
                    return _strip_final_answer_marker(text)
                for part in reversed(message.parts):
                    if isinstance(part, ToolCallPart) and part.tool_name in FINAL_ANSWER_TOOLS:
                        return _tool_answer(part)
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


# ---------------------------------------------------------------------------------------------------
# Format detection and parsing


def detect_format(messages: Sequence[Any]) -> MessageFormat:
    """Tell the format from the first message's keys; ambiguous shapes are an error, not a guess."""
    first = messages[0]
    if not isinstance(first, dict):
        raise RecordFieldError('messages[0]', f'expected an object, got {type(first).__name__}')
    if 'kind' in first or 'parts' in first:
        return 'pydantic-ai'
    if 'role' in first:
        for msg in messages:
            if isinstance(msg, dict) and (msg.get('tool_calls') or msg.get('role') == 'tool'):
                return 'openai'
        for msg in messages:
            content = msg.get('content') if isinstance(msg, dict) else None
            if not isinstance(content, str):
                continue
            action = _REACT_ACTION.search(content)
            # ReAct needs more than an "Action:" line: an input after it, or an observation turn
            if (action and _REACT_INPUT.search(content, action.end())) or (
                msg.get('role') == 'user' and _REACT_OBSERVATION.match(content)
            ):
                return 'tarsy'
        return 'openai'
    raise RecordFieldError(
        'message_format', 'cannot detect the format: messages have neither `kind`/`parts` nor `role`; set message_format'
    )


def parse_messages(
    messages: Sequence[Any], message_format: MessageFormat, *, speaker_prefix: bool | str | None = None
) -> list[ModelMessage]:
    """Normalise a raw history into pydantic-ai messages, checking every tool result has its call.

    `speaker_prefix` (OpenAI-format logs): None detects a consistent prefix naming the speaker
    (`[Name]`, `[Name (note)]`, `Name:`, `Name (-> Other):`; `speakers_from_prefix`); False never reads
    one; True, `"bracket"`, `"colon"` (`Name: ...`) or a regular expression with a `name` group reads it
    from every message that has it."""
    if message_format == 'pydantic-ai':
        parsed = _parse_pydantic_ai(messages)
    elif message_format == 'openai':
        parsed = _parse_openai(messages, speakers_from_prefix(messages, speaker_prefix))
    else:
        parsed = _parse_tarsy(messages)
    _check_tool_pairs(parsed)
    return parsed


def _parse_pydantic_ai(messages: Sequence[Any]) -> list[ModelMessage]:
    try:
        return ModelMessagesTypeAdapter.validate_python(messages)
    except ValidationError as e:
        err = e.errors()[0]
        raise RecordFieldError('messages' + field_path(_without_tags(err['loc'])), err['msg']) from None


def _without_tags(loc: Iterable[int | str]) -> list[int | str]:
    """Drop pydantic's discriminator tags ("request", "user-prompt") that follow an index: not keys of the input."""
    out: list[int | str] = []
    previous: int | str | None = None
    for item in loc:
        if not (isinstance(previous, int) and isinstance(item, str) and (item in ('request', 'response') or '-' in item)):
            out.append(item)
        previous = item
    return out


# A speaker written at the start of a message's text, as multi-agent logs without a `name` field do:
# `[Name] ...`, `[Name (anything)] ...` (`[Orchestrator (thought)]`, `[Orchestrator (-> WebSurfer)]`),
# `Name: ...` and `Name (-> Other): ...`. The speaker is the name; the note in parentheses is dropped.
_NOTE = r'(?:\s*\([^()\n]{0,80}\))?'
_BRACKET_PREFIX = r'^\s*\[(?P<name>[A-Za-z][^\[\]()\n]{0,59}?)' + _NOTE + r'\s*\](?!\()\s*:?\s*'
_COLON_PREFIX = r'^\s*(?P<name>[A-Za-z][\w.\-]*(?: [A-Za-z][\w.\-]*){0,3})' + _NOTE + r'\s*:\s+'
# Words a message may open with before a colon that are not speakers (labels of the text itself).
_NOT_SPEAKER_WORDS = (
    'note notes answer final summary step thought action input observation question error output result results example '
    'warning important update sure yes no hi hello dear subject re code reason reasoning plan task solution response reply '
    'explanation conclusion status tldr ps fyi edit'
)
_NOT_SPEAKERS = frozenset([*_NOT_SPEAKER_WORDS.split(), 'final answer', 'action input', 'next step', 'next steps'])
# Fewest prefixed messages from which a log's prefixes count as speakers when detected.
_MIN_PREFIXED = 2


def speakers_from_prefix(messages: Sequence[Any], setting: bool | str | None = None) -> dict[int, tuple[str, int]]:
    """Message index -> (speaker, length of the prefix to drop), for messages that name their speaker
    in a content prefix rather than in `name`.

    Detected (`setting` None) when a grammar is consistent: the bracket form (`[Name]`, `[Name (note)]`),
    else the colon form (`Name:`, `Name (-> Other):`), read from at least two messages without a `name`
    and from at least half of those the agent wrote. Messages whose prefix cannot be read keep no
    speaker; the others keep theirs. A record can name the form instead (`metadata.speaker_prefix`:
    "bracket", "colon" or a regular expression with a `name` group): then every message that has it."""
    if setting is False:
        return {}
    if setting is None:
        for grammar in (_BRACKET_PREFIX, _COLON_PREFIX):
            found = _prefixed(messages, re.compile(grammar), detect=True)
            if found:
                return found
        return {}
    if setting is True or setting == 'bracket':
        pattern = re.compile(_BRACKET_PREFIX)
    elif setting == 'colon':
        pattern = re.compile(_COLON_PREFIX)
    else:
        try:
            pattern = re.compile(setting)
        except re.error as e:
            raise RecordFieldError('metadata.speaker_prefix', f'not a regular expression ({e})') from None
        if 'name' not in pattern.groupindex:
            raise RecordFieldError('metadata.speaker_prefix', 'the regular expression needs a (?P<name>...) group')
    return _prefixed(messages, pattern, detect=False)


def _prefixed(messages: Sequence[Any], pattern: re.Pattern[str], *, detect: bool) -> dict[int, tuple[str, int]]:
    found: dict[int, tuple[str, int]] = {}
    unnamed_agent = prefixed_agent = 0
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get('name') or msg.get('role') not in ('assistant', 'user', 'system'):
            continue
        content = msg.get('content')
        if not isinstance(content, str) or not content.strip():
            continue
        agent = msg.get('role') == 'assistant'
        unnamed_agent += agent
        m = pattern.match(content)
        name = m.group('name').strip() if m else ''
        if not name or (detect and name.casefold() in _NOT_SPEAKERS):
            continue
        found[i] = (name, m.end()) if m else (name, 0)
        prefixed_agent += agent
    if detect and (prefixed_agent < _MIN_PREFIXED or 2 * prefixed_agent < unnamed_agent):
        return {}
    return found


def _parse_openai(messages: Sequence[Any], prefixed: dict[int, tuple[str, int]] | None = None) -> list[ModelMessage]:
    prefixed = prefixed or {}
    reader = _OpenAIReader()
    for i, msg in enumerate(messages):
        reader.add(i, msg, prefixed.get(i))
    return reader.finish()


class _OpenAIReader:
    """OpenAI chat messages read in order into pydantic-ai messages: consecutive system, user and tool
    messages of one speaker make one request, each assistant message one response; a tool result is
    paired with its call (by id, else by order)."""

    def __init__(self) -> None:
        self.out: list[ModelMessage] = []
        self.call_names: dict[str, str] = {}
        self.waiting: list[tuple[int, str, str]] = []  # (turn, id, tool name) of calls with no result yet
        self.pending: list[ModelRequestPart] = []
        self.pending_speaker: str | None = None

    def add(self, i: int, msg: Any, prefix: tuple[str, int] | None) -> None:
        """Message `i`; `prefix`: the speaker its content names and the length of that prefix."""
        where = f'messages[{i}]'
        if not isinstance(msg, dict):
            raise RecordFieldError(where, f'expected an object, got {type(msg).__name__}')
        role = msg.get('role')
        content = _openai_content(msg.get('content'), f'{where}.content')
        speaker = _speaker_field(msg, ('name',), where) if role != 'tool' else None
        if prefix is not None and speaker is None and content is not None:
            speaker, cut = prefix
            content = content[cut:]  # the transcript names the speaker; its text keeps the rest
        if role in ('system', 'developer'):
            self._request(SystemPromptPart(content=content or ''), speaker)
        elif role == 'user':
            self._request(UserPromptPart(content=content or ''), speaker)
        elif role == 'tool':
            result = self._tool_result(msg, content, where)
            self._request(result, self.pending_speaker if self.pending else None)
        elif role == 'assistant':
            self._flush()
            self.out.append(self._response(i, msg, content, speaker, where))
        else:
            raise RecordFieldError(f'{where}.role', f'unknown role {role!r} (expected system, user, assistant or tool)')

    def finish(self) -> list[ModelMessage]:
        self._flush()
        return self.out

    def _flush(self) -> None:
        if self.pending:
            self.out.append(ModelRequest(parts=list(self.pending), metadata=_speaker_metadata(self.pending_speaker)))
            self.pending.clear()

    def _request(self, part: ModelRequestPart, speaker: str | None) -> None:
        if self.pending and speaker != self.pending_speaker:
            self._flush()  # one speaker per request, so the transcript can say who said what
        self.pending.append(part)
        self.pending_speaker = speaker

    def _tool_result(self, msg: dict[str, Any], content: str | None, where: str) -> ToolReturnPart:
        call_id = msg.get('tool_call_id')
        if call_id is None or call_id == '':
            call_id = _by_order(self.waiting, msg.get('name'), where)
        if not isinstance(call_id, str):
            raise RecordFieldError(f'{where}.tool_call_id', f'a tool call id is text, got {type(call_id).__name__}')
        if call_id not in self.call_names:
            raise RecordFieldError(f'{where}.tool_call_id', f'tool result without call: no earlier call has id {call_id!r}')
        # ids repeat in many logs (restarting each turn): the result answers the waiting call with
        # its id from the latest turn, as `pair_tool_calls` pairs them
        same = [k for k, w in enumerate(self.waiting) if w[1] == call_id]
        name = self.call_names[call_id]
        if same:
            latest = max(self.waiting[k][0] for k in same)
            name = self.waiting.pop(next(k for k in same if self.waiting[k][0] == latest))[2]
        return ToolReturnPart(tool_name=name, content=content or '', tool_call_id=call_id)

    def _response(self, i: int, msg: dict[str, Any], content: str | None, speaker: str | None, where: str) -> ModelResponse:
        parts: list[ModelResponsePart] = []
        if content:
            parts.append(TextPart(content=content))
        raw_calls = msg.get('tool_calls') or []
        if not isinstance(raw_calls, list):
            raise RecordFieldError(f'{where}.tool_calls', 'expected a list')
        parts.extend(self._tool_call(i, j, call, f'{where}.tool_calls[{j}]') for j, call in enumerate(raw_calls))
        if not parts and content == '' and speaker:
            # an agent of a multi-agent log that said nothing is still a turn: kept, so the steps
            # stay aligned with the log's messages (blame labels count them)
            parts.append(TextPart(content=''))
        if not parts:
            raise RecordFieldError(where, 'assistant message with neither content nor tool_calls')
        return ModelResponse(parts=parts, metadata=_speaker_metadata(speaker))

    def _tool_call(self, i: int, j: int, call: Any, where: str) -> ToolCallPart:
        fn = call.get('function') if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get('name'), str) or not fn['name']:
            raise RecordFieldError(f'{where}.function.name', 'missing tool name')
        args = fn.get('arguments', '{}')
        if isinstance(args, str):
            try:
                json.loads(args or '{}')
            except json.JSONDecodeError as e:
                raise RecordFieldError(f'{where}.function.arguments', f'not valid JSON ({e.msg})') from None
        elif not isinstance(args, dict):
            raise RecordFieldError(f'{where}.function.arguments', 'expected a JSON string or an object')
        call_id = call.get('id') or f'call_{i}_{j}'
        if not isinstance(call_id, str):
            raise RecordFieldError(f'{where}.id', f'a tool call id is text, got {type(call_id).__name__}')
        self.call_names[call_id] = fn['name']
        self.waiting.append((i, call_id, fn['name']))
        return ToolCallPart(tool_name=fn['name'], args=args or '{}', tool_call_id=call_id)


def _by_order(waiting: list[tuple[int, str, str]], name: Any, where: str) -> str:
    """The id of the call a tool result without `tool_call_id` answers: by order, the first call still
    waiting (of the tool the result's `name` gives, when it gives one)."""
    if isinstance(name, str) and name:
        named = [w for w in waiting if w[2] == name]
        if named:
            return named[0][1]
    if waiting:
        return waiting[0][1]
    raise RecordFieldError(
        f'{where}.tool_call_id', 'a tool result without tool_call_id, and no earlier tool call is waiting for a result'
    )


# ReAct markers as TARSy writes them; anchored at line starts so prose that mentions "Action:" mid-line
# is not taken for a tool call.
_REACT_ACTION = re.compile(r'^\s*Action\s*:\s*(?P<name>.+?)\s*$', re.MULTILINE)
_REACT_INPUT = re.compile(r'^\s*Action Input\s*:\s*(?P<input>.*)', re.MULTILINE | re.DOTALL)
_REACT_OBSERVATION = re.compile(r'^\s*Observation\s*:\s*', re.MULTILINE)
_FINAL_ANSWER = re.compile(r'^\s*Final Answer\s*:\s*', re.MULTILINE)


def _parse_tarsy(messages: Sequence[Any]) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    pending_call: ToolCallPart | None = None
    n_calls = 0
    for i, msg in enumerate(messages):
        where = f'messages[{i}]'
        if not isinstance(msg, dict):
            raise RecordFieldError(where, f'expected an object, got {type(msg).__name__}')
        role, content = msg.get('role'), msg.get('content')
        if not isinstance(content, str):
            raise RecordFieldError(f'{where}.content', f'expected text, got {type(content).__name__}')
        meta = _speaker_metadata(_speaker_field(msg, _TARSY_SPEAKER_KEYS, where))
        if role == 'system':
            out.append(ModelRequest(parts=[SystemPromptPart(content=content)], metadata=meta))
        elif role == 'user':
            obs = _REACT_OBSERVATION.match(content)
            if obs:
                if pending_call is None:
                    raise RecordFieldError(f'{where}.content', 'tool result without call: Observation with no Action before it')
                out.append(
                    ModelRequest(
                        parts=[
                            ToolReturnPart(
                                tool_name=pending_call.tool_name,
                                content=content[obs.end() :].strip(),
                                tool_call_id=pending_call.tool_call_id,
                            )
                        ]
                    )
                )
                pending_call = None
            else:
                out.append(ModelRequest(parts=[UserPromptPart(content=content)], metadata=meta))
        elif role == 'assistant':
            parts: list[ModelResponsePart] = []
            action = _REACT_ACTION.search(content)
            final = _FINAL_ANSWER.search(content)
            if action and (final is None or action.start() < final.start()):
                thought = content[: action.start()].strip()
                if thought:
                    parts.append(TextPart(content=thought))
                raw_input = ''
                m_input = _REACT_INPUT.search(content, action.end())
                if m_input:
                    raw_input = m_input.group('input').strip()
                n_calls += 1
                args: dict[str, Any] | str = _react_args(raw_input)
                pending_call = ToolCallPart(tool_name=action.group('name'), args=args, tool_call_id=f'react_{n_calls}')
                parts.append(pending_call)
            else:
                parts.append(TextPart(content=content))
            out.append(ModelResponse(parts=parts, metadata=meta))
        else:
            raise RecordFieldError(f'{where}.role', f'unknown role {role!r} (expected system, user or assistant)')
    return out


# Keys a TARSy turn may name its agent or stage with.
_TARSY_SPEAKER_KEYS = ('name', 'agent', 'stage')


def speaker_of(message: ModelMessage) -> str | None:
    """Who spoke a message in a multi-agent run: `metadata["speaker"]`, where every loader keeps it."""
    speaker = (message.metadata or {}).get('speaker')
    return speaker if isinstance(speaker, str) and speaker.strip() else None


def _speaker_field(msg: dict[str, Any], keys: Sequence[str], where: str) -> str | None:
    for key in keys:
        value = msg.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise RecordFieldError(f'{where}.{key}', f'the speaker name must be text, got {type(value).__name__}')
        if value.strip():
            return value.strip()
    return None


def _speaker_metadata(speaker: str | None) -> dict[str, Any] | None:
    """The speaker as every loader keeps it; a note after the name (`Orchestrator (thought)`,
    `Orchestrator (-> WebSurfer)`, as Magentic-One logs write their roles) is dropped, as in prefixes."""
    if speaker:
        speaker = _SPEAKER_NOTE.sub('', speaker).strip() or speaker
    return {'speaker': speaker} if speaker else None


_SPEAKER_NOTE = re.compile(r'\s*\([^()\n]{0,80}\)\s*$')


def _call_args(part: ToolCallPart) -> dict[str, Any] | str:
    """Arguments as a dict; arguments that were never JSON (a ReAct free-text input) stay text."""
    if isinstance(part.args, str):
        try:
            value = json.loads(part.args or '{}')
        except json.JSONDecodeError:
            return part.args
        return value if isinstance(value, dict) else {'input': value}
    return dict(part.args or {})


def _react_args(raw: str) -> dict[str, Any] | str:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else {'input': value}


def _openai_content(content: Any, where: str) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones, refuse the rest by name
        texts: list[str] = []
        for k, part in enumerate(content):
            if isinstance(part, dict) and part.get('type') == 'text' and isinstance(part.get('text'), str):
                texts.append(part['text'])
            else:
                kind = part.get('type') if isinstance(part, dict) else type(part).__name__
                raise RecordFieldError(f'{where}[{k}]', f'unsupported content part {kind!r} (only text parts are judged)')
        return '\n'.join(texts)
    raise RecordFieldError(where, f'expected text, a list of text parts or null, got {type(content).__name__}')


def _check_tool_pairs(messages: list[ModelMessage]) -> None:
    seen_calls: set[str] = set()
    for i, message in enumerate(messages):
        for j, part in enumerate(message.parts):
            if isinstance(part, ToolCallPart):
                seen_calls.add(part.tool_call_id)
            elif isinstance(part, ToolReturnPart) and part.tool_call_id not in seen_calls:
                raise RecordFieldError(
                    f'messages[{i}].parts[{j}].tool_call_id',
                    f'tool result without call: no earlier tool call has id {part.tool_call_id!r}',
                )


def _first_user_text(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ''


def _alert_summary(alert: dict[str, Any] | str | None) -> str:
    if alert is None:
        return ''
    if isinstance(alert, str):
        return alert[:200]
    for key in ('message', 'summary', 'alert_type', 'title'):
        if isinstance(alert.get(key), str):
            return str(alert[key])
    return json.dumps(alert, sort_keys=True)[:200]


# Tools through which agent frameworks deliver the run's answer (smolagents `final_answer`; `final_output`
# in Google ADK and LlamaIndex agents wrapped by any-agent): `QueryRecord.final_answer` reads their argument.
FINAL_ANSWER_TOOLS = frozenset({'final_answer', 'final_output'})


def _tool_answer(part: ToolCallPart) -> str:
    """A final-answer tool's answer: its `answer` (or only) argument, else all its arguments as JSON."""
    args = _call_args(part)
    if isinstance(args, str):
        return args
    value = args.get('answer', next(iter(args.values())) if len(args) == 1 else args)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _strip_final_answer_marker(text: str) -> str:
    m = _FINAL_ANSWER.search(text)
    return text[m.end() :].strip() if m else text


@dataclass
class LoadResult:
    records: list[QueryRecord]
    errors: list[LoadError]
    lines: dict[str, int] = field(default_factory=dict)  # query_id -> line it was read from
