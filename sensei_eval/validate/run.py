"""Run the agent under the old and the new prompt, judge every run, and compare.

`validate_prompts` is the library form of `python -m sensei_eval.validate --old-prompt … --new-prompt …`:

1. every query is run R times under each prompt (`optimize.agent.run_query`, at most
   `agent_concurrency` runs in flight, old and new interleaved so a drifting backend hits both alike);
   run r of query `q` becomes the record `q#r<r>` (just `q` when R = 1), so reports of one query never
   overwrite each other and `compare.split_run_id` pairs them back by `q`;
2. a run that raises is an `AgentRunError`: it becomes a `RunError` in the comparison, counted against
   `max_error_rate` — never a record, never a score;
3. each side's records are judged by the same judges with `runner.judge_records(repeat=J)` (the judge
   cache key includes the repeat index, so J re-judgings really ask J times) into `<out>/old/` and
   `<out>/new/`, one report per record and repeat, exactly as the judge CLI writes them;
4. `compare.compare_reports` pairs, tests and gates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..cache import JudgeCache
from ..evaluators.base import Judge
from ..models import JudgeModel
from ..optimize.agent import AgentRunError, AgentRunner, Query, prompt_version, run_query
from ..optimize.components import PromptComponents
from ..records import QueryRecord
from ..reports import EvaluationReport, write_json_atomic
from ..runner import JudgeEvent, judge_records
from . import stats
from .compare import Comparison, RunError, SideSummary, compare_reports
from .gate import Thresholds

__all__ = ('RunEvent', 'SideRun', 'prompt_text', 'run_agent', 'run_id_for', 'validate_prompts')

SIDES = ('old', 'new')


@dataclass(frozen=True)
class RunEvent:
    """Progress: one agent run finished (`error` is None when it produced a record)."""

    side: str
    query_id: str
    run: int
    error: str | None


@dataclass
class SideRun:
    """One prompt's agent runs: the records they produced and the runs that failed."""

    label: str
    prompt: str
    records: list[QueryRecord]
    errors: list[RunError]
    attempts: int


def run_id_for(query_id: str, run: int, runs: int) -> str:
    """The record id of run `run` of a query: `q#r<run>`, or plain `q` when there is a single run."""
    return query_id if runs == 1 else f'{query_id}#r{run}'


def prompt_text(prompt: str | PromptComponents) -> str:
    """The full system prompt: built from components, or the text itself."""
    return prompt.build() if isinstance(prompt, PromptComponents) else prompt


async def run_agent(
    runner: AgentRunner,
    prompts: dict[str, str],
    queries: Sequence[Query],
    *,
    runs: int = 1,
    concurrency: int = 4,
    on_run: Callable[[RunEvent], None] | None = None,
) -> dict[str, SideRun]:
    """Run every query `runs` times under every prompt of `prompts` (label → text), sharing one limit."""
    semaphore = asyncio.Semaphore(max(1, concurrency))
    sides = {label: SideRun(label, text, [], [], len(queries) * runs) for label, text in prompts.items()}

    async def one(label: str, query: Query, run: int) -> None:
        side = sides[label]
        async with semaphore:
            try:
                record = await run_query(runner, side.prompt, query)
            except AgentRunError as e:
                side.errors.append(RunError(query_id=query.query_id, run=run, message=e.message))
                if on_run is not None:
                    on_run(RunEvent(label, query.query_id, run, e.message))
                return
        record = record.model_copy(
            update={
                'query_id': run_id_for(query.query_id, run, runs),
                'prompt_version': record.prompt_version or prompt_version(side.prompt),
                'metadata': {**record.metadata, 'validate': {'side': label, 'query_id': query.query_id, 'run': run}},
            }
        )
        side.records.append(record)
        if on_run is not None:
            on_run(RunEvent(label, query.query_id, run, None))

    # interleave: query 1 run 1 old, query 1 run 1 new, … so both prompts meet the same backend conditions
    await asyncio.gather(*(one(label, q, r) for q in queries for r in range(1, runs + 1) for label in prompts))
    order = {run_id_for(q.query_id, r, runs): i for i, q in enumerate(queries) for r in range(1, runs + 1)}
    for side in sides.values():
        side.records.sort(key=lambda rec: order.get(rec.query_id, len(order)))
        side.errors.sort(key=lambda e: (e.query_id, e.run))
    return sides


async def validate_prompts(
    old_prompt: str | PromptComponents,
    new_prompt: str | PromptComponents,
    runner: AgentRunner,
    queries: Sequence[Query],
    judges: Sequence[Judge],
    model: JudgeModel | None = None,
    *,
    runs: int = 1,
    judge_repeats: int = 1,
    thresholds: Thresholds | None = None,
    out_dir: Path | None = None,
    run_id: str = 'validate',
    agent_concurrency: int = 4,
    judge_concurrency: int | None = None,
    cache: JudgeCache | None = None,
    seed: int = 0,
    bootstrap_resamples: int = stats.DEFAULT_BOOTSTRAP,
    permutation_resamples: int = stats.DEFAULT_PERMUTATIONS,
    old_source: str | None = None,
    new_source: str | None = None,
    on_run: Callable[[RunEvent], None] | None = None,
    on_judge: Callable[[str, JudgeEvent], None] | None = None,
    on_judging: Callable[[str, int], None] | None = None,
) -> Comparison:
    """Run, judge and compare the two prompts; reports go to `out_dir/old|new/` when `out_dir` is set.

    Progress callbacks: `on_run` per agent run, `on_judging(side, total judge calls)` before a side is
    judged, `on_judge(side, event)` per judge call."""
    if runs < 1 or judge_repeats < 1:
        raise ValueError('runs and judge_repeats must be at least 1')
    texts = {'old': prompt_text(old_prompt), 'new': prompt_text(new_prompt)}
    sides = await run_agent(runner, texts, queries, runs=runs, concurrency=agent_concurrency, on_run=on_run)
    reports: dict[str, list[EvaluationReport]] = {}
    for label in SIDES:
        run_dir = out_dir / label if out_dir is not None else None
        if out_dir is not None and run_dir is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(out_dir / f'{label}.prompt.txt', texts[label])  # the exact prompt, for the record

        if on_judging is not None:
            total = judge_repeats * sum(1 for r in sides[label].records for j in judges if j.applies_to(r) is None)
            on_judging(label, total)

        def tracked(event: JudgeEvent, label: str = label) -> None:
            if on_judge is not None:
                on_judge(label, event)

        reports[label] = await judge_records(
            sides[label].records,
            judges,
            model,
            run_id=f'{run_id}-{label}',
            run_dir=run_dir,
            concurrency=judge_concurrency,
            repeat=judge_repeats,
            cache=cache,
            on_judge=tracked,
        )
    given = {'old': old_prompt, 'new': new_prompt}
    sources = {'old': old_source, 'new': new_source}
    summaries = {
        label: SideSummary(
            label=label,
            source=sources[label] or _source_of(given[label]),
            prompt_versions=[prompt_version(texts[label])],
            runs=runs,
            repeats=judge_repeats,
            run_attempts=sides[label].attempts,
            run_errors=sides[label].errors,
        )
        for label in SIDES
    }
    return compare_reports(
        reports['old'],
        reports['new'],
        thresholds=thresholds,
        seed=seed,
        bootstrap_resamples=bootstrap_resamples,
        permutation_resamples=permutation_resamples,
        old_side=summaries['old'],
        new_side=summaries['new'],
    )


def _source_of(prompt: str | PromptComponents) -> str | None:
    return prompt.source if isinstance(prompt, PromptComponents) else None
