"""The results of a before/after comparison: its metrics with their verdicts, the two sides, the gate's
thresholds and result. Data only, so the comparing (`compare`) and the deciding (`gate`) both read it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sensei_eval.validate import stats

__all__ = (
    'SCORES_TEST',
    'Comparison',
    'GateResult',
    'MetricComparison',
    'NoiseSummary',
    'RunError',
    'ScoreTest',
    'SideSummary',
    'Thresholds',
    'Verdict',
    '__all__',
)


class Thresholds(BaseModel):
    """The gate's knobs; every one is a CLI option of the same name."""

    model_config = ConfigDict(frozen=True)

    alpha: float = Field(0.05, gt=0, lt=1, description='Family-wise significance level (Tarone–Holm across metrics).')
    max_drop: float = Field(0.05, ge=0, description='Largest tolerated drop of the overall mean score (0-1 scale).')
    min_effect: float = Field(
        0.0, ge=0, description='Smallest |Δ| (of the pass rate under the flip rule, else the mean) that counts as a change.'
    )
    max_error_rate: float = Field(0.0, ge=0, le=1, description='Tolerated fraction of errored agent runs / judge calls.')
    ci_level: float = Field(0.95, gt=0, lt=1, description='Level of the bootstrap confidence intervals.')
    allow: tuple[str, ...] = Field(
        (),
        description='Failure modes or metrics (`mode/judge`, `overall`) whose regression is reported, not gated (--allow MODE).',
    )


class GateResult(BaseModel):
    """The gate's decision and every reason for it."""

    exit_code: int
    passed: bool
    reasons: list[str] = Field(default_factory=list)
    regressed: list[str] = Field(default_factory=list)
    improved: list[str] = Field(default_factory=list)
    allowed: list[str] = Field(
        default_factory=list, description='Regressed metrics the user allowed by name (--allow): reported, not failed.'
    )
    family: list[str] = Field(
        default_factory=list,
        description="Tests whose regression p counted in the correction: a metric's name for its rule's test, "
        "`<metric> (scores)` for the sign-flip test of a pass/fail metric's scores.",
    )
    dropped: dict[str, str] = Field(
        default_factory=dict,
        description='Tests left out of the family (they could not be significant), with why; a metric whose tests were '
        'all dropped is one entry under its name.',
    )
    tarone_k: int = Field(1, description="Tarone's K at the first step: the multiplier of the smallest p.")


# `no_change`: neither a verdict nor a score moved; `not_significant`: something moved, but no test of the
# family found it significant (or the effect was below --min-effect, or within the noise floor).
Verdict = Literal['improved', 'regressed', 'no_change', 'not_significant', 'insufficient_data']

# The suffix of a pass/fail metric's second test (the sign-flip test of its scores) in the family.
SCORES_TEST = ' (scores)'


class RunError(BaseModel):
    """An agent run that raised: it produced no record, so it is counted, not judged."""

    query_id: str
    run: int
    message: str


class NoiseSummary(BaseModel):
    """One side's noise for one metric (variances of the 0-1 score; None = not measurable)."""

    judge_var: float | None = Field(description='Mean variance across J re-judgings of one transcript.')
    agent_var: float | None = Field(description='Mean variance across R runs of one query, judge noise removed.')
    run_var: float | None = Field(description='Mean variance across R runs of the per-run mean (agent + judge/J).')
    query_mean_var: float | None = Field(description="Noise variance of one query's mean score.")


class ScoreTest(BaseModel):
    """A pass/fail metric's second test: the one-sided exact sign-flip test of its paired score differences, in
    the same Tarone–Holm family as every metric's rule test (a regression that moves scores but not verdicts,
    such as missing advisory calls, is found by it)."""

    p_regression: float | None = None
    p_improvement: float | None = None
    min_attainable_p: float | None = None
    p_adjusted: float | None = Field(None, description='p_regression, Tarone–Holm adjusted (None: not in the family).')
    p_adjusted_improvement: float | None = None
    in_family: bool = False
    dropped_reason: str | None = None


