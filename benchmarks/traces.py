"""What the trace readers recover from published traces of seven agent frameworks, and how fast.

The seven traces (`tests/data/agent_traces/`, a copy of `shared/datasets/agent-traces`: Agno, Google ADK,
LangChain, LlamaIndex, the OpenAI Agents SDK, smolagents and TinyAgent running one task, as OpenTelemetry SDK
span dumps) are read with the dataset loader, format told from the content. Per framework it prints the spans,
the records, the tool calls and how many have their result, whether the final answer was found (and through
which tool, when a final-answer tool carried it), the token usage, and the warnings and errors. The task's
reference: two tool calls (`get_current_time`, `write_file`) with results, and an answer.

Without `--quick`, it also times the readers: every file read `--repeat` times, as spans per second.

    python benchmarks/traces.py [--quick] [--dir PATH] [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import FINAL_ANSWER_TOOLS

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / 'tests' / 'data' / 'agent_traces'
# What every run of the task does: these two tools, in this order, each answered.
EXPECTED_TOOLS = ('get_current_time', 'write_file')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='only what was recovered (no timing)')
    parser.add_argument('--dir', type=Path, default=DEFAULT_DIR, help='folder of *.json trace files')
    parser.add_argument('--repeat', type=int, default=50, help='reads per file for the timing')
    args = parser.parse_args()
    paths = sorted(args.dir.glob('*.json'))
    if not paths:
        raise SystemExit(f'no *.json trace files in {args.dir}')
    header = (
        f'{"framework":<12} {"spans":>5} {"runs":>4} {"calls":>5} {"results":>7} {"task":>4}  {"final answer":<28} '
        f'{"tokens in/out":>13} {"warn":>4} {"err":>3}'
    )
    print(header)
    print('-' * len(header))
    complete = 0
    total_spans = 0
    for path in paths:
        spans = len(json.loads(path.read_text()).get('spans', []))
        total_spans += spans
        loaded = load_dataset(path)
        calls = [c for r in loaded.records for c in r.tool_calls()]
        answered = sum(c.result is not None for c in calls)
        names = tuple(c.tool_name for c in calls if c.tool_name not in FINAL_ANSWER_TOOLS)
        task_ok = names == EXPECTED_TOOLS and answered == len(calls)
        answer = '-'
        warnings = sum(len(r.input_warnings) for r in loaded.records)
        usage = {'input_tokens': 0, 'output_tokens': 0}
        for record in loaded.records:
            final = record.final_answer()
            via = next(
                (
                    c.tool_name
                    for c in record.tool_calls()
                    if c.tool_name in FINAL_ANSWER_TOOLS and isinstance(c.args, dict) and c.args.get('answer') == final
                ),
                None,
            )
            if final:
                text = final.replace('\n', ' ')
                answer = f'{text[:18]}… ({len(final)} ch)' if not via else f'via {via} ({len(final)} ch)'
            for key, value in (record.metadata.get('usage') or {}).items():
                usage[key] = usage.get(key, 0) + value
        complete += task_ok and answer != '-' and len(loaded.records) == 1 and not loaded.errors
        tokens = f'{usage["input_tokens"]}/{usage["output_tokens"]}'
        row = f'{path.stem:<12} {spans:>5} {len(loaded.records):>4} {len(calls):>5} {answered:>7} {"yes" if task_ok else "NO":>4}'
        print(f'{row}  {answer:<28} {tokens:>13} {warnings:>4} {len(loaded.errors):>3}')
        for error in loaded.errors[:3]:
            print(f'    error: {error}')
        for record in loaded.records:
            for warning in record.input_warnings[:3]:
                print(f'    warning: {warning}')
    print(f'\n{complete} of {len(paths)} frameworks: one run, both tool calls with their results, and the final answer')
    if args.quick:
        return
    started = time.perf_counter()
    for _ in range(args.repeat):
        for path in paths:
            load_dataset(path)
    elapsed = time.perf_counter() - started
    spans_read = total_spans * args.repeat
    print(f'read {spans_read:,} spans ({len(paths) * args.repeat} files) in {elapsed:.2f} s: {spans_read / elapsed:,.0f} spans/s')


if __name__ == '__main__':
    main()
