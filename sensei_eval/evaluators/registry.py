"""Judge names and groups: what `--evaluators` accepts, and what each judge needs.

A name is a judge's `name`; a group is a named list of judges (`mvp`, `all`). Unknown names fail with
the list of known ones, never silently run less than asked.
"""

from __future__ import annotations

from collections.abc import Iterable

from .base import Judge
from .output import Completeness, Hallucination
from .tool_usage import ToolSelection

__all__ = ('GROUPS', 'JUDGES', 'UnknownJudgeError', 'make_judges', 'resolve_names')

JUDGES: dict[str, type[Judge]] = {cls.name: cls for cls in (ToolSelection, Hallucination, Completeness)}

GROUPS: dict[str, tuple[str, ...]] = {
    'mvp': ('tool_selection', 'hallucination', 'completeness'),
    'all': tuple(JUDGES),
}


class UnknownJudgeError(ValueError):
    pass


def resolve_names(spec: Iterable[str]) -> list[str]:
    """Expand names and groups (comma-separated allowed) into judge names, in order, without repeats."""
    names: list[str] = []
    for item in spec:
        for token in (t.strip() for t in item.split(',')):
            if not token:
                continue
            expanded = GROUPS.get(token, (token,))
            for name in expanded:
                if name not in JUDGES:
                    known = ', '.join([*GROUPS, *JUDGES])
                    raise UnknownJudgeError(f'unknown judge or group {token!r}; known: {known}')
                if name not in names:
                    names.append(name)
    return names


def make_judges(spec: Iterable[str]) -> list[Judge]:
    return [JUDGES[name]() for name in resolve_names(spec)]
