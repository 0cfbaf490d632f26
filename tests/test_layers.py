"""The package's shape: the root holds only the layer folders, and the command line starts light."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import sensei_eval

ROOT = Path(sensei_eval.__file__).parent
LAYERS = {'core', 'models', 'evaluators', 'judging', 'agents', 'production', 'validate', 'optimize', 'service', 'cli'}


def test_the_root_holds_only_the_layer_folders() -> None:
    # judge.py stays for `python -m sensei_eval.judge` (the README's main job), calibrate.py for
    # `python -m sensei_eval.calibrate` (issue 31: like judge, optimize and validate); data/ is the shipped sample
    files = {p.name for p in ROOT.iterdir() if p.suffix == '.py'}
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and p.name != '__pycache__'}
    assert files == {'__init__.py', '__main__.py', 'judge.py', 'calibrate.py'}
    assert folders == LAYERS | {'data'}
    assert (ROOT / 'judge.py').read_text().count('\n') < 10
    assert (ROOT / 'calibrate.py').read_text().count('\n') < 10


def _imported_by(*args: str) -> set[str]:
    """Module names imported by `python -X importtime ARGS` (importtime writes one line per module to stderr)."""
    proc = subprocess.run([sys.executable, '-X', 'importtime', *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.rsplit('|', 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith('import time:')}


def test_help_lists_every_command_without_importing_them() -> None:
    modules = _imported_by('-m', 'sensei_eval', '--help')
    assert not {m for m in modules if m.split('.')[0] in ('dspy', 'pydantic_ai', 'pydantic_evals', 'sqlalchemy', 'ray')}
    assert not {m for m in modules if m.startswith(('sensei_eval.cli.judge', 'sensei_eval.service', 'sensei_eval.evaluators'))}
    out = subprocess.run([sys.executable, '-m', 'sensei_eval', '--help'], capture_output=True, text=True, timeout=120).stdout
    for command in ('judge', 'optimize', 'validate', 'calibrate', 'sample', 'view', 'serve', 'cache'):
        assert f'  {command} ' in out


def test_a_command_still_loads_when_called() -> None:
    args = [sys.executable, '-m', 'sensei_eval', 'cache', 'stats', '--help']
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and 'sensei_eval cache stats' in proc.stdout and '--dir' in proc.stdout


def _imports_cli(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith('sensei_eval.cli'):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == 'sensei_eval' and any(a.name == 'cli' for a in node.names):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith('sensei_eval.cli') for a in node.names):
            return True
    return False


# Test modules that import the CLI to test its structure rather than to run a command: the map's claims about
# it, its help against the docs, which modules each command mounts, how light its start is.
_CLI_STRUCTURE_TESTS = {'test_architecture.py', 'test_docs.py', 'test_contracts_params.py', 'test_layers.py'}


def test_only_tests_of_the_cli_import_it() -> None:
    """A run is the library's (`judging.run.run_dataset`, `judging.record.judge_record`): a test module imports
    `sensei_eval.cli` only to test a command (it runs one, with typer's CliRunner or in a subprocess) or the
    CLI's structure, and never to reach into a run (no test patches a command module's model resolution)."""
    tests = Path(__file__).parent
    offenders = []
    for path in sorted(tests.rglob('*.py')):
        source = path.read_text(encoding='utf-8')
        if not _imports_cli(ast.parse(source)) or path.name in _CLI_STRUCTURE_TESTS:
            continue
        runs_a_command = 'CliRunner' in source or 'subprocess' in source or '.app(' in source
        reaches_in = re.search(r"setattr\((judge|validate|optimize|calibrate)_cli, '(resolve_model|preflight)'", source)
        if not runs_a_command or reaches_in:
            offenders.append(str(path.relative_to(tests)))
    assert offenders == [], f'these import sensei_eval.cli without testing a command: {offenders}'
