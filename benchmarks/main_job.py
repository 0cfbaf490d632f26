"""The README's main job, timed as a user runs it: `python -m sensei_eval.judge --no-cache` on the shipped sample
(no judge model named: the deterministic checks judge, the LLM judges are reported as not run), `--repeats`
times in a row, each in a fresh process. `-- --model embedded` times the embedded model's smoke run instead.

Prints per run the wall time, the exit code, the records reported, model requests and tokens from
`summary.json` (prompt and answer tokens per request: they do not depend on the machine's load, the
seconds do), the CPU seconds of the command and
everything it started (the model server included: on a busy machine closer to the quiet figure than the
wall time), and for the LLM judges how their results came back (ok, smoke, inconclusive, errors). The
load average is printed before and after each run: on a shared machine the wall time is only comparable
at a similar load. Extra arguments go to the judge command (e.g. `-- --judges mvp`).

    python benchmarks/main_job.py [--repeats 2] [--quick] [-- JUDGE ARGS...]
    python benchmarks/main_job.py --fresh [--no-pip-cache]

`--quick`: one run over the sample's first three records, to try a change.

`--fresh`: what a newcomer waits for from a clone to the first verdicts. The committed project is cloned
into a temporary folder (`git clone` of HEAD: uncommitted changes are not in it) and the README's first
set-up command is run there as written (a new venv, the core install from prebuilt wheels, then the main
job), timing the install and the main job apart. pip uses its cache as a user's second install would;
`--no-pip-cache` (`PIP_NO_CACHE_DIR=1`) downloads every wheel, as a first install on a new machine does.
The figures say which was measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LLM_JUDGES = ('tool_selection', 'hallucination', 'completeness')
QUICK_RECORDS = 3
# The targets of issue 40: clone to first verdicts, and the main job alone (2 cores).
FIRST_VERDICTS_TARGET_S = 120.0
MAIN_JOB_TARGET_S = 10.0


def _load() -> str:
    return ' '.join(f'{x:.2f}' for x in os.getloadavg())


def _sample_ids(n: int) -> list[str]:
    from sensei_eval.data import SAMPLE_DATASET

    ids = []
    with Path(SAMPLE_DATASET).open(encoding='utf-8') as f:
        for line in f:
            if line.strip() and len(ids) < n:
                ids.append(json.loads(line)['query_id'])
    return ids


def _server_figures(log: str) -> str:
    """What the embedded server itself evaluated, from its log: the prompt tokens it had to evaluate (the
    rest came from its prefix cache) and the tokens it wrote, with its own milliseconds per token."""
    prompt = [(float(ms), int(n)) for ms, n in re.findall(r'prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens', log)]
    out = [(float(ms), int(n)) for ms, n in re.findall(r'\n\S*\s+eval time =\s*([\d.]+) ms /\s*(\d+) runs', log)]
    cached = sum(int(n) for n in re.findall(r'(\d+) prefix-match hit', log))
    p_ms, p_n = sum(ms for ms, _ in prompt), sum(n for _, n in prompt)
    o_ms, o_n = sum(ms for ms, _ in out), sum(n for _, n in out)
    return (
        f'server: {p_n:,} prompt tokens evaluated ({p_ms / max(1, p_n):.1f} ms each), {cached:,} from the prefix '
        f'cache; {o_n:,} tokens written ({o_ms / max(1, o_n):.1f} ms each)'
    )


def readme_first_command() -> str:
    """The README's first set-up command (the one `tests/test_readme.py` pins), as written."""
    text = (ROOT / 'README.md').read_text(encoding='utf-8')
    setup = text.split('## Set up', 1)[1].split('\n## ', 1)[0]
    return re.findall(r'```bash\n(.+?)\n```', setup)[0]


