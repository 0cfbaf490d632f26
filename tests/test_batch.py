"""Judging through the Batch API, end to end against a local server that implements its file and batch
endpoints (tests/batch_server.py): submit, interrupt, resume with the same state, complete."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider
from typer.testing import CliRunner

from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.batch import (
    BATCH_CONCURRENCY,
    BATCHES_FILE,
    BatchError,
    BatchModel,
    BatchProgress,
    BatchState,
    batch_judge_model,
)
from sensei_eval.judging.options import NO_FUSING, JudgeRunOptions
from sensei_eval.judging.run_folder import RunFolder
from sensei_eval.judging.runner import judge_records
from sensei_eval.models.judge_model import JudgeModel, resolve_model

from .batch_server import BatchServer, last_user_text
from .helpers import about, openai_record

# two judges, each in its own call (`fuse=NO_FUSING`): the batches below count one request per judge and record
JUDGES = ['hallucination', 'completeness']
FAST = {'settle_s': 0.2, 'poll_s': 0.05, 'max_poll_s': 0.2}


@pytest.fixture(autouse=True)
def _local_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests talk to the loopback batch server only; the rest of the suite stays offline."""
    monkeypatch.setattr(models, 'ALLOW_MODEL_REQUESTS', True)


def verdicts(url: str, body: dict[str, Any]) -> str | tuple[int, dict[str, Any]]:
    """The scripted judge: a verdict whose reasoning differs per transcript; record `r2` fails."""
    prompt = last_user_text(body)
    if 'BROKEN' in prompt and 'judge `completeness`' in prompt:
        issue = {'steps': [2], 'missed_aspects': ['the docs'], 'reasoning': f'the tool result was ignored ({about(prompt)})'}
        return json.dumps({'reasoning': f'Step [2] went wrong ({about(prompt)}).', 'issues': [issue]})
    return json.dumps({'reasoning': f'Nothing wrong at [2] ({about(prompt)}).', 'issues': []})


def records() -> list[Any]:
    return [
        openai_record('r1'),
        openai_record('r2', answer='BROKEN answer that ignores the docs.'),
        openai_record('r3', tool_result='Depends() is resolved per request.'),
    ]


def judge_model(server: BatchServer) -> JudgeModel:
    return resolve_model('judge', base_url=server.base_url, api_key='sk-test')


async def judge_batched(
    server: BatchServer, folder: RunFolder, progress: list[BatchProgress] | None = None, **kw: Any
) -> list[Any]:
    batched = batch_judge_model(
        judge_model(server), folder.path, on_progress=(progress if progress is not None else []).append, **(FAST | kw)
    )
    assert isinstance(batched.model, BatchModel)
    try:
        return await judge_records(
            records(), JudgeRunOptions(make_judges(JUDGES), batched, fuse=NO_FUSING), run_id=folder.run_id, run_dir=folder
        )
    finally:
        await batched.model.aclose()


def test_submit_interrupt_resume_complete(tmp_path: Path) -> None:
    """The run is cancelled after its batch was submitted; the resumed run polls that batch, submits
    nothing new, and every record gets its verdicts."""
    folder = RunFolder.create(tmp_path, 'run-1')
    with BatchServer(verdicts, polls_to_complete=3, hold=True) as server:

        async def interrupted() -> None:
            task = asyncio.create_task(judge_batched(server, folder))
            while not (folder.path / BATCHES_FILE).is_file():
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)  # a few polls of the held batch
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(interrupted())
        assert len(server.created) == 1
        state = BatchState.model_validate_json((folder.path / BATCHES_FILE).read_text())
        batch_id = server.created[0]
        assert list(state.batches) == [batch_id]
        assert state.batches[batch_id].status in ('validating', 'in_progress')
        lines = server.input_lines(batch_id)
        assert len(lines) == 6  # 3 records × 2 judges, one batch
        assert sorted(state.requests) == sorted(line['custom_id'] for line in lines)
        assert all(line['url'] == '/v1/chat/completions' and line['body']['model'] == 'judge' for line in lines)
        assert not list(folder.path.glob('records/*.json'))  # nothing judged yet

        server.hold = False
        progress: list[BatchProgress] = []
        reports = asyncio.run(judge_batched(server, folder, progress))

    assert server.created == [batch_id]  # resumed: no second batch
    assert [r.query_id for r in reports] == ['r1', 'r2', 'r3']
    for report in reports:
        assert set(report.judges) >= set(JUDGES)
        for name in JUDGES:
            assert report.judges[name].status == 'ok', report.judges[name].error
    assert reports[0].judges['completeness'].passed is True
    assert reports[1].judges['completeness'].passed is False
    assert 'ignored' in json.dumps(reports[1].judges['completeness'].issues)
    assert reports[0].judges['hallucination'].input_tokens > 0  # usage parsed from the batch's completions
    assert len(list(folder.path.glob('records/*.json'))) == 3
    seen = {s for p in progress for s in p.states}
    assert {'finalizing', 'completed'} <= seen
    assert progress[-1].states == {'completed': 1} and progress[-1].completed == 6
    final = BatchState.model_validate_json((folder.path / BATCHES_FILE).read_text())
    assert final.batches[batch_id].status == 'completed' and final.batches[batch_id].output_file_id


