"""What one model call was sent and what it answered, under every convention a span may record it in.

A model call's input and output messages are read from the first of these it carries:

* GenAI, current: `gen_ai.input.messages` (+ `gen_ai.system_instructions`) / `gen_ai.output.messages`; the same
  attributes on a `gen_ai.client.inference.operation.details` event (or log event joined to the span);
* OpenInference: `llm.input_messages.N.message.*` / `llm.output_messages.N.message.*`;
* Langfuse: a `generation`'s `langfuse.observation.input` / `.output` (`readers.langfuse`);
* GenAI, older events: `gen_ai.{system,user,assistant,tool}.message` / `gen_ai.choice` (span events, log events
  joined to the span, or the `events` attribute of pydantic-ai's first instrumentation);
* GenAI, older attributes (OpenLLMetry): `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`; oldest, `gen_ai.prompt`
  / `gen_ai.completion` (or their `gen_ai.content.*` events): JSON messages or text;
* frameworks' own: OpenInference `input.value` with `{"messages": […]}` / `output.value`; Google ADK
  `gcp.vertex.agent.llm_request` / `llm_response`; any-agent's `gen_ai.output`.

OpenLLMetry's LangChain instrumentation before 0.47 wrote an empty completion as the JSON text `""`: read as
no text, not as two quote marks.
"""

from __future__ import annotations

import json
from typing import Any

from openinference.semconv.trace import SpanAttributes
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai

from sensei_eval.core.readers import langfuse
from sensei_eval.core.readers.messages import (
    Msg,
    Warn,
    call_name,
    flat_list,
    json_value,
    maybe_json,
    openinference_messages,
    read_call,
    read_messages,
    typed_part,
    unflatten,
)
from sensei_eval.core.sanitize import JsonLimitError, loads_limited
from sensei_eval.core.span_model import Span, SpanEvent

__all__ = (
    'DETAILS_EVENT',
    'MESSAGE_EVENTS',
    'all_events',
    'event_body',
    'event_history',
    'model_inputs',
    'model_outputs',
    'records_messages',
    'system_instructions',
    'value_text',
)

# The GenAI conventions' event holding a whole call's messages as attributes.
DETAILS_EVENT = 'gen_ai.client.inference.operation.details'
# The older per-message events, by the role each holds.
MESSAGE_EVENTS = {f'gen_ai.{role}.message': role for role in ('system', 'user', 'assistant', 'tool')}
_CHOICE_EVENT = 'gen_ai.choice'
_INPUT = genai.GEN_AI_INPUT_MESSAGES
_OUTPUT = genai.GEN_AI_OUTPUT_MESSAGES
_SYSTEM = genai.GEN_AI_SYSTEM_INSTRUCTIONS


def records_messages(span: Span) -> bool:
    """Whether a model-call span recorded the call's messages (its input or output), read quietly."""
    try:
        return bool(model_outputs(span, _ignore) or model_inputs(span, _ignore))
    except Exception:  # unreadable content still counts as recorded: the span itself reports it when read
        return True


def _ignore(_: str) -> None:
    """Warnings of a span read only to see whether it holds messages (it is read again, and warned about, itself)."""


def value_text(span: Span, which: str) -> str | None:
    """OpenInference `input.value` / `output.value` as text (a JSON value's text part where it has one)."""
    value = span.attributes.get(SpanAttributes.INPUT_VALUE if which == 'input' else SpanAttributes.OUTPUT_VALUE)
    if value is None:
        return None
    if not isinstance(value, str):
        return json.dumps(value, default=str)
    mime = span.attributes.get(SpanAttributes.INPUT_MIME_TYPE if which == 'input' else SpanAttributes.OUTPUT_MIME_TYPE)
    if mime == 'application/json':
        try:
            data = loads_limited(value, allow_nan=True)
        except (ValueError, JsonLimitError):
            return value
        if isinstance(data, str):
            return data
        if isinstance(data, dict):
            for key in ('input', 'query', 'question', 'output', 'answer', 'content', 'text', 'result'):
                if isinstance(data.get(key), str):
                    return str(data[key])
            if isinstance(data.get('messages'), list) and data['messages']:
                last = data['messages'][-1]
                if isinstance(last, dict) and isinstance(last.get('content'), str):
                    return str(last['content'])
    return value.strip() or None


