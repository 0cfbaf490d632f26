"""What an agent run's spans say it did, under either convention agents are traced with, as chat-completions
messages (the `openai` record format) for a `QueryRecord`.

Two conventions, each in several generations, are read:

* **OpenTelemetry GenAI.** Model-call spans (`chat`, `text_completion`, `generate_content`, or any span with
  message attributes) carry `gen_ai.input.messages` / `gen_ai.output.messages` as `{role, parts: [...]}`
  messages (part types `text`, `tool_call` with `arguments`, `tool_call_response` with its result in
  `response` — `result` in drafts and in pydantic-ai —, `reasoning`/`thinking`, `blob`/`file`/`uri`), with
  `gen_ai.system_instructions` beside them; the same attributes on a `gen_ai.client.inference.operation.details`
  event; the older per-message events (`gen_ai.system.message`, `gen_ai.user.message`,
  `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`, body in the event's attributes or
  in `gen_ai.event.content`); the older `gen_ai.prompt` / `gen_ai.completion` attributes and
  `gen_ai.content.prompt` / `gen_ai.content.completion` events (a JSON list of messages or plain text) and
  their flattened form (`gen_ai.prompt.0.role`, `gen_ai.completion.0.tool_calls.0.name`). Messages in the
  chat-completions shape (`{role, content, tool_calls}`) inside those attributes are read too, as many
  frameworks write them. Tool executions are `execute_tool` spans (`gen_ai.tool.name`,
  `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`); agent runs are
  `invoke_agent` spans named by `gen_ai.agent.name`.
* **OpenInference** (Phoenix and its instrumentations). `openinference.span.kind` says LLM, TOOL, AGENT,
  CHAIN or RETRIEVER; model calls flatten their messages (`llm.input_messages.0.message.role`,
  `….message.content` or `….message.contents.0.message_content.text`,
  `….message.tool_calls.0.tool_call.function.name` / `.arguments` / `.id`, `….message.tool_call_id`);
  a tool span has `tool.name` and its arguments and result in `input.value` / `output.value` (JSON or text
  per `input.mime_type` / `output.mime_type`); a retriever's documents are its result; the agent's name is
  `agent.name` (or `graph.node.name`); `session.id` groups runs.

How a run's history is assembled: its model calls are read in time order; each call's input messages
extend what that agent's model saw before (a prefix already read is skipped), then its output messages are
added. A tool call is paired with its result by id; without ids, with the earliest waiting call of the same
name (else the earliest waiting call). A tool span whose call no model output shows (frameworks that record
only tool spans) becomes the call and its result. The run's own input and output (`input.value` /
`output.value`, or the agent span's messages) stand in for a user turn or an answer no model call recorded.
When two or more agents speak, each assistant message names its agent (`name`, the record's speaker field).

Nothing is dropped silently: a part, message or span the readers cannot place becomes a located warning on
the record; a tool result that is present but cannot be read is a `SpanError` (the run is refused with the
field named), never a `null` result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sensei_eval.core.errors import json_error_text
from sensei_eval.core.sanitize import JsonLimitError, loads_limited
from sensei_eval.core.span_model import Span, SpanError, SpanEvent

__all__ = ('RunContent', 'read_run', 'speaker_of_span')

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
# Attributes naming the agent a span belongs to (GenAI, OpenInference, LangGraph nodes through OpenInference).
_AGENT_NAME_ATTRIBUTES = ('gen_ai.agent.name', 'agent.name', 'graph.node.name')
# Span attributes naming an agent span itself (OpenLLMetry's agent and workflow spans).
_ENTITY_NAME = 'traceloop.entity.name'
# Span attributes whose presence on a span the readers do not map means content was left out.
_CONTENT_ATTRIBUTES = ('input.value', 'output.value', 'gen_ai.input.messages', 'gen_ai.output.messages')
_OLD_MESSAGE_EVENTS = {f'gen_ai.{role}.message': role for role in _ROLE_NAMES}


@dataclass
class RunContent:
    """A run's history as chat-completions messages, with what could not be placed and the token usage."""

    messages: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    agents: list[str] = field(default_factory=list)
    session_id: str | None = None


