"""The typer settings every command uses, the console every command prints through, and the silencing of
third-party banners: light enough for the root command line (`cli.app`) to import without the judges, so
`sensei-eval --help` starts in a fraction of a second.

The console (`make_console`, a `SafeConsole`) is the one way a command writes to the terminal, because what
it prints comes from untrusted input (query ids, dataset text, a judge's reasoning):

* no control character of that text reaches the terminal: every C0/C1 control character but the newline
  and the tab, and DEL, is printed as its visible Unicode picture (ESC as `␛`), so `ESC[2J` cannot clear
  the screen and an OSC-8 sequence cannot make a link. This is done on the rendered text segments, after
  Rich has laid them out, so the styles and cursor moves Rich itself writes (separate control segments and
  style codes) are untouched;
* Rich markup in that text is never markup: text is printed with `markup=False` or through `shown()`
  (`[link=https://evil.example]` stays those characters). Progress descriptions are markup to Rich, so they
  go through `shown()` too;
* text wraps at the console's width (80 columns without a terminal, as Rich decides), but a table is
  printed inside `wide()`, at `table_width`: without a terminal (a CI log, a pipe, a file) and without
  `COLUMNS` that is `LOG_WIDTH`, so a table is printed whole rather than cut or squeezed to 80 columns.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

__all__ = (
    'CONTEXT_SETTINGS',
    'LOG_WIDTH',
    'SafeConsole',
    'make_app',
    'make_console',
    'print_table',
    'quiet_third_party',
    'shown',
)

# A table's width without a terminal: wide enough for every column of the validate table and long metric
# names (a CI log wraps nothing; Rich's default of 80 cut `tool_selection/docs_t…`).
LOG_WIDTH = 200
# Control characters as their visible pictures (U+2400 + code for C0, U+2421 for DEL; C1 as U+FFFD): one
# character for one, so Rich's spans and widths stay right. Newline and tab are layout, kept.
_PICTURES = {
    **{code: 0x2400 + code for code in range(0x20) if chr(code) not in '\n\t'},
    0x7F: 0x2421,
    **dict.fromkeys(range(0x80, 0xA0), 0xFFFD),
}

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


class SafeConsole(Console):
    """A Rich console that never writes a control character of the text it prints and prints tables
    whole without a terminal (module docstring)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # text segments only: Rich's own control segments (cursor moves of a live progress bar) stay as they are
        safe = (seg if seg.control or not seg.text else Segment(seg.text.translate(_PICTURES), seg.style) for seg in buffer)
        return super()._render_buffer(safe)

    @property
    def table_width(self) -> int:
        """The width to print a table at: the terminal's, else `LOG_WIDTH` (unless `COLUMNS` or a width is set)."""
        if self._width is None and not self.is_terminal and 'COLUMNS' not in self._environ:
            return LOG_WIDTH
        return self.width

    @contextlib.contextmanager
    def wide(self) -> Iterator[None]:
        """What is printed inside is laid out at `table_width` (Rich caps `print(width=...)` at the console's)."""
        saved, self._width = self._width, self.table_width
        try:
            yield
        finally:
            self._width = saved


def print_table(console: Console, table: object) -> None:
    """`table` printed whole: at a `SafeConsole`'s `table_width`, else at the console's width."""
    with console.wide() if isinstance(console, SafeConsole) else contextlib.nullcontext():
        console.print(table)


def make_console(*, stderr: bool = False) -> SafeConsole:
    """The console a command prints through (stdout, or stderr for progress and errors)."""
    return SafeConsole(stderr=stderr)


def shown(text: object) -> str:
    """Untrusted text for a place Rich reads as markup (a progress description, an f-string with markup):
    its markup escaped, its control characters written as escapes on one line (a query id stays one line)."""
    from sensei_eval.core.logsafe import escape_controls

    return escape(escape_controls(str(text)))


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
