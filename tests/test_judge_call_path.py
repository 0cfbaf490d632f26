"""What a judge call does besides asking the model stays cheap and correct: the answer is parsed on the
event loop (pydantic-ai sends a plain parse function to a worker thread on every call, which cost more
CPU than the parse), and the prompt texts cached per judge follow the judge's texts when they change."""

from __future__ import annotations

import asyncio
import json
import threading

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import render_transcript
from sensei_eval.evaluators import FusedJudge, Hallucination, RubricJudge
from sensei_eval.evaluators.base import JUDGE_SYSTEM_PROMPT, judge_agent
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.models.judge_model import JudgeModel

RECORD = QueryRecord.from_openai(
    [
        {'role': 'user', 'content': 'Which gate does flight LH-400 leave from?'},
        {
            'role': 'assistant',
            'tool_calls': [
                {'id': 'c1', 'type': 'function', 'function': {'name': 'flight_status', 'arguments': '{"flight": "LH-400"}'}}
            ],
        },
        {'role': 'tool', 'tool_call_id': 'c1', 'content': 'LH-400: gate B44, on time'},
        {'role': 'assistant', 'content': 'Flight LH-400 leaves from gate B44.'},
    ],
    query_id='gate',
)


def _model() -> JudgeModel:
    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(json.dumps({'reasoning': 'The answer repeats gate B44 from [3].', 'issues': []}))])

    return JudgeModel(FunctionModel(answer), 'function:test')


def test_the_answer_is_parsed_on_the_event_loop_thread() -> None:
    threads: list[threading.Thread] = []

    def parse(text: str) -> str:
        threads.append(threading.current_thread())
        return text

    agent = judge_agent(_model(), 'parse-thread', parse, output_retries=0, name='parse-thread')
    asyncio.run(agent.run('Judge this.'))
    assert threads == [threading.main_thread()]


def test_a_judge_call_still_parses_scores_and_hashes() -> None:
    model = _model()
    judge = Hallucination()
    result = asyncio.run(judge.judge(RECORD, render_transcript(RECORD), model))
    assert result.status == 'ok' and result.passed is True and result.score == 1.0
    assert result.criteria_hash == judge.criteria_hash()
    assert len(result.criteria_hash) == 64
    # the cached prompt is the one sent: system prompt, transcript, then this judge's task
    assert judge.task_prompt() in judge.build_prompt(render_transcript(RECORD))
    assert JUDGE_SYSTEM_PROMPT not in judge.task_prompt()


def test_cached_prompts_follow_the_judges_texts() -> None:
    first = RubricJudge(name='gate_named', rubric='The answer names the gate the tool returned.')
    second = RubricJudge(name='gate_named', rubric='The answer names the departure time.')
    assert first.task_prompt() != second.task_prompt()
    assert first.criteria_hash() != second.criteria_hash()
    # a rubric changed on an instance (as an optimizer's variant does) changes what is sent and the hash
    before = first.criteria_hash()
    first.rubric = 'The answer names the terminal.'
    assert 'The answer names the terminal.' in first.task_prompt()
    assert first.criteria_hash() != before
    assert first.criteria_hash() == RubricJudge(name='gate_named', rubric='The answer names the terminal.').criteria_hash()


def test_the_fused_prompt_is_cached_per_set_of_members() -> None:
    members = [j for j in make_judges(['all']) if j.needs_model][:3]
    fused = FusedJudge(members=members)
    again = FusedJudge(members=list(members))
    assert fused.task_prompt() is again.task_prompt()  # built once for the same member texts
    fewer = FusedJudge(members=members[:2])
    assert fewer.task_prompt() != fused.task_prompt()
    for member in members:
        assert member.rubric.strip() in fused.task_prompt()
