"""Prompt components: a system prompt as an ordered set of named sections.

Agents like sensei keep their system prompt in a `prompts.py`: one string constant per section
(`IDENTITY`, `CONFIDENCE_LEVELS`, `QUERY_DECOMPOSITION`, …) and a `build_prompt()` that joins them.
The optimizer changes one section at a time, so it needs the sections by name and a way to assemble a
full prompt from frozen sections plus one variant that is exactly what the agent's own `build_prompt()`
would produce.

`load_components(source)` reads:

* a Python module (a dotted name or a `.py` path). Its sections are the names in a module-level
  `COMPONENTS` (a list of names, or an ordered mapping name → text), else every module-level
  UPPER_CASE `str` constant in definition order. With a `build_prompt()`, assembling mirrors it: the
  module's constants are swapped for ours while `build_prompt()` runs (under a lock), then put back —
  so whatever the function adds (headers, tool lists, ordering) is kept. Without one, sections are
  joined with blank lines.
* YAML: `{separator: "\\n\\n", components: [{name, text}, …]}` or a plain mapping name → text.
* plain text (any other file): a single section `PROMPT`, for prompts that were never split.

`save_components` writes the YAML and a unified diff against the original, for a human to review;
nothing is ever written back into the agent's own module.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from .user_modules import import_spec

__all__ = (
    'PLAIN_TEXT_COMPONENT',
    'ComponentsError',
    'PromptComponents',
    'load_components',
    'save_components',
    'section_diff',
)

# The one section of a prompt read from a plain text file.
PLAIN_TEXT_COMPONENT = 'PROMPT'
_CONSTANT = re.compile(r'^[A-Z][A-Z0-9_]*$')
# build_prompt() reads module globals; two assemblies from different threads must not interleave.
_MODULE_LOCK = threading.Lock()


class ComponentsError(ValueError):
    """Prompt components could not be read: says which file and what is wrong."""


@dataclass(frozen=True)
class PromptComponents:
    """Named sections in prompt order, and how to assemble them into one system prompt."""

    sections: tuple[tuple[str, str], ...]
    source: str = '<memory>'
    separator: str = '\n\n'
    module: ModuleType | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        names = [n for n, _ in self.sections]
        if not names:
            raise ComponentsError(f'{self.source}: no prompt components found')
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ComponentsError(f'{self.source}: component name(s) used twice: {", ".join(dupes)}')

    def __deepcopy__(self, memo: dict[int, Any]) -> PromptComponents:
        return self  # immutable; the module it came from is shared, never copied

    @classmethod
    def from_mapping(cls, sections: Mapping[str, str], *, source: str = '<memory>', separator: str = '\n\n') -> PromptComponents:
        return cls(tuple(sections.items()), source=source, separator=separator)

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.sections]

    def as_dict(self) -> dict[str, str]:
        return dict(self.sections)

    def __getitem__(self, name: str) -> str:
        for n, text in self.sections:
            if n == name:
                return text
        raise KeyError(f'no component {name!r}; components: {", ".join(self.names)}')

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def with_text(self, name: str, text: str) -> PromptComponents:
        """A copy with one section replaced (the frozen rest plus one variant)."""
        self[name]  # raises for an unknown name
        return replace(self, sections=tuple((n, text if n == name else t) for n, t in self.sections))

    def build(self) -> str:
        """The full system prompt, assembled the way the source module's `build_prompt()` does."""
        build_prompt = getattr(self.module, 'build_prompt', None) if self.module is not None else None
        if not callable(build_prompt):
            return self.separator.join(text for _, text in self.sections)
        return _build_with_module(self.module, build_prompt, self.as_dict())  # type: ignore[arg-type]

    def to_yaml(self) -> str:
        data = {
            'source': self.source,
            'separator': self.separator,
            'components': [{'name': n, 'text': t} for n, t in self.sections],
        }
        return yaml.dump(data, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True, width=110)

    def diff(self, original: PromptComponents) -> str:
        """A unified diff, section by section, from `original` to this; empty when nothing changed."""
        chunks: list[str] = []
        for name in self.names:
            before = original.as_dict().get(name, '')
            after = self[name]
            if before == after:
                continue
            chunks.append(section_diff(name, before, after))
        return ''.join(chunks)


def section_diff(name: str, before: str, after: str) -> str:
    """A unified diff of one section's text, every line newline-terminated so the diff reads right."""

    def lines(text: str) -> list[str]:
        return [line + '\n' for line in text.split('\n')] if text else []

    return ''.join(difflib.unified_diff(lines(before), lines(after), fromfile=f'a/{name}', tofile=f'b/{name}'))


