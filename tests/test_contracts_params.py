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
    """(module path, function) of every function `__main__.py` mounts as a command: `app.command(...)(name)`."""
    main = root / '__main__.py'
    if not main.exists():
        return set()
    tree = ast.parse(main.read_text('utf-8'))
    imported = {
        alias.asname or alias.name: (node.module.removeprefix('sensei_eval.').replace('.', '/') + '.py', alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith('sensei_eval.')
        for alias in node.names
    }
    return {
        imported[node.args[0].id]
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Call) and _is_command_call(node.func)
        and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in imported
    }  # fmt: skip


def _is_command_call(call: ast.Call) -> bool:
    return ast.unparse(call.func) in COMMAND_DECORATORS


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


def test_the_commands_main_mounts_are_found() -> None:
    assert {('cli/judge.py', 'judge'), ('cli/validate.py', 'validate'), ('cli/calibrate.py', 'main')} <= mounted_commands()


def test_the_check_sees_a_long_signature_and_spares_commands(tmp_path: Path) -> None:
    (tmp_path / 'mod.py').write_text(
        'def long(a, b, c, d, e, f, g, h, i): ...\n'
        'class K:\n    def method(self, a, b, c, d, e, f, g, h): ...\n'
        '@app.command()\ndef cmd(a, b, c, d, e, f, g, h, i): ...\n'
        'async def star(a, *args, b, c, d, e, f, g, **kw): ...\n'
    )
    (tmp_path / '__main__.py').write_text("from sensei_eval.mod import long as _long\napp.command('long')(_long)\n")
    assert too_many(tmp_path) == ['mod.py:6 star (9 parameters)']
