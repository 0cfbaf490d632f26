"""`sensei-eval judge` with a scripted judge that answers a few calls, then hangs: the Ctrl-C test
starts it in a subprocess and interrupts it mid-run.

Usage: python -m tests.interrupt_judge ANSWERED judge-arguments...
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.cli import judge as judge_cli
from sensei_eval.judging import run as judging_run
from sensei_eval.models.judge_model import JudgeModel

from .helpers import about, user_prompt

_calls = [0]
_ANSWERED = int(sys.argv[1]) if __name__ == '__main__' else 0


async def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    _calls[0] += 1
    if _calls[0] > _ANSWERED:
        await asyncio.sleep(3600)  # the run is interrupted while this call waits
    text = f'{{"reasoning": "Nothing wrong at [2] ({about(user_prompt(messages))}).", "issues": []}}'
    return ModelResponse(parts=[TextPart(content=text)])


def _model(*_: Any, **__: Any) -> JudgeModel:
    return JudgeModel(FunctionModel(_answer, model_name='scripted'), 'function:scripted')


if __name__ == '__main__':
    judging_run.resolve_model = _model  # type: ignore[assignment]
    judging_run.preflight = lambda *a, **k: asyncio.sleep(0)  # type: ignore[assignment]
    args = sys.argv[2:]
    sys.argv = ['sensei-eval', 'judge', *args]
    judge_cli.app(args, prog_name='sensei-eval')
