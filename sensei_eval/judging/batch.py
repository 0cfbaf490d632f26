"""Judge requests through the OpenAI Batch API: about half the price of live calls, answers within 24 hours,
and a run that can be interrupted and resumed without paying twice.

`BatchModel` wraps an OpenAI model (`OpenAIChatModel` — what `--base-url` and OpenAI-compatible servers
use — or `OpenAIResponsesModel`, what `openai:` model strings give). A judge calls it like any pydantic-ai
model. Underneath, a copy of the wrapped model runs its ordinary `request()` against an HTTP transport
that never reaches the network: the chat-completions (or responses) body pydantic-ai and the OpenAI SDK
build — the exact bytes a live call would send — becomes one line of a pending batch, and the answer
that line gets from the batch's output file is handed back to the SDK as the HTTP response, so
pydantic-ai parses it exactly as it parses a live completion (a failed line raises the same
`ModelHTTPError` a failed live call would: the judge reports an error, never a pass).

Each line's `custom_id` is a hash of its endpoint and body plus an occurrence number (the second
identical request of a run, e.g. a repeat, is `-2`), so the same run asks the same questions under the
same ids. A collector submits the pending lines when no new request arrived for `settle_s`, or at once
when the batch is full (50,000 lines or 200 MB), then polls with backoff, downloads the output and error
files and answers every waiting request.

Resuming: with a `state_path` (the CLI uses `<run folder>/batches.json`), the batch ids and the
custom_id → batch mapping are written atomically after a batch is created and before waiting on it. A
run started again with the same state (the same `--run-id`) finds its requests there and polls their
existing batch instead of submitting them again. `on_progress` receives the batches' states
(validating/in_progress/finalizing/completed…) and request counts whenever they change.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast

import httpx2
import openai
from pydantic import BaseModel, ValidationError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from sensei_eval.core.errors import ModelCallError, describe_error, validation_message
from sensei_eval.core.files import write_text_atomic
from sensei_eval.models.judge_model import JudgeModel
from sensei_eval.models.retry import with_retries

__all__ = (
    'BATCHES_FILE',
    'BATCH_CONCURRENCY',
    'BATCH_MAX_BYTES',
    'BATCH_MAX_LINES',
    'BatchError',
    'BatchModel',
    'BatchProgress',
    'BatchRecord',
    'BatchState',
    'batch_judge_model',
    'check_batch_api',
)

BATCHES_FILE = 'batches.json'
# The OpenAI Batch API's limits per batch: input lines and input file bytes.
BATCH_MAX_LINES = 50_000
BATCH_MAX_BYTES = 200_000_000
# Judge calls in flight at once under batching: every call waits on a batch, so the runner's
# semaphore must not hold calls back from the collector (a batch of 4 lines would defeat the point).
BATCH_CONCURRENCY = 100_000
DEFAULT_SETTLE_S = 2.0
DEFAULT_POLL_S = 10.0
DEFAULT_MAX_POLL_S = 300.0
# Attempts at one poll or download (connection errors, 5xx, 429 retried under `sensei_eval.models.retry`)
# before the waiting requests fail; the batch keeps running at the provider and a resumed run finds it.
CHECK_ATTEMPTS = 6
# Retry-After of the lines of an expired batch: the same for all (not the policy's jittered backoff),
# so the judges' retries reach the collector together and are submitted as one new batch.
EXPIRED_RETRY_AFTER_S = 1
TERMINAL_STATES = frozenset({'completed', 'failed', 'expired', 'cancelled'})
_STATE_ORDER = ('validating', 'in_progress', 'finalizing', 'completed', 'failed', 'expired', 'cancelling', 'cancelled')
_ENDPOINTS = ('/v1/chat/completions', '/v1/responses')
_Endpoint = Literal['/v1/chat/completions', '/v1/responses']
# A line the provider did not run: expired lines may succeed in a new batch (5xx: the judge retries),
# cancelled ones were meant to stop (4xx: an error result).
_UNRUN_STATUS = {'batch_expired': 503, 'batch_cancelled': 409}


class BatchError(ModelCallError):
    """Batching cannot be used as asked: a model without a batch API, or an unreadable state file (a usage
    error of the command: exit code 2)."""

    exit_code = 2


# ---------------------------------------------------------------------------------------------------
# The state file


class BatchRecord(BaseModel):
    """One submitted batch as the state file keeps it: enough to poll it and read its results later."""

    id: str
    endpoint: str
    input_file_id: str
    status: str
    requests: int
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int = 0


class BatchState(BaseModel):
    """`batches.json`: which batches a run created and which batch holds each request (by custom_id)."""

    base_url: str
    model: str
    batches: dict[str, BatchRecord] = {}
    requests: dict[str, str] = {}

    @classmethod
    def load(cls, path: Path, *, base_url: str, model: str) -> BatchState:
        """The run's state, or a fresh one; a file for another server or model is a `BatchError`."""
        if not path.is_file():
            return cls(base_url=base_url, model=model)
        try:
            state = cls.model_validate_json(path.read_text(encoding='utf-8'))
        except (OSError, UnicodeDecodeError) as e:
            raise BatchError(f'{path}: cannot read: {e}') from None
        except ValidationError as e:
            raise BatchError(f'{validation_message(e)} (move the file away to start new batches)', file=str(path)) from None
        if (state.base_url, state.model) != (base_url, model):
            raise BatchError(
                f'{path} holds batches of {state.model} at {state.base_url}, not {model} at {base_url}: '
                'resume with the same model and server, or use a new --run-id'
            )
        return state

    def save(self, path: Path) -> None:
        write_text_atomic(path, self.model_dump_json(indent=2))


