"""CLI edges: record ids that look like run files or paths, empty datasets, unreachable or misnamed models."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelConnectionError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging import run as judging_run
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.run_folder import decode_query_id, encode_query_id, load_reports, report_filename, report_paths
from sensei_eval.judging.runner import judge_records
from sensei_eval.models import retry
from sensei_eval.models.judge_model import CONNECTION_FAILURES_TO_STOP, JudgeModel, ModelUsageError, resolve_model

from .helpers import ScriptedJudge, no_issues, openai_record

AWKWARD_IDS = [
    'summary',
    'calibration',
    'records',
    '../x',
    '..',
    'a/b',
    'a\\b',
    'CON',
    'con.txt',
    'Lpt1',
    '.hidden',
    'ends.',
    'a.r2',
    'a',
    '100%',
    '%2F',
    'a~b',
    'sp ace',
    'é/ü',
    'x' * 300,
    'x' * 299 + 'y',
]


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(judge_cli.app, list(args))


def _text(output: str) -> str:
    """The output with rich's line wrapping undone."""
    return ' '.join(output.split())


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedJudge:
    scripted = ScriptedJudge(no_issues)
    monkeypatch.setattr(judging_run, 'resolve_model', lambda *a, **k: scripted.model())
    return scripted


# ---------------------------------------------------------------------------------------------------
# Run-folder layout


def test_file_names_are_safe_distinct_and_reversible() -> None:
    names = [report_filename(q, rep) for q in AWKWARD_IDS for rep in (1, 2)]
    assert len(set(names)) == len(names)  # 'a.r2' (repeat 1) and 'a' (repeat 2) included
    assert len({n.lower() for n in names}) == len(names)
    for name in names:
        assert '/' not in name and '\\' not in name and not name.startswith('.') and len(name) <= 200
        assert name.split('.', 1)[0].lower() not in {'con', 'lpt1'}
    for q in AWKWARD_IDS:
        stem = encode_query_id(q)
        assert decode_query_id(stem) == (q if len(q) < 100 else None)
    assert encode_query_id('CON') == '%43ON' and encode_query_id('a/b') == 'a%2Fb' and encode_query_id('ok-1_x.y') == 'ok-1_x.y'


def test_awkward_ids_round_trip_through_the_run_folder(tmp_path: Path) -> None:
    records = [openai_record(q) for q in AWKWARD_IDS]
    reports = asyncio.run(
        judge_records(
            records,
            JudgeRunOptions(make_judges(['tool_selection']), ScriptedJudge(no_issues).model(), repeat=2),
            run_id='r',
            run_dir=tmp_path,
        )
    )
    write_text_atomic(tmp_path / 'summary.json', '{"run_id": "r"}')
    assert {p.name for p in tmp_path.iterdir()} == {'records', 'summary.json'}  # nothing escaped, nothing overwritten
    assert json.loads((tmp_path / 'summary.json').read_text()) == {'run_id': 'r'}
    loaded = load_reports(tmp_path)
    assert sorted((r.query_id, r.repeat) for r in loaded) == sorted((q, rep) for q in AWKWARD_IDS for rep in (1, 2))
    by_key = {(r.query_id, r.repeat): r for r in loaded}
    for report in reports:
        assert by_key[(report.query_id, report.repeat)].model_dump() == report.model_dump()
    assert all(p.parent == tmp_path / 'records' for p in report_paths(tmp_path))


def test_cli_record_named_summary_keeps_its_report(tmp_path: Path, scripted: ScriptedJudge) -> None:
    data = tmp_path / 'd.jsonl'
    data.write_text('\n'.join(openai_record(q).model_dump_json() for q in ('summary', '../x', 'a/b', 'CON', '.hidden')))
    result = _invoke('--dataset', str(data), '--out', str(tmp_path / 'o'), '--run-id', 'r', '--evaluators', 'tool_selection')
    assert result.exit_code == 0, result.output
    run = tmp_path / 'o' / 'r'
    assert json.loads((run / 'summary.json').read_text())['records_judged'] == 5
    assert sorted(r.query_id for r in load_reports(run)) == sorted(['summary', '../x', 'a/b', 'CON', '.hidden'])
    assert not (tmp_path / 'o' / 'x.json').exists() and not list(tmp_path.glob('o/*.json'))


