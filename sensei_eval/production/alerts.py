"""Degradation alerts: is an agent's current window of judged runs worse than its baseline?

Production traffic is judged continuously (the sampler picks the runs); a prompt change or a drifting tool
shows up as a failure mode whose rate climbs or a mean score that sinks. Comparing two windows with a plain
threshold flaps on noise, and testing after every run at 5% would fire on a stable stream within a few hundred
runs. So the rule is deliberately conservative:

* **Windows.** Per agent and prompt version: the *baseline* is the version's first `baseline_size` judged runs;
  the *current* window is its last `window_size` runs. A new prompt version starts its own baseline, and while
  that baseline fills (and for as long as an alert raised against it is firing) the version is compared with
  its predecessor's baseline, so a regression that arrives *with* a version change is still caught and never
  becomes the new normal.
* **Test.** Per failure mode: one-sided Fisher exact test of current failures vs baseline failures (a verdict
  counts only when the judge ran and was conclusive). Mean score: one-sided Mann-Whitney U (current lower).
* **Fire** when p < `alpha`, both windows hold at least `min_runs` verdicts, and the effect is at least
  `min_effect` (rate points, or score points). `alpha` defaults to 0.001 because the test repeats after every
  run: 1,000 runs of a stable stream must not fire.
* **Hysteresis.** A firing alert resolves only after `resolve_after` consecutive evaluations with p > `alpha_resolve`
  and an effect below half of `min_effect`; until then the same (agent, version, metric) never fires again.

The monitor holds only the windows (bounded deques), so it costs O(window) memory per agent and version.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from sensei_eval.core.reports import RecordReport
from sensei_eval.core.verdicts import mode_verdicts

__all__ = ('Alert', 'AlertEvent', 'AlertMonitor', 'AlertRule', 'JudgedRun', 'MetricChange', 'judged_run')

MEAN_SCORE = 'mean_score'


class AlertRule(BaseModel):
    """The knobs of the degradation rule (see the module docstring for why the defaults are what they are)."""

    baseline_size: int = Field(200, ge=10, description='Judged runs of a version that form its baseline.')
    window_size: int = Field(100, ge=10, description='The most recent judged runs compared with the baseline.')
    min_runs: int = Field(30, ge=5, description='Verdicts each window needs before a metric is tested.')
    alpha: float = Field(0.001, gt=0, lt=1, description='p-value under which an alert fires.')
    alpha_resolve: float = Field(0.2, gt=0, lt=1, description='p-value over which a firing alert may resolve.')
    min_effect: float = Field(0.1, ge=0, description='Smallest worsening (rate or score points) worth an alert.')
    resolve_after: int = Field(20, ge=1, description='Consecutive quiet evaluations before an alert resolves.')


class MetricChange(BaseModel):
    """One metric that got worse: its baseline and current values and the test's p-value."""

    metric: str = Field(description="'failure_rate:<mode>' or 'mean_score'.")
    baseline_value: float
    current_value: float
    baseline_n: int
    current_n: int
    p_value: float


class Alert(BaseModel):
    """One degradation of one agent version: the metrics that got worse, against which baseline."""

    id: str
    agent: str
    prompt_version: str
    baseline_version: str = Field(description='The version whose baseline the current window was compared with.')
    metrics: list[MetricChange]
    status: Literal['firing', 'resolved'] = 'firing'
    fired_at: datetime
    resolved_at: datetime | None = None
    message: str


@dataclass(frozen=True)
class AlertEvent:
    """What changed: an alert `fired`, gained a metric (`updated`), or `resolved`."""

    kind: Literal['fired', 'updated', 'resolved']
    alert: Alert


@dataclass(frozen=True)
class JudgedRun:
    """What the monitor needs of one judged run: per failure mode failed or not (conclusive verdicts only)."""

    agent: str
    prompt_version: str
    failed: Mapping[str, bool]
    score: float | None
    at: datetime | None = None


