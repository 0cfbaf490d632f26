"""Scripted judge models and small records shared by the tests."""

from __future__ import annotations

import hashlib
import json
import re
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


# A fused judge's task (several failure modes in one call) and each member's section in it.
_FUSED_TASK = re.compile(r'## Your task: judge \d+ kinds of failure: ([^\n]+)\n')
_SECTION = re.compile(r'### `([^`]+)`\n(.*?)(?=\n### `|\n## How to answer)', re.DOTALL)


def member_prompts(prompt: str) -> dict[str, str] | None:
    """A fused prompt as the single prompts of its members (the transcript, then `## Your task: judge
    `name`` and the member's question and rubric), so one answer function answers both; None for a
    single judge's prompt."""
    task = _FUSED_TASK.search(prompt)
    if task is None:
        return None
    transcript = prompt[: task.start()]
    return {name: f'{transcript}## Your task: judge `{name}`\n\n{body}' for name, body in _SECTION.findall(prompt)}


@dataclass
class ScriptedJudge:
    """A FunctionModel whose answer is computed from the prompt; records every call. A fused call (several
    failure modes in one prompt: the default with two or more LLM judges) is answered member by member
    with the same function, each member's answer computed from its own single prompt (`member_prompts`);
    a member whose answer is raw text is left out (the fused judge then judges it alone)."""

    answer: Callable[[str, int], dict[str, Any] | str]
    calls: list[list[ModelMessage]] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    split_fused: bool = True  # False: `answer` answers a fused prompt itself (the fused judge's own tests)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append(messages)
        self.instructions.append(system_prompt(messages, info))
        prompt = user_prompt(messages)
        members = member_prompts(prompt) if self.split_fused else None
        if members is None:
            out = self.answer(prompt, len(self.calls))
        else:
            parts = {name: self.answer(single, len(self.calls)) for name, single in members.items()}
            answered = {name: a for name, a in parts.items() if not isinstance(a, str)}
            # a member answered with raw text is left out of the fused answer: it is judged again alone (and
            # gets that text), as when a model gets one part of a fused answer wrong
            out = answered or next(iter(parts.values()))
        text = out if isinstance(out, str) else json.dumps(out)
        return ModelResponse(parts=[TextPart(content=text)])

    def model(self, budget: int = 60_000) -> JudgeModel:
        return JudgeModel(FunctionModel(self, model_name='scripted'), 'function:scripted', budget)


def about(prompt: str) -> str:
    """A few characters that differ per transcript: one reasoning for every record is an inconclusive verdict."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:8]


def no_issues(prompt: str, n: int) -> dict[str, Any]:
    return {'reasoning': f'Nothing wrong at [2] ({about(prompt)}).', 'issues': []}
