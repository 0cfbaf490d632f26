"""Degradation alerts over simulated streams of judged runs."""

from __future__ import annotations

import random
from collections.abc import Iterator

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, build_report
from sensei_eval.production.alerts import AlertMonitor, AlertRule, JudgedRun, judged_run

MODES = ('hallucination', 'tool_selection', 'reference_check', 'citation', 'version_mismatch')


def stream(
    seed: int, n: int = 1000, *, change_at: int | None = None, mode: str = 'citation', bad: float = 0.4
) -> Iterator[JudgedRun]:
    """Runs of one agent at a 5% failure rate per mode; from `change_at` on, version v2 fails `mode` at `bad`."""
    rng = random.Random(seed)
    for i in range(n):
        version = 'v1' if change_at is None or i < change_at else 'v2'
        failed = {m: rng.random() < (bad if version == 'v2' and m == mode else 0.05) for m in MODES}
        yield JudgedRun('docs', version, failed, 1 - sum(failed.values()) / len(MODES))


def test_a_planted_regression_after_a_version_change_fires_exactly_one_alert() -> None:
    for seed in range(5):
        events = AlertMonitor().observe_all(stream(seed, change_at=500))
        fired = [e.alert for e in events if e.kind == 'fired']
        assert len(fired) == 1, [e.alert.message for e in events]
        alert = fired[0]
        assert (alert.agent, alert.prompt_version, alert.baseline_version) == ('docs', 'v2', 'v1')
        assert alert.metrics[0].metric == 'failure_rate:citation'
        assert alert.metrics[0].current_value > alert.metrics[0].baseline_value + 0.1
        assert not [e for e in events if e.kind == 'resolved']  # the regression persists: no flapping


def test_a_stable_stream_of_a_thousand_runs_fires_nothing() -> None:
    for seed in range(20):
        assert AlertMonitor().observe_all(stream(seed)) == []


def test_a_regression_within_a_version_fires_against_its_own_baseline() -> None:
    rng = random.Random(7)
    runs = [JudgedRun('sre', 'v1', {'hallucination': rng.random() < (0.05 if i < 400 else 0.45)}, None) for i in range(700)]
    fired = [e.alert for e in AlertMonitor().observe_all(runs) if e.kind == 'fired']
    assert len(fired) == 1 and fired[0].baseline_version == 'v1'


def test_an_alert_resolves_after_the_rate_recovers_and_does_not_flap() -> None:
    rule = AlertRule(baseline_size=100, window_size=50, resolve_after=10)
    rng = random.Random(3)
    runs = [JudgedRun('a', 'v1', {'m': rng.random() < 0.05}, None) for _ in range(200)]
    runs += [JudgedRun('a', 'v1', {'m': rng.random() < 0.6}, None) for _ in range(100)]
    runs += [JudgedRun('a', 'v1', {'m': rng.random() < 0.05}, None) for _ in range(300)]
    kinds = [e.kind for e in AlertMonitor(rule).observe_all(runs)]
    assert kinds == ['fired', 'resolved']


def test_a_regressed_version_never_becomes_its_own_baseline() -> None:
    """v2 is bad from its first run: after 1,000 runs it is still compared with v1, so the alert stays open."""
    monitor = AlertMonitor()
    monitor.observe_all(stream(1, n=1500, change_at=300))
    assert [(a.prompt_version, a.baseline_version) for a in monitor.firing] == [('v2', 'v1')]


def test_too_few_verdicts_never_fire() -> None:
    rule = AlertRule(min_runs=30)
    runs = [JudgedRun('a', 'v1', {'m': False}, None) for _ in range(200)]
    runs += [JudgedRun('a', 'v2', {'m': True}, None) for _ in range(29)]  # 29 failures in a row, under min_runs
    assert AlertMonitor(rule).observe_all(runs) == []
    assert AlertMonitor(rule).observe_all([*runs, JudgedRun('a', 'v2', {'m': True}, None)]) != []


def test_judged_run_keeps_only_conclusive_verdicts() -> None:
    record = QueryRecord(query_id='q1', query='hi', messages=[{'role': 'user', 'content': 'hi'}], prompt_version='v3')
    common = {'category': 'output', 'criteria_hash': 'h', 'model': 'test'}
    results = [
        JudgeResult(judge='hallucination', failure_mode='hallucination', status='ok', passed=False, score=0.0, **common),
        JudgeResult(judge='citation', failure_mode='citation', status='inconclusive', passed=None, **common),
        JudgeResult(judge='tone', failure_mode='tone', status='error', error='boom', **common),
    ]
    report = build_report(record, results, run_id='r')
    run = judged_run(report, agent='docs')
    assert run.failed == {'hallucination': True}
    assert (run.agent, run.prompt_version) == ('docs', 'v3')