def load_components(source: str | Path) -> PromptComponents:
    """Prompt components from a Python module (dotted name or .py path), a YAML file or a plain text file."""
    text_source = str(source)
    path = Path(text_source)
    if path.suffix in ('.yaml', '.yml'):
        return _from_yaml(path)
    if path.suffix == '.py' or (not path.exists() and re.fullmatch(r'[A-Za-z_][\w.]*', text_source)):
        return _from_module(text_source)
    if not path.is_file():
        raise ComponentsError(f'{text_source}: no such file or module')
    try:
        text = path.read_text(encoding='utf-8-sig')
    except (OSError, UnicodeDecodeError) as e:
        raise ComponentsError(f'{path}: cannot read: {e}') from None
    if not text.strip():
        raise ComponentsError(f'{path}: the prompt file is empty')
    return PromptComponents(((PLAIN_TEXT_COMPONENT, text.rstrip('\n')),), source=str(path))


def save_components(components: PromptComponents, original: PromptComponents, out_dir: Path, stem: str = 'prompts') -> Path:
    """Write `<stem>.yaml` and `<stem>.diff` (against the original) into `out_dir`; returns the YAML path."""
    from .reports import write_json_atomic  # atomic text write; same helper as reports

    out_dir.mkdir(parents=True, exist_ok=True)
    yaml_path = out_dir / f'{stem}.yaml'
    write_json_atomic(yaml_path, components.to_yaml())
    write_json_atomic(out_dir / f'{stem}.diff', components.diff(original))
    return yaml_path


# ---------------------------------------------------------------------------------------------------
# Readers


def _from_yaml(path: Path) -> PromptComponents:
    try:
        data = yaml.safe_load(path.read_text(encoding='utf-8-sig'))
    except FileNotFoundError:
        raise ComponentsError(f'{path}: no such file') from None
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        where = f':{mark.line + 1}' if mark is not None else ''
        raise ComponentsError(f'{path}{where}: not valid YAML: {getattr(e, "problem", e)}') from None
    separator = '\n\n'
    if isinstance(data, dict) and 'components' in data:
        separator = str(data.get('separator', separator))
        items = data['components']
        if not isinstance(items, list):
            raise ComponentsError(f'{path}: field "components" must be a list of {{name, text}}')
        sections = []
        for k, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get('name'), str) or not isinstance(item.get('text'), str):
                raise ComponentsError(f'{path}: field "components[{k}]" needs a string "name" and a string "text"')
            sections.append((item['name'], item['text']))
    elif isinstance(data, dict):
        sections = []
        for name, text in data.items():
            if not isinstance(text, str):
                raise ComponentsError(f'{path}: field {name!r} must be a string (the section text)')
            sections.append((str(name), text))
    else:
        raise ComponentsError(f'{path}: expected a mapping of component name to text, or {{components: [...]}}')
    return PromptComponents(tuple(sections), source=str(path), separator=separator)


def _from_module(spec: str) -> PromptComponents:
    module = _import(spec)
    declared = getattr(module, 'COMPONENTS', None)
    sections: list[tuple[str, str]] = []
    if isinstance(declared, Mapping):
        for name, text in declared.items():
            if not isinstance(text, str):
                raise ComponentsError(f'{spec}: COMPONENTS[{name!r}] is not a string')
            sections.append((str(name), text))
    elif isinstance(declared, list | tuple):
        for name in declared:
            text = getattr(module, str(name), None)
            if not isinstance(text, str):
                raise ComponentsError(f'{spec}: COMPONENTS names {name!r}, which is not a string constant of the module')
            sections.append((str(name), text))
    elif declared is not None:
        raise ComponentsError(f'{spec}: COMPONENTS must be a list of names or a mapping name -> text')
    else:
        sections = [(name, value) for name, value in vars(module).items() if _CONSTANT.match(name) and isinstance(value, str)]
    return PromptComponents(tuple(sections), source=spec, module=module)


def _import(spec: str) -> ModuleType:
    try:
        return import_spec(spec)
    except FileNotFoundError:
        raise ComponentsError(f'{spec}: no such file') from None
    except Exception as e:
        raise ComponentsError(f'{spec}: importing the prompts module failed: {type(e).__name__}: {e}') from None


def _build_with_module(module: ModuleType, build_prompt: Callable[[], Any], texts: dict[str, str]) -> str:
    with _MODULE_LOCK:
        saved = {name: getattr(module, name) for name in texts if hasattr(module, name)}
        declared = getattr(module, 'COMPONENTS', None)
        try:
            for name, text in texts.items():
                setattr(module, name, text)
            if isinstance(declared, dict):
                setattr(module, 'COMPONENTS', {**declared, **texts})  # noqa: B010
            result = build_prompt()
        finally:
            for name, value in saved.items():
                setattr(module, name, value)
            if isinstance(declared, dict):
                setattr(module, 'COMPONENTS', declared)  # noqa: B010
    if not isinstance(result, str):
        raise ComponentsError(f'{module.__name__}.build_prompt() returned {type(result).__name__}, not a string')
    return result


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line sections as `|` blocks, so the saved YAML reads like the prompt it holds."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if not value.strip():
        return dumper.represent_scalar('tag:yaml.org,2002:str', value, style='"')  # a separator: "\n\n", not a block
    style = '|' if '\n' in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar('tag:yaml.org,2002:str', value, style=style)


_LiteralDumper.add_representer(str, _str_representer)
