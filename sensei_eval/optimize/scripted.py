"""A scripted DSPy LM: answers computed from the prompt, for offline tests and benchmarks.

DSPy's own `DummyLM` replays fixed answers; optimizer tests need answers that depend on what was asked
(which component, which failures), so `ScriptedLM` calls a function with the chat messages and formats
its answer the way DSPy's chat adapter expects: a dict of output fields becomes `[[ ## field ## ]]`
sections, a string is returned as it is (GEPA's reflection prompt wants plain text). Every call is kept
in `calls`, so a test can assert what the optimizer sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dspy.clients.engines.dummy_engine import AsyncDummyEngine, DummyEngine
from dspy.lm15 import Message, Response, TextPart, Usage
from dspy.utils.dummies import DummyLM

__all__ = ('Respond', 'ScriptedLM')

Respond = Callable[[list[dict[str, Any]]], 'dict[str, Any] | str']


class _ScriptedEngine(DummyEngine):  # type: ignore[misc]
    def _complete_messages(self, messages: list[dict[str, Any]]) -> Response:
        owner: ScriptedLM = self.owner
        owner.calls.append(messages)
        answer = owner.respond(messages)
        text = answer if isinstance(answer, str) else owner._format_answer_fields(answer)
        return Response(
            id=None,
            model='scripted',
            message=Message.assistant([TextPart(text)]),
            finish_reason='stop',
            usage=Usage(
                input_tokens=sum(len(str(m.get('content', ''))) // 4 for m in messages),
                output_tokens=len(text) // 4,
                total_tokens=0,
            ),
        )


class ScriptedLM(DummyLM):  # type: ignore[misc]
    """A DSPy LM whose every answer is `respond(messages)`."""

    def __init__(self, respond: Respond) -> None:
        super().__init__(answers=[])
        self.respond = respond
        self.calls: list[list[dict[str, Any]]] = []
        self._engine_spec = _ScriptedEngine(self)
        self._async_engine_spec = AsyncDummyEngine(self._engine_spec)

    def copy(self, **kwargs: Any) -> ScriptedLM:
        copied = ScriptedLM(self.respond)
        copied.calls = self.calls
        return copied
