"""The one retry policy: every model request, webhook post and batch poll sensei-eval makes retries here.

It is tenacity's `AsyncRetrying` (no loop of our own) configured once:

* **what is retried** — an answer that may change: a rate limit (429), a server error (5xx), 408, a
  connection that failed or dropped, one attempt's own timeout. pydantic-ai's model errors, the OpenAI
  SDK's and httpx2's are all recognised. **Never retried**: any other 4xx (a rejected key, an unknown
  model, a request too large — the same request gets the same answer), a provider that says
  `x-should-retry: false`, a usage error, the circuit breaker's refusal, a stopped run;
* **how long it waits** — what the server asks for when it says (`Retry-After`, in seconds or as a
  date, or `retry-after-ms`), capped at `RETRY_AFTER_CAP_S` (60 s): a server asking for longer gets
  60 s, and if it still refuses the call ends as an error rather than holding the run; when the wait asked
  for (uncapped) is longer than what is left of the call's deadline (`CALL_DEADLINE`, set by a judge call or
  by `call_deadline` around any other work, such as a service scoring), no wait is started: the 429 ends
  the call, with a note naming the wait asked for (it was an answer, not a timeout); otherwise
  exponential backoff with full jitter (a random wait between 0 and 1 s, 2 s, 4 s ... capped at
  `BACKOFF_CAP_S`), so many calls refused at once do not come back at once;
* **how often** — `ATTEMPTS` (3) attempts in all. The deadline of a whole judge call (`--timeout`,
  `DEFAULT_CALL_TIMEOUT_S`) sits outside: it cuts an attempt, a wait or a dripping read alike;
* **what it is called** — a call that ends on a 429 is *rate-limited*, on every surface (CLI, reports, the
  service's scoring rows): the error carries a note starting `rate-limited (429)` with the wait the server
  asked for (`rate_limit_note`), never "timed out" or "no answer".

`RetryingModel` applies it to every request a judge makes (a pydantic-ai `WrapperModel`; agents are built
on `JudgeModel.request_model`), and keeps the run's "first failure" rule (`models.ConnectionWatch`):
a connection failure counts there, and once the watch has stopped the run no attempt is made.
`with_retries` applies it to any other coroutine (the alert webhook, the Batch API's polls and
downloads). The provider SDKs' own retries are off (`models._no_sdk_retries`): this is the only layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelRequestTimeout,
    ModelServerError,
    ModelUnavailableError,
)
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential
from tenacity.stop import stop_base

from sensei_eval.core.errors import ModelCallError

__all__ = (
    'ATTEMPTS',
    'BACKOFF_CAP_S',
    'BASE_BACKOFF_S',
    'CALL_DEADLINE',
    'CONNECTION_FAILURES_TO_STOP',
    'MAX_ECHO_CHARS',
    'RATE_LIMITED',
    'RETRY_AFTER_CAP_S',
    'ConnectionWatch',
    'FailureStreak',
    'RetryingModel',
    'RunStoppedError',
    'call_deadline',
    'cap_echoed',
    'is_retryable',
    'rate_limit_note',
    'retry_after',
    'retrying',
    'with_retries',
)

# Connection failures in a row (across all judges) after which a run stops calling the model.
CONNECTION_FAILURES_TO_STOP = 3


@dataclass
class FailureStreak:
    """Failures in a row: each failure counts one more, a success starts again from none. The one counter
    behind the run's "first failure" rule (`ConnectionWatch`) and the service's circuit breaker
    (`service.reliability.CircuitBreaker`)."""

    failures: int = 0

    def count_failure(self) -> int:
        """One more failure in a row; how many there now are."""
        self.failures += 1
        return self.failures

    def succeeded(self) -> None:
        self.failures = 0


@dataclass
class ConnectionWatch(FailureStreak):
    """The "first failure" rule, shared by every judge of a run: after `limit` connection failures in a
    row (no success in between) `stopped` holds the one reason, and no new model call is made."""

    limit: int = CONNECTION_FAILURES_TO_STOP
    stopped: str | None = None

    def failed(self, where: str, error: BaseException) -> None:
        self.count_failure()
        if self.stopped is None and self.failures >= self.limit:
            detail = str(error).strip() or type(error).__name__
            self.stopped = (
                f'stopped calling the judge model: {where} could not be reached {self.failures} times in a row '
                f'({type(error).__name__}: {detail})'
            )


# Attempts in all (the first and two retries): enough to ride out a blip, few enough that a dead
# server costs a run seconds per call, not minutes.
ATTEMPTS = 3
# The first backoff's upper bound; each retry doubles it (full jitter: a random wait below it).
BASE_BACKOFF_S = 1.0
# Backoff never waits longer than this without the server asking.
BACKOFF_CAP_S = 30.0
# The longest `Retry-After` we honour: a rate limit of a minute is waited out, an hour is not (the
# call ends as an error naming the limit, and the run goes on).
RETRY_AFTER_CAP_S = 60.0

T = TypeVar('T')


class RunStoppedError(ModelCallError):
    """No attempt was made: the run's "first failure" rule had already stopped calling the model."""