def model_inputs(span: Span, warn: Warn) -> list[Msg] | None:
    """The messages a model call was sent, or None when the span does not record them."""
    a = span.attributes
    where = f'{span.path}.attributes'
    system = system_instructions(span)
    if _INPUT in a:
        msgs = read_messages(json_value(span, _INPUT, a[_INPUT]), f'{where}[gen_ai.input.messages]', warn)
        return system + msgs
    for event in span.events:
        if event.name == DETAILS_EVENT and _INPUT in event.attributes:
            ewhere = f'{span.path}.events[{event.name}].attributes[gen_ai.input.messages]'
            value = json_value(span, '', event.attributes[_INPUT], ewhere)
            return _system_instructions_value(event.attributes.get(_SYSTEM), span) + read_messages(value, ewhere, warn)
    flat = unflatten(a, SpanAttributes.LLM_INPUT_MESSAGES, f'{where}[{SpanAttributes.LLM_INPUT_MESSAGES}]')
    if flat is not None:
        return system + openinference_messages(flat, f'{where}[llm.input_messages]', warn)
    if langfuse.is_langfuse(span):
        found = langfuse.generation_inputs(span, warn)
        if found is not None:
            return system + found
    events = [e for e in all_events(span) if e.name in MESSAGE_EVENTS]
    if events:
        out = list(system)
        for n, event in enumerate(events):
            body = event_body(span, event, n)
            body.setdefault('role', MESSAGE_EVENTS[event.name])
            out.extend(read_messages([body], f'{span.path}.events[{n}]', warn))
        return out
    flat = unflatten(a, genai.GEN_AI_PROMPT, f'{where}[{genai.GEN_AI_PROMPT}]')
    if flat is not None:
        return system + read_messages([_legacy_empty(m) for m in flat_list(flat)], f'{where}[{genai.GEN_AI_PROMPT}]', warn)
    for key, event_name in (('gen_ai.prompt', 'gen_ai.content.prompt'),):
        value = a.get(key)
        if value is None:
            value = next((e.attributes.get(key) for e in span.events if e.name == event_name), None)
        if value is not None:
            return system + _loose_messages(span, key, value, 'user', warn)
    if span.openinference_kind == 'LLM' and SpanAttributes.INPUT_VALUE in a:
        data = maybe_json(a[SpanAttributes.INPUT_VALUE])
        if isinstance(data, dict) and isinstance(data.get('messages'), list):
            return system + read_messages(data['messages'], f'{where}[input.value].messages', warn)
    if 'gcp.vertex.agent.llm_request' in a:  # Google ADK's own spans: the Gemini request
        key = 'gcp.vertex.agent.llm_request'
        request = json_value(span, key, a[key])
        if isinstance(request, dict) and isinstance(request.get('contents'), list):
            config = request.get('config') if isinstance(request.get('config'), dict) else {}
            instruction = maybe_json(config.get('system_instruction')) if config else None
            if isinstance(instruction, dict):
                instruction = [typed_part(p) for p in instruction.get('parts') or []]
            return (
                system
                + _system_instructions_value(instruction, span)
                + read_messages(request['contents'], f'{where}[{key}].contents', warn)
            )
    return system or None