@dataclass(frozen=True)
class BatchProgress:
    """The batches of a run at one moment: how many are in each provider state, and their request counts."""

    states: dict[str, int]
    requests: int
    completed: int
    failed: int
    collecting: int  # requests waiting for the settle time before their batch is submitted

    problem: str | None = None  # the state file could not be written: an interruption now would resubmit

    def describe(self) -> str:
        order = {s: k for k, s in enumerate(_STATE_ORDER)}
        states = ', '.join(f'{self.states[s]} {s}' for s in sorted(self.states, key=lambda s: (order.get(s, len(order)), s)))
        text = f'batches: {states or "none yet"} · {self.completed + self.failed}/{self.requests} requests answered'
        if self.failed:
            text += f' ({self.failed} failed)'
        if self.collecting:
            text += f' · {self.collecting} collecting'
        if self.problem:
            text += f' · warning: {self.problem}'
        return text


# ---------------------------------------------------------------------------------------------------
# The collector


@dataclass(frozen=True)
class _Answer:
    """What a batch line got: the HTTP status and JSON body a live call would have received."""

    status_code: int
    body: bytes
    retry_after_s: int | None = None  # sent as Retry-After: when the judges' retry may go out

    @classmethod
    def error(cls, status_code: int, message: str, code: str | None = None, retry_after_s: int | None = None) -> _Answer:
        body = {'error': {'message': message, 'type': 'batch_error', 'code': code}}
        return cls(status_code, json.dumps(body).encode(), retry_after_s)


@dataclass
class _Line:
    custom_id: str
    data: bytes
    future: asyncio.Future[_Answer]


@dataclass
class _Pending:
    lines: dict[str, _Line] = field(default_factory=dict)
    size: int = 0
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Finished:
    record: BatchRecord
    answers: dict[str, _Answer]
    problems: list[str]
    errors: list[str]


@dataclass(frozen=True)
class _Pacing:
    """When a batch is sent (`settle_s` after its last line, or at `max_lines` / `max_bytes`) and how it is
    polled (first after `poll_s`, backing off to `max_poll_s`)."""

    settle_s: float
    poll_s: float
    max_poll_s: float
    max_lines: int
    max_bytes: int