def read_run(run: Span, inner: Sequence[Span]) -> RunContent:
    """The history of the run whose top span is `run` (an agent span, or a trace's root) and whose other
    spans are `inner`; raises `SpanError` for content present but unreadable (see the module docstring)."""
    if run.attributes.get('pydantic_ai.all_messages') is not None:
        return _read_pydantic_ai(run, inner)
    spans = sorted([run, *inner], key=lambda s: (s.start_ns, s.end_ns))
    by_id = {s.span_id: s for s in spans}
    convo = _Conversation()
    whole = 'all_messages_events' in run.attributes  # pydantic-ai's first instrumentation: the run holds it all
    if whole:
        for m in _event_history(run, convo.warn):
            convo.add(m, None)
    for span in spans:
        speaker = speaker_of_span(span, by_id)
        kind = span.kind
        if kind == 'llm' and not whole:
            if _inside_model_call(span, by_id):
                continue  # the same model call seen by a second instrumentation (a framework's and the client's)
            convo.model_call(span, speaker)
        elif kind in ('tool', 'retriever'):
            convo.tool_span(span, speaker)
        elif kind == 'other' and any(k in span.attributes for k in _CONTENT_ATTRIBUTES):
            label = span.openinference_kind or span.operation
            convo.warn(
                f'{span.path or span.name}: span {span.name!r} ({label}) is not a model call or a tool; '
                'its content is not in the transcript'
            )
    convo.flush()
    _run_io(run, spans, convo)
    convo.finish()
    usage = _usage(spans)
    agents = list(dict.fromkeys(s for s in (m.get('name') for m in convo.messages) if isinstance(s, str)))
    if len(agents) < 2:  # one agent: its name is the record's agent, not a speaker on every step
        for message in convo.messages:
            message.pop('name', None)
    session = _first_text(spans, ('session.id', 'gen_ai.conversation.id'))
    return RunContent(convo.messages, convo.warnings, usage, agents, session)


def _inside_model_call(span: Span, by_id: Mapping[str, Span]) -> bool:
    """Whether an enclosing model-call span already recorded this call's messages."""
    seen: set[str] = set()
    parent = by_id.get(span.parent_span_id) if span.parent_span_id else None
    while parent is not None and parent.span_id not in seen:
        seen.add(parent.span_id)
        if parent.kind == 'llm' and (_model_outputs(parent, _ignore) or _model_inputs(parent, _ignore)):
            return True
        parent = by_id.get(parent.parent_span_id) if parent.parent_span_id else None
    return False


def _ignore(_: str) -> None:
    """Warnings of a span read only to see whether it holds messages (it is read again, and warned about, itself)."""


def speaker_of_span(span: Span, by_id: Mapping[str, Span]) -> str | None:
    """The agent a span's step belongs to: the span's own agent name, else its nearest agent ancestor's."""
    node: Span | None = span
    seen: set[str] = set()
    while node is not None and node.span_id not in seen:
        seen.add(node.span_id)
        name = _agent_name(node)
        if name:
            return name
        node = by_id.get(node.parent_span_id) if node.parent_span_id else None
    return None


def _agent_name(span: Span) -> str | None:
    for key in _AGENT_NAME_ATTRIBUTES:
        value = span.attributes.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    if span.kind == 'agent':
        entity = span.attributes.get(_ENTITY_NAME)
        if isinstance(entity, str) and entity.strip():
            return entity.strip()
        if span.name.startswith('invoke_agent'):
            rest = span.name[len('invoke_agent') :].strip().strip('[]').strip()
            return rest or None
        if span.openinference_kind == 'AGENT':
            return span.name.strip() or None
    return None


def _first_text(spans: Sequence[Span], keys: Sequence[str]) -> str | None:
    for span in spans:
        for key in keys:
            value = span.attributes.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def _usage(spans: Sequence[Span]) -> dict[str, int]:
    pairs = (
        ('input_tokens', ('gen_ai.usage.input_tokens', 'gen_ai.usage.prompt_tokens', 'llm.token_count.prompt')),
        ('output_tokens', ('gen_ai.usage.output_tokens', 'gen_ai.usage.completion_tokens', 'llm.token_count.completion')),
    )
    out: dict[str, int] = {}
    for span in spans:
        if span.kind != 'llm':
            continue
        for name, keys in pairs:
            value = next((span.attributes[k] for k in keys if k in span.attributes), None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[name] = out.get(name, 0) + int(value)
    return out


# ---------------------------------------------------------------------------------------------------
# The conversation being assembled


@dataclass
class _Msg:
    """A message in neutral form, before it is written as a chat-completions message."""

    role: str
    content: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)  # {id, name, arguments (JSON text)}
    call_id: str | None = None  # for a tool result
    tool_name: str | None = None  # for a tool result, when known
    where: str = ''

    def key(self) -> tuple[Any, ...]:
        return (self.role, (self.content or '').strip(), tuple((c['name'], _canonical(c['arguments'])) for c in self.calls))


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except (ValueError, TypeError):
        return arguments


@dataclass
class _Waiting:
    call: dict[str, Any]
    name: str
    turn: int
    # a tool span's result, held until the next model call shows what the model saw of it (or the next turn)
    span_result: tuple[str, str] | None = None


