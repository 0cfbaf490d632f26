"""Compatibility: prompt components live in `sensei_eval.components`."""

from __future__ import annotations

from ..components import (
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