class _Collector:
    """Collects request lines into batches, submits them, polls them, and answers the waiting requests."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        state_path: Path | None,
        model_name: str,
        pacing: _Pacing,
        on_progress: Callable[[BatchProgress], None] | None,
    ) -> None:
        self._client = client
        self._api_client: openai.AsyncOpenAI | None = None
        self._api_loop: asyncio.AbstractEventLoop | None = None
        self.state_path = state_path
        base_url = str(client.base_url).rstrip('/')
        self.state = (
            BatchState.load(state_path, base_url=base_url, model=model_name)
            if state_path is not None
            else BatchState(base_url=base_url, model=model_name)
        )
        self.settle_s, self.poll_s, self.max_poll_s = pacing.settle_s, pacing.poll_s, pacing.max_poll_s
        self.max_lines, self.max_bytes = pacing.max_lines, pacing.max_bytes
        self.on_progress = on_progress
        self._seen: Counter[str] = Counter()
        self._pending: dict[str, _Pending] = {}
        self._waiters: dict[str, dict[str, asyncio.Future[_Answer]]] = {}
        self._pollers: dict[str, asyncio.Task[None]] = {}
        self._finished: dict[str, _Finished] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_progress: BatchProgress | None = None
        self._problem: str | None = None

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The files and batches client, with a connection pool of its own for the running event loop: the
        model's pool may hold connections of a loop that has ended (the CLI's preflight runs in its own)."""
        loop = asyncio.get_running_loop()
        if self._api_client is None or self._api_loop is not loop:
            http_client = httpx2.AsyncClient(timeout=httpx2.Timeout(600.0, connect=10.0))
            self._api_client = self._client.with_options(http_client=http_client, max_retries=0)
            self._api_loop = loop
        return self._api_client

    # -- asking ----------------------------------------------------------------------------------------

    async def ask(self, endpoint: str, body: bytes) -> _Answer:
        """Put one request into a batch (or find it in one already submitted) and wait for its answer."""
        parsed = json.loads(body)
        canonical = json.dumps(parsed, sort_keys=True, separators=(',', ':'), ensure_ascii=False)
        digest = hashlib.sha256(f'{endpoint}\n{canonical}'.encode()).hexdigest()[:32]
        self._seen[digest] += 1
        custom_id = f'se-{digest}-{self._seen[digest]}'
        future: asyncio.Future[_Answer] = asyncio.get_running_loop().create_future()
        batch_id = self.state.requests.get(custom_id)
        if batch_id is not None and batch_id in self.state.batches:
            self._wait_on(batch_id, custom_id, future)
        else:
            compact = json.dumps(parsed, separators=(',', ':'), ensure_ascii=False)
            line = json.dumps({'custom_id': custom_id, 'method': 'POST', 'url': endpoint, 'body': None}, separators=(',', ':'))
            data = line.removesuffix('null}').encode() + compact.encode() + b'}'
            self._enqueue(endpoint, _Line(custom_id, data, future))
        return await future

    def _enqueue(self, endpoint: str, line: _Line) -> None:
        if len(line.data) + 1 > self.max_bytes:
            line.future.set_result(
                _Answer.error(400, f'this request takes {len(line.data):,} bytes, more than the {self.max_bytes:,} of a batch')
            )
            return
        pending = self._pending.get(endpoint)
        if pending is not None and pending.size + len(line.data) + 1 > self.max_bytes:
            self._flush(endpoint)
        pending = self._pending.setdefault(endpoint, _Pending())
        pending.lines[line.custom_id] = line
        pending.size += len(line.data) + 1
        if pending.timer is not None:
            pending.timer.cancel()
        if len(pending.lines) >= self.max_lines:
            self._flush(endpoint)
        else:
            pending.timer = asyncio.get_running_loop().call_later(self.settle_s, self._flush, endpoint)

    def _flush(self, endpoint: str) -> None:
        pending = self._pending.pop(endpoint, None)
        if pending is None:
            return
        if pending.timer is not None:
            pending.timer.cancel()
        self._spawn(self._submit(endpoint, pending))

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- submitting ------------------------------------------------------------------------------------

    async def _submit(self, endpoint: str, pending: _Pending) -> None:
        lines = {cid: line for cid, line in pending.lines.items() if not line.future.done()}  # interrupted callers drop out
        if not lines:
            return
        try:
            await self._submit_lines(endpoint, lines)
        except Exception as e:  # a bug here must end the waiting calls, never leave them waiting forever
            for line in lines.values():
                if not line.future.done():
                    line.future.set_exception(e)

    async def _submit_lines(self, endpoint: str, lines: dict[str, _Line]) -> None:
        data = b'\n'.join(line.data for line in lines.values()) + b'\n'
        try:
            check_allow_model_requests()
            file = await self.client.files.create(file=('sensei-eval-batch.jsonl', data), purpose='batch')
            batch = await self.client.batches.create(
                input_file_id=file.id,
                endpoint=cast(_Endpoint, endpoint),
                completion_window='24h',
                metadata={'created_by': 'sensei-eval'},
            )
        except openai.APIStatusError as e:
            answer = _Answer(e.status_code, _error_body(e, f'submitting a batch of {len(lines)} request(s) failed'))
            for line in lines.values():
                _resolve(line.future, answer)
            return
        except (openai.APIConnectionError, httpx2.HTTPError, OSError) as e:
            error = httpx2.ConnectError(f'submitting a batch to {self.state.base_url} failed: {e}')
            for line in lines.values():
                if not line.future.done():
                    line.future.set_exception(error)
            return
        record = _record(batch, endpoint, len(lines))
        self.state.batches[batch.id] = record
        self.state.requests.update(dict.fromkeys(lines, batch.id))
        self._save()  # before waiting: an interrupted run finds this batch instead of paying for it again
        for line in lines.values():
            self._wait_on(batch.id, line.custom_id, line.future)
        self._report()

    # -- waiting ---------------------------------------------------------------------------------------

    def _wait_on(self, batch_id: str, custom_id: str, future: asyncio.Future[_Answer]) -> None:
        if future.done():
            return
        finished = self._finished.get(batch_id)
        if finished is not None:
            future.set_result(_answer_for(finished, custom_id))
            return
        self._waiters.setdefault(batch_id, {})[custom_id] = future
        if batch_id not in self._pollers:
            self._pollers[batch_id] = self._spawn(self._poll(batch_id))

    async def _poll(self, batch_id: str) -> None:
        try:
            await self._poll_batch(batch_id)
        except Exception as e:  # a bug here must end the waiting calls, never leave them waiting forever
            self._pollers.pop(batch_id, None)
            for future in self._waiters.pop(batch_id, {}).values():
                if not future.done():
                    future.set_exception(e)

    async def _poll_batch(self, batch_id: str) -> None:
        record = self.state.batches[batch_id]
        delay = self.poll_s
        problem = ''
        while record.status not in TERMINAL_STATES or (record.status == 'completed' and not _has_results(record)):
            try:  # a failed check is retried under the one policy (`sensei_eval.models.retry`)
                batch = await with_retries(lambda: self._retrieve(batch_id), attempts=CHECK_ATTEMPTS, base_s=self.poll_s)
            except Exception as e:
                problem = f'checking batch {batch_id} failed: {describe_error(e, limit=300)}'
                break
            record = self.state.batches[batch_id] = _record(batch, record.endpoint, record.requests)
            self._report()
            if record.status in TERMINAL_STATES:
                self._save()
                break
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, self.max_poll_s)
        finished = _Finished(record, {}, [], [problem] if problem else [])
        if not problem:
            await self._download(finished)
        self._finished[batch_id] = finished
        self._pollers.pop(batch_id, None)
        for custom_id, future in self._waiters.pop(batch_id, {}).items():
            _resolve(future, _answer_for(finished, custom_id))
        self._report()

    async def _retrieve(self, batch_id: str) -> Any:
        check_allow_model_requests()
        return await self.client.batches.retrieve(batch_id)

    async def _content(self, file_id: str) -> str:
        return (await self.client.files.content(file_id)).text

    async def _download(self, finished: _Finished) -> None:
        """Read the output and error files into answers; a bad line is noted, the others still count."""
        record = finished.record
        for file_id in (record.output_file_id, record.error_file_id):
            if not file_id:
                continue
            text = None
            try:
                text = await with_retries(functools.partial(self._content, file_id), attempts=CHECK_ATTEMPTS, base_s=self.poll_s)
            except Exception as e:
                finished.errors.append(f'downloading file {file_id} of batch {record.id} failed: {describe_error(e, limit=300)}')
            for number, raw in enumerate((text or '').splitlines(), start=1):
                if raw.strip():
                    try:
                        custom_id, answer = _parse_line(raw)
                    except (ValueError, KeyError, TypeError) as e:
                        finished.problems.append(f'file {file_id} line {number}: {e}')
                        continue
                    finished.answers[custom_id] = answer

    # -- state and progress ----------------------------------------------------------------------------

    def _save(self) -> None:
        """Write the state file; a failure is reported (a resumed run would submit again), the run goes on."""
        if self.state_path is None:
            return
        try:
            self.state.save(self.state_path)
            self._problem = None
        except OSError as e:
            self._problem = f'cannot write {self.state_path}: {e}'
            self._report()

    def progress(self) -> BatchProgress:
        records = list(self.state.batches.values())
        return BatchProgress(
            states=dict(Counter(r.status for r in records)),
            requests=sum(r.requests for r in records),
            completed=sum(r.completed for r in records),
            failed=sum(r.failed for r in records),
            collecting=sum(len(p.lines) for p in self._pending.values()),
            problem=self._problem,
        )

    def _report(self) -> None:
        if self.on_progress is None:
            return
        progress = self.progress()
        if progress != self._last_progress:
            self._last_progress = progress
            self.on_progress(progress)

    async def aclose(self) -> None:
        """Stop collecting, submitting and polling (the provider keeps running submitted batches)."""
        for pending in self._pending.values():
            if pending.timer is not None:
                pending.timer.cancel()
            for line in pending.lines.values():
                line.future.cancel()
        self._pending.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._api_client is not None and self._api_loop is asyncio.get_running_loop():
            await self._api_client.close()
        self._api_client = None


