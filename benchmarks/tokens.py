"""Input tokens per record: how much judging all failure modes sends, layout by layout.

Layouts, each carrying the same instructions (our question, rubric and schema per failure mode) and the
same rendered transcript, so only the layout differs:

* naive, per judge — the rubric first (in the system prompt), then the transcript: nothing after the
  shared system text is common to two judges;
* LLMJudge, per judge — pydantic-evals' own layout (`llm_as_a_judge._build_prompt`): its
  `judge_input_output` system prompt and `GradingOutput` tool schema, then `<Input>` (the query),
  `<Output>` (the transcript) and last `<Rubric>`: input and output come before the rubric, so a
  prefix cache can reuse them across judges just as it can ours;
* ours, per judge — the shared system prompt, the fenced transcript, then the judge's task;
* ours, fused by category — one call per failure-mode category (`--fuse` with each category);
* ours, fused all — one call for every failure mode (`--fuse all`);
* limit — the system prompt and the transcript once, plus each judge's question, rubric and issue
  schema once (no per-judge "how to answer" text): the least any layout can send;
* LLMJudge, rubric only — LLMJudge's layout with the question and rubric alone as its rubric, no issue
  schema (it returns pass/score, not issues): what our per-mode issue schemas cost on top.

"prefix cache": a request's tokens that repeat a leading part of an earlier request of the same record
count as reused (what provider prompt caching and llama.cpp's KV cache skip), shown as the uncached
remainder. Prompts are compared part by part (system prompt, transcript, task): a part counts as reused
only when every part before it matched too. Real caches work in blocks (OpenAI: 128-token steps from
1,024 tokens on), so they reuse a little less than this.

Tokens are counted with the embedded model's own tokenizer (SmolLM2, vocab-only: no model is run), the
chat template included; transcripts are not cut unless --budget is given.

    python benchmarks/tokens.py [--dataset PATH ...] [--judges all] [--budget N]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic_evals.evaluators import llm_as_a_judge

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import Transcript, render_transcript
from sensei_eval.evaluators.base import JUDGE_SYSTEM_PROMPT, FailureModeJudge, _prompt_schema
from sensei_eval.evaluators.fused import FusedJudge
from sensei_eval.evaluators.registry import EXTRA_MODES, make_judges
from sensei_eval.models.counting import TokenCounter, llama_counter
from sensei_eval.models.embedded import gguf_path

ROOT = Path(__file__).resolve().parents[1]
# the shared tau2-airline runs sit beside the project checkout (../shared), as for benchmarks/verdicts.py
TAU2 = ROOT.parent / 'shared' / 'datasets' / 'tau2-airline' / 'records.jsonl'
DATASETS = (ROOT / 'sensei_eval' / 'data' / 'sample.jsonl', TAU2)

LIMIT = 'limit: transcript once + rubrics & schemas'

# A request: its system prompt and its user message, each as a list of parts (for prefix matching).
Request = tuple[tuple[str, ...], tuple[str, ...]]


@dataclass
class Tally:
    requests: int = 0
    tokens: int = 0
    uncached: int = 0
    per_record: list[int] = field(default_factory=list)


class Counter:
    """Counts each distinct part once (a transcript is shared by many requests)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._memo: dict[str, int] = {}

    def part(self, text: str) -> int:
        if text not in self._memo:
            self._memo[text] = self.counter.count(text)
        return self._memo[text]

    def request(self, request: Request) -> int:
        system, user = request
        overhead = 2 * self.counter.message_overhead + self.counter.reply_overhead
        return sum(map(self.part, system)) + sum(map(self.part, user)) + overhead

    def reused(self, request: Request, earlier: Sequence[Request]) -> int:
        """Tokens of the longest run of leading parts this request shares with an earlier one."""
        parts = [*request[0], '\x00', *request[1]]  # the system/user boundary is a part of its own
        best = 0
        for other in earlier:
            other_parts = [*other[0], '\x00', *other[1]]
            shared = 0
            for a, b in zip(parts, other_parts, strict=False):
                if a != b:
                    break
                shared += 0 if a == '\x00' else self.part(a)
            best = max(best, shared)
        return best


def _schema(judge: FailureModeJudge) -> dict[str, object]:
    """The judge's verdict schema as its prompt states it."""
    return _prompt_schema(type(judge).issue_model)


def _llmjudge_system() -> str:
    """pydantic-evals' judge_input_output system prompt, with its GradingOutput tool schema ahead of it."""
    agent = llm_as_a_judge._judge_input_output_agent
    system = '\n'.join(p for p in agent._system_prompts if isinstance(p, str))
    tool = json.dumps(llm_as_a_judge.GradingOutput.model_json_schema(), separators=(',', ':'))
    return f'{tool}\n{system}'


