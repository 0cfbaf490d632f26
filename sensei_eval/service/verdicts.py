"""A stored evaluation's verdict: the service's one way to read what its judges decided.

The API, the dashboard (list, session page, Patterns) and the alert watcher never turn judge results into
pass / fail / a score themselves: they hand the stored report's per-judge results to the library's verdict
model (`sensei_eval.core.verdicts.record_verdict`) and show what it returns — the per-mode verdicts, the
overall score (None: "not judged", never 1.0) and the coverage (`checks only, 8 of 11 judges`). The same
function gives `sensei-eval judge` its verdicts, so a run reads the same on every surface.

Evaluations stored before the verdict model existed (no `coverage` in their report, an `overall_score`
column computed by older rules) are read the same way: the verdict is always recomputed from the per-judge
results, which every stored report has had from the start; the stored column is not trusted. A judge result
that cannot be read back is an `error` verdict naming what is wrong (and a logged warning), never dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.verdicts import Coverage, RecordVerdict, judge_status, record_verdict

__all__ = ('Coverage', 'RecordVerdict', 'failed_judges', 'has_failure', 'stored_results', 'stored_verdict')

log = logging.getLogger(__name__)


def stored_results(judges: Any, *, where: str = 'an evaluation') -> list[JudgeResult]:
    """The judge results of a stored report's `judges` object (name → result), each validated; one that
    does not validate becomes an `error` result saying so (a located warning is logged)."""
    if not isinstance(judges, Mapping):
        return []
    out: list[JudgeResult] = []
    for name, raw in judges.items():
        try:
            out.append(JudgeResult.model_validate(raw))
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            field = '.'.join(str(p) for p in first['loc']) or '(result)'
            problem = f'stored result unreadable: judges.{name}.{field}: {first["msg"]}'
            log.warning('%s: %s', where, problem)
            mode = raw.get('failure_mode') if isinstance(raw, Mapping) else None
            out.append(
                JudgeResult(
                    judge=str(name),
                    failure_mode=mode if isinstance(mode, str) else None,
                    category=None,
                    criteria_hash='',
                    model=None,
                    status='error',
                    error=problem,
                )
            )
    return out


def stored_verdict(report: Any, *, where: str = 'an evaluation') -> RecordVerdict | None:
    """The verdict of a stored report (a `RecordReport` as JSON), or None when it holds no judge results
    (an evaluation still running, or one that failed before any judge answered)."""
    if not isinstance(report, Mapping) or not isinstance(report.get('judges'), Mapping):
        return None
    return record_verdict(stored_results(report['judges'], where=where))


def failed_judges(results: Iterable[JudgeResult]) -> list[str]:
    """The judges whose verdict (over all their failure modes) is a fail."""
    return [r.judge for r in results if judge_status(r) == 'fail']


def has_failure(verdict: RecordVerdict) -> bool:
    """Some judge's verdict on some mode is a fail."""
    return any(v.status == 'fail' for v in verdict.verdicts)