class _Conversation:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.threads: dict[str | None, list[tuple[Any, ...]]] = {}
        self.waiting: list[_Waiting] = []
        self.answered: set[str] = set()
        self.ids: set[str] = set()
        self.systems: set[str] = set()
        self.emitted: set[tuple[Any, ...]] = set()
        self.turn = 0
        self.synthetic = 0

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    # -- model calls

    def model_call(self, span: Span, speaker: str | None) -> None:
        inputs = _model_inputs(span, self.warn)
        outputs = _model_outputs(span, self.warn)
        thread = self.threads.get(speaker, [])
        if inputs is not None:
            keys = [m.key() for m in inputs]
            k = 0
            while k < min(len(keys), len(thread)) and keys[k] == thread[k]:
                k += 1
            diverged = k < len(thread)
            for m in inputs[k:]:
                if diverged and m.role != 'tool' and m.key() in self.emitted:
                    continue  # a rewritten history repeats what was already read
                self.add(m, speaker)
            thread = keys
        for m in outputs:
            self.add(m, speaker)
        self.threads[speaker] = thread + [m.key() for m in outputs]

    def flush(self) -> None:
        """Results tool spans gave that no model input repeated: in place, before the next turn."""
        for w in [w for w in self.waiting if w.span_result is not None]:
            assert w.span_result is not None
            self.result(w.call['id'], w.name, w.span_result[0], w.span_result[1])

    def add(self, m: _Msg, speaker: str | None) -> None:
        named = {'name': speaker} if speaker else {}
        if m.role != 'tool':
            self.flush()
        if m.role == 'system':
            text = (m.content or '').strip()
            if text and text not in self.systems:
                self.systems.add(text)
                self.messages.append({'role': 'system', 'content': m.content, **named})
            return
        if m.role == 'user':
            self.messages.append({'role': 'user', 'content': m.content or ''})
            self.emitted.add(m.key())
            return
        if m.role == 'tool':
            self.result(m.call_id, m.tool_name, m.content if m.content is not None else '', m.where)
            return
        # assistant
        self.turn += 1
        calls = []
        for call in m.calls:
            call_id = call.get('id') or None
            if call_id in self.ids:
                continue  # the same call read again (an output repeated in a later input)
            call_id = call_id or self._new_id()
            self.ids.add(call_id)
            entry = {'id': call_id, 'type': 'function', 'function': {'name': call['name'], 'arguments': call['arguments']}}
            calls.append(entry)
            self.waiting.append(_Waiting(entry, call['name'], self.turn))
        if not calls and not (m.content or '').strip():
            return
        out: dict[str, Any] = {'role': 'assistant', 'content': m.content if (m.content or '').strip() else None, **named}
        if calls:
            out['tool_calls'] = calls
        self.messages.append(out)
        self.emitted.add(m.key())

    def _new_id(self) -> str:
        """An id for a call the trace gave none (`trace_call_N`, unlike any id a provider writes)."""
        self.synthetic += 1
        while f'trace_call_{self.synthetic}' in self.ids:
            self.synthetic += 1
        return f'trace_call_{self.synthetic}'

    def _pick(self, call_id: str | None, name: str | None, *, unclaimed: bool = False) -> _Waiting | None:
        """The waiting call a result answers: by id, else the earliest of that tool, else (no id) the earliest;
        `unclaimed` skips calls a tool span already answered (another span of the same tool)."""
        waiting = [w for w in self.waiting if not (unclaimed and w.span_result is not None)]
        if call_id:
            for w in waiting:
                if w.call['id'] == call_id:
                    return w
        for test in ((lambda w: w.name == name) if name else None, None if call_id else (lambda w: True)):
            if test is None:
                continue
            for w in waiting:
                if test(w):
                    return w
        if call_id and len(waiting) == 1 and waiting[0].call['id'].startswith('trace_call_'):
            return waiting[0]  # the one call waiting had no id in the trace: this result is its
        return None

    def result(self, call_id: str | None, name: str | None, content: str, where: str) -> bool:
        """A tool result: answers its waiting call; False when no call waits for it."""
        if call_id and call_id in self.answered:
            return True  # read twice (a tool span and the next model input): kept once
        waiting = self._pick(call_id, name)
        if waiting is None:
            self.warn(
                f'{where}: a tool result{f" of {name!r}" if name else ""}{f" (id {call_id!r})" if call_id else ""} '
                'answers no tool call in the trace; it is not in the transcript'
            )
            return False
        self.waiting.remove(waiting)
        self.answered.add(waiting.call['id'])
        self.messages.append({'role': 'tool', 'tool_call_id': waiting.call['id'], 'content': content})
        return True

    # -- tool spans

    def tool_span(self, span: Span, speaker: str | None) -> None:
        name, args, call_id, result = _tool_span(span, self.warn)
        if call_id and call_id in self.answered:
            return
        waiting = self._pick(call_id, name, unclaimed=True)
        if waiting is None:
            # no model output shows this call: the span is the call (frameworks that trace only tools)
            self.add(_Msg('assistant', None, [{'id': call_id, 'name': name, 'arguments': args}]), speaker)
            waiting = self.waiting[-1] if self.waiting and self.waiting[-1].name == name else None
            if waiting is None:
                return
        elif _empty_args(waiting.call['function']['arguments']) and not _empty_args(args):
            waiting.call['function']['arguments'] = args  # the model's call lost its arguments; the span ran with these
        if result is None:
            self.warn(f'{span.path or span.name}: tool span {name!r} records no result (content capture off?)')
            return
        waiting.span_result = (result, span.path)

    def finish(self) -> None:
        self.flush()
        for w in self.waiting:
            self.warn(f'tool call {w.name!r} (id {w.call["id"]}) has no result in the trace')


