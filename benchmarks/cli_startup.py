"""How long `sensei-eval --help` and `sensei-eval judge --help` take, and whether the root imports DSPy.

The root command lists its commands from a table (`sensei_eval.cli.app.COMMANDS`) and imports a command's
module only when it runs, so `--help` should not pay for pydantic-ai, the service or DSPy.

    python benchmarks/cli_startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def _wall(args: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--quick', action='store_true', help='one repeat: CI runs it so the script cannot rot')
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    proc = subprocess.run(
        [sys.executable, '-X', 'importtime', '-m', 'sensei_eval', '--help'], capture_output=True, text=True, check=True
    )
    modules = [line.rsplit('|', 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith('import time:')]
    dspy = any(m.split('.')[0] == 'dspy' for m in modules)
    print(f'command                          median of {repeats}  (wall, seconds)')
    root = _wall(['-m', 'sensei_eval', '--help'], repeats)
    print(f'sensei-eval --help               {root:8.2f}   modules imported: {len(modules)}, dspy: {dspy}')
    print(f'sensei-eval judge --help         {_wall(["-m", "sensei_eval", "judge", "--help"], repeats):8.2f}')
    print(f'sensei-eval optimize --help      {_wall(["-m", "sensei_eval", "optimize", "--help"], repeats):8.2f}')


if __name__ == '__main__':
    main()
