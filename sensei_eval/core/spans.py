"""Records as OpenTelemetry-style span trees, the shape pydantic-evals' agentic evaluators read.

`ToolCorrectness`, `ArgumentCorrectness` and `TrajectoryMatch` look for spans named
`execute_tool {name}` carrying `gen_ai.tool.name` and `gen_ai.tool.call.arguments`. A stored record has
no spans, so `span_tree(record)` builds one: a root `agent run` span and one child per tool call, in
order, one second apart (only the order matters to the evaluators). A call whose result reads as an
error gets status `error`, which those evaluators, like pydantic-ai's own instrumentation, treat as a
failed attempt (not counted unless `include_failed=True`).

The same mapping, reversed, is how real agent traces come in: `sensei_eval.core.traces` reads the
`invoke_agent` and `execute_tool` spans pydantic-ai and Logfire export back into records.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from pydantic_evals.otel.span_tree import SpanNode, SpanTree

from sensei_eval.core.records import QueryRecord

__all__ = ('span_tree',)

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