def _empty_args(arguments: str) -> bool:
    return arguments.strip() in ('', '{}', 'null')


def _run_io(run: Span, spans: Sequence[Span], convo: _Conversation) -> None:
    """The run's own input and output where no model call gave a user turn or an answer."""
    has_user = any(m['role'] == 'user' for m in convo.messages)
    has_answer = any(m['role'] == 'assistant' and m.get('content') for m in convo.messages)
    if has_user and has_answer:
        return
    top = [run, *(s for s in spans if s.kind in ('agent', 'chain') and s is not run)]
    speaker = _agent_name(run)
    for span in top:
        inputs = _model_inputs(span, convo.warn) if span.kind != 'chain' else None
        if not has_user:
            text = None
            if inputs:
                text = next((m.content for m in inputs if m.role == 'user' and m.content), None)
            text = text or _value_text(span, 'input')
            if text:
                first = next((i for i, m in enumerate(convo.messages) if m['role'] != 'system'), len(convo.messages))
                convo.messages.insert(first, {'role': 'user', 'content': text})
                has_user = True
        if not has_answer:
            outputs = _model_outputs(span, convo.warn)
            text = next((m.content for m in reversed(outputs) if m.role == 'assistant' and m.content), None)
            text = text or _value_text(span, 'output')
            if text:
                convo.messages.append({'role': 'assistant', 'content': text, **({'name': speaker} if speaker else {})})
                has_answer = True
        if has_user and has_answer:
            return


def _value_text(span: Span, which: str) -> str | None:
    """OpenInference `input.value` / `output.value` as text (a JSON value's text part where it has one)."""
    value = span.attributes.get(f'{which}.value')
    if value is None:
        return None
    if not isinstance(value, str):
        return json.dumps(value, default=str)
    mime = span.attributes.get(f'{which}.mime_type')
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


# ---------------------------------------------------------------------------------------------------
# Reading one model call


def _json_value(span: Span, name: str, value: Any, where: str | None = None) -> Any:
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


def _model_inputs(span: Span, warn: Any) -> list[_Msg] | None:
    """The messages a model call was sent, or None when the span does not record them."""
    a = span.attributes
    where = f'{span.path}.attributes'
    system = _system_instructions(span)
    if 'gen_ai.input.messages' in a:
        msgs = _messages(
            _json_value(span, 'gen_ai.input.messages', a['gen_ai.input.messages']), f'{where}[gen_ai.input.messages]', warn
        )
        return system + msgs
    for event in span.events:
        if event.name == 'gen_ai.client.inference.operation.details' and 'gen_ai.input.messages' in event.attributes:
            ewhere = f'{span.path}.events[{event.name}].attributes[gen_ai.input.messages]'
            value = _json_value(span, '', event.attributes['gen_ai.input.messages'], ewhere)
            return _system_instructions_value(event.attributes.get('gen_ai.system_instructions'), span) + _messages(
                value, ewhere, warn
            )
    flat = _unflatten(a, 'llm.input_messages')
    if flat is not None:
        return system + _openinference_messages(flat, f'{where}[llm.input_messages]', warn)
    events = [e for e in _all_events(span) if e.name in _OLD_MESSAGE_EVENTS]
    if events:
        out = list(system)
        for n, event in enumerate(events):
            body = _event_body(span, event, n)
            body.setdefault('role', _OLD_MESSAGE_EVENTS[event.name])
            out.extend(_messages([body], f'{span.path}.events[{n}]', warn))
        return out
    flat = _unflatten(a, 'gen_ai.prompt')
    if flat is not None:
        return system + _messages(_flat_list(flat), f'{where}[gen_ai.prompt]', warn)
    for key, event_name in (('gen_ai.prompt', 'gen_ai.content.prompt'),):
        value = a.get(key)
        if value is None:
            value = next((e.attributes.get(key) for e in span.events if e.name == event_name), None)
        if value is not None:
            return system + _loose_messages(span, key, value, 'user', warn)
    if span.openinference_kind == 'LLM' and 'input.value' in a:
        data = _maybe_json(a['input.value'])
        if isinstance(data, dict) and isinstance(data.get('messages'), list):
            return system + _messages(data['messages'], f'{where}[input.value].messages', warn)
    if 'gcp.vertex.agent.llm_request' in a:  # Google ADK's own spans: the Gemini request
        key = 'gcp.vertex.agent.llm_request'
        request = _json_value(span, key, a[key])
        if isinstance(request, dict) and isinstance(request.get('contents'), list):
            config = request.get('config') if isinstance(request.get('config'), dict) else {}
            instruction = _maybe_json(config.get('system_instruction')) if config else None
            if isinstance(instruction, dict):
                instruction = [_typed_part(p) for p in instruction.get('parts') or []]
            return (
                system
                + _system_instructions_value(instruction, span)
                + _messages(request['contents'], f'{where}[{key}].contents', warn)
            )
    return system or None


