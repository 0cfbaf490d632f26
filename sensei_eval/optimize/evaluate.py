"""Score one full system prompt: run the agent on a set of queries, judge every run, average.

The metric is the run's overall score — the number `sensei-eval judge` prints and `validate` compares
(`metric` "overall") — averaged per query over its runs, then over the queries: so the gain a suggestion
promises is on the scale of the `validate` run it tells the user to make. A run whose overall score
cannot be read — a judge errored on it, or no judge judged it — is left out of the
mean and counted (`not_judged`, and the judge errors), never a 0 or a 1, exactly as `validate` leaves out
an errored report's overall; agent runs that failed are counted too, so a prompt that makes the agent
crash can never score well by having fewer bad runs to judge. Each
evaluation also keeps the issues the judges found (the failure examples the variant generator is
fed), each under the failure mode of the finding itself (`core.verdicts.mode_verdicts`, not the judge's class
constant) and labelled by what went wrong (`issue_label`), each query's score per failure mode (what the
optimizer's acceptance test reads), the runs every judge passed (`success_examples`) and what it cost
in model calls (agent requests + judge requests that were not cache hits), which is what the
optimizer's budget counts. With `runs` > 1 every query is run that many times; `per_query`
then averages a query's runs, because the query — not the run — is the unit a paired test compares.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from sensei_eval.agents.runner import AgentRunner, AgentRuns, Query, prompt_version, run_and_judge
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import RecordReport
from sensei_eval.core.verdicts import is_missing_verdict, judge_status, mode_verdicts
from sensei_eval.evaluators.base import Judge
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.models.judge_model import JudgeModel

__all__ = (
    'FailureExample',
    'PromptEvaluation',
    'SuccessExample',
    'base_query_id',
    'evaluate_prompt',
    'issue_label',
    'issue_summary',
    'run_overall',
)


class FailureExample(BaseModel):
    """One issue a judge found in one run: what the variant generator learns from."""

    query_id: str
    query: str
    judge: str
    failure_mode: str | None = Field(description="The mode of this finding (its own tag, else its judge's mode).")
    summary: str
    label: str = Field('', description='What went wrong, short and shared by like findings: what the generator groups by.')

    def render(self) -> str:
        return f'[{self.judge}] query {self.query_id!r} ("{_clip(self.query, 120)}"): {self.summary}'

    def routing_text(self) -> str:
        """What lexical routing compares with each component: the judge, the failure mode and the issue."""
        return f'{self.judge} {self.failure_mode or ""} {self.summary}'


class SuccessExample(BaseModel):
    """A run every judge passed: shown to the generator so a rewrite keeps what already works."""

    query_id: str
    query: str
    judges: list[str]

    def render(self) -> str:
        return f'query {self.query_id!r} ("{_clip(self.query, 120)}"): passed {", ".join(self.judges)}'


class PromptEvaluation(BaseModel):
    """How one full system prompt did on the training queries, and what finding out cost."""

    prompt_version: str
    score: float | None = Field(description="Mean over the queries of a query's mean overall score; None when no run was judged.")
    n_scores: int = Field(0, description='Runs with an overall score.')
    per_judge: dict[str, float] = Field(default_factory=dict, description="Each judge's mean score (ok results).")
    per_query: dict[str, float] = Field(
        default_factory=dict, description='Query id -> the mean overall score of its judged runs (what the test pairs).'
    )
    not_judged: list[str] = Field(
        default_factory=list, description='Run ids with no overall score (a judge errored or was inconclusive, or none applied).'
    )
    per_query_mode: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Query id -> failure mode -> the mean of its judges' scores of that mode."
    )
    failures_by_judge: dict[str, int] = Field(default_factory=dict)
    failures_by_mode: dict[str, int] = Field(default_factory=dict)
    judge_errors: list[str] = Field(default_factory=list)
    agent_errors: list[str] = Field(default_factory=list)
    failure_examples: list[FailureExample] = Field(default_factory=list)
    success_examples: list[SuccessExample] = Field(default_factory=list)
    failing_modes: dict[str, list[str]] = Field(
        default_factory=dict, description='Query id -> the failure modes it had a finding of (for a stratified split).'
    )
    agent_calls: int = 0
    judge_calls: int = 0

    @property
    def model_calls(self) -> int:
        return self.agent_calls + self.judge_calls

    @property
    def errors(self) -> int:
        return len(self.judge_errors) + len(self.agent_errors)


async def evaluate_prompt(
    system_prompt: str,
    queries: Sequence[Query],
    runner: AgentRunner,
    judges: Sequence[Judge],
    judge_model: JudgeModel | None,
    *,
    concurrency: int = 4,
    cache: JudgeCache | None = None,
    runs: int = 1,
) -> tuple[PromptEvaluation, list[RecordReport]]:
    """Run the agent with `system_prompt` on every query (`runs` times), judge the runs, score the prompt."""
    done = await run_and_judge(
        system_prompt,
        queries,
        AgentRuns(runner, runs=runs, concurrency=concurrency),
        JudgeRunOptions(judges, judge_model, cache=cache, concurrency=concurrency),
    )
    agent_errors = [str(f.error) for f in done.failed]
    evaluation = summarise(system_prompt, done.records, done.reports, agent_errors, runs=runs)
    return evaluation, done.reports


def summarise(
    system_prompt: str,
    records: Sequence[QueryRecord],
    reports: Sequence[RecordReport],
    agent_errors: Sequence[str],
    *,
    runs: int = 1,
) -> PromptEvaluation:
    """The prompt's score and failure examples from its judged runs (a query's runs averaged in `per_query`)."""
    tally = _Tally(runs)
    for report in reports:
        tally.add(report)
    return tally.evaluation(system_prompt, records, reports, agent_errors)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


@dataclass
class _Tally:
    """What `summarise` gathers from the judged runs, one report at a time (a query's runs under its base
    id when `runs` > 1)."""

    runs: int
    scores: list[float] = field(default_factory=list)
    per_judge: dict[str, list[float]] = field(default_factory=dict)
    per_query: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    by_mode: dict[str, int] = field(default_factory=dict)
    judge_errors: list[str] = field(default_factory=list)
    examples: list[FailureExample] = field(default_factory=list)
    mode_scores: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    successes: dict[str, SuccessExample] = field(default_factory=dict)
    failing: dict[str, list[str]] = field(default_factory=dict)
    not_judged: list[str] = field(default_factory=list)

    def add(self, report: RecordReport) -> None:
        """One judged run: its overall score, each judge's verdict, each failure mode's findings."""
        query_id = base_query_id(report.query_id) if self.runs > 1 else report.query_id
        overall = run_overall(report)
        if overall is None:
            self.not_judged.append(report.query_id)
        else:
            self.scores.append(overall)
            self.per_query.setdefault(query_id, []).append(overall)
        all_passed = self._add_judges(report)
        self.failing.setdefault(query_id, [])
        self._add_modes(report, query_id)
        if all_passed and query_id not in self.successes:
            self.successes[query_id] = SuccessExample(query_id=query_id, query=report.query, judges=sorted(report.judges))

    def _add_judges(self, report: RecordReport) -> bool:
        """Each judge's score and issue count; True when every judge judged the run and passed it."""
        all_passed = bool(report.judges)
        for name, result in report.judges.items():
            status = judge_status(result)  # the verdict model's: smoke and inconclusive are no verdict
            if status == 'not_applicable':  # nothing to inspect: neither an error nor a pass
                continue
            if is_missing_verdict(status):
                self.judge_errors.append(f'{report.query_id}: {name}: {status}: {result.error}')
                all_passed = False
                continue
            if status == 'fail':
                all_passed = False
            if result.score is None:
                continue
            self.per_judge.setdefault(name, []).append(result.score)
            if result.issues:
                self.failures[name] = self.failures.get(name, 0) + len(result.issues)
        return all_passed

    def _add_modes(self, report: RecordReport, query_id: str) -> None:
        """Each finding under its own mode (`core.verdicts.mode_verdicts`), not the judge's class constant."""
        for (name, mode), verdict in mode_verdicts(report).items():
            if not verdict.judged:
                continue
            if mode and verdict.score is not None:
                self.mode_scores.setdefault(query_id, {}).setdefault(mode, []).append(verdict.score)
            if not verdict.issues:
                continue
            if mode:
                self.by_mode[mode] = self.by_mode.get(mode, 0) + len(verdict.issues)
                if verdict.status == 'fail' and mode not in self.failing[query_id]:
                    self.failing[query_id].append(mode)
            for issue in verdict.issues:
                self.examples.append(
                    FailureExample(
                        query_id=query_id,
                        query=report.query,
                        judge=name,
                        failure_mode=mode,
                        summary=issue_summary(issue),
                        label=issue_label(name, mode, issue),
                    )
                )

    def evaluation(
        self,
        system_prompt: str,
        records: Sequence[QueryRecord],
        reports: Sequence[RecordReport],
        agent_errors: Sequence[str],
    ) -> PromptEvaluation:
        """The tally as the prompt's evaluation, with what it cost in model calls."""
        query_means = {k: _mean(v) for k, v in self.per_query.items()}
        return PromptEvaluation(
            prompt_version=prompt_version(system_prompt),
            score=_mean(list(query_means.values())) if query_means else None,
            n_scores=len(self.scores),
            per_judge={k: _mean(v) for k, v in self.per_judge.items()},
            per_query=query_means,
            not_judged=self.not_judged,
            per_query_mode={q: {m: _mean(v) for m, v in modes.items()} for q, modes in self.mode_scores.items()},
            failures_by_judge=self.failures,
            failures_by_mode=self.by_mode,
            judge_errors=self.judge_errors,
            agent_errors=list(agent_errors),
            failure_examples=self.examples,
            success_examples=[s for q, s in self.successes.items() if not self.failing.get(q)],
            failing_modes=self.failing,
            agent_calls=sum(int(r.metadata.get('agent_requests', 0) or 0) for r in records),
            judge_calls=sum(x.requests for r in reports for x in r.judges.values() if not x.cached),
        )


