"""Langfuse's observation attributes (its SDK v3 and later, OpenTelemetry-based): every span carries
`langfuse.observation.type` (`agent`, `generation`, `tool`, `chain`, `retriever`, `span`, `event`, …) and the
observation's `langfuse.observation.input` / `.output` as JSON text. What each holds depends on who recorded it:

* a `generation` made by the OpenAI wrapper (`from langfuse.openai import OpenAI`): the request's messages and
  tools (`{"messages": [...], "tools": [...]}`) or the messages alone, and the response message
  (`{"role": "assistant", "content": …, "tool_calls": […]}`); one made by hand: whatever was given, often
  messages or text;
* a function decorated with `@observe` (an agent, a tool): its call (`{"args": [...], "kwargs": {...}}`) and its
  return value.

The model is `langfuse.observation.model.name`, token usage `langfuse.observation.usage_details`
(`{"prompt_tokens", "completion_tokens"}` or `{"input", "output"}`). Langfuse defines these names in its SDK,
not in a conventions package, so they are written here.
"""

from __future__ import annotations

from typing import Any

from sensei_eval.core.readers.messages import Msg, Warn, json_value, maybe_json, read_messages
from sensei_eval.core.span_model import LANGFUSE_TYPE, Span

__all__ = (
    'LANGFUSE_INPUT',
    'LANGFUSE_MODEL',
    'LANGFUSE_OUTPUT',
    'LANGFUSE_USAGE',
    'call_arguments',
    'generation_inputs',
    'generation_outputs',
    'io_text',
    'is_langfuse',
    'tool_definitions',
    'usage',
)

LANGFUSE_INPUT = 'langfuse.observation.input'
LANGFUSE_OUTPUT = 'langfuse.observation.output'
LANGFUSE_MODEL = 'langfuse.observation.model.name'
LANGFUSE_USAGE = 'langfuse.observation.usage_details'
# The usage keys Langfuse's integrations write, per direction.
_USAGE_KEYS = {
    'input_tokens': ('prompt_tokens', 'input', 'input_tokens'),
    'output_tokens': ('completion_tokens', 'output', 'output_tokens'),
}


def is_langfuse(span: Span) -> bool:
    return isinstance(span.attributes.get(LANGFUSE_TYPE), str)


def _value(span: Span, key: str) -> Any:
    value = span.attributes.get(key)
    return maybe_json(value) if isinstance(value, str) else value


def call_arguments(value: Any) -> Any:
    """A decorated function's recorded call (`{"args": [...], "kwargs": {...}}`) as what it was called with: its
    keyword arguments, or its one positional argument; anything else unchanged."""
    if isinstance(value, dict) and set(value) <= {'args', 'kwargs'} and ('args' in value or 'kwargs' in value):
        args: list[Any] = value['args'] if isinstance(value.get('args'), list) else []
        kwargs: dict[str, Any] = value['kwargs'] if isinstance(value.get('kwargs'), dict) else {}
        if kwargs and not args:
            return kwargs
        if len(args) == 1 and not kwargs:
            return args[0]
        if args and not kwargs:
            return args
    return value


def generation_inputs(span: Span, warn: Warn) -> list[Msg] | None:
    """The messages a `generation` observation was sent, or None when it records none."""
    if LANGFUSE_INPUT not in span.attributes:
        return None
    where = f'{span.path}.attributes[{LANGFUSE_INPUT}]'
    value = call_arguments(json_value(span, LANGFUSE_INPUT, span.attributes[LANGFUSE_INPUT]))
    if isinstance(value, dict) and isinstance(value.get('messages'), list):
        return read_messages(value['messages'], f'{where}.messages', warn)
    if isinstance(value, dict) and isinstance(value.get('prompt'), str):
        return [Msg('user', value['prompt'], where=where)]
    if isinstance(value, list | dict):
        return read_messages(value, where, warn)
    if isinstance(value, str) and value.strip():
        return [Msg('user', value, where=where)]
    return None


def generation_outputs(span: Span, warn: Warn) -> list[Msg]:
    """What a `generation` observation answered: a message, messages, a completions body's choices, or text."""
    if LANGFUSE_OUTPUT not in span.attributes:
        return []
    where = f'{span.path}.attributes[{LANGFUSE_OUTPUT}]'
    value = json_value(span, LANGFUSE_OUTPUT, span.attributes[LANGFUSE_OUTPUT])
    if isinstance(value, dict) and isinstance(value.get('choices'), list):
        value = [c['message'] for c in value['choices'] if isinstance(c, dict) and isinstance(c.get('message'), dict)]
    if isinstance(value, dict | list):
        return read_messages(value, where, warn, 'assistant')
    if isinstance(value, str) and value.strip():
        return [Msg('assistant', value, where=where)]
    return []


def io_text(span: Span, which: str) -> str | None:
    """An agent or chain observation's input (`which='input'`) or output as text: a call's one text argument
    or `question`/`query`/`input` keyword, the last message's text, or the value itself."""
    value = call_arguments(_value(span, LANGFUSE_INPUT if which == 'input' else LANGFUSE_OUTPUT))
    if isinstance(value, list) and value and which == 'input':
        value = next((v for v in value if isinstance(v, str)), value)
    if isinstance(value, dict):
        for key in ('question', 'query', 'input', 'prompt', 'output', 'answer', 'content', 'text'):
            if isinstance(value.get(key), str):
                return str(value[key])
        messages = value.get('messages')
        if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
            content = messages[-1].get('content')
            return content if isinstance(content, str) and content.strip() else None
        return None
    if isinstance(value, str):
        return value.strip() or None
    return None


def tool_definitions(span: Span) -> Any:
    """The `tools` a generation was offered (the OpenAI wrapper records the request's), or None."""
    value = _value(span, LANGFUSE_INPUT)
    return value.get('tools') if isinstance(value, dict) else None


def usage(span: Span) -> dict[str, int]:
    details = _value(span, LANGFUSE_USAGE)
    out: dict[str, int] = {}
    if isinstance(details, dict):
        for name, keys in _USAGE_KEYS.items():
            found = next(
                (details[k] for k in keys if isinstance(details.get(k), int) and not isinstance(details.get(k), bool)), None
            )
            if found is not None:
                out[name] = found
    return out