def _record(batch: Any, endpoint: str, requests: int) -> BatchRecord:
    counts = batch.request_counts
    return BatchRecord(
        id=batch.id,
        endpoint=endpoint,
        input_file_id=batch.input_file_id,
        status=batch.status,
        requests=(counts.total if counts and counts.total else requests),
        completed=counts.completed if counts else 0,
        failed=counts.failed if counts else 0,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
        created_at=batch.created_at,
    )


def _has_results(record: BatchRecord) -> bool:
    return bool(record.output_file_id or record.error_file_id)


def _parse_line(raw: str) -> tuple[str, _Answer]:
    """One line of an output or error file: `{custom_id, response: {status_code, body}, error}`."""
    data = json.loads(raw)
    custom_id = data['custom_id']
    if not isinstance(custom_id, str):
        raise ValueError('custom_id is not a string')
    response = data.get('response')
    if isinstance(response, dict) and isinstance(response.get('status_code'), int):
        return custom_id, _Answer(response['status_code'], json.dumps(response.get('body')).encode())
    error = data.get('error') or {}
    code = error.get('code') if isinstance(error, dict) else None
    message = error.get('message') if isinstance(error, dict) else None
    status = _UNRUN_STATUS.get(str(code), 500)
    return custom_id, _Answer.error(status, f'the batch line failed: {message or code or "no response"}', code)