def judged_run(report: RecordReport, agent: str | None = None) -> JudgedRun:
    """The monitor's view of an issue report (`core.verdicts`): per failure mode of every judge's verdict;
    inconclusive, errored and smoke verdicts are left out, never a pass; a run not judged has no score."""
    failed: dict[str, bool] = {}
    for verdict in mode_verdicts(report).values():  # the verdict model's: smoke and inconclusive are no verdict
        if not verdict.judged or not verdict.failure_mode:
            continue
        failed[verdict.failure_mode] = failed.get(verdict.failure_mode, False) or verdict.status == 'fail'
    return JudgedRun(
        agent=agent or report.profile or 'default',
        prompt_version=report.prompt_version or 'unversioned',
        failed=failed,
        score=report.overall_score,
        at=report.evaluated_at,
    )


@dataclass
class _Window:
    """Bounded per-metric history of one version: the frozen baseline and the rolling current window."""

    baseline: dict[str, list[float]] = field(default_factory=dict)
    baseline_runs: int = 0
    current: dict[str, deque[float]] = field(default_factory=dict)
    accepted: bool = False  # the baseline is complete and was not formed under a firing alert


@dataclass
class _Firing:
    alert: Alert
    quiet: dict[str, int] = field(default_factory=dict)  # metric -> consecutive quiet evaluations


class AlertMonitor:
    """Feeds judged runs in order and returns the alerts that fire or resolve; holds only bounded windows."""

    def __init__(self, rule: AlertRule | None = None) -> None:
        self.rule = rule or AlertRule()
        self._versions: dict[tuple[str, str], _Window] = {}
        self._order: dict[str, list[str]] = {}  # agent -> its versions in order of first appearance
        self._firing: dict[tuple[str, str], _Firing] = {}  # one open alert per agent version

    @property
    def firing(self) -> list[Alert]:
        """The alerts open now."""
        return [f.alert for f in self._firing.values()]

    def observe(self, run: JudgedRun) -> list[AlertEvent]:
        """Add one run; returns alerts that fired or resolved because of it (usually none)."""
        key = (run.agent, run.prompt_version)
        window = self._versions.get(key)
        if window is None:
            window = self._versions[key] = _Window()
            self._order.setdefault(run.agent, []).append(run.prompt_version)
        values: dict[str, float] = {f'failure_rate:{m}': float(bad) for m, bad in run.failed.items()}
        if run.score is not None:
            values[MEAN_SCORE] = run.score
        if not window.accepted and window.baseline_runs < self.rule.baseline_size:
            for metric, v in values.items():
                window.baseline.setdefault(metric, []).append(v)
            window.baseline_runs += 1
        for metric, v in values.items():
            window.current.setdefault(metric, deque(maxlen=self.rule.window_size)).append(v)
        changes = self._evaluate(run, window)
        if not window.accepted and window.baseline_runs >= self.rule.baseline_size:
            if key in self._firing:
                # a baseline filled while this version is firing would make the regression the new normal:
                # start it again, it is accepted once a full baseline passes without a firing alert
                window.baseline, window.baseline_runs = {}, 0
            else:
                window.accepted = True
        return changes

    def observe_all(self, runs: Iterable[JudgedRun]) -> list[AlertEvent]:
        return [a for run in runs for a in self.observe(run)]

    def _reference(self, agent: str, version: str) -> tuple[str, _Window] | None:
        """The baseline this version is judged against: its own once accepted, else the latest accepted before it."""
        own = self._versions[(agent, version)]
        if own.accepted:
            return version, own
        versions = self._order[agent]
        for earlier in reversed(versions[: versions.index(version)]):
            if self._versions[(agent, earlier)].accepted:
                return earlier, self._versions[(agent, earlier)]
        return None

    def _evaluate(self, run: JudgedRun, window: _Window) -> list[AlertEvent]:
        reference = self._reference(run.agent, run.prompt_version)
        if reference is None:
            return []
        base_version, base = reference
        outcomes = {
            metric: o
            for metric in sorted(window.current)
            if (o := _compare(metric, base.baseline.get(metric, []), list(window.current[metric]), self.rule)) is not None
        }
        worse = [_change(m, o) for m, o in outcomes.items() if o.fires(self.rule)]
        key = (run.agent, run.prompt_version)
        firing = self._firing.get(key)
        if firing is None:
            if not worse:
                return []
            alert = _new_alert(run, base_version, worse)
            self._firing[key] = _Firing(alert, {c.metric: 0 for c in worse})
            return [AlertEvent('fired', alert)]
        events: list[AlertEvent] = []
        known = {c.metric for c in firing.alert.metrics}
        added = [c for c in worse if c.metric not in known]
        if added:
            firing.alert = firing.alert.model_copy(update={'metrics': [*firing.alert.metrics, *added]})
            firing.quiet.update({c.metric: 0 for c in added})
            events.append(AlertEvent('updated', firing.alert))
        for metric in firing.quiet:
            o = outcomes.get(metric)
            firing.quiet[metric] = firing.quiet[metric] + 1 if o is None or o.quiet(self.rule) else 0
        if all(n >= self.rule.resolve_after for n in firing.quiet.values()):
            resolved = firing.alert.model_copy(update={'status': 'resolved', 'resolved_at': run.at or _now()})
            del self._firing[key]
            events.append(AlertEvent('resolved', resolved))
        return events


