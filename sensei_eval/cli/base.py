"""The typer settings every command uses and the silencing of third-party banners: light enough for the root
command line (`cli.app`) to import without the judges, so `sensei-eval --help` starts in a fraction of a second.
"""

from __future__ import annotations

import importlib
import os
import warnings
from typing import Any

import typer

__all__ = ('CONTEXT_SETTINGS', 'make_app', 'quiet_third_party')

# click's plain help formatter: option names are never cut and help text wraps to the terminal, which
# typer's rich panels do not manage at 80 columns (they squeeze the names column to `--max-metric-ca…`).
CONTEXT_SETTINGS: dict[str, Any] = {'max_content_width': 100, 'help_option_names': ['--help', '-h']}


# Value placeholders in --help, in words (`--dataset FILE`, `--timeout SECONDS`): typer 0.29 writes the Python
# type (`<list[Path]>`, `<float range>`), which reads as code. An option's own `metavar` wins.
_METAVARS = {
    **dict.fromkeys(('str',), 'TEXT'),
    **dict.fromkeys(('int', 'int range'), 'N'),
    **dict.fromkeys(('float', 'float range'), 'NUMBER'),
    **dict.fromkeys(('path', 'Path'), 'PATH'),
    'bool': 'BOOLEAN',
    'datetime': 'DATETIME',
}


def _readable_metavars() -> None:
    """Typer's parameters show `_METAVARS` words, and help text wraps at spaces only, never inside a
    hyphenated word (`--ray-⏎address`): both once, at import, for every command."""
    from typer._click._textwrap import TextWrapper
    from typer.core import _TyperParameter

    original = _TyperParameter.display_type
    if getattr(original, '_sensei_readable', False):
        return

    def display_type(self: Any, ctx: Any) -> str:
        label = str(original(self, ctx)).strip('<>')
        while label.startswith('list[') and label.endswith(']'):
            label = label[5:-1]
        if '|' in label:  # choices: shown as they are
            return label
        return _METAVARS.get(label, label.upper())

    display_type._sensei_readable = True  # type: ignore[attr-defined]
    _TyperParameter.display_type = display_type  # type: ignore[method-assign]
    # textwrap splits `--ray-address` after the hyphen; the simple word separator splits at spaces only
    TextWrapper.wordsep_re = TextWrapper.wordsep_simple_re


_readable_metavars()


def make_app(help: str | None = None, **kwargs: Any) -> typer.Typer:
    """A typer app with the settings every sensei-eval command uses."""
    return typer.Typer(add_completion=False, rich_markup_mode=None, context_settings=CONTEXT_SETTINGS, help=help, **kwargs)


def quiet_third_party() -> None:
    """Keep other libraries' banners and setup warnings out of our output, at their source: pydantic-ai's
    first-run banner (on stderr, in the middle of the progress bar) and logfire's "not configured"
    warning, which pydantic-evals' spans trigger when logfire is installed but not configured."""
    os.environ.setdefault('PYDANTIC_AI_NO_BANNER', '1')
    os.environ.setdefault('LOGFIRE_IGNORE_NO_CONFIG', '1')
    try:
        import pydantic_ai

        pydantic_ai.BANNER_ENABLED = False
    except ImportError:  # pragma: no cover - a dependency
        pass
    try:  # by name: logfire is not a dependency, only present when something else brought it
        config = importlib.import_module('logfire._internal.config')
        warnings.filterwarnings('ignore', category=config.LogfireNotConfiguredWarning)
    except (ImportError, AttributeError):  # pragma: no cover - logfire absent, or moved the class
        pass