def _answer_for(finished: _Finished, custom_id: str) -> _Answer:
    answer = finished.answers.get(custom_id)
    if answer is not None:
        return answer
    record = finished.record
    notes = '; '.join(finished.errors + finished.problems[:3])
    if finished.errors:  # not a transient status: a judge retry would submit the request again and pay twice
        return _Answer.error(424, f'{notes}; the batch may still be running: resume with the same run id to collect it')
    if record.status == 'failed':
        return _Answer.error(400, f'batch {record.id} failed validation{": " + notes if notes else ""}')
    if record.status == 'expired':
        # one wait for every line of the batch, so their retries arrive together and go out in one new batch
        return _Answer.error(
            503, f'batch {record.id} expired before running this request', 'batch_expired', EXPIRED_RETRY_AFTER_S
        )
    if record.status == 'cancelled':
        return _Answer.error(409, f'batch {record.id} was cancelled before running this request', 'batch_cancelled')
    return _Answer.error(
        500, f'batch {record.id} ({record.status}) has no result for this request{": " + notes if notes else ""}'
    )


def _resolve(future: asyncio.Future[_Answer], answer: _Answer) -> None:
    if not future.done():
        future.set_result(answer)


def _error_body(e: openai.APIStatusError, context: str) -> bytes:
    body = e.body if isinstance(e.body, dict) else {}
    error = body.get('error', body) if isinstance(body, dict) else {}
    message = error.get('message') if isinstance(error, dict) else None
    code = error.get('code') if isinstance(error, dict) else None
    return _Answer.error(e.status_code, f'{context}: {message or e.message}', code).body


# ---------------------------------------------------------------------------------------------------
# The model


class _CaptureTransport(httpx2.AsyncBaseTransport):
    """The HTTP transport of the batching copy: a request body becomes a batch line, its answer the response."""

    def __init__(self, collector: _Collector, base_path: str) -> None:
        self.collector = collector
        self.base_path = base_path.rstrip('/')

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        path = request.url.path
        endpoint = '/v1' + path[len(self.base_path) :] if path.startswith(self.base_path) else path
        if request.method != 'POST' or endpoint not in _ENDPOINTS:
            answer = _Answer.error(400, f'{request.method} {path} cannot go through the Batch API')
        else:
            answer = await self.collector.ask(endpoint, body)
        headers = {'content-type': 'application/json'}
        if answer.retry_after_s is not None:
            headers['retry-after'] = str(answer.retry_after_s)
        return httpx2.Response(answer.status_code, content=answer.body, headers=headers, request=request)