def test_old_layout_run_folders_still_load(tmp_path: Path) -> None:
    """Run folders written before `records/`: reports beside summary.json."""
    [report] = asyncio.run(judge_records([openai_record('old-1')], JudgeRunOptions([]), run_id='old'))
    write_text_atomic(tmp_path / 'old-1.json', report.model_dump_json())
    write_text_atomic(tmp_path / 'summary.json', '{}')
    write_text_atomic(tmp_path / 'calibration.json', '{}')
    assert [r.query_id for r in load_reports(tmp_path)] == ['old-1']
    assert isinstance(load_reports(tmp_path)[0], RecordReport)


# ---------------------------------------------------------------------------------------------------
# Nothing to judge


@pytest.mark.parametrize(
    'content', [b'', b'\n\n  \n', b'\xef\xbb\xbf', b'\xef\xbb\xbf\n'], ids=['empty', 'blank', 'bom', 'bom-nl']
)
def test_empty_dataset_exits_1(tmp_path: Path, scripted: ScriptedJudge, content: bytes) -> None:
    data = tmp_path / 'd.jsonl'
    data.write_bytes(content)
    result = _invoke('--dataset', str(data), '--out', str(tmp_path / 'o'))
    assert result.exit_code == 1, result.output
    assert 'nothing to judge' in _text(result.output) and 'no records' in _text(result.output)
    assert not scripted.calls


def test_bom_then_one_record_is_judged(tmp_path: Path, scripted: ScriptedJudge) -> None:
    data = tmp_path / 'd.jsonl'
    data.write_bytes(b'\xef\xbb\xbf' + openai_record('only').model_dump_json().encode() + b'\n')
    result = _invoke('--dataset', str(data), '--out', str(tmp_path / 'o'), '--run-id', 'r', '--evaluators', 'tool_selection')
    assert result.exit_code == 0, result.output
    assert [r.query_id for r in load_reports(tmp_path / 'o' / 'r')] == ['only']


def test_everything_filtered_out_or_unloadable_exits_1(tmp_path: Path, scripted: ScriptedJudge) -> None:
    data = tmp_path / 'd.jsonl'
    data.write_text(openai_record('a').model_dump_json() + '\n')
    result = _invoke('--dataset', str(data), '--query-id', 'nope')
    assert result.exit_code == 1 and 'nothing to judge' in _text(result.output) and '--query-id' in _text(result.output)
    bad = tmp_path / 'bad.jsonl'
    bad.write_text('{"not": "a record"}\n')
    result = _invoke('--dataset', str(bad))
    assert result.exit_code == 1 and 'nothing to judge' in _text(result.output) and 'could be loaded' in _text(result.output)
    assert not scripted.calls


# ---------------------------------------------------------------------------------------------------
# Models: preflight, usage errors, the "first failure" rule


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def _record_file(tmp_path: Path, n: int = 3) -> Path:
    data = tmp_path / 'd.jsonl'
    data.write_text('\n'.join(openai_record(f'r{i}').model_dump_json() for i in range(n)) + '\n')
    return data


def test_unreachable_base_url_fails_fast_with_one_message(tmp_path: Path) -> None:
    url = f'http://127.0.0.1:{_closed_port()}/v1'
    started = time.monotonic()
    result = _invoke('--dataset', str(_record_file(tmp_path)), '--base-url', url, '--model', 'm', '--out', str(tmp_path / 'o'))
    assert time.monotonic() - started < 10
    assert result.exit_code == 1, result.output
    assert _text(result.output).count(url) == 1, result.output
    assert _text(result.output).count('cannot reach') == 1
    assert not (tmp_path / 'o').exists()  # stopped before judging


