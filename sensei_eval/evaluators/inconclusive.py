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
* **paraphrased** — the reasoning says nothing a judge's own texts do not: most of its content words
  (at least `_PARAPHRASE_SHARE` of them; stop words aside) are words of one single text of ours (a
  schema field description, a prompt line), and it names nothing from the transcript. "Two to five
  sentences citing [step] numbers, and no more." is the schema's reasoning description in other words;
* **cites nothing from the transcript** (when the caller passes it) — a pass (no issues) whose
  reasoning, of three content words or more, cites no step number and shares no word, name or number
  with the transcript that our own texts do not also contain: whatever it weighed, it was not this
  run. A genuine verdict names a step, a tool, a value or a claim of the run; such a reasoning is
  never caught. (A verdict with issues answers to the phantom-step and copied-issue rules instead;
  one or two words are too little to tell.)
* **phantom steps** — an issue whose every cited step is outside the transcript;
* **same text for every record** — a judge whose reasoning is identical on every record of a run
  (three or more different transcripts), decided by the runner once the run is done.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sensei_eval.core import issues as _issue_models
from sensei_eval.core.issues import Issue

__all__ = (
    'MIN_RECORDS_FOR_SAME_TEXT',
    'copied_from',
    'normalise',
    'paraphrases',
    'same_text_everywhere',
    'why_inconclusive',
)

# Share of a text's words covered by 3-grams the prompt shares, from which it counts as copied.
_COPIED_SHARE = 0.8
_GRAM = 3
# Shorter texts than this (after normalising) are too common to call copied ("no issues found").
_MIN_COPIED_CHARS = 24
# A run-wide identical reasoning is suspicious only over this many different transcripts.
MIN_RECORDS_FOR_SAME_TEXT = 3
# Prompts whose index is kept: one per judge of a run (and per fused judge) is plenty.
_PROMPTS_INDEXED = 64
# Transcripts whose words are kept: the judges of the few records in flight share one.
_TRANSCRIPTS_INDEXED = 16
_LETTER = re.compile(r'[^\W\d_]')
# Share of a reasoning's content words found in one of our texts from which, naming nothing of the
# run, it is a paraphrase of that text. Measured: schema paraphrases score 0.8-1.0, genuine verdicts
# that name the run are protected by the transcript words they cite whatever their share.
_PARAPHRASE_SHARE = 0.7
# Fewer content words than this is too little text to call a paraphrase (the empty rule covers it).
_MIN_CONTENT_WORDS = 3
# A step citation: "[3]", "step 3", "steps 3 and 5".
_STEP_CITED = re.compile(r'\[\s*\d+\s*\]|\bsteps?\s*#?\s*\d+', re.IGNORECASE)
# Words that carry no content in either direction (what is left says what a text is about).
# fmt: off
_STOP_WORDS = frozenset((
    'a', 'an', 'and', 'are', 'as', 'at', 'be', 'been', 'but', 'by', 'did', 'do', 'does', 'for', 'from',
    'had', 'has', 'have', 'how', 'if', 'in', 'into', 'is', 'it', 'its', 'itself', 'no', 'nor', 'not', 'of',
    'on', 'one', 'or', 'so', 'than', 'that', 'the', 'their', 'them', 'then', 'there', 'these', 'they',
    'this', 'those', 'to', 'two', 'was', 'were', 'what', 'when', 'which', 'while', 'who', 'why', 'will',
    'with', 'would', 'more', 'most', 'very', 'any', 'all', 'each', 'every', 'only', 'also', 'just', 'other',
    'such', 'should', 'could', 'may', 'might', 'must', 'can', 'being', 'our', 'your', 'you', 'we', 'i', 'he',
    'she', 'his', 'her',
))
# fmt: on


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


