"""Judge models Ray workers build by name (`ModelSpec(factory='tests.ray_helpers:...')`): deterministic,
so a run on Ray and a local run give the same verdicts; defined at module level so another process
imports them. `killing_model` kills its own worker process once, mid-run (a lost Ray worker)."""

from __future__ import annotations

import asyncio
import json
import os

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.models.judge_model import JudgeModel
from tests.helpers import about, member_prompts, user_prompt

# env: the file whose creation marks "this run's worker was killed once" (set by the test)
KILL_MARKER_ENV = 'SENSEI_TEST_RAY_KILL_MARKER'
# the call (counted per worker process) at which `killing_model` kills its process
KILL_AT_CALL = 3


def _verdict(prompt: str) -> dict[str, object]:
    """One reasoning per transcript (the same text everywhere would be set aside as inconclusive); a fused
    call (the judges' default) gets one such verdict per member."""
    members = member_prompts(prompt)
    if members is not None:
        return {name: _verdict(single) for name, single in members.items()}
    tag = about(prompt)
    return {'reasoning': f'Checked the answer at [2] against the tool result ({tag}).', 'issues': []}


async def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    await asyncio.sleep(0.01)  # several calls in flight on one worker
    return ModelResponse(parts=[TextPart(json.dumps(_verdict(user_prompt(messages))))])


def fake_model() -> JudgeModel:
    """The deterministic judge model of these tests."""
    return JudgeModel(FunctionModel(_answer, model_name='ray-fake'), 'function:ray-fake', 60_000)


_calls = [0]


async def _answer_or_die(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    _calls[0] += 1
    marker = os.environ.get(KILL_MARKER_ENV)
    if marker and _calls[0] == KILL_AT_CALL:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass  # killed once already: judge
        else:
            os._exit(1)  # the worker process dies with calls of several records in flight
    return await _answer(messages, info)


def killing_model() -> JudgeModel:
    """`fake_model`, except that the first worker to reach its third call kills its own process."""
    return JudgeModel(FunctionModel(_answer_or_die, model_name='ray-fake'), 'function:ray-fake', 60_000)
