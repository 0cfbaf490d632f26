"""Cutting a transcript to its budget is linear in steps (running sums, one pass per phase) and cuts
exactly what the former quadratic version cut: the former function is kept here as the reference and
both run on generated transcripts (step kinds, lengths, scripts, budgets, token counters). The reference
follows the rule of issue 32: a step is cut by what is still over the budget, not to a preview."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sensei_eval.core import transcript as transcript_module
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import _CHARS_PER_TOKEN, _PREVIEW_CHARS, Step, StepKind, _cut_to, estimate_tokens


def reference_cut_to(
    header: str, steps: list[Step], cut: set[int], sizes: list[int], head: int, budget: int, count: Callable[[str], int]
) -> None:
    """`transcript._cut_to` as it was before it was made linear (re-sums every step per check)."""

    def excess() -> int:
        return head + sum(sizes) + len(steps) - budget

    def over() -> bool:
        return excess() > 0

    def shorten(i: int, keep_head: int, keep_tail: int = 0) -> None:
        step = steps[i]
        text = step.text
        if len(text) <= keep_head + keep_tail + 80:
            return
        dropped = count(text[keep_head : len(text) - keep_tail])
        tail = text[len(text) - keep_tail :] if keep_tail else ''
        steps[i] = replace(step, text=f'{text[:keep_head]} [... cut: ~{dropped} tokens dropped to fit the budget ...]{tail}')
        sizes[i] = count(steps[i].render())
        cut.add(step.number)

    def keep_of(i: int) -> int:  # a step loses only what is still over (issue 32), in its own chars per token
        text = steps[i].text
        return max(_PREVIEW_CHARS, len(text) - int(excess() * max(1.0, len(text) / max(1, sizes[i]))) - 200)

    for i, step in enumerate(steps):
        if not over():
            return
        if step.kind == 'tool_result':
            shorten(i, keep_of(i))
    last_assistant = max((i for i, s in enumerate(steps) if s.kind == 'assistant'), default=-1)
    first_user = min((i for i, s in enumerate(steps) if s.kind == 'user'), default=-1)
    for i, step in enumerate(steps):
        if not over():
            return
        if i not in (last_assistant, first_user) and step.kind not in ('tool_result', 'system'):
            shorten(i, keep_of(i))
    for i, step in enumerate(steps):
        if not over():
            return
        if step.kind == 'system':
            excess_chars = int(excess() * _CHARS_PER_TOKEN) + 200
            shorten(i, max(_PREVIEW_CHARS, len(step.text) - excess_chars))
    while over():
        i = max(range(len(steps)), key=lambda k: len(steps[k].text))
        text = steps[i].text
        excess_chars = int(excess() * _CHARS_PER_TOKEN) + 200
        keep = max(0, len(text) - excess_chars)
        if keep + 80 >= len(text):
            break
        shorten(i, keep // 2, keep // 2)


KINDS: list[StepKind] = ['system', 'user', 'assistant', 'thinking', 'tool_call', 'tool_result', 'retry']
COUNTERS: dict[str, Callable[[str], int]] = {
    'estimate': estimate_tokens,
    'words': lambda text: len(text.split()) + 1,
    'chars': lambda text: math.ceil(len(text) / 4),
}
step_shapes = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 6000), st.sampled_from(['a', 'é', 'word ', '字', '{"k": 1} '])),
    min_size=1,
    max_size=60,
)


def build(shapes: list[tuple[StepKind, int, str]]) -> list[Step]:
    return [
        Step(n, kind, (unit * (length // len(unit) + 1))[:length], 'tool' if 'tool' in kind else None)
        for n, (kind, length, unit) in enumerate(shapes, 1)
    ]


@settings(max_examples=300, deadline=None)
@given(shapes=step_shapes, share=st.floats(0.0, 1.2), counter=st.sampled_from(sorted(COUNTERS)))
def test_cuts_exactly_what_the_former_version_cut(shapes: list[tuple[StepKind, int, str]], share: float, counter: str) -> None:
    count = COUNTERS[counter]
    header = 'QUERY ID: q\nQUERY: why?'
    steps = build(shapes)
    sizes = [count(s.render()) for s in steps]
    head = count(header)
    budget = int((head + sum(sizes) + len(steps)) * share)
    runs = []
    for cut_to in (reference_cut_to, _cut_to):
        mine_steps, mine_sizes, mine_cut = list(steps), list(sizes), set()
        cut_to(header, mine_steps, mine_cut, mine_sizes, head, budget, count)
        runs.append((mine_steps, mine_sizes, mine_cut))
    assert runs[0] == runs[1]


def long_record(pairs: int) -> QueryRecord:
    """A run of `pairs` tool calls, each with a long result, and a long final answer."""
    messages: list[dict[str, Any]] = [
        {'role': 'system', 'content': 'You are sensei. ' * 300},
        {'role': 'user', 'content': 'Why?'},
    ]
    for n in range(pairs):
        call = {'id': f'c{n}', 'type': 'function', 'function': {'name': 'search', 'arguments': f'{{"q": "{n}"}}'}}
        messages += [
            {'role': 'assistant', 'content': f'Looking {n}. ' * (n % 7 * 40), 'tool_calls': [call]},
            {'role': 'tool', 'tool_call_id': f'c{n}', 'content': f'result {n} ' * (200 + n % 13 * 50)},
        ]
    messages.append({'role': 'assistant', 'content': 'Because. ' * 800})
    return QueryRecord.model_validate({'query_id': 'long', 'query': 'Why?', 'messages': messages})


@pytest.mark.parametrize(('pairs', 'budget'), [(50, 20_000), (400, 20_000), (400, 3_000), (30, 500)])
def test_render_transcript_is_unchanged(pairs: int, budget: int) -> None:
    """The whole rendering (header cut, truncation record, hash) through both versions."""
    record = long_record(pairs)
    out = []
    with pytest.MonkeyPatch.context() as mp:
        for cut_to in (reference_cut_to, _cut_to):
            mp.setattr(transcript_module, '_cut_to', cut_to)
            out.append(transcript_module.render_transcript(record, budget_tokens=budget))
    assert out[0] == out[1] and out[0].truncation is not None and out[0].truncation.steps_cut


def test_one_huge_tool_result_keeps_what_fits_of_it() -> None:
    """Issue 32 item 7: a 165,000-character tool result under a 60,000-token budget was cut to a 160-character
    preview (a 142-token transcript); now only the excess goes, and the transcript ends near the budget."""
    from sensei_eval.core.transcript import render_transcript

    rows = ''.join(f'row {i}: status=ok value={i * 7 % 1000}\n' for i in range(6000))[:165_000]
    record = QueryRecord(
        query_id='big',
        query='summarise the table',
        message_format='openai',
        messages=[
            {'role': 'user', 'content': 'summarise the table'},
            {
                'role': 'assistant',
                'content': None,
                'tool_calls': [{'id': 't1', 'type': 'function', 'function': {'name': 'read', 'arguments': '{}'}}],
            },
            {'role': 'tool', 'tool_call_id': 't1', 'content': rows},
            {'role': 'assistant', 'content': 'All rows are ok.'},
        ],
    )
    transcript = render_transcript(record, budget_tokens=60_000)
    assert transcript.truncation is not None
    assert 55_000 <= transcript.tokens <= 60_000
    result = next(s for s in transcript.steps if s.kind == 'tool_result')
    assert 130_000 < len(result.text) < 150_000 and 'tokens dropped to fit the budget' in result.text
