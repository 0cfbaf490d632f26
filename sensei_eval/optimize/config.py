"""An optimize run's configuration beyond the flags: which failure modes feed which prompt component (`--map`),
and the DSPy language model the optimizer's own calls go through (the judge model's endpoint).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sensei_eval.agents.components import PromptComponents
from sensei_eval.core.errors import ConfigError
from sensei_eval.models.judge_model import JudgeModel

__all__ = ('MapEntry', 'RunConfigError', 'check_component_map', 'dspy_lm', 'lm_adapter', 'parse_map')


class RunConfigError(ConfigError):
    """A bad run config, --map entry or component map: names the file (and line), the key and the value."""


@dataclass(frozen=True)
class MapEntry:
    """One failure mode → components entry, and where it was written (for error messages)."""

    mode: str
    components: tuple[str, ...]
    origin: str


def parse_map(values: list[str]) -> list[MapEntry]:
    """`--map MODE=A,B` entries (repeatable; one mode given twice gets the components of both)."""
    entries = []
    for value in values:
        mode, sep, targets = value.partition('=')
        names = tuple(n.strip() for n in targets.split(',') if n.strip())
        if not sep or not mode.strip() or not names:
            raise RunConfigError(f'--map {value!r}: expected FAILURE_MODE=COMPONENT[,COMPONENT...]')
        entries.append(MapEntry(mode.strip(), names, f'--map {value}'))
    return entries


def check_component_map(entries: list[MapEntry], components: PromptComponents) -> dict[str, list[str]]:
    """The map the loop takes (`OptimizeConfig.component_map`), every entry checked against the known failure
    modes and the prompt's components; an error names where the bad entry was written and lists the choices."""
    from sensei_eval.core.modes import MODES

    merged: dict[str, list[str]] = {}
    for entry in entries:
        if entry.mode not in MODES:
            raise RunConfigError(
                f'{entry.origin}: unknown failure mode {entry.mode!r}; known failure modes: {", ".join(sorted(MODES))}'
            )
        for name in entry.components:
            if name not in components:
                choices = ', '.join(components.names)
                raise RunConfigError(f'{entry.origin}: {components.source} has no component {name!r}; its components: {choices}')
        merged.setdefault(entry.mode, [])
        merged[entry.mode] += [n for n in entry.components if n not in merged[entry.mode]]
    return merged


def dspy_lm(model: JudgeModel | None) -> Any:
    """The DSPy LM that writes variants, talking to the same endpoint the judge model does."""
    import dspy

    from sensei_eval.optimize.variants import make_dspy_lm

    if model is None:
        raise ConfigError('the variant generator needs a model')
    if (endpoint := model.openai_endpoint) is not None:
        # the same endpoint and key the judge model was resolved with (`models.resolve_model`)
        name, base_url, api_key = endpoint
        extra: dict[str, Any] = {'max_tokens': 600, 'timeout': 300} if model.embedded else {}
        return dspy.LM(f'openai/{name}', api_base=base_url, api_key=api_key, cache=False, **extra)
    spec = model.model if isinstance(model.model, str) else model.spec  # `resolve_model` keeps the string it built from
    if spec is not None:
        return make_dspy_lm(spec)
    raise ConfigError(f'no DSPy LM for model {model.name}; pass --generator-model')


def lm_adapter(model: JudgeModel | None) -> Any:
    """GEPA's instruction proposer on the embedded model gets DSPy's chat format only: its JSON fallback asks
    llama.cpp for grammar-constrained decoding, which takes minutes per call on a 135M model for no better answer."""
    import dspy

    return dspy.ChatAdapter(use_json_adapter_fallback=False) if model is not None and model.embedded else None
