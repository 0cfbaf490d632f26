"""Judge names and groups: what `--judges` accepts, and what each judge needs.

Judges register themselves where they are defined (`base.register_judge`, a class decorator); this module
names and groups what is registered. A name is a judge's `name`; a group is a named list of judges. There is
a group per failure-mode category (`tool_usage`, `sources`, `output`, `format`, `methodology`, `instructions`, and any a
registered mode brings), plus `core` (the LLM judges every run gets when none are named: they hold for any
agent), `mvp` (seed 004's first three), `checks` (deterministic, no model), `investigation` (the TARSy
investigation judge) and `all`. `EXTRA_MODES` names the judges of modes beyond the fifteen standard ones, so `--list`
can say so. Unknown names fail with the list of known ones, never
silently run less than asked. `make_judges(..., fuse=...)` answers groups of LLM judges with one model
call each (`sensei_eval.evaluators.fused`). Which checks run on a record is then up to its agent profile
(`sensei_eval.judging.profiles`).

The groups, `JUDGES`, `EXTRA_MODES` and `COMPONENTS` (failure mode → prompt components, as data the
optimizer reads) follow the failure-mode table (`sensei_eval.core.modes`), also when a mode is registered
at runtime; they are updated in place, so a module that imported them sees the change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from sensei_eval.core import modes
from sensei_eval.core.errors import ConfigError

# The modules whose judges register themselves where they are defined (`base.register_judge`): imported here
# for that, in the order their judges are listed (a new judge in one of them needs nothing here).
from sensei_eval.evaluators import (  # noqa: F401
    checks,
    format,
    instructions,
    investigation,
    methodology,
    output,
    reference,
    sources,
    tool_usage,
)
from sensei_eval.evaluators.base import FailureModeJudge, Judge, on_register, registered_judges, set_known_judges
from sensei_eval.evaluators.fused import FusedJudge, FuseSpecError, parse_fuse_spec

__all__ = (
    'COMPONENTS',
    'DEFAULT_JUDGES',
    'EXTRA_MODES',
    'GROUPS',
    'JUDGES',
    'FuseSpecError',
    'UnknownJudgeError',
    'fuse_judges',
    'make_judges',
    'resolve_names',
    'unknown_name_message',
)

# Seed 004's MVP: the first three judges it builds.
_MVP = ('tool_selection', 'hallucination', 'completeness')
# The LLM judges every run gets when none are named: they hold for any agent and cover what goes wrong in a
# run of one: the right tools, the right arguments, nothing claimed that the run does not support,
# everything asked handled, and the agent's own rules kept (for a policy-bound agent, where most failures
# are).
_CORE = ('tool_selection', 'tool_parameters', 'hallucination', 'completeness', 'instruction_following')
# What every surface judges with when the user names no judges (`judge`, `serve`, the service API, the
# sampler): the core LLM judges plus the checks, which cost no model call and catch what a model may miss
# (a refund claimed but never made).
DEFAULT_JUDGES: tuple[str, ...] = ('core', 'checks')

JUDGES: dict[str, type[Judge]] = {}
GROUPS: dict[str, tuple[str, ...]] = {}
COMPONENTS: dict[str, tuple[str, ...]] = {}
EXTRA_MODES: set[str] = set()


def _derive_from_modes() -> None:
    """Names, groups and components from the registered judges (`base.register_judge`) and the mode table:
    a failure-mode judge per mode, in the table's order, then the checks (no model), then the other judges."""
    registered = registered_judges()
    by_mode: dict[str | None, type[Judge]] = {
        cls.failure_mode: cls for cls in registered if issubclass(cls, FailureModeJudge) and cls.failure_mode in modes.MODES
    }
    by_mode.update({mode: cast(type[Judge], cls) for mode, cls in modes.registered_judges().items()})
    if missing := [m for m in modes.MODES if m not in by_mode]:
        raise ValueError(f'failure modes without a judge: {", ".join(missing)}')
    mode_judges = [by_mode[m] for m in modes.MODES]
    checks_ = [cls for cls in registered if not cls.needs_model]
    others = [cls for cls in registered if cls.needs_model and cls not in mode_judges]
    every: tuple[type[Judge], ...] = (*mode_judges, *checks_, *others)
    if len({cls.name for cls in every}) != len(every):
        raise ValueError('two judges share a name: ' + ', '.join(cls.name for cls in every))
    JUDGES.clear()
    JUDGES.update({cls.name: cls for cls in every})
    set_known_judges(every)
    extra: dict[str, tuple[str, ...]] = {}
    for cls in every:
        for group in cls.groups:
            extra[group] = (*extra.get(group, ()), cls.name)
    GROUPS.clear()
    GROUPS.update(
        {
            'core': _CORE,
            'mvp': _MVP,
            **{c: tuple(cls.name for cls in mode_judges if cls.category == c) for c in modes.categories()},
            'checks': tuple(cls.name for cls in checks_),
            **extra,
            'all': tuple(cls.name for cls in every if cls.in_all),
        }
    )
    COMPONENTS.clear()
    COMPONENTS.update({m.name: m.components for m in modes.MODES.values() if m.components})
    EXTRA_MODES.clear()
    EXTRA_MODES.update(by_mode[m.name].name for m in modes.MODES.values() if not m.standard)


