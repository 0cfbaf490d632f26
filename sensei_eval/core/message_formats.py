"""The message formats a record's `messages` come in, read into pydantic-ai messages: pydantic-ai's own
(`ModelMessagesTypeAdapter`), OpenAI chat-completions messages with `tool_calls`, and TARSy conversations
(ReAct text: `Action:` / `Action Input:` / `Observation:`), told apart by `detect_format`. Speakers of
multi-agent logs are read from a message's `name` (or TARSy's agent or stage) or, when asked, from a prefix
written at the start of its text (`speakers_from_prefix`). A record (`core.records.QueryRecord`) calls
`parse_messages` when it is validated; what it needs of a run's answer (a final-answer tool's argument, the
first user text, an alert's summary) is read here too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import ValidationError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from sensei_eval.core.errors import RecordFieldError, field_path

__all__ = (
    'FINAL_ANSWER_TOOLS',
    'MessageFormat',
    'alert_summary',
    'call_args',
    'detect_format',
    'first_user_text',
    'parse_messages',
    'speaker_of',
    'speakers_from_prefix',
    'strip_final_answer_marker',
    'tool_answer',
)

MessageFormat = Literal['pydantic-ai', 'openai', 'tarsy']


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


def call_args(part: ToolCallPart) -> dict[str, Any] | str:
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


def first_user_text(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ''


def alert_summary(alert: dict[str, Any] | str | None) -> str:
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


def tool_answer(part: ToolCallPart) -> str:
    """A final-answer tool's answer: its `answer` (or only) argument, else all its arguments as JSON."""
    args = call_args(part)
    if isinstance(args, str):
        return args
    value = args.get('answer', next(iter(args.values())) if len(args) == 1 else args)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def strip_final_answer_marker(text: str) -> str:
    m = _FINAL_ANSWER.search(text)
    return text[m.end() :].strip() if m else text