def _model_outputs(span: Span, warn: Any) -> list[_Msg]:
    a = span.attributes
    where = f'{span.path}.attributes'
    if 'gen_ai.output.messages' in a:
        return _messages(
            _json_value(span, 'gen_ai.output.messages', a['gen_ai.output.messages']),
            f'{where}[gen_ai.output.messages]',
            warn,
            'assistant',
        )
    for event in span.events:
        if event.name == 'gen_ai.client.inference.operation.details' and 'gen_ai.output.messages' in event.attributes:
            ewhere = f'{span.path}.events[{event.name}].attributes[gen_ai.output.messages]'
            return _messages(_json_value(span, '', event.attributes['gen_ai.output.messages'], ewhere), ewhere, warn, 'assistant')
    flat = _unflatten(a, 'llm.output_messages')
    if flat is not None:
        return _openinference_messages(flat, f'{where}[llm.output_messages]', warn, 'assistant')
    choices = [e for e in _all_events(span) if e.name == 'gen_ai.choice']
    if choices:
        out: list[_Msg] = []
        for n, event in enumerate(choices):
            body = _event_body(span, event, n)
            message = _choice_message(body)
            out.extend(_messages([message], f'{span.path}.events[gen_ai.choice]', warn, 'assistant'))
        return out
    flat = _unflatten(a, 'gen_ai.completion')
    if flat is not None:
        return _messages(_flat_list(flat), f'{where}[gen_ai.completion]', warn, 'assistant')
    for key, event_name in (('gen_ai.completion', 'gen_ai.content.completion'), ('gen_ai.output', '')):
        value = a.get(key)
        if value is None and event_name:
            value = next((e.attributes.get(key) for e in span.events if e.name == event_name), None)
        if value is not None:
            return _loose_messages(span, key, value, 'assistant', warn)
    if 'gcp.vertex.agent.llm_response' in a:  # Google ADK's own spans: the Gemini response
        key = 'gcp.vertex.agent.llm_response'
        response = _json_value(span, key, a[key])
        content = response.get('content') if isinstance(response, dict) else None
        if isinstance(content, dict):
            content = {'role': 'assistant', **{k: v for k, v in content.items() if k != 'role'}}
            return _messages([content], f'{where}[{key}].content', warn, 'assistant')
    if span.openinference_kind == 'LLM' and 'output.value' in a:
        data = _maybe_json(a['output.value'])
        if isinstance(data, dict) and isinstance(data.get('choices'), list):  # a chat-completions response body
            messages = [c.get('message') for c in data['choices'] if isinstance(c, dict) and isinstance(c.get('message'), dict)]
            return _messages(messages, f'{where}[output.value].choices', warn, 'assistant')
        text = _value_text(span, 'output')
        return [_Msg('assistant', text)] if text else []
    return []


def _maybe_json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return loads_limited(value, allow_nan=True)
    except (ValueError, JsonLimitError):
        return value


def _system_instructions(span: Span) -> list[_Msg]:
    return _system_instructions_value(span.attributes.get('gen_ai.system_instructions'), span)


def _system_instructions_value(value: Any, span: Span) -> list[_Msg]:
    if value is None:
        return []
    value = _maybe_json(value)
    text = _instruction_text(value)
    return [_Msg('system', text)] if text else []


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


def _event_history(span: Span, warn: Any) -> list[_Msg]:
    """Message events in the order they were written, choices as the assistant's turns."""
    out: list[_Msg] = []
    for n, event in enumerate(_all_events(span)):
        if event.name not in _OLD_MESSAGE_EVENTS and event.name != 'gen_ai.choice':
            continue
        body = _event_body(span, event, n)
        if event.name == 'gen_ai.choice':
            body = _choice_message(body)
        else:
            body.setdefault('role', _OLD_MESSAGE_EVENTS[event.name])
        out.extend(_messages([body], f'{span.path}.events[{n}]', warn))
    return out


def _choice_message(body: dict[str, Any]) -> dict[str, Any]:
    """A `gen_ai.choice` event's message: `message` as an object, or as a list of content blocks."""
    inner = body.get('message')
    if isinstance(inner, dict):
        message = dict(inner)
    elif isinstance(inner, list):
        message = {'content': inner}
    else:
        message = dict(body)
    message.setdefault('role', 'assistant')
    return message


def _all_events(span: Span) -> list[SpanEvent]:
    """The span's events, and the message events pydantic-ai's first instrumentation (through Logfire) kept in
    an attribute instead: `events` on a model call, `all_messages_events` on the agent run (a JSON list of
    event bodies, each naming itself in `event.name`)."""
    events = list(span.events)
    for key in ('events', 'all_messages_events'):
        value = _maybe_json(span.attributes.get(key))
        if isinstance(value, list):
            for body in value:
                if isinstance(body, dict) and isinstance(body.get('event.name'), str):
                    attrs = {k: v for k, v in body.items() if k != 'event.name'}
                    events.append(SpanEvent(body['event.name'], span.start_ns, attrs))
    return events