def model_outputs(span: Span, warn: Warn) -> list[Msg]:
    """The messages a model call answered (empty when the span does not record them)."""
    a = span.attributes
    where = f'{span.path}.attributes'
    if _OUTPUT in a:
        return read_messages(
            json_value(span, _OUTPUT, a[_OUTPUT]),
            f'{where}[gen_ai.output.messages]',
            warn,
            'assistant',
        )
    for event in span.events:
        if event.name == DETAILS_EVENT and _OUTPUT in event.attributes:
            ewhere = f'{span.path}.events[{event.name}].attributes[gen_ai.output.messages]'
            return read_messages(json_value(span, '', event.attributes[_OUTPUT], ewhere), ewhere, warn, 'assistant')
    flat = unflatten(a, SpanAttributes.LLM_OUTPUT_MESSAGES, f'{where}[{SpanAttributes.LLM_OUTPUT_MESSAGES}]')
    if flat is not None:
        return openinference_messages(flat, f'{where}[llm.output_messages]', warn, 'assistant')
    if langfuse.is_langfuse(span) and langfuse.LANGFUSE_OUTPUT in a:
        return langfuse.generation_outputs(span, warn)
    choices = [e for e in all_events(span) if e.name == _CHOICE_EVENT]
    if choices:
        out: list[Msg] = []
        for n, event in enumerate(choices):
            body = event_body(span, event, n)
            message = _choice_message(body)
            out.extend(read_messages([message], f'{span.path}.events[gen_ai.choice]', warn, 'assistant'))
        return out
    flat = unflatten(a, genai.GEN_AI_COMPLETION, f'{where}[{genai.GEN_AI_COMPLETION}]')
    if flat is not None:
        completions = [_legacy_empty(m) for m in flat_list(flat)]
        return read_messages(completions, f'{where}[{genai.GEN_AI_COMPLETION}]', warn, 'assistant')
    for key, event_name in (('gen_ai.completion', 'gen_ai.content.completion'), ('gen_ai.output', '')):
        value = a.get(key)
        if value is None and event_name:
            value = next((e.attributes.get(key) for e in span.events if e.name == event_name), None)
        if value is not None:
            return _loose_messages(span, key, value, 'assistant', warn)
    if 'gcp.vertex.agent.llm_response' in a:  # Google ADK's own spans: the Gemini response
        key = 'gcp.vertex.agent.llm_response'
        response = json_value(span, key, a[key])
        content = response.get('content') if isinstance(response, dict) else None
        if isinstance(content, dict):
            content = {'role': 'assistant', **{k: v for k, v in content.items() if k != 'role'}}
            return read_messages([content], f'{where}[{key}].content', warn, 'assistant')
    if span.openinference_kind == 'LLM' and SpanAttributes.OUTPUT_VALUE in a:
        data = maybe_json(a[SpanAttributes.OUTPUT_VALUE])
        if isinstance(data, dict) and isinstance(data.get('choices'), list):  # a chat-completions response body
            messages = [c.get('message') for c in data['choices'] if isinstance(c, dict) and isinstance(c.get('message'), dict)]
            return read_messages(messages, f'{where}[output.value].choices', warn, 'assistant')
        text = value_text(span, 'output')
        return [Msg('assistant', text)] if text else []
    return []


def system_instructions(span: Span) -> list[Msg]:
    """`gen_ai.system_instructions` (JSON parts, or text) as a system message."""
    return _system_instructions_value(span.attributes.get(_SYSTEM), span)


def _system_instructions_value(value: Any, span: Span) -> list[Msg]:
    if value is None:
        return []
    value = maybe_json(value)
    text = _instruction_text(value)
    return [Msg('system', text)] if text else []


def _instruction_text(instructions: Any) -> str:
    if isinstance(instructions, str):
        return instructions
    if isinstance(instructions, list):
        return '\n\n'.join(
            str(p.get('content') if p.get('content') is not None else p.get('text', ''))
            for p in instructions
            if isinstance(p, dict) and p.get('type', 'text') == 'text'
        )
    return ''


