"""docs/cli.md's options are the commands' own `--help`: a flag added, renamed, re-described or given another
default without regenerating the page (`python scripts/cli_reference.py`) fails here.

The generated part is rendered again from the click commands `sensei-eval` mounts and compared with what is
committed between the page's markers; the hand-written parts around it (exit codes, retries, the judge cache)
are not touched by the script.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from sensei_eval.cli.app import COMMANDS, app, load_command

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location('cli_reference', ROOT / 'scripts' / 'cli_reference.py')
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault('cli_reference', module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def script() -> ModuleType:
    return _script()


@pytest.fixture(scope='module')
def generated(script: ModuleType) -> str:
    return str(script.render())


def test_the_committed_options_are_what_the_commands_say(script: ModuleType, generated: str) -> None:
    committed = script.committed(script.PAGE.read_text(encoding='utf-8'))
    assert committed == generated, 'docs/cli.md is out of date: run `python scripts/cli_reference.py`'


def test_every_command_and_every_visible_option_is_on_the_page(generated: str) -> None:
    """Not a copy of a stale render: each command's options, read from click, appear with their metavars."""
    for name in COMMANDS:
        command = load_command(name)
        assert f'### `sensei-eval {name}`' in generated
        ctx = typer.Context(command, info_name=f'sensei-eval {name}')
        for param in command.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and record[0] != '--help':
                assert f'| `{record[0]}` |' in generated, (name, record[0])


def test_the_page_shows_what_help_prints(generated: str) -> None:
    """The rendered row of an option says what `sensei-eval judge --help` prints for it, default included."""
    shown = CliRunner().invoke(app, ['judge', '--help'], env={'COLUMNS': '400'}).output
    assert '--max-record-bytes' in shown and '16777216' in shown
    row = next(line for line in generated.splitlines() if line.startswith('| `--max-record-bytes BYTES`'))
    assert 'default: 16777216' in row


def test_a_new_flag_without_docs_is_caught(script: ModuleType, generated: str) -> None:
    """Add an option to a command (as a developer would) and the comparison no longer holds."""
    tiny = typer.Typer()

    @tiny.command()
    def _new(brand_new: Annotated[bool, typer.Option('--brand-new', help='A flag nobody documented.')] = False) -> None:
        """Only here to make an option the way every command of ours does."""

    command = load_command('view')
    command.params.append(typer.main.get_command(tiny).params[0])
    changed = script.render_command(command, 'sensei-eval view')
    assert '`--brand-new`' in changed
    assert changed not in generated


def test_help_text_cannot_break_the_table(script: ModuleType) -> None:
    """A pipe, an asterisk or an angle bracket in a help text stays a character, not table or HTML markup;
    `code` in a help text stays code."""
    cell = script._cell('one | two *bold* <tag> [x>=1] `a_b|c`')
    assert cell == r'one \| two \*bold\* \<tag\> \[x\>=1\] `a_b|c`'
