"""Agent profiles: which deterministic checks hold for which agent.

Some checks only make sense for one agent's conventions: a documentation-research agent cites with
`<source>` tags, looks things up with a docs tool and answers another agent without greetings. Run on
a customer-service agent, those checks fail nearly every run and drown the real findings. So checks
belong to a *profile*, and an agent nobody declared gets only the `default` profile: checks that hold
for any tool-using agent (the reference check, repeated failing calls, recovery after a tool error,
code identifiers that no tool result backs).

A profile is chosen for a run (`--profile NAME|FILE`) and per record (`metadata.profile`); a record's
own choice wins. The report names the profile and lists the checks it skipped, with why. LLM judges
are not filtered: each failure-mode judge asks a question that holds for any agent.

Users declare their own profile in a small YAML, TOML or JSON file:

    name: support-agent
    extends: default            # optional: start from a built-in profile's checks and parameters
    checks: [greeting_check]    # added to what it extends (or the whole list, without `extends`)
    params:
      reference_check: {strict: true, ordered: false}

Unknown checks, parameters for checks the profile does not run and unknown parameter names are errors
naming the file and the field, never ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sensei_eval.core.config import CONFIG_SUFFIXES, load_config_file
from sensei_eval.core.errors import ConfigError
from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.registry import COMPONENTS as _REGISTRY_COMPONENTS

__all__ = (
    'AGNOSTIC_CHECKS',
    'BUILTIN_PROFILES',
    'DEFAULT_PROFILE',
    'Profile',
    'ProfileError',
    'load_profile',
    'record_judges',
    'resolve_profile',
)

# Checks that hold for any tool-using agent: they read only tool calls, results and expected calls.
AGNOSTIC_CHECKS = ('reference_check', 'repeated_call_check', 'error_recovery_check', 'identifier_check')
# The documentation-research agent's conventions: version pinning, docs lookups, no chat filler,
# `<source>` citations.
_DOCS_AGENT_CHECKS = ('version_check', 'docs_tool_check', 'greeting_check', 'citation_check')


class ProfileError(ConfigError):
    """A profile that cannot be used, with where (file and field) it went wrong."""


@dataclass(frozen=True)
class Profile:
    """A named set of deterministic checks, with parameters per check."""

    name: str
    description: str
    checks: tuple[str, ...]
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # failure mode -> prompt components a fix goes into, for the optimizer (`sensei_eval.optimize.routing`); None:
    # this kind of agent has no known section names, so the optimizer routes failures lexically
    component_map: Mapping[str, tuple[str, ...]] | None = None

    def skip_reason(self, judge: Judge) -> str | None:
        """Why this profile does not run `judge` (None: it runs). Only deterministic checks are filtered."""
        if judge.needs_model or judge.name in self.checks or judge.name not in _check_names():
            return None
        hint = ' (a documentation-agent convention: --profile docs-agent)' if judge.name in _DOCS_AGENT_CHECKS else ''
        return f'not in profile {self.name!r}{hint}'

    def configure(self, judge: Judge) -> Judge:
        """The judge with this profile's parameters for it applied."""
        params = self.params.get(judge.name)
        return dataclasses.replace(judge, **params) if params else judge


DEFAULT_PROFILE = Profile(
    name='default',
    description='Checks that hold for any tool-using agent.',
    checks=AGNOSTIC_CHECKS,
)
BUILTIN_PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        DEFAULT_PROFILE,
        Profile(
            name='docs-agent',
            description='A documentation-research agent: docs lookups, pinned versions, <source> citations, no chat filler.',
            checks=(*AGNOSTIC_CHECKS, *_DOCS_AGENT_CHECKS),
            # the failure-mode table's components are this agent's prompt sections; the registry keeps the
            # mapping current (a mode registered at runtime with components is in it)
            component_map=_REGISTRY_COMPONENTS,
        ),
        Profile(
            name='tarsy',
            description='An SRE investigation agent answering an alert (ReAct tool use).',
            checks=AGNOSTIC_CHECKS,
        ),
    )
}