class MetricComparison(BaseModel):
    """Before/after for one metric over the paired queries."""

    metric: str
    kind: Literal['overall', 'failure_mode', 'judge']
    failure_mode: str | None = Field(None, description='The failure mode of a failure-mode metric.')
    judges: list[str] = Field(default_factory=list)
    n_pairs: int
    old_mean: float | None = None
    new_mean: float | None = None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float = 0.95
    rule: Literal['flips', 'scores'] | None = Field(
        None, description="The gate's test: flips (one-sided exact McNemar) with pass/fail, else scores (sign-flip)."
    )
    p_value: float | None = Field(None, description='Two-sided paired sign-flip permutation test of the mean difference.')
    p_regression: float | None = Field(None, description="One-sided p of the rule's test for a change for the worse.")
    p_improvement: float | None = Field(None, description="One-sided p of the rule's test for a change for the better.")
    min_attainable_p: float | None = Field(
        None, description="Smallest p the rule's test can give with this many discordant queries (nonzero differences)."
    )
    p_adjusted: float | None = Field(None, description='p_regression, Tarone–Holm adjusted (None: not in the family).')
    p_adjusted_improvement: float | None = Field(None, description='p_improvement, Tarone–Holm adjusted in its own family.')
    in_family: bool = Field(False, description='Counted in the multiple-testing family of the regression tests.')
    dropped_reason: str | None = Field(None, description='Why the metric was left out of the family.')
    effect_size_dz: float | None = Field(None, description="Cohen's d_z: mean difference / SD of the differences.")
    effect_label: str = 'n/a'
    old_pass_rate: float | None = None
    new_pass_rate: float | None = None
    mcnemar_b: int | None = Field(None, description='Flips: queries that went pass → fail.')
    mcnemar_c: int | None = Field(None, description='Fixes: queries that went fail → pass.')
    mcnemar_p: float | None = Field(None, description='Two-sided exact McNemar p (shown; the gate uses p_regression).')
    noise_old: NoiseSummary | None = None
    noise_new: NoiseSummary | None = None
    noise_floor: float | None = Field(None, description='1.96 × SD of the mean difference that noise alone gives.')
    within_noise: bool | None = None
    errors_old: int = 0
    errors_new: int = 0
    observations_old: int = 0
    observations_new: int = 0
    only_old: list[str] = Field(default_factory=list)
    only_new: list[str] = Field(default_factory=list)
    per_query: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description='Paired query means (old, new): the data every statistic above is computed from.'
    )
    scores: ScoreTest | None = Field(
        None, description='For a pass/fail metric (rule flips), the sign-flip test of its paired scores, in the same family.'
    )
    verdict: Verdict = 'insufficient_data'
    explanation: str = ''

    @property
    def moved(self) -> bool:
        """Some query's verdict or score differs between the two sides (else the verdict is `no_change`)."""
        return bool(self.mcnemar_b or self.mcnemar_c) or any(old != new for old, new in self.per_query.values())

    @property
    def flips(self) -> int | None:
        """Queries that passed before and fail after."""
        return self.mcnemar_b

    @property
    def fixes(self) -> int | None:
        """Queries that failed before and pass after."""
        return self.mcnemar_c


class SideSummary(BaseModel):
    """What one side (old or new) consisted of."""

    label: str
    source: str | None = None
    prompt_versions: list[str] = Field(default_factory=list)
    queries: int = 0
    reports: int = 0
    runs: int = 1
    repeats: int = 1
    judge_results: int = 0
    judge_errors: int = 0
    judge_error_messages: list[str] = Field(default_factory=list)
    run_attempts: int = 0
    run_errors: list[RunError] = Field(default_factory=list)
    criteria_hashes: dict[str, str] = Field(default_factory=dict)
    models: list[str] = Field(default_factory=list)


class Comparison(BaseModel):
    """Everything the validator computed: `comparison.json`."""

    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    thresholds: Thresholds
    correction: str = 'tarone-holm'
    seed: int = 0
    bootstrap_resamples: int = stats.DEFAULT_BOOTSTRAP
    permutation_resamples: int = stats.DEFAULT_PERMUTATIONS
    old: SideSummary
    new: SideSummary
    only_old: list[str] = Field(default_factory=list, description='Queries with reports on the old side only.')
    only_new: list[str] = Field(default_factory=list, description='Queries with reports on the new side only.')
    warnings: list[str] = Field(default_factory=list)
    metrics: list[MetricComparison] = Field(default_factory=list)
    gate: GateResult

    def metric(self, name: str) -> MetricComparison:
        """The metric `name`; a bare mode name finds its metric when one judge alone reported that mode."""
        for m in self.metrics:
            if m.metric == name:
                return m
        of_mode = [m for m in self.metrics if m.failure_mode == name]
        if len(of_mode) == 1:
            return of_mode[0]
        raise KeyError(f'no metric {name!r}; metrics: {", ".join(m.metric for m in self.metrics)}')

    @property
    def exit_code(self) -> int:
        return self.gate.exit_code
