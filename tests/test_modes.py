"""The failure-mode table is the one list of modes; a mode added at runtime gets a judge, a field and a group."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sensei_eval.core import modes, reports
from sensei_eval.core.issues import Issue
from sensei_eval.core.modes import MODES, FailureMode, register_mode, unregister_mode
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators import registry
from sensei_eval.evaluators.base import FailureModeJudge, Judge
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.run_folder import load_reports
from sensei_eval.judging.runner import judge_records

from .helpers import ScriptedJudge, about, openai_record

# The field names saved reports carry: they must never change, whatever the table's code looks like.
SAVED_REPORT_FIELDS = {
    'tool_selection_issues', 'tool_parameter_issues', 'source_quality_issues', 'synthesis_issues',
    'completeness_issues', 'hallucination_issues', 'agent_format_issues', 'confidence_issues',
    'decomposition_issues', 'research_depth_issues', 'solution_evaluation_issues', 'ambiguity_issues',
    'reporting_issues', 'citation_issues', 'source_selection_issues', 'instruction_issues',
}  # fmt: skip


def _issue_fields() -> dict[str, Any]:
    return {n: f.annotation for n, f in RecordReport.model_fields.items() if n.endswith('_issues')}


def test_everything_that_lists_modes_derives_from_the_table() -> None:
    table = list(MODES.values())
    assert {m.name: (m.category, m.issue_model, m.field) for m in table} == reports.FAILURE_MODES
    assert list(reports.FAILURE_MODES) == list(MODES)  # the standard order breaks ties
    assert reports.CATEGORIES == tuple(dict.fromkeys(m.category for m in table)) == modes.categories()
    assert _issue_fields() == {m.field: list[m.issue_model] for m in table}
    assert {m.name: m.components for m in table if m.components} == registry.COMPONENTS
    judge_of = {cls.failure_mode: cls for cls in registry.JUDGES.values() if cls.needs_model and cls.failure_mode}
    for category in modes.categories():
        assert registry.GROUPS[category] == tuple(judge_of[m.name].name for m in table if m.category == category)
    assert registry.EXTRA_MODES == {judge_of[m.name].name for m in table if not m.standard} == {'instruction_following'}
    assert [m.name for m in table if m.standard][:3] == ['tool_selection', 'tool_parameters', 'source_quality']
    assert sum(m.standard for m in table) == 15


def test_judges_declare_only_their_mode() -> None:
    for cls in registry.JUDGES.values():
        assert 'category' not in vars(cls), f'{cls.name} declares its category'
        assert cls.category == (MODES[cls.failure_mode].category if cls.failure_mode else None)
        assert cls().category == cls.category
    assert Judge.category is None


def test_saved_report_field_names_are_kept(tmp_path: Path) -> None:
    assert set(_issue_fields()) == SAVED_REPORT_FIELDS
    names = list(RecordReport.model_fields)
    # the issue lists sit after the record and before the scores, as in reports saved before the table
    assert names.index('prompt_version') < names.index('tool_selection_issues') < names.index('overall_score')
    saved = {
        'query_id': 'q', 'run_id': 'r', 'evaluated_at': '2025-01-01T00:00:00Z', 'query': 'x', 'messages': [],
        'tool_parameter_issues': [
            {'tool_name': 't', 'parameter': 'p', 'actual_value': 'a', 'suggested_value': 'b', 'reasoning': 'r'}
        ],
        'instruction_issues': [{'rule': 'r', 'violation': 'v', 'severity': 'minor', 'reasoning': 'x'}],
    }  # fmt: skip
    report = RecordReport.model_validate(saved)
    assert report.issues_of('tool_parameters')[0].model_dump()['parameter'] == 'p'
    assert len(report.issues_of('instruction_following')) == 1
    assert RecordReport.model_validate_json(report.model_dump_json()) == report


# ---------------------------------------------------------------------------------------------------
# A mode added at runtime


class PolitenessIssue(Issue):
    remark: str
    reasoning: str


@dataclass(repr=False)
class Politeness(FailureModeJudge):
    name: ClassVar[str] = 'politeness'
    failure_mode: ClassVar[str | None] = 'politeness'
    issue_model: ClassVar[type[Issue]] = PolitenessIssue
    question: ClassVar[str] = 'Was the agent curt with the user?'
    rubric: ClassVar[str] = 'Give the curt `remark` and your `reasoning`. A short answer is not a problem.'


POLITENESS = FailureMode('politeness', 'manners', PolitenessIssue, 'politeness_issues', ('TONE',))


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


def test_registered_mode_gets_a_judge_a_field_and_a_group(politeness: FailureMode, tmp_path: Path) -> None:
    assert registry.resolve_names(['manners']) == ['politeness']
    assert registry.JUDGES['politeness'] is Politeness
    assert 'politeness' in registry.GROUPS['all'] and 'politeness' in registry.EXTRA_MODES
    assert registry.COMPONENTS['politeness'] == ('TONE',)
    assert Politeness.category == 'manners' and 'manners' in reports.CATEGORIES
    assert RecordReport.model_fields['politeness_issues'].annotation == list[PolitenessIssue]

    judges = registry.make_judges(['manners', 'hallucination'])
    [report] = asyncio.run(
        judge_records([openai_record()], JudgeRunOptions(judges, ScriptedJudge(_curt).model()), run_id='r', run_dir=tmp_path)
    )
    assert report.judges['politeness'].status == 'ok', report.judges['politeness'].error
    [issue] = report.politeness_issues
    assert isinstance(issue, PolitenessIssue) and issue.remark == 'Use `Depends()`.'
    assert report.issues_of('politeness') == [issue]
    assert report.failure_modes == ['politeness'] and report.primary_failure_mode == 'politeness'
    assert report.category_scores == {'output': 1.0, 'manners': 0.5}
    assert report.decisive_step == 5
    assert report.model_dump(mode='json')['politeness_issues'][0]['remark'] == 'Use `Depends()`.'
    [back] = load_reports(tmp_path)
    assert back.issues_of('politeness') == [issue]


def test_unregistering_removes_every_trace() -> None:
    register_mode(POLITENESS, Politeness)
    unregister_mode('politeness')
    assert 'politeness' not in MODES and 'politeness' not in reports.FAILURE_MODES
    assert 'politeness_issues' not in RecordReport.model_fields
    assert 'manners' not in registry.GROUPS and 'manners' not in reports.CATEGORIES
    assert 'politeness' not in registry.JUDGES and 'politeness' not in registry.COMPONENTS
    assert set(_issue_fields()) == SAVED_REPORT_FIELDS


def test_bad_registrations_leave_the_table_as_it_was() -> None:
    before = (dict(MODES), dict(registry.GROUPS), dict(reports.FAILURE_MODES), list(RecordReport.model_fields))
    with pytest.raises(ValueError, match='already exists'):
        register_mode(FailureMode('hallucination', 'output', PolitenessIssue, 'x_issues'), Politeness)
    with pytest.raises(ValueError, match='already holds'):
        register_mode(FailureMode('politeness', 'manners', PolitenessIssue, 'hallucination_issues'), Politeness)
    with pytest.raises(ValueError, match='declares failure_mode'):
        register_mode(FailureMode('rudeness', 'manners', PolitenessIssue, 'rudeness_issues'), Politeness)

    @dataclass(repr=False)
    class Clash(Politeness):
        name: ClassVar[str] = 'hallucination'  # a judge of that name exists

    with pytest.raises(ValueError, match='share a name'):
        register_mode(POLITENESS, Clash)
    with pytest.raises(ValueError, match='not a mode added'):
        unregister_mode('hallucination')
    after = (dict(MODES), dict(registry.GROUPS), dict(reports.FAILURE_MODES), list(RecordReport.model_fields))
    assert after == before
