"""The validator end to end: a scripted pydantic-ai agent whose behaviour depends on its system prompt,
scripted LLM judges with seeded noise, R runs × J re-judgings, reports on disk, errors counted."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.agents.runner import AgentRuns, PydanticAIRunner, Query
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.run_folder import load_reports
from sensei_eval.validate import Thresholds, ValidateOptions, assert_no_regression, to_markdown, validate_prompts

from .helpers import ScriptedJudge

OLD = 'You are a documentation agent. Answer every part of the question.'
NEW = 'You are a documentation agent. TERSE: answer only the first part.'
QUERIES = [Query(f'q{i:02d}', f'How do I configure feature {i} and test it?') for i in range(12)]


def _query_text(messages: list[ModelMessage]) -> str:
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    return p.content
    return ''


class ScriptedAgent:
    """Answers in full under the old prompt, partially under a TERSE one; run-to-run wording varies
    (agent noise); the query mentioning `feature 7` crashes when `crash` is set."""

    def __init__(self, crash: bool = False) -> None:
        self.calls: Counter[str] = Counter()
        self.crash = crash

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        query = _query_text(messages)
        if self.crash and 'feature 7' in query:
            raise RuntimeError('backend down')
        self.calls[query] += 1
        style = 'Briefly: ' if self.calls[query] % 2 else 'In short: '
        if 'TERSE' in (info.instructions or ''):
            return ModelResponse(parts=[TextPart(style + 'set it in config.toml. PARTIAL')])
        return ModelResponse(parts=[TextPart(style + 'set it in config.toml, then test it with pytest.')])

    def agent(self) -> Agent[None, str]:
        return Agent(FunctionModel(self, model_name='scripted-agent'))


def noisy_judge(flip_rate: float) -> ScriptedJudge:
    """Completeness fails answers marked PARTIAL; every verdict flips with a seeded pseudo-random rate.
    The flip depends on the prompt and how often that exact prompt was seen, not on call order."""
    seen: Counter[str] = Counter()

    def answer(prompt: str, n: int) -> dict[str, Any]:
        seen[prompt] += 1
        h = int(hashlib.sha256(f'{prompt}|{seen[prompt]}'.encode()).hexdigest()[:8], 16) / 16**8
        flagged = '## Your task: judge `completeness`' in prompt and 'PARTIAL' in prompt
        if h < flip_rate:
            flagged = not flagged
        if not flagged:  # a reasoning of its own per transcript: one text for every record is inconclusive
            return {'reasoning': f'fine ({h:.6f})', 'issues': []}
        if '`completeness`' in prompt:
            issue = {'steps': [2], 'missed_aspects': ['testing'], 'reasoning': 'x'}
            return {'reasoning': f'misses testing ({h:.6f})', 'issues': [issue]}
        if '`hallucination`' in prompt:
            issue = {'steps': [2], 'hallucinated_claim': 'c', 'what_tools_actually_said': 'n', 'severity': 'minor'}
            return {'reasoning': f'invented ({h:.6f})', 'issues': [issue]}
        return {
            'reasoning': f'tool ({h:.6f})',
            'issues': [{'steps': [2], 'missed_tools': ['docs'], 'unnecessary_tools': [], 'reasoning': 'x'}],
        }

    return ScriptedJudge(answer)


def test_planted_regression_end_to_end(tmp_path: Path) -> None:
    agent = ScriptedAgent()
    judge = noisy_judge(0.05)
    c = asyncio.run(
        validate_prompts(
            OLD, NEW, AgentRuns(PydanticAIRunner(agent.agent()), runs=2), QUERIES,
            JudgeRunOptions(make_judges(['mvp']), judge.model(), repeat=2), ValidateOptions(out_dir=tmp_path / 'out'),
        )
    )  # fmt: skip
    m = c.metric('completeness')
    assert m.verdict == 'regressed' and m.n_pairs == 12
    assert m.observations_old == 12 * 2 * 2 and m.observations_new == 12 * 2 * 2
    assert c.gate.exit_code == 1 and 'completeness' in c.gate.regressed
    assert c.metric('tool_selection').verdict in ('no_change', 'not_significant')
    assert c.metric('hallucination').verdict in ('no_change', 'not_significant')
    # every transcript judged J times by the 3 judges fused into one call, on both sides
    assert len(judge.calls) == 2 * 12 * 2 * 2
    # noise measured separately: J = 2 gives judge noise, R = 2 runs give the run-to-run spread
    assert m.noise_old is not None and m.noise_old.judge_var is not None and m.noise_old.run_var is not None
    assert m.noise_floor is not None and abs(m.delta or 0) > m.noise_floor
    old_reports = load_reports(tmp_path / 'out' / 'old')
    assert len(old_reports) == 12 * 2 * 2
    assert {r.query_id for r in old_reports} == {f'q{i:02d}#r{r}' for i in range(12) for r in (1, 2)}
    assert (tmp_path / 'out' / 'new.prompt.txt').read_text() == NEW
    assert c.old.prompt_versions != c.new.prompt_versions


def test_same_prompt_twice_passes_and_agent_errors_are_counted() -> None:
    agent = ScriptedAgent(crash=True)
    c = asyncio.run(
        validate_prompts(
            # one call at a time: the two sides send the same prompts, and which side a seeded flip lands on
            # must not depend on how concurrent calls happen to interleave
            OLD, OLD, AgentRuns(PydanticAIRunner(agent.agent()), runs=2, concurrency=1), QUERIES,
            JudgeRunOptions(make_judges(['mvp']), noisy_judge(0.1).model(), concurrency=1),
        )
    )  # fmt: skip
    assert all(m.verdict in ('no_change', 'not_significant') for m in c.metrics)  # noise moved some, none significantly
    assert [(e.query_id, e.run) for e in c.old.run_errors] == [('q07', 1), ('q07', 2)]
    assert c.old.run_attempts == 24 and 'backend down' in c.old.run_errors[0].message
    assert c.metric('completeness').n_pairs == 11  # the crashed query has no record on either side
    # errors are never a silent pass: by default any failed run fails the gate
    assert c.gate.exit_code == 1 and any('agent run(s) errored' in r for r in c.gate.reasons)
    assert 'agent run(s) failed' in to_markdown(c)
    assert_no_regression(c, validate=ValidateOptions(Thresholds(max_error_rate=0.1)))  # 2 of 24 runs tolerated: passes


def test_assert_no_regression_runs_the_agent() -> None:
    agent = ScriptedAgent()
    try:
        assert_no_regression(OLD, NEW, agent=agent.agent(), queries=QUERIES, judges=['mvp'], model=noisy_judge(0.0).model())
    except AssertionError as e:
        assert '| `completeness` |' in str(e) and '🔴 **regressed**' in str(e)
    else:
        raise AssertionError('the regression was not caught')
    ok = assert_no_regression(OLD, OLD, agent=agent.agent(), queries=QUERIES, judges=['mvp'], model=noisy_judge(0.0).model())
    assert ok.gate.passed
