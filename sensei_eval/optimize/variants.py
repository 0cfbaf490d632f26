"""The variant generator: a DSPy module that rewrites one prompt component from failure examples.

Input: the component's name and current text, the rest of the prompt (so a variant doesn't repeat or
contradict the frozen sections), and failure examples — issues that the judges mapped to this
component found in the current prompt's runs. Output: N distinct rewrites. Duplicates, empty texts
and copies of the current text are dropped; when fewer than N remain the module asks again (up to
`max_rounds`), each round with a different `rollout_id` so DSPy's cache doesn't hand back the same
answer. It never pads with made-up variants: fewer than N distinct answers means fewer candidates.

It runs on whatever `dspy.LM` is configured — a hosted model, an OpenAI-compatible server, the
embedded model — or a scripted LM in tests. `lm_calls` counts the requests it made, for the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dspy

__all__ = ('ProposeVariants', 'VariantGenerator', 'make_dspy_lm')


class ProposeVariants(dspy.Signature):  # type: ignore[misc]
    """You improve one section of an AI agent's system prompt. The failure examples are problems that
    judges found in the agent's runs and that this section is responsible for. Write improved versions
    of the section that would prevent those failures: keep the section's purpose, keep it concise and
    concrete (instructions the agent can follow), do not repeat what the rest of the prompt already says,
    and make each variant a genuinely different approach."""

    component_name: str = dspy.InputField(desc='Name of the prompt section to rewrite.')
    current_text: str = dspy.InputField(desc='The section as it is now.')
    rest_of_prompt: str = dspy.InputField(desc='The other sections, frozen; for context only.')
    failure_examples: list[str] = dspy.InputField(desc='Problems the judges found that this section should prevent.')
    num_variants: int = dspy.InputField(desc='How many distinct rewrites to return.')
    variants: list[str] = dspy.OutputField(desc='The rewritten section texts, each complete and distinct.')


class VariantGenerator(dspy.Module):  # type: ignore[misc]
    """N distinct rewrites of one component; see the module docstring."""

    def __init__(self, lm: Any = None, max_rounds: int = 3, adapter: Any = None) -> None:
        super().__init__()
        self.lm = lm  # None: whatever dspy.configure / dspy.context set
        self.adapter = adapter  # None: DSPy's default (chat, with a JSON fallback)
        self.propose = dspy.Predict(ProposeVariants)
        self.max_rounds = max_rounds
        self.lm_calls = 0

    def forward(
        self,
        component_name: str,
        current_text: str,
        rest_of_prompt: str,
        failure_examples: Sequence[str],
        num_variants: int,
        seed: int = 0,
    ) -> dspy.Prediction:
        found: list[str] = []
        seen = {_norm(current_text)}
        errors: list[str] = []
        for round_ in range(self.max_rounds):
            if len(found) >= num_variants:
                break
            self.lm_calls += 1
            try:
                with dspy.context(lm=self.lm or dspy.settings.lm, adapter=self.adapter or dspy.settings.adapter):
                    out = self.propose(
                        component_name=component_name,
                        current_text=current_text,
                        rest_of_prompt=rest_of_prompt,
                        failure_examples=list(failure_examples),
                        num_variants=num_variants - len(found),
                        config={'rollout_id': seed * 1000 + round_, 'temperature': 1.0},
                    )
            except Exception as e:  # a malformed answer costs a round, not the run
                errors.append(f'round {round_ + 1}: {type(e).__name__}: {str(e)[:300]}')
                continue
            for text in _as_texts(out.variants):
                key = _norm(text)
                if key and key not in seen:
                    seen.add(key)
                    found.append(text.strip())
        return dspy.Prediction(variants=found[:num_variants], errors=errors)


def make_dspy_lm(model: str | None, base_url: str | None = None, api_key: str | None = None) -> Any:
    """A `dspy.LM` for a pydantic-ai style model string (`openai:gpt-5.2`) or an OpenAI-compatible URL."""
    if base_url is not None:
        return dspy.LM(f'openai/{model or "default"}', api_base=base_url, api_key=api_key or 'sk-no-key', cache=False)
    if model is None:
        raise ValueError('a model is needed for the variant generator')
    provider, _, name = model.partition(':')
    provider = _LITELLM_PROVIDERS.get(provider, provider)
    return dspy.LM(f'{provider}/{name}' if name else model, cache=False)


# pydantic-ai provider prefixes whose LiteLLM (DSPy) name differs
_LITELLM_PROVIDERS = {'google-gla': 'gemini', 'google-vertex': 'vertex_ai', 'bedrock': 'bedrock', 'groq': 'groq'}


# ---------------------------------------------------------------------------------------------------
# Helpers


def _as_texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [v if isinstance(v, str) else str(v) for v in value]
    return []


def _norm(text: str) -> str:
    return ' '.join(text.split()).lower()
