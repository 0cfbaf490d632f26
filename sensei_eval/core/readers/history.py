"""How a run's history is assembled from its model calls and tool spans, as chat-completions messages.

The model calls' input histories are the backbone: each call's input extends what that agent's model saw
before (a prefix already read is skipped, a history rewritten mid-run adds only what was not read yet), then
its output is added. A tool span is a step of that same history, not a second one:

* It answers a call a model output already made (by call id; else the earliest waiting call of that tool, the
  one with the same arguments first; else, without an id, the earliest waiting call). Its result waits for
  the next model call: what that call's input shows of the result (what the model saw) wins; if no input
  repeats it, the span's result is placed before the next turn.
* A tool span no model output announced is held until the next model call: if that call's input history
  shows the call (by id, else by tool name and arguments), the history places it and the span only supplies
  what the history lacks (arguments, the result); otherwise the span is the call and its result, placed
  where it ran (before that model call's output, or at the end of the run). So a run traced the common way
  — tool spans, then a model call whose input carries the whole history — reads in the history's order,
  each call once.
* A call the trace gave no id gets one (`trace_call_1`, …, unlike any id a provider writes).

Waiting calls are kept by id and by tool name, so pairing costs the same per call however long the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sensei_eval.core.readers.messages import Msg, same_arguments
from sensei_eval.core.readers.model_calls import model_inputs, model_outputs
from sensei_eval.core.readers.tool_spans import ToolStep, read_tool_span
from sensei_eval.core.span_model import Span

__all__ = ('Conversation',)


@dataclass
class _Waiting:
    call: dict[str, Any]
    name: str
    turn: int
    # a tool span's result, held until the next model call shows what the model saw of it (or the next turn)
    span_result: tuple[str, str] | None = None


@dataclass
class _Pending:
    """A tool span no model output announced, held until the next model call's input says where it goes."""

    step: ToolStep
    speaker: str | None


