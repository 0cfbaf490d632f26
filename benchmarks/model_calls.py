"""What a judge run does against a slow, rate-limited or dead model: figures for docs/cli.md.

Runs the real CLI (`sensei-eval judge --judges hallucination` on one sample record) against the local
OpenAI-compatible keep-alive server of the tests (`tests/openai_server.py`) in each of its modes, and
prints per mode: the exit code, the chat requests the server saw, the seconds from the first judge call
to the end of the run (the CLI's start-up is left out: it is the same for every mode), and the error.

    python benchmarks/model_calls.py            # every mode
    python benchmarks/model_calls.py hang 429   # some
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

from tests.openai_server import Behaviour, OpenAIServer

__all__ = ('MODES', 'main')

# mode → (script, default behaviour, extra CLI arguments)
MODES: dict[str, tuple[list[Behaviour], Behaviour, list[str]]] = {
    'ok': ([], 'ok', []),
    '429': ([('429', 4)], 'ok', []),
    '500-once': (['500'], 'ok', []),
    '500': ([], '500', []),
    'invalid': ([], 'invalid', []),
    'hang': ([], 'hang', ['--timeout', '10']),
    'drip': ([], 'drip', ['--timeout', '10']),
}


def run(mode: str) -> str:
    script, default, extra = MODES[mode]
    with tempfile.TemporaryDirectory() as out, OpenAIServer(script=list(script), default=default) as server:
        command = [sys.executable, '-m', 'sensei_eval', 'judge', '--base-url', server.base_url, '--model', 'm']
        command += ['--judges', 'hallucination', '--no-cache', '--query-id', 'docs-001', '--out', out, *extra]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, 'COLUMNS': '200'})
        end = time.monotonic()
        calls = server.completions()
        gaps = ', '.join(f'{b.at - a.at:.1f}' for a, b in itertools.pairwise(calls)) or '-'
        reports = list(Path(out).glob('*/records/*.json'))
        result = json.loads(reports[0].read_text())['judges']['hallucination'] if reports else {}
    since_call = f'{end - calls[0].at:.1f}' if calls else '-'
    error = (result.get('error') or '')[:90]
    return (
        f'{mode:9} exit {done.returncode}  requests {len(calls)}  gaps(s) {gaps:10}  '
        f'first call→end {since_call:>5} s  {result.get("status", "?")}  {error}'
    )


def main() -> None:
    quick = '--quick' in sys.argv  # two modes, in seconds: CI runs it so the script cannot rot
    modes = [a for a in sys.argv[1:] if a != '--quick'] or (list(MODES)[:2] if quick else list(MODES))
    print('sensei-eval judge against a local keep-alive OpenAI-compatible server (one judge call each)')
    for mode in modes:
        print(run(mode), flush=True)


if __name__ == '__main__':
    main()