@dataclass(frozen=True)
class _Outcome:
    baseline_value: float
    current_value: float
    baseline_n: int
    current_n: int
    p_value: float
    worsening: float

    def fires(self, rule: AlertRule) -> bool:
        enough = min(self.baseline_n, self.current_n) >= rule.min_runs
        return enough and self.p_value < rule.alpha and self.worsening >= rule.min_effect

    def quiet(self, rule: AlertRule) -> bool:
        return self.p_value > rule.alpha_resolve and self.worsening < rule.min_effect / 2


def _compare(metric: str, baseline: list[float], current: list[float], rule: AlertRule) -> _Outcome | None:
    """One-sided exact comparison of the current window against the baseline: is current worse?

    The test runs only when the effect is large enough to matter (an effect under `min_effect` can neither fire
    nor change whether a firing alert is quiet), which keeps a stable stream cheap to watch.
    """
    if not baseline or not current:
        return None
    n_b, n_c = len(baseline), len(current)
    value_b, value_c = sum(baseline) / n_b, sum(current) / n_c
    worsening = value_b - value_c if metric == MEAN_SCORE else value_c - value_b
    p = 1.0
    if worsening >= rule.min_effect and min(n_b, n_c) >= rule.min_runs:
        from scipy.stats import fisher_exact, mannwhitneyu  # the stats extra, needed only when a window worsened

        if metric == MEAN_SCORE:
            if len(set(baseline) | set(current)) > 1:
                p = float(mannwhitneyu(current, baseline, alternative='less').pvalue)
        else:
            bad_b, bad_c = round(sum(baseline)), round(sum(current))
            table = [[bad_c, n_c - bad_c], [bad_b, n_b - bad_b]]
            p = float(fisher_exact(table, alternative='greater').pvalue)
    return _Outcome(value_b, value_c, n_b, n_c, p, worsening)


def _change(metric: str, o: _Outcome) -> MetricChange:
    return MetricChange(
        metric=metric,
        baseline_value=o.baseline_value,
        current_value=o.current_value,
        baseline_n=o.baseline_n,
        current_n=o.current_n,
        p_value=o.p_value,
    )


def _new_alert(run: JudgedRun, baseline_version: str, worse: list[MetricChange]) -> Alert:
    at = run.at or _now()
    since = '' if baseline_version == run.prompt_version else f' (baseline: version {baseline_version})'
    what = '; '.join(f'{_label(c.metric)} {c.baseline_value:.2f} -> {c.current_value:.2f} (p={c.p_value:.2g})' for c in worse)
    digest = hashlib.sha256(f'{run.agent}\0{run.prompt_version}\0{at.isoformat()}'.encode()).hexdigest()
    return Alert(
        id=digest[:16],
        agent=run.agent,
        prompt_version=run.prompt_version,
        baseline_version=baseline_version,
        metrics=worse,
        fired_at=at,
        message=f'{run.agent} {run.prompt_version}: {what} over the last {worse[0].current_n} runs{since}',
    )


def _label(metric: str) -> str:
    return 'mean score' if metric == MEAN_SCORE else metric.removeprefix('failure_rate:') + ' failure rate'


def _now() -> datetime:
    return datetime.now(UTC)
