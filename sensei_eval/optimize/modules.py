"""Compatibility: importing the user's code lives in `sensei_eval.user_modules`."""

from __future__ import annotations

from ..user_modules import import_spec

__all__ = ('import_spec',)
