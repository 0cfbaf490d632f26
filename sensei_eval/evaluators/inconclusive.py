"""Verdicts that did not judge: tell them apart from a pass.

A small or confused model can return schema-valid JSON without judging anything: it copies the
schema's own field description back as its reasoning ("Two to five sentences weighing the evidence,
citing [step] numbers."), leaves the reasoning empty, cites steps the transcript does not have, or
writes the same text for every record. Counted as a pass, that hides a judge that never looked. Such a
verdict gets the status `inconclusive`: kept in the report with its raw output, excluded from scores,
counted in the summary.

The rules, each deliberately narrow so a real verdict is never caught:

* **empty** — the reasoning has no letters;
* **copied** — the reasoning, or every text field of an issue, is text of the prompt we sent (system
  prompt, rubric, schema): it appears there verbatim after folding case and spaces, or at least 80% of
  its words lie in word 3-grams the prompt has too (a copy with a word changed is still a copy). Only
  our own texts count: quoting the transcript is evidence, not copying;
* **phantom steps** — an issue whose every cited step is outside the transcript;
* **same text for every record** — a judge whose reasoning is identical on every record of a run
  (three or more different transcripts), decided by the runner once the run is done.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from ..issues import Issue

__all__ = ('MIN_RECORDS_FOR_SAME_TEXT', 'copied_from', 'normalise', 'same_text_everywhere', 'why_inconclusive')

# Share of a text's words covered by 3-grams the prompt shares, from which it counts as copied.
_COPIED_SHARE = 0.8
_GRAM = 3
# Shorter texts than this (after normalising) are too common to call copied ("no issues found").
_MIN_COPIED_CHARS = 24
# A run-wide identical reasoning is suspicious only over this many different transcripts.
MIN_RECORDS_FOR_SAME_TEXT = 3
# Prompts whose index is kept: one per judge of a run (and per fused judge) is plenty.
_PROMPTS_INDEXED = 64
_LETTER = re.compile(r'[^\W\d_]')


def normalise(text: str) -> str:
    """Lowercase, words only, single spaces: what copying keeps whatever the quoting and spacing."""
    return ' '.join(re.findall(r'\w+', text.lower()))


def _grams(words: Sequence[str], n: int = _GRAM) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@functools.lru_cache(maxsize=_PROMPTS_INDEXED)
def _prompt_index(prompt: str) -> tuple[str, frozenset[tuple[str, ...]]]:
    """A prompt normalised and its word 3-grams, once per prompt text: a fused judge checks each member
    against the same (long) prompt, which would otherwise be re-read per member (members² work)."""
    norm = normalise(prompt)
    return norm, frozenset(_grams(norm.split()))


def copied_from(text: str, prompt: str, prompt_grams: Collection[tuple[str, ...]] | None = None) -> bool:
    """Whether `text` was taken from `prompt` (both raw; see the module docstring for the rule)."""
    norm = normalise(text)
    if len(norm) < _MIN_COPIED_CHARS:
        return False
    norm_prompt, indexed_grams = _prompt_index(prompt)
    if norm in norm_prompt:
        return True
    words = norm.split()
    if len(words) < 2 * _GRAM:
        return False
    known = prompt_grams if prompt_grams is not None else indexed_grams
    covered: set[int] = set()
    for i in range(len(words) - _GRAM + 1):
        if tuple(words[i : i + _GRAM]) in known:
            covered.update(range(i, i + _GRAM))
    return len(covered) / len(words) >= _COPIED_SHARE


def why_inconclusive(reasoning: str, issues: Sequence[Issue], n_steps: int, prompt: str) -> str | None:
    """Why a parsed verdict shows the judge did not judge, or None when it looks like a real verdict."""
    if not _LETTER.search(reasoning or ''):
        return 'empty reasoning'
    prompt_grams = _prompt_index(prompt)[1]
    if copied_from(reasoning, prompt, prompt_grams):
        return 'reasoning copied from the prompt or schema text, not written about this run'
    for k, issue in enumerate(issues):
        if issue.steps and all(not 1 <= s <= n_steps for s in issue.steps):
            return f'issue {k} cites only steps that do not exist ({issue.steps}; the transcript has 1-{n_steps})'
        texts = [v for v in _strings(issue.model_dump(exclude={'steps', 'source'})) if len(normalise(v)) >= _MIN_COPIED_CHARS]
        if texts and all(copied_from(t, prompt, prompt_grams) for t in texts):
            return f'issue {k} repeats the schema or rubric text instead of describing this run'
    return None


def same_text_everywhere(reasonings: Iterable[tuple[str, str]]) -> bool:
    """Whether one judge gave the same reasoning on every transcript: pairs of (transcript hash, reasoning)."""
    by_transcript: dict[str, str] = {}
    for transcript, reasoning in reasonings:
        by_transcript.setdefault(transcript, normalise(reasoning))
    texts = set(by_transcript.values())
    return len(by_transcript) >= MIN_RECORDS_FOR_SAME_TEXT and len(texts) == 1


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
