"""Messages in the shapes the conventions and frameworks write them, as neutral `Msg`s.

* A GenAI `{role, parts}` message: parts `text`, `tool_call` (`id`, `name`, `arguments`), `tool_call_response`
  (`id` and the result in `response`; `result`, the drafts' and pydantic-ai's spelling, is read too),
  `reasoning` / `thinking` (hidden reasoning, dropped), `blob` / `file` / `uri` (named `[image part]`, not
  judged); Gemini-style parts (`text`, `function_call`, `function_response`).
* A chat-completions message (`content` text or content blocks, including Anthropic `tool_use` / `tool_result`
  and Bedrock Converse `toolUse` / `toolResult` blocks, also written as JSON text as Strands Agents do;
  `tool_calls`, `tool_call_id`), and a LangChain message serialized by `dumpd` (`readers.langchain`).
* Flattened attributes (OpenInference `llm.input_messages.0.message.role`, OpenLLMetry's `gen_ai.prompt.0.role`)
  rebuilt as nested values; an index is at most `_MAX_INDEX_DIGITS` digits (a longer one is a located error,
  never a number Python refuses to parse).

Roles `model`, `ai` are the assistant; `human` the user; `function` a tool; `developer` the system. What cannot
be placed is a warning through the `warn` callback; a tool result present but unreadable is a `SpanError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from openinference.semconv.trace import MessageAttributes, MessageContentAttributes, ToolCallAttributes

from sensei_eval.core.errors import json_error_text
from sensei_eval.core.readers.langchain import unwrap_message
from sensei_eval.core.sanitize import JsonLimitError, loads_limited
from sensei_eval.core.span_model import Span, SpanError

__all__ = (
    'Msg',
    'Warn',
    'arguments_text',
    'call_name',
    'canonical',
    'flat_list',
    'json_value',
    'maybe_json',
    'openinference_messages',
    'read_call',
    'read_messages',
    'same_arguments',
    'text_id',
    'typed_part',
    'unflatten',
)

Warn = Callable[[str], None]

# Each chat role and the names frameworks give it.
_ROLE_NAMES = {
    'system': ('system', 'developer'),
    'user': ('user', 'human'),
    'assistant': ('assistant', 'model', 'ai', 'bot', 'agent'),
    'tool': ('tool', 'function', 'ipython'),
}
_ROLES = {name: role for role, names in _ROLE_NAMES.items() for name in names}
# Part types that carry no judged content: the model's hidden reasoning.
_HIDDEN_PARTS = frozenset({'reasoning', 'thinking', 'redacted_thinking'})
# Part types that are media: named in the transcript (`[image part]`), not judged.
_MEDIA_PARTS = frozenset({'blob', 'file', 'file_data', 'uri', 'image', 'image_url', 'audio', 'input_audio', 'video'})
# The longest list index a flattened attribute key may carry: more digits is no real list (and past ~4,300
# digits Python refuses to parse the number at all).
_MAX_INDEX_DIGITS = 9


@dataclass
class Msg:
    """A message in neutral form, before it is written as a chat-completions message."""

    role: str
    content: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)  # {id, name, arguments (JSON text)}
    call_id: str | None = None  # for a tool result
    tool_name: str | None = None  # for a tool result, when known
    where: str = ''

    def key(self) -> tuple[Any, ...]:
        return (self.role, (self.content or '').strip(), tuple((c['name'], canonical(c['arguments'])) for c in self.calls))


def canonical(arguments: str) -> str:
    """Arguments as comparable text: the JSON re-dumped with sorted keys, or the text itself."""
    try:
        return json.dumps(loads_limited(arguments, allow_nan=True), sort_keys=True)
    except (ValueError, TypeError, JsonLimitError):
        return arguments


def json_value(span: Span, name: str, value: Any, where: str | None = None) -> Any:
    """An attribute holding JSON, parsed within the nesting limit; a `SpanError` at the attribute when it is not JSON."""
    if not isinstance(value, str):
        return value
    where = where or f'{span.path}.attributes[{name}]'
    try:
        return loads_limited(value, allow_nan=True)
    except JsonLimitError as e:
        raise SpanError(f'{where}.{e.field}' if e.field else where, e.message) from None
    except json.JSONDecodeError as e:
        raise SpanError(where, f'not valid JSON (truncated by an attribute limit?): {json_error_text(e)}') from None
    except ValueError as e:
        raise SpanError(where, f'not valid JSON: {e}') from None


def maybe_json(value: Any) -> Any:
    """A value parsed as JSON when it is JSON text (within the limits), else unchanged."""
    if not isinstance(value, str):
        return value
    try:
        return loads_limited(value, allow_nan=True)
    except (ValueError, JsonLimitError):
        return value


def read_messages(value: Any, where: str, warn: Warn, default_role: str = 'user') -> list[Msg]:
    """A list of messages (or one) in any of the shapes of the module docstring."""
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise SpanError(where, f'expected a list of messages, got {type(value).__name__}')
    out: list[Msg] = []
    for i, msg in enumerate(value):
        mwhere = f'{where}[{i}]'
        if isinstance(msg, str):
            out.append(Msg(default_role, msg, where=mwhere))
            continue
        msg = unwrap_message(msg)
        if not isinstance(msg, dict):
            raise SpanError(mwhere, f'expected a message object, got {type(msg).__name__}')
        raw_role = msg.get('role', default_role)
        role = _ROLES.get(str(raw_role).lower()) if isinstance(raw_role, str) else None
        if role is None:
            warn(f'{mwhere}: message role {raw_role!r} is not system, user, assistant or tool; read as {default_role}')
            role = default_role
        if isinstance(msg.get('parts'), list):
            out.extend(_from_parts(role, msg['parts'], mwhere, warn))
        else:
            out.extend(_from_chat_message(role, msg, mwhere, warn))
    return out


def _from_parts(role: str, parts: list[Any], where: str, warn: Warn) -> Iterator[Msg]:
    """A GenAI `{role, parts}` message (see the module docstring for the part types)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, raw in enumerate(parts):
        pwhere = f'{where}.parts[{j}]'
        part = typed_part(raw)
        kind = part.get('type') if isinstance(part, dict) else None
        if not isinstance(part, dict) or not isinstance(kind, str):
            raise SpanError(pwhere, 'expected a part object with a `type`')
        if kind == 'text':
            texts.append(str(part.get('content', part.get('text', ''))))
        elif kind in ('tool_call', 'function_call'):
            calls.append(read_call(part, pwhere, warn))
        elif kind in ('tool_call_response', 'tool_result', 'function_response'):
            if texts and role != 'assistant':
                yield Msg(role, '\n'.join(texts), where=where)
                texts = []
            yield Msg(
                'tool',
                _result_text(part, pwhere),
                call_id=text_id(part.get('id')),
                tool_name=_opt_str(part.get('name')),
                where=pwhere,
            )
        elif kind in _HIDDEN_PARTS:
            continue
        elif kind in _MEDIA_PARTS:
            modality = part.get('modality') or part.get('mime_type') or kind
            texts.append(f'[{modality} part]')
        else:
            texts.append(f'[{kind} part]')
            warn(
                f'{pwhere}: part type {kind!r} is not a GenAI text, tool_call or tool_call_response part; shown as [{kind} part]'
            )
    if role == 'tool':
        if texts:  # a tool-role message written with text parts: the result of the call it names
            yield Msg('tool', '\n'.join(texts), where=where)
        return
    if texts or calls:
        yield Msg(role, '\n'.join(texts) if texts else None, calls if role == 'assistant' else [], where=where)
        if calls and role != 'assistant':
            warn(f'{where}: tool calls in a {role} message are not read')