def event_history(span: Span, warn: Warn) -> list[Msg]:
    """Message events in the order they were written, choices as the assistant's turns."""
    out: list[Msg] = []
    for n, event in enumerate(all_events(span)):
        if event.name not in MESSAGE_EVENTS and event.name != _CHOICE_EVENT:
            continue
        body = event_body(span, event, n)
        if event.name == _CHOICE_EVENT:
            body = _choice_message(body)
        else:
            body.setdefault('role', MESSAGE_EVENTS[event.name])
        out.extend(read_messages([body], f'{span.path}.events[{n}]', warn))
    return out


def _choice_message(body: dict[str, Any]) -> dict[str, Any]:
    """A `gen_ai.choice` event's message: `message` as an object, or as a list of content blocks; `tool_calls`
    beside it (as OpenLLMetry writes them) belong to it."""
    inner = body.get('message')
    if isinstance(inner, dict):
        message = dict(inner)
    elif isinstance(inner, list):
        message = {'content': inner}
    else:
        message = dict(body)
    if 'tool_calls' not in message and isinstance(body.get('tool_calls'), list):
        message['tool_calls'] = body['tool_calls']
    message.setdefault('role', 'assistant')
    return message


def all_events(span: Span) -> list[SpanEvent]:
    """The span's events, and the message events pydantic-ai's first instrumentation (through Logfire) kept in
    an attribute instead: `events` on a model call, `all_messages_events` on the agent run (a JSON list of
    event bodies, each naming itself in `event.name`)."""
    events = list(span.events)
    for key in ('events', 'all_messages_events'):
        value = maybe_json(span.attributes.get(key))
        if isinstance(value, list):
            for body in value:
                if isinstance(body, dict) and isinstance(body.get('event.name'), str):
                    attrs = {k: v for k, v in body.items() if k != 'event.name'}
                    events.append(SpanEvent(body['event.name'], span.start_ns, attrs))
    return events


def event_body(span: Span, event: Any, n: int) -> dict[str, Any]:
    """A message event's body: JSON in `gen_ai.event.content` or `body`, else the event's own attributes."""
    attrs = dict(event.attributes)
    if 'gen_ai.event.content' in attrs:  # the body as JSON, as the Azure AI and early SDKs wrote it
        body = json_value(span, '', attrs['gen_ai.event.content'], f'{span.path}.events[{n}].attributes[gen_ai.event.content]')
        if isinstance(body, dict):
            return dict(body)
    if 'body' in attrs and isinstance(maybe_json(attrs['body']), dict):
        return dict(maybe_json(attrs['body']))
    return {
        k: maybe_json(v) if k in ('tool_calls', 'message') else v for k, v in attrs.items() if not k.startswith('gen_ai.system')
    }


def _loose_messages(span: Span, key: str, value: Any, role: str, warn: Warn) -> list[Msg]:
    """`gen_ai.prompt` / `gen_ai.completion` (and frameworks' `gen_ai.output`): a JSON list of messages, a
    list of tool calls, one message, or plain text."""
    where = f'{span.path}.attributes[{key}]'
    data = maybe_json(value)
    if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
        if all(call_name(d) and 'role' not in d and 'parts' not in d for d in data):  # a list of tool calls
            return [Msg('assistant', None, [read_call(d, f'{where}[{i}]', warn) for i, d in enumerate(data)])]
        return read_messages(data, where, warn, role)
    if isinstance(data, dict) and ('role' in data or 'parts' in data or 'content' in data):
        return read_messages([data], where, warn, role)
    if isinstance(value, str):
        return [Msg(role, value)] if value.strip() else []
    return [Msg(role, json.dumps(data, default=str))]


def _legacy_empty(message: Any) -> Any:
    """A flattened message whose `content` is the JSON text of an empty string (`""`) with no content."""
    if isinstance(message, dict) and isinstance(message.get('content'), str):
        text = message['content'].strip()
        if len(text) >= 2 and text[0] == text[-1] == '"':
            try:
                decoded = loads_limited(text)
            except (ValueError, JsonLimitError):
                return message
            if isinstance(decoded, str) and not decoded.strip():
                return {**message, 'content': ''}
    return message
