"""The README's commands are the ones CI runs: they can't drift apart."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / 'README.md').read_text()
    setup = text.split('## Set up', 1)[1].split('\n## ', 1)[0]
    return re.findall(r'```bash\n(.+?)\n```', setup)


def test_readme_has_exactly_two_setup_commands() -> None:
    commands = _readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith('python -m sensei_eval.judge')
    assert commands[1].endswith('pytest')


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / '.ci' / 'run').read_text()
    assert _readme_commands()[1] in ci.splitlines()


def test_the_readme_shows_the_main_jobs_real_output(tmp_path: Path) -> None:
    """The output the README shows is what `python -m sensei_eval.judge` prints now, line for line, with no
    model named (the run id and the checkout's path aside): its stderr lines, then its stdout, then the
    stderr footer from "N record(s) judged" on, the order a user sees them in."""
    import os
    import subprocess
    import sys

    text = (ROOT / 'README.md').read_text()
    shown = text.split('## Judge the sample', 1)[1].split('```text\n', 1)[1].split('\n```', 1)[0]
    env = {k: v for k, v in os.environ.items() if k not in ('SENSEI_EVAL_MODEL', 'SENSEI_EVAL_BASE_URL', 'COLUMNS')}
    command = [sys.executable, '-m', 'sensei_eval.judge']
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.rstrip('\n').splitlines()
    footer = next(n for n, line in enumerate(err) if re.match(r'\d+ record\(s\) judged by', line))
    printed = '\n'.join([*err[:footer], *proc.stdout.rstrip('\n').splitlines(), *err[footer:]])

    def normalise(output: str) -> str:
        output = re.sub(r'(?m)^(progress: .*· )\d+ s$', r'\1N s', output)  # wall time: the machine's, not ours
        return re.sub(r'\d{8}-\d{6}-[0-9a-f]{4}', 'RUN', output).replace(f'{ROOT}/', '…/')

    assert normalise(printed) == normalise(shown)
