"""The README and the docs site stay true to themselves and to the command line.

Two ways docs rot, both seen here: a section pasted twice and then edited once (the README once held four
sections twice, the second copies stale), and a command whose flag was renamed or removed. So a heading may
appear once across `README.md` and `docs/`, and every `sensei-eval …` / `python -m sensei_eval…` command the
docs show (in code blocks and inline code) must name a command that exists, with options that command has.
The options are read from the click commands the CLI really mounts (`sensei_eval.cli.app.load_command`), so
nothing is run.
"""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

# typer vendors click: its commands are these classes, not the click package's
from typer._click.core import Command as ClickCommand
from typer._click.core import Context
from typer.core import TyperGroup as Group
from typer.core import TyperOption as Option

from sensei_eval.cli.app import COMMANDS, load_command

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]

# fenced blocks whose lines are commands a reader types (output blocks are marked `text`)
_SHELL_FENCES = {'', 'bash', 'sh', 'shell', 'console'}
_FENCE = re.compile(r'^(\s*)(`{3,}|~{3,})\s*([\w+-]*)')
_HEADING = re.compile(r'^(#{1,6})\s+(.+?)\s*#*\s*$')
_INLINE_CODE = re.compile(r'(?<!`)`([^`]+)`(?!`)')
# what starts a command of ours, and which command it is
_MODULE_COMMANDS = {
    'sensei_eval.judge': 'judge',
    'sensei_eval.optimize': 'optimize',
    'sensei_eval.validate': 'validate',
}


@dataclass(frozen=True)
class Command:
    where: str  # file:line
    words: tuple[str, ...]  # after the program: ('judge', '--model', 'openai:x')