def fresh(pip_cache: bool) -> int:
    """Clone, then run the README's first command in the clone: the install and the main job timed apart."""
    command = readme_first_command()
    setup, _, job = command.rpartition(' && ')
    env = {k: v for k, v in os.environ.items() if not k.startswith(('SENSEI_EVAL_', 'VIRTUAL_ENV', 'PIP_'))}
    if not pip_cache:
        env['PIP_NO_CACHE_DIR'] = '1'
    print(f'README first command: {command}')
    print(f'{os.cpu_count()} cores · load average {_load()} (1, 5, 15 min) · pip cache {"used" if pip_cache else "not used"}')
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / 'sensei-eval'
        start = time.time()  # wall-clock seconds throughout: the shell's marker is a date
        subprocess.run(['git', 'clone', '--quiet', str(ROOT), str(clone)], check=True)
        cloned = time.time()
        # one shell, as the user types it; a marker line between the install and the job times them apart
        script = f'{setup} >/dev/null && echo __installed__ "$(date +%s.%N)" && SENSEI_EVAL_CACHE={tmp}/cache {job}'
        proc = subprocess.run(['bash', '-c', script], cwd=clone, env=env, capture_output=True, text=True)
        done = time.time()
    marks = re.findall(r'__installed__ (\d+\.\d+)', proc.stdout)
    if proc.returncode != 0 or not marks:
        print(f'failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}')
        return 1
    installed = float(marks[0])
    install_s, job_s, first = installed - cloned, done - installed, done - start
    print(f'clone {cloned - start:.1f} s · install {install_s:.1f} s · main job {job_s:.1f} s · '
          f'clone to first verdicts {first:.1f} s (targets: {FIRST_VERDICTS_TARGET_S:.0f} s, main job '
          f'{MAIN_JOB_TARGET_S:.0f} s) · load after {_load()}')  # fmt: skip
    verdicts = [line for line in proc.stdout.splitlines() if line.startswith(('overall score', 'failed verdicts'))]
    print('main job said: ' + ' | '.join(verdicts))
    return 0 if first <= FIRST_VERDICTS_TARGET_S and job_s <= MAIN_JOB_TARGET_S else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--repeats', type=int, default=2)
    parser.add_argument('--quick', action='store_true', help=f'one run over the first {QUICK_RECORDS} sample records')
    parser.add_argument('--fresh', action='store_true', help="clone, then time the README's first command from scratch")
    parser.add_argument('--no-pip-cache', action='store_true', help='with --fresh: download every wheel (no pip cache)')
    parser.add_argument('--server-log', help="copy each run's embedded server log to SERVER_LOG.<run>")
    parser.add_argument('--output', action='store_true', help="print each run's console output")
    parser.add_argument('judge_args', nargs='*', help='passed on to python -m sensei_eval.judge (after --)')
    args = parser.parse_args()
    if args.fresh:
        sys.exit(fresh(pip_cache=not args.no_pip_cache))
    extra = list(args.judge_args)
    repeats = args.repeats
    if args.quick:
        repeats = 1
        for qid in _sample_ids(QUICK_RECORDS):
            extra += ['--query-id', qid]
    print(f'python -m sensei_eval.judge --no-cache {" ".join(extra)}'.rstrip())
    print(f'{os.cpu_count()} cores · load average {_load()} (1, 5, 15 min)')
    print(f'{"run":>3}{"wall s":>8}{"exit":>5}{"records":>8}{"requests":>9}{"tok in":>8}{"out":>6}'
          f'{"in/req":>7}{"out/req":>8}{"ok":>4}{"smoke":>6}{"inc.":>5}{"err":>4}{"cpu s":>7}  load after')  # fmt: skip
    walls = []
    with tempfile.TemporaryDirectory() as out:
        # a cache directory of its own: the embedded server is not shared with other processes of the machine
        # (as on a new user's machine), and its log is this run's alone
        # and no model from the environment: the newcomer's main job (a model only with `-- --model ...`)
        env = {k: v for k, v in os.environ.items() if k not in ('SENSEI_EVAL_MODEL', 'SENSEI_EVAL_BASE_URL')}
        env['SENSEI_EVAL_CACHE'] = str(Path(out) / 'cache')
        for i in range(1, repeats + 1):
            command = [sys.executable, '-m', 'sensei_eval.judge', '--no-cache', '--out', out, '--run-id', f'm{i}', *extra]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(command, capture_output=True, text=True, env=env)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            summary_path = Path(out) / f'm{i}' / 'summary.json'
            if not summary_path.is_file():
                print(f'run {i} wrote no summary (exit {proc.returncode}):\n{proc.stderr[-2000:]}')
                continue
            walls.append(wall)
            s = json.loads(summary_path.read_text())
            judges = [s['per_judge'][name] for name in LLM_JUDGES if name in s['per_judge']]
            ok = sum(j.get('ok', 0) for j in judges)
            smoke = sum(j.get('smoke', 0) for j in judges)
            inconclusive = sum(j.get('inconclusive', 0) for j in judges)
            errors = sum(j.get('errors', 0) for j in judges)
            requests = s['model_requests']
            per_in = s['input_tokens'] / requests if requests else 0
            per_out = s['output_tokens'] / requests if requests else 0
            print(f'{i:>3}{wall:>8.1f}{proc.returncode:>5}{s["records_judged"]:>8}{requests:>9}{s["input_tokens"]:>8,}'
                  f'{s["output_tokens"]:>6,}{per_in:>7.0f}{per_out:>8.0f}{ok:>4}{smoke:>6}{inconclusive:>5}{errors:>4}'
                  f'{cpu:>7.1f}  {_load()}')  # fmt: skip
            if proc.returncode != 0 or args.output:
                print(proc.stderr[-4000:] + proc.stdout[-4000:])
            log_text = ''
            server_log = Path(out) / 'cache' / 'embedded' / 'server.log'
            if server_log.is_file():
                log_text = server_log.read_text(errors='replace')
                print(f'    {_server_figures(log_text)}')
            if args.server_log:
                Path(f'{args.server_log}.{i}').write_text(log_text)
    if walls:
        print(f'wall: {" / ".join(f"{w:.1f} s" for w in walls)} (main job target: at most {MAIN_JOB_TARGET_S:.0f} s each)')


if __name__ == '__main__':
    main()
