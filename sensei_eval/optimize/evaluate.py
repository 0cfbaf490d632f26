"""Score one full system prompt: run the agent on a set of queries, judge every run, average.

The metric is the mean judge score over every (query, judge) pair whose judge ran without error;
errors — agent runs that failed, judges that errored — are excluded from the mean and counted, so a
prompt that makes the agent crash can never score well by having fewer bad runs to judge. Each
evaluation also keeps the issues the judges found (the failure examples the variant generator is
fed) and what it cost in model calls (agent requests + judge requests that were not cache hits), which
is what the optimizer's budget counts. With `runs` > 1 every query is run that many times; `per_query`
then averages a query's runs, because the query — not the run — is the unit a paired test compares.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from ..agents import AgentRunner, Query, prompt_version, run_and_judge
from ..cache import JudgeCache
from ..evaluators.base import Judge
from ..models import JudgeModel
from ..records import QueryRecord
from ..reports import EvaluationReport

__all__ = ('FailureExample', 'PromptEvaluation', 'base_query_id', 'evaluate_prompt', 'issue_summary')


class FailureExample(BaseModel):
    """One issue a judge found in one run: what the variant generator learns from."""

    query_id: str
    query: str
    judge: str
    failure_mode: str | None
    summary: str

    def render(self) -> str:
        return f'[{self.judge}] query {self.query_id!r} ("{_clip(self.query, 120)}"): {self.summary}'

    def routing_text(self) -> str:
        """What lexical routing compares with each component: the judge, the failure mode and the issue."""
        return f'{self.judge} {self.failure_mode or ""} {self.summary}'


class PromptEvaluation(BaseModel):
    """How one full system prompt did on the training queries, and what finding out cost."""

    prompt_version: str
    score: float | None = Field(description='Mean judge score over ok results; None when no judge produced a score.')
    n_scores: int = 0
    per_judge: dict[str, float] = Field(default_factory=dict)
    per_query: dict[str, float] = Field(default_factory=dict)
    failures_by_judge: dict[str, int] = Field(default_factory=dict)
    failures_by_mode: dict[str, int] = Field(default_factory=dict)
    judge_errors: list[str] = Field(default_factory=list)
    agent_errors: list[str] = Field(default_factory=list)
    failure_examples: list[FailureExample] = Field(default_factory=list)
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
) -> tuple[PromptEvaluation, list[EvaluationReport]]:
    """Run the agent with `system_prompt` on every query (`runs` times), judge the runs, score the prompt."""
    done = await run_and_judge(
        system_prompt,
        queries,
        runner,
        judges,
        judge_model,
        runs=runs,
        agent_concurrency=concurrency,
        judge_concurrency=concurrency,
        cache=cache,
    )
    agent_errors = [str(f.error) for f in done.failed]
    evaluation = summarise(system_prompt, done.records, done.reports, agent_errors, runs=runs)
    return evaluation, done.reports


def summarise(
    system_prompt: str,
    records: Sequence[QueryRecord],
    reports: Sequence[EvaluationReport],
    agent_errors: Sequence[str],
    *,
    runs: int = 1,
) -> PromptEvaluation:
    """The prompt's score and failure examples from its judged runs (a query's runs averaged in `per_query`)."""
    scores: list[float] = []
    per_judge: dict[str, list[float]] = {}
    per_query: dict[str, list[float]] = {}
    failures: dict[str, int] = {}
    by_mode: dict[str, int] = {}
    judge_errors: list[str] = []
    examples: list[FailureExample] = []
    for report in reports:
        query_id = base_query_id(report.query_id) if runs > 1 else report.query_id
        for name, result in report.judges.items():
            if result.status != 'ok':  # errored or inconclusive: no verdict to score
                judge_errors.append(f'{report.query_id}: {name}: {result.status}: {result.error}')
                continue
            if result.score is None:
                continue
            scores.append(result.score)
            per_judge.setdefault(name, []).append(result.score)
            per_query.setdefault(query_id, []).append(result.score)
            if result.issues:
                failures[name] = failures.get(name, 0) + len(result.issues)
                if result.failure_mode:
                    by_mode[result.failure_mode] = by_mode.get(result.failure_mode, 0) + len(result.issues)
            for issue in result.issues:
                examples.append(
                    FailureExample(
                        query_id=query_id,
                        query=report.query,
                        judge=name,
                        failure_mode=result.failure_mode,
                        summary=issue_summary(issue),
                    )
                )
    agent_calls = sum(int(r.metadata.get('agent_requests', 0) or 0) for r in records)
    judge_calls = sum(x.requests for r in reports for x in r.judges.values() if not x.cached)
    return PromptEvaluation(
        prompt_version=prompt_version(system_prompt),
        score=sum(scores) / len(scores) if scores else None,
        n_scores=len(scores),
        per_judge={k: sum(v) / len(v) for k, v in per_judge.items()},
        per_query={k: sum(v) / len(v) for k, v in per_query.items()},
        failures_by_judge=failures,
        failures_by_mode=by_mode,
        judge_errors=judge_errors,
        agent_errors=list(agent_errors),
        failure_examples=examples,
        agent_calls=agent_calls,
        judge_calls=judge_calls,
    )


def base_query_id(record_id: str) -> str:
    """The query a run's record id belongs to (`q#r2` → `q`; see `agents.run_record_id`)."""
    return re.sub(r'#r\d+$', '', record_id)


def issue_summary(issue: dict[str, Any]) -> str:
    """One issue as compact JSON for a prompt (generator, GEPA feedback): its fields without the step
    citations and empty values; a `false` stays, since in the issue models it is often the finding."""
    fields = {k: v for k, v in issue.items() if k not in ('steps', 'source') and v not in (None, '', [])}
    return _clip(json.dumps(fields, ensure_ascii=False, default=str), 400)


# ---------------------------------------------------------------------------------------------------
# Helpers


def _clip(text: str, n: int) -> str:
    text = ' '.join(text.split())
    return text if len(text) <= n else text[: n - 1] + '…'