def _event_body(span: Span, event: Any, n: int) -> dict[str, Any]:
    attrs = dict(event.attributes)
    if 'gen_ai.event.content' in attrs:  # the body as JSON, as the Azure AI and early SDKs wrote it
        body = _json_value(span, '', attrs['gen_ai.event.content'], f'{span.path}.events[{n}].attributes[gen_ai.event.content]')
        if isinstance(body, dict):
            return dict(body)
    if 'body' in attrs and isinstance(_maybe_json(attrs['body']), dict):
        return dict(_maybe_json(attrs['body']))
    return {
        k: _maybe_json(v) if k in ('tool_calls', 'message') else v for k, v in attrs.items() if not k.startswith('gen_ai.system')
    }


def _loose_messages(span: Span, key: str, value: Any, role: str, warn: Any) -> list[_Msg]:
    """`gen_ai.prompt` / `gen_ai.completion` (and frameworks' `gen_ai.output`): a JSON list of messages, a
    list of tool calls, one message, or plain text."""
    where = f'{span.path}.attributes[{key}]'
    data = _maybe_json(value)
    if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
        if all(_call_name(d) and 'role' not in d and 'parts' not in d for d in data):  # a list of tool calls
            return [_Msg('assistant', None, [_call(d, f'{where}[{i}]', warn) for i, d in enumerate(data)])]
        return _messages(data, where, warn, role)
    if isinstance(data, dict) and ('role' in data or 'parts' in data or 'content' in data):
        return _messages([data], where, warn, role)
    if isinstance(value, str):
        return [_Msg(role, value)] if value.strip() else []
    return [_Msg(role, json.dumps(data, default=str))]


# ---------------------------------------------------------------------------------------------------
# Messages in their several shapes


def _messages(value: Any, where: str, warn: Any, default_role: str = 'user') -> list[_Msg]:
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise SpanError(where, f'expected a list of messages, got {type(value).__name__}')
    out: list[_Msg] = []
    for i, msg in enumerate(value):
        mwhere = f'{where}[{i}]'
        if isinstance(msg, str):
            out.append(_Msg(default_role, msg, where=mwhere))
            continue
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