class BatchModel(WrapperModel):
    """An OpenAI model whose requests go through the Batch API; see the module docstring."""

    def __init__(
        self,
        wrapped: Model,
        *,
        state_path: Path | None = None,
        settle_s: float = DEFAULT_SETTLE_S,
        poll_s: float = DEFAULT_POLL_S,
        max_poll_s: float = DEFAULT_MAX_POLL_S,
        max_lines: int = BATCH_MAX_LINES,
        max_bytes: int = BATCH_MAX_BYTES,
        on_progress: Callable[[BatchProgress], None] | None = None,
    ) -> None:
        if not isinstance(wrapped, OpenAIChatModel | OpenAIResponsesModel):
            raise BatchError(
                f'batching needs an OpenAI model (openai:… or --base-url for an OpenAI-compatible server), '
                f'not {type(wrapped).__name__} {wrapped.model_name!r}'
            )
        super().__init__(wrapped)
        client = wrapped.client
        self.collector = _Collector(
            client,
            state_path=state_path,
            model_name=wrapped.model_name,
            pacing=_Pacing(settle_s, poll_s, max_poll_s, min(max_lines, BATCH_MAX_LINES), min(max_bytes, BATCH_MAX_BYTES)),
            on_progress=on_progress,
        )
        transport = _CaptureTransport(self.collector, client.base_url.path)
        capturing = client.with_options(http_client=httpx2.AsyncClient(transport=transport), max_retries=0)
        provider = OpenAIProvider(openai_client=capturing)
        self._capturing: Model = type(wrapped)(
            wrapped.model_name, provider=provider, profile=wrapped.profile, settings=wrapped.settings
        )

    @property
    def batch_max_requests(self) -> int | None:
        return None  # already batched: pydantic-ai's own batching must not wrap it again

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return await self._capturing.request(messages, model_settings, model_request_parameters)

    @asynccontextmanager
    async def request_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[StreamedResponse]:
        raise BatchError('a batched request cannot stream')
        yield  # pragma: no cover - makes this a generator

    def progress(self) -> BatchProgress:
        return self.collector.progress()

    async def aclose(self) -> None:
        await self.collector.aclose()


def batch_judge_model(
    judge_model: JudgeModel,
    run_dir: Path | None,
    *,
    on_progress: Callable[[BatchProgress], None] | None = None,
    **options: Any,
) -> JudgeModel:
    """`judge_model` calling through a `BatchModel` whose state lives in `run_dir/batches.json`; its default
    concurrency is high, so the runner lets every judge call reach the collector. `$SENSEI_EVAL_BATCH_SETTLE_S`
    and `$SENSEI_EVAL_BATCH_POLL_S` set the settle time and the first poll interval when not given."""
    if judge_model.embedded or not isinstance(judge_model.model, Model):
        raise BatchError('--batch needs an OpenAI model (--model openai:… or --base-url URL), not the embedded model')
    state_path = run_dir / BATCHES_FILE if run_dir is not None else None
    for name, env in (('settle_s', 'SENSEI_EVAL_BATCH_SETTLE_S'), ('poll_s', 'SENSEI_EVAL_BATCH_POLL_S')):
        if name not in options and os.environ.get(env):
            try:
                options[name] = float(os.environ[env])
            except ValueError:
                raise BatchError(f'${env}: {os.environ[env]!r} is not a number of seconds') from None
    model = BatchModel(judge_model.model, state_path=state_path, on_progress=on_progress, **options)
    return replace(judge_model.through(model), default_concurrency=BATCH_CONCURRENCY)


async def check_batch_api(judge_model: JudgeModel, *, timeout_s: float = 10.0) -> None:
    """Ask once, before judging, whether the server offers the Batch API (`GET /batches?limit=1`): a server
    without it is one `BatchError` naming it, not one 404 per judge call. A client of its own, closed here
    (the judging loop's pool is left alone); a server that cannot be reached is the preflight's concern."""
    client = getattr(judge_model.model, 'client', None)
    if not isinstance(client, openai.AsyncOpenAI):
        raise BatchError('--batch needs an OpenAI model (--model openai:… or --base-url URL)')
    async with httpx2.AsyncClient(timeout=timeout_s) as http_client:
        quick = client.with_options(http_client=http_client, max_retries=0, timeout=timeout_s)
        try:
            await quick.batches.list(limit=1)
        except openai.APIStatusError as e:
            if e.status_code in (404, 405, 501):
                raise BatchError(
                    f'{judge_model.where} offers no Batch API (GET /batches answered {e.status_code}); run without --batch'
                ) from None
        except openai.APIConnectionError:
            pass