def is_retryable(e: BaseException) -> bool:
    """Whether another attempt could get a different answer (see the module docstring)."""
    import openai

    if isinstance(e, ModelHTTPError) and e.provider_retry_hint is False:
        return False
    if isinstance(e, ModelQuotaExceededError | ModelRequestRejectedError):
        return False
    if isinstance(e, ModelRateLimitError | ModelUnavailableError | ModelServerError | ModelConnectionError | ModelRequestTimeout):
        return True
    if isinstance(e, ModelHTTPError):
        return _retryable_status(e.status_code)
    if isinstance(e, ModelAPIError):
        return False
    if isinstance(e, openai.APIStatusError):
        return _retryable_status(e.status_code)
    if isinstance(e, openai.APIConnectionError):  # includes the SDK's timeouts
        return True
    if isinstance(e, httpx2.HTTPStatusError):
        return _retryable_status(e.response.status_code)
    return isinstance(e, httpx2.TransportError | ConnectionError)


def _retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


def retry_after(e: BaseException | None) -> float | None:
    """Seconds the server asked to wait before the next attempt, if it said (uncapped)."""
    if isinstance(e, ModelAPIError):
        return e.retry_after
    headers: Any = None
    import openai

    if isinstance(e, openai.APIStatusError | httpx2.HTTPStatusError):
        headers = e.response.headers
    if headers is None:
        return None
    from pydantic_ai.exceptions import _parse_retry_after  # the parser pydantic-ai reads its own errors with

    return _parse_retry_after({k.lower(): v for k, v in headers.items()})


# The loop time by which the current judge call must be done (`evaluators.base.call_model` sets it around a
# call, `call_deadline` around other work): a server asking to wait past it is not waited for — its 429 is
# the call's answer.
CALL_DEADLINE: ContextVar[float | None] = ContextVar('sensei_eval_call_deadline', default=None)

# The one word for a call the server refused with 429, wherever it is reported (the note's first words).
RATE_LIMITED = 'rate-limited'


@contextlib.contextmanager
def call_deadline(seconds: float) -> Iterator[None]:
    """Within the block (on the running loop), model calls must be done `seconds` from now: a `Retry-After`
    past that is not waited for (an earlier deadline already set stays). For work that runs model calls under
    its own timeout without `evaluators.base.call_model` (the service's scorings)."""
    at = asyncio.get_running_loop().time() + seconds
    current = CALL_DEADLINE.get()
    token = CALL_DEADLINE.set(at if current is None else min(current, at))
    try:
        yield
    finally:
        CALL_DEADLINE.reset(token)


def _status(e: BaseException) -> int | None:
    """The HTTP status of a model error, when it has one."""
    import openai

    if isinstance(e, ModelHTTPError):
        return e.status_code
    if isinstance(e, openai.APIStatusError):
        return e.status_code
    if isinstance(e, httpx2.HTTPStatusError):
        return e.response.status_code
    return 429 if isinstance(e, ModelRateLimitError) else None


