"""Compatibility: prompt components live in `sensei_eval.components`."""

from __future__ import annotations

from ..components import (
    PLAIN_TEXT_COMPONENT,
    ComponentsError,
    PromptComponents,
    load_components,
    save_components,
    section_diff,
)

__all__ = (
    'PLAIN_TEXT_COMPONENT',
    'ComponentsError',
    'PromptComponents',
    'load_components',
    'save_components',
    'section_diff',
)
