"""Agent profiles: which judges hold for which agent, and what its own conventions add to them.

Some checks only make sense for one agent's conventions: a documentation-research agent cites with
`<source>` tags, looks things up with a docs tool and answers another agent without greetings. Run on
a customer-service agent, those checks fail nearly every run and drown the real findings. So checks
belong to a *profile*, and an agent nobody declared gets only the `default` profile: checks that hold
for any tool-using agent (the reference check, repeated failing calls, recovery after a tool error,
code identifiers that no tool result backs).

LLM judges work the same way. Every rubric holds for any agent (the agent's own instructions and tools
are its standard); a profile may *select* which LLM judges run for its agent (`judges`) and *extend* a
judge's rubric with its agent's conventions (`conventions`, shown to the judge after the rubric) and its
words for open issue fields (`vocabulary`). The built-in `docs-agent` and `tarsy` profiles carry the
documentation agent's and the SRE agent's conventions (`judging.conventions`); `default` adds nothing.

A profile is chosen for a run (`--profile NAME|FILE`) and per record (`metadata.profile`); a record's
own choice wins. The report names the profile and lists the judges it skipped, with why.

Users declare their own profile in a small YAML, TOML or JSON file:

    name: support-agent
    extends: default            # optional: start from a built-in profile's checks, parameters and conventions
    checks: [greeting_check]    # added to what it extends (or the whole list, without `extends`)
    params:
      reference_check: {extra_writes: allow, ordered: false}   # see docs/reference.md
    judges: [tool_selection, hallucination, instruction_following]   # optional: only these LLM judges run
    conventions:                # optional: added to a judge's rubric for this agent
      hallucination: Prices quoted to the user must come from the quote tool, never from memory.

Unknown checks and judges, parameters for checks the profile does not run and unknown parameter names
are errors naming the file and the field, never ignored.
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
from sensei_eval.evaluators.base import FailureModeJudge, Judge
from sensei_eval.evaluators.fused import FusedJudge
from sensei_eval.evaluators.registry import COMPONENTS as _REGISTRY_COMPONENTS
from sensei_eval.judging.conventions import DOCS_AGENT, DOCS_AGENT_VOCABULARY, SRE_AGENT

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
    """A named set of deterministic checks with parameters per check, the LLM judges it runs, and what its
    agent's conventions add to those judges' rubrics."""

    name: str
    description: str
    checks: tuple[str, ...]
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # failure mode -> prompt components a fix goes into, for the optimizer (`sensei_eval.optimize.routing`); None:
    # this kind of agent has no known section names, so the optimizer routes failures lexically
    component_map: Mapping[str, tuple[str, ...]] | None = None
    # the LLM judges this profile runs (of those asked for); None: every one asked for
    judges: tuple[str, ...] | None = None
    # LLM judge -> what this agent's conventions add to its rubric
    conventions: Mapping[str, str] = field(default_factory=dict)
    # LLM judge -> open issue field -> the values this agent's world uses
    vocabulary: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)

    def skip_reason(self, judge: Judge) -> str | None:
        """Why this profile does not run `judge` (None: it runs): a check it does not list, or an LLM judge
        outside its `judges`."""
        if judge.needs_model:
            if self.judges is None or judge.name in self.judges or isinstance(judge, FusedJudge):
                return None
            return f'not in profile {self.name!r} (its LLM judges: {", ".join(self.judges) or "none"})'
        if judge.name in self.checks or judge.name not in _check_names():
            return None
        hint = ' (a documentation-agent convention: --profile docs-agent)' if judge.name in _DOCS_AGENT_CHECKS else ''
        return f'not in profile {self.name!r}{hint}'

    def configure(self, judge: Judge) -> Judge:
        """The judge with this profile's parameters (a check) or conventions and vocabulary (an LLM judge,
        also inside a fused one) applied."""
        if isinstance(judge, FusedJudge):
            members = [self.configure(m) for m in judge.members]
            if all(a is b for a, b in zip(members, judge.members, strict=True)):
                return judge
            return FusedJudge(members=members, model=judge.model, output_retries=judge.output_retries)  # type: ignore[arg-type]
        if isinstance(judge, FailureModeJudge):
            conventions, vocabulary = self.conventions.get(judge.name, ''), self.vocabulary.get(judge.name)
            if not conventions and not vocabulary:
                return judge
            return dataclasses.replace(judge, conventions=conventions, vocabulary=dict(vocabulary or {}) or None)
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
            # this agent's vocabulary: an unrecovered tool error is shallow research
            params={'error_recovery_check': {'vocabulary': 'docs-agent'}},
            # the failure-mode table's components are this agent's prompt sections; the registry keeps the
            # mapping current (a mode registered at runtime with components is in it)
            component_map=_REGISTRY_COMPONENTS,
            conventions=DOCS_AGENT,
            vocabulary=DOCS_AGENT_VOCABULARY,
        ),
        Profile(
            name='tarsy',
            description='An SRE investigation agent answering an alert (ReAct tool use).',
            checks=AGNOSTIC_CHECKS,
            conventions=SRE_AGENT,
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
    one, else `profile`), configured by that profile. The record engine (`judging.record`) applies it to every
    record, a judge's pydantic-evals `evaluate()` included, so a `Dataset`'s evaluators need not."""
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
    unknown = set(data) - set(_FIELDS)
    if unknown:
        raise ProfileError(f'unknown field(s) {sorted(unknown)} (known: {", ".join(_FIELDS)})', file=where)
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
    judges = _llm_judge_names(data['judges'], where, 'judges') if 'judges' in data else (base.judges if base else None)
    conventions = {**(base.conventions if base else {}), **_conventions(data.get('conventions', {}), where)}
    return Profile(
        name=name,
        description=str(description),
        checks=all_checks,
        params=params,
        component_map=base.component_map if base else None,
        judges=judges,
        conventions=conventions,
        vocabulary=base.vocabulary if base else {},
    )


# The fields a profile file may have.
_FIELDS = ('name', 'description', 'extends', 'checks', 'params', 'judges', 'conventions')


def _llm_judge_names(value: Any, where: str, field_name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProfileError('expected a list of LLM judge names', file=where, field=field_name)
    known = _llm_judge_classes()
    for k, name in enumerate(value):
        if name not in known:
            raise ProfileError(f'unknown LLM judge {name!r} (known: {", ".join(known)})', file=where, field=f'{field_name}[{k}]')
    return tuple(value)


def _conventions(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ProfileError(
            'expected a mapping of LLM judge name to the text it adds to the rubric', file=where, field='conventions'
        )
    known = _llm_judge_classes()
    for name, text in value.items():
        if name not in known:
            raise ProfileError(f'unknown LLM judge {name!r} (known: {", ".join(known)})', file=where, field=f'conventions.{name}')
        if not isinstance(text, str) or not text.strip():
            raise ProfileError('expected the text added to the rubric', file=where, field=f'conventions.{name}')
    return {name: text.strip() for name, text in value.items()}


def _llm_judge_classes() -> dict[str, type[Judge]]:
    from sensei_eval.evaluators.registry import JUDGES

    return {name: cls for name, cls in JUDGES.items() if issubclass(cls, FailureModeJudge)}


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
