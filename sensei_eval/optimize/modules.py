"""Compatibility: importing the user's code lives in `sensei_eval.core.user_modules`."""

from __future__ import annotations

from sensei_eval.core.user_modules import import_spec

__all__ = ('import_spec',)
