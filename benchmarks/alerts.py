"""Degradation alerts on simulated streams of judged runs: false alarms, detection delay, cost per run.

Each stream is one agent judged on 5 failure modes, each failing 5% of the time. A stable stream stays so
for `--runs` runs; a regressed one switches to prompt version v2 halfway, where one mode fails at
`--bad-rate`. Prints, over `--seeds` seeds: alerts fired on stable streams, alerts fired per regression
(exactly one is right), runs of v2 before the alert, and the monitor's time per observed run.

    python benchmarks/alerts.py [--seeds 20] [--runs 1000] [--bad-rate 0.4]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sensei_eval.production.alerts import AlertMonitor, JudgedRun

MODES = ('hallucination', 'tool_selection', 'reference_check', 'citation', 'version_mismatch')


def stream(seed: int, runs: int, *, change_at: int | None, bad_rate: float) -> Iterator[JudgedRun]:
    rng = random.Random(seed)
    for i in range(runs):
        version = 'v1' if change_at is None or i < change_at else 'v2'
        failed = {m: rng.random() < (bad_rate if version == 'v2' and m == 'citation' else 0.05) for m in MODES}
        yield JudgedRun('docs', version, failed, 1 - sum(failed.values()) / len(MODES))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--seeds', type=int, default=20)
    parser.add_argument('--runs', type=int, default=1000)
    parser.add_argument('--bad-rate', type=float, default=0.4)
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.runs = 2, 200

    false_alarms, fired_per_regression, delays, per_run_us = 0, [], [], []
    for seed in range(args.seeds):
        start = time.perf_counter()
        false_alarms += sum(
            e.kind == 'fired' for e in AlertMonitor().observe_all(stream(seed, args.runs, change_at=None, bad_rate=0))
        )
        per_run_us.append((time.perf_counter() - start) / args.runs * 1e6)

        change_at = args.runs // 2
        monitor, fired, delay = AlertMonitor(), 0, None
        for i, run in enumerate(stream(seed, args.runs, change_at=change_at, bad_rate=args.bad_rate)):
            for event in monitor.observe(run):
                if event.kind == 'fired':
                    fired += 1
                    delay = i - change_at + 1 if delay is None else delay
        fired_per_regression.append(fired)
        if delay is not None:
            delays.append(delay)

    print(
        f'{args.seeds} seeds x {args.runs} runs, {len(MODES)} failure modes at 5%; '
        f'regression: one mode -> {args.bad_rate:.0%} with v2'
    )
    print(f'stable streams: {false_alarms} alert(s) fired in {args.seeds * args.runs:,} runs')
    counts = {n: fired_per_regression.count(n) for n in sorted(set(fired_per_regression))}
    print(f'regressed streams: alerts fired per stream {counts} (exactly one is right)')
    if delays:
        print(f'runs of v2 before the alert: median {statistics.median(delays):.0f}, max {max(delays)}')
    print(f'monitor cost on a stable stream: {statistics.median(per_run_us):.1f} µs per run (median over seeds)')


if __name__ == '__main__':
    main()
