"""sensei judges on a live pydantic-ai agent through pydantic-evals' own online evaluation.

A real `Agent` (its model scripted with `FunctionModel`) calls a tool and answers; `OnlineEvaluation`
runs the judges in the background, reading the run from the span tree pydantic-evals captures. The
verdicts must be the ones the CLI's runner gives the same run stored as a record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_evals.online import OnlineEvalConfig, wait_for_evaluations
from pydantic_evals.online_capability import OnlineEvaluation

from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators import Hallucination, RubricJudge, make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from sensei_eval.production.online import online_evaluation
from tests.helpers import ScriptedJudge, about


@pytest.fixture(scope='module', autouse=True)
def sdk_tracer_provider() -> None:
    """pydantic-evals captures a run's spans through the global SDK tracer provider."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())


def billing_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Looks the balance up, then answers with what the tool said."""
    returns = [p for m in messages for p in getattr(m, 'parts', []) if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart('get_balance', {'account': 'A-17'}, tool_call_id='c1')])
    return ModelResponse(parts=[TextPart(f'Your balance is {returns[0].content}.')])


def make_agent(capability: OnlineEvaluation[Any]) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(billing_model), name='billing', capabilities=[capability])
    agent.instrument = True

    @agent.tool_plain
    def get_balance(account: str) -> str:
        return f'{account}: 42.10 EUR'

    return agent


def judge_answer(prompt: str, n: int) -> dict[str, Any]:
    return {'reasoning': f'The answer repeats the tool result at [3] ({about(prompt)}).', 'issues': []}


async def test_judges_attach_to_a_live_agent_with_online_evaluation(tmp_path: Path) -> None:
    scripted = ScriptedJudge(judge_answer)
    judge_model = scripted.model()
    results: list[Any] = []
    failures: list[Any] = []

    def sink(found: Any, failed: Any, ctx: Any) -> None:
        results.extend(found)
        failures.extend(failed)

    hallucination = Hallucination(model=judge_model.model)
    rubric = RubricJudge(
        name='balance_stated', rubric='The answer states the balance the tool returned.', model=judge_model.model
    )
    capability = OnlineEvaluation(
        evaluators=[hallucination, rubric], config=OnlineEvalConfig(default_sink=sink, default_sample_rate=1.0)
    )
    result = await make_agent(capability).run('What is the balance of account A-17?')
    await wait_for_evaluations()
    assert result.output == 'Your balance is A-17: 42.10 EUR.'
    assert not failures, [f.error_message for f in failures]
    scores = {r.name: r.value for r in results}
    assert scores['hallucination'] == 1.0 and scores['balance_stated_passed'] is True
    # the judges read the whole run from its spans: the tool call and its result reached the prompt
    prompt = json.dumps([str(m) for m in scripted.calls[0]])
    assert 'get_balance' in prompt and '42.10 EUR' in prompt


async def test_online_judging_gives_the_runners_verdicts_and_writes_reports(tmp_path: Path) -> None:
    options = JudgeRunOptions(judges=make_judges(['checks']))
    stored: list[Any] = []
    capability = online_evaluation(options, sample_rate=1.0, run_dir=tmp_path / 'online', on_report=stored.append)
    capability = OnlineEvaluation(
        evaluators=capability.evaluators, config=OnlineEvalConfig(default_sink=lambda *_: None, default_sample_rate=1.0)
    )
    result = await make_agent(capability).run('What is the balance of account A-17?')
    await wait_for_evaluations()
    [online] = stored
    [offline] = await judge_records([QueryRecord.from_pydantic_ai(result, query_id=online.query_id)], options, run_id='cli')
    assert online.overall_score == offline.overall_score
    assert {n: r.passed for n, r in online.judges.items()} == {n: r.passed for n, r in offline.judges.items()}
    assert list((tmp_path / 'online' / 'records').glob('*.json')), 'the report is written where `view` reads it'


async def test_a_judge_without_a_record_or_spans_fails_with_a_reason() -> None:
    from pydantic_evals import Case, Dataset

    dataset: Dataset[str, str, Any] = Dataset(
        name='plain', cases=[Case(name='plain', inputs='hi')], evaluators=[Hallucination(model='test')]
    )
    report = await dataset.evaluate(lambda q: q.upper(), progress=False)
    [case] = report.cases
    [failure] = case.evaluator_failures
    assert 'no record to judge' in failure.error_message or 'QueryRecord' in failure.error_message


def test_online_judging_feeds_the_service(tmp_path: Path) -> None:
    """A live agent's judged runs land in the scoring service as sessions (real uvicorn on loopback)."""
    import asyncio

    import httpx

    from sensei_eval.production.online import post_to_service
    from tests.service.conftest import ScriptedScorer, fast_settings, live_server

    settings = fast_settings(f'sqlite:///{tmp_path / "service.db"}')
    with live_server(settings, ScriptedScorer().model(), migrate=True) as server:
        options = JudgeRunOptions(judges=make_judges(['checks']))
        capability = online_evaluation(options, sample_rate=1.0, on_report=post_to_service(server.url, agent='billing'))

        async def run() -> str:
            result = await make_agent(capability).run('What is the balance of account A-17?')
            await wait_for_evaluations()
            return QueryRecord.from_pydantic_ai(result).query

        query = asyncio.run(run())
        sessions = httpx.get(f'{server.url}/api/v1/sessions', params={'agent': 'billing'}).json()
    [session] = sessions['items']
    assert session['query'] == query == 'What is the balance of account A-17?'
