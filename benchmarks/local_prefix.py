"""The embedded model's prefix cache: three judges on one ~4k-token record vs. one judge.

Every judge of a record sends the same system prompt and fenced transcript before its own rubric, so
llama.cpp's KV cache only evaluates the shared prefix once when the judges run back to back. This
starts the embedded SmolLM2-135M server, warms it on an unrelated prompt (so the first timed judge
pays for the whole prompt, as a cold start would), then times one judge alone and the three MVP judges
one after another on the same record.

    python benchmarks/local_prefix.py [--dataset datasets/sample.jsonl] [--query-id docs-long-001] [--repeats 1]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import render_transcript
from sensei_eval.evaluators.base import FailureModeJudge
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.models.judge_model import JudgeModel, resolve_model


async def _evict(model: JudgeModel, other: QueryRecord, judge: FailureModeJudge) -> None:
    """Judge an unrelated record so the KV cache holds nothing of the record under test."""
    await judge.judge(other, render_transcript(other, budget_tokens=model.transcript_budget), model)


async def _measure(model: JudgeModel, record: QueryRecord, other: QueryRecord) -> tuple[float, list[float]]:
    judges = [j for j in make_judges(['mvp']) if isinstance(j, FailureModeJudge)]
    transcript = render_transcript(record, budget_tokens=model.transcript_budget)
    await _evict(model, other, judges[0])
    start = time.perf_counter()
    one = await judges[0].judge(record, transcript, model)
    single = time.perf_counter() - start
    assert one.status != 'error', one.error  # the embedded model's answers are smoke: timed, not judged
    await _evict(model, other, judges[0])
    each = []
    for judge in judges:
        start = time.perf_counter()
        result = await judge.judge(record, transcript, model)
        each.append(time.perf_counter() - start)
        assert result.status != 'error', result.error
    return single, each


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--dataset', default='datasets/sample.jsonl')
    parser.add_argument('--query-id', default='docs-long-001')
    parser.add_argument('--repeats', type=int, default=1)
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    records = load_dataset(args.dataset).records
    record = next(r for r in records if r.query_id == args.query_id)
    other = next(r for r in records if r.query_id != args.query_id)
    model = resolve_model('embedded')  # the embedded model's prefix cache is what this measures
    try:
        tokens = render_transcript(record, budget_tokens=model.transcript_budget).tokens
        print(f'record {record.query_id}: transcript ~{tokens:,} tokens (estimate); model {model.name}')
        for i in range(args.repeats):
            single, each = asyncio.run(_measure(model, record, other))
            total = sum(each)
            calls = ', '.join(f'{t:.2f}' for t in each)
            print(
                f'run {i + 1}: one judge {single:.2f} s | three judges {total:.2f} s ({calls}) | three/one = {total / single:.2f}'
            )
    finally:
        model.close()


if __name__ == '__main__':
    main()
