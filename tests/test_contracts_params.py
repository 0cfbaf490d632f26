"""No function of the package takes more than 8 parameters: a run's options travel as one object
(`JudgeRunOptions`, `AgentRuns`, `ValidateOptions`, …), not as a dozen loose arguments. Typer commands
are the exception: their signature is the command line."""

from __future__ import annotations

import ast
from pathlib import Path

import sensei_eval

MAX_PARAMS = 8
PACKAGE = Path(sensei_eval.__file__).parent
# Typer decorators that make a function a command: its parameters are the command's options.
COMMAND_DECORATORS = {'app.command', 'app.callback'}


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return [n for n in names if n not in ('self', 'cls')]


def _is_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) in COMMAND_DECORATORS:
            return True
    return False


def mounted_commands(root: Path = PACKAGE) -> set[tuple[str, str]]:
    """(module path, function) of every command the root command line mounts from its table
    (`sensei_eval.cli.app.COMMANDS`: name -> module, attribute, help); typer sub-apps aside."""
    if root != PACKAGE:
        return set()
    from sensei_eval.cli.app import COMMANDS

    return {
        (module.removeprefix('sensei_eval.').replace('.', '/') + '.py', attribute)
        for module, attribute, _ in COMMANDS.values()
        if attribute != 'app'
    }


def too_many(root: Path = PACKAGE) -> list[str]:
    """Every function under `root` with more than `MAX_PARAMS` parameters (self/cls not counted), typer commands aside."""
    mounted = mounted_commands(root)
    found = []
    for path in sorted(root.rglob('*.py')):
        where = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text('utf-8'), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            count = len(_params(node))
            if count > MAX_PARAMS and not _is_command(node) and (where, node.name) not in mounted:
                found.append(f'{where}:{node.lineno} {node.name} ({count} parameters)')
    return found


def test_no_function_takes_more_than_eight_parameters() -> None:
    assert too_many() == []


def test_the_commands_the_root_mounts_are_found() -> None:
    mounted = mounted_commands()
    assert {('cli/judge.py', 'judge'), ('cli/validate.py', 'validate'), ('cli/calibrate.py', 'main')} <= mounted
    assert ('cli/serve.py', 'serve') in mounted


def test_the_check_sees_a_long_signature_and_spares_commands(tmp_path: Path) -> None:
    (tmp_path / 'mod.py').write_text(
        'def long(a, b, c, d, e, f, g, h, i): ...\n'
        'class K:\n    def method(self, a, b, c, d, e, f, g, h): ...\n'
        '@app.command()\ndef cmd(a, b, c, d, e, f, g, h, i): ...\n'
        'async def star(a, *args, b, c, d, e, f, g, **kw): ...\n'
    )
    assert too_many(tmp_path) == ['mod.py:1 long (9 parameters)', 'mod.py:6 star (9 parameters)']
