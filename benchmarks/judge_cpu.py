"""CPU per judge call: a sensei judge beside pydantic-evals' `LLMJudge` and a bare pydantic-ai `Agent.run`.

The same work for all three: R records × J judges, every call answered by a `FunctionModel` that sleeps
`latency` seconds (so the calls overlap as they do against a real model) and returns a valid answer, at
most C calls in flight (one semaphore for all three). What is measured is the process's CPU time
(`time.process_time`) divided by the number of calls: everything the library does per call — prompt,
agent run, output parsing, result — and nothing of the model's. The bare agent is the floor: one
pydantic-ai run of the sensei judge's prompt with a plain-text answer, nothing parsed. Each side gets the
same advantages: one model object and one judge object reused for every call (as a run does), the sensei
judge's transcript rendered once per record (as the runner does; `LLMJudge` gets the same text as its
output), logfire absent on all three. The prompts are the same size: `LLMJudge`'s rubric is the sensei
judge's own question and rubric (only the JSON schema is not repeated there: `LLMJudge` sends it as its
output tool's definition). Each side is answered the way a real model answers it: `LLMJudge` asks for
structured output (an output tool), so its model calls that tool with the grading arguments, which
pydantic-ai validates; the sensei judge asks for plain text, which it parses itself.

    python benchmarks/judge_cpu.py [--records 200] [--judges 15] [--concurrency 16] [--latency 0.1]
    python benchmarks/judge_cpu.py --profile sensei   # where sensei's CPU goes (cProfile, top 25 twice)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_evals.evaluators import EvaluatorContext, LLMJudge
from pydantic_evals.otel.span_tree import SpanTree

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import render_transcript
from sensei_eval.evaluators.base import JUDGE_SYSTEM_PROMPT
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.models.judge_model import JudgeModel

Call = Callable[[int, int], Awaitable[Any]]


def _record(i: int) -> QueryRecord:
    return QueryRecord.from_openai(
        [
            {'role': 'user', 'content': f'Question {i}: how do FastAPI dependencies work?'},
            {
                'role': 'assistant',
                'tool_calls': [
                    {'id': 'c1', 'type': 'function', 'function': {'name': 'get_docs', 'arguments': '{"library": "fastapi"}'}}
                ],
            },
            {'role': 'tool', 'tool_call_id': 'c1', 'content': f'Depends() declares a dependency ({i}). ' * 40},
            {'role': 'assistant', 'content': f'Use `Depends()` ({i}).'},
        ],
        query_id=f'bench-{i}',
    )


def _model(latency: float, text: Callable[[str], str]) -> FunctionModel:
    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(latency)
        prompt = str(messages[-1].parts[-1].content) if messages[-1].parts else ''  # type: ignore[union-attr]
        if info.output_tools and not info.allow_text_output:  # structured output: a real model calls the tool
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, text(prompt))])
        return ModelResponse(parts=[TextPart(text(prompt))])

    return FunctionModel(answer, model_name='bench')


def _verdict(prompt: str) -> str:
    return json.dumps({'reasoning': f'Nothing wrong at [2] ({hash(prompt) % 9973}).', 'issues': []})


def _grading(prompt: str) -> str:
    return json.dumps({'reason': 'The output meets the rubric.', 'pass': True, 'score': 1.0})


def _sensei_judges(n_judges: int) -> list[Any]:
    return [j for j in make_judges(['all']) if j.needs_model][:n_judges]


def sensei_calls(records: list[QueryRecord], n_judges: int, latency: float) -> Call:
    model = JudgeModel(_model(latency, _verdict), 'function:bench')
    judges = _sensei_judges(n_judges)
    transcripts = [render_transcript(r, budget_tokens=model.transcript_budget) for r in records]

    async def call(i: int, j: int) -> Any:
        return await judges[j].judge(records[i], transcripts[i], model)

    return call


def llmjudge_calls(records: list[QueryRecord], n_judges: int, latency: float) -> Call:
    model = _model(latency, _grading)
    # the same criteria text as the sensei judges (question and rubric), so both send prompts of one size
    judges = [LLMJudge(rubric=f'{j.question}\n\n{j.rubric.strip()}', model=model) for j in _sensei_judges(n_judges)]
    contexts = [
        EvaluatorContext[Any, Any, Any](
            name=r.query_id,
            inputs=r.query,
            metadata=None,
            expected_output=None,
            output=render_transcript(r).text,
            duration=0.0,
            _span_tree=SpanTree(),
            attributes={},
            metrics={},
        )
        for r in records
    ]

    async def call(i: int, j: int) -> Any:
        return await judges[j].evaluate(contexts[i])

    return call


def bare_calls(records: list[QueryRecord], n_judges: int, latency: float) -> Call:
    # the sensei judge's own prompts (system prompt, transcript, task), so the floor sends the same text
    agent: Agent[None, str] = Agent(_model(latency, _verdict), instructions=JUDGE_SYSTEM_PROMPT)
    judges = _sensei_judges(n_judges)
    prompts = [[j.build_prompt(render_transcript(r)) for j in judges] for r in records]

    async def call(i: int, j: int) -> Any:
        return await agent.run(prompts[i][j])

    return call


SIDES: dict[str, Callable[[list[QueryRecord], int, float], Call]] = {
    'sensei': sensei_calls,
    'LLMJudge': llmjudge_calls,
    'bare agent': bare_calls,
}


async def _run(call: Call, rows: range, n_judges: int, concurrency: int) -> tuple[float, float]:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, j: int) -> None:
        async with gate:
            await call(i, j)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i, j) for i in rows for j in range(n_judges)))
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--records', type=int, default=200)
    parser.add_argument('--judges', type=int, default=15)
    parser.add_argument('--concurrency', type=int, default=16)
    parser.add_argument('--latency', type=float, default=0.1)
    parser.add_argument(
        '--rounds', type=int, default=5, help='the records in this many slices, the sides taking turns on each (load is shared)'
    )
    parser.add_argument('--profile', choices=list(SIDES), help='profile one side (CPU time) instead of comparing')
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.records, args.judges, args.latency = 10, 3, 0.01
    records = [_record(i) for i in range(args.records)]
    calls = args.records * args.judges
    if args.profile:
        call = SIDES[args.profile](records, args.judges, args.latency)
        asyncio.run(_run(call, range(1), args.judges, 2))  # warm
        profiler = cProfile.Profile(time.process_time)  # CPU time: the machine's load does not count
        profiler.enable()
        asyncio.run(_run(call, range(args.records), args.judges, args.concurrency))
        profiler.disable()
        pstats.Stats(profiler).sort_stats('cumulative').print_stats(25)
        pstats.Stats(profiler).sort_stats('tottime').print_stats(25)
        return
    print(f'{args.records} records x {args.judges} judges = {calls} calls, model {args.latency} s, {args.concurrency} in flight')
    print(f'{"side":<12} {"CPU ms/call":>12} {"wall s":>8}')
    sides = {name: make(records, args.judges, args.latency) for name, make in SIDES.items()}
    for call in sides.values():  # warm: first-use caches of pydantic-ai and each judge (its agent, its prompt)
        asyncio.run(_run(call, range(1), args.judges, 2))
    # On a shared machine the load changes from second to second: the sides take turns on slices of the
    # records (each round in a rotated order), so each is measured under the same mix of load.
    rounds = max(1, min(args.rounds, args.records))
    totals = dict.fromkeys(sides, (0.0, 0.0))
    names = list(sides)
    for r in range(rounds):
        rows = range(r * args.records // rounds, (r + 1) * args.records // rounds)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            cpu, wall = asyncio.run(_run(sides[name], rows, args.judges, args.concurrency))
            totals[name] = (totals[name][0] + cpu, totals[name][1] + wall)
    for name, (cpu, wall) in totals.items():
        print(f'{name:<12} {cpu / calls * 1000:>12.2f} {wall:>8.1f}', flush=True)


if __name__ == '__main__':
    main()
