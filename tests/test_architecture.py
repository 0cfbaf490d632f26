"""ARCHITECTURE.md stays true: every claim in it that code can check is checked here.

The map is read from the document itself (its folder tree, its backticked names, its "where a change
belongs" table), so a module renamed or moved without the map fails here, and so does a map entry naming
something that does not exist. Claims about behaviour (lazy command loading, where the preflight runs,
the error family) are checked by running the code.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import itertools
import json
import re
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / 'sensei_eval'
DOC = (ROOT / 'ARCHITECTURE.md').read_text(encoding='utf-8')

# Backticked words of the document that name something outside this package, or text that is not a
# name (a flag, an HTTP route, a command line, a file of a run folder): each has its own test below.
_EXTERNAL = {
    'Agent', 'asyncio.run', 'Dataset', 'LLMJudge', 'OnlineEvaluation', 'TYPE_CHECKING', 'lint-imports', 'pyproject.toml',
    'sensei_eval.engines',
}  # fmt: skip


def _tree() -> list[tuple[str, str]]:
    """(folder or file, its description) for each entry of the document's `sensei_eval/` tree."""
    block = DOC.split('```', 2)[1]
    entries: list[tuple[str, str]] = []
    for line in block.splitlines():
        m = re.match(r'^  (\S+)\s+(.*)$', line)
        if m:
            entries.append((m.group(1), m.group(2)))
        elif entries and line.startswith('    '):
            entries[-1] = (entries[-1][0], f'{entries[-1][1]} {line.strip()}')
    return entries


def _backticked() -> list[str]:
    return sorted({t for t in re.findall(r'`([^`\n]+)`', DOC)})


def _section(heading: str) -> str:
    start = DOC.index(heading)
    end = DOC.find('\n## ', start + len(heading))
    return DOC[start : end if end >= 0 else None]


@cache
def _defined_names() -> dict[str, list[str]]:
    """Every name the package defines (module level, and in classes), with the modules defining it."""
    names: dict[str, list[str]] = {}
    for path in PACKAGE.rglob('*.py'):
        module = '.'.join(path.relative_to(ROOT).with_suffix('').parts)
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.setdefault(node.name, []).append(module)
    return names


def _resolve(dotted: str) -> Any:
    """`pkg.mod.Attr.attr` resolved by import: the longest importable module prefix, then attributes."""
    parts = dotted.split('.')
    for cut in range(len(parts), 0, -1):
        try:
            target: Any = importlib.import_module('.'.join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise ModuleNotFoundError(dotted)


# ---------------------------------------------------------------------------------------------------
# The folder tree


def test_the_tree_lists_every_folder_of_the_package_and_only_those() -> None:
    listed = {name.rstrip('/') for name, _ in _tree() if name.endswith('/')}
    present = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / '__init__.py').exists()}
    assert listed == present, f'ARCHITECTURE.md lists {sorted(listed)}, sensei_eval/ has {sorted(present)}'


def test_the_files_the_tree_lists_exist() -> None:
    files = [name for name, _ in _tree() if not name.endswith('/')]
    assert files, 'the tree lists no file at all: the parser no longer reads it'
    for name in files:
        assert (PACKAGE / name).is_file(), name


def test_the_tree_is_the_import_linter_layer_order() -> None:
    """The folders are listed top layer first, as the `layers` contract in pyproject.toml orders them."""
    config = tomllib.loads((ROOT / 'pyproject.toml').read_text(encoding='utf-8'))
    contracts = config['tool']['importlinter']['contracts']
    layers = next(c['layers'] for c in contracts if c['type'] == 'layers')
    listed = [name.rstrip('/') for name, _ in _tree() if name.endswith('/')]
    assert [f'sensei_eval.{name}' for name in listed] == layers
    # "no two modules of one folder import each other, directly or round about"
    assert any(c['type'] == 'acyclic_siblings' and c['ancestors'] == ['sensei_eval'] for c in contracts)


def test_the_modules_a_folder_entry_names_exist() -> None:
    """Words of a folder's description that are the names of modules there (`runner`, `cache`, ...)."""
    for name, description in _tree():
        if not name.endswith('/'):
            continue
        folder = PACKAGE / name
        modules = {p.stem for p in folder.glob('*.py')} | {p.name for p in folder.iterdir() if p.is_dir()}
        words = re.findall(r'[a-z]+', description.lower())
        named = ({*words} | {f'{a}_{b}' for a, b in itertools.pairwise(words)}) & modules
        # the folder's description must name at least one real module, else it describes another folder
        assert named or name == 'data/', f'{name}: "{description}" names none of {sorted(modules)}'


def test_the_cli_entry_lists_every_command() -> None:
    from sensei_eval.cli.app import COMMANDS

    description = dict(_tree())['cli/']
    listed = re.search(r'every typer command: ([^;]+);', description)
    assert listed is not None
    assert [c.strip() for c in listed.group(1).split(',')] == list(COMMANDS)