def _from_parts(role: str, parts: list[Any], where: str, warn: Any) -> Iterator[_Msg]:
    """A GenAI `{role, parts}` message (see the module docstring for the part types)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, raw in enumerate(parts):
        pwhere = f'{where}.parts[{j}]'
        part = _typed_part(raw)
        kind = part.get('type') if isinstance(part, dict) else None
        if not isinstance(part, dict) or not isinstance(kind, str):
            raise SpanError(pwhere, 'expected a part object with a `type`')
        if kind == 'text':
            texts.append(str(part.get('content', part.get('text', ''))))
        elif kind in ('tool_call', 'function_call'):
            calls.append(_call(part, pwhere, warn))
        elif kind in ('tool_call_response', 'tool_result', 'function_response'):
            if texts and role != 'assistant':
                yield _Msg(role, '\n'.join(texts), where=where)
                texts = []
            yield _Msg(
                'tool',
                _result_text(part, pwhere),
                call_id=_text_id(part.get('id')),
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
            yield _Msg('tool', '\n'.join(texts), where=where)
        return
    if texts or calls:
        yield _Msg(role, '\n'.join(texts) if texts else None, calls if role == 'assistant' else [], where=where)
        if calls and role != 'assistant':
            warn(f'{where}: tool calls in a {role} message are not read')


def _typed_part(part: Any) -> Any:
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


def _call_name(data: Mapping[str, Any]) -> str | None:
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


def _call(data: Mapping[str, Any], where: str, warn: Any) -> dict[str, Any]:
    """A tool call in any of the shapes seen: GenAI part, chat-completions, Anthropic `tool_use`, flattened."""
    name = _call_name(data)
    if name is None:
        raise SpanError(f'{where}.name', 'a tool call without a tool name')
    fn = data['function'] if isinstance(data.get('function'), dict) else {}
    args: Any = None
    for value in (fn.get('arguments'), data.get('arguments'), data.get('input'), data.get('args'), data.get('tool.args')):
        if value is not None:
            args = value
            break
    return {'id': _text_id(data.get('id')), 'name': name, 'arguments': _arguments_text(args, f'{where}.arguments', warn)}


def _arguments_text(args: Any, where: str, warn: Any) -> str:
    if args is None:
        return '{}'
    if isinstance(args, str):
        if not args.strip():
            return '{}'
        try:
            json.loads(args)
        except ValueError:
            warn(f'{where}: arguments are not JSON; kept as {{"input": <text>}}')
            return json.dumps({'input': args})
        return args
    return json.dumps(args, default=str)


def _text_id(value: Any) -> str | None:
    if value is None or value == '':
        return None
    return str(value)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _from_chat_message(role: str, msg: Mapping[str, Any], where: str, warn: Any) -> Iterator[_Msg]:
    """A chat-completions style message (`content` text or content blocks, `tool_calls`, `tool_call_id`)."""
    content = msg.get('content')
    if isinstance(content, str) and content.startswith('[{'):  # content blocks written as JSON text (Strands)
        blocks = _maybe_json(content)
        if isinstance(blocks, list) and blocks and all(isinstance(b, dict) and _block_kind(b) for b in blocks):
            content = blocks
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[_Msg] = []
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
                calls.append(_call(block, bwhere, warn))
            elif kind in ('tool_result', 'tool_call_response', 'function_call_output'):
                call_id = _text_id(block.get('tool_use_id') or block.get('id') or block.get('call_id'))
                results.append(_Msg('tool', _block_result(block, bwhere), call_id=call_id, where=bwhere))
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
        raw_calls = _maybe_json(raw_calls)
    if isinstance(raw_calls, list):
        calls.extend(_call(c, f'{where}.tool_calls[{n}]', warn) for n, c in enumerate(raw_calls) if isinstance(c, dict))
    fc = msg.get('function_call')
    if isinstance(fc, dict):
        calls.append(_call(fc, f'{where}.function_call', warn))
    yield from results
    if role == 'tool':
        if content is None and not texts:
            raise SpanError(f'{where}.content', 'a tool message without its result (`content`): the tool result cannot be read')
        call_id = _text_id(msg.get('tool_call_id') or msg.get('id'))
        yield _Msg('tool', '\n'.join(texts), call_id=call_id, tool_name=_opt_str(msg.get('name')), where=where)
        return
    text = '\n'.join(texts) if texts else None
    if text is not None or calls:
        yield _Msg(role, text, calls if role == 'assistant' else [], where=where)


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


# ---------------------------------------------------------------------------------------------------
# Flattened attributes (OpenInference, OpenLLMetry)

_INDEX = re.compile(r'^\d+$')


def _unflatten(attributes: Mapping[str, Any], prefix: str) -> dict[str, Any] | None:
    """Attributes under `prefix.` as a nested dict (`llm.input_messages.0.message.role` ->
    {'0': {'message': {'role': …}}}), or the attribute itself when an exporter kept it as a list."""
    if isinstance(attributes.get(prefix), list):
        return {str(i): v for i, v in enumerate(attributes[prefix])}
    start = prefix + '.'
    found = {k[len(start) :]: v for k, v in attributes.items() if k.startswith(start)}
    if not found or not any(_INDEX.match(k.split('.', 1)[0]) for k in found):
        return None
    root: dict[str, Any] = {}
    for key in sorted(found):
        node = root
        parts = key.split('.')
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = found[key]
    return root


def _flat_list(node: Mapping[str, Any]) -> list[Any]:
    return [_flat_value(node[k]) for k in sorted((k for k in node if _INDEX.match(k)), key=int)]


def _flat_value(value: Any) -> Any:
    if isinstance(value, dict):
        if value and all(_INDEX.match(k) for k in value):
            return _flat_list(value)
        return {k: _flat_value(v) for k, v in value.items()}
    return value


def _openinference_messages(node: Mapping[str, Any], where: str, warn: Any, default_role: str = 'user') -> list[_Msg]:
    out: list[_Msg] = []
    for i, raw in enumerate(_flat_list(node)):
        mwhere = f'{where}.{i}'
        message = raw.get('message', raw) if isinstance(raw, dict) else raw
        if not isinstance(message, dict):
            raise SpanError(mwhere, 'expected message.* attributes')
        chat: dict[str, Any] = {'role': message.get('role', default_role)}
        if 'content' in message:
            chat['content'] = message['content']
        contents = message.get('contents')
        if isinstance(contents, list):
            blocks = []
            for c in contents:
                mc = c.get('message_content', c) if isinstance(c, dict) else {}
                kind = mc.get('type', 'text')
                if kind == 'text':
                    blocks.append({'type': 'text', 'text': mc.get('text', '')})
                else:
                    blocks.append({'type': 'image' if kind == 'image' else kind})
            chat.setdefault('content', blocks)
        calls = message.get('tool_calls')
        if isinstance(calls, list):
            chat['tool_calls'] = [c.get('tool_call', c) if isinstance(c, dict) else c for c in calls]
        if message.get('function_call_name'):
            chat['function_call'] = {
                'name': message['function_call_name'],
                'arguments': message.get('function_call_arguments_json'),
            }
        if message.get('tool_call_id') is not None:
            chat['tool_call_id'] = message['tool_call_id']
        if isinstance(message.get('name'), str):
            chat['name'] = message['name']
        if chat['role'] in ('tool', 'function') and 'content' not in chat:
            chat['content'] = None
        out.extend(_messages([chat], mwhere, warn, default_role))
    return out


# ---------------------------------------------------------------------------------------------------
# Tool spans


def _tool_span(span: Span, warn: Any) -> tuple[str, str, str | None, str | None]:
    """(tool name, arguments as JSON text, call id, result text or None when not recorded)."""
    a = span.attributes
    where = f'{span.path}.attributes'
    name = next(
        (str(a[k]) for k in ('gen_ai.tool.name', 'tool.name', 'tool_call.function.name') if isinstance(a.get(k), str) and a[k]),
        None,
    )
    if name is None:
        name = span.name.removeprefix('execute_tool').removeprefix('running tool').strip() or span.name
        if span.kind == 'retriever':
            name = span.name or 'retrieve'
    call_id = next((_text_id(a[k]) for k in ('gen_ai.tool.call.id', 'tool_call.id', 'tool.id') if a.get(k) is not None), None)
    args: Any = None
    arg_keys = (
        'gen_ai.tool.call.arguments',
        'gen_ai.tool.args',
        'tool_call.function.arguments',
        'gcp.vertex.agent.tool_call_args',
    )
    for key in (*arg_keys, 'input.value', 'traceloop.entity.input'):
        if key in a:
            args = a[key]
            break
    if 'traceloop.entity.input' in a and args is a['traceloop.entity.input']:
        data = _maybe_json(args)
        if isinstance(data, dict):  # OpenLLMetry: {"inputs": {...}} or {"args": [...], "kwargs": {...}}
            args = data.get('inputs', data.get('kwargs', data))
    data = _maybe_json(args) if isinstance(args, str) else args
    if (
        isinstance(data, dict)
        and set(data) <= {'args', 'kwargs'}
        and not data.get('args')
        and isinstance(data.get('kwargs'), dict)
    ):
        args = data['kwargs']  # a Python call's inputs as OpenInference instrumentations record them
    if span.kind == 'retriever' and isinstance(args, str) and not _is_json_object(args):
        args = {'query': args}
    arguments = _arguments_text(args, f'{where}[arguments]', warn)
    result: Any = None
    result_keys = ('gen_ai.tool.call.result', 'gen_ai.tool.message', 'gcp.vertex.agent.tool_response', 'gen_ai.output')
    for key in (*result_keys, 'output.value', 'traceloop.entity.output'):
        if key in a:
            result = a[key]
            break
    if 'traceloop.entity.output' in a and result is a['traceloop.entity.output']:
        data = _maybe_json(result)
        if isinstance(data, dict) and 'outputs' in data:
            result = data['outputs']
    if result is None and span.kind == 'retriever':
        docs = _unflatten(a, 'retrieval.documents')
        if docs is not None:
            result = json.dumps([d.get('document', d) if isinstance(d, dict) else d for d in _flat_list(docs)], default=str)
    if result is None:
        for event in span.events:
            if event.name == 'gen_ai.tool.message' or event.name == 'gen_ai.choice':
                body = _event_body(span, event, 0)
                if 'content' in body:
                    result = body['content']
    if result is None and span.status == 'error':
        message = span.status_message or next(
            (str(e.attributes.get('exception.message')) for e in span.events if e.name == 'exception'), 'the tool failed'
        )
        result = f'error: {message}'
    if result is None:
        return name, arguments, call_id, None
    return name, arguments, call_id, result if isinstance(result, str) else json.dumps(result, default=str)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------------------
# pydantic-ai's whole-history attribute


def _read_pydantic_ai(run: Span, inner: Sequence[Span]) -> RunContent:
    """pydantic-ai's instrumentation (versions 2 to 6): `pydantic_ai.all_messages` on the agent-run span,
    `gen_ai.system_instructions` beside it; results only an `execute_tool` span saw are added."""
    where = f'{run.path}.attributes[pydantic_ai.all_messages]'
    otel = _json_value(run, 'pydantic_ai.all_messages', run.attributes['pydantic_ai.all_messages'])
    if not otel:
        raise SpanError(where, 'the agent run carries no messages (instrumented with include_content=False?)')
    if not isinstance(otel, list):
        raise SpanError(where, 'expected a JSON list of messages')
    warnings: list[str] = []
    msgs: list[_Msg] = _system_instructions(run) + _messages(otel, where, warnings.append)
    convo = _Conversation()
    convo.warnings = warnings
    for m in msgs:
        convo.add(m, None)
    for span in sorted(inner, key=lambda s: s.start_ns):
        if span.kind == 'tool':
            name, _, call_id, result = _tool_span(span, convo.warn)
            if call_id and call_id not in convo.answered and result is not None and convo._pick(call_id, None):
                convo.result(call_id, name, result, span.path)
    # results added late go right after their call's message, where the model saw them
    convo.messages = _results_after_calls(convo.messages)
    convo.finish()
    return RunContent(convo.messages, convo.warnings, _usage(inner), [], None)


def _results_after_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = {m['tool_call_id']: m for m in messages if m.get('role') == 'tool'}
    placed: set[int] = set()
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get('role') == 'tool':
            if id(message) not in placed:
                out.append(message)
                placed.add(id(message))
            continue
        out.append(message)
        for call in message.get('tool_calls') or []:
            result = results.get(call['id'])
            if result is not None and id(result) not in placed:
                out.append(result)
                placed.add(id(result))
    return out