def typed_part(part: Any) -> Any:
    """A Gemini-style part (`{text}`, `{function_call}`, `{function_response}`, as Google ADK's own spans carry
    them in `gcp.vertex.agent.llm_request`) in the GenAI part shape; anything else unchanged."""
    if not isinstance(part, dict) or 'type' in part:
        return part
    if part.get('thought') is True:
        return {'type': 'thinking'}
    if isinstance(part.get('text'), str):
        return {'type': 'text', 'content': part['text']}
    for key in ('function_call', 'functionCall'):
        if isinstance(part.get(key), dict):
            return {'type': 'tool_call', **part[key]}
    for key in ('function_response', 'functionResponse'):
        if isinstance(part.get(key), dict):
            return {'type': 'tool_call_response', **part[key]}
    for key in ('inline_data', 'inlineData', 'file_data', 'fileData'):
        if key in part:
            return {'type': 'blob'}
    return part


def _result_text(part: Mapping[str, Any], where: str) -> str:
    """A tool result: `response` (the GenAI conventions), `result` (their drafts, pydantic-ai) or `content`."""
    for key in ('response', 'result', 'content', 'output'):
        if key in part:
            value = part[key]
            return value if isinstance(value, str) else json.dumps(value, default=str)
    raise SpanError(where, 'a tool_call_response part without its result (`response`): the tool result cannot be read')


