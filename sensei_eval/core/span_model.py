"""One decoded OpenTelemetry span, whatever carried it (OTLP/JSON, OTLP protobuf, an SDK span dump), what kind
of step it records under the conventions agents are traced with, and a trace's spans as a tree that answers
"which ancestor …" questions in linear time.

`Span.kind` reads the OpenInference kind (`openinference.span.kind`: AGENT, LLM, TOOL, RETRIEVER, CHAIN, …)
first, then Langfuse's observation type (`langfuse.observation.type`: agent, generation, tool, retriever,
chain), then the OpenTelemetry GenAI operation (`gen_ai.operation.name`: `invoke_agent`, `chat`,
`text_completion`, `generate_content`, `execute_tool`, …), then OpenLLMetry's `traceloop.span.kind`, then the
span name (`invoke_agent …`, `execute_tool …`, `chat …`, pydantic-ai's first instrumentation's `agent run` and
`running tool`; its `running tools` is the group around them, not a tool), and last whether the span carries
model messages at all. Anything else is `other`: the trace readers (`core.trace_readers`) skip it, with a
warning when it held content they could not place. A `create_agent` operation (an agent being built, not run)
is `setup`: a trace of nothing else holds no run and is skipped, not refused.

`SpanIndex` is a trace's spans by id with their children; its ancestor questions (the nearest agent above a
span, whether a span's chain of parents reaches a span that never arrived, whether a span runs inside a model
call that recorded its messages) are memoised along each chain, so a chain of 10,000 nested spans costs
10,000 steps, not 50 million. A cycle of parents (hostile input) ends the walk as if the root were reached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, Literal, TypeVar

from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai

from sensei_eval.core.errors import InputError

__all__ = ('SPAN_KINDS', 'Span', 'SpanError', 'SpanEvent', 'SpanIndex', 'SpanKind', 'SpanStatus')

SpanStatus = Literal['unset', 'ok', 'error']
SpanKind = Literal['agent', 'llm', 'tool', 'retriever', 'chain', 'setup', 'other']
SPAN_KINDS: tuple[SpanKind, ...] = ('agent', 'llm', 'tool', 'retriever', 'chain', 'setup', 'other')

# OpenInference span kinds the readers map (the rest, EMBEDDING, RERANKER, GUARDRAIL, EVALUATOR, PROMPT, are
# `other`).
_OPENINFERENCE_KINDS: dict[str, SpanKind] = {
    OpenInferenceSpanKindValues.AGENT.value: 'agent',
    OpenInferenceSpanKindValues.LLM.value: 'llm',
    OpenInferenceSpanKindValues.TOOL.value: 'tool',
    OpenInferenceSpanKindValues.RETRIEVER.value: 'retriever',
    OpenInferenceSpanKindValues.CHAIN.value: 'chain',
}
# Langfuse's observation types (its SDK v3 and later mark every span with one); `span`, `event`, `embedding`,
# `evaluator`, `guardrail` are not steps.
LANGFUSE_TYPE = 'langfuse.observation.type'
_LANGFUSE_KINDS: dict[str, SpanKind] = {
    'agent': 'agent',
    'generation': 'llm',
    'tool': 'tool',
    'retriever': 'retriever',
    'chain': 'chain',
}
# OpenLLMetry (Traceloop) span kinds: its model calls carry the GenAI `gen_ai.prompt.*` attributes.
_TRACELOOP_KINDS: dict[str, SpanKind] = {'tool': 'tool', 'agent': 'agent', 'workflow': 'chain', 'task': 'chain'}
# GenAI operations that are one model call (`call_llm` is what several agent frameworks write for `chat`).
_MODEL_OPERATIONS = frozenset(
    {
        genai.GenAiOperationNameValues.CHAT.value,
        genai.GenAiOperationNameValues.TEXT_COMPLETION.value,
        genai.GenAiOperationNameValues.GENERATE_CONTENT.value,
        'call_llm',
        'completion',
        'responses',
    }
)
_INVOKE_AGENT = genai.GenAiOperationNameValues.INVOKE_AGENT.value
_EXECUTE_TOOL = genai.GenAiOperationNameValues.EXECUTE_TOOL.value
_CREATE_AGENT = genai.GenAiOperationNameValues.CREATE_AGENT.value
# Attributes (or attribute prefixes) that only a model-call span carries.
_MODEL_ATTRIBUTES = (
    genai.GEN_AI_INPUT_MESSAGES,
    genai.GEN_AI_OUTPUT_MESSAGES,
    genai.GEN_AI_PROMPT,
    genai.GEN_AI_COMPLETION,
    SpanAttributes.LLM_INPUT_MESSAGES,
    SpanAttributes.LLM_OUTPUT_MESSAGES,
)
# Span events (or OTel log events joined to the span) that carry a model call's messages.
_MODEL_EVENTS = ('gen_ai.user.message', 'gen_ai.choice', 'gen_ai.content.', 'gen_ai.client.inference.operation.details')


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

    @cached_property
    def operation(self) -> str:
        """The GenAI operation (`invoke_agent`, `chat`, `execute_tool`), from the attribute or the name."""
        op = self.attributes.get(genai.GEN_AI_OPERATION_NAME)
        if isinstance(op, str) and op:
            return op
        if self.name.startswith(_INVOKE_AGENT) or self.name in ('agent run', 'agent_run'):
            return _INVOKE_AGENT
        if self.name == 'running tool' or self.name.startswith('running tool:'):  # pydantic-ai before version 2
            return _EXECUTE_TOOL
        return self.name.split(' ', 1)[0]

    @cached_property
    def openinference_kind(self) -> str | None:
        value = self.attributes.get(SpanAttributes.OPENINFERENCE_SPAN_KIND)
        return value.upper() if isinstance(value, str) and value else None

    @cached_property
    def kind(self) -> SpanKind:
        """What step the span records (see the module docstring)."""
        oi = self.openinference_kind
        if oi is not None:
            return _OPENINFERENCE_KINDS.get(oi, 'other')
        langfuse = self.attributes.get(LANGFUSE_TYPE)
        if isinstance(langfuse, str) and langfuse:
            return _LANGFUSE_KINDS.get(langfuse.lower(), 'other')
        op = self.operation
        if op == _CREATE_AGENT:
            return 'setup'
        traceloop = self.attributes.get('traceloop.span.kind')
        if isinstance(traceloop, str) and traceloop in _TRACELOOP_KINDS:
            return _TRACELOOP_KINDS[traceloop]
        if op == _INVOKE_AGENT:
            return 'agent'
        if op == _EXECUTE_TOOL:
            return 'tool'
        if op in _MODEL_OPERATIONS:
            return 'llm'
        if any(key.startswith(_MODEL_ATTRIBUTES) for key in self.attributes):
            return 'llm'
        if any(e.name.startswith(_MODEL_EVENTS) for e in self.events):
            return 'llm'
        return 'other'

    def contains(self, other: Span) -> bool:
        """Whether `other` ran within this span's time (a child that ran after its parent ended was parented
        by mistake, as some instrumentations do with consecutive calls)."""
        return self.start_ns <= other.start_ns and other.end_ns <= max(self.end_ns, self.start_ns)


class SpanError(InputError):
    """A span (or an attribute of one) that cannot be read; `field` says where (`…spans[3].attributes[x]`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


_T = TypeVar('_T')


class _Nearest(Generic[_T]):
    """For each span, the value `own` gives the nearest span on its chain of parents (itself first) for which
    it is not None; memoised along every chain walked, so the whole trace costs one pass."""

    def __init__(self, by_id: Mapping[str, Span], own: Callable[[Span], _T | None]) -> None:
        self.by_id = by_id
        self.own = own
        self.memo: dict[str, _T | None] = {}

    def __call__(self, span: Span) -> _T | None:
        path: list[str] = []
        on_path: set[str] = set()
        node: Span | None = span
        found: _T | None = None
        while node is not None:
            if node.span_id in self.memo:
                found = self.memo[node.span_id]
                break
            if node.span_id in on_path:  # a cycle of parents: no answer above here
                break
            value = self.own(node)
            if value is not None:
                found = value
                self.memo[node.span_id] = value
                break
            path.append(node.span_id)
            on_path.add(node.span_id)
            node = self.by_id.get(node.parent_span_id) if node.parent_span_id else None
        for span_id in path:
            self.memo[span_id] = found
        return found


class SpanIndex:
    """A trace's spans by id, their children, and the ancestor questions the readers ask, each answered for the
    whole trace in linear time (see the module docstring)."""

    def __init__(self, spans: Iterable[Span]) -> None:
        self.by_id: dict[str, Span] = {}
        for span in spans:
            self.by_id.setdefault(span.span_id, span)
        self.children: dict[str, list[Span]] = {}
        for span in self.by_id.values():
            if span.parent_span_id is not None:
                self.children.setdefault(span.parent_span_id, []).append(span)
        self._agent_above = _Nearest(self.by_id, lambda s: s.span_id if s.kind == 'agent' else None)
        self._reaches_missing = _Nearest(self.by_id, self._missing_parent)
        self._speakers: _Nearest[str] | None = None

    def parent(self, span: Span) -> Span | None:
        return self.by_id.get(span.parent_span_id) if span.parent_span_id else None

    def has_agent_ancestor(self, span: Span) -> bool:
        parent = self.parent(span)
        return parent is not None and parent.span_id != span.span_id and self._agent_above(parent) is not None

    def orphan(self, span: Span) -> bool:
        """Whether the span's chain of parents ends at a span that never arrived."""
        return self._reaches_missing(span) is True

    def _missing_parent(self, span: Span) -> bool | None:
        if span.parent_span_id is None:
            return False
        return True if span.parent_span_id not in self.by_id else None

    def descendants(self, span: Span) -> list[Span]:
        """The span's descendants (each once, whatever the parents claim), in start order."""
        out: list[Span] = []
        stack = list(self.children.get(span.span_id, ()))
        seen: set[str] = {span.span_id}
        while stack:
            node = stack.pop()
            if node.span_id in seen:
                continue
            seen.add(node.span_id)
            out.append(node)
            stack.extend(self.children.get(node.span_id, ()))
        return sorted(out, key=lambda s: (s.start_ns, s.end_ns))

    def speaker(self, span: Span, name_of: Callable[[Span], str | None]) -> str | None:
        """The agent a span's step belongs to: `name_of` the span, else of its nearest ancestor with a name."""
        if self._speakers is None:
            self._speakers = _Nearest(self.by_id, name_of)
        return self._speakers(span)

    def enclosing(self, span: Span, test: Callable[[Span], bool]) -> Span | None:
        """The nearest ancestor that passes `test` and whose time contains the span's (memoised per `test`)."""
        memo = self._enclosing.setdefault(test, {})
        chain: list[Span] = []
        node = self.parent(span)
        seen: set[str] = {span.span_id}
        while node is not None and node.span_id not in seen:
            if node.span_id in memo:
                break
            seen.add(node.span_id)
            chain.append(node)
            node = self.parent(node)
        # memo[s] is the nearest span passing `test` at or above s (by parents), whatever the times
        above = memo.get(node.span_id) if node is not None and node.span_id in memo else None
        for node in reversed(chain):
            if test(node):
                above = node
            memo[node.span_id] = above
        first = memo.get(span.parent_span_id) if span.parent_span_id else None
        return first if first is not None and first.contains(span) else None

    @cached_property
    def _enclosing(self) -> dict[Callable[[Span], bool], dict[str, Span | None]]:
        return {}