def layouts(judges: Sequence[FailureModeJudge]) -> dict[str, Callable[[QueryRecord, Transcript], list[Request]]]:
    le_system = _llmjudge_system()
    fused_all = FusedJudge(members=list(judges))
    by_category: dict[str, list[FailureModeJudge]] = {}
    for judge in judges:
        by_category.setdefault(str(judge.category), []).append(judge)
    per_category = [FusedJudge(members=g) if len(g) > 1 else g[0] for g in by_category.values()]

    def ours(judge: FailureModeJudge | FusedJudge, t: Transcript) -> Request:
        return (JUDGE_SYSTEM_PROMPT,), (t.fenced(), f'\n\n{judge.task_prompt()}')

    def llmjudge(record: QueryRecord, t: Transcript, rubric: str) -> Request:
        # _build_prompt(inputs=query, output=transcript, rubric=...) as parts: Input+Output, then the Rubric
        head, _ = llm_as_a_judge._build_prompt(output=t.text, rubric='\x01', inputs=record.query)
        assert isinstance(head, str)
        before, after = head.split('\x01')
        return (le_system,), (before, rubric + after)

    def rubric_only(judge: FailureModeJudge) -> str:
        return f'{judge.question}\n\n{judge.rubric.strip()}'

    def essentials(judge: FailureModeJudge) -> str:
        schema = json.dumps(_schema(judge), separators=(',', ':'))
        return f'\n\n{judge.name}: {rubric_only(judge)}\n{schema}'

    return {
        'naive, per judge (rubric first)': lambda r, t: [
            ((JUDGE_SYSTEM_PROMPT, f'\n\n{j.task_prompt()}'), (t.fenced(),)) for j in judges
        ],
        "pydantic-evals LLMJudge's layout, per judge": lambda r, t: [llmjudge(r, t, j.task_prompt()) for j in judges],
        'LLMJudge, rubric only (no issue schema)': lambda r, t: [llmjudge(r, t, rubric_only(j)) for j in judges],
        'ours, per judge': lambda r, t: [ours(j, t) for j in judges],
        'ours, fused by category': lambda r, t: [ours(j, t) for j in per_category],
        'ours, fused all': lambda r, t: [ours(fused_all, t)],
        LIMIT: lambda r, t: [((JUDGE_SYSTEM_PROMPT,), (t.fenced(), *(essentials(j) for j in judges)))],
    }


def measure(
    records: Sequence[QueryRecord], judges: Sequence[FailureModeJudge], count: Counter, budget: int | None
) -> dict[str, Tally]:
    out = {name: Tally() for name in layouts(judges)}
    for record in records:
        transcript = render_transcript(record, budget_tokens=budget, count_tokens=count.counter)
        for name, build in layouts(judges).items():
            tally = out[name]
            sent: list[Request] = []
            record_tokens = 0
            for request in build(record, transcript):
                tokens = count.request(request)
                tally.requests += 1
                tally.tokens += tokens
                tally.uncached += tokens - count.reused(request, sent)
                record_tokens += tokens
                sent.append(request)
            tally.per_record.append(record_tokens)
    return out


def print_table(title: str, tallies: dict[str, Tally]) -> None:
    limit = tallies[LIMIT]
    print(f'\n{title}')
    header = f'{"layout":<46} {"calls":>6} {"input tokens":>13} {"x limit":>8} {"uncached (prefix cache)":>24} {"x limit":>8}'
    print(header)
    print('-' * len(header))
    for name, t in tallies.items():
        print(
            f'{name:<46} {t.requests:>6,} {t.tokens:>13,} {t.tokens / limit.tokens:>8.2f} '
            f'{t.uncached:>24,} {t.uncached / limit.uncached:>8.2f}'
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--dataset', action='append', type=Path, help='JSONL dataset (repeatable); default: sample and tau2')
    parser.add_argument('--judges', default='all', help='judges or groups (default: the standard failure modes)')
    parser.add_argument('--budget', type=int, default=None, help='cut transcripts to this many tokens (default: no cut)')
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.dataset = args.dataset or [Path('datasets/sample.jsonl')]
    judges = [j for j in make_judges([args.judges]) if isinstance(j, FailureModeJudge) and j.name not in EXTRA_MODES]
    count = Counter(llama_counter(str(gguf_path())))
    print(f'tokens: {count.counter.name}, chat template included; {len(judges)} failure-mode judges')
    for path in args.dataset or DATASETS:
        if not path.is_file():
            print(f'\n{path}: not found, skipped')
            continue
        records = load_dataset(path).records
        tallies = measure(records, judges, count, args.budget)
        print_table(f'{path.name}: {len(records)} records, totals', tallies)
        longest = max(records, key=lambda r: len(render_transcript(r).steps))
        steps = len(render_transcript(longest).steps)
        print_table(
            f'{path.name}: the longest run, {longest.query_id} ({steps} steps)', measure([longest], judges, count, args.budget)
        )
        fused, limit = tallies['ours, fused all'], tallies[LIMIT]
        worst = max(f / lim for f, lim in zip(fused.per_record, limit.per_record, strict=True))
        print(
            f'fused all vs limit: {fused.tokens / limit.tokens:.3f}x in total, {worst:.3f}x on the worst record (target <= 1.3x)'
        )


if __name__ == '__main__':
    main()
