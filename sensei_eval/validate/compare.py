"""Pair two sets of judge reports by query and compare them metric by metric.

A *metric* is one judge's verdicts on one failure mode (`core.verdicts.mode_verdicts`: each finding counts
for the mode it is tagged with, so the reference check gives `tool_selection/reference_check` and
`tool_parameters/reference_check`), a judge without a failure mode (e.g. the TARSy
`investigation_score`), or `overall` (the report's `overall_score`). A mode judged by an LLM judge and
by a check is two metrics, never pooled: a checks-only run cannot make the LLM judge's mode "regress".
A metric is named after its mode when its judge is (the LLM judges), else `mode/judge` (`metric_name`).
The two sides must have run the same judges: otherwise `compare_reports` refuses (`JudgeSetError`), or
with `common_judges` compares only the judges both ran. Its value in one report:

* a judge error makes that report's value for each of the judge's metrics an *error*: excluded and
  counted, never a 0.
  `overall` of a report with any judge error is an error too (it would be computed from part of the
  judges), and so is a report no judge judged (no overall score, `core.verdicts`): excluded and
  counted, never a 0 or a 1; a report whose judges were all skipped, or had nothing to inspect
  (`not_applicable`), has no value, which is not an error.
  An inconclusive or smoke verdict (`core.verdicts`) is excluded and counted like an error. A
  `not_applicable` one (the judge had nothing to inspect) is no value and no error, like a skipped judge.

Reports are grouped by query: an id `docs-001#r2` is run 2 of query `docs-001` (the validator's own
runs are named that way), and `RecordReport.repeat` is the re-judging index. A query's value is the
mean over all its runs × re-judgings; it *passes* a metric when a strict majority of those verdicts
passed (an even split is a fail, on both sides alike). A query that passed before and fails after is a
*flip*, the reverse a *fix*.

Each metric gets the test of its rule (`rule`): `flips` — the one-sided exact McNemar on flips vs fixes
— when the metric has pass/fail verdicts on both sides; `scores` — the one-sided paired sign-flip test
of the mean score — when it has scores only (`overall`, score-only judges). A pass/fail metric gets the
sign-flip test of its paired scores as well (`scores`: what moves scores but no verdict, such as a
dropped advisory call, is a change too). Both directions are computed (`p_regression`, `p_improvement`)
with each test's minimum attainable p, from which `gate.decide` builds the Tarone–Holm family (it
depends on alpha, so it is the gate's job).
Queries are paired by id; a query with a value on one side only is listed under `only_old` /
`only_new`, never silently dropped. Noise is estimated per side from the spread across runs and
re-judgings (see `stats.noise_components`).

`compare_reports` computes every number; verdicts and the exit code are added by `gate.decide`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from sensei_eval.core.errors import InputError
from sensei_eval.core.modes import MODES
from sensei_eval.core.reports import RecordReport, rebuild_report
from sensei_eval.core.verdicts import is_missing_verdict, judge_status, mode_verdicts
from sensei_eval.validate import stats
from sensei_eval.validate.gate import decide
from sensei_eval.validate.results import (
    SCORES_TEST,
    Comparison,
    GateResult,
    MetricComparison,
    NoiseSummary,
    ScoreTest,
    SideSummary,
    Thresholds,
)

__all__ = (
    'OVERALL',
    'JudgeSetError',
    'Resampling',
    'compare_reports',
    'judge_names',
    'metric_name',
    'split_run_id',
)

OVERALL = 'overall'
# `<query id>#r<run>`: how the validator names run r of a query (run 1 of a single run keeps the bare id).
_RUN_SUFFIX = re.compile(r'^(?P<base>.+)#r(?P<run>\d+)$')
# z for the two-sided 95% "noise floor" of a mean paired difference.
_Z95 = 1.959963984540054


class JudgeSetError(InputError):
    """The two sides ran different judges (and `common_judges` was not asked for)."""


def split_run_id(query_id: str) -> tuple[str, int]:
    """`docs-001#r2` → (`docs-001`, 2); an id without the suffix is run 1."""
    m = _RUN_SUFFIX.match(query_id)
    if m is None:
        return query_id, 1
    return m['base'], int(m['run'])


@dataclass(frozen=True)
class Resampling:
    """The statistics' randomness: the seed, and how many bootstrap and permutation resamples."""

    seed: int = 0
    bootstrap: int = stats.DEFAULT_BOOTSTRAP
    permutations: int = stats.DEFAULT_PERMUTATIONS


