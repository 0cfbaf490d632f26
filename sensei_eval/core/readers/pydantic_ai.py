"""pydantic-ai's own instrumentation, whose agent-run span holds the whole history at once.

* Versions 2 to 6 (`InstrumentationSettings(version=…)`): `pydantic_ai.all_messages` on the run span (GenAI
  `{role, parts}` messages) with `gen_ai.system_instructions` beside it; results only an `execute_tool` span saw
  are added after their call.
* The first instrumentation (pydantic-ai 0.x): `all_messages_events` on the `agent run` span, a JSON list of
  the per-message event bodies (each naming itself in `event.name`); model calls keep theirs in `events` (or
  send them as OTel log events with `event_mode='logs'`). Its `running tool` spans are the tool calls already
  in that history, and `running tools` only groups them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sensei_eval.core.readers.history import Conversation
from sensei_eval.core.readers.messages import json_value, read_messages
from sensei_eval.core.readers.model_calls import event_history, system_instructions
from sensei_eval.core.readers.tool_spans import read_tool_span
from sensei_eval.core.span_model import Span, SpanError

__all__ = ('ALL_MESSAGES', 'ALL_MESSAGES_EVENTS', 'read_whole_history')

ALL_MESSAGES = 'pydantic_ai.all_messages'
ALL_MESSAGES_EVENTS = 'all_messages_events'


def read_whole_history(run: Span, inner: Sequence[Span]) -> Conversation:
    """The run's history from its run span (see the module docstring); tool spans only add results it lacks."""
    convo = Conversation()
    if run.attributes.get(ALL_MESSAGES) is not None:
        where = f'{run.path}.attributes[{ALL_MESSAGES}]'
        otel = json_value(run, ALL_MESSAGES, run.attributes[ALL_MESSAGES])
        if not otel:
            raise SpanError(where, 'the agent run carries no messages (instrumented with include_content=False?)')
        if not isinstance(otel, list):
            raise SpanError(where, 'expected a JSON list of messages')
        for m in system_instructions(run) + read_messages(otel, where, convo.warn):
            convo.add(m, None)
    else:
        for m in event_history(run, convo.warn):
            convo.add(m, None)
    for span in sorted(inner, key=lambda s: s.start_ns):
        if span.kind == 'tool':
            step = read_tool_span(span, convo.warn)
            if step.call_id and convo.waits_for(step.call_id) and step.result is not None:
                convo.result(step.call_id, step.name, step.result, step.where)
    convo.flush()
    # results added late go right after their call's message, where the model saw them
    convo.messages = _results_after_calls(convo.messages)
    convo.finish()
    return convo


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