def rate_limit_note(e: BaseException, *, attempts: int | None = None, left_s: float | None = None) -> str | None:
    """The note a call that ended on a 429 carries (None for any other error): `rate-limited (429)`, the wait
    the server asked for, and why it was not waited (`left_s`: what was left of the call's deadline) or how
    many attempts were refused (`attempts`)."""
    if _status(e) != 429:
        return None
    asked = retry_after(e)
    wait = f'the server asked to wait {asked:g} s before another attempt (Retry-After)' if asked is not None else ''
    if left_s is not None:
        return f'{RATE_LIMITED} (429): {wait}, longer than the {max(left_s, 0):.0f} s left of this call (--timeout): not retried'
    tries = f' after {attempts} attempts' if attempts and attempts > 1 else ''
    return f'{RATE_LIMITED} (429){tries}' + (f'; {wait}' if wait else '')


class _PastDeadline(stop_base):
    """tenacity stop condition: the server asked to wait longer than the call has left. The error is re-raised
    with a note saying so (`rate_limit_note`), never waited out into a timeout."""

    def __call__(self, state: RetryCallState) -> bool:
        deadline = CALL_DEADLINE.get()
        error = state.outcome.exception() if state.outcome else None
        asked = retry_after(error)
        if deadline is None or asked is None or error is None:
            return False
        left = deadline - asyncio.get_running_loop().time()
        if asked < left:  # what the server asked for, not the capped wait: a retry before it would be refused again
            return False
        note = rate_limit_note(error, left_s=left) or (
            f'the server asked to wait {asked:g} s before another attempt (Retry-After), '
            f'longer than the {max(left, 0):.0f} s left of this call (--timeout): not retried'
        )
        error.add_note(note)
        return True


def _wait(base_s: float, cap_s: float) -> Callable[[RetryCallState], float]:
    backoff = wait_random_exponential(multiplier=base_s, max=min(BACKOFF_CAP_S, base_s * 2**10))

    def wait(state: RetryCallState) -> float:
        asked = retry_after(state.outcome.exception() if state.outcome else None)
        if asked is not None:
            return min(asked, cap_s)
        return float(backoff(state))

    return wait