def compare_reports(
    old: Sequence[RecordReport],
    new: Sequence[RecordReport],
    *,
    thresholds: Thresholds | None = None,
    resampling: Resampling | None = None,
    old_side: SideSummary | None = None,
    new_side: SideSummary | None = None,
    common_judges: bool = False,
) -> Comparison:
    """Pair `old` and `new` by query, compute every metric's statistics, then the verdicts and gate.

    Sides that ran different judges are refused (`JudgeSetError`: a metric present on one side only is
    no comparison) unless `common_judges`: then only the judges both ran are compared, each report's
    scores recomputed from those judges."""
    thresholds = thresholds or Thresholds()
    resampling = resampling or Resampling()
    old_judges, new_judges = judge_names(old), judge_names(new)
    warnings: list[str] = []
    if old_judges != new_judges:
        if not common_judges:
            raise JudgeSetError(
                'the two sides ran different judges (old only: '
                + (', '.join(sorted(old_judges - new_judges)) or 'none')
                + '; new only: '
                + (', '.join(sorted(new_judges - old_judges)) or 'none')
                + '); compare only the judges both have with --common-judges'
            )
        keep = old_judges & new_judges
        kept, left_out = ', '.join(sorted(keep)) or 'none', ', '.join(sorted(old_judges ^ new_judges))
        warnings.append(f'compared only the judges both sides ran (--common-judges): {kept}; left out: {left_out}')
        old, new = _only_judges(old, keep), _only_judges(new, keep)
    known = _known_modes(old, new)
    old_obs = _extract(old, known)
    new_obs = _extract(new, known)
    old_summary = _side_summary(old, old_side or SideSummary(label='old'))
    new_summary = _side_summary(new, new_side or SideSummary(label='new'))

    old_queries = {split_run_id(r.query_id)[0] for r in old}
    new_queries = {split_run_id(r.query_id)[0] for r in new}
    old_queries |= {e.query_id for e in old_summary.run_errors}
    new_queries |= {e.query_id for e in new_summary.run_errors}

    metrics = _ordered_metrics(set(old_obs.metrics) | set(new_obs.metrics), {**old_obs.modes, **new_obs.modes})
    sides = (old_obs, new_obs, old_summary, new_summary)
    results = [_compare_metric(name, sides, thresholds.ci_level, resampling) for name in metrics]
    comparison = Comparison(
        thresholds=thresholds,
        seed=resampling.seed,
        bootstrap_resamples=resampling.bootstrap,
        permutation_resamples=resampling.permutations,
        old=old_summary,
        new=new_summary,
        only_old=sorted(old_queries - new_queries),
        only_new=sorted(new_queries - old_queries),
        warnings=[*warnings, *_warnings(old_summary, new_summary)],
        metrics=results,
        gate=GateResult(exit_code=0, passed=True),
    )
    decide(comparison)
    return comparison


# ---------------------------------------------------------------------------------------------------
# Observations


@dataclass
class _Cell:
    """One metric on one report: a value, or an error."""

    score: float | None = None
    passed: bool | None = None
    error: bool = False


@dataclass
class _Observations:
    """metric → query → run → repeat → cell, plus each metric's kind and judges."""

    metrics: dict[str, dict[str, dict[int, dict[int, _Cell]]]] = field(default_factory=dict)
    kinds: dict[str, Literal['overall', 'failure_mode', 'judge']] = field(default_factory=dict)
    judges: dict[str, set[str]] = field(default_factory=dict)
    modes: dict[str, str | None] = field(default_factory=dict)

    def put(self, metric: str, query: str, run: int, repeat: int, cell: _Cell) -> None:
        self.metrics.setdefault(metric, {}).setdefault(query, {}).setdefault(run, {})[repeat] = cell