def resolve_profile(spec: str, known: Mapping[str, Profile] | None = None) -> Profile:
    """A profile by name (built-in or already loaded) or from a file path."""
    profiles = {**BUILTIN_PROFILES, **(known or {})}
    if spec in profiles:
        return profiles[spec]
    path = Path(spec)
    if path.suffix.lower() in CONFIG_SUFFIXES or path.exists():
        return load_profile(path)
    raise ProfileError(f'unknown profile {spec!r}; known: {", ".join(profiles)} (or a .yaml/.toml/.json file)')


def record_judges(
    record: QueryRecord,
    judges: Sequence[Judge],
    profile: Profile = DEFAULT_PROFILE,
    profiles: Mapping[str, Profile] | None = None,
) -> list[Judge]:
    """The judges a run gives `record`: those its profile runs (its own `metadata.profile` when it names a known
    one, else `profile`), configured by that profile. What a pydantic-evals `Case`'s `evaluators` should be for
    the case to be judged as `sensei-eval judge` judges it (`Dataset` evaluators run on every case)."""
    known = {**BUILTIN_PROFILES, **(profiles or {}), profile.name: profile}
    name = record.metadata.get('profile')
    chosen = known[name] if isinstance(name, str) and name in known else profile
    return [chosen.configure(j) for j in judges if chosen.skip_reason(j) is None]


def load_profile(path: str | Path) -> Profile:
    """Read a user's profile file; every mistake names the file and the field."""
    path = Path(path)
    data, _ = load_config_file(path, what='profile', error=ProfileError)
    if not isinstance(data, dict):
        raise ProfileError('a profile is a mapping with `name`, `checks` and optional `extends`, `params`', file=str(path))
    return _profile_from(data, str(path))


def _profile_from(data: Mapping[str, Any], where: str) -> Profile:
    unknown = set(data) - {'name', 'description', 'extends', 'checks', 'params'}
    if unknown:
        raise ProfileError(f'unknown field(s) {sorted(unknown)} (known: name, description, extends, checks, params)', file=where)
    name = data.get('name')
    if not isinstance(name, str) or not name.strip():
        raise ProfileError('a profile needs a name', file=where, field='name')
    base: Profile | None = None
    if 'extends' in data:
        if data['extends'] not in BUILTIN_PROFILES:
            known = ', '.join(BUILTIN_PROFILES)
            raise ProfileError(f'{data["extends"]!r} is not a built-in profile ({known})', file=where, field='extends')
        base = BUILTIN_PROFILES[data['extends']]
    checks = _names(data.get('checks', []), where)
    all_checks = tuple(dict.fromkeys([*(base.checks if base else ()), *checks]))
    params: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (base.params if base else {}).items()}
    raw_params = data.get('params', {}) or {}
    if not isinstance(raw_params, dict):
        raise ProfileError('expected a mapping of check name to parameters', file=where, field='params')
    classes = _check_classes()
    for check, values in raw_params.items():
        if check not in all_checks:
            raise ProfileError(f'the profile does not run {check!r}', file=where, field=f'params.{check}')
        if not isinstance(values, dict):
            raise ProfileError('expected a mapping of parameter to value', file=where, field=f'params.{check}')
        allowed = {f.name for f in dataclasses.fields(classes[check]) if f.init}
        for key in values:
            if key not in allowed:
                known = ', '.join(sorted(allowed)) or 'none'
                raise ProfileError(f'unknown parameter (known: {known})', file=where, field=f'params.{check}.{key}')
        params.setdefault(check, {}).update(values)
        try:
            classes[check](**params[check])
        except (TypeError, ValueError) as e:
            raise ProfileError(str(e), file=where, field=f'params.{check}') from None
    description = data.get('description') or (f'{base.description} Extended by {where}.' if base else f'Declared in {where}.')
    return Profile(name=name, description=str(description), checks=all_checks, params=params)


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProfileError('expected a list of check names', file=where, field='checks')
    known = _check_names()
    for k, name in enumerate(value):
        if name not in known:
            raise ProfileError(f'unknown check {name!r} (known: {", ".join(known)})', file=where, field=f'checks[{k}]')
    return list(value)


def _check_classes() -> dict[str, type[Judge]]:
    from sensei_eval.evaluators.registry import GROUPS, JUDGES

    return {name: JUDGES[name] for name in GROUPS['checks']}


def _check_names() -> Sequence[str]:
    return tuple(_check_classes())
