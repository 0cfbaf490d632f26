"""`JudgeMetric` on any DSPy program, and failures that surface instead of an empty compile.

A plain `dspy.Predict` program (no `record` on its predictions) used to make the metric raise a
TypeError on every call, which `BootstrapFewShot` swallowed into "Bootstrapped 0 full traces"; a GEPA
reflection LM whose answers could not be parsed failed on every proposal with nothing raised.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import BUILTIN_PROFILES
from sensei_eval.optimize.gepa import GepaError, GepaSettings, run_gepa
from sensei_eval.optimize.loop import OptimizeConfig
from sensei_eval.optimize.metrics import JudgeMetric, MetricError, compile_checked, prediction_record
from sensei_eval.optimize.scripted import ScriptedLM

from .test_optimize import COMPONENTS, QUERIES, RuleAgent

TRAIN = [dspy.Example(question=f'How do I set up feature {i}?', answer='x').with_inputs('question') for i in range(4)]


def test_a_plain_program_prediction_becomes_a_record() -> None:
    pred = dspy.Prediction(answer='Hello! Use `setup()`.', reasoning='...')
    record = prediction_record(TRAIN[0], pred)
    assert record.query == 'How do I set up feature 0?'
    assert [m['role'] for m in record.messages] == ['user', 'assistant'] and record.final_answer() == 'Hello! Use `setup()`.'
    react = dspy.Prediction(
        answer='Done.',
        trajectory={'thought_0': 'look it up', 'tool_name_0': 'search', 'tool_args_0': {'q': 'setup'},
                    'observation_0': 'setup() does it', 'thought_1': 'done', 'tool_name_1': 'finish', 'tool_args_1': {}},
    )  # fmt: skip
    calls = prediction_record(TRAIN[0], react).tool_calls()
    assert [(c.tool_name, c.args, c.result) for c in calls] == [('search', {'q': 'setup'}, 'setup() does it')]


def test_judge_metric_scores_and_bootstraps_a_plain_dspy_program() -> None:
    # two greetings (judged: agent_format issue, 0.5), two plain answers (1.0)
    answers = [{'answer': 'Hello! Use setup().'}, {'answer': 'Use setup().'}] * 4
    lm = DummyLM(answers)
    # the greeting check holds for the docs-agent profile (the default profile runs only checks for any agent)
    metric = JudgeMetric(make_judges(['greeting_check']), None, profile=BUILTIN_PROFILES['docs-agent'])
    program = dspy.Predict('question -> answer')
    with dspy.context(lm=lm):
        assert metric(TRAIN[0], program(question=TRAIN[0].question)) == 0.5
        assert metric(TRAIN[1], program(question=TRAIN[1].question)) == 1.0
        optimizer = dspy.BootstrapFewShot(metric=lambda e, p, t=None: metric(e, p, t) == 1.0, max_bootstrapped_demos=2)
        compiled = compile_checked(optimizer, program, metric, trainset=TRAIN)
    assert compiled.demos, 'the compile bootstrapped no trace'
    assert metric.scored >= 4 and not metric.errors


def test_a_metric_that_fails_on_every_call_raises_after_the_compile() -> None:
    def broken(example: Any, pred: Any) -> Any:
        raise ValueError('no transcript in this prediction')

    metric = JudgeMetric(make_judges(['greeting_check']), None, record_adapter=broken)
    program = dspy.Predict('question -> answer')
    with dspy.context(lm=DummyLM([{'answer': 'a'}] * 8)):
        optimizer = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=2)
        with pytest.raises(MetricError, match=r'failed on every call.*no transcript in this prediction'):
            compile_checked(optimizer, program, metric, trainset=TRAIN)


def test_gepa_with_a_reflection_lm_it_cannot_parse_raises(tmp_path: Path) -> None:
    reflection = ScriptedLM(lambda messages: 'I would make the prompt better, probably.')
    with pytest.raises(GepaError, match='failed on all'):
        run_gepa(
            COMPONENTS, RuleAgent(), QUERIES, JudgeRunOptions(make_judges(['greeting_check', 'citation_check'])),
            GepaSettings(reflection, max_metric_calls=40), run_dir=tmp_path / 'gepa', config=OptimizeConfig(seed=0),
        )  # fmt: skip