def metric_name(judge: str, mode: str | None) -> str:
    """A metric's name: the mode when its judge is named after it (the LLM judges), `mode/judge` for a
    judge reporting a mode under another name (a check), the judge's name for a judge without a mode."""
    if mode is None or mode == judge:
        return mode or judge
    return f'{mode}/{judge}'


def _extract(reports: Sequence[RecordReport], known: dict[str, set[str | None]] | None = None) -> _Observations:
    """Every (judge, mode) verdict of every report (`reports.mode_verdicts`): one metric per judge and mode,
    so a check's and an LLM judge's verdicts on the same mode are compared separately. `known`: the modes
    each judge reported anywhere (either side); an errored judge is an error on each of them."""
    obs = _Observations()
    for report in reports:
        query, run = split_run_id(report.query_id)
        for (name, mode), verdict in mode_verdicts(report).items():
            if verdict.status == 'not_applicable':  # nothing to inspect: no value, and no error either
                continue
            modes = [mode]
            if not verdict.judged and known is not None:
                modes = sorted(known.get(name) or {mode}, key=lambda m: m or '')
            for m in modes:
                metric = metric_name(name, m)
                obs.kinds[metric] = 'failure_mode' if m else 'judge'
                obs.judges.setdefault(metric, set()).add(name)
                obs.modes[metric] = m
                # not a verdict (error, inconclusive, smoke): excluded and counted, never a 0 or a 1
                cell = _Cell(error=True) if not verdict.judged else _Cell(score=verdict.score, passed=verdict.passed)
                obs.put(metric, query, run, report.repeat, cell)
        nothing_applied = report.coverage is not None and report.coverage.applied == 0 and not report.errors
        if report.judges and not nothing_applied:  # a run where nothing applied has no value, like an all-skipped one
            obs.kinds[OVERALL] = 'overall'
            if report.errors or report.overall_score is None:  # "not judged" too: excluded and counted
                obs.put(OVERALL, query, run, report.repeat, _Cell(error=True))
            else:
                obs.put(OVERALL, query, run, report.repeat, _Cell(score=report.overall_score))
    return obs


def _known_modes(*sides: Sequence[RecordReport]) -> dict[str, set[str | None]]:
    known: dict[str, set[str | None]] = {}
    for reports in sides:
        for report in reports:
            for name, mode in mode_verdicts(report):
                known.setdefault(name, set()).add(mode)
    return known


def judge_names(reports: Sequence[RecordReport]) -> set[str]:
    """The judges a side ran: every judge with a result on any report, or skipped as not applying to one."""
    return {n for r in reports for n in (*r.judges, *r.skipped)}


def _only_judges(reports: Sequence[RecordReport], keep: set[str]) -> list[RecordReport]:
    """The reports with only the judges in `keep`, every score and verdict recomputed from them."""
    out = []
    for report in reports:
        if set(report.judges) <= keep and set(report.skipped) <= keep:
            out.append(report)
            continue
        trimmed = report.model_copy(update={'skipped': {k: v for k, v in report.skipped.items() if k in keep}})
        out.append(rebuild_report(trimmed, [r for n, r in report.judges.items() if n in keep]))
    return out


def _ordered_metrics(names: set[str], modes: dict[str, str | None]) -> list[str]:
    """Failure-mode metrics in the standard mode order (a mode's judges by name), then judges, then overall."""
    order = list(MODES)
    by_mode = sorted(
        (n for n in names if modes.get(n) is not None),
        key=lambda n: (order.index(m) if (m := modes.get(n)) in order else len(order), str(modes.get(n)), n != modes.get(n), n),
    )
    others = sorted(n for n in names if modes.get(n) is None and n != OVERALL)
    return [*by_mode, *others, *([OVERALL] if OVERALL in names else [])]


# ---------------------------------------------------------------------------------------------------
# One metric


@dataclass
class _QueryValues:
    """A query's mean score and pass rate on one side, and the raw values for the noise estimate."""

    score: float | None
    pass_rate: float | None
    cells: dict[int, list[float]]


