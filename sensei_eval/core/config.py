"""Where sensei-eval keeps its files, and the one reader of the config files a user writes.

The cache directory is shared by the judge cache (`judging.cache`) and the embedded model's server files
(`models.embedded`), which sit in different layers; it is decided here, once.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from sensei_eval.core.errors import ConfigError, SenseiError, json_error_text

__all__ = ('CONFIG_SUFFIXES', 'KeyLines', 'default_cache_dir', 'load_config_file')

# The kinds of config file a user may write, by suffix; any other suffix is read as YAML.
CONFIG_SUFFIXES = ('.yaml', '.yml', '.toml', '.json')

# The line (1-based) of each mapping key in a YAML file, by its path of keys: ('components', 'citation_quality') -> 3.
KeyLines = dict[tuple[str, ...], int]


def default_cache_dir() -> Path:
    env = os.environ.get('SENSEI_EVAL_CACHE')
    if env:
        return Path(env)
    return Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'sensei-eval'


def load_config_file(path: Path, *, what: str = 'config file', error: type[SenseiError] = ConfigError) -> tuple[Any, KeyLines]:
    """A user's config file (profile, sampler config, optimize run config) read as TOML, JSON or YAML by its
    suffix, and for YAML the line of every mapping key, so a later error can name it. A file that cannot be
    read or parsed is an `error` (the caller's `ConfigError`) naming the file, and the line when known;
    the data is returned as it parsed (None for an empty YAML file): what it must hold is the caller's."""
    import yaml  # here, not at import: `sensei-eval --help` reads no config file

    try:
        text = path.read_text(encoding='utf-8-sig')
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise error(f'cannot read the {what} ({why})', file=str(path)) from None
    suffix = path.suffix.lower()
    if suffix == '.toml':
        try:
            return tomllib.loads(text), {}
        except tomllib.TOMLDecodeError as e:
            raise error(f'not valid TOML: {e}', file=str(path)) from None
    if suffix == '.json':
        try:
            return json.loads(text), {}
        except json.JSONDecodeError as e:
            raise error(f'not valid JSON: {json_error_text(e)}', file=str(path), line=e.lineno) from None
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        line = mark.line + 1 if mark is not None else None
        raise error(f'not valid YAML: {getattr(e, "problem", None) or e}', file=str(path), line=line) from None
    lines: KeyLines = {}
    _key_lines(node, (), lines)
    return data, lines


def _key_lines(node: Any, prefix: tuple[str, ...], lines: KeyLines) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*prefix, str(key_node.value))
            lines[key] = key_node.start_mark.line + 1
            _key_lines(value_node, key, lines)
