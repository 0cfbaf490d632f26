"""What one tool span ran (its tool, arguments, call id and result), and the tools a model call was offered.

**Tool spans.** The name is `gen_ai.tool.name` (OpenInference `tool.name`, `tool_call.function.name`; else the
span's name after `execute_tool` / `running tool`); the call id `gen_ai.tool.call.id` (`tool_call.id`,
`tool.id`); the arguments `gen_ai.tool.call.arguments` (or `gen_ai.tool.args`, `tool_call.function.arguments`,
`gcp.vertex.agent.tool_call_args`, pydantic-ai's first `tool_arguments`, OpenInference `input.value`,
OpenLLMetry `traceloop.entity.input`, a Langfuse tool's `langfuse.observation.input`); the result
`gen_ai.tool.call.result` (or `gen_ai.tool.message`, `gcp.vertex.agent.tool_response`, `gen_ai.output`,
`tool_response`, OpenInference `output.value`, `traceloop.entity.output`, `langfuse.observation.output`, a
`gen_ai.tool.message` event). What frameworks wrap around them is taken off: a Python call's
`{"args": [], "kwargs": {…}}` is its keyword arguments; LangChain's callback envelope (`{"input_str", "inputs",
"kwargs": {"tool_call_id"}}`) is its `inputs`, and the `ToolMessage` a tool's output became is its content
(with the call id both carry). An OpenInference RETRIEVER is a call named after the span, with `{"query": …}`
and its `retrieval.documents` as the result. A failed span without a result gives `error: <status message>`.

**Tool definitions** (`QueryRecord.tools`): the GenAI `gen_ai.tool.definitions` (a list of `{type, name,
description, parameters}`, structured or as JSON text), OpenInference `llm.tools.N.tool.json_schema` (an
OpenAI tool as JSON), OpenLLMetry's `llm.request.functions.N.{name, description, parameters}`, the `tools` of a
Langfuse generation's request, and pydantic-ai's `model_request_parameters` (`function_tools`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from openinference.semconv.trace import SpanAttributes, ToolAttributes, ToolCallAttributes
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai

from sensei_eval.core.readers import langfuse
from sensei_eval.core.readers.langchain import tool_input, tool_output
from sensei_eval.core.readers.messages import Warn, arguments_text, flat_list, json_value, maybe_json, text_id, unflatten
from sensei_eval.core.span_model import Span

__all__ = ('ToolStep', 'read_tool_span', 'tool_definitions')

# Keys a tool's arguments are found under, in order; the last ones hold plain text as often as JSON.
_ARGUMENT_KEYS = (
    genai.GEN_AI_TOOL_CALL_ARGUMENTS,
    'gen_ai.tool.args',
    ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON,
    'gcp.vertex.agent.tool_call_args',
    'tool_arguments',  # pydantic-ai's first instrumentation
)
_TEXT_ARGUMENT_KEYS = (SpanAttributes.INPUT_VALUE, 'traceloop.entity.input', langfuse.LANGFUSE_INPUT)
_RESULT_KEYS = (
    genai.GEN_AI_TOOL_CALL_RESULT,
    'gen_ai.tool.message',
    'gcp.vertex.agent.tool_response',
    'gen_ai.output',
    'tool_response',  # pydantic-ai's first instrumentation
    SpanAttributes.OUTPUT_VALUE,
    'traceloop.entity.output',
    langfuse.LANGFUSE_OUTPUT,
)
_NAME_KEYS = (genai.GEN_AI_TOOL_NAME, SpanAttributes.TOOL_NAME, ToolCallAttributes.TOOL_CALL_FUNCTION_NAME)
_ID_KEYS = (genai.GEN_AI_TOOL_CALL_ID, ToolCallAttributes.TOOL_CALL_ID, SpanAttributes.TOOL_ID)
# OpenLLMetry's flattened tool definitions on a model call.
_OPENLLMETRY_FUNCTIONS = 'llm.request.functions'


@dataclass(frozen=True)
class ToolStep:
    """A tool span read: `result` None when the span did not record one."""

    name: str
    arguments: str
    call_id: str | None
    result: str | None
    where: str


def read_tool_span(span: Span, warn: Warn) -> ToolStep:
    """The tool call a tool (or retriever) span ran; see the module docstring."""
    a = span.attributes
    where = f'{span.path}.attributes'
    name = next((str(a[k]) for k in _NAME_KEYS if isinstance(a.get(k), str) and a[k]), None)
    if name is None:
        name = span.name.removeprefix('execute_tool').removeprefix('running tool').strip(' :') or span.name
        if span.kind == 'retriever':
            name = span.name or 'retrieve'
    call_id = next((text_id(a[k]) for k in _ID_KEYS if a.get(k) is not None), None)
    key = next((k for k in (*_ARGUMENT_KEYS, *_TEXT_ARGUMENT_KEYS) if k in a), None)
    args: Any = maybe_json(a[key]) if key is not None else None
    args, envelope_id = tool_input(args)
    args = langfuse.call_arguments(args)
    text_ok = key in _TEXT_ARGUMENT_KEYS
    if span.kind == 'retriever' and isinstance(args, str):
        args = {'query': args}
    if isinstance(args, list) and text_ok:
        args = {'args': args}
    arguments = arguments_text(args, f'{where}[{key}]', warn, text_ok=text_ok)
    result, result_id = _result(span)
    return ToolStep(name, arguments, call_id or envelope_id or result_id, result, span.path or span.name)


def _result(span: Span) -> tuple[str | None, str | None]:
    a = span.attributes
    key = next((k for k in _RESULT_KEYS if k in a), None)
    result: Any = maybe_json(a[key]) if key is not None else None
    call_id: str | None = None
    if key is not None:
        result, call_id = tool_output(result)
        if key == 'traceloop.entity.output' and isinstance(result, dict) and 'outputs' in result:
            result = result['outputs']
        if isinstance(a[key], str) and not isinstance(result, str) and result == maybe_json(a[key]):
            result = a[key]  # JSON text as recorded, not re-dumped
    if result is None and span.kind == 'retriever':
        docs = unflatten(a, SpanAttributes.RETRIEVAL_DOCUMENTS)
        if docs is not None:
            result = json.dumps([_document(d) for d in flat_list(docs)], default=str)
    if result is None:
        for event in span.events:
            if event.name in ('gen_ai.tool.message', 'gen_ai.choice') and 'content' in event.attributes:
                result = event.attributes['content']
    if result is None and span.status == 'error':
        message = span.status_message or next(
            (str(e.attributes.get('exception.message')) for e in span.events if e.name == 'exception'), 'the tool failed'
        )
        result = f'error: {message}'
    if result is None:
        return None, call_id
    return (result if isinstance(result, str) else json.dumps(result, default=str)), call_id


def _document(doc: Any) -> Any:
    """One retrieved document (`retrieval.documents.N.document.*`) as its fields."""
    return doc.get('document', doc) if isinstance(doc, dict) else doc


def tool_definitions(span: Span) -> list[dict[str, Any]] | None:
    """The tools a model call was offered, as OpenAI function definitions; None when the span does not say."""
    a = span.attributes
    if genai.GEN_AI_TOOL_DEFINITIONS in a:
        value = json_value(span, genai.GEN_AI_TOOL_DEFINITIONS, a[genai.GEN_AI_TOOL_DEFINITIONS])
        return _definitions(value)
    tools = unflatten(a, SpanAttributes.LLM_TOOLS)
    if tools is not None:
        schemas = [maybe_json(t.get(ToolAttributes.TOOL_JSON_SCHEMA)) for t in _tool_entries(tools)]
        return _definitions(schemas)
    functions = unflatten(a, _OPENLLMETRY_FUNCTIONS)
    if functions is not None:
        entries = [f for f in flat_list(functions) if isinstance(f, dict)]
        return _definitions([{**f, 'parameters': maybe_json(f.get('parameters'))} for f in entries])
    if langfuse.is_langfuse(span) and span.kind == 'llm':
        value = langfuse.tool_definitions(span)
        return _definitions(value) if value is not None else None
    parameters = maybe_json(a.get('model_request_parameters'))
    if isinstance(parameters, dict) and isinstance(parameters.get('function_tools'), list):
        tools_list = [
            {'name': t.get('name'), 'description': t.get('description'), 'parameters': t.get('parameters_json_schema')}
            for t in parameters['function_tools']
            if isinstance(t, dict)
        ]
        return _definitions(tools_list)
    return None


def _tool_entries(tools: dict[str, Any]) -> list[dict[str, Any]]:
    """OpenInference's `llm.tools.N.tool.json_schema` entries as {'tool.json_schema': …} dicts."""
    out = []
    for entry in flat_list(tools):
        if isinstance(entry, dict) and isinstance(entry.get('tool'), dict):
            out.append({f'tool.{k}': v for k, v in entry['tool'].items()})
    return out


def _definitions(value: Any) -> list[dict[str, Any]] | None:
    """Tool definitions in any of the shapes above, as `{name, description, parameters}`; None when none has a name."""
    if not isinstance(value, list):
        return None
    out: list[dict[str, Any]] = []
    for raw in value:
        tool = maybe_json(raw)
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get('function'), dict):
            tool = tool['function']
        name = tool.get('name')
        if not isinstance(name, str) or not name.strip():
            continue
        entry: dict[str, Any] = {'name': name.strip()}
        if isinstance(tool.get('description'), str):
            entry['description'] = tool['description']
        parameters = maybe_json(tool.get('parameters', tool.get('input_schema', tool.get('inputSchema'))))
        if isinstance(parameters, dict):
            entry['parameters'] = parameters
        out.append(entry)
    return out or None