def why_inconclusive(
    reasoning: str, issues: Sequence[Issue], n_steps: int, prompt: str, transcript: str | None = None
) -> str | None:
    """Why a parsed verdict shows the judge did not judge, or None when it looks like a real verdict.

    `prompt` is our own text sent to the judge (system prompt, rubric); the schema's descriptions are
    added here. `transcript`, when given, is the run as the judge saw it (for the "cites nothing" rule)."""
    if not _LETTER.search(reasoning or ''):
        return 'empty reasoning'
    prompt_grams = _prompt_index(prompt)[1]
    if copied_from(reasoning, prompt, prompt_grams) or copied_from(reasoning, _schema_text()):
        return 'reasoning copied from the prompt or schema text, not written about this run'
    ours = _our_texts(prompt)
    cites = _cites_the_run(reasoning, ours, transcript)
    if not cites and paraphrases(reasoning, ours):
        return 'reasoning paraphrases the prompt or schema text (its words are those of our own text), not this run'
    if transcript is not None and not cites and not issues and len(_content_words(reasoning)) >= _MIN_CONTENT_WORDS:
        return 'reasoning cites nothing from the transcript (no step, name, value or word of the run)'
    for k, issue in enumerate(issues):
        if issue.steps and all(not 1 <= s <= n_steps for s in issue.steps):
            return f'issue {k} cites only steps that do not exist ({issue.steps}; the transcript has 1-{n_steps})'
        texts = [v for v in _strings(issue.model_dump(exclude={'steps', 'source'})) if len(normalise(v)) >= _MIN_COPIED_CHARS]
        if texts and all(copied_from(t, prompt, prompt_grams) for t in texts):
            return f'issue {k} repeats the schema or rubric text instead of describing this run'
    return None


def paraphrases(text: str, ours: Iterable[str]) -> bool:
    """Whether most of `text`'s content words are words of one single text of `ours` (see the module docstring)."""
    words = _content_words(text)
    if len(words) < _MIN_CONTENT_WORDS:
        return False
    for own in ours:
        vocabulary = _vocabulary(own)
        if vocabulary and sum(w in vocabulary for w in words) / len(words) >= _PARAPHRASE_SHARE:
            return True
    return False


def _cites_the_run(reasoning: str, ours: Sequence[str], transcript: str | None) -> bool:
    """A step number, or a content word or number of the transcript that none of our texts has."""
    if _STEP_CITED.search(reasoning):
        return True
    if transcript is None:
        return False
    own = _words_of(tuple(ours))
    run = _run_words(transcript)
    return any(w in run and w not in own for w in _content_words(reasoning, keep_numbers=True))


def _content_words(text: str, *, keep_numbers: bool = False) -> list[str]:
    words = normalise(text).split()
    return [w for w in words if w not in _STOP_WORDS and (len(w) > 2 or (keep_numbers and w.isdigit()))]


def _lines(text: str) -> list[str]:
    """Our prompt as separate texts (paragraphs and list items), so one paraphrased line is found."""
    return [line for line in re.split(r'\n\s*\n|\n\s*[-*\d.]+\s', text) if line.strip()]


# The texts of ours and their words are the same on every call of one judge (and a transcript on every
# judge of one record): derived once, rather than on every verdict.
@functools.lru_cache(maxsize=_PROMPTS_INDEXED)
def _our_texts(prompt: str) -> tuple[str, ...]:
    return (*_lines(prompt), *_schema_texts())


@functools.lru_cache(maxsize=_PROMPTS_INDEXED)
def _words_of(texts: tuple[str, ...]) -> frozenset[str]:
    return frozenset(w for text in texts for w in _content_words(text))


@functools.lru_cache(maxsize=4096)
def _vocabulary(text: str) -> frozenset[str]:
    return frozenset(_content_words(text))


@functools.lru_cache(maxsize=_TRANSCRIPTS_INDEXED)
def _run_words(transcript: str) -> frozenset[str]:
    return frozenset(normalise(transcript).split())


@functools.cache
def _schema_texts() -> tuple[str, ...]:
    """Every field description of the verdict and issue models: text of ours the judge is shown."""
    texts: list[str] = []
    for value in vars(_issue_models).values():
        if isinstance(value, type) and issubclass(value, Issue | _issue_models.Verdict):
            texts.extend(f.description for f in value.model_fields.values() if f.description)
    return tuple(dict.fromkeys(texts))


@functools.cache
def _schema_text() -> str:
    return '\n'.join(_schema_texts())


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
