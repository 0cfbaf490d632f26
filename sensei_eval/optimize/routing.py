"""Routing failures to prompt components: which section of the prompt a judge's finding is about.

The optimizer rewrites one component at a time from the failure examples routed to it, so every issue
a judge finds must land on a component of *this* agent's prompt, whatever its sections are called.
Routing is data, resolved once per run, in this order:

1. the user's map (`OptimizeConfig.component_map`, from `--map MODE=COMPONENT` or a run config's
   `components:` section): failure mode → component names. An entry naming a component the prompt
   does not have is an error naming the entry — a typo must not silently route nothing;
2. else the agent profile's map (`profiles.Profile.component_map`; the `docs-agent` profile carries the
   map for the documentation-research agent's sections). Entries naming components this prompt does
   not have are dropped and listed (a profile describes a kind of agent, not this exact prompt); if
   no entry is left, routing falls through to
3. lexical routing: each failure example goes to the component whose text (and name) it most concerns,
   by TF-IDF cosine between the issue text — judge, failure mode and the issue's fields, including a
   `suggested_fix` — and each component. Ties and zero similarity go to the longest component (the
   catch-all section of most prompts), so no finding is lost.

With a map, failures of modes the map does not name are not routed; the run reports how many.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from sensei_eval.core.errors import ConfigError

__all__ = ('ROUTING_SOURCES', 'Routing', 'RoutingError', 'lexical_scores', 'resolve_routing')

RoutingSource = Literal['user map', 'profile map', 'lexical']
ROUTING_SOURCES: tuple[RoutingSource, ...] = ('user map', 'profile map', 'lexical')


class RoutingError(ConfigError):
    """A component map that cannot be used; the message names the entry."""


@dataclass(frozen=True)
class Routing:
    """How failures reach components for one run: a map (mode → components) or lexical similarity."""

    source: RoutingSource
    component_map: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    profile: str | None = None
    # profile-map entries left out because this prompt has no such component ("MODE=COMPONENT")
    dropped: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.source == 'user map':
            return f'user map ({len(self.component_map)} failure mode(s))'
        if self.source == 'profile map':
            extra = f'; map entries for absent components dropped: {len(self.dropped)}' if self.dropped else ''
            return f'profile map of {self.profile!r} ({len(self.component_map)} failure mode(s){extra})'
        return 'lexical (TF-IDF cosine between each issue and each component; ties and no overlap: the longest component)'

    def route(self, failure_mode: str | None, text: str, components: Mapping[str, str]) -> list[str]:
        """The components one failure (its mode and its text) is about; empty when the map leaves it out."""
        if self.source != 'lexical':
            return [c for c in self.component_map.get(failure_mode or '', ()) if c in components]
        return [best_component(text, components)]

    def modes_for(self, component: str) -> set[str] | None:
        """The failure modes the map routes to `component`; None for lexical routing (any mode may)."""
        if self.source == 'lexical':
            return None
        return {mode for mode, names in self.component_map.items() if component in names}


def resolve_routing(
    components: Sequence[str],
    *,
    user_map: Mapping[str, Sequence[str]] | None = None,
    profile_map: Mapping[str, Sequence[str]] | None = None,
    profile: str | None = None,
) -> Routing:
    """The user's map if given, else the profile's map (entries for absent components dropped), else lexical."""
    names = set(components)
    if user_map:
        checked: dict[str, tuple[str, ...]] = {}
        for mode, targets in user_map.items():
            if isinstance(targets, str):
                targets = [targets]
            if not targets:
                raise RoutingError(f'component map entry {mode!r}: names no component')
            for target in targets:
                if target not in names:
                    raise RoutingError(
                        f'component map entry {mode}={target}: the prompt has no component {target!r} '
                        f'(its components: {", ".join(components)})'
                    )
            checked[mode] = tuple(dict.fromkeys(targets))
        return Routing('user map', checked)
    if profile_map:
        kept: dict[str, tuple[str, ...]] = {}
        dropped: list[str] = []
        for mode, targets in profile_map.items():
            present = tuple(t for t in targets if t in names)
            dropped += [f'{mode}={t}' for t in targets if t not in names]
            if present:
                kept[mode] = present
        if kept:
            return Routing('profile map', kept, profile=profile, dropped=tuple(dropped))
    return Routing('lexical', profile=profile)


# ---------------------------------------------------------------------------------------------------
# Lexical routing

_TOKEN = re.compile(r'[a-z][a-z0-9]+')
_STOP_TEXT = (
    'the a an and or of to in on for with is are was were be been it its this that as at by from not no you your '
    'their there what which when where how why any all each every one some so if then than but do does did has have '
    'had can could should would will may might must into about over under only also more most very just true false '
    'none null query answer agent run runs judge check'
)
_STOP = frozenset(_STOP_TEXT.split())
_SUFFIXES = ('ations', 'ation', 'ings', 'ing', 'ions', 'ion', 'ies', 'es', 'ed', 'ly', 's')


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: -len(suffix)]
            break
    return word[:7]


def _terms(text: str) -> list[str]:
    words = _TOKEN.findall(text.replace('_', ' ').lower())
    return [_stem(w) for w in words if w not in _STOP]


def lexical_scores(text: str, components: Mapping[str, str]) -> dict[str, float]:
    """Cosine similarity of TF-IDF vectors between `text` and each component (its name counts as text)."""
    docs = {name: Counter(_terms(f'{name} {body}')) for name, body in components.items()}
    n = len(docs)
    df: Counter[str] = Counter()
    for counts in docs.values():
        df.update(set(counts))

    def weights(counts: Counter[str]) -> dict[str, float]:
        return {t: (1 + math.log(c)) * (math.log((1 + n) / (1 + df[t])) + 1) for t, c in counts.items()}

    query = weights(Counter(_terms(text)))
    q_norm = math.sqrt(sum(v * v for v in query.values())) or 1.0
    scores: dict[str, float] = {}
    for name, counts in docs.items():
        vec = weights(counts)
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        scores[name] = sum(w * vec.get(t, 0.0) for t, w in query.items()) / (q_norm * norm)
    return scores


def best_component(text: str, components: Mapping[str, str]) -> str:
    """The component `text` most concerns; the longest component on a tie or when nothing overlaps."""
    scores = lexical_scores(text, components)
    top = max(scores.values(), default=0.0)
    tied = [name for name, s in scores.items() if math.isclose(s, top, rel_tol=1e-9)]
    candidates = tied if top > 0.0 else list(components)
    return max(candidates, key=lambda name: (len(components[name]), -list(components).index(name)))