def retrying(
    *,
    attempts: int | None = None,
    base_s: float | None = None,
    retry_after_cap_s: float | None = None,
    retry: Callable[[BaseException], bool] = is_retryable,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> AsyncRetrying:
    """The policy as a tenacity controller; the last error is re-raised as it was. Unset numbers are the
    module's constants, read now (so a test can set them)."""
    cap_s = RETRY_AFTER_CAP_S if retry_after_cap_s is None else retry_after_cap_s
    return AsyncRetrying(
        stop=stop_after_attempt(max(1, ATTEMPTS if attempts is None else attempts)) | _PastDeadline(),
        wait=_wait(BASE_BACKOFF_S if base_s is None else base_s, cap_s),
        retry=retry_if_exception(retry),
        sleep=sleep,
        reraise=True,
    )


async def with_retries(fn: Callable[[], Awaitable[T]], **policy: Any) -> T:
    """`await fn()` under the policy (keyword arguments as `retrying`). `fn` may be any callable returning
    an awaitable (a lambda, a partial): tenacity awaits only what a coroutine function returns."""

    async def attempt() -> T:
        return await fn()

    result: T = await retrying(**policy)(attempt)
    return result


# The most characters of an earlier answer (and of a retry prompt's echo of it) sent back to the model when
# pydantic-ai asks again for valid output: the model needs to see what it got wrong, not all of it. A broken
# or hostile server answering 60 MB would otherwise be sent 60 MB, then 120 MB, on the retries.
MAX_ECHO_CHARS = 20_000


def _cut(text: str) -> str:
    if len(text) <= MAX_ECHO_CHARS:
        return text
    return f'{text[:MAX_ECHO_CHARS]}\n[... {len(text) - MAX_ECHO_CHARS:,} more characters of this answer not repeated ...]'


def cap_echoed(messages: list[ModelMessage]) -> list[ModelMessage]:
    """`messages` with every earlier answer's text and tool-call arguments, and every retry's feedback (a
    retry prompt, a retried tool return), cut to `MAX_ECHO_CHARS` (copies; the same list when nothing is
    over). The prompt itself and real tool results are never cut."""
    from dataclasses import replace

    from pydantic_ai.messages import ModelRequest, TextPart, ToolCallPart

    def as_text(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, default=str)

    def cut_part(part: Any) -> Any:
        if isinstance(part, TextPart) and len(part.content) > MAX_ECHO_CHARS:
            return replace(part, content=_cut(part.content))
        if isinstance(part, ToolCallPart) and part.args is not None:
            args = as_text(part.args)
            if len(args) > MAX_ECHO_CHARS:
                return replace(part, args=_cut(args))
        kind = type(part).__name__
        retried = kind in ('RetryPromptPart', 'RetryFeedbackPart') or getattr(part, 'outcome', None) == 'retried'
        if retried and hasattr(part, 'content'):
            content = as_text(part.content)
            if len(content) > MAX_ECHO_CHARS:
                return replace(part, content=_cut(content))
        return part

    out: list[ModelMessage] = []
    changed = False
    for message in messages:
        parts = [cut_part(p) for p in message.parts]
        if any(a is not b for a, b in zip(parts, message.parts, strict=True)):
            changed = True
            if isinstance(message, ModelRequest):  # noqa: SIM114  (one branch per type: mypy types `replace` per class)
                message = replace(message, parts=parts)
            elif isinstance(message, ModelResponse):
                message = replace(message, parts=parts)
        out.append(message)
    return out if changed else messages


class RetryingModel(WrapperModel):
    """A model whose every request is retried under the policy, counting connection failures in `watch`.
    A streamed request is not retried (its first chunks may already be used)."""

    def __init__(self, wrapped: Model, watch: ConnectionWatch | None = None, where: str = '', **policy: Any) -> None:
        super().__init__(wrapped)
        self.watch = watch
        self.where = where or wrapped.model_name
        self.policy = policy

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        watch = self.watch
        messages = cap_echoed(messages)

        async def attempt() -> ModelResponse:
            if watch is not None and watch.stopped is not None:
                raise RunStoppedError(watch.stopped)
            try:
                response = await self.wrapped.request(messages, model_settings, model_request_parameters)
            except ModelConnectionError as e:
                if watch is not None:
                    watch.failed(self.where, e)
                    if watch.stopped is not None:
                        raise RunStoppedError(watch.stopped) from e
                raise
            except ModelAPIError:
                if watch is not None:
                    watch.succeeded()  # the server answered
                raise
            if watch is not None:
                watch.succeeded()
            return response

        # The first attempt runs outside the controller: almost every request succeeds at once, and building
        # and driving a tenacity controller cost ~45 us a request. When it fails, the controller starts with
        # that failure replayed as its own first attempt, so the policy (what is retried, the waits, the
        # number of attempts, the notes below) is exactly the controller's.
        try:
            return await attempt()
        except Exception as e:
            first: Exception = e
        replayed = False

        async def replay_then_attempt() -> ModelResponse:
            nonlocal replayed
            if not replayed:
                replayed = True
                raise first
            return await attempt()

        controller = retrying(**self.policy)
        try:
            response: ModelResponse = await controller(replay_then_attempt)
        except Exception as e:
            tries = controller.statistics.get('attempt_number', 1)
            noted = any(n.startswith(RATE_LIMITED) for n in getattr(e, '__notes__', ()))
            limited = None if noted else rate_limit_note(e, attempts=tries)
            if limited is not None:
                e.add_note(limited)
            elif tries > 1 and not isinstance(e, RunStoppedError):
                e.add_note(f'after {tries} attempts')
            elif isinstance(e, ModelAPIError) and not is_retryable(e):
                e.add_note('cannot be retried: the same request gets the same answer')
            raise
        return response

    def __repr__(self) -> str:
        return f'RetryingModel({self.wrapped!r})'
