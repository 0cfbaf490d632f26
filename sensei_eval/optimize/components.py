"""Compatibility: prompt components live in `sensei_eval.agents.components`."""

from __future__ import annotations

from sensei_eval.agents.components import (
    PLAIN_TEXT_COMPONENT,
    Assembly,
    ComponentsError,
    PromptComponents,
    load_components,
    patched_module_source,
    save_components,
    saved_prompt_path,
    section_diff,
)

__all__ = (
    'PLAIN_TEXT_COMPONENT',
    'Assembly',
    'ComponentsError',
    'PromptComponents',
    'load_components',
    'patched_module_source',
    'save_components',
    'saved_prompt_path',
    'section_diff',
)