def call_name(data: Mapping[str, Any]) -> str | None:
    """A tool call's tool name, in whichever key its shape puts it."""
    fn = data.get('function')
    for value in (
        fn.get('name') if isinstance(fn, dict) else None,
        data.get('name'),
        data.get('tool.name'),
        data.get('tool_name'),
    ):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def read_call(data: Mapping[str, Any], where: str, warn: Warn) -> dict[str, Any]:
    """A tool call in any of the shapes seen: GenAI part, chat-completions, Anthropic `tool_use`, flattened."""
    name = call_name(data)
    if name is None:
        raise SpanError(f'{where}.name', 'a tool call without a tool name')
    fn = data['function'] if isinstance(data.get('function'), dict) else {}
    args: Any = None
    for value in (fn.get('arguments'), data.get('arguments'), data.get('input'), data.get('args'), data.get('tool.args')):
        if value is not None:
            args = value
            break
    return {'id': text_id(data.get('id')), 'name': name, 'arguments': arguments_text(args, f'{where}.arguments', warn)}


def arguments_text(args: Any, where: str, warn: Warn, *, text_ok: bool = False) -> str:
    """Arguments as JSON text. Text that is not JSON is kept as `{"input": <text>}`: with a warning where the
    convention promises JSON (`gen_ai.tool.call.arguments`), quietly where plain text is a tool's input as
    recorded (`text_ok`: OpenInference `input.value` of a one-argument tool)."""
    if args is None:
        return '{}'
    if isinstance(args, str):
        if not args.strip():
            return '{}'
        try:
            loads_limited(args, allow_nan=True)
        except (ValueError, JsonLimitError):
            if not text_ok:
                warn(f'{where}: arguments are not JSON; kept as {{"input": <text>}}')
            return json.dumps({'input': args})
        return args
    return json.dumps(args, default=str)


def text_id(value: Any) -> str | None:
    """An id as text (numbers too); None for none or an empty one."""
    if value is None or value == '':
        return None
    return str(value)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _from_chat_message(role: str, msg: Mapping[str, Any], where: str, warn: Warn) -> Iterator[Msg]:
    """A chat-completions style message (`content` text or content blocks, `tool_calls`, `tool_call_id`)."""
    content = msg.get('content')
    if isinstance(content, str) and content.startswith('[{'):  # content blocks written as JSON text (Strands)
        blocks = maybe_json(content)
        if isinstance(blocks, list) and blocks and all(isinstance(b, dict) and _block_kind(b) for b in blocks):
            content = blocks
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[Msg] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for k, raw_block in enumerate(content):
            bwhere = f'{where}.content[{k}]'
            if isinstance(raw_block, str):
                texts.append(raw_block)
                continue
            block = _bedrock_block(raw_block)
            kind = block.get('type') if isinstance(block, dict) else None
            if not isinstance(block, dict):
                raise SpanError(bwhere, f'expected a content block, got {type(block).__name__}')
            if kind in (None, 'text', 'input_text', 'output_text'):
                texts.append(str(block.get('text', block.get('content', ''))))
            elif kind in ('tool_use', 'tool_call', 'function_call'):
                calls.append(read_call(block, bwhere, warn))
            elif kind in ('tool_result', 'tool_call_response', 'function_call_output'):
                call_id = text_id(block.get('tool_use_id') or block.get('id') or block.get('call_id'))
                results.append(Msg('tool', _block_result(block, bwhere), call_id=call_id, where=bwhere))
            elif kind in _HIDDEN_PARTS:
                continue
            elif kind in _MEDIA_PARTS:
                texts.append(f'[{kind} part]')
            else:
                texts.append(f'[{kind} part]')
                warn(f'{bwhere}: content block {kind!r} is not text, a tool call or a tool result; shown as [{kind} part]')
    elif content is not None:
        texts.append(json.dumps(content, default=str))
    raw_calls = msg.get('tool_calls')
    if isinstance(raw_calls, str):
        raw_calls = maybe_json(raw_calls)
    if isinstance(raw_calls, list):
        calls.extend(read_call(c, f'{where}.tool_calls[{n}]', warn) for n, c in enumerate(raw_calls) if isinstance(c, dict))
    fc = msg.get('function_call')
    if isinstance(fc, dict):
        calls.append(read_call(fc, f'{where}.function_call', warn))
    yield from results
    if role == 'tool':
        if content is None and not texts:
            raise SpanError(f'{where}.content', 'a tool message without its result (`content`): the tool result cannot be read')
        call_id = text_id(msg.get('tool_call_id') or msg.get('id'))
        yield Msg('tool', '\n'.join(texts), call_id=call_id, tool_name=_opt_str(msg.get('name')), where=where)
        return
    text = '\n'.join(texts) if texts else None
    if text is not None or calls:
        yield Msg(role, text, calls if role == 'assistant' else [], where=where)


