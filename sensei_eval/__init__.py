"""sensei-eval: judge AI agent runs with LLM judges, and improve and validate the agent's prompt.

The library in one place (the command-line tools and the service are thin layers over these names):

* records: `QueryRecord`, `Rating`, `load_dataset`, `load_datasets`;
* judges: `make_judges`, `Judge`, `FailureModeJudge`, `JudgeModel`, `resolve_model`, `Profile`,
  `resolve_profile`;
* judging: `judge_records` (async), `RunFolder` (a run's reports and `summary.json`), `RunSummary`;
* reports: `EvaluationReport`, `JudgeResult`, `load_reports`, `to_dataframe`;
* agents: `Query`, `load_queries`, `AgentRunner`, `PydanticAIRunner`, `load_runner`, `PromptComponents`,
  `load_components`, `run_and_judge` (async);
* `calibrate`, the module (`calibrate.calibrate(...)`, `CalibrationResult`: judges against labels; a
  function of the same name here would shadow the module, depending on import order);
* `compare_reports` and `assert_no_regression` (a prompt change, before and after).

Names load on first use, so `import sensei_eval` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import calibrate
    from .agents import AgentRunner, PydanticAIRunner, Query, load_queries, load_runner, run_and_judge
    from .calibrate import CalibrationResult
    from .components import PromptComponents, load_components
    from .evaluators.base import FailureModeJudge, Judge
    from .evaluators.registry import make_judges
    from .models import JudgeModel, resolve_model
    from .profiles import Profile, resolve_profile
    from .records import QueryRecord, Rating, load_dataset, load_datasets
    from .reports import EvaluationReport, JudgeResult, JudgeSummary, RunSummary, load_reports, to_dataframe
    from .run_folder import RunFolder
    from .runner import judge_records
    from .validate import assert_no_regression, compare_reports

_WHERE = {
    'AgentRunner': 'agents',
    'PydanticAIRunner': 'agents',
    'Query': 'agents',
    'load_queries': 'agents',
    'load_runner': 'agents',
    'run_and_judge': 'agents',
    'CalibrationResult': 'calibrate',
    'PromptComponents': 'components',
    'load_components': 'components',
    'FailureModeJudge': 'evaluators.base',
    'Judge': 'evaluators.base',
    'make_judges': 'evaluators.registry',
    'JudgeModel': 'models',
    'resolve_model': 'models',
    'Profile': 'profiles',
    'resolve_profile': 'profiles',
    'QueryRecord': 'records',
    'Rating': 'records',
    'load_dataset': 'records',
    'load_datasets': 'records',
    'EvaluationReport': 'reports',
    'JudgeResult': 'reports',
    'JudgeSummary': 'reports',
    'RunSummary': 'reports',
    'load_reports': 'reports',
    'to_dataframe': 'reports',
    'RunFolder': 'run_folder',
    'judge_records': 'runner',
    'assert_no_regression': 'validate',
    'compare_reports': 'validate',
}

__all__ = (
    'AgentRunner',
    'CalibrationResult',
    'EvaluationReport',
    'FailureModeJudge',
    'Judge',
    'JudgeModel',
    'JudgeResult',
    'JudgeSummary',
    'Profile',
    'PromptComponents',
    'PydanticAIRunner',
    'Query',
    'QueryRecord',
    'Rating',
    'RunFolder',
    'RunSummary',
    'assert_no_regression',
    'calibrate',
    'compare_reports',
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
    'to_dataframe',
)


# Submodules exported as themselves.
_MODULES = frozenset({'calibrate'})


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f'.{name}', __name__)
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(f'.{module}', __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