modes.on_change(_derive_from_modes)
on_register(_derive_from_modes)


class UnknownJudgeError(ConfigError):
    pass


def unknown_name_message(token: str, known: Sequence[str]) -> str:
    """`unknown judge or group 'halucination'; did you mean 'hallucination'?`, or the groups when nothing
    is close: the full list of judges is `judge --list`, not a 36-name line."""
    import difflib

    close = difflib.get_close_matches(token, known, n=3, cutoff=0.6)
    if close:
        hint = 'did you mean ' + ' or '.join(repr(c) for c in close) + '?'
    else:
        hint = 'groups: ' + ', '.join(g for g in known if g in GROUPS or g == 'all')
    return f'unknown judge or group {token!r}; {hint} (`sensei-eval judge --list` lists every judge)'


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
                    raise UnknownJudgeError(unknown_name_message(token, [*GROUPS, *JUDGES]))
                if name not in names:
                    names.append(name)
    return names


def make_judges(spec: Iterable[str], *, fuse: Iterable[str] | None = None) -> list[Judge]:
    """The judges `spec` names, in order; with `fuse`, the LLM judges of each fuse group answered by one
    model call (`fuse_judges` below; `FuseSpecError` on a bad group)."""
    judges = [JUDGES[name]() for name in resolve_names(spec)]
    return fuse_judges(judges, fuse) if fuse else judges


def fuse_judges(judges: Sequence[Judge], spec: Iterable[str] | None) -> list[Judge]:
    """`judges` with the LLM judges of each `spec` group replaced by one `FusedJudge`, where the first
    member stood. Group tokens are judge names, groups or categories (`output`), or `all`; a judge goes
    into the first group that names it; a group left with one selected judge stays that single judge.
    Raises `FuseSpecError` for an unknown name or a group matching none of the selected LLM judges."""
    groups = parse_fuse_spec(spec or ())
    if not groups or groups == [['none']]:
        return list(judges)
    llm = [j for j in judges if isinstance(j, FailureModeJudge)]
    taken: set[str] = set()
    fused_at: dict[str, Judge] = {}  # first member's name -> the judge that replaces the group
    dropped: set[str] = set()
    for tokens in groups:
        wanted: set[str] = set()
        for token in tokens:
            if token == 'all':
                wanted.update(j.name for j in llm)
            elif token in GROUPS:
                wanted.update(GROUPS[token])
            elif token in JUDGES:
                wanted.add(token)
            else:
                raise FuseSpecError('--fuse: ' + unknown_name_message(token, ['all', *GROUPS, *JUDGES]))
        members = [j for j in llm if j.name in wanted and j.name not in taken]
        if not members:
            selected = ', '.join(j.name for j in llm) or 'none'
            raise FuseSpecError(f'--fuse {"+".join(tokens)}: none of the selected LLM judges is in it (selected: {selected})')
        taken.update(j.name for j in members)
        if len(members) >= 2:
            fused_at[members[0].name] = FusedJudge(members=members)
            dropped.update(j.name for j in members[1:])
    return [fused_at.get(j.name, j) for j in judges if j.name not in dropped]