def test_error_line_is_an_error_result(tmp_path: Path) -> None:
    """A line the batch answered with an error becomes that judge's error, never a pass; the others judge."""

    def answer(url: str, body: dict[str, Any]) -> str | tuple[int, dict[str, Any]]:
        prompt = last_user_text(body)
        if 'BROKEN' in prompt and 'judge `completeness`' in prompt:
            return 400, {
                'error': {'message': 'prompt rejected by the content policy', 'type': 'invalid_request_error', 'code': 'bad'}
            }
        return verdicts(url, body)

    folder = RunFolder.create(tmp_path, 'run-err')
    with BatchServer(answer, polls_to_complete=1) as server:
        reports = asyncio.run(judge_batched(server, folder))
    assert len(server.created) == 1
    bad = reports[1].judges['completeness']
    assert bad.status == 'error' and bad.passed is None and bad.score is None
    assert 'content policy' in (bad.error or '') and '400' in (bad.error or '')
    assert reports[1].judges['hallucination'].status == 'ok'
    assert all(r.judges[n].status == 'ok' for r in (reports[0], reports[2]) for n in JUDGES)


def test_full_batch_is_submitted_at_once(tmp_path: Path) -> None:
    """`max_lines` splits the requests into full batches; custom_ids stay unique across a repeat."""
    folder = RunFolder.create(tmp_path, 'run-split')
    with BatchServer(verdicts, polls_to_complete=1) as server:
        reports = asyncio.run(judge_batched(server, folder, max_lines=4, settle_s=5.0))
        sizes = sorted(len(server.input_lines(b)) for b in server.created)
    assert sizes == [2, 4]  # the full one went at once; the rest after the settle time
    assert all(r.judges[n].status == 'ok' for r in reports for n in JUDGES)


def test_same_request_twice_gets_two_custom_ids(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, 'run-rep')
    with BatchServer(verdicts, polls_to_complete=1) as server:
        batched = batch_judge_model(judge_model(server), folder.path, **FAST)

        async def run() -> list[Any]:
            try:
                return await judge_records(
                    [openai_record('r1')], JudgeRunOptions(make_judges(['hallucination']), batched, repeat=2), run_id='run-rep'
                )
            finally:
                assert isinstance(batched.model, BatchModel)
                await batched.model.aclose()

        reports = asyncio.run(run())
        lines = server.input_lines(server.created[0])
    assert lines[0]['body'] == lines[1]['body']
    assert sorted(line['custom_id'][-2:] for line in lines) == ['-1', '-2']
    assert [r.judges['hallucination'].status for r in reports] == ['ok', 'ok']


def test_batching_refuses_other_models_and_bad_state(tmp_path: Path) -> None:
    from pydantic_ai.models.test import TestModel

    with pytest.raises(BatchError, match='OpenAI model'):
        batch_judge_model(JudgeModel(TestModel(), 'test:test'), tmp_path)
    model = OpenAIChatModel('judge', provider=OpenAIProvider(base_url='http://127.0.0.1:9/v1', api_key='k'))
    (tmp_path / BATCHES_FILE).write_text('{"base_url": "http://127.0.0.1:9/v1", "model": "judge", "requests": []}')
    with pytest.raises(BatchError, match=r'batches\.json: field `requests`'):
        BatchModel(model, state_path=tmp_path / BATCHES_FILE)
    (tmp_path / BATCHES_FILE).write_text('{"base_url": "http://elsewhere/v1", "model": "judge"}')
    with pytest.raises(BatchError, match='use a new --run-id'):
        BatchModel(model, state_path=tmp_path / BATCHES_FILE)
    assert batch_judge_model(JudgeModel(model, 'x'), tmp_path / 'fresh').default_concurrency == BATCH_CONCURRENCY


