"""Why a record's score is what it is: the verdicts that cost it points, the ones that did not count, and the
judges that did not run, read from the verdict model (`core.verdicts`) and computed nowhere else.

Every surface that shows a score shows its reasons from here (the console's `--verbose`, `view` and its
comparison page, the dashboard's run page), so "0.50 · all passed" always says which finding cost the half.
What a reader must know:

* a **cost** is a verdict that judged (pass or fail) and either failed or scored below 1: a pass with a
  `minor` finding (the reference check's advisory call, a minor hallucination) lowers the score without
  failing its mode, and is listed like a fail, with each finding's severity and text. Costs come lowest
  score first;
* a verdict that is **not counted** (error, inconclusive, smoke, or any other status that is not a pass or
  a fail) is listed with why: it is left out of the score, which is then over fewer judges (its coverage);
* a **skipped** judge did not run on the record (not in the agent profile, not applicable, no judge
  model), named with why.

Nothing here decides a status or a score: `record_verdict` does, and this module only selects and words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sensei_eval.core.verdicts import JudgeResultLike, ModeVerdict, record_verdict

__all__ = ('Cost', 'Finding', 'ScoreExplanation', 'explain_score', 'finding_text')

# Issue fields that are not the finding's words: where it points, who found it, how much it weighs.
_NOT_TEXT = frozenset({'steps', 'source', 'severity', 'failure_mode'})
# A finding's fields that say why in a sentence, looked at first (the issue models name it so).
_WHY_FIELDS = ('reasoning', 'explanation', 'description')


@dataclass(frozen=True)
class Finding:
    """One finding of a verdict: its severity (None: ungraded, which fails its mode), one line of text, the
    transcript steps it cites."""

    severity: str | None
    text: str
    steps: tuple[int, ...] = ()


@dataclass(frozen=True)
class Cost:
    """One verdict of a judge on one failure mode that cost points or did not count (module docstring)."""

    judge: str
    failure_mode: str | None
    status: str
    score: float | None
    findings: tuple[Finding, ...] = ()
    why: str | None = None  # an uncounted verdict's reason, or the reasoning of a cost without findings

    @property
    def label(self) -> str:
        """`judge` alone, or `judge · mode` when the judge reports a mode of another name."""
        mode = self.failure_mode
        return self.judge if not mode or mode == self.judge else f'{self.judge} · {mode}'


@dataclass(frozen=True)
class ScoreExplanation:
    """A record's score with its reasons: the costs, the verdicts not counted, the judges skipped."""

    overall_score: float | None
    coverage: str | None  # the verdict model's coverage label ("checks only, 8 of 11 judges"); None: no judge ran
    costs: tuple[Cost, ...] = ()
    not_counted: tuple[Cost, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)

    @property
    def full_marks(self) -> bool:
        """Scored 1.00 with every judge that ran counted: nothing to explain but what was skipped."""
        return not self.costs and not self.not_counted and self.overall_score is not None

    def lines(self, *, limit: int | None = None) -> list[str]:
        """The explanation as text lines (the console's `--verbose`): a cost per line with its findings
        indented under it; `limit` cuts each finding's text."""

        def cut(text: str) -> str:
            return text if limit is None or len(text) <= limit else text[: limit - 1] + '…'

        out: list[str] = []
        for c in self.costs:
            score = f'{c.score:.2f}' if c.score is not None else '-'
            out.append(f'{c.label}: {c.status} {score}' + (f' · {cut(c.why)}' if c.why and not c.findings else ''))
            for f in c.findings:
                severity = f.severity or 'finding'  # no severity: it fails its mode, as a major one
                steps = f' (steps {", ".join(map(str, f.steps))})' if f.steps else ''
                out.append(f'  {severity}: {cut(f.text)}{steps}')
        for c in self.not_counted:
            out.append(f'{c.label}: {c.status}, not counted' + (f' · {cut(c.why)}' if c.why else ''))
        for name, why in self.skipped.items():
            out.append(f'{name}: skipped · {cut(why)}')
        return out


def finding_text(issue: Mapping[str, Any]) -> str:
    """One line saying what a finding is: its reasoning (or explanation, description), else its fields as
    `name: value` pairs."""
    for key in _WHY_FIELDS:
        value = issue.get(key)
        if isinstance(value, str) and value.strip():
            return ' '.join(value.split())
    pairs = [
        f'{k}: {", ".join(map(str, v)) if isinstance(v, list) else v}'
        for k, v in issue.items()
        if k not in _NOT_TEXT and v not in (None, '', [])
    ]
    return ' '.join('; '.join(pairs).split()) or 'no details given'


def explain_score(results: Sequence[JudgeResultLike], skipped: Mapping[str, str] | None = None) -> ScoreExplanation:
    """Why a record scored what it scored, from its judge results (a `RecordReport`'s `judges.values()`,
    or the service's stored results) and the judges skipped on it."""
    verdict = record_verdict(results)
    reasoning = {r.judge: _reasoning(r) for r in results}
    costs = [_cost(v, reasoning.get(v.judge)) for v in verdict.verdicts if v.judged and _costs_points(v)]
    costs.sort(key=lambda c: (c.score if c.score is not None else float(c.status != 'fail'), c.judge))
    not_counted = [
        Cost(v.judge, v.failure_mode, v.status, None, _findings(v.issues), v.error or reasoning.get(v.judge))
        for v in verdict.verdicts
        if not v.judged
    ]
    return ScoreExplanation(
        overall_score=verdict.overall_score,
        coverage=verdict.coverage.label if verdict.coverage.applied else None,
        costs=tuple(costs),
        not_counted=tuple(not_counted),
        skipped=dict(skipped or {}),
    )


# ---------------------------------------------------------------------------------------------------
# Helpers


def _costs_points(v: ModeVerdict) -> bool:
    return v.status == 'fail' or (v.score is not None and v.score < 1.0)


def _cost(v: ModeVerdict, reasoning: str | None) -> Cost:
    return Cost(v.judge, v.failure_mode, v.status, v.score, _findings(v.issues), reasoning)


def _findings(issues: Iterable[Mapping[str, Any]]) -> tuple[Finding, ...]:
    out = []
    for issue in issues:
        steps = tuple(n for n in issue.get('steps') or () if isinstance(n, int))
        severity = issue.get('severity')
        out.append(Finding(severity if isinstance(severity, str) else None, finding_text(issue), steps))
    return tuple(out)


def _reasoning(result: JudgeResultLike) -> str | None:
    text = getattr(result, 'reasoning', None)
    return ' '.join(text.split()) if isinstance(text, str) and text.strip() else None
