"""Scale of a judge run: records/s and peak memory of the judge CLI at 1k, 10k and 100k records.

Generates N records from the shapes of the packaged sample (documentation-agent and TARSy runs) and,
when present, the published tau2-airline runs, each with its own id and a record-specific sentence in
its final answer (so no two transcripts are equal), into a temporary JSONL file; then runs
`python -m sensei_eval.judge --judges checks --no-cache` on it in a child process, as a user would, and
reads the child's peak resident memory from the OS (`wait4`). A streamed run should show a flat cost
per record and a peak memory that does not grow with N.

    python benchmarks/scale.py                 # 1,000 and 10,000 records
    python benchmarks/scale.py 1000 10000 100000
"""

from __future__ import annotations

import json
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
    main([int(a) for a in sys.argv[1:]] or [1000, 10000])
