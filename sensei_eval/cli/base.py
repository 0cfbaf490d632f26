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