def _per_query(data: dict[str, dict[int, dict[int, _Cell]]]) -> tuple[dict[str, _QueryValues], int, int]:
    values: dict[str, _QueryValues] = {}
    errors = observations = 0
    for query, runs in data.items():
        scores: list[float] = []
        passes: list[bool] = []
        cells: dict[int, list[float]] = {}
        for run, repeats in runs.items():
            for cell in repeats.values():
                if cell.error:
                    errors += 1
                    continue
                if cell.score is not None:
                    observations += 1
                    scores.append(cell.score)
                    cells.setdefault(run, []).append(cell.score)
                if cell.passed is not None:
                    passes.append(cell.passed)
        if scores or passes:
            values[query] = _QueryValues(
                sum(scores) / len(scores) if scores else None,
                sum(passes) / len(passes) if passes else None,
                cells,
            )
    return values, errors, observations


def _compare_metric(
    name: str,
    sides: tuple[_Observations, _Observations, SideSummary, SideSummary],
    level: float,
    resampling: Resampling,
) -> MetricComparison:
    """One metric compared: `sides` are the old and the new observations, then the old and the new summary."""
    old_obs, new_obs, old_side, new_side = sides
    bootstrap_resamples, permutation_resamples = resampling.bootstrap, resampling.permutations
    old_values, old_errors, old_n = _per_query(old_obs.metrics.get(name, {}))
    new_values, new_errors, new_n = _per_query(new_obs.metrics.get(name, {}))
    kind = old_obs.kinds.get(name) or new_obs.kinds.get(name) or 'judge'
    judges = sorted(old_obs.judges.get(name, set()) | new_obs.judges.get(name, set()))
    both = old_values.keys() & new_values.keys()
    scored = sorted(q for q in both if old_values[q].score is not None and new_values[q].score is not None)
    result = MetricComparison(
        metric=name,
        kind=kind,
        failure_mode=old_obs.modes.get(name) or new_obs.modes.get(name),
        judges=judges,
        n_pairs=len(scored),
        ci_level=level,
        errors_old=old_errors,
        errors_new=new_errors,
        observations_old=old_n,
        observations_new=new_n,
        only_old=sorted(q for q in old_values if q not in scored),
        only_new=sorted(q for q in new_values if q not in scored),
    )
    result.noise_old = _noise({q: old_values[q].cells for q in scored}, old_side)
    result.noise_new = _noise({q: new_values[q].cells for q in scored}, new_side)
    if not scored:
        return result
    before = [old_values[q].score for q in scored]
    after = [new_values[q].score for q in scored]
    b = [x for x in before if x is not None]
    a = [x for x in after if x is not None]
    result.per_query = {q: (o, n) for q, o, n in zip(scored, b, a, strict=True)}
    result.old_mean = float(np.mean(b))
    result.new_mean = float(np.mean(a))
    result.delta = result.new_mean - result.old_mean
    # each metric's randomness from (seed, metric name): its interval and p do not depend on which other
    # metrics were compared before it, and the optimizer reproduces the overall's interval exactly
    seed = resampling.seed
    ci = stats.paired_bootstrap_ci(b, a, level=level, resamples=bootstrap_resamples, rng=stats.metric_rng(seed, name))
    result.ci_low, result.ci_high = ci.low, ci.high
    result.p_value = stats.sign_flip_test(b, a, resamples=permutation_resamples, rng=stats.metric_rng(seed, name))
    result.effect_size_dz = stats.cohens_dz(b, a)
    result.effect_label = stats.effect_label(result.effect_size_dz)

    passed = [q for q in scored if old_values[q].pass_rate is not None and new_values[q].pass_rate is not None]
    if passed:
        old_rates = [old_values[q].pass_rate or 0.0 for q in passed]
        new_rates = [new_values[q].pass_rate or 0.0 for q in passed]
        result.old_pass_rate = float(np.mean(old_rates))
        result.new_pass_rate = float(np.mean(new_rates))
        old_pass = [r > 0.5 for r in old_rates]  # a strict majority of the query's verdicts
        new_pass = [r > 0.5 for r in new_rates]
        worse = stats.flip_test(old_pass, new_pass, alternative='worse')
        better = stats.flip_test(old_pass, new_pass, alternative='better')
        result.rule = 'flips'
        result.mcnemar_b, result.mcnemar_c = worse.flips, worse.fixes
        result.mcnemar_p = stats.mcnemar_exact(old_pass, new_pass).p_value
        result.p_regression, result.p_improvement = worse.p_value, better.p_value
        result.min_attainable_p = worse.min_attainable_p
        # what moved the scores but no verdict (an advisory call dropped, a minor finding) is tested too
        rng = stats.metric_rng(seed, name + SCORES_TEST)
        result.scores = ScoreTest(
            p_regression=stats.sign_flip_test(b, a, resamples=permutation_resamples, rng=rng, alternative='worse'),
            p_improvement=stats.sign_flip_test(b, a, resamples=permutation_resamples, rng=rng, alternative='better'),
            min_attainable_p=stats.sign_flip_min_p(b, a, resamples=permutation_resamples),
        )
    else:
        result.rule = 'scores'
        rng = stats.metric_rng(seed, name)
        result.p_regression = stats.sign_flip_test(b, a, resamples=permutation_resamples, rng=rng, alternative='worse')
        result.p_improvement = stats.sign_flip_test(b, a, resamples=permutation_resamples, rng=rng, alternative='better')
        result.min_attainable_p = stats.sign_flip_min_p(b, a, resamples=permutation_resamples)

    variances = [n.query_mean_var for n in (result.noise_old, result.noise_new) if n and n.query_mean_var is not None]
    if variances:
        # a side without a measurement is assumed as noisy as the measured one
        total = sum(variances) * (2 / len(variances))
        result.noise_floor = _Z95 * float(np.sqrt(total / len(scored)))
        result.within_noise = abs(result.delta) < result.noise_floor
    return result


