"""The import path token counting and prompt fitting shared before they were split in two modules.

Counting (`TokenCounter`, `counter_for`, the budgets) is `models.counting`; re-cutting a transcript to fit
(`fit_transcript`, `PromptFit`, `largest_task_tokens`) is `models.fitting`. This module only re-exports
both for code that still imports from here; new code imports the module it means.
"""

from __future__ import annotations

from sensei_eval.models.counting import (
    DEFAULT_OUTPUT_RESERVE,
    ESTIMATE_BYTES_PER_TOKEN,
    MIN_TRANSCRIPT_TOKENS,
    SAFETY_MARGIN,
    SizedModel,
    TokenCounter,
    context_tokens,
    counter_for,
    estimate_counter,
    llama_counter,
    output_reserve,
    prompt_limit,
    tiktoken_counter,
    transcript_budget,
)
from sensei_eval.models.fitting import PromptFit, fit_transcript, largest_task_tokens

__all__ = (
    'DEFAULT_OUTPUT_RESERVE',
    'ESTIMATE_BYTES_PER_TOKEN',
    'MIN_TRANSCRIPT_TOKENS',
    'SAFETY_MARGIN',
    'PromptFit',
    'SizedModel',
    'TokenCounter',
    'context_tokens',
    'counter_for',
    'estimate_counter',
    'fit_transcript',
    'largest_task_tokens',
    'llama_counter',
    'output_reserve',
    'prompt_limit',
    'tiktoken_counter',
    'transcript_budget',
)
