"""Import the user's code by what they typed: a dotted module name or a path to a `.py` file.

`--prompts examples/docs_agent/prompts.py` and `--agent examples.docs_agent.agent:make_agent` should
reach the same modules a user's own code imports, so a `.py` path inside a package under the current
directory is imported by its dotted name (relative imports keep working, and the prompts module the
optimizer patches is the one the agent reads). The current directory is put on `sys.path`, as
`python -m` does, so project-root packages import from a checkout.

A `.py` path in a package elsewhere — typically the same file in a git worktree of an older commit,
`/tmp/wt/examples/docs_agent/prompts.py` — is imported as part of *its* package, under a private alias
of the package's top directory (`_sensei_pkg_<hash>.docs_agent.prompts`): its relative imports
(`from .tools import X`) reach its own tree, and it never replaces the checkout's module of the same
dotted name, so the old and the new prompt can be loaded side by side. Absolute imports inside it still
resolve on `sys.path` (the checkout). A `.py` file outside any package loads as a stand-alone module.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ('import_spec', 'load_fresh', 'public_name')

# private package alias -> the package directory it stands for
_ALIAS_ROOTS: dict[str, Path] = {}


def import_spec(spec: str) -> ModuleType:
    """The module named by `spec`; raises FileNotFoundError / ImportError (and whatever the module raises)."""
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    path = Path(spec)
    if path.suffix != '.py':
        return importlib.import_module(spec)
    if not path.is_file():
        raise FileNotFoundError(f'no such file: {path}')
    dotted = _dotted_name(path)
    if dotted is not None:
        return importlib.import_module(dotted)
    if (path.resolve().parent / '__init__.py').is_file():
        return _import_in_own_package(path.resolve())
    name = f'_sensei_user_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}'
    if name in sys.modules:
        return sys.modules[name]
    return _execute(path, name, keep=True)


def load_fresh(path: Path) -> ModuleType:
    """The `.py` file at `path` executed anew as a stand-alone module, not kept in `sys.modules` (a file
    written a moment ago, read back to check it: never a cached import of an earlier version)."""
    stamp = f'{path.resolve()}:{path.stat().st_mtime_ns}'
    return _execute(path, f'_sensei_fresh_{hashlib.sha256(stamp.encode()).hexdigest()[:12]}', keep=False)


def _execute(path: Path, name: str, *, keep: bool) -> ModuleType:
    """`path` executed as module `name`; kept in `sys.modules` when `keep` (its own imports of it resolve
    while it runs either way)."""
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f'{path} cannot be imported as a module')
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if not keep:
        sys.modules.pop(name, None)
    return module


def public_name(module_name: str) -> str:
    """The dotted name a module has in its own tree: a private package alias becomes the package's
    directory name again (`_sensei_pkg_<hash>.docs_agent.prompts` → `examples.docs_agent.prompts`)."""
    head, dot, rest = module_name.partition('.')
    root = _ALIAS_ROOTS.get(head)
    return module_name if root is None else f'{root.name}{dot}{rest}'


def _import_in_own_package(path: Path) -> ModuleType:
    """`path` imported as a submodule of its package, the package's top directory under a private alias."""
    root = path.parent
    while (root.parent / '__init__.py').is_file():
        root = root.parent
    alias = f'_sensei_pkg_{hashlib.sha256(str(root).encode()).hexdigest()[:12]}'
    if alias not in sys.modules:
        spec = importlib.util.spec_from_file_location(alias, root / '__init__.py', submodule_search_locations=[str(root)])
        if spec is None or spec.loader is None:
            raise ImportError(f'{root} cannot be imported as a package')
        package = importlib.util.module_from_spec(spec)
        sys.modules[alias] = package
        _ALIAS_ROOTS[alias] = root
        try:
            spec.loader.exec_module(package)
        except BaseException:
            sys.modules.pop(alias, None)
            raise
    inner = path.relative_to(root).with_suffix('').parts
    if not all(part.isidentifier() for part in inner):
        raise ImportError(f'{path}: {"/".join(inner)} is not an importable module path inside the package {root}')
    return importlib.import_module('.'.join((alias, *inner)))


def _dotted_name(path: Path) -> str | None:
    """`a/b/c.py` → `a.b.c` when it sits under the current directory and `a/`, `a/b/` are packages."""
    try:
        rel = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return None
    parts = rel.with_suffix('').parts
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        return None
    root = Path.cwd()
    for k in range(1, len(parts)):
        if not (root.joinpath(*parts[:k]) / '__init__.py').is_file():
            return None
    return '.'.join(parts)
