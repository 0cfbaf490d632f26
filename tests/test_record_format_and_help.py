"""A forgiving record format (ratings on any stated scale, thumbs, tool results paired
by order), and console and help a newcomer reads (did-you-mean, usage errors, 80 columns, `view` of a
folder of runs)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sensei_eval.cli import judge as judge_cli
from sensei_eval.cli import judge_console
from sensei_eval.cli.app import COMMANDS
from sensei_eval.cli.app import app as root
from sensei_eval.cli.view import not_a_run
from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord, Rating
from sensei_eval.evaluators.registry import GROUPS, UnknownJudgeError, make_judges
from sensei_eval.judging import run as judging_run
from sensei_eval.models.judge_model import SMOKE_MAX_STRING, ModelUsageError, check_base_url, resolve_model, smoke_schema

SAMPLE = Path(__file__).resolve().parents[1] / 'datasets' / 'sample.jsonl'


def _run80(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(root, args, env={'COLUMNS': '80', **(env or {})}, terminal_width=80)
    return result.exit_code, result.output


def _messages() -> list[dict[str, Any]]:
    return [{'role': 'user', 'content': 'q?'}, {'role': 'assistant', 'content': 'a.'}]


def _line(tmp_path: Path, **fields: Any) -> Path:
    path = tmp_path / 'd.jsonl'
    path.write_text(json.dumps({'query_id': 'q1', 'messages': _messages(), **fields}) + '\n')
    return path


# ---------------------------------------------------------------------------------------------------
# 3. Ratings as users have them


@pytest.mark.parametrize(
    ('rating', 'value'),
    [
        ({'correctness': 4, 'relevance': 5, 'usefulness': 3}, 0.75),
        ({'correctness': 4}, 0.75),
        ({'score': 7, 'max': 10}, 0.7),
        ({'correctness': 8, 'usefulness': 6, 'max': 10}, 0.7),
        ({'score': 4, 'min': 1, 'max': 7}, 0.5),
        ({'score': 0.25, 'max': 1}, 0.25),
        ({'thumbs_up': True}, 1.0),
        ({'thumbs_up': False, 'reasoning': 'wrong tool'}, 0.0),
    ],
)
def test_a_rating_on_any_stated_scale_loads_onto_one_scale(tmp_path: Path, rating: dict[str, Any], value: float) -> None:
    result = load_dataset(_line(tmp_path, rating=rating))
    assert not result.errors, result.errors
    [record] = result.records
    assert record.rating is not None
    assert record.rating.value == pytest.approx(value)
    assert record.rating.mean == pytest.approx(1 + 4 * value)


def test_rating_mean_and_lowest_keep_the_1_to_5_meaning() -> None:
    rating = Rating(correctness=4, relevance=5, usefulness=3)
    assert rating.mean == pytest.approx(4.0) and rating.lowest == pytest.approx(3.0)
    assert Rating(thumbs_up=False).lowest == 1.0 and Rating(score=10, max=10).lowest == 5.0


@pytest.mark.parametrize(
    ('rating', 'field', 'words'),
    [
        ({'correctness': 9}, 'rating.correctness', 'outside the scale 1-5 (the default scale is 1-5'),
        ({'score': 11, 'max': 10}, 'rating.score', 'outside the scale 0-10'),
        ({'score': 3, 'min': 5, 'max': 5}, 'rating.max', 'the scale 5-5 is empty'),
        ({}, 'rating', 'no rating value'),
        ({'reasoning': 'meh'}, 'rating', 'no rating value'),
        (7, 'rating', 'a bare number (7) has no scale'),
        (True, 'rating', '{"thumbs_up": true}'),
        ({'correctness': True}, 'rating.correctness', 'thumbs go in "thumbs_up"'),
        ({'stars': 4}, 'rating.stars', 'unknown field: the fields are agent_model'),
        ({'correctness': 'five'}, 'rating.correctness', 'expected a number, got "five"'),
    ],
)
def test_a_rating_that_cannot_be_read_is_a_located_error(tmp_path: Path, rating: Any, field: str, words: str) -> None:
    result = load_dataset(_line(tmp_path, rating=rating))
    assert not result.records
    [error] = result.errors
    assert (error.line, error.field) == (1, field), error
    assert words in error.message, error
    assert str(error).startswith(f'{tmp_path / "d.jsonl"}:1 ')


# ---------------------------------------------------------------------------------------------------
# 3. Tool results without ids pair by order


def _call(name: str, call_id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {'type': 'function', 'function': {'name': name, 'arguments': '{}'}}
    if call_id is not None:
        call['id'] = call_id
    return call


def test_tool_results_without_ids_pair_by_order() -> None:
    record = QueryRecord(
        query_id='p',
        messages=[
            {'role': 'user', 'content': 'q'},
            {'role': 'assistant', 'content': None, 'tool_calls': [_call('search'), _call('fetch')]},
            {'role': 'tool', 'content': 'search result'},
            {'role': 'tool', 'content': 'fetch result'},
            {'role': 'assistant', 'content': None, 'tool_calls': [_call('search')]},
            {'role': 'tool', 'content': 'second search'},
            {'role': 'assistant', 'content': 'done'},
        ],
    )
    assert [(c.tool_name, c.result) for c in record.tool_calls()] == [
        ('search', 'search result'),
        ('fetch', 'fetch result'),
        ('search', 'second search'),
    ]


def test_a_result_without_id_names_its_tool_to_pair_out_of_order() -> None:
    record = QueryRecord(
        query_id='p',
        messages=[
            {'role': 'user', 'content': 'q'},
            {'role': 'assistant', 'content': None, 'tool_calls': [_call('search', 'a'), _call('fetch', 'b')]},
            {'role': 'tool', 'name': 'fetch', 'content': 'fetch result'},
            {'role': 'tool', 'content': 'search result'},
            {'role': 'assistant', 'content': 'done'},
        ],
    )
    assert [(c.tool_name, c.result) for c in record.tool_calls()] == [('search', 'search result'), ('fetch', 'fetch result')]


def test_a_result_without_id_and_no_call_waiting_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / 'd.jsonl'
    messages = [{'role': 'user', 'content': 'q'}, {'role': 'tool', 'content': 'x'}, {'role': 'assistant', 'content': 'a'}]
    path.write_text(json.dumps({'query_id': 'q1', 'messages': messages}) + '\n')
    [error] = load_dataset(path).errors
    assert error.field == 'messages[1].tool_call_id' and 'no earlier tool call is waiting' in error.message


# ---------------------------------------------------------------------------------------------------
# 4. Console and help


def test_a_misspelt_judge_gets_a_did_you_mean() -> None:
    with pytest.raises(UnknownJudgeError, match=r"'halucination'; did you mean 'hallucination'\?"):
        make_judges(['halucination'])
    with pytest.raises(UnknownJudgeError, match='groups: core, mvp, '):
        make_judges(['zzzzzz'])
    code, output = _run80(['judge', '--judges', 'halucination', '--dataset', str(SAMPLE)])
    assert code == 2 and "did you mean 'hallucination'?" in ' '.join(output.split()), output
    assert all(len(line) <= 80 for line in output.splitlines()), output
    code, output = _run80(['judge', '--judges', 'mvp', '--fuse', 'mvpp', '--dataset', str(SAMPLE)])
    assert code == 2 and "did you mean 'mvp'?" in ' '.join(output.split()), output


@pytest.mark.parametrize('url', ['127.0.0.1:9', 'localhost:8080/v1', 'ftp://host/v1', 'http://', 'http://[::1'])
def test_a_base_url_without_scheme_or_host_is_a_usage_error(url: str, tmp_path: Path) -> None:
    with pytest.raises(ModelUsageError, match='--base-url'):
        check_base_url(url)
    with pytest.raises(ModelUsageError):
        resolve_model('m', base_url=url)
    code, output = _run80(['judge', '--base-url', url, '--model', 'm', '--dataset', str(SAMPLE), '--out', str(tmp_path)])
    assert code == 2, output
    assert '--base-url' in output and 'cannot reach' not in output


def test_a_scheme_less_base_url_is_shown_with_its_fix() -> None:
    with pytest.raises(ModelUsageError, match=re.escape('http://127.0.0.1:9')):
        check_base_url('127.0.0.1:9')
    check_base_url('http://127.0.0.1:9/v1')  # no error
    check_base_url('https://example.com/v1?api-version=1')


def test_a_missing_key_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('OPENAI_API_KEY', raising=False)
    monkeypatch.delenv('SENSEI_EVAL_MODEL', raising=False)
    with pytest.raises(ModelUsageError) as info:
        resolve_model('openai:gpt-5.2')
    message = str(info.value)
    assert 'OPENAI_API_KEY' in message and 'environment variable' in message
    assert 'OpenAIProvider' not in message and 'api_key=' not in message


def _all_help_pages() -> list[list[str]]:
    pages: list[list[str]] = [['--help']]
    for name in COMMANDS:
        pages.append([name, '--help'])
    pages += [['cache', sub, '--help'] for sub in ('stats', 'clear', 'prune')]
    return pages


@pytest.mark.parametrize('args', _all_help_pages(), ids=lambda a: ' '.join(a))
def test_every_help_page_fits_80_columns_with_readable_metavars_and_whole_words(args: list[str]) -> None:
    code, output = _run80(args)
    assert code == 0, output
    long = [line for line in output.splitlines() if len(line) > 80]
    assert not long, long
    assert not re.search(r'<[a-z]+\[', output), output  # no `<list[Path]>`
    assert not re.search(r'\[[a-z]+\[[A-Za-z]+\]\]', output), output  # no `[list[str]]`
    # no word split at a hyphen across lines: a line ending in `-` followed by a word is a split
    lines = output.splitlines()
    split = [(a, b) for a, b in itertools.pairwise(lines) if re.search(r'\w-$', a) and b.strip()[:1].isalpha()]
    assert not split, split


def test_the_judge_help_shows_plain_metavars() -> None:
    code, output = _run80(['judge', '--help'])
    assert code == 0
    assert '--dataset FILE' in output and '--out DIR' in output


def test_the_smoke_notice_is_one_line_naming_the_flag_and_the_variable() -> None:
    from sensei_eval.models.judge_model import EMBEDDED_NOTICE

    line = f'smoke: {EMBEDDED_NOTICE}'
    assert len(line) <= 80 and '--model' in line and 'SENSEI_EVAL_MODEL' in line and 'not verdicts' in line


def test_smoke_answers_are_bounded_by_the_grammar() -> None:
    schema = {
        'type': 'object',
        'properties': {
            'reasoning': {'type': 'string', 'maxLength': 200},
            'kind': {'type': 'string', 'enum': ['a', 'b']},
            'issues': {'type': 'array', 'maxItems': 3, 'items': {'type': 'object', 'properties': {'d': {'type': 'string'}}}},
        },
    }
    small = smoke_schema(schema)
    assert small['properties']['reasoning']['maxLength'] == SMOKE_MAX_STRING
    assert 'maxLength' not in small['properties']['kind']
    assert small['properties']['issues']['maxItems'] == 0
    assert small['properties']['issues']['items']['properties']['d']['maxLength'] == SMOKE_MAX_STRING
    assert schema['properties']['reasoning']['maxLength'] == 200  # the judge's own schema is untouched


def test_ctrl_c_lines_fit_80_columns() -> None:
    import inspect

    source = inspect.getsource(judge_cli)
    for message in re.findall(r"f?'(?:\\n)?interrupted:[^']*'", source):
        for piece in message.split('\\n'):
            assert len(piece) <= 80, piece


# ---------------------------------------------------------------------------------------------------
# 5. `view` of a folder that holds runs


def _fake_run(path: Path) -> None:
    (path / 'records').mkdir(parents=True)
    (path / 'summary.json').write_text('{}')


def test_view_refuses_a_folder_of_runs_naming_them(tmp_path: Path) -> None:
    reports = tmp_path / 'reports'
    for name in ('run-a', 'run-b'):
        _fake_run(reports / name)
    (reports / 'not-a-run').mkdir()
    problem = not_a_run(reports)
    assert problem is not None and 'holds 2 run(s)' in problem
    assert f'sensei-eval view {reports / "run-a"}' in problem and 'not-a-run' not in problem
    code, output = _run80(['view', str(reports)])
    assert code == 2, output
    assert 'run-a' in output and 'run-b' in output and 'is not a run' in output
    assert not (reports / 'view.html').exists()


def test_view_refuses_an_empty_folder(tmp_path: Path) -> None:
    code, output = _run80(['view', str(tmp_path)])
    assert code == 2 and 'holds no judge run' in output, output
    assert not_a_run(tmp_path / 'missing') is None  # a missing folder is write_view's own error


def test_view_takes_a_run_folder(tmp_path: Path) -> None:
    _fake_run(tmp_path / 'r')
    assert not_a_run(tmp_path / 'r') is None


def test_the_sampler_reads_a_thumbs_down_or_a_low_score_as_a_complaint() -> None:
    from sensei_eval.production.sampler import Sampler, SamplerConfig

    sampler = Sampler(SamplerConfig(rate=0.0, negative_rating=2))

    def decide(rating: dict[str, Any]) -> Any:
        return sampler.decide(QueryRecord(query_id='s', messages=_messages(), rating=rating))

    down = decide({'thumbs_up': False})
    assert (down.sampled, down.reason) == (True, 'negative') and 'rated 1' in down.detail
    assert decide({'score': 1, 'max': 10}).sampled  # 0.1 of the scale: 1.4 on the 1-5 scale
    assert not decide({'thumbs_up': True}).sampled
    assert not decide({'correctness': 4}).sampled


# ---------------------------------------------------------------------------------------------------
# 1. The embedded model's run: one call per record, one smoke line


def test_judge_with_the_embedded_model_makes_one_call_per_record_and_says_smoke(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .helpers import ScriptedJudge, about

    def fused(prompt: str, n: int) -> dict[str, Any]:
        verdict = {'reasoning': f'Nothing wrong at [2] ({about(prompt)}).', 'issues': []}
        return {name: verdict for name in GROUPS['core']}

    scripted = ScriptedJudge(fused, split_fused=False)

    def embedded_like(*args: Any, **kwargs: Any) -> Any:
        model = scripted.model()
        model.embedded = True  # what the CLI looks at; no server behind it (start_server does nothing)
        model.task_first = True
        return model

    monkeypatch.setattr(judging_run, 'resolve_model', embedded_like)
    monkeypatch.setattr(judge_console.out, 'width', 80)
    monkeypatch.setattr(judge_console.err, 'width', 80)
    ids = ['docs-001', 'docs-002', 'docs-003']
    args = ['judge', '--dataset', str(SAMPLE), '--out', str(tmp_path), '--run-id', 's', '--no-cache']
    code, output = _run80([*args, *(a for q in ids for a in ('--query-id', q))])
    assert code == 0, output
    assert len(scripted.calls) == len(ids)  # the core judges in one call per record
    assert output.count('smoke: embedded model answers are not verdicts; use --model or SENSEI_EVAL_MODEL') == 1
    long = [line for line in output.splitlines() if len(line) > 80]
    assert not long, long
    summary = json.loads((tmp_path / 's' / 'summary.json').read_text())
    assert summary['records_judged'] == 3 and summary['model_requests'] == 3
    assert set(GROUPS['core']) <= set(summary['per_judge'])
    # the task comes before the transcript: consecutive records share it as a prompt prefix
    from .helpers import user_prompt

    prompts = [user_prompt(c) for c in scripted.calls]
    assert prompts[0].startswith('## Your task') and prompts[0][:2000] == prompts[1][:2000]


def test_start_server_starts_the_embedded_server_in_the_background_and_says_so(tmp_path: Path) -> None:
    from sensei_eval.models.embedded import SharedServer
    from sensei_eval.models.judge_model import embedded_model

    from .test_embedded_shared import ask, fake_command, requests_served

    log = tmp_path / 'served.log'
    server = SharedServer(tmp_path / 'shared', threads=1, command=fake_command(log))
    model = embedded_model(server)
    lines: list[str] = []
    try:
        thread = model.start_server(lines.append)
        assert thread is not None
        thread.join(60)
        assert server.info is not None and server.starts == 1  # started before any request
        assert lines[0] == 'starting the embedded model (1 thread(s)) ...'
        assert re.fullmatch(r'embedded model ready \(\d+\.\d s\)', lines[1]), lines
        assert model.start_server(lines.append) is None  # once held, nothing more to start
        assert ask(model.model)  # the first request uses the server started, not another
        assert server.starts == 1 and len(requests_served(log)) == 1
        # a second client joining the running server says nothing
        joining = embedded_model(SharedServer(tmp_path / 'shared', threads=1, command=fake_command(log)))
        quiet: list[str] = []
        other = joining.start_server(quiet.append)
        assert other is not None
        other.join(60)
        assert quiet == [] and joining._server.info == server.info
        joining.close()
    finally:
        model.close()
    # a judge model without an embedded server has nothing to start
    from .helpers import ScriptedJudge

    assert ScriptedJudge(lambda p, n: {}).model().start_server(lines.append) is None


def test_a_raw_newline_inside_a_json_string_is_read_not_asked_again() -> None:
    from sensei_eval.evaluators.base import extract_json

    # what SmolLM2 wrote through llama.cpp's grammar for one sample record, three times in a row
    text = '{ "tool_selection": { "reasoning" : "not a tool-selection problem, but a complete\n[","issues" : [] }}'
    reasoning = 'not a tool-selection problem, but a complete\n['
    assert extract_json(text) == {'tool_selection': {'reasoning': reasoning, 'issues': []}}


def test_the_checks_judge_the_whole_run_when_the_model_sees_a_cut_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .helpers import ScriptedJudge, about

    scripted = ScriptedJudge(lambda p, n: {'reasoning': f'Nothing wrong at [2] ({about(p)}).', 'issues': []})
    monkeypatch.setattr(judging_run, 'resolve_model', lambda *a, **k: scripted.model(budget=200))

    def per_check(run_id: str, *extra: str) -> dict[str, Any]:
        args = ['judge', '--dataset', str(SAMPLE), '--out', str(tmp_path), '--run-id', run_id, '--no-cache', *extra]
        code, output = _run80(args)
        assert code == 0, output
        summary = json.loads((tmp_path / run_id / 'summary.json').read_text())
        return {k: v['pass_rate'] for k, v in summary['per_judge'].items() if k.endswith('_check')}

    alone = per_check('checks', '--judges', 'checks')
    with_model = per_check('cut', '--judges', 'checks,completeness', '--max-transcript-tokens', '200')
    assert json.loads((tmp_path / 'cut' / 'summary.json').read_text())['truncated_records']  # the model saw cuts
    assert with_model == alone
