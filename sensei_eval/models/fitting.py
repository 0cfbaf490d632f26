"""A judge's transcript re-cut so that its whole prompt fits the judge model: counting is `models.counting`'s.

`fit_transcript` counts the assembled request (system prompt, fenced transcript, the judge's task and the
chat template) with the model's own counter after rendering, and re-cuts the transcript when it leaves
less than the output reserve free or exceeds the model's transcript budget. Judges of one record re-cut to
one shared budget (sized for the largest single judge's task: `largest_task_tokens`), so they still send
byte-identical prefixes; counts and re-cuts are cached per record for the judges that share them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from sensei_eval.core.transcript import Transcript, render_transcript
from sensei_eval.models.counting import (
    MIN_TRANSCRIPT_TOKENS,
    SizedModel,
    TokenCounter,
    counter_for,
    prompt_limit,
    transcript_budget,
)

if TYPE_CHECKING:
    from sensei_eval.core.records import QueryRecord

__all__ = ('PromptFit', 'fit_transcript', 'largest_task_tokens')


@dataclass(frozen=True)
class PromptFit:
    """A transcript that fits, and the counted size of the request it goes into."""

    transcript: Transcript
    prompt_tokens: int
    counter: str
    exact: bool
    limit: int | None
    recut: bool

    def details(self) -> dict[str, Any]:
        """What a judge result records about its prompt's size (`JudgeResult.details`)."""
        out: dict[str, Any] = {'prompt_tokens_counted': self.prompt_tokens, 'token_counter': self.counter}
        if self.limit is not None:
            out['prompt_token_limit'] = self.limit
        if self.recut:
            out['transcript_recut'] = True
        return out


def fit_transcript(
    record: QueryRecord,
    transcript: Transcript,
    model: SizedModel,
    *,
    system: str,
    task: str,
    shared_task_tokens: int | None = None,
) -> PromptFit:
    """The transcript for one request of `system` + fenced transcript + `task`, re-cut if it does not fit.

    The request must leave the output reserve free in the context (`prompt_limit`), and the transcript
    must stay within the model's transcript budget, both counted with the model's own counter. When
    either fails, the record is rendered again against a budget sized for `shared_task_tokens` (the
    largest task among the judges sharing this transcript; default: this task), so every judge of a
    record that needs a re-cut gets the same bytes."""
    counter = counter_for(model)
    limit = prompt_limit(model)
    fixed = _task_tokens(counter, system, task)
    fixed_shared = max(fixed, shared_task_tokens or 0)

    def size(t: Transcript) -> tuple[int, int]:
        body = _count_cached(counter, t.fenced(), t.sha256)
        return body, body + fixed

    body, total = size(transcript)
    if body <= model.transcript_budget + _fence_tokens(counter) and (limit is None or total <= limit):
        return PromptFit(transcript, total, counter.name, counter.exact, limit, False)
    budget = transcript_budget(model, fixed_shared + _fence_tokens(counter))
    fitted = transcript
    for _ in range(4):  # counted apart and added, a re-cut can still be a few tokens over: tighten and retry
        fitted = _render_cached(record, transcript, budget, counter)
        body, total = size(fitted)
        over = total - limit if limit is not None else 0
        if over <= 0 or budget <= MIN_TRANSCRIPT_TOKENS:
            break
        budget = max(MIN_TRANSCRIPT_TOKENS, budget - over - 16)
    return PromptFit(fitted, total, counter.name, counter.exact, limit, True)


@cache
def largest_task_tokens(counter: TokenCounter, system: str, tasks: tuple[str, ...]) -> int:
    return max((_task_tokens(counter, system, task) for task in tasks), default=0) + _fence_tokens(counter)


@cache
def _task_tokens(counter: TokenCounter, system: str, task: str) -> int:
    """A request without its transcript: system prompt, the task after the transcript, the chat template."""
    return counter.chat(system, f'\n\n{task}')


@cache
def _fence_tokens(counter: TokenCounter) -> int:
    """The fence lines around a transcript (counted with the transcript, not in its budget)."""
    empty = Transcript('', [], '').fenced()
    return counter.count(empty)


# Counts and re-cuts are shared by the judges of a record: bounded caches keyed by the counter and the
# transcript's hash (a re-cut also by record and budget).
_CACHE_SIZE = 256
_counts: OrderedDict[tuple[str, str], int] = OrderedDict()
_renders: OrderedDict[tuple[str, str, int], Transcript] = OrderedDict()
_lock = threading.Lock()


def _count_cached(counter: TokenCounter, text: str, sha256: str) -> int:
    key = (counter.name, f'{sha256}:{len(text)}')
    with _lock:
        if key in _counts:
            _counts.move_to_end(key)
            return _counts[key]
    n = counter.count(text)
    with _lock:
        _counts[key] = n
        while len(_counts) > _CACHE_SIZE:
            _counts.popitem(last=False)
    return n


def _render_cached(record: QueryRecord, given: Transcript, budget: int, counter: TokenCounter) -> Transcript:
    # keyed by the transcript the judges were given (its hash and how much of the record it cut)
    original = given.truncation.original_tokens if given.truncation else given.tokens
    key = (counter.name, f'{record.query_id}:{given.sha256}:{original}', budget)
    with _lock:
        if key in _renders:
            _renders.move_to_end(key)
            return _renders[key]
    transcript = render_transcript(record, budget_tokens=budget, count_tokens=counter)
    with _lock:
        _renders[key] = transcript
        while len(_renders) > _CACHE_SIZE:
            _renders.popitem(last=False)
    return transcript
