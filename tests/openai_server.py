"""A small OpenAI-compatible server over real HTTP/1.1 keep-alive, for the model-call tests.

It answers `GET /v1/models` (the CLI's preflight) and `POST /v1/chat/completions` on a free loopback
port, in a thread, with the stdlib `http.server` speaking HTTP/1.1: connections stay open between
requests, as vLLM, Ollama, llama.cpp's server and OpenAI keep them. Each chat completion takes the
next behaviour from `script` (then `default`):

* `'ok'` — a completion whose content is a valid, judged verdict;
* `('429', seconds)` — a rate limit with `Retry-After: seconds`;
* `'500'` — a server error;
* `'invalid'` — status 200 with a body that is not JSON;
* `'hang'` — reads the request and never answers (until the server closes);
* `'drip'` — sends the headers, then one byte of the body a second, never finishing in time;
* `('message', {...})` — a completion whose message is that assistant message (an agent's scripted turn:
  text, or `tool_calls`).

Every request is kept (`requests`: time, method, path, client port) for the tests to count, and to see
that a connection was reused.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ('Behaviour', 'OpenAIServer', 'Seen')

Behaviour = str | tuple[str, float] | tuple[str, dict[str, Any]]

# What a judged verdict looks like: reasoning that cites steps, in words of its own (not the prompt's),
# different for each answer (the same reasoning for every record is set aside as inconclusive).
REASONING = 'Step [2] answers from what the tool returned at step [1]; nothing in answer {n} goes beyond it.'


@dataclass
class Seen:
    """One request the server received."""

    at: float
    method: str
    path: str
    port: int


@dataclass
class OpenAIServer:
    """`with OpenAIServer(script=[...]) as server:` serves at `server.base_url` until the block ends."""

    script: list[Behaviour] = field(default_factory=list)
    default: Behaviour = 'ok'
    requests: list[Seen] = field(default_factory=list)
    _queue: deque[Behaviour] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: threading.Event = field(default_factory=threading.Event)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f'http://127.0.0.1:{self._httpd.server_address[1]}/v1'

    def completions(self) -> list[Seen]:
        return [r for r in self.requests if r.path.endswith('/chat/completions')]

    def next_behaviour(self) -> Behaviour:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def __enter__(self) -> OpenAIServer:
        self._queue.extend(self.script)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'  # keep-alive: the connection stays open between requests

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _seen(self) -> None:
                with server._lock:
                    server.requests.append(Seen(time.monotonic(), self.command, self.path, self.client_address[1]))

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def do_GET(self) -> None:
                self._seen()
                if self.path.rstrip('/').endswith('/models'):
                    self._send(200, json.dumps({'object': 'list', 'data': [{'id': 'm', 'object': 'model'}]}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                length = int(self.headers.get('Content-Length') or 0)
                request = json.loads(self.rfile.read(length) or b'{}')
                self._seen()
                if not self.path.endswith('/chat/completions'):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                behaviour = server.next_behaviour()
                kind = behaviour[0] if isinstance(behaviour, tuple) else behaviour
                if kind == 'ok':
                    self._send(200, _completion(request.get('model', 'm'), len(server.requests)))
                elif kind == '429':
                    assert isinstance(behaviour, tuple)
                    error = {'error': {'message': 'rate limited', 'type': 'rate_limit_error', 'code': 'rate_limit_exceeded'}}
                    self._send(429, json.dumps(error).encode(), {'Retry-After': f'{behaviour[1]:g}'})
                elif kind == '500':
                    self._send(500, b'{"error": {"message": "internal error", "type": "server_error"}}')
                elif kind == 'invalid':
                    self._send(200, b'<html>this is not json')
                elif kind == 'message':
                    assert isinstance(behaviour, tuple)
                    self._send(200, _message_completion(request.get('model', 'm'), behaviour[1]))
                elif kind == 'hang':
                    server._closing.wait()
                elif kind == 'drip':
                    body = _completion(request.get('model', 'm'), len(server.requests))
                    self.send_response(200)
                    self.send_header('Content-Type', 'application/json')
                    self.send_header('Content-Length', str(len(body)))
                    self.end_headers()
                    try:
                        for i in range(len(body)):
                            if server._closing.wait(1.0):
                                return
                            self.wfile.write(body[i : i + 1])
                            self.wfile.flush()
                    except OSError:
                        return
                else:  # pragma: no cover - a test's typo
                    raise ValueError(f'unknown behaviour {behaviour!r}')

        self._httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def _completion(model: str, n: int) -> bytes:
    verdict = {'reasoning': REASONING.format(n=n), 'issues': []}
    return json.dumps(
        {
            'id': 'chatcmpl-test',
            'object': 'chat.completion',
            'created': int(time.time()),
            'model': model,
            'choices': [{'index': 0, 'finish_reason': 'stop', 'message': {'role': 'assistant', 'content': json.dumps(verdict)}}],
            'usage': {'prompt_tokens': 100, 'completion_tokens': 20, 'total_tokens': 120},
        }
    ).encode()


def _message_completion(model: str, message: Any) -> bytes:
    finish = 'tool_calls' if message.get('tool_calls') else 'stop'
    return json.dumps(
        {
            'id': 'chatcmpl-agent',
            'object': 'chat.completion',
            'created': int(time.time()),
            'model': model,
            'choices': [{'index': 0, 'finish_reason': finish, 'message': {'role': 'assistant', 'content': None, **message}}],
            'usage': {'prompt_tokens': 50, 'completion_tokens': 10, 'total_tokens': 60},
        }
    ).encode()
