"""Matching a run's tool calls to the calls a reference expects, as an API reads arguments.

Each expected call is matched to a distinct successful actual call (order-free, repeats counted: a bipartite
matching; or in order when the reference says so), its arguments compared by `Compare`: the top-level keys
that count (`exact` or `subset`), each value `exact`, `lenient` (numbers and case of free text as an API reads
them) or `ignore`d; below the top level, keys the reference does not name are ignored and a list of scalars is
a multiset unless `ordered` names it. The findings drawn from the matching are the reference check's
(`evaluators.reference`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sensei_eval.core.records import ExpectedToolCall, ToolCall

__all__ = ('FREE_TEXT_WORDS', 'ArgumentMatch', 'CallMatch', 'Compare', 'ValueMatch', 'match_expected_calls', 'normal_value')

ArgumentMatch = Literal['exact', 'subset']
ValueMatch = Literal['exact', 'lenient', 'ignore']
# A string of this many words or more is free text (a summary, a reason, a message): compared without
# case and runs of whitespace, and a difference in it alone is a minor finding.
FREE_TEXT_WORDS = 6
_NUMERIC = re.compile(r'[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?')


@dataclass(frozen=True)
class CallMatch:
    """One expected call and the actual call (its index in `record.tool_calls()`) it was matched to."""

    expected: ExpectedToolCall
    actual_index: int | None


@dataclass(frozen=True)
class Compare:
    """How one tool's arguments compare: which top-level keys count (`keys`), each value's mode, and the
    lists compared in order (`ordered`: argument paths, `flights.stops`; every other list of scalars is a
    multiset)."""

    keys: ArgumentMatch = 'exact'
    values: ValueMatch = 'lenient'
    args: Mapping[str, ValueMatch] = field(default_factory=dict)
    free_text_words: int = FREE_TEXT_WORDS
    ordered: frozenset[str] = frozenset()

    def mode(self, key: str) -> ValueMatch:
        return self.args.get(key, self.values)

    def differing(self, expected: dict[str, Any] | None, actual: dict[str, Any] | str) -> list[str]:
        """The argument names whose values differ (`['(arguments)']` for arguments that are not an object)."""
        if expected is None:
            return []
        if not isinstance(actual, dict):
            return ['(arguments)']
        keys = [k for k in expected if self.mode(k) != 'ignore' and not self.equal(k, expected[k], actual, k in actual)]
        if self.keys == 'exact':
            keys += [k for k in actual if k not in expected and self.mode(k) != 'ignore']
        return keys

    def equal(self, key: str, want: Any, actual: dict[str, Any], present: bool) -> bool:
        """Whether the call's value of top-level argument `key` is what the reference says, as an API reads
        it (`_fits`): whatever the top-level rule (`keys`), nested keys the reference does not name are
        ignored and lists of scalars are multisets unless `ordered` names them."""
        return present and _fits(want, actual[key], self.mode(key), self.free_text_words, self.ordered, key)

    def free_text(self, value: Any) -> bool:
        return isinstance(value, str) and len(value.split()) >= self.free_text_words


def _fits(want: Any, have: Any, mode: ValueMatch, words: int, ordered: frozenset[str], path: str) -> bool:
    """`have` is what `want` says as an API reads it, at every depth below the top level: keys of nested
    objects that `want` does not name are ignored; a list of scalars is a multiset (`[3, 1]` fits `[1, 3]`,
    as `sorted(item_ids)` stores it) unless its `path` is in `ordered`; list items that are objects are
    paired by a shared key (`_item_key`), else (or when ordered) by position; leaves compare by `mode`.
    `path` names the value from the arguments' root (`flights.stops`: list items add nothing to it)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            k in have and _fits(v, have[k], mode, words, ordered, f'{path}.{k}') for k, v in want.items()
        )
    if isinstance(want, list | tuple):
        if not isinstance(have, list | tuple) or len(want) != len(have):
            return False
        if path in ordered:
            return all(_fits(w, h, mode, words, ordered, path) for w, h in zip(want, have, strict=True))
        if all(_is_scalar(x) for x in (*want, *have)):
            return Counter(_leaf(w, mode, words) for w in want) == Counter(_leaf(h, mode, words) for h in have)
        key = _item_key(want, have)
        if key is None:
            return all(_fits(w, h, mode, words, ordered, path) for w, h in zip(want, have, strict=True))
        by_key = {_leaf(h[key], mode, words): h for h in have}
        return all(
            (match := by_key.get(_leaf(w[key], mode, words))) is not None and _fits(w, match, mode, words, ordered, path)
            for w in want
        )
    return bool(_leaf(want, mode, words) == _leaf(have, mode, words))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _leaf(value: Any, mode: ValueMatch, words: int) -> Any:
    value = _lenient(value, words) if mode == 'lenient' else normal_value(value)
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


