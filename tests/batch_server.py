"""A local stand-in for the OpenAI Batch API, for the batch tests: files, batches and a model list.

It implements what `sensei_eval.judging.batch` uses — `POST /v1/files` (multipart upload, purpose=batch),
`GET /v1/files/{id}/content`, `POST /v1/batches`, `GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`
and `GET /v1/models` (the CLI's preflight) — on a free loopback port, in a thread. A batch moves
validating → in_progress → finalizing → completed over `polls_to_complete` retrieves (never while
`hold` is set), then answers each input line with `answer(url, body)`: a string is the assistant's
content of a scripted chat completion; a `(status, body)` pair is an error line in the error file.
Everything it received is kept (`files`, `batches`, `created`, `retrieves`) for the tests to assert on.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

Answer = Callable[[str, dict[str, Any]], 'str | tuple[int, dict[str, Any]]']

_STEPS = ('validating', 'in_progress', 'finalizing', 'completed')


@dataclass
class BatchServer:
    """The fake Batch API; `with BatchServer(answer) as server:` serves it at `server.base_url`."""

    answer: Answer
    polls_to_complete: int = 3
    hold: bool = False
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # id -> (purpose, content)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)  # batch ids, in creation order
    retrieves: int = 0
    _polls: dict[str, int] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    port: int = 0

    @property
    def base_url(self) -> str:
        return f'http://127.0.0.1:{self.port}/v1'

    def input_lines(self, batch_id: str) -> list[dict[str, Any]]:
        """The JSONL lines of a batch's input file, parsed."""
        content = self.files[self.batches[batch_id]['input_file_id']][1]
        return [json.loads(line) for line in content.splitlines() if line.strip()]

    # -- serving ---------------------------------------------------------------------------------------

    def __enter__(self) -> BatchServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(('127.0.0.1', 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app(), log_level='warning', lifespan='off')
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={'sockets': [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError('the batch test server did not start')
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(10)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route('/v1/models', self._models, methods=['GET']),
                Route('/v1/files', self._upload, methods=['POST']),
                Route('/v1/files/{file_id}/content', self._content, methods=['GET']),
                Route('/v1/batches', self._create, methods=['POST']),
                Route('/v1/batches', self._list, methods=['GET']),
                Route('/v1/batches/{batch_id}', self._retrieve, methods=['GET']),
                Route('/v1/batches/{batch_id}/cancel', self._cancel, methods=['POST']),
            ]
        )

    # -- endpoints -------------------------------------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        return JSONResponse({'object': 'list', 'data': [{'id': 'judge', 'object': 'model', 'created': 0, 'owned_by': 'me'}]})

    async def _upload(self, request: Request) -> Response:
        raw = await request.body()
        head = f'Content-Type: {request.headers["content-type"]}\r\n\r\n'.encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param('name', header='content-disposition')
            payload = part.get_payload(decode=True)
            fields[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b'')
        if 'file' not in fields or 'purpose' not in fields:
            return _error(400, 'multipart upload needs `file` and `purpose`')
        purpose = fields['purpose'][1].decode()
        with self._lock:
            file_id = f'file-{next(self._ids)}'
            self.files[file_id] = (purpose, fields['file'][1])
        return JSONResponse(_file_object(file_id, fields['file'][0] or 'upload', purpose, len(fields['file'][1])))

    async def _content(self, request: Request) -> Response:
        file_id = request.path_params['file_id']
        if file_id not in self.files:
            return _error(404, f'no file {file_id}')
        return Response(self.files[file_id][1], media_type='application/octet-stream')

    async def _create(self, request: Request) -> Response:
        params = await request.json()
        file = self.files.get(params.get('input_file_id', ''))
        if file is None or file[0] != 'batch':
            return _error(400, 'input_file_id must name an uploaded file with purpose=batch')
        lines = [json.loads(line) for line in file[1].splitlines() if line.strip()]
        ids = [line['custom_id'] for line in lines]
        if len(set(ids)) != len(ids):
            return _error(400, 'custom_id values must be unique within a batch')
        if any(line.get('url') != params['endpoint'] or line.get('method') != 'POST' for line in lines):
            return _error(400, 'every line must POST to the batch endpoint')
        with self._lock:
            batch_id = f'batch_{next(self._ids)}'
            self.batches[batch_id] = {
                'id': batch_id,
                'object': 'batch',
                'endpoint': params['endpoint'],
                'errors': None,
                'input_file_id': params['input_file_id'],
                'completion_window': params['completion_window'],
                'status': 'validating',
                'output_file_id': None,
                'error_file_id': None,
                'created_at': int(time.time()),
                'request_counts': {'total': len(lines), 'completed': 0, 'failed': 0},
                'metadata': params.get('metadata'),
            }
            self.created.append(batch_id)
            self._polls[batch_id] = 0
        return JSONResponse(self.batches[batch_id])

    async def _list(self, request: Request) -> Response:  # the CLI's check that the Batch API is there
        return JSONResponse({'object': 'list', 'data': [], 'has_more': False})

    async def _retrieve(self, request: Request) -> Response:
        batch_id = request.path_params['batch_id']
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return _error(404, f'no batch {batch_id}')
            self.retrieves += 1
            if batch['status'] == 'cancelling':
                batch['status'] = 'cancelled'
            elif batch['status'] in _STEPS[:-1] and not self.hold:
                self._polls[batch_id] += 1
                left = self.polls_to_complete - self._polls[batch_id]
                batch['status'] = 'completed' if left <= 0 else 'finalizing' if left == 1 else 'in_progress'
                if batch['status'] == 'completed':
                    self._complete(batch)
            elif batch['status'] == 'validating':
                batch['status'] = 'in_progress'
            return JSONResponse(batch)

    async def _cancel(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params['batch_id'])
        if batch is None:
            return _error(404, 'no such batch')
        if batch['status'] not in ('completed', 'failed', 'expired', 'cancelled'):
            batch['status'] = 'cancelling'
        return JSONResponse(batch)

    def _complete(self, batch: dict[str, Any]) -> None:
        """Answer every line: results to the output file, error lines to the error file."""
        outputs: list[str] = []
        errors: list[str] = []
        for line in (json.loads(x) for x in self.files[batch['input_file_id']][1].splitlines() if x.strip()):
            answer = self.answer(line['url'], line['body'])
            if isinstance(answer, str):
                build = _response if line['url'] == '/v1/responses' else _completion
                response = {'status_code': 200, 'request_id': f'req-{next(self._ids)}', 'body': build(line['body'], answer)}
                outputs.append(
                    json.dumps(
                        {'id': f'resp-{next(self._ids)}', 'custom_id': line['custom_id'], 'response': response, 'error': None}
                    )
                )
            else:
                status, body = answer
                response = {'status_code': status, 'request_id': f'req-{next(self._ids)}', 'body': body}
                errors.append(
                    json.dumps(
                        {'id': f'resp-{next(self._ids)}', 'custom_id': line['custom_id'], 'response': response, 'error': None}
                    )
                )
        for key, lines in (('output_file_id', outputs), ('error_file_id', errors)):
            if lines:
                file_id = f'file-{next(self._ids)}'
                self.files[file_id] = ('batch_output', ('\n'.join(lines) + '\n').encode())
                batch[key] = file_id
        batch['request_counts'] = {'total': len(outputs) + len(errors), 'completed': len(outputs), 'failed': len(errors)}


def _completion(body: dict[str, Any], content: str) -> dict[str, Any]:
    """A chat completion answering `body` with `content`, as the chat completions endpoint would."""
    prompt_tokens = sum(len(str(m.get('content', ''))) // 4 for m in body.get('messages', []))
    return {
        'id': 'chatcmpl-batch',
        'object': 'chat.completion',
        'created': int(time.time()),
        'model': body.get('model', 'judge'),
        'choices': [
            {'index': 0, 'message': {'role': 'assistant', 'content': content}, 'finish_reason': 'stop', 'logprobs': None}
        ],
        'usage': {
            'prompt_tokens': prompt_tokens,
            'completion_tokens': len(content) // 4,
            'total_tokens': prompt_tokens + len(content) // 4,
        },
    }


def _response(body: dict[str, Any], text: str) -> dict[str, Any]:
    """A Responses API response answering `body` with `text`, as `/v1/responses` would."""
    input_tokens = len(json.dumps(body.get('input', ''))) // 4
    message = {'type': 'message', 'id': 'msg-batch', 'role': 'assistant', 'status': 'completed',
               'content': [{'type': 'output_text', 'text': text, 'annotations': []}]}  # fmt: skip
    return {
        'id': 'resp-batch',
        'object': 'response',
        'created_at': int(time.time()),
        'model': body.get('model', 'judge'),
        'status': 'completed',
        'output': [message],
        'parallel_tool_calls': True,
        'tool_choice': 'auto',
        'tools': [],
        'usage': {
            'input_tokens': input_tokens,
            'output_tokens': len(text) // 4,
            'total_tokens': input_tokens + len(text) // 4,
            'input_tokens_details': {'cached_tokens': 0},
            'output_tokens_details': {'reasoning_tokens': 0},
        },
    }


def _file_object(file_id: str, filename: str, purpose: str, size: int) -> dict[str, Any]:
    return {'id': file_id, 'object': 'file', 'bytes': size, 'created_at': int(time.time()), 'filename': filename,
            'purpose': purpose, 'status': 'processed'}  # fmt: skip


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({'error': {'message': message, 'type': 'invalid_request_error', 'code': None}}, status_code=status)


def last_user_text(body: dict[str, Any]) -> str:
    """The judge's prompt in a chat completions (`messages`) or responses (`input`) body: its last user message."""
    for message in reversed(body.get('messages') or body.get('input') or []):
        if message.get('role') == 'user':
            content = message.get('content')
            if isinstance(content, str):
                return content
            return ''.join(str(part.get('text', '')) for part in content or [] if isinstance(part, dict))
    return ''
