"""Prompt components: a system prompt as an ordered set of named sections.

Agents like sensei keep their system prompt in a `prompts.py`: one string constant per section
(`IDENTITY`, `CONFIDENCE_LEVELS`, `QUERY_DECOMPOSITION`, …) and a `build_prompt()` that joins them.
The optimizer changes one section at a time, so it needs the sections by name and a way to assemble a
full prompt from frozen sections plus one variant that is exactly what the agent's own `build_prompt()`
would produce.

`load_components(source)` reads:

* a Python module (a dotted name or a `.py` path; a path in a package elsewhere, e.g. a git worktree,
  is imported as part of its own package, see `user_modules`). Its sections are the names in a
  module-level `COMPONENTS` (a list of names, or an ordered mapping name → text), else every
  module-level UPPER_CASE `str` constant in definition order. With a `build_prompt()`, assembling
  mirrors it: the module's constants are swapped for ours while `build_prompt()` runs (under a lock),
  then put back — so whatever the function adds (headers, tool lists, ordering) is kept. Without one,
  sections are joined with blank lines.
* YAML: `{separator, template, prefix, suffix, components: [{name, text}, …]}` (the assembly fields are
  optional: `prefix + separator.join(template(name, text)) + suffix`, `template` holding `{name}` and
  `{text}`, default `"{text}"`), or a plain mapping name → text.
* plain text (any other file): a single section `PROMPT`, for prompts that were never split.

`save_components` writes the optimized prompt in the input's own format, so loading what it wrote
builds exactly the prompt that was evaluated: a prompts module becomes a patched copy of its source
(`prompts.py`: only the changed component constants are replaced, found with `ast`; `build_prompt()`
and everything else kept; relative imports made absolute so the copy imports from anywhere); YAML stays
YAML with its assembly; a plain text prompt stays text. A module whose `build_prompt()` is a plain
"template per section, joined" also gets a `prompts.yaml` recording that assembly. Every save is
checked by loading it back and building it; a `prompts.diff` against the original is written for
review. Nothing is ever written back into the agent's own module.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import re
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import yaml

from sensei_eval.core.config import load_config_file
from sensei_eval.core.errors import InputError, describe_error
from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.user_modules import import_spec, load_fresh, public_name

__all__ = (
    'PLAIN_TEXT_COMPONENT',
    'Assembly',
    'ComponentsError',
    'PromptComponents',
    'load_components',
    'patched_module_source',
    'save_components',
    'saved_prompt_path',
    'section_diff',
)

# The one section of a prompt read from a plain text file.
PLAIN_TEXT_COMPONENT = 'PROMPT'
_CONSTANT = re.compile(r'^[A-Z][A-Z0-9_]*$')
# build_prompt() reads module globals; two assemblies from different threads must not interleave.
_MODULE_LOCK = threading.Lock()


SourceFormat = Literal['module', 'yaml', 'text', 'memory']
# what `save_components` writes first, by the input's format
_SAVED_SUFFIX: dict[str, str] = {'module': '.py', 'yaml': '.yaml', 'text': '.txt', 'memory': '.yaml'}


class ComponentsError(InputError):
    """Prompt components could not be read: says which file and what is wrong."""


@dataclass(frozen=True)
class Assembly:
    """How sections become one prompt without a `build_prompt()`:
    `prefix + separator.join(template with {name} and {text} filled in) + suffix`."""

    separator: str = '\n\n'
    template: str = '{text}'
    prefix: str = ''
    suffix: str = ''

    def __post_init__(self) -> None:
        if self.template.count('{text}') != 1:
            raise ComponentsError(f'the template {self.template!r} must hold "{{text}}" exactly once')

    def build(self, sections: tuple[tuple[str, str], ...]) -> str:
        before, _, after = self.template.partition('{text}')
        parts = (before.replace('{name}', n) + t + after.replace('{name}', n) for n, t in sections)
        return self.prefix + self.separator.join(parts) + self.suffix

    def fields(self) -> dict[str, str]:
        """The YAML fields that differ from the defaults."""
        default = Assembly()
        return {k: v for k, v in vars(self).items() if k == 'separator' or v != getattr(default, k)}


@dataclass(frozen=True)
class PromptComponents:
    """Named sections in prompt order, and how to assemble them into one system prompt."""

    sections: tuple[tuple[str, str], ...]
    source: str = '<memory>'
    separator: str = '\n\n'
    module: ModuleType | None = field(default=None, compare=False, repr=False)
    template: str = '{text}'
    prefix: str = ''
    suffix: str = ''
    source_format: SourceFormat = field(default='memory', compare=False)

    def __post_init__(self) -> None:
        names = [n for n, _ in self.sections]
        if not names:
            raise ComponentsError(f'{self.source}: no prompt components found')
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ComponentsError(f'{self.source}: component name(s) used twice: {", ".join(dupes)}')
        try:
            self.assembly  # noqa: B018 (checks the template)
        except ComponentsError as e:
            raise ComponentsError(f'{self.source}: {e}') from None

    @property
    def assembly(self) -> Assembly:
        return Assembly(self.separator, self.template, self.prefix, self.suffix)

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
        build_prompt = self._build_prompt()
        if build_prompt is None:
            return self.assembly.build(self.sections)
        return _build_with_module(self.module, build_prompt, self.as_dict())  # type: ignore[arg-type]

    def _build_prompt(self) -> Callable[[], Any] | None:
        build_prompt = getattr(self.module, 'build_prompt', None) if self.module is not None else None
        return build_prompt if callable(build_prompt) else None

    def yaml_assembly(self) -> Assembly | None:
        """The assembly YAML can record for these components: their own, or — for a module with a
        `build_prompt()` — the template/separator it turns out to use (found by building with marker texts,
        then checked on the real texts); None when `build_prompt()` does more than that."""
        build_prompt = self._build_prompt()
        if build_prompt is None:
            return self.assembly
        try:
            assembly = _infer_assembly(self.names, lambda texts: _build_with_module(self.module, build_prompt, texts))  # type: ignore[arg-type]
            if assembly is None or assembly.build(self.sections) != self.build():
                return None
        except Exception:  # a build_prompt() that refuses marker texts has no assembly YAML could record
            return None
        return assembly

    def to_yaml(self) -> str:
        """YAML that loads back into components building the same prompt; `ComponentsError` when the
        module's `build_prompt()` assembles in a way YAML can't record (save the patched module instead)."""
        assembly = self.yaml_assembly()
        if assembly is None:
            raise ComponentsError(
                f'{self.source}: its build_prompt() does more than put each section in one template and join them, '
                'so YAML cannot record how the prompt is built; save it as a patched copy of the module'
            )
        data: dict[str, Any] = {'source': self.source, **assembly.fields()}
        data['components'] = [{'name': n, 'text': t} for n, t in self.sections]
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
    return PromptComponents(((PLAIN_TEXT_COMPONENT, text.rstrip('\n')),), source=str(path), source_format='text')


def save_components(components: PromptComponents, original: PromptComponents, out_dir: Path, stem: str = 'prompts') -> Path:
    """Write the optimized `components` in `original`'s format into `out_dir` (`<stem>.py`, `.yaml` or
    `.txt`, see the module docstring), plus `<stem>.diff` against `original`; returns the primary file.

    What is written is loaded back and built: if the patched module does not give `components.build()`
    exactly (it cannot be imported from `out_dir`, or its `build_prompt()` reads something the patch can't
    reach), it is not kept and a warning says so; the YAML copy, when the assembly allows one, else the
    exact prompt as `<stem>.txt`, is returned instead."""
    out_dir.mkdir(parents=True, exist_ok=True)
    expected = components.build()
    write_text_atomic(out_dir / f'{stem}.diff', components.diff(original))
    primary: Path | None = None
    if original.source_format == 'module' and original.module is not None and getattr(original.module, '__file__', None):
        path = out_dir / f'{stem}.py'
        try:
            write_text_atomic(path, patched_module_source(components, original))
            if _load_fresh(path).build() == expected:
                primary = path
            else:
                problem = 'building the patched copy gives another prompt'
        except Exception as e:  # the copy failed to parse or import: say so, keep the exact text
            problem = describe_error(e)
        yaml_path = out_dir / f'{stem}.yaml'
        if (assembly := components.yaml_assembly()) is not None:
            write_text_atomic(yaml_path, _yaml_of(components, assembly))
        if primary is None:
            path.unlink(missing_ok=True)
            primary = yaml_path if assembly is not None else None
            exact = primary.name if primary is not None else f'{stem}.txt'
            warnings.warn(
                f'{original.source}: could not write a patched copy ({problem}); the exact prompt is in {exact}', stacklevel=2
            )
    elif original.source_format == 'text' and components.names == [PLAIN_TEXT_COMPONENT]:
        primary = out_dir / f'{stem}.txt'
        write_text_atomic(primary, components[PLAIN_TEXT_COMPONENT] + '\n')
    else:
        assembly = components.yaml_assembly()
        if assembly is not None:
            primary = out_dir / f'{stem}.yaml'
            write_text_atomic(primary, _yaml_of(components, assembly))
    if primary is None:
        primary = out_dir / f'{stem}.txt'
        write_text_atomic(primary, expected + '\n')
    return primary


def saved_prompt_path(out_dir: Path, stem: str = 'prompts') -> Path | None:
    """The primary file `save_components` wrote into `out_dir`: the patched module, else YAML, else text."""
    for suffix in ('.py', '.yaml', '.txt'):
        if (path := out_dir / f'{stem}{suffix}').is_file():
            return path
    return None


def patched_module_source(components: PromptComponents, original: PromptComponents) -> str:
    """`original`'s module source with the constants of the components that changed set to their new text.

    Each changed component's last module-level assignment (`NAME = …`, `NAME: str = …`, or its entry in a
    literal `COMPONENTS = {...}` mapping) gets a string literal in place of its value expression; a
    component assigned no such way is appended at the end (`NAME = …`, or `COMPONENTS['NAME'] = …` when the
    module's COMPONENTS is a mapping). Relative imports become absolute, so the copy
    imports from wherever it is saved. Everything else — comments, `build_prompt()`, other constants — is
    kept byte for byte."""
    module = original.module
    file = getattr(module, '__file__', None)
    if module is None or not file:
        raise ComponentsError(f'{original.source}: not read from a module file, so there is no source to patch')
    source = Path(file).read_text(encoding='utf-8')
    tree = ast.parse(source, filename=file)
    before = original.as_dict()
    changed = {n: t for n, t in components.sections if before.get(n) != t}
    targets: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        if name == 'COMPONENTS' and isinstance(value, ast.Dict):
            for key, item in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value in changed:
                    targets[key.value] = item
        elif name in changed:
            targets[name] = value
    edits: list[tuple[int, int, str]] = []
    lines = _line_offsets(source)
    for name, value_node in targets.items():
        span = (
            _offset(lines, value_node.lineno, value_node.col_offset),
            _offset(lines, value_node.end_lineno, value_node.end_col_offset),
        )
        edits.append((*span, _py_literal(changed[name])))
    package = public_name(module.__package__ or '')
    for imp in ast.walk(tree):
        if isinstance(imp, ast.ImportFrom) and imp.level > 0:
            target = importlib.util.resolve_name('.' * imp.level + (imp.module or ''), package)
            names = ', '.join(a.name + (f' as {a.asname}' if a.asname else '') for a in imp.names)
            span = (_offset(lines, imp.lineno, imp.col_offset), _offset(lines, imp.end_lineno, imp.end_col_offset))
            edits.append((*span, f'from {target} import {names}'))
    data = source.encode('utf-8')
    for start, end, text in sorted(edits, reverse=True):
        data = data[:start] + text.encode('utf-8') + data[end:]
    patched = data.decode('utf-8')
    missing = [n for n in changed if n not in targets]
    if missing:
        patched = patched.rstrip('\n') + '\n\n# components optimized by sensei-eval that are not assigned above\n'
        in_mapping = isinstance(getattr(module, 'COMPONENTS', None), Mapping)  # the texts live in COMPONENTS itself
        patched += ''.join(
            f'COMPONENTS[{n!r}] = {_py_literal(changed[n])}\n' if in_mapping else f'{n} = {_py_literal(changed[n])}\n'
            for n in missing
        )
    header = f'# Optimized copy of {original.source} written by sensei-eval: only changed component constants differ.\n'
    return header + patched


# ---------------------------------------------------------------------------------------------------
# Writers


def _yaml_of(components: PromptComponents, assembly: Assembly) -> str:
    data: dict[str, Any] = {'source': components.source, **assembly.fields()}
    data['components'] = [{'name': n, 'text': t} for n, t in components.sections]
    return yaml.dump(data, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True, width=110)


def _py_literal(text: str) -> str:
    """A Python string literal for `text`: triple-quoted when that reads as the text itself, else repr."""
    if '\n' in text and '\\' not in text and '"""' not in text and not text.endswith('"') and '\r' not in text:
        literal = f'"""{text}"""'
        try:
            if ast.literal_eval(literal) == text:
                return literal
        except (SyntaxError, ValueError):
            pass
    return repr(text)


def _line_offsets(source: str) -> list[int]:
    """Byte offset of each line start (ast columns are UTF-8 byte offsets)."""
    offsets = [0]
    for line in source.encode('utf-8').splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


def _offset(lines: list[int], lineno: int | None, col: int | None) -> int:
    assert lineno is not None and col is not None
    return lines[lineno - 1] + col


def _load_fresh(path: Path) -> PromptComponents:
    """Components of the module file at `path`, executed anew (not a cached import: `user_modules.load_fresh`)."""
    return _components_of(load_fresh(path), str(path))


def _infer_assembly(names: list[str], build: Callable[[dict[str, str]], str]) -> Assembly | None:
    """The `Assembly` a `build_prompt()` follows, read off its output for marker texts; None if it has none."""
    markers = {n: f'\x00{k}\x00' for k, n in enumerate(names)}
    out = build(markers)
    spots = [out.find(m) for m in markers.values()]
    if any(out.count(m) != 1 for m in markers.values()) or spots != sorted(spots):
        return None
    ends = [p + len(m) for p, m in zip(spots, markers.values(), strict=True)]
    head = out[: spots[0]].replace(names[0], '{name}')
    suffix = out[ends[-1] :]
    gaps = {out[ends[k - 1] : spots[k]].replace(names[k], '{name}') for k in range(1, len(names))}
    if len(gaps) > 1:
        return None
    gap = gaps.pop() if gaps else '\n\n' + head
    k = 0
    while k < min(len(gap), len(head)) and gap[len(gap) - 1 - k] == head[len(head) - 1 - k]:
        k += 1
    before = head[len(head) - k :] if k else ''
    prefix, separator = head[: len(head) - k], gap[: len(gap) - k]
    if '{name}' in prefix or '{name}' in separator or '{name}' in suffix:
        return None
    try:
        assembly = Assembly(separator=separator, template=before + '{text}', prefix=prefix, suffix=suffix)
    except ComponentsError:
        return None
    return assembly if assembly.build(tuple(markers.items())) == out else None


# ---------------------------------------------------------------------------------------------------
# Readers


def _from_yaml(path: Path) -> PromptComponents:
    if not path.is_file():
        raise ComponentsError(f'{path}: no such file')
    data, _ = load_config_file(path, what='prompt components', error=ComponentsError)  # the one YAML reader
    assembly: dict[str, str] = {}
    if isinstance(data, dict) and 'components' in data:
        for key in ('separator', 'template', 'prefix', 'suffix'):
            if key in data:
                if not isinstance(data[key], str):
                    raise ComponentsError(f'{path}: field "{key}" must be a string, got {type(data[key]).__name__}')
                assembly[key] = data[key]
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
    return PromptComponents(
        tuple(sections),
        source=str(path),
        source_format='yaml',
        separator=assembly.get('separator', '\n\n'),
        template=assembly.get('template', '{text}'),
        prefix=assembly.get('prefix', ''),
        suffix=assembly.get('suffix', ''),
    )


def _from_module(spec: str) -> PromptComponents:
    return _components_of(_import(spec), spec)


def _components_of(module: ModuleType, spec: str) -> PromptComponents:
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
    return PromptComponents(tuple(sections), source=spec, module=module, source_format='module')


def _import(spec: str) -> ModuleType:
    try:
        return import_spec(spec)
    except FileNotFoundError:
        raise ComponentsError(f'{spec}: no such file') from None
    except Exception as e:
        raise ComponentsError(f'{spec}: importing the prompts module failed: {describe_error(e)}') from None


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