def _prose_and_blocks(path: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(lines outside fences, command lines inside shell fences), each with its 1-based line number."""
    prose: list[tuple[int, str]] = []
    shell: list[tuple[int, str]] = []
    fence: str | None = None
    fence_is_shell = False
    for number, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
        match = _FENCE.match(line)
        if fence is None and match:
            fence, fence_is_shell = match.group(2), match.group(3).lower() in _SHELL_FENCES
            continue
        if fence is not None:
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == '':
                fence = None
            elif fence_is_shell:
                shell.append((number, line))
            continue
        prose.append((number, line))
    return prose, shell


def _headings() -> dict[str, list[str]]:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in DOC_FILES:
        prose, _ = _prose_and_blocks(path)
        for number, line in prose:
            match = _HEADING.match(line)
            if match:
                text = re.sub(r'\s+', ' ', match.group(2).replace('`', '').strip().lower())
                seen[text].append(f'{path.relative_to(ROOT)}:{number}')
    return seen


def _split(where: str, text: str) -> list[Command]:
    """Our commands in one shell line (`a && b`, `VAR=x sensei-eval …`, comments and `$` prompts allowed)."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return []
    commands: list[Command] = []
    current: list[str] = []
    for word in [*words, '&&']:
        if word in {'&&', '||', ';', '|'}:
            while current and (current[0] == '$' or re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*=.*', current[0])):
                current.pop(0)
            if current and current[0] in {'sensei-eval', 'sensei-eval-judge'}:
                rest = current[1:] if current[0] == 'sensei-eval' else ['judge', *current[1:]]
                commands.append(Command(where, tuple(rest)))
            elif current[:2] in (['python', '-m'], ['python3', '-m']) and len(current) > 2:
                module = current[2]
                if module == 'sensei_eval':
                    commands.append(Command(where, tuple(current[3:])))
                elif module in _MODULE_COMMANDS:
                    commands.append(Command(where, (_MODULE_COMMANDS[module], *current[3:])))
                elif module.startswith('sensei_eval.'):
                    commands.append(Command(where, (f'<module {module}>',)))
            current = []
        else:
            current.append(word)
    return commands


def _documented_commands() -> list[Command]:
    found: list[Command] = []
    for path in DOC_FILES:
        name = str(path.relative_to(ROOT))
        prose, shell = _prose_and_blocks(path)
        pending = ''
        for number, line in shell:
            if line.rstrip().endswith('\\'):
                pending += line.rstrip()[:-1] + ' '
                continue
            found += _split(f'{name}:{number}', pending + line)
            pending = ''
        # inline code may wrap over two lines of prose: read each paragraph as one line
        paragraph: list[tuple[int, str]] = []
        for number, line in [*prose, (0, '')]:
            if line.strip():
                paragraph.append((number, line))
                continue
            text = ' '.join(part.strip() for _, part in paragraph)
            for match in _INLINE_CODE.finditer(text):
                code = match.group(1).strip()
                if re.match(r'(sensei-eval(-judge)?|python3? -m sensei_eval)\b', code) and '|' not in code:
                    found += _split(f'{name}:{paragraph[0][0]}', code)
            paragraph = []
    return found


def _option_names(command: ClickCommand) -> set[str]:
    names = {'--help'}
    for param in command.params:
        if isinstance(param, Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def _problem(command: Command, loaded: dict[str, ClickCommand]) -> str | None:
    """Why the documented command would not parse, or None."""
    words = list(command.words)
    if not words:
        return None
    if words[0].startswith('<module '):
        return f'{words[0][8:-1]} is not a module the docs may run as a command'
    if words[0] in {'--help', '-h'}:
        return None
    if words[0] not in COMMANDS:
        return f'no command {words[0]!r} (commands: {", ".join(COMMANDS)})'
    if words[0] not in loaded:
        loaded[words[0]] = load_command(words[0])
    target = loaded[words[0]]
    rest = words[1:]
    if isinstance(target, Group):
        sub = next((w for w in rest if not w.startswith('-')), None)
        if sub is None:
            return None
        found = target.get_command(Context(target), sub)
        if found is None:
            return f'no command {words[0]} {sub!r} (commands: {", ".join(target.list_commands(Context(target)))})'
        target, rest = found, rest[rest.index(sub) + 1 :]
    known = _option_names(target)
    for word in rest:
        if word.startswith('-') and len(word) > 1 and not re.fullmatch(r'-\d.*', word):
            flag = word.split('=', 1)[0]
            if flag not in known:
                return f'{words[0]} has no option {flag}'
    return None


def test_no_heading_appears_twice() -> None:
    twice = {text: places for text, places in _headings().items() if len(places) > 1}
    assert not twice, 'headings that appear more than once (a copy that will go stale):\n' + '\n'.join(
        f'  {text!r}: {", ".join(places)}' for text, places in sorted(twice.items())
    )


def test_documented_commands_name_real_commands_and_options() -> None:
    commands = _documented_commands()
    # the docs really do show commands: if this drops, the extraction broke, not the docs
    assert len(commands) >= 40, len(commands)
    assert {c.words[0] for c in commands if c.words} >= {'judge', 'view', 'validate', 'optimize', 'calibrate', 'serve'}
    loaded: dict[str, ClickCommand] = {}
    problems = [f'{c.where}: {" ".join(c.words)}\n    {p}' for c in commands if (p := _problem(c, loaded))]
    assert not problems, 'documented commands that no longer parse:\n' + '\n'.join(problems)


@pytest.mark.parametrize(
    ('line', 'words'),
    [
        ('sensei-eval judge --model openai:x   # a comment', ('judge', '--model', 'openai:x')),
        ('SENSEI_EVAL_MODEL=openai:x sensei-eval judge', ('judge',)),
        ('pip install -e . && python -m sensei_eval.judge --no-cache', ('judge', '--no-cache')),
        ('python -m sensei_eval serve --db x', ('serve', '--db', 'x')),
        ('$ sensei-eval-judge --list', ('judge', '--list')),
    ],
)
def test_commands_are_read_as_a_shell_reads_them(line: str, words: tuple[str, ...]) -> None:
    assert [c.words for c in _split('x', line)] == [words]


def test_a_renamed_flag_or_command_is_caught() -> None:
    loaded: dict[str, ClickCommand] = {}
    assert _problem(Command('x', ('judge', '--judges', 'mvp')), loaded) is None
    assert 'no option --jugdes' in (_problem(Command('x', ('judge', '--jugdes', 'mvp')), loaded) or '')
    assert 'no command' in (_problem(Command('x', ('jduge',)), loaded) or '')
    assert _problem(Command('x', ('cache', 'prune', '--older-than', '30d')), loaded) is None
    assert 'no command cache' in (_problem(Command('x', ('cache', 'purge')), loaded) or '')


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r'^```python\n(.*?)^```', path.read_text(encoding='utf-8'), re.S | re.M)


def test_the_offline_pydantic_evals_example_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The page's examples that need no model run as printed (the ones naming a model can't run offline)."""
    monkeypatch.chdir(ROOT)
    offline = [code for code in _python_blocks(ROOT / 'docs' / 'pydantic-evals.md') if 'model=' not in code]
    assert offline, 'docs/pydantic-evals.md lost its offline example'
    for code in offline:
        namespace: dict[str, object] = {}
        exec(compile(code, 'docs/pydantic-evals.md', 'exec'), namespace)
        reports = [value for value in namespace.values() if type(value).__name__ == 'EvaluationReport']
        dataset = namespace.get('dataset')
        # the example judged every record with every check: no evaluator failed
        report = reports[0] if reports else dataset.evaluate_sync(lambda r: r)  # type: ignore[union-attr]
        assert len(report.cases) == 17
        assert not report.failures
        assert all(not case.evaluator_failures for case in report.cases)
        assert any(not passed.value for case in report.cases for passed in case.assertions.values())


def test_readme_stays_a_quick_start() -> None:
    """The README is the way in (≤ 20 KB, as issue 33 set); reference material belongs on the docs site."""
    readme = (ROOT / 'README.md').read_text(encoding='utf-8')
    assert len(readme.encode()) <= 20_000
    # every page it points to exists
    for target in re.findall(r'\]\((docs/[^)#]+)', readme):
        assert (ROOT / target).exists(), target
