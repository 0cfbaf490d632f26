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
