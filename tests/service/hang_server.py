"""A service process whose judge never answers: the crash test starts it, then kills it mid-scoring.

Usage: python -m tests.service.hang_server DB_URL PORT
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.service import ServiceSettings, create_app


async def _hang(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    await asyncio.sleep(3600)
    raise AssertionError('unreachable')


def main() -> None:
    db_url, port = sys.argv[1], int(sys.argv[2])
    model = JudgeModel(FunctionModel(_hang, model_name='hang'), 'function:hang')
    app = create_app(ServiceSettings(db_url=db_url, heartbeat_s=0.5, poll_s=0.1), model)
    uvicorn.run(app, host='127.0.0.1', port=port, log_level='warning')


if __name__ == '__main__':
    main()