# ---------------------------------------------------------------------------------------------------
# Every name the document gives


def _name_tokens() -> list[str]:
    out = []
    for token in _backticked():
        if token in _EXTERNAL or token.startswith(('-', 'python ')) or ' ' in token or token.endswith('.json'):
            continue
        out.append(token)
    return out


@pytest.mark.parametrize('token', _name_tokens())
def test_every_backticked_name_exists(token: str) -> None:
    """Paths (`judging/runner.py`, `service/dashboard/`) exist; `folder/module.Name.attr` and
    `core.errors.SenseiError` resolve by import; a bare `Name` is defined somewhere in the package."""
    name = token.removesuffix('()').removesuffix('(e)')
    if (name.startswith('.') or '/' in name or name.endswith(('.md', '.yml', '.toml'))) and (ROOT / name).exists():
        return  # a file of the project beside the package (`README.md`, `docs/verdicts.md`, `.ci/run`)
    if '/' in name:
        if name.endswith(('.py', '/')):
            base = ROOT if name.startswith('tests/') else PACKAGE
            assert (base / name).exists(), f'{token}: no such file or folder under {base.name}/'
            return
        module, _, attributes = name.partition('.')
        assert (PACKAGE / f'{module}.py').is_file() or (PACKAGE / module).is_dir(), token
        _resolve('sensei_eval.' + '.'.join([module.replace('/', '.'), *filter(None, [attributes])]))
    elif '.' in name:
        _resolve(f'sensei_eval.{name}')
    elif name == 'inconclusive':  # a judge result's status, not a name
        from sensei_eval.core.reports import JudgeResult

        assert 'inconclusive' in str(JudgeResult.model_fields['status'].annotation)
    else:
        assert name in _defined_names(), f'{token}: defined nowhere in sensei_eval/'


def test_the_external_names_are_what_the_document_says() -> None:
    from pydantic_ai import Agent
    from pydantic_evals import Dataset
    from pydantic_evals.evaluators import LLMJudge
    from pydantic_evals.online_capability import OnlineEvaluation

    assert Agent and LLMJudge and OnlineEvaluation and Dataset
    config = (ROOT / 'pyproject.toml').read_text(encoding='utf-8')
    assert '[tool.importlinter]' in config and 'import-linter' in config  # `lint-imports`
    # the record engine a judge's `evaluate()` runs, injected by name: the entry point names a real function
    engines = tomllib.loads(config)['project']['entry-points']['sensei_eval.engines']
    assert _resolve(engines['record'].replace(':', '.')).__name__ == 'evaluate_record'
    from sensei_eval.evaluators.base import record_engine
    from sensei_eval.judging.evaluation import evaluate_record

    assert record_engine() is evaluate_record
    from sensei_eval.evaluators import base

    # the name it falls back on (a checkout not installed, an editable install older than the entry point)
    assert engines['record'] == base._OWN_ENGINE


def test_a_judge_runs_its_engine_without_the_entry_point_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from sensei_eval.evaluators import base
    from sensei_eval.judging.evaluation import evaluate_record

    monkeypatch.setattr(importlib.metadata, 'entry_points', lambda **_: ())
    monkeypatch.setattr(base, '_engine', None)
    assert base.record_engine() is evaluate_record


def test_the_where_a_change_belongs_table_names_real_files() -> None:
    table = _section('Where a change belongs')
    rows = [line for line in table.splitlines() if line.startswith('|') and not line.startswith('|---')][1:]
    assert len(rows) >= 5
    for row in rows:
        where = row.strip('|').split('|')[1]
        paths = [p for p in re.findall(r'`([^`]+)`', where) if '/' in p]
        assert paths, row
        for path in paths:
            assert (PACKAGE / path).exists() or (ROOT / path).exists(), f'{row}: {path} does not exist'
        # the names a row gives in parentheses are defined in the file it names
        for names in re.findall(r'`([^`]+\.py)` \(([^)]*)\)', where):
            module = 'sensei_eval.' + names[0].removesuffix('.py').replace('/', '.')
            for name in re.findall(r'`(\w+)`', names[1]):
                assert hasattr(importlib.import_module(module), name), f'{module}.{name}'


# ---------------------------------------------------------------------------------------------------
# Claims about behaviour


