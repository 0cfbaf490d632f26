"""Reliable model calls for the service: the process-wide circuit breaker in front of the judge model.

`ReliableModel` wraps the judge model (a pydantic-ai `WrapperModel`), so every model request a judge
makes — both turns of the freeform scorer, every failure-mode judge — passes the `CircuitBreaker`,
shared by the whole process. Retrying is not done here: the model it wraps is the judge model behind
the one retry policy of `sensei_eval.models.retry` (`JudgeModel.retrying_model`; the service's
`model_attempts` and `retry_backoff_s` set its attempts and backoff), so the breaker sees one outcome
per model call, after its attempts:

* a call that still fails for a reason that may pass (`retry.is_retryable`: 5xx, 429, a connection
  error) is one failure; after `threshold` failed calls in a row the breaker opens: calls fail at once
  with `CircuitOpenError`, without touching the model, until `reset_s` has passed; then it is
  half-open and lets one trial call through. The trial's success closes it; its failure opens it
  again for another `reset_s`;
* an error that retrying cannot fix (a rejected key, a bad request) says nothing about the model's
  health and is passed on as it is.

A judge turns these exceptions into an error result (never a score); the worker stores its message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, infer_model
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from sensei_eval.core.errors import ModelCallError
from sensei_eval.models.retry import FailureStreak, is_retryable

__all__ = ('CircuitBreaker', 'CircuitOpenError', 'ReliableModel')


class CircuitOpenError(ModelCallError):
    """The breaker is open: the call was refused without reaching the model."""


class CircuitBreaker(FailureStreak):
    """Closed → open after `threshold` consecutive failures → half-open after `reset_s` → closed or open."""

    def __init__(self, threshold: int = 5, reset_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.threshold = threshold
        self.reset_s = reset_s
        self._clock = clock
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
        self.succeeded()
        self._opened_at = None
        self._trial_in_flight = False

    def record_failure(self, trial: bool = False) -> None:
        if self.count_failure() >= self.threshold or trial:
            self._opened_at = self._clock()
        if trial:
            self._trial_in_flight = False

    def release_trial(self) -> None:
        """A trial call ended without a verdict on the model's health (cancelled, or a client error)."""
        self._trial_in_flight = False


class ReliableModel(WrapperModel):
    """The judge model behind the shared circuit breaker (retries: `sensei_eval.models.retry`, one layer down)."""

    def __init__(self, wrapped: Model | str, *, breaker: CircuitBreaker) -> None:
        super().__init__(wrapped if isinstance(wrapped, Model) else infer_model(wrapped))
        self.breaker = breaker

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        trial = self.breaker.before_call()
        try:
            response = await super().request(messages, model_settings, model_request_parameters)
        except asyncio.CancelledError:
            if trial:
                self.breaker.release_trial()
            raise
        except Exception as e:
            if is_retryable(e):
                self.breaker.record_failure(trial=trial)
            elif trial:
                self.breaker.release_trial()
            raise
        self.breaker.record_success()
        return response

    def __repr__(self) -> str:
        return f'ReliableModel({self.wrapped!r})'
