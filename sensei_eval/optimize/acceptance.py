"""When the sequential optimizer accepts a candidate: the split of the queries into train and validation
(stratified by the failure modes each query failed), the acceptance plan stated before anything is tested (the
smallest gain a split can accept), and the test itself (`validation_test`: the exact one-sided paired sign-flip
test of `validate.stats` on the test queries, its 95% paired bootstrap interval as `validate` computes it).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

from sensei_eval.agents.runner import Query
from sensei_eval.core.errors import ConfigError
from sensei_eval.judging.profiles import BUILTIN_PROFILES, DEFAULT_PROFILE, Profile, ProfileError, resolve_profile
from sensei_eval.optimize.evaluate import PromptEvaluation
from sensei_eval.optimize.state import OptimizeConfig, Split, ValidationTest

__all__ = (
    'acceptance_plan',
    'gain_interval',
    'interval_pair',
    'p_better',
    'run_profile',
    'split_queries',
    'stratified_validation',
    'validation_test',
)


def split_queries(query_ids: Sequence[str], config: OptimizeConfig, strata: Mapping[str, str] | None = None) -> Split:
    """Train and validation query ids, deterministic by seed; refuses a split whose test cannot accept anything.

    With `strata` (query id -> group, e.g. the failure modes its baseline run had), each group is split in
    the same proportion (largest remainders), so a failure that a minority of queries show is on both sides."""
    ids = list(query_ids)
    if config.validation_queries is not None:
        unknown = [i for i in config.validation_queries if i not in ids]
        if unknown:
            raise ConfigError(f'validation_queries: no such query id(s) in the dataset: {", ".join(unknown)}')
        held = set(config.validation_queries)
        split = Split(train=[i for i in ids if i not in held], validation=[i for i in ids if i in held])
    else:
        if len(ids) < 2:
            raise ConfigError(f'{len(ids)} query: the optimizer needs queries to learn from and others to validate on')
        n_val = min(len(ids) - 1, max(1, math.ceil(len(ids) * config.validation_fraction)))
        if strata:
            held = stratified_validation(ids, strata, n_val, f'split:{config.seed}')
        else:
            shuffled = ids[:]
            random.Random(f'split:{config.seed}').shuffle(shuffled)
            held = set(shuffled[:n_val])
        split = Split(train=[i for i in ids if i not in held], validation=[i for i in ids if i in held])
    if not split.train:
        raise ConfigError('every query is held out for validation: none is left to learn from')
    floor = 0.5 ** len(split.validation)
    if floor >= config.alpha:
        need = math.floor(math.log(config.alpha) / math.log(0.5)) + 1
        raise ConfigError(
            f'too few validation queries: {len(split.validation)} of {len(ids)} held out, and with that few the paired '
            f'test cannot reach alpha={config.alpha} (its smallest p is {floor:.3g}), so no change could ever be accepted; '
            f'use at least {need} validation queries (more queries, a larger validation_fraction) or a larger alpha'
        )
    return split


def acceptance_plan(config: OptimizeConfig, split: Split, components: int) -> tuple[float, str]:
    """The level of each acceptance test and the rule in words, with the smallest gain it can accept.

    Each component gets alpha / components (Bonferroni across components); within it, a round's tested
    candidates share it by variants (the train ranking that picked them saw every variant's runs on the
    unseen train queries that the test reuses), and a next round is tested only after an accepted one
    (a fixed sequence), so the chance of freezing any change that does not help stays under alpha."""
    level = config.alpha / max(1, components) / config.variants
    need = math.floor(math.log2(1 / level)) + 1  # fewest improved queries, none hurt, for the exact test's p < level
    n_test = len(split.validation) + len(split.train)
    text = (
        f'acceptance: a variant is frozen when it beats the current text on the {len(split.validation)} validation '
        f'queries ({config.runs} run(s) each) plus the train queries its generator was not shown: one-sided paired '
        f'sign-flip p < {level:.3g} (alpha {config.alpha:g} / {max(1, components)} component(s) / {config.variants} '
        f'variant(s)) and mean gain > {config.margin:g}. With no query hurt that takes at least {need} improved '
        f'queries: a fix must help about {math.ceil(100 * need / n_test)}% or more of the {n_test} queries.'
    )
    return level, text


def validation_test(
    before: PromptEvaluation,
    after: PromptEvaluation,
    *,
    alpha: float,
    margin: float,
    modes: Sequence[str] | None = None,
) -> ValidationTest:
    """One-sided paired sign-flip test over the test queries scored on both sides (query = unit).

    With `modes` (the failure modes of the findings the variant was written from), the test is on those
    modes' scores — the paired test on what the change is meant to fix, which other modes' noise does not
    dilute — and the mean overall score must still gain more than `margin` (the harm guard); without,
    both are on the overall score. A query with an overall score on one side only is left out of the
    pairs and counted (`unpaired`)."""
    pairs = sorted(set(before.per_query) & set(after.per_query))
    unpaired = len(set(before.per_query) ^ set(after.per_query))
    old = [before.per_query[q] for q in pairs]
    new = [after.per_query[q] for q in pairs]
    mean_old = sum(old) / len(old) if old else None
    mean_new = sum(new) / len(new) if new else None
    delta = None if mean_old is None or mean_new is None else mean_new - mean_old
    target = [q for q in pairs if modes and _target(before, q, modes) is not None and _target(after, q, modes) is not None]
    if modes and target:
        t_old = [_target(before, q, modes) or 0.0 for q in target]
        t_new = [_target(after, q, modes) or 0.0 for q in target]
        p = p_better(t_old, t_new)
        target_delta: float | None = (sum(t_new) - sum(t_old)) / len(target)
        on = f'{", ".join(modes)} on {len(target)} test queries'
    else:
        p = p_better(old, new) if pairs else 1.0
        target_delta = delta
        on = f'{len(pairs)} test queries'
    if unpaired:
        on += f'; {unpaired} quer{"y" if unpaired == 1 else "ies"} not judged on one side left out'
    if not pairs:
        accepted, reason = False, 'no test query was scored on both sides'
    elif after.errors > before.errors:
        accepted, reason = False, f'more errors on the test queries ({after.errors} vs {before.errors})'
    elif delta is None or delta <= margin:
        accepted, reason = False, f'overall score gain {delta:+.3f} on {len(pairs)} test queries is not above margin {margin}'
    elif p >= alpha:
        accepted, reason = False, f'gain {target_delta:+.3f} ({on}) is within noise (p={p:.4f} >= {alpha:.3g})'
    else:
        test = f'one-sided exact sign-flip p={p:.4f} < {alpha:.3g}'
        accepted, reason = True, f'gain {target_delta:+.3f} ({on}), {test}; overall {delta:+.3f}'
    ci_low, ci_high = gain_interval(old, new)
    return ValidationTest(
        pairs=len(pairs),
        mean_before=mean_old,
        mean_after=mean_new,
        delta=delta,
        p_value=p,
        alpha=alpha,
        margin=margin,
        errors_before=before.errors,
        errors_after=after.errors,
        accepted=accepted,
        reason=reason,
        ci_low=ci_low,
        ci_high=ci_high,
        modes=list(modes or []),
        target_pairs=len(target),
        target_delta=target_delta,
        unpaired=unpaired,
    )


def stratified_validation(ids: Sequence[str], strata: Mapping[str, str], n_val: int, seed: str) -> set[str]:
    """`n_val` ids for validation, each stratum contributing its share (largest remainders, ties by seed)."""
    groups: dict[str, list[str]] = {}
    for i in ids:
        groups.setdefault(strata.get(i, ''), []).append(i)
    ties = random.Random(f'{seed}:ties')
    fraction = n_val / len(ids)
    quota = {g: len(m) * fraction for g, m in sorted(groups.items())}
    take = {g: math.floor(q) for g, q in quota.items()}
    order = sorted(quota, key=lambda g: (-(quota[g] - take[g]), ties.random()))
    for g in order[: n_val - sum(take.values())]:
        take[g] += 1
    held: set[str] = set()
    for g, members in sorted(groups.items()):
        shuffled = members[:]
        # one group: the same split as without strata
        random.Random(seed if len(groups) == 1 else f'{seed}:{g}').shuffle(shuffled)
        held.update(shuffled[: take[g]])
    return held


def interval_pair(low: float | None, high: float | None) -> tuple[float, float] | None:
    return None if low is None or high is None else (low, high)


def gain_interval(old: Sequence[float], new: Sequence[float]) -> tuple[float | None, float | None]:
    """The 95% paired percentile bootstrap interval of the mean gain, exactly as `validate` computes the
    overall metric's CI with its default seed (0) and resamples: the interval `validate` would show."""
    if len(old) < 2:
        return None, None
    from sensei_eval.validate.stats import DEFAULT_BOOTSTRAP, metric_rng, paired_bootstrap_ci

    ci = paired_bootstrap_ci(old, new, level=0.95, resamples=DEFAULT_BOOTSTRAP, rng=metric_rng(0, 'overall'))
    return float(ci.low), float(ci.high)


def run_profile(name: str | None, queries: Sequence[Query]) -> Profile:
    """The profile named in the config, else the one most of the queries name, else the default."""
    if name is None:
        named: list[str] = [str(q.metadata['profile']) for q in queries if isinstance(q.metadata.get('profile'), str)]
        if not named:
            return DEFAULT_PROFILE
        name = max(dict.fromkeys(named), key=named.count)
    try:
        return resolve_profile(name, BUILTIN_PROFILES)
    except ProfileError as e:
        raise ConfigError(f'profile: {e}') from None


def p_better(old: Sequence[float], new: Sequence[float]) -> float:
    """One-sided p of the exact paired sign-flip test for new > old (`validate.stats.sign_flip_test`)."""
    from sensei_eval.validate.stats import sign_flip_test

    return sign_flip_test(old, new, alternative='better')


def _target(evaluation: PromptEvaluation, query: str, modes: Sequence[str]) -> float | None:
    scores = [s for m in modes if (s := evaluation.per_query_mode.get(query, {}).get(m)) is not None]
    return sum(scores) / len(scores) if scores else None
