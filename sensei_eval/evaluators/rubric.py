"""A judge from instance fields: your own rubric, as simple as pydantic-evals' `LLMJudge`.

    from sensei_eval.evaluators import Hallucination, RubricJudge

    refunds = RubricJudge(
        name='refund_policy',
        rubric='A refund is only promised after the refund tool returned success.',
        failure_mode='hallucination',  # optional: file findings under a standard failure mode
        model='openai:gpt-5.2',
    )
    dataset.evaluate_sync(task, evaluators=[refunds, Hallucination(model='openai:gpt-5.2')])

It is a `FailureModeJudge` in every other respect: the same system prompt and transcript, issue reports
that cite steps, the inconclusive rule (echoed prompt, empty reasoning, steps that do not exist give
`inconclusive`, never a pass), a criteria hash over its prompt texts, and a model resolved once per judge.
With `failure_mode` set, its issues take that mode's issue model and count in the record's verdict under
that mode; without one they are plain issues (steps and a description) under the judge's own name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sensei_eval.core import modes
from sensei_eval.core.errors import ConfigError
from sensei_eval.core.issues import Issue
from sensei_eval.evaluators.base import FailureModeJudge

__all__ = ('RubricJudge',)


@dataclass(repr=False)
class RubricJudge(FailureModeJudge):
    """An LLM judge whose name, rubric and failure mode are instance fields (see the module docstring)."""

    # Instance fields where a `FailureModeJudge` subclass declares class variables.
    name: str = ''  # type: ignore[misc]
    rubric: str = ''  # type: ignore[misc]
    failure_mode: str | None = None  # type: ignore[misc]
    question: str = ''  # type: ignore[misc]

    def __post_init__(self) -> None:
        if not self.name.strip() or not self.name.replace('_', '').replace('-', '').isalnum():
            raise ConfigError(f'RubricJudge needs a name of letters, digits, "_" or "-", got {self.name!r}')
        if not self.rubric.strip():
            raise ConfigError(f'RubricJudge {self.name!r} needs a rubric: what a good run does, what to flag')
        if self.failure_mode is not None and self.failure_mode not in modes.MODES:
            raise ConfigError(
                f'RubricJudge {self.name!r}: unknown failure_mode {self.failure_mode!r}; '
                f'known: {", ".join(modes.MODES)} (or leave it out)'
            )
        if not self.question:
            self.question = f'Does the agent\'s run meet the rubric of "{self.name}" below?'

    @property
    def issue_model(self) -> type[Issue]:  # type: ignore[override]  # the mode's, as the class descriptor gives
        return modes.MODES[self.failure_mode].issue_model if self.failure_mode in modes.MODES else Issue

    @property
    def category(self) -> str | None:  # type: ignore[override]
        return modes.category_of(self.failure_mode)

    def __repr__(self) -> str:
        return f'RubricJudge(name={self.name!r}, failure_mode={self.failure_mode!r})'

    def build_serialization_arguments(self) -> dict[str, Any]:
        """The fields pydantic-evals writes into a report's evaluator spec (never the resolved model)."""
        return {k: v for k, v in super().build_serialization_arguments().items() if not k.startswith('_')}
