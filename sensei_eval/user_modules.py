"""Import the user's code by what they typed: a dotted module name or a path to a `.py` file.

`--prompts examples/docs_agent/prompts.py` and `--agent examples.docs_agent.agent:make_agent` should
reach the same modules a user's own code imports, so a `.py` path inside a package under the current
directory is imported by its dotted name (relative imports keep working, and the prompts module the
optimizer patches is the one the agent reads). Other paths load as stand-alone modules. The current
directory is put on `sys.path`, as `python -m` does, so project-root packages import from a checkout.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ('import_spec',)


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
    name = f'_sensei_user_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}'
    if name in sys.modules:
        return sys.modules[name]
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
    return module


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