def test_model_without_provider_prefix_is_a_usage_error(tmp_path: Path) -> None:
    result = _invoke('--dataset', str(_record_file(tmp_path)), '--model', 'gpt-5.2', '--out', str(tmp_path / 'o'))
    assert result.exit_code == 2, result.output
    assert 'openai:gpt-5.2' in _text(result.output) and _text(result.output).count('error') == 1
    assert not (tmp_path / 'o').exists()
    with pytest.raises(ModelUsageError, match='claude-x'):
        resolve_model('claude-x')


def test_unknown_provider_and_missing_key_are_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = str(_record_file(tmp_path))
    result = _invoke('--dataset', data, '--model', 'nosuch:model')
    assert result.exit_code == 2 and 'nosuch:model' in _text(result.output)
    monkeypatch.delenv('OPENAI_API_KEY', raising=False)
    result = _invoke('--dataset', data, '--model', 'openai:gpt-5.2')
    assert result.exit_code == 2 and 'OPENAI_API_KEY' in _text(result.output)


def test_sdk_retries_are_off() -> None:
    model = resolve_model(base_url=f'http://127.0.0.1:{_closed_port()}/v1')
    assert model.model.client.max_retries == 0  # type: ignore[union-attr]


def _refusing_model(calls: list[int]) -> JudgeModel:
    def refuse(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        raise ModelConnectionError('m', 'Connection error.')

    return JudgeModel(FunctionModel(refuse), 'function:refuse')


def test_repeated_connection_failures_stop_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, 'BASE_BACKOFF_S', 0.0)
    calls: list[int] = []
    model = _refusing_model(calls)
    records = [openai_record(f'r{i}') for i in range(5)]
    reports = asyncio.run(judge_records(records, JudgeRunOptions(make_judges(['mvp']), model, concurrency=1), run_id='r'))
    assert len(calls) == CONNECTION_FAILURES_TO_STOP  # no new call once the rule stopped the run
    reasons = {res.error for r in reports for res in r.judges.values()}
    # one reason, the rule's, named by the fused judge the three mvp judges are answered by
    assert len(reasons) == 1 and model.connection.stopped and next(iter(reasons)).endswith(model.connection.stopped)
    assert sum(len(r.judges) for r in reports) == 15  # every judge still reported


def test_cli_prints_the_shared_reason_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, 'BASE_BACKOFF_S', 0.0)
    calls: list[int] = []
    monkeypatch.setattr(judging_run, 'resolve_model', lambda *a, **k: _refusing_model(calls))
    result = _invoke('--dataset', str(_record_file(tmp_path, 4)), '--out', str(tmp_path / 'o'), '--run-id', 'r', '--no-cache')
    assert result.exit_code == 1
    assert _text(result.output).count('stopped calling the judge model') == 1, result.output
    assert '20 judge(s) not run' in _text(result.stderr)  # 4 records x the 5 core judges
    assert len(load_reports(tmp_path / 'o' / 'r')) == 4  # reports still written


def test_a_lone_surrogate_goes_through_the_cli_with_a_warning(tmp_path: Path) -> None:
    """A record with "\\ud800" in its text is judged and written, the replacement recorded; the run ends
    with its summary and the records after it judged too."""
    bad = openai_record('bad').model_dump(mode='json')
    bad['messages'][1]['content'] = 'How do FastAPI dependencies work? \ud800'
    lines = [json.dumps(bad), openai_record('after').model_dump_json()]  # json.dumps escapes the surrogate
    dataset = tmp_path / 'd.jsonl'
    dataset.write_text('\n'.join(lines) + '\n')
    result = _invoke('--dataset', str(dataset), '--judges', 'checks', '--out', str(tmp_path), '--run-id', 'r')
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / 'r' / 'summary.json').read_text())
    assert summary['records_judged'] == 2
    report = json.loads((tmp_path / 'r' / 'records' / 'bad.json').read_text())
    assert any('U+FFFD' in w and 'messages[1].content' in w for w in report['input_warnings'])
    assert (tmp_path / 'r' / 'records' / 'after.json').exists()
