"""Scale of a judge run: records/s and peak memory of the judge CLI at 1k, 10k and 100k records.

Generates N records from the shapes of the packaged sample (documentation-agent and TARSy runs) and,
when present, the published tau2-airline runs, each with its own id and a record-specific sentence in
its final answer (so no two transcripts are equal), into a temporary JSONL file; then runs
`python -m sensei_eval.judge --judges checks --no-cache` on it in a child process, as a user would, and
reads the child's peak resident memory from the OS (`wait4`). A streamed run should show a flat cost
per record and a peak memory that does not grow with N.

    python benchmarks/scale.py                 # 1,000 and 10,000 records
    python benchmarks/scale.py 1000 10000 100000

`--cut` measures instead the cost of cutting one long transcript to its budget (`render_transcript`
with a budget the run is far over): tool-call pairs from 500 to 4,000, CPU per step, which should be
flat (the cut is linear in steps); `--cut --reference` also times the former quadratic cut (kept in
tests/test_transcript_cut.py), for comparison.

    python benchmarks/scale.py --cut [--reference]
    python benchmarks/scale.py --quick         # 200 records and a small cut, in seconds (CI)
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from itertools import cycle
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [ROOT / 'datasets' / 'sample.jsonl']


def _shapes() -> list[dict[str, Any]]:
    shapes = []
    for path in SHAPES:
        if path.is_file():
            shapes += [json.loads(line) for line in path.read_text(encoding='utf-8').splitlines() if line.strip()]
    return shapes


def _vary(record: dict[str, Any], i: int) -> dict[str, Any]:
    """A copy of `record` with a new id and one record-specific sentence at the end of its last message."""
    out: dict[str, Any] = json.loads(json.dumps(record))
    out['query_id'] = f'{record["query_id"]}-{i:06d}'
    last = out['messages'][-1]
    note = f' (run {i})'
    if isinstance(last.get('content'), str):
        last['content'] += note
    elif isinstance(last.get('parts'), list) and last['parts'] and isinstance(last['parts'][-1].get('content'), str):
        last['parts'][-1]['content'] += note
    return out


def generate(n: int, path: Path) -> int:
    """Write `n` records to `path`; returns the file size in bytes."""
    shapes = _shapes()
    with path.open('w', encoding='utf-8') as f:
        for i, shape in zip(range(n), cycle(shapes), strict=False):
            f.write(json.dumps(_vary(shape, i)) + '\n')
    return path.stat().st_size


def run(n: int, workdir: Path) -> dict[str, float]:
    data = workdir / f'records-{n}.jsonl'
    size = generate(n, data)
    cmd = [sys.executable, '-m', 'sensei_eval.judge', '--dataset', str(data), '--judges', 'checks', '--no-cache']
    cmd += ['--out', str(workdir / 'out'), '--run-id', f'n{n}']
    started = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    summary = json.loads((workdir / 'out' / f'n{n}' / 'summary.json').read_text())
    return {
        'records': n,
        'judged': summary['records_judged'],
        'exit': os.waitstatus_to_exitcode(status),
        'file_mib': size / 2**20,
        'wall_s': wall,
        'records_per_s': n / wall,
        'us_per_record': wall / n * 1e6,
        'peak_rss_mib': usage.ru_maxrss / 1024,  # Linux reports KiB
    }


def long_record(pairs: int) -> Any:
    """One run of `pairs` tool calls with long results (what the budget cuts first) and long turns."""
    from sensei_eval.core.records import QueryRecord

    messages: list[dict[str, Any]] = [
        {'role': 'system', 'content': 'You are a support agent. Follow the policy. ' * 100},
        {'role': 'user', 'content': 'Please change my flight.'},
    ]
    for n in range(pairs):
        call = {'id': f'c{n}', 'type': 'function', 'function': {'name': 'get_reservation', 'arguments': f'{{"n": {n}}}'}}
        messages.append({'role': 'assistant', 'content': f'Checking reservation {n}. ' * (n % 5 * 10), 'tool_calls': [call]})
        messages.append({'role': 'tool', 'tool_call_id': f'c{n}', 'content': json.dumps({'id': n, 'legs': ['SFO-JFK'] * 40})})
    messages.append({'role': 'assistant', 'content': 'Your flight is changed. ' * 50})
    return QueryRecord.model_validate({'query_id': f'long-{pairs}', 'query': 'Change my flight', 'messages': messages})


def cut_table(pairs_list: list[int], budget: int, reference: bool) -> None:
    """CPU per step of cutting a transcript far over `budget`, as the run grows."""
    from sensei_eval.core import transcript

    cuts: list[tuple[str, Any]] = [('linear', transcript._cut_to)]
    if reference:
        sys.path.insert(0, str(ROOT))
        from tests.test_transcript_cut import reference_cut_to

        cuts.append(('former', reference_cut_to))
    print(f'cut to {budget:,} tokens: CPU per record and per step (flat = linear in steps)')
    print(f'{"pairs":>6} {"steps":>6} {"tokens":>9} {"after":>7} {"cut":>7} {"ms/record":>10} {"µs/step":>8}')
    for pairs in pairs_list:
        record = long_record(pairs)
        for name, cut_to in cuts:
            transcript._cut_to = cut_to  # type: ignore[assignment]
            best = math.inf
            for _ in range(3):
                started = time.process_time()
                t = transcript.render_transcript(record, budget_tokens=budget)
                best = min(best, time.process_time() - started)
            assert t.truncation is not None
            steps = len(t.steps)
            tokens, final = t.truncation.original_tokens, t.tokens
            line = f'{pairs:>6,} {steps:>6,} {tokens:>9,} {final:>7,} {name:>7} {best * 1e3:>10.1f} {best / steps * 1e6:>8.1f}'
            print(line, flush=True)
        transcript._cut_to = cuts[0][1]  # type: ignore[assignment]


def main(sizes: list[int]) -> None:
    print(f'{"records":>8} {"file MiB":>9} {"wall s":>8} {"rec/s":>8} {"µs/rec":>8} {"peak RSS MiB":>13} {"judged":>8} exit')
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            r = run(n, Path(tmp))
            print(
                f'{r["records"]:>8,} {r["file_mib"]:>9.1f} {r["wall_s"]:>8.1f} {r["records_per_s"]:>8.0f} '
                f'{r["us_per_record"]:>8.0f} {r["peak_rss_mib"]:>13.0f} {r["judged"]:>8,} {r["exit"]}',
                flush=True,
            )


if __name__ == '__main__':
    if '--quick' in sys.argv:  # seconds: CI runs it so the script cannot rot
        main([200])
        cut_table([100, 200], 8_000, False)
    elif '--cut' in sys.argv:
        cut_table([500, 1000, 2000, 4000], 32_000, '--reference' in sys.argv)
    else:
        main([int(a) for a in sys.argv[1:]] or [1000, 10000])
