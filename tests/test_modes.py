"""The failure-mode table is the one list of modes; a mode added at runtime gets a judge, a report key and a group."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from sensei_eval.core import modes
from sensei_eval.core.issues import Issue
from sensei_eval.core.modes import MODES, FailureMode, register_mode, unregister_mode
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators import registry
from sensei_eval.evaluators.base import FailureModeJudge, Judge
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.run_folder import load_reports
from sensei_eval.judging.runner import judge_records

from .helpers import ScriptedJudge, about, openai_record


def test_everything_that_lists_modes_derives_from_the_table() -> None:
    table = list(MODES.values())
    assert modes.categories() == tuple(dict.fromkeys(m.category for m in table))
    assert {m.name: m.components for m in table if m.components} == registry.COMPONENTS
    judge_of = {cls.failure_mode: cls for cls in registry.JUDGES.values() if cls.needs_model and cls.failure_mode}
    for category in modes.categories():
        assert registry.GROUPS[category] == tuple(judge_of[m.name].name for m in table if m.category == category)
    assert registry.EXTRA_MODES == {judge_of[m.name].name for m in table if not m.standard} == {'instruction_following'}
    assert [m.name for m in table if m.standard][:3] == ['tool_selection', 'tool_parameters', 'source_quality']
    assert sum(m.standard for m in table) == 15


def test_judges_declare_only_their_mode() -> None:
    for cls in registry.JUDGES.values():
        for attribute in ('category', 'issue_model'):
            assert attribute not in vars(cls), f'{cls.name} declares its {attribute}'
        assert cls.category == (MODES[cls.failure_mode].category if cls.failure_mode else None)
        assert cls().category == cls.category
        if issubclass(cls, FailureModeJudge):
            assert cls.issue_model is MODES[cls.failure_mode or ''].issue_model
    assert Judge.category is None and FailureModeJudge.issue_model is Issue


RECORD = {'query_id': 'q', 'run_id': 'r', 'evaluated_at': '2025-01-01T00:00:00Z', 'query': 'x', 'messages': []}


def test_a_report_holds_issues_by_mode_name() -> None:
    saved = {
        **RECORD,
        'issues': {
            'tool_parameters': [
                {'tool_name': 't', 'parameter': 'p', 'actual_value': 'a', 'suggested_value': 'b', 'reasoning': 'r'}
            ],
            'instruction_following': [{'rule': 'r', 'violation': 'v', 'severity': 'minor', 'reasoning': 'x'}],
        },
    }
    report = RecordReport.model_validate(saved)
    # each list is read as its mode's issue model, so no field of it is lost on the way back to JSON
    assert type(report.issues_of('tool_parameters')[0]) is MODES['tool_parameters'].issue_model
    assert report.model_dump(mode='json')['issues']['tool_parameters'][0]['parameter'] == 'p'
    assert len(report.issues_of('instruction_following')) == 1 and report.issues_of('hallucination') == []
    assert RecordReport.model_validate_json(report.model_dump_json()) == report
    names = list(RecordReport.model_fields)
    assert names.index('prompt_version') < names.index('issues') < names.index('overall_score')
    with pytest.raises(ValidationError, match="'rudeness' is not a failure mode"):
        RecordReport.model_validate({**saved, 'issues': {'rudeness': []}})
    with pytest.raises(ValidationError) as bad:
        RecordReport.model_validate({**saved, 'issues': {'tool_parameters': [{'tool_name': 't'}]}})
    assert ('issues', 'tool_parameters', 0, 'parameter') in [e['loc'] for e in bad.value.errors()]  # located, mode first
    with pytest.raises(KeyError, match='rudeness'):
        report.issues_of('rudeness')


# ---------------------------------------------------------------------------------------------------
# A mode added at runtime


class PolitenessIssue(Issue):
    remark: str
    reasoning: str


@dataclass(repr=False)
class Politeness(FailureModeJudge):
    name: ClassVar[str] = 'politeness'
    failure_mode: ClassVar[str | None] = 'politeness'
    question: ClassVar[str] = 'Was the agent curt with the user?'
    rubric: ClassVar[str] = 'Give the curt `remark` and your `reasoning`. A short answer is not a problem.'


POLITENESS = FailureMode('politeness', 'manners', PolitenessIssue, ('TONE',))


@pytest.fixture
def politeness() -> Iterator[FailureMode]:
    register_mode(POLITENESS, Politeness)
    try:
        yield POLITENESS
    finally:
        unregister_mode('politeness')


def _curt(prompt: str, n: int) -> dict[str, Any]:
    if '## Your task: judge `politeness`' in prompt:
        issue = {'steps': [5], 'remark': 'Use `Depends()`.', 'reasoning': 'One bare line answers a how-question.'}
        return {'reasoning': f'The answer at [5] is one bare line ({about(prompt)}).', 'issues': [issue]}
    return {'reasoning': f'Nothing wrong at [2] ({about(prompt)}).', 'issues': []}


def test_registered_mode_gets_a_judge_a_report_key_and_a_group(politeness: FailureMode, tmp_path: Path) -> None:
    assert registry.resolve_names(['manners']) == ['politeness']
    assert registry.JUDGES['politeness'] is Politeness
    assert 'politeness' in registry.GROUPS['all'] and 'politeness' in registry.EXTRA_MODES
    assert registry.COMPONENTS['politeness'] == ('TONE',)
    assert Politeness.category == 'manners' and 'manners' in modes.categories()
    assert Politeness.issue_model is PolitenessIssue

    judges = registry.make_judges(['manners', 'hallucination'])
    [report] = asyncio.run(
        judge_records([openai_record()], JudgeRunOptions(judges, ScriptedJudge(_curt).model()), run_id='r', run_dir=tmp_path)
    )
    assert report.judges['politeness'].status == 'ok', report.judges['politeness'].error
    [issue] = report.issues_of('politeness')
    assert isinstance(issue, PolitenessIssue) and issue.remark == 'Use `Depends()`.'
    assert list(report.issues) == ['politeness']
    assert report.failure_modes == ['politeness'] and report.primary_failure_mode == 'politeness'
    assert report.category_scores == {'output': 1.0, 'manners': 0.5}
    assert report.decisive_step == 5
    assert report.model_dump(mode='json')['issues']['politeness'][0]['remark'] == 'Use `Depends()`.'
    [back] = load_reports(tmp_path)
    assert back.issues_of('politeness') == [issue]


def test_unregistering_removes_every_trace() -> None:
    fields = dict(RecordReport.model_fields)
    register_mode(POLITENESS, Politeness)
    assert RecordReport.model_fields == fields  # the report model is static: a mode is a key, not a field
    unregister_mode('politeness')
    assert 'politeness' not in MODES
    assert 'manners' not in registry.GROUPS and 'manners' not in modes.categories()
    assert 'politeness' not in registry.JUDGES and 'politeness' not in registry.COMPONENTS
    with pytest.raises(ValidationError, match='not a failure mode'):
        RecordReport.model_validate({**RECORD, 'issues': {'politeness': []}})


def test_bad_registrations_leave_the_table_as_it_was() -> None:
    before = (dict(MODES), dict(registry.GROUPS), modes.categories())
    with pytest.raises(ValueError, match='already exists'):
        register_mode(FailureMode('hallucination', 'output', PolitenessIssue), Politeness)
    with pytest.raises(ValueError, match='declares failure_mode'):
        register_mode(FailureMode('rudeness', 'manners', PolitenessIssue), Politeness)

    @dataclass(repr=False)
    class Clash(Politeness):
        name: ClassVar[str] = 'hallucination'  # a judge of that name exists

    with pytest.raises(ValueError, match='share a name'):
        register_mode(POLITENESS, Clash)
    with pytest.raises(ValueError, match='not a mode added'):
        unregister_mode('hallucination')
    after = (dict(MODES), dict(registry.GROUPS), modes.categories())
    assert after == before
