"""What an agent run's spans say it did, under every convention agents are traced with, as chat-completions
messages (the `openai` record format) for a `QueryRecord`, with the tools the agent had.

The conventions read (the parts live in `core.readers`, one module per concern):

* **OpenTelemetry GenAI**, in each generation: model-call spans with `gen_ai.input.messages` /
  `gen_ai.output.messages` (`{role, parts}`) and `gen_ai.system_instructions`, the same as a
  `gen_ai.client.inference.operation.details` event, the older per-message events (on the span or sent as OTel
  log events and joined to it), `gen_ai.prompt` / `gen_ai.completion` and their flattened form (OpenLLMetry);
  `execute_tool` spans (`gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`,
  `gen_ai.tool.call.result`); `invoke_agent` spans named by `gen_ai.agent.name`; `gen_ai.tool.definitions`.
* **OpenInference** (Phoenix and its instrumentations): `openinference.span.kind` LLM, TOOL, AGENT, CHAIN,
  RETRIEVER; flattened `llm.input_messages.N.message.*`; `input.value` / `output.value`; `agent.name` /
  `graph.node.name`; `session.id`; `llm.tools.N.tool.json_schema`.
* **Langfuse** (SDK v3 and later): `langfuse.observation.type` and `.input` / `.output` (`readers.langfuse`).
* **Frameworks' own shapes**: OpenLLMetry's LangChain envelopes and serialized messages (`readers.langchain`),
  Google ADK's Gemini requests, any-agent's `gen_ai.output`, pydantic-ai's whole-history attributes
  (`readers.pydantic_ai`).

How a run's history is assembled is `readers.history`: the model calls' input histories are the backbone, and
a tool span is the same call as the one that history shows (by id, else by name and arguments), placed where
the history puts it. A model-call span that runs inside another model call that recorded its messages (a
framework's span around the client library's) is the same call, read once; a model call parented under an
earlier one it does not run within (consecutive calls, as OpenLLMetry's LangChain instrumentation parents them)
is a call of its own. The run's own input and output (OpenInference `input.value` / `output.value`, a Langfuse
agent's input and output, the agent span's messages) stand in for a user turn or an answer no model call
recorded. When two or more agents speak, each assistant message names its agent (`name`).

Nothing is dropped silently: a part, message or span the readers cannot place becomes a located warning on
the record, and so does a run whose final answer is empty; a tool result that is present but cannot be read is
a `SpanError` (the run is refused with the field named), never a `null` result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openinference.semconv.trace import SpanAttributes
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai

from sensei_eval.core.message_formats import FINAL_ANSWER_TOOLS
from sensei_eval.core.readers import langfuse
from sensei_eval.core.readers.history import Conversation
from sensei_eval.core.readers.model_calls import model_inputs, model_outputs, records_messages, value_text
from sensei_eval.core.readers.pydantic_ai import ALL_MESSAGES, ALL_MESSAGES_EVENTS, read_whole_history
from sensei_eval.core.readers.tool_spans import tool_definitions
from sensei_eval.core.span_model import Span, SpanIndex

__all__ = ('RunContent', 'agent_name', 'read_run', 'speaker_of_span')

# Attributes naming the agent a span belongs to (GenAI, OpenInference, LangGraph nodes through OpenInference).
_AGENT_NAME_ATTRIBUTES = (genai.GEN_AI_AGENT_NAME, SpanAttributes.AGENT_NAME, SpanAttributes.GRAPH_NODE_NAME)
# Span attributes naming an agent span itself (OpenLLMetry's agent and workflow spans).
_ENTITY_NAME = 'traceloop.entity.name'
# Span attributes whose presence on a span the readers do not map means content was left out.
_CONTENT_ATTRIBUTES = (
    SpanAttributes.INPUT_VALUE,
    SpanAttributes.OUTPUT_VALUE,
    genai.GEN_AI_INPUT_MESSAGES,
    genai.GEN_AI_OUTPUT_MESSAGES,
)
# Token counts per direction, under each convention's name.
_USAGE_KEYS = (
    (
        'input_tokens',
        (genai.GEN_AI_USAGE_INPUT_TOKENS, genai.GEN_AI_USAGE_PROMPT_TOKENS, SpanAttributes.LLM_TOKEN_COUNT_PROMPT),
    ),
    (
        'output_tokens',
        (genai.GEN_AI_USAGE_OUTPUT_TOKENS, genai.GEN_AI_USAGE_COMPLETION_TOKENS, SpanAttributes.LLM_TOKEN_COUNT_COMPLETION),
    ),
)
_SESSION_KEYS = (SpanAttributes.SESSION_ID, genai.GEN_AI_CONVERSATION_ID)


@dataclass
class RunContent:
    """A run's history as chat-completions messages, with what could not be placed, the token usage and the
    tools the agent had (None: no span said)."""

    messages: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    agents: list[str] = field(default_factory=list)
    session_id: str | None = None
    tools: list[dict[str, Any]] | None = None


def read_run(run: Span, inner: Sequence[Span], index: SpanIndex | None = None) -> RunContent:
    """The history of the run whose top span is `run` (an agent span, or a trace's root) and whose other
    spans are `inner` (`index`: the trace's spans, when the caller has it); raises `SpanError` for content
    present but unreadable (see the module docstring)."""
    spans = sorted([run, *inner], key=lambda s: (s.start_ns, s.end_ns))
    index = index or SpanIndex(spans)
    if run.attributes.get(ALL_MESSAGES) is not None or ALL_MESSAGES_EVENTS in run.attributes:
        convo = read_whole_history(run, inner)
        if ALL_MESSAGES_EVENTS in run.attributes:
            _run_io(run, spans, convo)
        return _content(run, spans, convo, whole=True)
    convo = Conversation()
    for span in spans:
        kind = span.kind
        if kind == 'llm':
            if index.enclosing(span, _recording_model_call) is not None:
                continue  # the same model call seen by a second instrumentation (a framework's and the client's)
            convo.model_call(span, index.speaker(span, agent_name))
        elif kind in ('tool', 'retriever'):
            convo.tool_span(span, index.speaker(span, agent_name))
        elif kind == 'other' and any(k in span.attributes for k in _CONTENT_ATTRIBUTES):
            label = span.openinference_kind or span.operation
            convo.warn(
                f'{span.path or span.name}: span {span.name!r} ({label}) is not a model call or a tool; '
                'its content is not in the transcript'
            )
    convo.place_pending()
    convo.flush()
    _run_io(run, spans, convo)
    convo.finish()
    return _content(run, spans, convo, whole=False)


def _recording_model_call(span: Span) -> bool:
    return span.kind == 'llm' and records_messages(span)


def _content(run: Span, spans: Sequence[Span], convo: Conversation, *, whole: bool) -> RunContent:
    agents = list(dict.fromkeys(s for s in (m.get('name') for m in convo.messages) if isinstance(s, str)))
    if len(agents) < 2:  # one agent: its name is the record's agent, not a speaker on every step
        for message in convo.messages:
            message.pop('name', None)
    _check_answer(run, spans, convo)
    session = _first_text(spans, _SESSION_KEYS)
    usage = _usage([s for s in spans if s is not run] if whole else spans)
    return RunContent(convo.messages, convo.warnings, usage, agents if len(agents) > 1 else [], session, _tools(spans, convo))


def _check_answer(run: Span, spans: Sequence[Span], convo: Conversation) -> None:
    """An empty final answer is a located warning: no model output the user can read (no text, no final-answer tool)."""
    for m in convo.messages:
        if m['role'] != 'assistant':
            continue
        if (m.get('content') or '').strip():
            return
        if any(_answers(c['function']['name']) for c in m.get('tool_calls') or []):
            return
    last = next((s for s in reversed(spans) if s.kind == 'llm'), run)
    convo.warn(f'{last.path or last.name}: the final answer is empty (the last model output has no text)')


def _answers(tool: str) -> bool:
    """A tool call that is the answer: a final-answer tool, or pydantic-ai's output tool (`final_result…`)."""
    return tool in FINAL_ANSWER_TOOLS or tool.startswith('final_result')


def _tools(spans: Sequence[Span], convo: Conversation) -> list[dict[str, Any]] | None:
    """The tools the run's model calls were offered (each name once, first definition kept)."""
    found: dict[str, dict[str, Any]] = {}
    said = False
    for span in spans:
        if span.kind not in ('llm', 'agent', 'chain'):
            continue
        try:
            tools = tool_definitions(span)
        except Exception as e:  # a definition list that cannot be read costs the inventory, not the run
            convo.warn(f"{span.path or span.name}: tool definitions cannot be read ({str(e)[:120]}); the run's tools are unknown")
            return None
        if tools is None:
            continue
        said = True
        for tool in tools:
            found.setdefault(tool['name'], tool)
    return list(found.values()) if said else None


def speaker_of_span(span: Span, by_id: Mapping[str, Span]) -> str | None:
    """The agent a span's step belongs to: the span's own agent name, else its nearest agent ancestor's."""
    node: Span | None = span
    seen: set[str] = set()
    while node is not None and node.span_id not in seen:
        seen.add(node.span_id)
        name = agent_name(node)
        if name:
            return name
        node = by_id.get(node.parent_span_id) if node.parent_span_id else None
    return None


def agent_name(span: Span) -> str | None:
    """The agent a span names itself, or None."""
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
        if span.openinference_kind == 'AGENT' or langfuse.is_langfuse(span):
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
    out: dict[str, int] = {}
    for span in spans:
        if span.kind != 'llm':
            continue
        counts = langfuse.usage(span) if langfuse.is_langfuse(span) else {}
        for name, keys in _USAGE_KEYS:
            value = next((span.attributes[k] for k in keys if k in span.attributes), counts.get(name))
            if isinstance(value, str) and value.isdigit() and len(value) < 19:
                value = int(value)  # OpenLLMetry before 0.47 wrote counts as text
            if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e15:
                out[name] = out.get(name, 0) + int(value)
    return out


def _run_io(run: Span, spans: Sequence[Span], convo: Conversation) -> None:
    """The run's own input and output where no model call gave a user turn or an answer."""
    has_user = any(m['role'] == 'user' for m in convo.messages)
    has_answer = any(m['role'] == 'assistant' and m.get('content') for m in convo.messages)
    if has_user and has_answer:
        return
    top = [run, *(s for s in spans if s.kind in ('agent', 'chain') and s is not run)]
    speaker = agent_name(run)
    for span in top:
        inputs = model_inputs(span, convo.warn) if span.kind != 'chain' and not langfuse.is_langfuse(span) else None
        if not has_user:
            text = None
            if inputs:
                text = next((m.content for m in inputs if m.role == 'user' and m.content), None)
            text = text or _io_text(span, 'input')
            if text:
                first = next((i for i, m in enumerate(convo.messages) if m['role'] != 'system'), len(convo.messages))
                convo.messages.insert(first, {'role': 'user', 'content': text})
                has_user = True
        if not has_answer:
            outputs = model_outputs(span, convo.warn) if not langfuse.is_langfuse(span) else []
            text = next((m.content for m in reversed(outputs) if m.role == 'assistant' and m.content), None)
            text = text or _io_text(span, 'output')
            if text:
                convo.messages.append({'role': 'assistant', 'content': text, **({'name': speaker} if speaker else {})})
                has_answer = True
        if has_user and has_answer:
            return


def _io_text(span: Span, which: str) -> str | None:
    if langfuse.is_langfuse(span):
        return langfuse.io_text(span, which)
    return value_text(span, which)
