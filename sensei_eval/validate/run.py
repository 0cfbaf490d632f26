"""Run the agent under the old and the new prompt, judge every run, and compare.

`validate_prompts` is the library form of `python -m sensei_eval.validate --old-prompt … --new-prompt …`:

1. every query is run R times under each prompt (`agents.run_and_judge_many`, at most
   `AgentRuns.concurrency` runs in flight, old and new interleaved so a drifting backend hits both alike);
   run r of query `q` becomes the record `q#r<r>` (just `q` when R = 1), so reports of one query never
   overwrite each other and `compare.split_run_id` pairs them back by `q`;
2. a run that raises is an `AgentRunError`: it becomes a `RunError` in the comparison, counted against
   `max_error_rate` — never a record, never a score;
3. each side's records are judged by the same judges with `runner.judge_records` (`JudgeRunOptions(repeat=J)`) (the judge
   cache key includes the repeat index, so J re-judgings really ask J times) into `<out>/old/` and
   `<out>/new/`, one report per record and repeat, exactly as the judge CLI writes them;
4. `compare.compare_reports` pairs, tests and gates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sensei_eval.agents.components import PromptComponents
from sensei_eval.agents.runner import (
    AgentRunner,
    AgentRuns,
    JudgedRuns,
    Query,
    RunEvent,
    prompt_text,
    prompt_version,
    run_and_judge_many,
    run_record_id,
)
from sensei_eval.core.errors import ConfigError
from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.records import QueryRecord
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.record import JudgeEvent
from sensei_eval.validate.compare import Resampling, compare_reports
from sensei_eval.validate.results import Comparison, RunError, SideSummary, Thresholds

__all__ = ('RunEvent', 'SideRun', 'ValidateOptions', 'prompt_text', 'run_agent', 'run_id_for', 'validate_prompts')

SIDES = ('old', 'new')


@dataclass
class SideRun:
    """One prompt's agent runs: the records they produced and the runs that failed."""

    label: str
    prompt: str
    records: list[QueryRecord]
    errors: list[RunError]
    attempts: int


run_id_for = run_record_id


async def run_agent(
    runner: AgentRunner,
    prompts: dict[str, str],
    queries: Sequence[Query],
    *,
    runs: int = 1,
    concurrency: int = 4,
    on_run: Callable[[RunEvent], None] | None = None,
) -> dict[str, SideRun]:
    """Run every query `runs` times under every prompt of `prompts` (label → text), sharing one limit;
    no judging (`agents.run_and_judge_many` with no judges)."""
    agent = AgentRuns(runner, runs=runs, concurrency=concurrency, on_run=on_run)
    done = await run_and_judge_many(prompts, queries, agent, JudgeRunOptions())
    return {label: _side_run(d) for label, d in done.items()}


def _side_run(done: JudgedRuns) -> SideRun:
    errors = sorted(
        (RunError(query_id=f.query_id, run=f.run, message=f.message) for f in done.failed), key=lambda e: (e.query_id, e.run)
    )
    return SideRun(done.label, done.prompt, done.records, errors, done.attempts)


@dataclass(frozen=True)
class ValidateOptions:
    """How the two sides are compared (`thresholds`, `resampling`) and where the run goes: reports to
    `out_dir/old|new/` when set, run ids `<run_id>-old|new`; `old_source` / `new_source` name where each
    prompt came from in the comparison (default: a `PromptComponents`' own source)."""

    thresholds: Thresholds | None = None
    resampling: Resampling = field(default_factory=Resampling)
    out_dir: Path | None = None
    run_id: str = 'validate'
    old_source: str | None = None
    new_source: str | None = None


async def validate_prompts(
    old_prompt: str | PromptComponents,
    new_prompt: str | PromptComponents,
    agent: AgentRuns,
    queries: Sequence[Query],
    options: JudgeRunOptions,
    validate: ValidateOptions | None = None,
    *,
    on_judge: Callable[[str, JudgeEvent], None] | None = None,
    on_judging: Callable[[str, int], None] | None = None,
) -> Comparison:
    """Run (`agent`: runner, runs per query, concurrency, `on_run` per agent run), judge (`options`: its
    `repeat` is the judge repeats) and compare the two prompts.

    Progress callbacks: `agent.on_run` per agent run, `on_judging(side, total judge calls)` before a side
    is judged, `on_judge(side, event)` per judge call."""
    validate = validate or ValidateOptions()
    runs, judge_repeats, out_dir, run_id = agent.runs, options.repeat, validate.out_dir, validate.run_id
    if runs < 1 or judge_repeats < 1:
        raise ConfigError('runs and judge_repeats must be at least 1')
    texts = {'old': prompt_text(old_prompt), 'new': prompt_text(new_prompt)}
    if out_dir is not None:
        for label in SIDES:
            (out_dir / label).mkdir(parents=True, exist_ok=True)
            write_text_atomic(out_dir / f'{label}.prompt.txt', texts[label])  # the exact prompt, for the record
    done = await run_and_judge_many(
        texts,
        queries,
        agent,
        options,
        run_ids={label: f'{run_id}-{label}' for label in SIDES},
        run_dirs={label: out_dir / label if out_dir is not None else None for label in SIDES},
        on_judging=on_judging,
        on_judge=on_judge,
    )
    sides = {label: _side_run(d) for label, d in done.items()}
    reports = {label: d.reports for label, d in done.items()}
    given = {'old': old_prompt, 'new': new_prompt}
    sources = {'old': validate.old_source, 'new': validate.new_source}
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
        thresholds=validate.thresholds,
        resampling=validate.resampling,
        old_side=summaries['old'],
        new_side=summaries['new'],
    )


def _source_of(prompt: str | PromptComponents) -> str | None:
    return prompt.source if isinstance(prompt, PromptComponents) else None