def run_overall(report: RecordReport) -> float | None:
    """A run's overall score as `validate` pairs it: None (not judged) when a judge errored on it (its
    overall would come from part of the judges) or no judge gave a score."""
    if report.errors:
        return None
    return report.overall_score


def base_query_id(record_id: str) -> str:
    """The query a run's record id belongs to (`q#r2` → `q`; see `agents.run_record_id`)."""
    return re.sub(r'#r\d+$', '', record_id)


def issue_summary(issue: dict[str, Any]) -> str:
    """One issue as compact JSON for a prompt (generator, GEPA feedback): its fields without the step
    citations and empty values; a `false` stays, since in the issue models it is often the finding."""
    fields = {k: v for k, v in issue.items() if k not in ('steps', 'source') and v not in (None, '', [])}
    return _clip(json.dumps(fields, ensure_ascii=False, default=str), 400)


def issue_label(judge: str, mode: str | None, issue: dict[str, Any]) -> str:
    """What went wrong, in a few words that like findings share ("open_ticket missing", "create_invoice
    currency absent"): the key the generator's input and the suggestions count findings by. Built from
    the standard issue fields; an issue without them is labelled by its judge and mode."""
    missed = issue.get('missed_tools') or []
    extra = issue.get('unnecessary_tools') or []
    if missed or extra:
        return ', '.join([*(f'{t} missing' for t in missed), *(f'{t} unnecessary' for t in extra)])
    if issue.get('parameter'):
        tool = f'{issue["tool_name"]} ' if issue.get('tool_name') else ''
        absent = '(absent)' in str(issue.get('actual_value', ''))
        return f'{tool}{issue["parameter"]} {"absent" if absent else "wrong"}'
    for key in ('problem_type', 'result_type', 'source_type', 'severity'):
        if isinstance(issue.get(key), str):
            return f'{mode or judge}: {issue[key]}'
    return f'{mode or judge} ({judge})' if mode and mode != judge else (mode or judge)


# ---------------------------------------------------------------------------------------------------
# Helpers


def _clip(text: str, n: int) -> str:
    text = ' '.join(text.split())
    return text if len(text) <= n else text[: n - 1] + '…'
