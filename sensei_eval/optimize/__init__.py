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

from sensei_eval.core.extras import requires_extra

# DSPy (and its pinned litellm) come with the "optimize" extra: without it, MissingExtraError names the command
with requires_extra('optimize', 'the prompt optimizer'):
    from sensei_eval.agents.components import ComponentsError, PromptComponents, load_components, save_components
    from sensei_eval.agents.runner import (
        AgentRunError,
        AgentRunner,
        PydanticAIRunner,
        Query,
        load_queries,
        load_runner,
        run_query,
    )
    from sensei_eval.optimize.evaluate import FailureExample, PromptEvaluation, evaluate_prompt
    from sensei_eval.optimize.loop import SequentialOptimizer, order_components
    from sensei_eval.optimize.metrics import AgentProgram, JudgeMetric, MetricError, compile_checked, prediction_record
    from sensei_eval.optimize.state import OptimizeConfig, OptimizeState, PromptSuggestion
    from sensei_eval.optimize.variants import VariantGenerator

__all__ = (
    'AgentProgram',
    'AgentRunError',
    'AgentRunner',
    'ComponentsError',
    'FailureExample',
    'JudgeMetric',
    'MetricError',
    'OptimizeConfig',
    'OptimizeState',
    'PromptComponents',
    'PromptEvaluation',
    'PromptSuggestion',
    'PydanticAIRunner',
    'Query',
    'SequentialOptimizer',
    'VariantGenerator',
    'compile_checked',
    'evaluate_prompt',
    'load_components',
    'load_queries',
    'load_runner',
    'order_components',
    'prediction_record',
    'run_query',
    'save_components',
)