def _block_kind(block: Mapping[str, Any]) -> str | None:
    if isinstance(block.get('type'), str):
        return str(block['type'])
    return next((k for k in ('text', 'toolUse', 'toolResult', 'reasoningContent', 'image', 'document') if k in block), None)


def _bedrock_block(block: Any) -> Any:
    """A Bedrock Converse content block (`{text}`, `{toolUse: {toolUseId, name, input}}`, `{toolResult:
    {toolUseId, content}}`, as Strands Agents write them) in the typed shape; anything else unchanged."""
    if not isinstance(block, dict) or 'type' in block:
        return block
    if isinstance(block.get('toolUse'), dict):
        use = block['toolUse']
        return {'type': 'tool_use', 'id': use.get('toolUseId'), 'name': use.get('name'), 'input': use.get('input')}
    if isinstance(block.get('toolResult'), dict):
        result = block['toolResult']
        return {'type': 'tool_result', 'tool_use_id': result.get('toolUseId'), 'content': _bedrock_result(result.get('content'))}
    if 'reasoningContent' in block:
        return {'type': 'thinking'}
    if isinstance(block.get('text'), str):
        return {'type': 'text', 'text': block['text']}
    return block


def _bedrock_result(content: Any) -> Any:
    if isinstance(content, list):
        parts = [
            str(c['text']) if isinstance(c.get('text'), str) else json.dumps(c.get('json', c))
            for c in content
            if isinstance(c, dict)
        ]
        return '\n'.join(parts)
    return content


def _block_result(block: Mapping[str, Any], where: str) -> str:
    for key in ('content', 'response', 'result', 'output'):
        if key in block:
            value = block[key]
            if isinstance(value, list):  # Anthropic: a list of text blocks
                texts = [b.get('text') for b in value if isinstance(b, dict) and isinstance(b.get('text'), str)]
                if len(texts) == len(value):
                    return '\n'.join(t for t in texts if t is not None)
            return value if isinstance(value, str) else json.dumps(value, default=str)
    raise SpanError(where, 'a tool result block without its content: the tool result cannot be read')


_INDEX = re.compile(r'^\d+$')


def _index(key: str, where: str) -> bool:
    """Whether a key of a flattened attribute is a list index (a `SpanError` when it is digits but no index)."""
    if not _INDEX.match(key):
        return False
    if len(key) > _MAX_INDEX_DIGITS:
        raise SpanError(where, f'a list index of {len(key):,} digits in an attribute key: no message list is that long')
    return True


def unflatten(attributes: Mapping[str, Any], prefix: str, where: str = '') -> dict[str, Any] | None:
    """Attributes under `prefix.` as a nested dict (`llm.input_messages.0.message.role` ->
    {'0': {'message': {'role': …}}}), or the attribute itself when an exporter kept it as a list."""
    if isinstance(attributes.get(prefix), list):
        return {str(i): v for i, v in enumerate(attributes[prefix])}
    start = prefix + '.'
    found = {k[len(start) :]: v for k, v in attributes.items() if k.startswith(start)}
    where = where or prefix
    if not found or not any(_index(k.split('.', 1)[0], where) for k in found):
        return None
    root: dict[str, Any] = {}
    for key in sorted(found):
        node = root
        parts = key.split('.')
        for part in parts[:-1]:
            _index(part, where)
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = found[key]
    return root


