"""Judge-cache I/O: a checks run over N records with no cache, a cold cache and a warm cache.

Deterministic checks are never cached (they cost less than an entry), so a checks-only run does not
touch the cache; to measure the cache the run adds one model judge answered instantly by a scripted
`FunctionModel` (no latency, no network): every second of difference between the rows is cache work.
It is run against the SQLite cache (`sensei_eval.judging.cache.JudgeCache`) and, for comparison, against the
oldest layout (one JSON file per entry, written with an fsync each, from the event loop), reimplemented
here. Cold timings include `close()` (the last batch committed); warm runs read the cache from disk.
For a million entries (lookup latency, memory) see `benchmarks/cache_scale.py`.

    python benchmarks/cache_io.py [--records 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from sensei_eval.models.judge_model import JudgeModel


class PerEntryFileCache(JudgeCache):
    """The former layout: one file per entry, written atomically with an fsync, on the caller's thread."""

    def _legacy_path(self, key: str) -> Path:
        return self.directory / 'judge' / key[:2] / f'{key}.json'

    def get(self, key: str) -> JudgeResult | None:
        try:
            result = JudgeResult.model_validate_json(self._legacy_path(key).read_text(encoding='utf-8'))
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return result.model_copy(update={'cached': True})

    def put(self, key: str, result: JudgeResult) -> None:
        if result.status == 'ok':
            write_text_atomic(self._legacy_path(key), result.model_dump_json())


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = next(p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart))
    seen = hashlib.sha256(str(prompt).encode()).hexdigest()[:8]  # one reasoning per transcript
    return ModelResponse(parts=[TextPart(json.dumps({'reasoning': f'Nothing wrong at [2] ({seen}).', 'issues': []}))])


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
                        {'id': 'c1', 'type': 'function', 'function': {'name': 'search_docs', 'arguments': '{"q": "depends"}'}}
                    ],
                },
                {'role': 'tool', 'tool_call_id': 'c1', 'content': f'Depends() declares a dependency ({i}).'},
                {'role': 'assistant', 'content': f'Use `Depends()` ({i}).'},
            ],
        }
    )


def _run(records: list[QueryRecord], cache: JudgeCache | None) -> float:
    judges = make_judges(['checks', 'completeness'])
    model = JudgeModel(FunctionModel(_answer, model_name='instant'), 'function:instant')
    start = time.perf_counter()
    asyncio.run(judge_records(records, JudgeRunOptions(judges, model, cache=cache, concurrency=16), run_id='bench'))
    if cache is not None:
        cache.close()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--records', type=int, default=1000)
    parser.add_argument('--repeat', type=int, default=3)
    parser.add_argument('--quick', action='store_true', help='seconds, small sizes: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.records, args.repeat = 50, 1
    records = [_record(i) for i in range(args.records)]
    _run(records[:20], None)  # imports, agent construction

    variants: dict[str, tuple[Callable[[Path], JudgeCache | None], bool]] = {
        'no cache': (lambda d: None, False),
        'sqlite, cold': (JudgeCache, False),
        'sqlite, warm': (JudgeCache, True),
        'per-entry files, cold': (PerEntryFileCache, False),
        'per-entry files, warm': (PerEntryFileCache, True),
    }
    rows: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeat):  # every variant once per round: a change in machine load hits them all
        for name, (make, warm) in variants.items():
            with tempfile.TemporaryDirectory(prefix='cache-io-') as tmp:
                if warm:
                    _run(records, make(Path(tmp)))  # fill it, then time a run served from it
                rows[name].append(_run(records, make(Path(tmp))))

    base = statistics.median(rows['no cache'])
    load = ' '.join(f'{x:.2f}' for x in os.getloadavg())
    print(f'{args.records} records x (checks + 1 instant model judge), median of {args.repeat}; load average {load}')
    print(f'{"":24} {"seconds":>8} {"vs no cache":>12}')
    for name, times in rows.items():
        median = statistics.median(times)
        print(f'{name:24} {median:8.2f} {median / base:11.2f}x')


if __name__ == '__main__':
    main()
