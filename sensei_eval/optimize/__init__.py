"""The improvement loop: improve an agent's prompt one component at a time, fed by the judges.

The agent under test comes from the layer below (`sensei_eval.agents`: `components` reads the prompt as
named sections, `runner` runs the user's agent under a prompt); here `config` holds the run's component map
and DSPy LM, `evaluate` scores a prompt with the judges, `variants` is the DSPy variant generator, `loop` the
sequential optimizer (its configuration and saved state: `state`; when a candidate is accepted:
`acceptance`), `metrics` the judges as DSPy (and GEPA) metrics, `gepa` the GEPA baseline.
The CLI is `sensei-eval optimize` (`sensei_eval.cli.optimize`). Nothing here changes the agent: the output is a list of
`PromptSuggestion`s and an optimized copy of the components for a human to review.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from sensei_eval.core.extras import requires_extra

# DSPy (and its pinned litellm) come with the "optimize" extra: without it, MissingExtraError names the command
with requires_extra('optimize', 'the prompt optimizer'):
    from sensei_eval.optimize.evaluate import FailureExample, PromptEvaluation, evaluate_prompt
    from sensei_eval.optimize.loop import SequentialOptimizer, order_components
    from sensei_eval.optimize.metrics import AgentProgram, JudgeMetric, MetricError, compile_checked, prediction_record
    from sensei_eval.optimize.state import OptimizeConfig, OptimizeState, PromptSuggestion
    from sensei_eval.optimize.variants import VariantGenerator

__all__ = (
    'AgentProgram',
    'FailureExample',
    'JudgeMetric',
    'MetricError',
    'OptimizeConfig',
    'OptimizeState',
    'PromptEvaluation',
    'PromptSuggestion',
    'SequentialOptimizer',
    'VariantGenerator',
    'compile_checked',
    'evaluate_prompt',
    'order_components',
    'prediction_record',
)

# The agent under test's names, exported here too before issue 43: their one home is `sensei_eval.agents`
# (`agents.components`, `agents.runner`; the common ones also `sensei_eval` itself). Still importable from
# here for one release, with a DeprecationWarning.
_AGENT_NAMES = {
    'ComponentsError': 'components', 'PromptComponents': 'components', 'load_components': 'components',
    'save_components': 'components', 'AgentRunError': 'runner', 'AgentRunner': 'runner', 'PydanticAIRunner': 'runner',
    'Query': 'runner', 'load_queries': 'runner', 'load_runner': 'runner', 'run_query': 'runner',
}  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _AGENT_NAMES.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    warnings.warn(
        f'sensei_eval.optimize.{name} is deprecated: import it from sensei_eval.agents.{module}', DeprecationWarning, stacklevel=2
    )
    return getattr(importlib.import_module(f'sensei_eval.agents.{module}'), name)
