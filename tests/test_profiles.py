"""Agent profiles: an unknown agent gets only agent-agnostic checks; another agent's conventions run only
when its profile is chosen (per run or per record); users declare their own profile in a file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.registry import GROUPS, make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import AGNOSTIC_CHECKS, BUILTIN_PROFILES, ProfileError, load_profile, resolve_profile
from sensei_eval.judging.record import count_judge_calls
from sensei_eval.judging.runner import judge_records

DOCS_CONVENTIONS = {'version_check', 'docs_tool_check', 'greeting_check', 'citation_check'}


def _support_record(query_id: str = 's1', **metadata: Any) -> QueryRecord:
    """A customer-service run: no <source> tags, a friendly answer, a library word in plain English."""
    return QueryRecord.model_validate(
        {
            'query_id': query_id,
            'query': 'Hi! Can I add celery and express delivery to my order 2.0?',
            'messages': [
                {'role': 'system', 'content': 'You are a support agent. Always confirm before changing an order.'},
                {'role': 'user', 'content': 'Hi! Can I add celery and express delivery to my order 2.0?'},
                {'role': 'assistant', 'content': None, 'tool_calls': [
                    {'id': 'c1', 'type': 'function', 'function': {'name': 'get_order', 'arguments': '{"order_id": "2"}'}}]},
                {'role': 'tool', 'tool_call_id': 'c1', 'content': '{"order_id": "2", "items": ["milk"]}'},
                {'role': 'assistant', 'content': "Hello! I'd be happy to help. Your order has milk; shall I add celery?"},
            ],
            'metadata': metadata,
        }
    )  # fmt: skip


def _run(records: list[QueryRecord], **options: Any) -> list[RecordReport]:
    return asyncio.run(judge_records(records, JudgeRunOptions(make_judges(['checks']), **options), run_id='p'))


def test_default_profile_runs_only_agent_agnostic_checks_and_lists_the_rest() -> None:
    [report] = _run([_support_record()])
    assert report.profile == 'default'
    ran = set(report.judges)
    assert ran <= set(AGNOSTIC_CHECKS)
    assert set(report.skipped) >= DOCS_CONVENTIONS
    assert "not in profile 'default'" in report.skipped['citation_check']
    assert not any(r.issues for r in report.judges.values())


def test_docs_agent_profile_per_run_or_per_record() -> None:
    [per_run] = _run([_support_record()], profile=BUILTIN_PROFILES['docs-agent'])
    assert per_run.profile == 'docs-agent' and set(per_run.judges) >= DOCS_CONVENTIONS
    assert per_run.judges['greeting_check'].issues and per_run.judges['citation_check'].issues
    plain, chosen = _run([_support_record('a'), _support_record('b', profile='docs-agent')])
    assert plain.profile == 'default' and 'greeting_check' in plain.skipped
    assert chosen.profile == 'docs-agent' and 'greeting_check' in chosen.judges


def test_unknown_profile_on_a_record_is_an_error_not_a_silent_default() -> None:
    [report] = _run([_support_record(profile='no-such-agent')])
    assert report.profile == 'default'
    assert any("unknown profile 'no-such-agent'" in e for e in report.errors)


def test_docs_tool_check_ignores_everyday_words() -> None:
    # "celery" on a shopping list and "express delivery" are not library questions
    [report] = _run([_support_record()], profile=BUILTIN_PROFILES['docs-agent'])
    assert not report.judges['docs_tool_check'].issues
    record = _support_record()
    data = record.model_dump()
    data['query'] = 'How do I retry a failed Celery task?'
    [tech] = _run([QueryRecord.model_validate(data)], profile=BUILTIN_PROFILES['docs-agent'])
    assert tech.judges['docs_tool_check'].issues


def test_user_profile_file_with_parameters(tmp_path: Path) -> None:
    path = tmp_path / 'support.yaml'
    path.write_text('name: support\nextends: default\nchecks: [greeting_check]\nparams:\n  reference_check: {strict: true}\n')
    profile = load_profile(path)
    assert profile.name == 'support' and 'greeting_check' in profile.checks and 'reference_check' in profile.checks
    assert resolve_profile(str(path)) == profile
    record = _support_record()
    data = record.model_dump()
    data['expected_tool_calls'] = [{'tool_name': 'get_order', 'args': {'order_id': '2'}}]
    [report] = _run([QueryRecord.model_validate(data)], profile=profile)
    assert report.judges['greeting_check'].issues
    assert report.judges['reference_check'].details['strict'] is True
    assert 'citation_check' in report.skipped


@pytest.mark.parametrize(
    ('text', 'where'),
    [
        ('name: x\nchecks: [no_such_check]\n', 'checks[0]'),
        ('name: x\nchecks: [greeting_check]\nparams:\n  citation_check: {}\n', 'params.citation_check'),
        ('name: x\nchecks: [reference_check]\nparams:\n  reference_check: {stritc: true}\n', 'params.reference_check.stritc'),
        ('checks: []\n', '`name`'),
        ('name: x\nextends: nobody\n', '`extends`'),
        ('name: [unclosed\n', 'not valid'),
    ],
)
def test_bad_profile_files_name_the_file_and_field(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / 'bad.yaml'
    path.write_text(text)
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert str(path) in str(e.value) and where in str(e.value)


def test_unknown_profile_name_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(judge_cli.app, ['--profile', 'nope', '--evaluators', 'checks', '--out', str(tmp_path)])
    assert result.exit_code == 2 and "unknown profile 'nope'" in result.output


def test_progress_counts_what_the_profile_runs() -> None:
    judges = make_judges(['checks'])
    records = [_support_record()]
    assert count_judge_calls(records, judges) == 3  # reference_check does not apply: no expected calls
    assert count_judge_calls(records, judges, BUILTIN_PROFILES['docs-agent']) == len(GROUPS['checks']) - 1