def flat_list(node: Mapping[str, Any]) -> list[Any]:
    """The indexed entries of an unflattened node, in index order, each with its own lists rebuilt."""
    return [_flat_value(node[k]) for k in sorted((k for k in node if _INDEX.match(k)), key=int)]


def _flat_value(value: Any) -> Any:
    if isinstance(value, dict):
        if value and all(_INDEX.match(k) for k in value):
            return flat_list(value)
        return {k: _flat_value(v) for k, v in value.items()}
    return value


def _dotted(value: Any, prefix: str = '') -> dict[str, Any]:
    """A nested dict as the dotted keys the conventions name (lists kept whole), to look keys up by those names."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, dict):
                out.update(_dotted(inner, f'{prefix}{key}.'))
            else:
                out[f'{prefix}{key}'] = inner
    return out


def openinference_messages(node: Mapping[str, Any], where: str, warn: Warn, default_role: str = 'user') -> list[Msg]:
    """OpenInference's flattened messages (`llm.input_messages.N.message.*`), unflattened by `unflatten`."""
    out: list[Msg] = []
    for i, raw in enumerate(flat_list(node)):
        mwhere = f'{where}.{i}'
        message = _dotted(raw)
        if not isinstance(raw, dict) or not message:
            raise SpanError(mwhere, 'expected message.* attributes')
        chat: dict[str, Any] = {'role': message.get(MessageAttributes.MESSAGE_ROLE, default_role)}
        if MessageAttributes.MESSAGE_CONTENT in message:
            chat['content'] = message[MessageAttributes.MESSAGE_CONTENT]
        contents = message.get(MessageAttributes.MESSAGE_CONTENTS)
        if isinstance(contents, list):
            blocks = []
            for c in contents:
                mc = _dotted(c)
                kind = mc.get(MessageContentAttributes.MESSAGE_CONTENT_TYPE, 'text')
                if kind == 'text':
                    blocks.append({'type': 'text', 'text': mc.get(MessageContentAttributes.MESSAGE_CONTENT_TEXT, '')})
                else:
                    blocks.append({'type': 'image' if kind == 'image' else str(kind)})
            chat.setdefault('content', blocks)
        calls = message.get(MessageAttributes.MESSAGE_TOOL_CALLS)
        if isinstance(calls, list):
            chat['tool_calls'] = [_openinference_call(_dotted(c)) for c in calls if isinstance(c, dict)]
        if message.get(MessageAttributes.MESSAGE_FUNCTION_CALL_NAME):
            chat['function_call'] = {
                'name': message[MessageAttributes.MESSAGE_FUNCTION_CALL_NAME],
                'arguments': message.get(MessageAttributes.MESSAGE_FUNCTION_CALL_ARGUMENTS_JSON),
            }
        if message.get(MessageAttributes.MESSAGE_TOOL_CALL_ID) is not None:
            chat['tool_call_id'] = message[MessageAttributes.MESSAGE_TOOL_CALL_ID]
        if isinstance(message.get(MessageAttributes.MESSAGE_NAME), str):
            chat['name'] = message[MessageAttributes.MESSAGE_NAME]
        if chat['role'] in ('tool', 'function') and 'content' not in chat:
            chat['content'] = None
        out.extend(read_messages([chat], mwhere, warn, default_role))
    return out


def _openinference_call(call: Mapping[str, Any]) -> dict[str, Any]:
    return {
        'id': call.get(ToolCallAttributes.TOOL_CALL_ID),
        'function': {
            'name': call.get(ToolCallAttributes.TOOL_CALL_FUNCTION_NAME),
            'arguments': call.get(ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON),
        },
    }


def same_arguments(a: str, b: str) -> bool:
    """Whether two calls' arguments (JSON text) are the same call's: equal as JSON, or one is the other's text
    input (`{"input": <text>}`, how a tool span records a tool's plain-text input) matching its only value."""
    ca, cb = canonical(a), canonical(b)
    if ca == cb:
        return True
    for text_form, other in ((a, b), (b, a)):
        data = maybe_json(text_form)
        if isinstance(data, dict) and set(data) == {'input'} and isinstance(data['input'], str):
            values = maybe_json(other)
            if isinstance(values, dict) and len(values) == 1 and str(next(iter(values.values()))) == data['input']:
                return True
            if canonical(data['input']) == canonical(other):
                return True
    return False
