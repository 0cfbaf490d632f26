"""LangChain's serialized objects, as instrumentations record them: OpenLLMetry writes a tool's output as the
`ToolMessage` it became (`{"output": {"lc": 1, "type": "constructor", "id": [..., "ToolMessage"], "kwargs":
{"content": …, "tool_call_id": …}}}`), a tool's input as the callback's envelope (`{"input_str": …, "inputs":
{…}, "kwargs": {"tool_call_id": …}}`) and a graph's state as lists of serialized messages. These helpers give
back what was said (a message as `{role, content, tool_calls, tool_call_id, name}`, a result's text, a call's
arguments) and leave anything else unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ('is_serialized', 'tool_input', 'tool_output', 'unwrap_message')

# LangChain message classes (the last element of a serialized object's `id`) and the chat role each is.
_MESSAGE_ROLES = {
    'HumanMessage': 'user',
    'HumanMessageChunk': 'user',
    'AIMessage': 'assistant',
    'AIMessageChunk': 'assistant',
    'SystemMessage': 'system',
    'SystemMessageChunk': 'system',
    'ToolMessage': 'tool',
    'ToolMessageChunk': 'tool',
    'FunctionMessage': 'tool',
    'ChatMessage': 'user',
}
# The message `type` LangChain writes in a message's own fields, and the chat role it is.
_TYPE_ROLES = {'human': 'user', 'ai': 'assistant', 'system': 'system', 'tool': 'tool', 'function': 'tool'}
# The `type`s of a message dumped without its role (`BaseMessage.model_dump()`); `function` is left out: a
# chat-completions tool call is `{"type": "function", …}` too.
_DUMPED_TYPES = frozenset({'human', 'ai', 'system', 'tool'})


def is_serialized(value: Any) -> bool:
    """A LangChain `Serializable` as `dumpd` writes it (`{"lc": 1, "type": "constructor", "id": [...], "kwargs": …}`)."""
    return isinstance(value, dict) and value.get('lc') == 1 and isinstance(value.get('id'), list) and 'kwargs' in value


def unwrap_message(value: Any) -> Any:
    """A serialized LangChain message (or one dumped by `model_dump`: `{"type": "human", "content": …}`, no role)
    as a chat message; anything else unchanged."""
    if isinstance(value, dict) and 'role' not in value and value.get('type') in _DUMPED_TYPES and 'content' in value:
        value = {'lc': 1, 'type': 'constructor', 'id': [], 'kwargs': value}
    if not is_serialized(value):
        return value
    kind = str(value['id'][-1]) if value['id'] else ''
    kwargs: dict[str, Any] = value['kwargs'] if isinstance(value.get('kwargs'), dict) else {}
    role = _MESSAGE_ROLES.get(kind) or _TYPE_ROLES.get(str(kwargs.get('type', '')))
    if role is None:
        return value
    message: dict[str, Any] = {'role': kwargs.get('role', role) if kind == 'ChatMessage' else role}
    message['content'] = kwargs.get('content', '')
    calls = kwargs.get('tool_calls')
    if isinstance(calls, list) and calls:
        message['tool_calls'] = [_tool_call(c) for c in calls if isinstance(c, dict)]
    for key in ('tool_call_id', 'name'):
        if isinstance(kwargs.get(key), str):
            message[key] = kwargs[key]
    return message


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A LangChain tool call (`{name, args, id}`) as a chat-completions one."""
    if 'function' in call:
        return dict(call)
    return {'id': call.get('id'), 'type': 'function', 'function': {'name': call.get('name'), 'arguments': call.get('args', {})}}


def tool_output(value: Any) -> tuple[Any, str | None]:
    """A tool's recorded output: the text of the `ToolMessage` it became (under `output` or alone) and that
    message's `tool_call_id`; anything else unchanged, with no id."""
    inner = value.get('output') if isinstance(value, dict) and 'output' in value else value
    if isinstance(inner, dict) and isinstance(inner.get('outputs'), dict | list) and not is_serialized(inner):
        inner = inner['outputs']
    message = unwrap_message(inner)
    if isinstance(message, dict) and message.get('role') == 'tool':
        call_id = message.get('tool_call_id')
        return message.get('content', ''), call_id if isinstance(call_id, str) else None
    return (inner if inner is not value else value), None


def tool_input(value: Any) -> tuple[Any, str | None]:
    """A tool's recorded input: the arguments of the callback's envelope (`inputs`, else `input_str`) and the
    `tool_call_id` it names; anything else unchanged, with no id."""
    if not isinstance(value, dict) or not ({'input_str', 'inputs'} & set(value)):
        return value, None
    kwargs: dict[str, Any] = value['kwargs'] if isinstance(value.get('kwargs'), dict) else {}
    call_id = kwargs.get('tool_call_id')
    args = value['inputs'] if isinstance(value.get('inputs'), dict) else value.get('input_str')
    return args, call_id if isinstance(call_id, str) else None
