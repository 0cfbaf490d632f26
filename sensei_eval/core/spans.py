"""Records as OpenTelemetry-style span trees, the shape pydantic-evals' agentic evaluators read.

`ToolCorrectness`, `ArgumentCorrectness` and `TrajectoryMatch` look for spans named
`execute_tool {name}` carrying `gen_ai.tool.name` and `gen_ai.tool.call.arguments`. A stored record has
no spans, so `span_tree(record)` builds one: a root `agent run` span and one child per tool call, in
order, one second apart (only the order matters to the evaluators). A call whose result reads as an
error gets status `error`, which those evaluators, like pydantic-ai's own instrumentation, treat as a
failed attempt (not counted unless `include_failed=True`).

The same mapping, reversed, is how real agent traces come in: `sensei_eval.core.traces` reads the
`invoke_agent` and `execute_tool` spans pydantic-ai and Logfire export back into records, and
`record_from_span_tree` does it for the span tree pydantic-evals captures around a live agent run
(`OnlineEvaluation`), so a sensei judge attached to a live agent reads the run it judges.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from pydantic_evals.otel.span_tree import SpanNode, SpanTree

from sensei_eval.core.errors import InputError
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.traces import Span, build_trace

__all__ = ('record_from_span_tree', 'span_tree')

# Arbitrary fixed epoch for synthetic spans: evaluators only compare their order.
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
_TRACE_ID = 1


def span_tree(record: QueryRecord) -> SpanTree:
    calls = record.tool_calls()
    root = SpanNode(
        name='agent run',
        trace_id=_TRACE_ID,
        span_id=1,
        parent_span_id=None,
        start_timestamp=_EPOCH,
        end_timestamp=_EPOCH + timedelta(seconds=len(calls) + 1),
        attributes={'sensei_eval.query_id': record.query_id},
        status='ok',
    )
    spans = [root]
    for i, call in enumerate(calls):
        start = _EPOCH + timedelta(seconds=i + 1)
        args = call.args if isinstance(call.args, str) else json.dumps(call.args, sort_keys=True)
        spans.append(
            SpanNode(
                name=f'execute_tool {call.tool_name}',
                trace_id=_TRACE_ID,
                span_id=i + 2,
                parent_span_id=1,
                start_timestamp=start,
                end_timestamp=start + timedelta(milliseconds=500),
                attributes={'gen_ai.tool.name': call.tool_name, 'gen_ai.tool.call.arguments': args},
                status='error' if call.failed else 'ok',
            )
        )
    tree = SpanTree()
    tree.add_spans(spans)
    return tree


def record_from_span_tree(tree: SpanTree, query_id: str | None = None) -> QueryRecord:
    """The agent run a captured span tree holds, read by the same trace reader as exported traces.

    pydantic-evals captures the spans of a live run (`OnlineEvaluation`, `@evaluate`) when the agent is
    instrumented (`Agent(instrument=True)` or Logfire). No agent-run span, or one the reader cannot read,
    is an `InputError` naming why, never an empty record."""
    nodes = list(tree)
    if not nodes:
        raise InputError(
            'the captured span tree is empty: instrument the agent '
            '(Agent(..., instrument=True) or logfire.instrument_pydantic_ai())'
        )
    ids = {node.span_id for node in nodes}  # the run's parent (the caller's span) is outside the capture
    spans = [_span_of(node, node.parent_span_id in ids) for node in nodes]
    if not any(s.operation == 'invoke_agent' for s in spans):
        # pydantic-evals captures inside the agent-run span (a capability wraps the run's body), so the
        # run is the captured model and tool spans: give them the run span the trace reader starts from
        spans = _under_run_span(spans, query_id)
    build = build_trace(spans)
    if not build.records:
        why = '; '.join(e.message for e in build.errors) or 'no agent run in the captured spans'
        raise InputError(f'cannot read the agent run from its spans: {why}')
    record = build.records[-1]
    if query_id is not None:
        record.query_id = query_id
    return record


def _under_run_span(spans: list[Span], query_id: str | None) -> list[Span]:
    run_id = 'f' * 16
    run = Span(
        trace_id=spans[0].trace_id,
        span_id=run_id,
        parent_span_id=None,
        name='invoke_agent',
        start_ns=min(s.start_ns for s in spans),
        end_ns=max(s.end_ns for s in spans),
        attributes={'gen_ai.operation.name': 'invoke_agent'} | ({'sensei_eval.query_id': query_id} if query_id else {}),
        path='invoke_agent',
    )
    return [run, *(replace(s, parent_span_id=run_id) if s.parent_span_id is None else s for s in spans)]


def _span_of(node: SpanNode, has_parent: bool) -> Span:
    def ns(t: datetime) -> int:
        return int(t.timestamp() * 1e9)

    return Span(
        trace_id=f'{node.trace_id:032x}',
        span_id=f'{node.span_id:016x}',
        parent_span_id=f'{node.parent_span_id:016x}' if has_parent and node.parent_span_id is not None else None,
        name=node.name,
        start_ns=ns(node.start_timestamp),
        end_ns=ns(node.end_timestamp),
        attributes=dict(node.attributes),
        status=node.status,
        path=node.name,
    )
