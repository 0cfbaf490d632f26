"""Scripted judge models and small records shared by the tests."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.core.records import QueryRecord
from sensei_eval.models.judge_model import JudgeModel


def openai_record(
    query_id: str = 'r1', answer: str = 'Use `Depends()`.', tool_result: str = 'Depends() declares a dependency.'
) -> QueryRecord:
    return QueryRecord.model_validate(
        {
            'query_id': query_id,
            'query': 'How do FastAPI dependencies work?',
            'messages': [
                {'role': 'system', 'content': 'You are sensei.'},
                {'role': 'user', 'content': 'How do FastAPI dependencies work?'},
                {
                    'role': 'assistant',
                    'content': None,
                    'tool_calls': [
                        {
                            'id': 'c1',
                            'type': 'function',
                            'function': {'name': 'context7_get_docs', 'arguments': '{"library_id": "/fastapi/fastapi"}'},
                        }
                    ],
                },
                {'role': 'tool', 'tool_call_id': 'c1', 'content': tool_result},
                {'role': 'assistant', 'content': answer},
            ],
            'rating': {'correctness': 4, 'relevance': 5, 'usefulness': 4},
        }
    )


def user_prompt(messages: list[ModelMessage]) -> str:
    """The first user prompt the judge sent (the transcript + task)."""
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    return p.content
    raise AssertionError('no user prompt')


def system_prompt(messages: list[ModelMessage], info: AgentInfo) -> str:
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, SystemPromptPart):
                    return p.content
    return info.instructions or ''


@dataclass
class ScriptedJudge:
    """A FunctionModel whose answer is computed from the prompt; records every call."""

    answer: Callable[[str, int], dict[str, Any] | str]
    calls: list[list[ModelMessage]] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append(messages)
        self.instructions.append(system_prompt(messages, info))
        out = self.answer(user_prompt(messages), len(self.calls))
        text = out if isinstance(out, str) else json.dumps(out)
        return ModelResponse(parts=[TextPart(content=text)])

    def model(self, budget: int = 60_000) -> JudgeModel:
        return JudgeModel(FunctionModel(self, model_name='scripted'), 'function:scripted', budget)


def about(prompt: str) -> str:
    """A few characters that differ per transcript: one reasoning for every record is an inconclusive verdict."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:8]


def no_issues(prompt: str, n: int) -> dict[str, Any]:
    return {'reasoning': f'Nothing wrong at [2] ({about(prompt)}).', 'issues': []}
