"""Which finished agent runs get judged: a sampler that samples evenly, never misses a complaint and keeps
to a budget of judge calls.

Judging every production run costs a model call per judge per run; judging none leaves regressions
unseen. `Sampler.decide` picks, per finished run (a `QueryRecord` from `sensei_eval.core.traces` or any
loader), in this order:

1. **Negative signals, always**: a rating whose lowest dimension is at most `negative_rating`, an
   error status on the run (`metadata.status == 'error'`), or user feedback (`metadata.feedback`). A
   complaint is exactly the run worth judging.
2. **A deterministic share** of the rest: the run's trace id (else its query id) is hashed with
   `salt` to a number in [0, 1); the run is sampled when that is below the rate, the agent's own rate
   (`agents[name].rate`) or else `rate`. The same run gets the same answer in every process and on
   every replay, and over many runs the share converges on the rate.
3. **The budget**: at most `budget_per_hour` judge calls in any sliding hour (`window_s`). A run costs
   the model-judge calls it will make (`runner.count_judge_calls` over its agent's judges and profile;
   deterministic checks cost nothing and are not counted). A sampled run that would go over is not
   judged, and its decision says so. Rate-sampled runs may use only `1 - negative_reserve` of the
   budget, so complaints arriving after a busy spell still find room.

Every decision carries its reason, sampled or not, so a run left unjudged is never a silent gap.
`agents` maps an agent name to its rate, judges and profile (`AgentJudging`); an agent not listed gets
`rate`, `judges` and `profile`. The budget lives behind `CallBudget`: `SlidingWindowBudget` keeps it in
memory (the CLI), the service counts from its store so that restarts and peers share one window.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sensei_eval.core.config import load_config_file
from sensei_eval.core.errors import ConfigError, validation_message
from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.registry import DEFAULT_JUDGES, make_judges, resolve_names
from sensei_eval.judging.profiles import BUILTIN_PROFILES, DEFAULT_PROFILE, Profile
from sensei_eval.judging.record import count_judge_calls

__all__ = (
    'AgentJudging',
    'CallBudget',
    'JudgeSets',
    'SampleDecision',
    'Sampler',
    'SamplerConfig',
    'SamplerConfigError',
    'SlidingWindowBudget',
    'load_sampler_config',
    'trace_fraction',
)

Reason = Literal['negative', 'rate', 'not_sampled', 'budget']
# The model judges made for each judge list (names and groups), as the sampler counts their calls.
JudgeSets = dict[tuple[str, ...], list[Judge]]


class AgentJudging(BaseModel):
    """One agent's sampling rate and the judges (and check profile) its sampled runs go through."""

    model_config = ConfigDict(extra='forbid', frozen=True)

    rate: float | None = Field(default=None, ge=0, le=1)
    judges: tuple[str, ...] | None = None
    profile: str | None = None

    @field_validator('judges')
    @classmethod
    def _known_judges(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            resolve_names(value)  # an unknown name fails here, at configuration time, naming the known ones
        return value

    @field_validator('profile')
    @classmethod
    def _known_profile(cls, value: str | None) -> str | None:
        if value is not None and value not in BUILTIN_PROFILES:
            raise ValueError(f'unknown profile {value!r}; known: {", ".join(BUILTIN_PROFILES)}')
        return value


class SamplerConfig(BaseModel):
    """The sampler's rules (see the module docstring); every field has a usable default."""

    model_config = ConfigDict(extra='forbid', frozen=True)

    rate: float = Field(default=0.1, ge=0, le=1)
    negative_rating: int = Field(default=2, ge=0, le=5)
    sample_errors: bool = True
    sample_feedback: bool = True
    budget_per_hour: int | None = Field(default=None, ge=0)
    negative_reserve: float = Field(default=0.2, ge=0, le=1)
    window_s: float = Field(default=3600.0, gt=0)
    judges: tuple[str, ...] = DEFAULT_JUDGES
    profile: str = DEFAULT_PROFILE.name
    agents: dict[str, AgentJudging] = Field(default_factory=dict)
    salt: str = ''

    @field_validator('judges')
    @classmethod
    def _known_judges(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        resolve_names(value)
        return value

    @field_validator('profile')
    @classmethod
    def _known_profile(cls, value: str) -> str:
        if value not in BUILTIN_PROFILES:
            raise ValueError(f'unknown profile {value!r}; known: {", ".join(BUILTIN_PROFILES)}')
        return value

    def for_agent(self, agent: str | None) -> tuple[float, tuple[str, ...], str]:
        """The rate, judges and profile name that apply to `agent`'s runs."""
        own = self.agents.get(agent) if agent is not None else None
        if own is None:
            return self.rate, self.judges, self.profile
        rate = own.rate if own.rate is not None else self.rate
        return rate, own.judges if own.judges is not None else self.judges, own.profile or self.profile


class SamplerConfigError(ConfigError):
    """A sampler configuration file that cannot be used, naming the file and the field."""


def load_sampler_config(path: str | Path) -> SamplerConfig:
    """A `SamplerConfig` from a YAML, TOML or JSON file; mistakes name the file and the field."""
    path = Path(path)
    data, _ = load_config_file(path, what='sampler configuration', error=SamplerConfigError)
    try:
        return SamplerConfig.model_validate(data or {})
    except ValidationError as e:
        raise SamplerConfigError(validation_message(e), file=str(path)) from None


def trace_fraction(key: str, salt: str = '') -> float:
    """A run's place in [0, 1): the first 8 bytes of SHA-256(salt, key). Uniform, and the same everywhere."""
    digest = hashlib.sha256(f'{salt}\x00{key}'.encode()).digest()
    return int.from_bytes(digest[:8], 'big') / 2**64


class CallBudget(Protocol):
    """Judge calls spent in a sliding window: what the sampler asks before it samples a run."""

    def used(self, at: float, window_s: float) -> int: ...

    def spend(self, at: float, calls: int) -> None: ...


@dataclass
class SlidingWindowBudget:
    """The budget in memory: (time, calls) of each sampled run in the window, and their running sum.

    Runs are expected in time order (the `sample` command sorts them by end time); an entry leaves the
    sum once it is `window_s` old."""

    spent: deque[tuple[float, int]] = field(default_factory=deque)
    total: int = 0

    def used(self, at: float, window_s: float) -> int:
        while self.spent and self.spent[0][0] <= at - window_s:
            self.total -= self.spent.popleft()[1]
        return self.total

    def spend(self, at: float, calls: int) -> None:
        self.spent.append((at, calls))
        self.total += calls


@dataclass(frozen=True)
class SampleDecision:
    """Whether a run is judged, why (or why not), and with what."""

    sampled: bool
    reason: Reason
    detail: str
    judge_calls: int
    judges: tuple[str, ...]
    profile: str
    fraction: float

    def to_json(self) -> dict[str, Any]:
        return {
            'sampled': self.sampled,
            'reason': self.reason,
            'detail': self.detail,
            'judge_calls': self.judge_calls,
            'judges': list(self.judges),
            'profile': self.profile,
            'fraction': round(self.fraction, 6),
        }


class Sampler:
    """Applies a `SamplerConfig` run by run (see the module docstring)."""

    def __init__(
        self, config: SamplerConfig | None = None, budget: CallBudget | None = None, *, judges: JudgeSets | None = None
    ) -> None:
        self.config = config or SamplerConfig()
        self.budget = budget if budget is not None else SlidingWindowBudget()
        # the model judges of each judge list, made on first use; pass a shared dict to make them once
        self._judges: JudgeSets = judges if judges is not None else {}

    @cached_property
    def _profiles(self) -> dict[str, Profile]:
        return dict(BUILTIN_PROFILES)

    def judge_calls(self, record: QueryRecord, judges: tuple[str, ...], profile: str) -> int:
        """The model-judge calls judging `record` will make (checks are free and not counted)."""
        if judges not in self._judges:
            self._judges[judges] = [j for j in make_judges(judges) if j.needs_model]
        return count_judge_calls([record], self._judges[judges], self._profiles[profile])

    def negative_signal(self, record: QueryRecord) -> str | None:
        """Why this run is a complaint (low rating, error, feedback), or None."""
        config = self.config
        if record.rating is not None:
            lowest = record.rating.lowest  # on the 1-5 scale, whatever scale the rating came in
            if lowest <= config.negative_rating:
                return f'rated {lowest:g} (at most {config.negative_rating})'
        if config.sample_errors and record.metadata.get('status') == 'error':
            message = record.metadata.get('status_message')
            return 'the run ended in error' + (f': {str(message)[:120]}' if message else '')
        feedback = record.metadata.get('feedback')
        if config.sample_feedback and isinstance(feedback, str) and feedback.strip():
            return f'user feedback: {feedback.strip()[:120]!r}'
        return None

    def decide(self, record: QueryRecord, *, agent: str | None = None, at: float | None = None) -> SampleDecision:
        """Sample or not, and spend the budget when sampled. `at` is the run's time (seconds since
        the epoch; default now): the budget window slides over it."""
        config = self.config
        agent = agent if agent is not None else _agent_of(record)
        rate, judges, profile = config.for_agent(agent)
        key = str(record.metadata.get('trace_id') or record.query_id)
        fraction = trace_fraction(key, config.salt)
        negative = self.negative_signal(record)
        calls = 0

        def decision(sampled: bool, reason: Reason, detail: str) -> SampleDecision:
            return SampleDecision(sampled, reason, detail, calls if sampled else 0, judges, profile, fraction)

        if negative is None and fraction >= rate:
            return decision(False, 'not_sampled', f'not in the {rate:.0%} sample (hash {fraction:.4f} ≥ {rate:g})')
        calls = self.judge_calls(record, judges, profile)  # only for a run that may be judged: it costs a pass over the judges
        why = f'negative signal: {negative}' if negative else f'in the {rate:.0%} sample (hash {fraction:.4f} < {rate:g})'
        when = time.time() if at is None else at
        if config.budget_per_hour is not None and calls > 0:
            limit = config.budget_per_hour if negative else int(config.budget_per_hour * (1 - config.negative_reserve))
            used = self.budget.used(when, config.window_s)
            if used + calls > limit:
                share = '' if negative else f' (rate-sampled runs may use {limit} of them; the rest is kept for complaints)'
                detail = (
                    f'{why}, but over budget: {used} of {config.budget_per_hour} judge calls used in the last '
                    f'{config.window_s:g} s{share}, and this run needs {calls}'
                )
                return decision(False, 'budget', detail)
        if calls > 0:
            self.budget.spend(when, calls)
        return decision(True, 'negative' if negative else 'rate', why)


def _agent_of(record: QueryRecord) -> str | None:
    agent = record.metadata.get('agent')
    return agent if isinstance(agent, str) and agent else None