@dataclass
class Conversation:
    """The history being assembled (see the module docstring); `messages` and `warnings` are the result."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    _threads: dict[str | None, list[tuple[Any, ...]]] = field(default_factory=dict)
    _waiting: dict[str, _Waiting] = field(default_factory=dict)  # by call id, in call order
    _by_name: dict[str, dict[str, _Waiting]] = field(default_factory=dict)
    _held: dict[str, _Waiting] = field(default_factory=dict)  # waiting calls holding a tool span's result
    _pending: list[_Pending] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)
    _ids: set[str] = field(default_factory=set)
    _systems: set[str] = field(default_factory=set)
    _emitted: set[tuple[Any, ...]] = field(default_factory=set)
    _warned: set[str] = field(default_factory=set)
    _turn: int = 0
    _synthetic: int = 0

    def warn(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self.warnings.append(text)

    # -- model calls

    def model_call(self, span: Span, speaker: str | None) -> None:
        inputs = model_inputs(span, self.warn)
        outputs = model_outputs(span, self.warn)
        thread = self._threads.get(speaker, [])
        if inputs is not None:
            keys = [m.key() for m in inputs]
            k = 0
            while k < min(len(keys), len(thread)) and keys[k] == thread[k]:
                k += 1
            diverged = k < len(thread)
            for m in inputs[k:]:
                if diverged and m.role != 'tool' and m.key() in self._emitted:
                    continue  # a rewritten history repeats what was already read
                self.add(m, speaker)
            thread = keys
        self.place_pending()
        for m in outputs:
            self.add(m, speaker)
        self._threads[speaker] = thread + [m.key() for m in outputs]

    def flush(self) -> None:
        """Results tool spans gave that no model input repeated: in place, before the next turn."""
        held, self._held = list(self._held.values()), {}
        for w in held:
            if w.span_result is not None and w.call['id'] in self._waiting:
                self.result(w.call['id'], w.name, w.span_result[0], w.span_result[1])

    def add(self, m: Msg, speaker: str | None) -> None:
        named = {'name': speaker} if speaker else {}
        if m.role != 'tool':
            self.flush()
        if m.role == 'system':
            text = (m.content or '').strip()
            if text and text not in self._systems:
                self._systems.add(text)
                self.messages.append({'role': 'system', 'content': m.content, **named})
            return
        if m.role == 'user':
            self.messages.append({'role': 'user', 'content': m.content or ''})
            self._emitted.add(m.key())
            return
        if m.role == 'tool':
            self.result(m.call_id, m.tool_name, m.content if m.content is not None else '', m.where)
            return
        self._assistant(m, named)

    def _assistant(self, m: Msg, named: dict[str, str]) -> None:
        self._turn += 1
        calls = []
        for call in m.calls:
            call_id = call.get('id') or None
            if call_id in self._ids:
                continue  # the same call read again (an output repeated in a later input)
            span = self._claim_pending(call_id, call['name'], call['arguments'])
            if call_id is None and span is not None and span.step.call_id and span.step.call_id not in self._ids:
                call_id = span.step.call_id
            call_id = call_id or self._new_id()
            self._ids.add(call_id)
            arguments = call['arguments']
            if span is not None and _empty_args(arguments) and not _empty_args(span.step.arguments):
                arguments = span.step.arguments  # the model's call lost its arguments; the span ran with these
            entry = {'id': call_id, 'type': 'function', 'function': {'name': call['name'], 'arguments': arguments}}
            calls.append(entry)
            waiting = _Waiting(entry, call['name'], self._turn)
            self._waiting[call_id] = waiting
            self._by_name.setdefault(call['name'], {})[call_id] = waiting
            if span is not None:
                self._hold(waiting, span.step)
        if not calls and not (m.content or '').strip():
            return
        out: dict[str, Any] = {'role': 'assistant', 'content': m.content if (m.content or '').strip() else None, **named}
        if calls:
            out['tool_calls'] = calls
        self.messages.append(out)
        self._emitted.add(m.key())

    def _new_id(self) -> str:
        """An id for a call the trace gave none (`trace_call_N`, unlike any id a provider writes)."""
        self._synthetic += 1
        while f'trace_call_{self._synthetic}' in self._ids:
            self._synthetic += 1
        return f'trace_call_{self._synthetic}'

    def _pick(
        self, call_id: str | None, name: str | None, arguments: str | None = None, *, unclaimed: bool = False
    ) -> _Waiting | None:
        """The waiting call a result answers: by id, else the earliest of that tool (the same arguments first),
        else (no id) the earliest; `unclaimed` skips calls a tool span already answered."""

        def free(w: _Waiting) -> bool:
            return not (unclaimed and w.span_result is not None)

        if call_id and call_id in self._waiting and free(self._waiting[call_id]):
            return self._waiting[call_id]
        if name:
            candidates = [w for w in self._by_name.get(name, {}).values() if free(w)]
            if arguments is not None:
                same = next((w for w in candidates if same_arguments(w.call['function']['arguments'], arguments)), None)
                if same is not None:
                    return same
            if candidates:
                return candidates[0]
        if not call_id:
            return next((w for w in self._waiting.values() if free(w)), None)
        free_calls = [w for w in self._waiting.values() if free(w)]
        if len(free_calls) == 1 and free_calls[0].call['id'].startswith('trace_call_'):
            return free_calls[0]  # the one call waiting had no id in the trace: this result is its
        return None

    def waits_for(self, call_id: str) -> bool:
        """Whether a call with exactly this id is still waiting for its result."""
        return call_id in self._waiting

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
        self._answer(waiting)
        self.messages.append({'role': 'tool', 'tool_call_id': waiting.call['id'], 'content': content})
        return True

    def _answer(self, waiting: _Waiting) -> None:
        call_id = waiting.call['id']
        self._waiting.pop(call_id, None)
        self._by_name.get(waiting.name, {}).pop(call_id, None)
        self._held.pop(call_id, None)
        self.answered.add(call_id)

    # -- tool spans

    def tool_span(self, span: Span, speaker: str | None) -> None:
        step = read_tool_span(span, self.warn)
        if step.call_id and step.call_id in self.answered:
            return
        waiting = self._pick(step.call_id, step.name, step.arguments, unclaimed=True)
        if waiting is None:
            self._pending.append(_Pending(step, speaker))  # placed by the next model call's input, or where it ran
            return
        if _empty_args(waiting.call['function']['arguments']) and not _empty_args(step.arguments):
            waiting.call['function']['arguments'] = step.arguments
        self._hold(waiting, step)

    def _hold(self, waiting: _Waiting, step: ToolStep) -> None:
        if step.result is None:
            self.warn(f'{step.where}: tool span {step.name!r} records no result (content capture off?)')
            return
        waiting.span_result = (step.result, step.where)
        self._held[waiting.call['id']] = waiting

    def _claim_pending(self, call_id: str | None, name: str, arguments: str) -> _Pending | None:
        """The held tool span that is this call of a model's history: by id, else by name and arguments."""
        if not self._pending:
            return None
        found = None
        if call_id:
            found = next((p for p in self._pending if p.step.call_id == call_id), None)
        if found is None:
            found = next(
                (
                    p
                    for p in self._pending
                    if p.step.name == name
                    and not (call_id and p.step.call_id)
                    and (same_arguments(p.step.arguments, arguments) or _empty_args(arguments))
                ),
                None,
            )
        if found is not None:
            self._pending.remove(found)
        return found

    def place_pending(self) -> None:
        """Tool spans no model call's history placed: each is its call and its result, where it ran."""
        pending, self._pending = self._pending, []
        for p in pending:
            step = p.step
            if step.call_id and step.call_id in self._ids:
                waiting = self._waiting.get(step.call_id)
                if waiting is not None:
                    self._hold(waiting, step)
                continue
            self.add(Msg('assistant', None, [{'id': step.call_id, 'name': step.name, 'arguments': step.arguments}]), p.speaker)
            call_id = self.messages[-1]['tool_calls'][-1]['id'] if self.messages and self.messages[-1].get('tool_calls') else None
            waiting = self._waiting.get(call_id) if call_id else None
            if waiting is None:
                continue
            if step.result is None:
                self.warn(f'{step.where}: tool span {step.name!r} records no result (content capture off?)')
                continue
            self._answer(waiting)
            self.messages.append({'role': 'tool', 'tool_call_id': call_id, 'content': step.result})

    def finish(self) -> None:
        self.place_pending()
        self.flush()
        for w in self._waiting.values():
            self.warn(f'tool call {w.name!r} (id {w.call["id"]}) has no result in the trace')


def _empty_args(arguments: str) -> bool:
    return arguments.strip() in ('', '{}', 'null')