def _noise(cells: dict[str, dict[int, list[float]]], side: SideSummary) -> NoiseSummary:
    est = stats.noise_components(cells, runs=side.runs, repeats=side.repeats)
    return NoiseSummary(judge_var=est.judge_var, agent_var=est.agent_var, run_var=est.run_var, query_mean_var=est.query_mean_var)


# ---------------------------------------------------------------------------------------------------
# Sides


def _side_summary(reports: Sequence[RecordReport], side: SideSummary) -> SideSummary:
    side = side.model_copy(deep=True)
    runs: set[int] = set()
    repeats: set[int] = set()
    queries: set[str] = set()
    hashes: dict[str, str] = dict(side.criteria_hashes)
    for report in reports:
        query, run = split_run_id(report.query_id)
        queries.add(query)
        runs.add(run)
        repeats.add(report.repeat)
        hashes.update(report.criteria_hashes)
        for name, result in report.judges.items():
            side.judge_results += 1
            status = judge_status(result)  # inconclusive and smoke are no verdict: they count against the error rate
            if is_missing_verdict(status):
                side.judge_errors += 1
                side.judge_error_messages.append(f'{report.query_id} (repeat {report.repeat}) {name}: {status}: {result.error}')
        if report.prompt_version and report.prompt_version not in side.prompt_versions:
            side.prompt_versions.append(report.prompt_version)
        if report.model and report.model not in side.models:
            side.models.append(report.model)
    side.queries = len(queries | {e.query_id for e in side.run_errors})
    side.reports = len(reports)
    side.runs = max(side.runs, max(runs, default=1))
    side.repeats = max(side.repeats, max(repeats, default=1))
    side.criteria_hashes = hashes
    if not side.run_attempts:
        side.run_attempts = len({split_run_id(r.query_id) for r in reports}) + len(side.run_errors)
    return side


def _warnings(old: SideSummary, new: SideSummary) -> list[str]:
    out: list[str] = []
    common = old.criteria_hashes.keys() & new.criteria_hashes.keys()
    changed = sorted(j for j in common if old.criteria_hashes[j] != new.criteria_hashes[j])
    if changed:
        out.append(
            'judge criteria differ between the two sides (' + ', '.join(changed) + '): '
            'deltas mix the prompt change with the rubric change'
        )
    only = sorted(old.criteria_hashes.keys() ^ new.criteria_hashes.keys())
    if only:
        out.append('judges present on one side only: ' + ', '.join(only))
    if old.models and new.models and set(old.models) != set(new.models):
        out.append(f'judge models differ: old {", ".join(old.models)}; new {", ".join(new.models)}')
    return out
