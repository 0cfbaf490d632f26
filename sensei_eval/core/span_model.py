"""One decoded OpenTelemetry span, whatever carried it (OTLP/JSON, OTLP protobuf, an SDK span dump), and
what kind of step it records under the two conventions agents are traced with.

`Span.kind` reads the OpenInference kind (`openinference.span.kind`: AGENT, LLM, TOOL, RETRIEVER, CHAIN, …)
first, then the OpenTelemetry GenAI operation (`gen_ai.operation.name`: `invoke_agent`, `chat`,
`text_completion`, `generate_content`, `execute_tool`, …), then the span name (`invoke_agent …`,
`execute_tool …`, `chat …`, pydantic-ai's older `agent run` / `running tool`; OpenLLMetry's
`traceloop.span.kind`), and last whether the span
carries model messages at all. Anything else is `other`: the trace readers (`core.trace_readers`) skip it,
with a warning when it held content they could not place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sensei_eval.core.errors import InputError

__all__ = ('SPAN_KINDS', 'Span', 'SpanError', 'SpanEvent', 'SpanKind', 'SpanStatus')

SpanStatus = Literal['unset', 'ok', 'error']
SpanKind = Literal['agent', 'llm', 'tool', 'retriever', 'chain', 'other']
SPAN_KINDS: tuple[SpanKind, ...] = ('agent', 'llm', 'tool', 'retriever', 'chain', 'other')

# OpenInference span kinds the readers map (the rest, EMBEDDING, RERANKER, GUARDRAIL, EVALUATOR, PROMPT, are
# `other`).
_OPENINFERENCE_KINDS: dict[str, SpanKind] = {kind.upper(): kind for kind in SPAN_KINDS if kind != 'other'}
# OpenLLMetry (Traceloop) span kinds: its model calls carry the GenAI `gen_ai.prompt.*` attributes.
_TRACELOOP_KINDS: dict[str, SpanKind] = {'tool': 'tool', 'agent': 'agent', 'workflow': 'chain', 'task': 'chain'}
# GenAI operations that are one model call (`call_llm` is what several agent frameworks write for `chat`).
_MODEL_OPERATIONS = frozenset({'chat', 'text_completion', 'generate_content', 'call_llm', 'completion', 'responses'})
# Attributes (or attribute prefixes) that only a model-call span carries.
_MODEL_ATTRIBUTES = (
    'gen_ai.input.messages',
    'gen_ai.output.messages',
    'gen_ai.prompt',
    'gen_ai.completion',
    'llm.input_messages',
    'llm.output_messages',
)


@dataclass(frozen=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Span:
    """One span, decoded from OTLP JSON, protobuf or an SDK dump; `file`/`line`/`path` say where it came from."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: SpanStatus = 'unset'
    status_message: str = ''
    events: tuple[SpanEvent, ...] = ()
    resource: dict[str, Any] = field(default_factory=dict)
    file: str = ''
    line: int = 0
    path: str = ''

    def to_json(self) -> dict[str, Any]:
        """A plain JSON form (what the service buffers in its store)."""
        return {
            'trace_id': self.trace_id,
            'span_id': self.span_id,
            'parent_span_id': self.parent_span_id,
            'name': self.name,
            'start_ns': self.start_ns,
            'end_ns': self.end_ns,
            'attributes': self.attributes,
            'status': self.status,
            'status_message': self.status_message,
            'events': [{'name': e.name, 'time_ns': e.time_ns, 'attributes': e.attributes} for e in self.events],
            'resource': self.resource,
            'file': self.file,
            'line': self.line,
            'path': self.path,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Span:
        events = tuple(SpanEvent(e['name'], int(e['time_ns']), dict(e['attributes'])) for e in data.get('events', ()))
        return cls(
            trace_id=data['trace_id'],
            span_id=data['span_id'],
            parent_span_id=data.get('parent_span_id'),
            name=data['name'],
            start_ns=int(data['start_ns']),
            end_ns=int(data['end_ns']),
            attributes=dict(data['attributes']),
            status=data.get('status', 'unset'),
            status_message=data.get('status_message', ''),
            events=events,
            resource=dict(data.get('resource', {})),
            file=data.get('file', ''),
            line=int(data.get('line', 0)),
            path=data.get('path', ''),
        )

    @property
    def operation(self) -> str:
        """The GenAI operation (`invoke_agent`, `chat`, `execute_tool`), from the attribute or the name."""
        op = self.attributes.get('gen_ai.operation.name')
        if isinstance(op, str) and op:
            return op
        if self.name.startswith('invoke_agent') or self.name in ('agent run', 'agent_run'):
            return 'invoke_agent'
        if self.name.startswith('running tool'):  # pydantic-ai's instrumentation before version 2
            return 'execute_tool'
        return self.name.split(' ', 1)[0]

    @property
    def openinference_kind(self) -> str | None:
        value = self.attributes.get('openinference.span.kind')
        return value.upper() if isinstance(value, str) and value else None

    @property
    def kind(self) -> SpanKind:
        """What step the span records (see the module docstring)."""
        oi = self.openinference_kind
        if oi is not None:
            return _OPENINFERENCE_KINDS.get(oi, 'other')
        traceloop = self.attributes.get('traceloop.span.kind')
        if isinstance(traceloop, str) and traceloop in _TRACELOOP_KINDS:
            return _TRACELOOP_KINDS[traceloop]
        op = self.operation
        if op == 'invoke_agent':
            return 'agent'
        if op == 'execute_tool':
            return 'tool'
        if op in _MODEL_OPERATIONS:
            return 'llm'
        if any(key.startswith(_MODEL_ATTRIBUTES) for key in self.attributes):
            return 'llm'
        if any(e.name.startswith(('gen_ai.user.message', 'gen_ai.choice', 'gen_ai.content.')) for e in self.events):
            return 'llm'
        return 'other'


class SpanError(InputError):
    """A span (or an attribute of one) that cannot be read; `field` says where (`…spans[3].attributes[x]`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)
