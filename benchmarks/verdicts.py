"""Verdicts on real runs nobody here wrote: the deterministic checks against tau2-bench's own labels.

    python benchmarks/verdicts.py [--data ../shared/datasets/tau2-airline]

Reads `records.jsonl` (50 published runs of a customer-service agent, Claude Sonnet 4.5 on tau2-bench's
airline domain; MIT, sierra-research/tau2-bench) and `labels.jsonl` (the benchmark's reward and, per
expected action, whether it found a matching call), judges every run with the checks (no model) under
an agent profile, and prints:

* reference-check agreement with the labels' per-action `matched`, and how many passed runs fail the
  reference check although the labels matched every expected action (extra or repeated calls);
* AUROC of `overall_score` for predicting a failed run (reward < 1), and of the reference check alone;
* the share of runs flagged by any check, passed and failed runs apart;
* the same figures for the trivial baseline that calls every run (and every action) a failure.

Run under the `default` profile (what an unknown agent gets) and under `docs-agent` (another agent's
conventions forced on this one), to show what profiles are for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from sklearn.metrics import roc_auc_score

from sensei_eval.evaluators.registry import make_judges
from sensei_eval.profiles import BUILTIN_PROFILES
from sensei_eval.records import load_dataset
from sensei_eval.reports import EvaluationReport
from sensei_eval.runner import judge_records

_DEFAULT_DATA = Path(__file__).resolve().parents[1] / '..' / 'shared' / 'datasets' / 'tau2-airline'


def _auroc(failed: list[bool], risk: list[float]) -> float | None:
    return float(roc_auc_score(failed, risk)) if 0 < sum(failed) < len(failed) else None


def _flagged(report: EvaluationReport) -> bool:
    return any(r.status == 'ok' and r.issues for r in report.judges.values())


def _figures(reports: list[EvaluationReport], labels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    agree = total = unmatched_labels = 0
    false_fail_on_full_match = 0
    ref_failed: list[bool] = []
    ref_risk: list[float] = []
    for report in reports:
        label = labels[report.query_id]
        ref = report.judges.get('reference_check')
        if ref is None or ref.status != 'ok':
            continue
        ours = ref.details['expected']
        theirs = label['action_checks']
        for mine, truth in zip(ours, theirs, strict=True):
            assert mine['tool_name'] == truth['tool_name'], (report.query_id, mine, truth)
            total += 1
            agree += mine['matched'] == truth['matched']
            unmatched_labels += not truth['matched']
        if label['passed'] and all(t['matched'] for t in theirs) and not ref.passed:
            false_fail_on_full_match += 1
        ref_failed.append(not label['passed'])
        ref_risk.append(1.0 - (ref.score or 0.0))
    failed = [not labels[r.query_id]['passed'] for r in reports]
    risk = [1.0 - (r.overall_score if r.overall_score is not None else 1.0) for r in reports]
    passed_reports = [r for r in reports if labels[r.query_id]['passed']]
    failed_reports = [r for r in reports if not labels[r.query_id]['passed']]
    return {
        'actions': total,
        'agreement': agree / total if total else None,
        'baseline_agreement': unmatched_labels / total if total else None,
        'passed_runs_failing_on_full_match': false_fail_on_full_match,
        'auroc_overall': _auroc(failed, risk),
        'auroc_reference': _auroc(ref_failed, ref_risk),
        'flagged_passed': sum(map(_flagged, passed_reports)) / len(passed_reports),
        'flagged_failed': sum(map(_flagged, failed_reports)) / len(failed_reports),
        'n_passed': len(passed_reports),
        'n_failed': len(failed_reports),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--data', type=Path, default=_DEFAULT_DATA, help='folder with records.jsonl and labels.jsonl')
    args = parser.parse_args()
    records_file, labels_file = args.data / 'records.jsonl', args.data / 'labels.jsonl'
    if not records_file.is_file() or not labels_file.is_file():
        print(f'no tau2 data at {args.data} (records.jsonl and labels.jsonl)', file=sys.stderr)
        return 2
    loaded = load_dataset(records_file)
    for error in loaded.errors:
        print(f'bad record: {error}', file=sys.stderr)
    labels = {row['query_id']: row for row in map(json.loads, labels_file.read_text(encoding='utf-8').splitlines())}
    judges = make_judges(['checks'])
    n_passed = sum(lb['passed'] for lb in labels.values())
    print(f'{len(loaded.records)} tau2-airline runs ({n_passed} passed), checks only, no model')
    for name in ('default', 'docs-agent'):
        start = time.perf_counter()
        reports = asyncio.run(judge_records(loaded.records, judges, None, run_id='bench', profile=BUILTIN_PROFILES[name]))
        elapsed = time.perf_counter() - start
        f = _figures(reports, labels)
        print(f'\nprofile {name} ({elapsed:.1f} s)')
        print(
            f'  reference vs labels: {f["agreement"]:.1%} of {f["actions"]} expected actions agree '
            f'(always-fail baseline {f["baseline_agreement"]:.1%}); '
            f'passed runs failed despite every action matched: {f["passed_runs_failing_on_full_match"]}'
        )
        auroc_ref = 'n/a' if f['auroc_reference'] is None else f'{f["auroc_reference"]:.3f}'
        auroc_all = 'n/a' if f['auroc_overall'] is None else f'{f["auroc_overall"]:.3f}'
        print(f'  AUROC for a failed run: overall_score {auroc_all}, reference check alone {auroc_ref} (baseline 0.500)')
        print(
            f'  flagged by any check: {f["flagged_passed"]:.1%} of {f["n_passed"]} passed runs, '
            f'{f["flagged_failed"]:.1%} of {f["n_failed"]} failed runs (baseline 100% / 100%)'
        )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
