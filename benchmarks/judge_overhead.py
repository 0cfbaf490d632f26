"""Runner overhead: N records × K judges against a fake model with a fixed latency, at concurrency C.

The fake model (a pydantic-ai `FunctionModel`) sleeps `latency` seconds and returns a valid verdict, so
all the time above `ceil(N·K / C) × latency` is ours: transcript rendering, prompt building, pydantic-ai
agent runs, output validation, report assembly. Each judge is its own call (`fuse=("none",)`), so N·K calls are
made. Prints wall / ideal (target ≤ 1.1).

    python benchmarks/judge_overhead.py [--records 50] [--judges 3] [--concurrency 1 4 16] [--latency 0.1 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import time

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from sensei_eval.models.judge_model import JudgeModel


def _record(i: int) -> QueryRecord:
    return QueryRecord.model_validate(
        {
            'query_id': f'bench-{i}',
            'messages': [
                {'role': 'user', 'content': f'Question {i}: how do FastAPI dependencies work?'},
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
                {'role': 'tool', 'tool_call_id': 'c1', 'content': 'Depends() declares a dependency. ' * 40},
                {'role': 'assistant', 'content': 'Use `Depends()`.'},
            ],
        }
    )


def _fake(latency: float) -> JudgeModel:
    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(latency)
        # one reasoning per transcript: the same text on every record would be marked inconclusive
        seen = hashlib.sha256(str(messages[-1]).encode()).hexdigest()[:8]
        return ModelResponse(parts=[TextPart(json.dumps({'reasoning': f'Nothing wrong at [3] ({seen}).', 'issues': []}))])

    return JudgeModel(FunctionModel(answer, model_name='fake'), 'fake', 60_000)


def run(records: int, judges: int, concurrency: int, latency: float) -> tuple[float, float]:
    names = ['tool_selection', 'hallucination', 'completeness', 'tool_parameters', 'synthesis_quality', 'agent_format'][:judges]
    data = [_record(i) for i in range(records)]
    start = time.perf_counter()
    reports = asyncio.run(
        judge_records(
            data, JudgeRunOptions(make_judges(names), _fake(latency), concurrency=concurrency, fuse=('none',)), run_id='bench'
        )
    )
    wall = time.perf_counter() - start
    assert all(r.status == 'ok' for rep in reports for r in rep.judges.values())
    return wall, math.ceil(records * judges / concurrency) * latency


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--records', type=int, default=50)
    parser.add_argument('--judges', type=int, default=3, choices=range(1, 7))
    parser.add_argument('--concurrency', type=int, nargs='+', default=[1, 4, 16])
    parser.add_argument('--latency', type=float, nargs='+', default=[0.1, 0.5])
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.records, args.judges, args.concurrency, args.latency = 8, 2, [4], [0.02]
    print(f'{"N":>4} {"K":>2} {"C":>3} {"latency":>8} {"wall s":>8} {"ideal s":>8} {"wall/ideal":>10}')
    for latency in args.latency:
        for c in args.concurrency:
            wall, ideal = run(args.records, args.judges, c, latency)
            print(f'{args.records:>4} {args.judges:>2} {c:>3} {latency:>8.3f} {wall:>8.2f} {ideal:>8.2f} {wall / ideal:>10.3f}')


if __name__ == '__main__':
    main()
