"""Reliable model calls for the service: retries with exponential backoff and a circuit breaker.

`ReliableModel` wraps the judge model (a pydantic-ai `WrapperModel`), so every model request a judge
makes — both turns of the freeform scorer, every failure-mode judge — goes through it:

* a failure that may pass (any error except a 4xx other than 408/429, a usage error, or the breaker
  itself) is retried, `attempts` tries in all, sleeping `backoff_s`, then twice that, and so on;
* a call that still fails is one failure for the `CircuitBreaker`, shared by the whole process. After
  `threshold` consecutive failed calls it opens: calls fail at once with `CircuitOpenError`, without
  touching the model, until `reset_s` has passed; then it is half-open and lets one trial call through.
  The trial's success closes it; its failure opens it again for another `reset_s`;
* the final error is raised as `ModelCallFailedError` (not a pydantic-ai transient error), so a judge
  that has its own transient retries does not multiply ours.

A judge turns these exceptions into an error result (never a score); the worker stores its message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from pydantic_ai.exceptions import ModelHTTPError, UserError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, infer_model
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

__all__ = ('CircuitBreaker', 'CircuitOpenError', 'ModelCallFailedError', 'ReliableModel', 'is_retryable')


class CircuitOpenError(RuntimeError):
    """The breaker is open: the call was refused without reaching the model."""


class ModelCallFailedError(RuntimeError):
    """A model call failed on every attempt (or with an error retrying cannot fix)."""


class CircuitBreaker:
    """Closed → open after `threshold` consecutive failures → half-open after `reset_s` → closed or open."""

    def __init__(self, threshold: int = 5, reset_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = threshold
        self.reset_s = reset_s
        self._clock = clock
        self.failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return 'closed'
        return 'half_open' if self._clock() - self._opened_at >= self.reset_s else 'open'

    def before_call(self) -> bool:
        """Raise `CircuitOpenError` if the call may not go ahead; True when it is the half-open trial."""
        state = self.state
        if state == 'closed':
            return False
        if state == 'half_open' and not self._trial_in_flight:
            self._trial_in_flight = True
            return True
        assert self._opened_at is not None
        wait = max(0.0, self.reset_s - (self._clock() - self._opened_at))
        why = 'a trial call is in flight' if state == 'half_open' else f'next trial call in {wait:.1f} s'
        raise CircuitOpenError(f'circuit breaker open after {self.failures} consecutive failed model calls; failing fast ({why})')

    def record_success(self) -> None:
        self.failures = 0
        self._opened_at = None
        self._trial_in_flight = False

    def record_failure(self, trial: bool = False) -> None:
        self.failures += 1
        if trial or self.failures >= self.threshold:
            self._opened_at = self._clock()
        if trial:
            self._trial_in_flight = False

    def release_trial(self) -> None:
        """A trial call ended without a verdict on the model's health (cancelled, or a client error)."""
        self._trial_in_flight = False


def is_retryable(e: BaseException) -> bool:
    """Whether another attempt could succeed: not for usage errors or 4xx answers other than 408/429."""
    if isinstance(e, CircuitOpenError | UserError | ModelCallFailedError):
        return False
    if isinstance(e, ModelHTTPError):
        return not (400 <= e.status_code < 500) or e.status_code in (408, 429)
    return isinstance(e, Exception)


class ReliableModel(WrapperModel):
    """The judge model behind retries and a shared circuit breaker."""

    def __init__(
        self,
        wrapped: Model | str,
        *,
        breaker: CircuitBreaker,
        attempts: int = 3,
        backoff_s: float = 1.0,
    ) -> None:
        super().__init__(wrapped if isinstance(wrapped, Model) else infer_model(wrapped))
        self.breaker = breaker
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        delay = self.backoff_s
        last: Exception | None = None
        for attempt in range(1, self.attempts + 1):
            trial = self.breaker.before_call()
            try:
                response = await super().request(messages, model_settings, model_request_parameters)
            except asyncio.CancelledError:
                if trial:
                    self.breaker.release_trial()
                raise
            except Exception as e:
                last = e
                if not is_retryable(e):
                    if trial:
                        self.breaker.release_trial()
                    raise ModelCallFailedError(f'model call failed and cannot be retried: {_describe(e)}') from e
                if trial or attempt == self.attempts:
                    self.breaker.record_failure(trial=trial)
                    if attempt == self.attempts or self.breaker.state != 'closed':
                        break
                await asyncio.sleep(delay)
                delay *= 2
            else:
                self.breaker.record_success()
                return response
        assert last is not None
        raise ModelCallFailedError(f'model call failed {attempt} time(s); last error: {_describe(last)}') from last

    def __repr__(self) -> str:
        return f'ReliableModel({self.wrapped!r})'


def _describe(e: BaseException) -> str:
    text = str(e).strip() or repr(e)
    return f'{type(e).__name__}: {text[:500]}'
