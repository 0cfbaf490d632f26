"""The service's verdict cache: a stored job's verdict, the service's one way to read what its judges decided.

The API, the dashboard (list, session page, Patterns) and the alert watcher never turn judge results into
pass / fail / a score themselves: they hand the stored report's per-judge results to the library's verdict
model (`sensei_eval.core.verdicts.record_verdict`) and show what it returns — the per-mode verdicts, the
overall score (None: "not judged", never 1.0) and the coverage (`checks only, 8 of 11 judges`). The same
function gives `sensei-eval judge` its verdicts, so a run reads the same on every surface.

For the list and Patterns, which read thousands of evaluations at once, the worker stores a small summary of
the verdict with each job (`VerdictSummary`, the `verdict_cache` column: derived fields, a cache): the
overall score, the coverage,
each judge's verdict, the failed and the judged failure modes. It is the verdict model's output, tagged with a
fingerprint of the verdict model's rules (`rules_fingerprint`); a summary made under other rules, or missing,
is not used: the verdict is recomputed from the stored results instead (and kept in this process's cache).

Evaluations stored before the verdict model existed (no `coverage` in their report, an `overall_score`
column computed by older rules) are read the same way: the verdict is always recomputed from the per-judge
results, which every stored report has had from the start; the stored column is not trusted. A judge result
that cannot be read back is an `error` verdict naming what is wrong (and a logged warning), never dropped.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import marshal
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from sensei_eval.core import verdicts as _verdicts
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.verdicts import Coverage, RecordVerdict, VerdictStatus, judge_status, record_verdict

__all__ = (
    'Coverage',
    'RecordVerdict',
    'VerdictSummary',
    'cached_verdict',
    'failed_judges',
    'has_failure',
    'known_verdicts',
    'rules_fingerprint',
    'stored_results',
    'stored_summary',
    'stored_verdict',
    'summarise',
)

log = logging.getLogger(__name__)

# Completed evaluations whose verdict this process keeps (a completed row never changes: a new judgement is a
# new row). Reading the judge results back and computing the verdict is most of the cost of the dashboard's
# list filters and Patterns over thousands of runs; a few KB each, so a few tens of MB at most.
_CACHE_SIZE = 10_000
_cache: OrderedDict[str, tuple[list[JudgeResult], RecordVerdict]] = OrderedDict()
_cache_lock = threading.Lock()


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


def known_verdicts(evaluation_ids: Iterable[str]) -> dict[str, tuple[list[JudgeResult], RecordVerdict]]:
    """The cached results and verdict of each of these *completed* evaluations this process has read before."""
    with _cache_lock:
        out = {}
        for evaluation_id in evaluation_ids:
            if (hit := _cache.get(evaluation_id)) is not None:
                _cache.move_to_end(evaluation_id)
                out[evaluation_id] = hit
        return out


def cached_verdict(evaluation_id: str, judges: Any) -> tuple[list[JudgeResult], RecordVerdict]:
    """A *completed* evaluation's judge results (its report's `judges`) and their verdict, kept for next time
    (only for completed rows: they never change)."""
    results = stored_results(judges, where=f'evaluation {evaluation_id}')
    entry = (results, record_verdict(results))
    with _cache_lock:
        _cache[evaluation_id] = entry
        _cache.move_to_end(evaluation_id)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return entry


@functools.cache
def rules_fingerprint() -> str:
    """A fingerprint of the verdict model's rules (its module's source, as a check's criteria hash is its
    source): a stored summary made under other rules is recomputed, never shown as today's verdict. Without
    the source (a bytecode-only install), the module's compiled code stands in for it."""
    try:
        text = inspect.getsource(_verdicts).encode()
    except (OSError, TypeError):
        loader = getattr(_verdicts.__spec__, 'loader', None)
        code = loader.get_code(_verdicts.__name__) if loader is not None and hasattr(loader, 'get_code') else None
        text = marshal.dumps(code) if code is not None else repr(sorted(vars(_verdicts))).encode()
    return hashlib.sha256(text).hexdigest()[:16]


class VerdictSummary(BaseModel):
    """What the dashboard's list and Patterns read of an evaluation's verdict, stored with it (`verdict` column)."""

    rules: str = Field(description='`rules_fingerprint()` of the process that made it.')
    overall_score: float | None
    coverage: Coverage
    judges: dict[str, VerdictStatus] = Field(description="Each judge's verdict over all its modes (`judge_status`).")
    failure_modes: list[str] = Field(description='Modes with a fail verdict, in the failure-mode table order.')
    judged_modes: list[str] = Field(description='Modes with a pass or fail verdict.')
    failed: bool = Field(description='Some verdict is a fail.')

    @property
    def failed_judges(self) -> list[str]:
        return [name for name, status in self.judges.items() if status == 'fail']


def summarise(results: list[JudgeResult], verdict: RecordVerdict | None = None) -> VerdictSummary:
    """The summary of a record's verdict (computed from `results` unless given)."""
    verdict = verdict if verdict is not None else record_verdict(results)
    judged = dict.fromkeys(str(v.failure_mode) for v in verdict.verdicts if v.judged and v.failure_mode)
    return VerdictSummary(
        rules=rules_fingerprint(),
        overall_score=verdict.overall_score,
        coverage=verdict.coverage,
        judges={r.judge: judge_status(r) for r in results},
        failure_modes=list(verdict.failure_modes),
        judged_modes=list(judged),
        failed=has_failure(verdict),
    )


def stored_summary(value: Any) -> VerdictSummary | None:
    """A stored `verdict` column as a summary, or None when there is none, it does not read, or it was made
    under other verdict rules (the caller then recomputes from the results)."""
    if not isinstance(value, Mapping) or value.get('rules') != rules_fingerprint():
        return None
    try:
        return VerdictSummary.model_validate(value)
    except ValidationError:
        return None