def test_cli_batch_interrupted_then_resumed(tmp_path: Path) -> None:
    """The CLI, stopped with Ctrl-C after submitting, says how to resume; the same command with the same
    --run-id polls the existing batch and writes every report."""
    dataset = tmp_path / 'data.jsonl'
    dataset.write_text('\n'.join(r.model_dump_json() for r in records()) + '\n')
    out = tmp_path / 'reports'
    with BatchServer(verdicts, polls_to_complete=2, hold=True) as server:
        args = ['--dataset', str(dataset), '--judges', ','.join(JUDGES), '--base-url', server.base_url,
                '--model', 'judge', '--out', str(out), '--run-id', 'cli-run', '--batch', '--no-cache',
                '--fuse', 'none']  # fmt: skip
        env = {**os.environ, 'OPENAI_API_KEY': 'sk-test', 'SENSEI_EVAL_BATCH_POLL_S': '0.05', 'SENSEI_EVAL_BATCH_SETTLE_S': '0.2'}
        proc = subprocess.Popen(
            [sys.executable, '-m', 'sensei_eval.judge', *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        state = out / 'cli-run' / BATCHES_FILE
        deadline = time.monotonic() + 120
        while not state.is_file():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, 'no batch submitted'
            time.sleep(0.1)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert '--run-id cli-run' in stderr and 'resume' in stderr
        assert len(server.created) == 1

        server.hold = False
        from sensei_eval.cli import judge as judge_cli

        result = CliRunner().invoke(judge_cli.app, args, env=env)
    assert result.exit_code == 0, result.output
    assert len(server.created) == 1
    assert 'completed' in result.output
    loaded = RunFolder(out / 'cli-run').load_reports(require=True)
    assert sorted(r.query_id for r in loaded) == ['r1', 'r2', 'r3']
    assert all(r.judges[n].status == 'ok' for r in loaded for n in JUDGES)


def test_interrupted_run_folder_has_no_reports_yet(tmp_path: Path) -> None:
    """A run stopped before its first report holds only batches.json: loading it finds no reports, not a bad one."""
    folder = RunFolder.create(tmp_path, 'early')
    BatchState(base_url='http://127.0.0.1:9/v1', model='judge').save(folder.path / BATCHES_FILE)
    loaded = folder.load()
    assert loaded.reports == [] and loaded.problems == []


def test_responses_model_batches_on_the_responses_endpoint(tmp_path: Path) -> None:
    """`openai:` model strings give pydantic-ai's Responses model: its requests go to /v1/responses batches."""
    folder = RunFolder.create(tmp_path, 'run-responses')
    with BatchServer(verdicts, polls_to_complete=1) as server:
        model = OpenAIResponsesModel('judge', provider=OpenAIProvider(base_url=server.base_url, api_key='sk-test'))
        batched = batch_judge_model(JudgeModel(model, 'openai:judge'), folder.path, **FAST)

        async def run() -> list[Any]:
            try:
                return await judge_records(
                    records(), JudgeRunOptions(make_judges(JUDGES), batched, fuse=NO_FUSING), run_id='run-responses'
                )
            finally:
                assert isinstance(batched.model, BatchModel)
                await batched.model.aclose()

        reports = asyncio.run(run())
        lines = server.input_lines(server.created[0])
    assert len(server.created) == 1 and len(lines) == 6
    assert all(line['url'] == '/v1/responses' and 'input' in line['body'] for line in lines)
    assert [r.judges['completeness'].passed for r in reports] == [True, False, True]
    assert all(r.judges['hallucination'].status == 'ok' for r in reports)


def test_rerun_after_completion_reads_the_finished_batch(tmp_path: Path) -> None:
    """A run started again after its batch completed (e.g. stopped while writing reports) downloads that
    batch's results: no new batch, not even a status check."""
    folder = RunFolder.create(tmp_path, 'run-again')
    with BatchServer(verdicts, polls_to_complete=2) as server:
        first = asyncio.run(judge_batched(server, folder))
        retrieves = server.retrieves
        again = asyncio.run(judge_batched(server, folder))
    assert len(server.created) == 1 and server.retrieves == retrieves
    assert [r.judges['completeness'].reasoning for r in again] == [r.judges['completeness'].reasoning for r in first]
    assert [r.judges['completeness'].passed for r in again] == [True, False, True]


def test_expired_batch_is_submitted_again(tmp_path: Path) -> None:
    """A batch that expired before running its requests answers them with a transient error: the judges
    retry, and the retries go out in a new batch."""
    folder = RunFolder.create(tmp_path, 'run-expired')
    with BatchServer(verdicts, polls_to_complete=1, hold=True) as server:

        async def run() -> list[Any]:
            task = asyncio.create_task(judge_batched(server, folder))
            while not server.created:
                await asyncio.sleep(0.02)
            server.batches[server.created[0]]['status'] = 'expired'
            while len(server.created) < 2:
                await asyncio.sleep(0.02)
            server.hold = False
            return await task

        reports = asyncio.run(run())
    assert len(server.created) == 2
    assert all(r.judges[n].status == 'ok' for r in reports for n in JUDGES)
    state = BatchState.model_validate_json((folder.path / BATCHES_FILE).read_text())
    assert sorted(b.status for b in state.batches.values()) == ['completed', 'expired']
    assert len(state.requests) == 12  # each request under its first and its retried custom_id


def test_unreachable_batch_check_is_an_error_without_resubmission(tmp_path: Path) -> None:
    """When the batch cannot be checked any more (the server lost it), each waiting call is an error
    naming the batch; nothing is submitted again."""
    folder = RunFolder.create(tmp_path, 'run-lost')
    with BatchServer(verdicts, polls_to_complete=1, hold=True) as server:

        async def run() -> list[Any]:
            task = asyncio.create_task(judge_batched(server, folder))
            while not server.created:
                await asyncio.sleep(0.02)
            server.batches.clear()  # retrieves now answer 404
            return await task

        reports = asyncio.run(run())
    assert len(server.created) == 1
    results = [r.judges[n] for r in reports for n in JUDGES]
    assert all(x.status == 'error' and x.passed is None for x in results)
    assert all(server.created[0] in (x.error or '') and 'resume' in (x.error or '') for x in results)


def test_cli_refuses_batch_for_a_model_without_batch_api(tmp_path: Path) -> None:
    from sensei_eval.cli import judge as judge_cli

    dataset = tmp_path / 'data.jsonl'
    dataset.write_text(openai_record('r1').model_dump_json() + '\n')
    result = CliRunner().invoke(
        judge_cli.app,
        ['--dataset', str(dataset), '--judges', 'hallucination', '--model', 'test', '--batch', '--out', str(tmp_path)],
    )
    assert result.exit_code == 2, result.output
    assert 'OpenAI model' in result.output


def test_state_file_that_cannot_be_written_is_a_warning(tmp_path: Path) -> None:
    """The run still completes; progress warns that an interruption now would submit again."""
    blocker = tmp_path / 'not-a-folder'
    blocker.write_text('')
    progress: list[BatchProgress] = []
    with BatchServer(verdicts, polls_to_complete=1) as server:
        model = judge_model(server).model
        assert isinstance(model, OpenAIChatModel)
        batched = BatchModel(model, state_path=blocker / BATCHES_FILE, on_progress=progress.append, **FAST)

        async def run() -> list[Any]:
            try:
                return await judge_records(
                    records(), JudgeRunOptions(make_judges(JUDGES), JudgeModel(batched, 'b'), fuse=NO_FUSING), run_id='w'
                )
            finally:
                await batched.aclose()

        reports = asyncio.run(run())
    assert all(r.judges[n].status == 'ok' for r in reports for n in JUDGES)
    warned = [p.describe() for p in progress if p.problem]
    assert warned and 'cannot write' in warned[0] and 'not-a-folder' in warned[0]
