"""Before/after validation of a prompt change: run, judge, compare with paired statistics, gate.

The third layer, after judging and optimizing. The same queries run under the old and the new prompt,
every run is judged by the same judges, and each failure mode (and the overall score) is compared over
the *paired* queries: mean
before/after, Δ with a bootstrap CI, Cohen's d_z, agent vs judge noise, and the gate's one-sided tests of
what moved: flips (pass → fail) against fixes by exact McNemar and the paired sign-flip test of the scores
for pass/fail metrics, the sign-flip test alone for score-only ones, Tarone–Holm-corrected over the tests
that could be significant (docs/gate.md). A regression in any mode fails the gate unless allowed by name
(`Thresholds.allow`). The gate turns that into an exit code for CI; `assert_no_regression` does the same
inside a test.

Modules: `stats` (the statistics), `compare` (pairing and aggregation), `gate` (verdicts, exit code),
`render` (Markdown, console), `run` (agent runs + judging), `cli` (`python -m sensei_eval.validate`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sensei_eval.agents.components import PromptComponents, load_components
from sensei_eval.agents.runner import AgentRunner, AgentRuns, PydanticAIRunner, Query, load_queries, load_runner
from sensei_eval.core.errors import ConfigError
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.registry import DEFAULT_JUDGES
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.models.judge_model import JudgeModel, resolve_model
from sensei_eval.validate.compare import OVERALL, JudgeSetError, Resampling, compare_reports, split_run_id
from sensei_eval.validate.gate import EXIT_INPUT_ERROR, EXIT_OK, EXIT_REGRESSION, decide
from sensei_eval.validate.render import print_comparison, to_markdown
from sensei_eval.validate.results import Comparison, GateResult, MetricComparison, RunError, SideSummary, Thresholds
from sensei_eval.validate.run import ValidateOptions, run_agent, validate_prompts

__all__ = (
    'EXIT_INPUT_ERROR',
    'EXIT_OK',
    'EXIT_REGRESSION',
    'OVERALL',
    'Comparison',
    'GateResult',
    'JudgeSetError',
    'MetricComparison',
    'Resampling',
    'RunError',
    'SideSummary',
    'Thresholds',
    'ValidateOptions',
    'assert_no_regression',
    'compare_reports',
    'print_comparison',
    'run_agent',
    'split_run_id',
    'to_markdown',
    'validate_prompts',
)

Reports = str | Path | Sequence[RecordReport]
Prompt = str | Path | PromptComponents


def assert_no_regression(
    old: Comparison | Reports | Prompt,
    new: Reports | Prompt | None = None,
    *,
    agent: AgentRuns | AgentRunner | Any | str | None = None,
    queries: Sequence[Query] | str | Path | None = None,
    judges: JudgeRunOptions | Sequence[str] | Sequence[Judge] = DEFAULT_JUDGES,
    model: JudgeModel | str | None = None,
    validate: ValidateOptions | None = None,
) -> Comparison:
    """Fail a test (AssertionError carrying the Markdown table) when the new side regressed.

    Three ways to call it:

    * `assert_no_regression(comparison)` — gate a `Comparison` you already have (thresholds re-applied);
    * `assert_no_regression(old_run_dir, new_run_dir)` — two judge run folders, or two lists of reports;
    * `assert_no_regression(old_prompt, new_prompt, agent=..., queries=...)` — run the agent under both
      prompts (text, a `PromptComponents`, or a `Path` to a prompts file), judge and compare. `agent` is
      an `AgentRunner`, a pydantic-ai `Agent`, a `"module:factory"` string, or `AgentRuns` (runs per
      query, concurrency); `queries` a list of `Query` or a JSONL path; `judges` judge names or `Judge`s
      (with `model`), or a `JudgeRunOptions` (judge repeats, cache, …). This form calls `asyncio.run`; in
      an async test `await validate_prompts(...)` and pass the result instead.

    `validate`: the thresholds, the seed (`resampling`) and, for the agent form, where the reports go.
    Returns the comparison when the gate passes, so a test can assert more.
    """
    validate = validate or ValidateOptions()
    thresholds = validate.thresholds or Thresholds()
    if isinstance(old, Comparison):
        comparison = old.model_copy(update={'thresholds': thresholds}, deep=True)
        decide(comparison)
    elif agent is not None:
        if (
            queries is None
            or not isinstance(old, str | Path | PromptComponents)
            or not isinstance(new, str | Path | PromptComponents)
        ):
            raise ConfigError('with agent=..., give the old and the new prompt (text, Path or PromptComponents) and queries=...')
        runs = agent if isinstance(agent, AgentRuns) else AgentRuns(_runner(agent))
        options = judges if isinstance(judges, JudgeRunOptions) else JudgeRunOptions(_judges(judges), _model(model, judges))
        comparison = asyncio.run(validate_prompts(_prompt(old), _prompt(new), runs, _queries(queries), options, validate))
    else:
        if new is None:
            raise ConfigError('give the old and the new reports (run folders or lists of RecordReport)')
        comparison = compare_reports(_reports(old), _reports(new), thresholds=thresholds, resampling=validate.resampling)  # type: ignore[arg-type]
    if not comparison.gate.passed:
        raise AssertionError('prompt change regressed:\n\n' + to_markdown(comparison))
    return comparison


# ---------------------------------------------------------------------------------------------------
# Helpers


def _prompt(p: Prompt) -> str | PromptComponents:
    if isinstance(p, Path):
        return load_components(p)
    return p


def _runner(agent: AgentRunner | Any | str) -> AgentRunner:
    from pydantic_ai import Agent

    if isinstance(agent, str):
        return load_runner(agent)
    if isinstance(agent, Agent):
        return PydanticAIRunner(agent)
    if isinstance(agent, AgentRunner):
        return agent
    raise ConfigError(f'agent must be an AgentRunner, a pydantic-ai Agent or "module:factory", got {type(agent).__name__}')


def _queries(queries: Sequence[Query] | str | Path) -> list[Query]:
    if isinstance(queries, str | Path):
        loaded, errors = load_queries(queries)
        if errors:
            raise ConfigError('unusable queries:\n  ' + '\n  '.join(str(e) for e in errors))
        return loaded
    return list(queries)


def _judges(judges: Sequence[str] | Sequence[Judge]) -> list[Judge]:
    from sensei_eval.evaluators.registry import make_judges

    if all(isinstance(j, Judge) for j in judges):
        return [j for j in judges if isinstance(j, Judge)]
    return make_judges([j for j in judges if isinstance(j, str)])


def _model(model: JudgeModel | str | None, judges: Sequence[str] | Sequence[Judge]) -> JudgeModel | None:
    if isinstance(model, JudgeModel):
        return model
    if not any(j.needs_model for j in _judges(judges)):
        return None
    return resolve_model(model)


def _reports(x: Reports) -> list[RecordReport]:
    if isinstance(x, str | Path):
        from sensei_eval.judging.run_folder import RunFolder

        return RunFolder(x).load_reports(require=True)
    return list(x)
