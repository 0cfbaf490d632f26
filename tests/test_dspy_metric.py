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
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.evaluators.base import JudgeError
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import BUILTIN_PROFILES
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.optimize.gepa import GepaError, GepaSettings, run_gepa
from sensei_eval.optimize.metrics import (
    JudgeMetric,
    JudgeMetricWarning,
    MetricError,
    OnError,
    compile_checked,
    prediction_record,
)
from sensei_eval.optimize.scripted import ScriptedLM
from sensei_eval.optimize.state import OptimizeConfig

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
    # two greetings (judged: an agent_format issue, mode score 0.5; a check failed the run: 0.25 * 0.5), two plain
    # answers (1.0)
    answers = [{'answer': 'Hello! Use setup().'}, {'answer': 'Use setup().'}] * 4
    lm = DummyLM(answers)
    # the greeting check holds for the docs-agent profile (the default profile runs only checks for any agent)
    metric = JudgeMetric(make_judges(['greeting_check']), None, profile=BUILTIN_PROFILES['docs-agent'])
    program = dspy.Predict('question -> answer')
    with dspy.context(lm=lm):
        assert metric(TRAIN[0], program(question=TRAIN[0].question)) == 0.125
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


# ---------------------------------------------------------------------------------------------------
# Judge errors inside the metric: counted, warned about, failing check(), handled by on_error


def _failing_model(monkeypatch: pytest.MonkeyPatch) -> JudgeModel:
    """A judge model whose every request answers HTTP 500 (retried at once, then an error)."""
    from sensei_eval.models import retry

    monkeypatch.setattr(retry, 'BASE_BACKOFF_S', 0.001)

    def fail(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(status_code=500, model_name='broken', body='internal server error')

    return JudgeModel(FunctionModel(fail, model_name='broken'), 'function:broken')


def _evaluate(metric: JudgeMetric) -> Any:
    program = dspy.Predict('question -> answer')
    with dspy.context(lm=DummyLM([{'answer': 'Use setup() and read the docs.'}] * 8)):
        evaluate = dspy.Evaluate(devset=TRAIN, metric=metric, num_threads=1, display_progress=False, max_errors=100)
        return evaluate(program)


def test_a_model_answering_500_shows_in_dspy_evaluate_and_fails_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """`mvp,checks` with every LLM call failing: the checks alone must not make the program score 100%."""
    metric = JudgeMetric(make_judges(['mvp', 'checks']), _failing_model(monkeypatch), profile=BUILTIN_PROFILES['docs-agent'])
    with pytest.warns(JudgeMetricWarning, match='500') as warned:
        result = _evaluate(metric)
    assert float(result.score) == 0.0  # every example failed: DSPy's failure score, not the checks' 1.0
    assert len([w for w in warned if issubclass(w.category, JudgeMetricWarning)]) == len(TRAIN)  # one per call
    assert metric.failed_calls == len(TRAIN) == metric.metric_calls and metric.scored == 0
    assert all('500' in e for e in metric.errors)
    with pytest.raises(MetricError, match='failed on every call'):
        metric.check()


@pytest.mark.parametrize(('on_error', 'score'), [('skip', None), ('zero', 0.0)])
def test_on_error_skip_and_zero_score_but_still_count_and_fail_check(
    monkeypatch: pytest.MonkeyPatch, on_error: OnError, score: float | None
) -> None:
    judges = make_judges(['mvp', 'checks'])
    metric = JudgeMetric(judges, _failing_model(monkeypatch), profile=BUILTIN_PROFILES['docs-agent'], on_error=on_error)
    with pytest.warns(JudgeMetricWarning):
        result = _evaluate(metric)
    if score is None:  # skip: the judges that answered (the checks), as before, but never silently
        assert float(result.score) > 0.0
    else:
        assert float(result.score) == score
    assert metric.failed_calls == len(TRAIN) and metric.scored == len(TRAIN)
    with pytest.raises(MetricError, match=f'errors in {len(TRAIN)} of {len(TRAIN)} call.*on_error={on_error!r}'):
        metric.check()
    tolerant = JudgeMetric(judges, None, on_error=on_error, max_error_rate=1.0)
    tolerant.check()  # nothing called: nothing to fail


def test_the_examples_reference_reaches_the_judges_inside_dspy() -> None:
    """A program that calls nothing fails the reference check instead of scoring 1.0."""
    expected = [{'tool_name': 'lookup_account', 'args': {'account_id': 'A-1'}}]
    example = dspy.Example(question='What is the balance of A-1?', answer='120.00', expected_tool_calls=expected).with_inputs(
        'question'
    )
    pred = dspy.Prediction(answer='The balance is 120.00.')
    record = prediction_record(example, pred)
    assert record.expected_tool_calls is not None and record.expected_tool_calls[0].tool_name == 'lookup_account'
    assert record.metadata['reference_answer'] == '120.00'
    metric = JudgeMetric(make_judges(['reference_check']), None)
    score = metric(example, pred)
    assert isinstance(score, float) and score < 1.0
    # the same transcript without a reference: the check does not apply, so nothing is judged (an error)
    bare = dspy.Example(question='What is the balance of A-1?').with_inputs('question')
    with pytest.warns(JudgeMetricWarning), pytest.raises(JudgeError, match='not judged'):
        metric(bare, pred)
