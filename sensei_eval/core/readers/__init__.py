"""The trace readers' parts, one per concern: message shapes (`messages`), LangChain's serialized objects
(`langchain`), what one model call was sent and answered under each convention (`model_calls`), Langfuse's
observation attributes (`langfuse`), what one tool span ran (`tool_spans`), how a run's history is assembled
from them (`history`), and pydantic-ai's whole-history attributes (`pydantic_ai`). `core.trace_readers` puts
them together for a run; nothing here reads a file or groups spans.
"""
