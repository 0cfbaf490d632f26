"""A judge is added in one place: `register_judge` on its class. Also a user's judge, defined after the registry
was imported, is at once a name `--judges` takes, in its groups, and judged like ours.

Run in a fresh interpreter: a judge registered here would stay in the registry of the whole test session."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_USER_MODULE = textwrap.dedent(
    '''
    from dataclasses import dataclass
    from typing import ClassVar

    from sensei_eval.evaluators import registry  # imported first: the judge below comes later
    from sensei_eval.evaluators.base import register_judge
    from sensei_eval.evaluators.checks import DeterministicCheck
    from sensei_eval.core.issues import AgentFormatIssue

    assert 'shouting_check' not in registry.JUDGES

    @register_judge
    @dataclass(repr=False)
    class ShoutingCheck(DeterministicCheck):
        """An answer written in capitals."""

        name: ClassVar[str] = 'shouting_check'
        failure_mode: ClassVar[str | None] = 'agent_format'

        def find(self, record, transcript):
            answer = record.final_answer or ''
            if answer and answer == answer.upper():
                fix = 'Write in sentences.'
                return [AgentFormatIssue(steps=[], problem_type='filler', example_text=answer[:40], suggested_fix=fix)]
            return []

    print('names', 'shouting_check' in registry.JUDGES)
    print('checks', 'shouting_check' in registry.GROUPS['checks'])
    print('all', 'shouting_check' in registry.GROUPS['all'])
    print('resolved', registry.resolve_names(['shouting_check']))
    '''
)


def _python(code: str) -> str:
    """`code` run in a fresh interpreter; its standard output (it must exit 0)."""
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_judge_registered_after_the_registry_is_named_grouped_and_resolved() -> None:
    stdout = _python(_USER_MODULE)
    lines = stdout.splitlines()
    assert lines[:3] == ['names True', 'checks True', 'all True']
    assert lines[3] == "resolved ['shouting_check']"


def test_two_judges_cannot_share_a_name() -> None:
    code = textwrap.dedent(
        """
        from dataclasses import dataclass
        from typing import ClassVar
        from sensei_eval.evaluators.base import register_judge
        from sensei_eval.evaluators.checks import DeterministicCheck

        try:
            @register_judge
            @dataclass(repr=False)
            class Again(DeterministicCheck):
                name: ClassVar[str] = 'greeting_check'
        except ValueError as e:
            print(e)
        """
    )
    stdout = _python(code)
    assert "two judges share the name 'greeting_check'" in stdout


def test_a_judge_the_registry_refuses_is_not_left_half_registered() -> None:
    code = textwrap.dedent(
        """
        from dataclasses import dataclass
        from typing import ClassVar
        from sensei_eval.core.modes import register_mode
        from sensei_eval.evaluators import registry
        from sensei_eval.evaluators.base import register_judge, registered_judges
        from sensei_eval.evaluators.checks import DeterministicCheck
        from tests.test_modes import POLITENESS, Politeness

        register_mode(POLITENESS, Politeness)  # a mode's judge, named 'politeness'
        before = (dict(registry.JUDGES), dict(registry.GROUPS))
        try:
            @register_judge
            @dataclass(repr=False)
            class Clash(DeterministicCheck):
                name: ClassVar[str] = 'politeness'
        except ValueError as e:
            print(e)
        print('rolled back', 'politeness' not in [c.name for c in registered_judges() if c is not Politeness])
        print('registry unchanged', (dict(registry.JUDGES), dict(registry.GROUPS)) == before)
        """
    )
    stdout = _python(code)
    refused, rolled_back, unchanged = stdout.splitlines()
    assert refused.startswith('two judges share a name') and refused.count('politeness') == 2
    assert (rolled_back, unchanged) == ('rolled back True', 'registry unchanged True')
