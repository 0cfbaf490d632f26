"""Input tokens per record: our judges as sent vs. the same judges laid out like pydantic-evals' LLMJudge.

Ours: one shared system prompt, then the fenced numbered transcript, then the judge's rubric and schema —
so everything up to the rubric is byte-identical across the judges of a record and a prefix cache
(provider prompt caching, llama.cpp's KV cache) can reuse it. LLMJudge-style: pydantic-evals' own
`_build_prompt(inputs=query, output=<the whole message history>, rubric=<the same question and rubric>)`
under its `judge_input_output` system prompt, once per judge — the history is serialised as JSON,
since LLMJudge has no transcript renderer, and nothing is shared ahead of the varying part.

Prints per record: our input tokens for the MVP judges, the LLMJudge-style tokens, and the share of our
input that is a prefix shared across the judges of that record.

    python benchmarks/tokens.py [--dataset datasets/sample.jsonl] [--budget 60000]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from pydantic_evals.evaluators import llm_as_a_judge

from sensei_eval.evaluators.base import JUDGE_SYSTEM_PROMPT, FailureModeJudge
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.records import load_dataset
from sensei_eval.transcript import estimate_tokens, render_transcript


def _counter() -> tuple[str, Callable[[str], int]]:
    """tiktoken's o200k_base when its data is on disk; else our character estimate (offline default)."""
    os.environ.setdefault('TIKTOKEN_CACHE_DIR', str(Path.home() / '.cache' / 'tiktoken'))
    try:
        import tiktoken

        enc = tiktoken.get_encoding('o200k_base')
        return 'tiktoken o200k_base', lambda s: len(enc.encode(s, disallowed_special=()))
    except Exception:
        return 'sensei_eval.transcript.estimate_tokens (chars / 3.2)', estimate_tokens


def _llmjudge_system_prompt() -> str:
    agent = llm_as_a_judge._judge_input_output_agent
    return '\n'.join(p for p in agent._system_prompts if isinstance(p, str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--dataset', default='datasets/sample.jsonl')
    parser.add_argument('--budget', type=int, default=60_000, help='transcript budget (a hosted model: no cut)')
    args = parser.parse_args()
    counter_name, count = _counter()
    judges = [j for j in make_judges(['mvp']) if isinstance(j, FailureModeJudge)]
    le_system = _llmjudge_system_prompt()
    records = load_dataset(args.dataset).records
    print(f'token counter: {counter_name}; judges: {", ".join(j.name for j in judges)}')
    print(f'{"query_id":<15} {"ours":>8} {"LLMJudge":>9} {"ours/LLMJ":>9} {"shared prefix":>14} {"ours, cached":>13}')
    tot_ours = tot_le = tot_shared = 0
    for record in records:
        transcript = render_transcript(record, budget_tokens=args.budget)
        ours = shared = le = 0
        prefix = JUDGE_SYSTEM_PROMPT + transcript.fenced()
        for judge in judges:
            ours += count(JUDGE_SYSTEM_PROMPT) + count(judge.build_prompt(transcript))
            shared += count(prefix)
            rubric = f'{judge.question}\n{judge.rubric.strip()}'
            prompt, _ = llm_as_a_judge._build_prompt(output=record.messages, rubric=rubric, inputs=record.query)
            assert isinstance(prompt, str)
            le += count(le_system) + count(prompt)
        tot_ours, tot_le, tot_shared = tot_ours + ours, tot_le + le, tot_shared + shared
        cached = ours - shared * (len(judges) - 1) // len(judges)
        print(f'{record.query_id:<15} {ours:>8,} {le:>9,} {ours / le:>9.2f} {shared / ours:>14.1%} {cached:>13,}')
    tot_cached = tot_ours - tot_shared * (len(judges) - 1) // len(judges)
    print(f'{"total":<15} {tot_ours:>8,} {tot_le:>9,} {tot_ours / tot_le:>9.2f} {tot_shared / tot_ours:>14.1%} {tot_cached:>13,}')
    print('"ours, cached": input not already in a prefix cache when the judges of a record run back to back.')
    print(
        f'per record, mean: ours {tot_ours / len(records):,.0f} input tokens for {len(judges)} judges, of which '
        f'{tot_shared / tot_ours:.0%} is a prefix shared by all {len(judges)}; LLMJudge-style {tot_le / len(records):,.0f}.'
    )


if __name__ == '__main__':
    main()