def _item_key(want: Sequence[Any], have: Sequence[Any]) -> str | None:
    """The key list items are paired by: one every item on both sides has with a scalar value, unique
    on each side; `id`, then `*_id`/`*Id`, then `name`/`key`, then any other. None: pair by position."""
    if not want or not all(isinstance(x, dict) for x in (*want, *have)):
        return None
    shared = set.intersection(*(set(x) for x in (*want, *have)))
    both = (*want, *have)
    usable = [k for k in shared if _scalar_in_all(k, both) and _unique_in(k, want) and _unique_in(k, have)]

    def rank(k: str) -> tuple[int, str]:
        low = k.lower()
        return (0 if low == 'id' else 1 if low.endswith(('_id', 'id')) else 2 if low in ('name', 'key') else 3, k)

    return min(usable, key=rank) if usable else None


def _scalar_in_all(key: str, items: Sequence[dict[str, Any]]) -> bool:
    return all(isinstance(x[key], str | int | float) and not isinstance(x[key], bool) for x in items)


def _unique_in(key: str, items: Sequence[dict[str, Any]]) -> bool:
    return len({json.dumps(x[key]) for x in items}) == len(items)


def match_expected_calls(
    expected: Sequence[ExpectedToolCall],
    calls: Sequence[ToolCall],
    *,
    ordered: bool = False,
    arguments: ArgumentMatch = 'exact',
    values: ValueMatch = 'lenient',
    compare: Callable[[str], Compare] | None = None,
) -> list[CallMatch]:
    """Match each expected call to a distinct successful call: a maximum matching, not a greedy one.

    Greedy matching fails on wildcards (`args: null` taking the one call a specific expectation needed),
    so unordered matching uses augmenting paths and ordered matching a longest common subsequence.
    `compare` gives each tool's comparison (per-tool and per-argument modes); by default every tool
    compares with `arguments` and `values`.
    """
    usable = [i for i, c in enumerate(calls) if not c.failed]
    default = Compare(keys=arguments, values=values)
    rule = compare or (lambda _name: default)

    def fits(e: ExpectedToolCall, i: int) -> bool:
        return calls[i].tool_name == e.tool_name and not rule(e.tool_name).differing(e.args, calls[i].args)

    pairs = _ordered_matching(expected, usable, fits) if ordered else _bipartite_matching(expected, usable, fits)
    return [CallMatch(e, pairs.get(k)) for k, e in enumerate(expected)]


# ---------------------------------------------------------------------------------------------------
# Matching


def normal_value(value: Any) -> Any:
    """JSON normalisation: what JSON cannot tell apart compares equal (key order, tuples vs lists)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _lenient(value: Any, free_text_words: int) -> Any:
    """The lenient form of a value: numeric strings as numbers, strings stripped, free text folded."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if _NUMERIC.fullmatch(text):
            try:
                return float(text)
            except ValueError:  # pragma: no cover - the pattern only lets floats through
                return text
        return ' '.join(text.casefold().split()) if len(text.split()) >= free_text_words else text
    if isinstance(value, dict):
        return {str(k): _lenient(v, free_text_words) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lenient(v, free_text_words) for v in value]
    return normal_value(value)


def _bipartite_matching(
    expected: Sequence[ExpectedToolCall], usable: list[int], fits: Callable[[ExpectedToolCall, int], bool]
) -> dict[int, int]:
    """Maximum bipartite matching (Kuhn's augmenting paths): expected index -> call index."""
    owner: dict[int, int] = {}  # call index -> expected index

    def augment(k: int, seen: set[int]) -> bool:
        for i in usable:
            if i in seen or not fits(expected[k], i):
                continue
            seen.add(i)
            if i not in owner or augment(owner[i], seen):
                owner[i] = k
                return True
        return False

    for k in range(len(expected)):
        augment(k, set())
    return {k: i for i, k in owner.items()}


def _ordered_matching(
    expected: Sequence[ExpectedToolCall], usable: list[int], fits: Callable[[ExpectedToolCall, int], bool]
) -> dict[int, int]:
    """The longest run of expected calls matched in order (LCS with `fits` as equality)."""
    n, m = len(expected), len(usable)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for a in range(n - 1, -1, -1):
        for b in range(m - 1, -1, -1):
            best = max(table[a + 1][b], table[a][b + 1])
            if fits(expected[a], usable[b]):
                best = max(best, table[a + 1][b + 1] + 1)
            table[a][b] = best
    pairs: dict[int, int] = {}
    a = b = 0
    while a < n and b < m:
        if fits(expected[a], usable[b]) and table[a][b] == table[a + 1][b + 1] + 1:
            pairs[a] = usable[b]
            a, b = a + 1, b + 1
        elif table[a + 1][b] >= table[a][b + 1]:
            a += 1
        else:
            b += 1
    return pairs
