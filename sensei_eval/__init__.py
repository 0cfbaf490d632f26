"""sensei-eval: judge AI agent runs with LLM judges, and improve and validate the agent's prompt.

The library in one place (the command-line tools and the service are thin layers over these names):

* records: `QueryRecord`, `Rating`, `load_dataset`, `load_datasets`;
* judges: `make_judges`, `Judge`, `FailureModeJudge`, `JudgeModel`, `resolve_model`, `Profile`,
  `resolve_profile`;
* judging: `run_dataset(RunSpec(...))` (a whole run, as `sensei-eval judge` makes it), `judge_record` (async: one
  record to its report), `judge_records` (async) with a `JudgeRunOptions`, `RunFolder` (a run's reports and
  `summary.json`), `RunSummary`;
* reports: `RecordReport`, `JudgeResult`, `load_reports`, `to_dataframe`;
* agents: `Query`, `load_queries`, `AgentRunner`, `PydanticAIRunner`, `load_runner`, `PromptComponents`,
  `load_components`, `run_and_judge` (async) with `AgentRuns`;
* `calibrate`, the module (`calibrate.calibrate(...)`, `CalibrationResult`: judges against labels; a
  function of the same name here would shadow the module, depending on import order);
* `compare_reports` and `assert_no_regression` (a prompt change, before and after).

Names load on first use, so `import sensei_eval` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sensei_eval.agents.components import PromptComponents, load_components
    from sensei_eval.agents.runner import (
        AgentRunner,
        AgentRuns,
        PydanticAIRunner,
        Query,
        load_queries,
        load_runner,
        run_and_judge,
    )
    from sensei_eval.core.datasets import load_dataset, load_datasets
    from sensei_eval.core.records import QueryRecord, Rating
    from sensei_eval.core.reports import JudgeResult, JudgeSummary, RecordReport, RunSummary
    from sensei_eval.evaluators.base import FailureModeJudge, Judge
    from sensei_eval.evaluators.registry import make_judges
    from sensei_eval.judging.options import JudgeRunOptions
    from sensei_eval.judging.profiles import Profile, resolve_profile
    from sensei_eval.judging.record import judge_record
    from sensei_eval.judging.run import RunSpec, run_dataset
    from sensei_eval.judging.run_folder import RunFolder, load_reports, to_dataframe
    from sensei_eval.judging.runner import judge_records
    from sensei_eval.models.judge_model import JudgeModel, resolve_model
    from sensei_eval.validate import assert_no_regression, calibrate, compare_reports
    from sensei_eval.validate.calibrate import CalibrationResult

_WHERE = {
    'AgentRunner': 'agents.runner',
    'AgentRuns': 'agents.runner',
    'PydanticAIRunner': 'agents.runner',
    'Query': 'agents.runner',
    'load_queries': 'agents.runner',
    'load_runner': 'agents.runner',
    'run_and_judge': 'agents.runner',
    'CalibrationResult': 'validate.calibrate',
    'PromptComponents': 'agents.components',
    'load_components': 'agents.components',
    'FailureModeJudge': 'evaluators.base',
    'Judge': 'evaluators.base',
    'make_judges': 'evaluators.registry',
    'JudgeModel': 'models.judge_model',
    'resolve_model': 'models.judge_model',
    'Profile': 'judging.profiles',
    'resolve_profile': 'judging.profiles',
    'QueryRecord': 'core.records',
    'Rating': 'core.records',
    'load_dataset': 'core.datasets',
    'load_datasets': 'core.datasets',
    'RecordReport': 'core.reports',
    'JudgeResult': 'core.reports',
    'JudgeSummary': 'core.reports',
    'RunSummary': 'core.reports',
    'load_reports': 'judging.run_folder',
    'to_dataframe': 'judging.run_folder',
    'RunFolder': 'judging.run_folder',
    'judge_records': 'judging.runner',
    'judge_record': 'judging.record',
    'run_dataset': 'judging.run',
    'RunSpec': 'judging.run',
    'JudgeRunOptions': 'judging.options',
    'assert_no_regression': 'validate',
    'compare_reports': 'validate',
}

__all__ = (
    'AgentRunner',
    'AgentRuns',
    'CalibrationResult',
    'FailureModeJudge',
    'Judge',
    'JudgeModel',
    'JudgeResult',
    'JudgeRunOptions',
    'JudgeSummary',
    'Profile',
    'PromptComponents',
    'PydanticAIRunner',
    'Query',
    'QueryRecord',
    'Rating',
    'RecordReport',
    'RunFolder',
    'RunSpec',
    'RunSummary',
    'assert_no_regression',
    'calibrate',
    'compare_reports',
    'judge_record',
    'judge_records',
    'load_components',
    'load_dataset',
    'load_datasets',
    'load_queries',
    'load_reports',
    'load_runner',
    'make_judges',
    'resolve_model',
    'resolve_profile',
    'run_and_judge',
    'run_dataset',
    'to_dataframe',
)


# Submodules exported as themselves.
_MODULES = {'calibrate': 'validate.calibrate'}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f'.{_MODULES[name]}', __name__)
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(f'.{module}', __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