def test_the_root_command_line_imports_a_commands_module_only_when_it_runs() -> None:
    code = (
        'import json, sys\n'
        'from typer.testing import CliRunner\n'
        'from sensei_eval.cli.app import COMMANDS, app\n'
        'loaded = set(sys.modules)\n'
        'result = CliRunner().invoke(app, ["--help"])\n'
        'print(json.dumps({"import": sorted(loaded), "help": sorted(sys.modules), "code": result.exit_code,\n'
        '                  "commands": sorted({m for m, _, _ in COMMANDS.values()})}))\n'
    )
    out = json.loads(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    assert out['code'] == 0
    for phase in ('import', 'help'):
        loaded = [m for m in out['commands'] if m in out[phase]]
        assert not loaded, f'after {phase}: command modules loaded before they run: {loaded}'
        heavy = [m for m in ('sensei_eval.evaluators.registry', 'sensei_eval.service.api', 'dspy') if m in out[phase]]
        assert not heavy, f'after {phase}: {heavy}'


def test_python_m_sensei_eval_judge_runs_the_judge_command() -> None:
    import sensei_eval.judge as module

    source = Path(module.__file__ or '').read_text(encoding='utf-8')
    assert 'from sensei_eval.cli.judge import main' in source and "__name__ == '__main__'" in source


def test_the_judge_command_has_the_flags_the_document_names() -> None:
    """The flags Path 1 (a record through `judge`) names are the judge command's."""
    from sensei_eval.cli.app import load_command

    options = {opt for param in load_command('judge').params for opt in getattr(param, 'opts', [])}
    path_1 = set(re.findall(r'`([^`\n]+)`', _section('## Path 1')))
    for flag in sorted({t for t in path_1 if t.startswith('--')}):
        assert flag in options, f'{flag} is not an option of `sensei-eval judge`'


def test_the_preflight_runs_in_its_own_event_loop_before_judging() -> None:
    """ARCHITECTURE.md: `preflight` runs in its own short `asyncio.run`, finished before the judging loop
    starts (so nothing of the judging loop may be created in it)."""
    from sensei_eval.models.judge_model import JudgeModel, ModelChoice, open_judge_model

    assert 'own short `asyncio.run`' in _section('Path 1')
    seen: list[asyncio.AbstractEventLoop] = []

    async def check(model: JudgeModel) -> None:
        seen.append(asyncio.get_running_loop())

    def resolve(*args: Any, **kwargs: Any) -> JudgeModel:
        return JudgeModel('test', 'test')

    open_judge_model(ModelChoice(), resolve=resolve, check=check)  # what run_dataset and every command call
    assert len(seen) == 1 and seen[0].is_closed()


def test_the_errors_are_one_family() -> None:
    from sensei_eval.core import errors

    named = re.search(r'a `core\.errors\.SenseiError` \(([^)]*)\)', DOC)
    assert named is not None
    for name in re.findall(r'`(\w+)`', named.group(1)):
        assert issubclass(getattr(errors, name), errors.SenseiError), name
    assert callable(errors.describe_error)


def test_the_run_folder_holds_what_the_document_says() -> None:
    from sensei_eval.judging import run_folder

    assert run_folder.SUMMARY_FILE == 'summary.json'
    assert run_folder.RECORDS_DIR == 'records'


def test_the_scoring_routes_exist() -> None:
    from sensei_eval.service.routers import scoring

    routes = {(method, re.sub(r'\{[^}]*\}', '{}', route.path)) for route in scoring.router.routes for method in route.methods}  # type: ignore[attr-defined]
    fast = scoring.FAST_GET_SCORE if hasattr(scoring, 'FAST_GET_SCORE') else None
    if fast is not None:
        routes |= {(m, re.sub(r'\{[^}]*\}', '{}', fast.path)) for m in fast.methods or ()}
    for method, path in re.findall(r'`(GET|POST|PUT|DELETE) (/[^`]+)`', DOC):
        assert (method, re.sub(r'\{[^}]*\}', '{}', path)) in routes, f'{method} {path}'


def _imports(module: str) -> set[str]:
    tree = ast.parse((ROOT / (module.replace('.', '/') + '.py')).read_text(encoding='utf-8'))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f'{node.module}.{a.name}' for a in node.names}
    return found


@pytest.mark.parametrize(
    ('claim', 'module', 'imported'),
    [
        ('the judge cache is SQLite', 'sensei_eval.judging.cache', 'sqlite3'),
        ('judges call behind RetryingModel', 'sensei_eval.models.judge_model', 'sensei_eval.models.retry.RetryingModel'),
        ('the worker hears the investigation judge', 'sensei_eval.service.scoring', 'sensei_eval.evaluators.investigation'),
        ('every job goes through the runner', 'sensei_eval.service.scoring', 'sensei_eval.judging.runner.judge_records'),
        ('through the circuit breaker', 'sensei_eval.service.scoring', 'sensei_eval.service.reliability.CircuitBreaker'),
        ('a judge fits its prompt with models/fitting', 'sensei_eval.evaluators.base', 'sensei_eval.models.fitting'),
        ('and tells inconclusive verdicts apart', 'sensei_eval.evaluators.base', 'sensei_eval.evaluators.inconclusive'),
    ],
)
def test_the_paths_use_the_modules_the_document_names(claim: str, module: str, imported: str) -> None:
    assert imported in _imports(module), f'{claim}: {module} does not import {imported}'
