"""Measure the core install (`pip install .`, no extras) in a fresh venv, then use it from outside the clone.

    python scripts/install_footprint.py [--keep] [--extras EXTRA[,EXTRA]]

Creates a venv in a temp dir, `pip install .` from a copy of this repo (pip's cache makes repeats fast; nothing but
the package index is contacted), prints the number of installed distributions (minus pip/setuptools/wheel)
and the size of site-packages, then, from a temp directory outside the clone:

1. imports the public names a judge user needs;
2. puts one LLM judge (`Hallucination`) in a pydantic-evals `Dataset`, judged by a pydantic-ai
   `FunctionModel` (offline), and evaluates one case;
3. runs the judge CLI on the packaged sample dataset with the deterministic checks only (no model):
   `sensei-eval judge --judges checks`, falling back to `python -m sensei_eval.judge --evaluators checks`.

Targets (the issue "One face for the library"): under 60 packages and under 250 MB without extras.
Exits 1 if a step fails or a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_PACKAGES = 60
MAX_MB = 250.0
TOOLING = {'pip', 'setuptools', 'wheel'}
SKIP = ('.git', '.venv', 'reports', 'build', 'dist', '*.egg-info', '__pycache__', '.*_cache', 'notebooks', 'benchmarks')

IMPORTS = """
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.datasets import load_datasets
from sensei_eval.evaluators.output import Hallucination
from sensei_eval.evaluators.base import use_judge_model
from sensei_eval.models.judge_model import resolve_model
import sensei_eval.cli.judge
print('imports ok')
"""

# One judge in a pydantic-evals Dataset, its model a FunctionModel: no network, no key, no extra.
DATASET_SMOKE = """
import json
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from pydantic_evals import Case, Dataset
from sensei_eval.evaluators.output import Hallucination
from sensei_eval.core.records import QueryRecord

record = QueryRecord.model_validate({
    'query_id': 'r1',
    'query': 'How do FastAPI dependencies work?',
    'messages': [
        {'role': 'user', 'content': 'How do FastAPI dependencies work?'},
        {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c1', 'type': 'function',
            'function': {'name': 'get_docs', 'arguments': '{"library_id": "/fastapi/fastapi"}'}}]},
        {'role': 'tool', 'tool_call_id': 'c1', 'content': 'Depends() declares a dependency.'},
        {'role': 'assistant', 'content': 'Declare it with `Depends()`.'},
    ],
})

def judge(messages, info):
    verdict = {'reasoning': 'The answer restates the fetched docs (Depends() declares a dependency).', 'issues': []}
    return ModelResponse(parts=[TextPart(content=json.dumps(verdict))])

async def task(r):
    return r

dataset = Dataset(name='smoke', cases=[Case(name='r1', inputs=record)],
                  evaluators=[Hallucination(model=FunctionModel(judge))])
report = dataset.evaluate_sync(task, progress=False)
case = report.cases[0]
assert not case.evaluator_failures, case.evaluator_failures
print('dataset ok:', {k: v.value for k, v in case.assertions.items()}, {k: v.value for k, v in case.scores.items()})
"""


def run(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True, check=False)


def step(name: str, proc: subprocess.CompletedProcess[str]) -> bool:
    ok = proc.returncode == 0
    print(f'[{"ok" if ok else "FAIL"}] {name} (exit {proc.returncode})')
    out = (proc.stdout + proc.stderr).strip()
    if out:
        lines = out.splitlines()
        shown = lines if not ok else lines[-6:]
        print('\n'.join(f'    {line}' for line in shown))
    return ok


def dir_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            p = Path(dirpath, f)
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--keep', action='store_true', help='keep the temp venv and print its path')
    parser.add_argument('--extras', default='', help='measure `pip install .[EXTRAS]` instead of the core')
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix='sensei-footprint-'))
    venv, work = tmp / 'venv', tmp / 'work'
    work.mkdir()
    py = venv / 'bin' / 'python'
    ok = True
    try:
        subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True)
        # install from a copy of the tree: a build in the clone would leave build/ behind in a shared tree
        src = tmp / 'src'
        shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*SKIP))
        target = f'{src}[{args.extras}]' if args.extras else str(src)
        t0 = time.monotonic()
        ok &= step(f'pip install {target}', run([str(py), '-m', 'pip', 'install', '--quiet', target]))
        print(f'    took {time.monotonic() - t0:.0f}s')
        if not ok:
            return 1

        listed = json.loads(run([str(py), '-m', 'pip', 'list', '--format=json']).stdout)
        packages = sorted(p['name'] for p in listed if p['name'].lower() not in TOOLING)
        site = Path(run([str(py), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])']).stdout.strip())
        tooling = sum(dir_size(p) for p in site.iterdir() if p.name.split('-')[0].lower() in TOOLING)
        mb = (dir_size(site) - tooling) / 1e6
        print(f'packages: {len(packages)} (pip list minus {"/".join(sorted(TOOLING))}; target < {MAX_PACKAGES})')
        print(f'size: {mb:.0f} MB (site-packages minus pip/setuptools; target < {MAX_MB:.0f} MB)')
        print(f'    {", ".join(packages)}')
        if not args.extras and (len(packages) >= MAX_PACKAGES or mb >= MAX_MB):
            print('[FAIL] the core install is over its target')
            ok = False

        # everything below runs outside the clone, so nothing can come from the working tree
        env = {k: v for k, v in os.environ.items() if not k.startswith(('SENSEI_EVAL_', 'PYTHONPATH'))}
        ok &= step('imports', run([str(py), '-c', IMPORTS], cwd=work, env=env))
        smoke = run([str(py), '-c', DATASET_SMOKE], cwd=work, env=env)
        ok &= step('one judge in a pydantic-evals Dataset (FunctionModel)', smoke)

        unified = [str(venv / 'bin' / 'sensei-eval'), 'judge', '--judges', 'checks', '--out', str(tmp / 'reports')]
        proc = run(unified, cwd=work, env=env)
        if proc.returncode == 2 and 'No such command' in proc.stderr + proc.stdout:
            print('[note] `sensei-eval judge` is not there yet: falling back to python -m sensei_eval.judge')
            legacy = [str(py), '-m', 'sensei_eval.judge', '--evaluators', 'checks', '--out', str(tmp / 'reports')]
            proc = run(legacy, cwd=work, env=env)
        # exit 0: every record judged; the checks finding the sample's planted failures is not an error
        ok &= step(f'judge CLI on the packaged sample, from {work}', proc)
    finally:
        if args.keep:
            print(f'kept: {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print('all ok' if ok else 'FAILED')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
