"""Required outputs: what the agent must tell the user (`QueryRecord.expected_outputs`), and how its replies
are read for them.

tau-bench judges a run by its final state *and* its required outputs: each output must appear in one of
the agent's replies to the user (its rule: the output, lower-cased, is a substring of a reply lower-cased
with its commas removed). The reference check (`evaluators.reference`) reads them the same way, with two
corrections a substring cannot make:

* **numbers compare as numbers**: `4` is found in "4 suitcases", "4.0" and "$4.00", never inside "14" or
  "2024"; `1,234.50` and `1234.5` are the same number;
* **words compare as words**, case and whitespace folded, punctuation ignored: "Seat 12A" is found in
  "Your seat: 12a." but "cat" is not found in "category".

A reply and an output are each read as a sequence of tokens (`output_tokens`: numbers as numbers, words
case-folded); the output is found when its tokens appear, in order and adjacent, in one reply's tokens.
An output with no word or number in it (only punctuation) is looked up as case-folded text. The replies
are the agent's text turns, plus an answer given through a final-answer tool (`agent_replies`).
Spelled-out numbers ("four") are words, not numbers. `judge_outputs` turns that into what the reference
check reports: one major `completeness` finding naming every output no reply says, and a score.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelResponse, TextPart

from sensei_eval.core.issues import CompletenessIssue
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import Transcript

__all__ = (
    'OutputFindings',
    'OutputMatch',
    'agent_replies',
    'contains_output',
    'judge_outputs',
    'match_outputs',
    'output_tokens',
)

# A number as people write it: thousands grouped by commas (1,234,567.89) or not (1234.5); a word: letters
# and digits together (W1234, 12A). Anything else (spaces, punctuation, currency signs) separates tokens.
_TOKEN = re.compile(r'(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\w)|\d+(?:\.\d+)?(?!\w))|(?P<word>\w+)')

Token = tuple[str, str | float]


def output_tokens(text: str) -> tuple[Token, ...]:
    """`text` as tokens: `('n', 4.0)` for a number, `('w', 'seat')` for a word (case-folded)."""
    out: list[Token] = []
    for m in _TOKEN.finditer(text):
        if m['number'] is not None:
            out.append(('n', float(m['number'].replace(',', ''))))
        else:
            out.append(('w', m['word'].casefold()))
    return tuple(out)


def contains_output(reply: str, output: str) -> bool:
    """Whether `reply` says `output` (module docstring: numbers as numbers, words case-folded, in order)."""
    want = output_tokens(output)
    if not want:  # only punctuation: look it up as text
        folded = ' '.join(output.casefold().split())
        return bool(folded) and folded in ' '.join(reply.casefold().split())
    have = output_tokens(reply)
    n = len(want)
    return any(have[i : i + n] == want for i in range(len(have) - n + 1))


def agent_replies(record: QueryRecord) -> list[tuple[tuple[int, int] | None, str]]:
    """The agent's replies to the user, in order: each text part of its responses with its (message, part)
    position in `record.model_messages`, and an answer given through a final-answer tool (no position)."""
    replies: list[tuple[tuple[int, int] | None, str]] = []
    for i, message in enumerate(record.model_messages):
        if isinstance(message, ModelResponse):
            for j, part in enumerate(message.parts):
                if isinstance(part, TextPart) and part.content.strip():
                    replies.append(((i, j), part.content))
    final = record.final_answer()
    if final and not any(final.strip() in text for _, text in replies):
        replies.append((None, final))
    return replies


@dataclass(frozen=True)
class OutputMatch:
    """One required output and the reply that says it (its index in the replies; None: no reply does)."""

    output: str
    reply: int | None

    @property
    def found(self) -> bool:
        return self.reply is not None


def match_outputs(outputs: Sequence[str], replies: Sequence[str]) -> list[OutputMatch]:
    """Each required output with the first reply that says it (`contains_output`)."""
    return [OutputMatch(o, next((k for k, r in enumerate(replies) if contains_output(r, o)), None)) for o in outputs]


@dataclass(frozen=True)
class OutputFindings:
    """The required outputs judged against a run's replies (`judge_outputs`): the findings (one, or none),
    the `completeness` score, the per-output table (`{output, found, step}`) and a one-line reasoning."""

    issues: list[CompletenessIssue]
    score: float
    table: list[dict[str, Any]]
    reasoning: str


def judge_outputs(record: QueryRecord, transcript: Transcript) -> OutputFindings:
    """The record's required outputs against the agent's replies: one major `completeness` finding naming
    every output no reply says (cited at the last reply), the score (1, else 0.5 x the share said), and
    per output the step of the reply that says it. What the reference check reports for outputs."""
    outputs = record.expected_outputs or []
    replies = agent_replies(record)
    matches = match_outputs(outputs, [text for _, text in replies])
    steps = [step.number if (step := transcript.step_of(origin)) is not None else None for origin, _ in replies]
    table = [{'output': m.output, 'found': m.found, 'step': steps[m.reply] if m.reply is not None else None} for m in matches]
    missing = [m.output for m in matches if not m.found]
    if not missing:
        return OutputFindings([], 1.0, table, f'all {len(outputs)} required output(s) said to the user')
    said = f'none of its {len(replies)} replies' if replies else 'the agent never replied'
    issue = CompletenessIssue(
        missed_aspects=[f'required output {o!r}' for o in missing],
        reasoning=(
            f'The agent had to tell the user {", ".join(map(repr, missing))} ({len(missing)} of {len(outputs)} required '
            f'output(s)), but {said} to the user say it (numbers compared as numbers, case and spacing ignored).'
        ),
    )
    issue.steps = [s for s in steps if s is not None][-1:]
    issue.severity = 'major'
    issue.source = 'check'
    found = len(outputs) - len(missing)
    return OutputFindings([issue], 0.5 * found / len(outputs), table, issue.reasoning)
