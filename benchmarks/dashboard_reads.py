"""The dashboard's reads over many evaluated runs: the session list (a page, and the overall-score filter, which
reads every run's latest evaluation) and Patterns, on a SQLite store.

Every run has a completed evaluation by the default judges (`mvp,checks`: 11 judge results in its report), as
the worker stores it (with the verdict model's summary, `service.verdicts.VerdictSummary`). Each read is timed
cold (the first in a fresh process: nothing cached) and warm (best of three after it).

    python benchmarks/dashboard_reads.py [--sessions 2000] [--quick]

`--quick`: 300 runs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, build_report
from sensei_eval.evaluators.registry import DEFAULT_JUDGES, make_judges
from sensei_eval.service.dashboard import patterns, queries, views
from sensei_eval.service.migrate import upgrade
from sensei_eval.service.store import EvaluationRow, SessionRow, Store, new_id, now_us
from sensei_eval.service.verdict_cache import summarise

_RECORD: dict[str, Any] = {
    'query_id': 'q',
    'message_format': 'openai',
    'messages': [{'role': 'user', 'content': 'Where is my order?'}, {'role': 'assistant', 'content': 'It ships today.'}],
}


def _fill(store: Store, n: int) -> None:
    judges = make_judges(DEFAULT_JUDGES)
    results = [
        JudgeResult(
            judge=j.name, failure_mode=j.failure_mode, category=None, criteria_hash=j.criteria_hash(),
            model='openai:judge' if j.needs_model else None, status='ok', passed=True, score=1.0, reasoning='fine at [2]',
        )
        for j in judges
    ]  # fmt: skip
    report = build_report(QueryRecord.model_validate(_RECORD), results, run_id='bench').model_dump(mode='json')
    summary = summarise(results).model_dump(mode='json')
    with store.write() as db:
        for i in range(n):
            sid, t = new_id(), now_us()
            db.add(
                SessionRow(
                    session_id=sid, query_id=f'q{i}', agent='bench', status='completed', record={**_RECORD, 'query_id': f'q{i}'},
                    created_by=None, warnings=None, created_at_us=t, updated_at_us=t,
                )
            )  # fmt: skip
            db.flush()
            db.add(
                EvaluationRow(
                    evaluation_id=new_id(), session_id=sid, judges=[j.name for j in judges], status='completed',
                    triggered_by='bench', started_at_us=t, completed_at_us=t, overall_score=summary['overall_score'],
                    model='openai:judge', report=report, verdict_cache=summary,
                )
            )  # fmt: skip


def _timed(read: Callable[[], object]) -> tuple[float, float]:
    start = time.perf_counter()
    read()
    cold = time.perf_counter() - start
    warm = []
    for _ in range(3):
        start = time.perf_counter()
        read()
        warm.append(time.perf_counter() - start)
    return cold, min(warm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sessions', type=int, default=2000)
    parser.add_argument('--quick', action='store_true', help='300 runs')
    args = parser.parse_args()
    n = 300 if args.quick else args.sessions
    with tempfile.TemporaryDirectory() as tmp:
        url = f'sqlite:///{Path(tmp) / "bench.db"}'
        upgrade(url)
        store = Store(url)
        _fill(store, n)
        reads: dict[str, Callable[[], object]] = {
            'list, one page': lambda: queries.list_sessions(store, views.SessionFilters()),
            'list, overall >= 0.5': lambda: queries.list_sessions(store, views.SessionFilters(min_overall=0.5)),
            'patterns': lambda: patterns.patterns(store, 'freeform', views.PatternFilters()),
            'patterns, one judge': lambda: patterns.patterns(store, 'freeform', views.PatternFilters(judge='hallucination')),
        }
        print(f'{n} evaluated runs (judges {",".join(DEFAULT_JUDGES)}), SQLite')
        print(f'{"read":<24} {"cold s":>8} {"warm s":>8}')
        for name, read in reads.items():
            cold, warm = _timed(read)
            print(f'{name:<24} {cold:>8.3f} {warm:>8.3f}')
        store.dispose()


if __name__ == '__main__':
    main()
