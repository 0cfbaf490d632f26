"""The README's main job, timed as a user runs it: `python -m sensei_eval.judge --no-cache` (the embedded model
on the shipped sample), `--repeats` times in a row, each in a fresh process.

Prints per run the wall time, the exit code, model requests and tokens from `summary.json`, and for the LLM
judges how many verdicts were ok, passed, inconclusive or errors: a faster run that lets the embedded
model's non-judging answers through as verdicts is not an improvement. Extra arguments go to the judge
command (e.g. `-- --fuse mvp`).

    python benchmarks/main_job.py [--repeats 2] [-- JUDGE ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LLM_JUDGES = ('tool_selection', 'hallucination', 'completeness')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--repeats', type=int, default=2)
    parser.add_argument('judge_args', nargs='*', help='passed on to python -m sensei_eval.judge (after --)')
    args = parser.parse_args()
    print(f'python -m sensei_eval.judge --no-cache {" ".join(args.judge_args)} · {os.cpu_count()} cores · '
          f'load average {" ".join(f"{x:.2f}" for x in os.getloadavg())}')  # fmt: skip
    print(f'{"run":>4}{"wall s":>9}{"exit":>6}{"requests":>10}{"tokens in":>11}{"out":>7}'
          f'{"LLM ok":>8}{"passed":>8}{"inconcl.":>10}{"errors":>8}')  # fmt: skip
    with tempfile.TemporaryDirectory() as out:
        for i in range(1, args.repeats + 1):
            command = [sys.executable, '-m', 'sensei_eval.judge', '--no-cache', '--out', out, '--run-id', f'm{i}']
            command += args.judge_args
            start = time.perf_counter()
            proc = subprocess.run(command, capture_output=True, text=True)
            wall = time.perf_counter() - start
            summary_path = Path(out) / f'm{i}' / 'summary.json'
            if not summary_path.is_file():
                print(f'run {i} wrote no summary (exit {proc.returncode}):\n{proc.stderr[-2000:]}')
                continue
            s = json.loads(summary_path.read_text())
            judges = [s['per_judge'][name] for name in LLM_JUDGES if name in s['per_judge']]
            ok = sum(j['ok'] for j in judges)
            passed = sum(round((j['pass_rate'] or 0) * j['ok']) for j in judges)
            inconclusive = sum(j['inconclusive'] for j in judges)
            errors = sum(j['errors'] for j in judges)
            print(f'{i:>4}{wall:>9.1f}{proc.returncode:>6}{s["model_requests"]:>10}{s["input_tokens"]:>11,}'
                  f'{s["output_tokens"]:>7,}{ok:>8}{passed:>8}{inconclusive:>10}{errors:>8}')  # fmt: skip


if __name__ == '__main__':
    main()
