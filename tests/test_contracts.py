"""Contracts between the tables and what reads them: every failure mode has a judge, an issue model and a
report key; every investigation rubric category has a column in the service store."""

from __future__ import annotations

from typing import Any

import pytest

from sensei_eval.core.issues import Issue
from sensei_eval.core.modes import MODES
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.base import FailureModeJudge
from sensei_eval.evaluators.investigation_answers import CATEGORIES
from sensei_eval.evaluators.registry import JUDGES

RECORD = {'query_id': 'q', 'run_id': 'r', 'evaluated_at': '2025-01-01T00:00:00Z', 'query': 'x', 'messages': []}


@pytest.mark.parametrize('mode', list(MODES))
def test_every_mode_has_a_judge_an_issue_model_and_a_report_key(mode: str) -> None:
    judges = [cls for cls in JUDGES.values() if cls.failure_mode == mode]
    assert any(issubclass(cls, FailureModeJudge) for cls in judges), f'no LLM judge of {mode!r} in JUDGES'
    issue_model = MODES[mode].issue_model
    assert issubclass(issue_model, Issue)
    assert all(cls.issue_model is issue_model for cls in judges if issubclass(cls, FailureModeJudge))

    # an issue of the mode's model, with every field it requires, survives a report's trip through JSON
    schema = issue_model.model_json_schema()
    issue = issue_model.model_validate({name: _example(schema, name) for name in schema.get('required', [])})
    report = RecordReport.model_validate({**RECORD, 'issues': {mode: [issue.model_dump(mode='json')]}})
    back = RecordReport.model_validate_json(report.model_dump_json())
    assert back == report and back.issues_of(mode) == [issue] and type(back.issues_of(mode)[0]) is issue_model


def _example(schema: dict[str, Any], name: str) -> Any:
    """A valid value for a required field of an issue model, from its JSON schema (an enum's first choice)."""
    prop = schema['properties'][name]
    if '$ref' in prop:
        prop = schema['$defs'][prop['$ref'].rsplit('/', 1)[1]]
    if 'enum' in prop:
        return prop['enum'][0]
    return {'string': 'x', 'integer': 1, 'number': 1.0, 'boolean': False, 'array': []}[prop.get('type', 'string')]


def test_every_rubric_category_is_one_the_store_migration_knows() -> None:
    """Migration 0009 moved the old `breakdown_<category>` columns into each scoring's `score_detail`: it names
    the categories of its time, which are today's."""
    import importlib

    migration = importlib.import_module('sensei_eval.service.migrations.versions.0009_one_job_table')
    assert len(CATEGORIES) == 4
    assert tuple(key for key, _ in CATEGORIES) == migration._CATEGORIES
