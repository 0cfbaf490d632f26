"""`sensei-eval`: one command line, `judge`, `optimize`, `validate`, `calibrate`, `sample`, `view`, `serve` and
`cache` (stats, clear, prune).

Each command is the one its module in `sensei_eval.cli` defines, mounted here unchanged, so `python -m
sensei_eval.judge` and friends keep working; shared options and the judge-model set-up live in
`sensei_eval.cli.common`. Commands load when they run, not when the command line starts: `sensei-eval --help`
lists them from the table below without importing the judges, the service or DSPy (which alone takes
seconds), and a command whose extra is missing says which one when it is called.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer import _click as click
from typer.core import TyperCommand, TyperGroup

from sensei_eval.cli.base import make_app, quiet_third_party
from sensei_eval.core.extras import exit_on_missing_extra

__all__ = ('COMMANDS', 'app', 'main')

# name -> (module, attribute: a command function or a typer app of subcommands, one line of help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    'judge': ('sensei_eval.cli.judge', 'judge', 'Judge records, write one issue report per record.'),
    'optimize': ('sensei_eval.cli.optimize', 'optimize', "Improve an agent's prompt components with the judges."),
    'validate': ('sensei_eval.cli.validate', 'validate', 'Compare an old and a new prompt; gate on regressions.'),
    'calibrate': ('sensei_eval.cli.calibrate', 'main', 'Compare a judge run with labels (AUROC, F1, κ, ρ).'),
    'sample': ('sensei_eval.cli.sample', 'sample', 'Pick which traced runs get judged (rate, complaints, budget).'),
    'view': ('sensei_eval.cli.view', 'view', 'Write a run (or two, compared) as one HTML file.'),
    'serve': ('sensei_eval.cli.serve', 'serve', 'Run the scoring service (API, dashboard, WebSocket).'),
    'cache': ('sensei_eval.cli.cache', 'app', 'Judge cache: stats, clear, prune --older-than.'),
}


def load_command(name: str) -> click.Command:
    """The click command of `name`, importing its module now."""
    module, attribute, short_help = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    command: click.Command
    if isinstance(target, typer.Typer):
        command = typer.main.get_group(target)
    else:
        single = make_app()
        single.command(name, short_help=short_help)(target)
        command = typer.main.get_command(single)
    command.name = name
    return command


class _LazyCommand(TyperCommand):
    """A command listed by name and one line of help; its module is imported when it is invoked."""

    def __init__(self, name: str, short_help: str) -> None:
        super().__init__(name, short_help=short_help, help=short_help, add_help_option=False)

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        return load_command(self.name or '').make_context(info_name, args, parent=parent, **extra)


class _LazyGroup(TyperGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        return _LazyCommand(cmd_name, COMMANDS[cmd_name][2])


app = make_app(
    help='sensei-eval: judge AI agent runs, improve and gate prompts, calibrate judges, serve scoring.\n\n'
    '`python -m sensei_eval.judge` (and .optimize, .validate) run the same commands.',
    no_args_is_help=True,
    cls=_LazyGroup,
)


@app.callback()
def _root() -> None:
    """Silence third-party banners and warnings for every command."""
    quiet_third_party()


@exit_on_missing_extra
def main() -> None:
    app()
