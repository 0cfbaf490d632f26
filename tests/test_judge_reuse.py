"""A judge built with `model=` resolves its model once: repeated `evaluate()` calls reuse one model, one
agent and one connection watch, and memory does not grow with the number of calls."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EvaluatorContext
from pydantic_evals.otel.span_tree import SpanTree

from sensei_eval.core.errors import ConfigError
from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators import FusedJudge, Hallucination, RubricJudge
from sensei_eval.evaluators.base import FailureModeJudge
from tests.helpers import ScriptedJudge, about

RECORD = QueryRecord.from_openai(
    [
        {'role': 'user', 'content': 'What is the balance of account A-17?'},
        {
            'role': 'assistant',
            'tool_calls': [
                {'id': 'c1', 'type': 'function', 'function': {'name': 'get_balance', 'arguments': '{"account": "A-17"}'}}
            ],
        },
        {'role': 'tool', 'tool_call_id': 'c1', 'content': '42.10 EUR'},
        {'role': 'assistant', 'content': 'Your balance is 42.10 EUR.'},
    ],
    query_id='balance',
)


def clean(prompt: str, n: int) -> dict[str, Any]:
    return {'reasoning': f'The answer repeats the tool result at [3] ({about(prompt)}).', 'issues': []}


def fused_clean(prompt: str, n: int) -> dict[str, Any]:
    return {name: clean(prompt, n) for name in ('hallucination', 'completeness')}


async def _evaluate(judge: Any, times: int) -> None:
    """`times` calls of the judge's pydantic-evals `evaluate`, as `Dataset.evaluate` makes them."""
    ctx: EvaluatorContext[QueryRecord, QueryRecord, Any] = EvaluatorContext(
        name='balance',
        inputs=RECORD,
        metadata=None,
        expected_output=None,
        output=RECORD,
        duration=0.0,
        _span_tree=SpanTree(),
        attributes={},
        metrics={},
    )
    for _ in range(times):
        assert await judge.evaluate(ctx)


@pytest.mark.parametrize('kind', ['single', 'fused'])
async def test_a_thousand_evaluate_calls_build_one_agent_and_hold_memory(kind: str) -> None:
    calls = 0

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:  # keeps nothing between calls
        nonlocal calls
        calls += 1
        out = clean('balance', calls) if kind == 'single' else fused_clean('balance', calls)
        return ModelResponse(parts=[TextPart(json.dumps(out))])

    model = FunctionModel(answer)
    judge: FailureModeJudge | FusedJudge
    if kind == 'single':
        judge = Hallucination(model=model)
    else:
        from sensei_eval.evaluators import Completeness

        judge = FusedJudge(members=[Hallucination(), Completeness()], model=model)
    await _evaluate(judge, 20)  # warm: pydantic-evals' and pydantic-ai's own first-use caches
    resolved = judge.resolve_judge_model()
    watch = resolved.connection
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    await _evaluate(judge, 1_000)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    diff = after.compare_to(before, 'filename')
    grown = sum(s.size_diff for s in diff)
    assert judge.resolve_judge_model() is resolved and resolved.connection is watch
    assert len(resolved._agents) == 1, 'one agent for the judge on its one model'
    assert calls == 1_020
    # was +10 KB per call (a new model and agent each time): 10 MB over 1,000 calls
    assert grown < 1_000_000, f'memory grew by {grown:,} bytes over 1,000 calls: {diff[:5]}'


def test_rubric_judge_is_a_judge_from_fields() -> None:
    judge = RubricJudge(name='refund_policy', rubric='A refund is only promised after the refund tool succeeded.')
    other = RubricJudge(name='refund_policy', rubric='Refunds need a manager.')
    assert judge.get_default_evaluation_name() == 'refund_policy'
    assert judge.criteria_hash() != other.criteria_hash(), 'the rubric is part of the criteria'
    assert 'A refund is only promised' in judge.task_prompt()
    filed = RubricJudge(name='made_up', rubric='No invented facts.', failure_mode='hallucination')
    assert filed.issue_model is Hallucination.issue_model and filed.category == Hallucination.category
    with pytest.raises(ConfigError, match='unknown failure_mode'):
        RubricJudge(name='x', rubric='y', failure_mode='halucination')
    with pytest.raises(ConfigError, match='needs a rubric'):
        RubricJudge(name='x', rubric=' ')


async def test_rubric_judge_and_a_library_judge_side_by_side_in_a_dataset() -> None:
    def answer(prompt: str, n: int) -> dict[str, Any]:
        if 'refund_policy' in prompt:
            return {
                'reasoning': f'At [4] a refund is promised with no refund call ({about(prompt)}).',
                'issues': [{'steps': [4]}],
            }
        return clean(prompt, n)

    model = ScriptedJudge(answer).model().model
    rubric = RubricJudge(name='refund_policy', rubric='A refund is only promised after the refund tool succeeded.', model=model)
    dataset: Dataset[QueryRecord, Any, Any] = Dataset(
        name='side-by-side', cases=[Case(name='balance', inputs=RECORD)], evaluators=[rubric, Hallucination(model=model)]
    )
    report = await dataset.evaluate(lambda r: r, progress=False)
    [case] = report.cases
    assert not case.evaluator_failures
    assert case.assertions['refund_policy_passed'].value is False
    assert case.assertions['hallucination_passed'].value is True
    assert case.scores['refund_policy'].value < 1.0 and case.scores['hallucination'].value == 1.0


async def test_rubric_judge_keeps_the_inconclusive_rule() -> None:
    echo = ScriptedJudge(lambda prompt, n: {'reasoning': '', 'issues': []})
    judge = RubricJudge(name='refund_policy', rubric='Refunds need a tool call.', model=echo.model().model)
    dataset: Dataset[QueryRecord, Any, Any] = Dataset(name='echo', cases=[Case(name='b', inputs=RECORD)], evaluators=[judge])
    report = await dataset.evaluate(lambda r: r, progress=False)
    [case] = report.cases
    assert not case.assertions and 'inconclusive' in case.evaluator_failures[0].error_message
