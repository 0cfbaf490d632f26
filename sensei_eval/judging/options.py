"""The options of one judge run, in one object (changed with `dataclasses.replace`): what the CLI resolves
from its flags and every layer below (runner, Ray workers, agent runs, validator, optimizer) carries
instead of a dozen loose arguments.

The model's transcript budget and per-call deadline (`--max-transcript-tokens`, `--timeout`) travel on
the resolved `JudgeModel` (`transcript_budget`, `call_timeout_s`), and `--fuse` on the judges (a fused
judge is one entry of `judges`): each option has one home."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from opentelemetry.trace import TracerProvider

from sensei_eval.evaluators.base import Judge
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.profiles import DEFAULT_PROFILE, Profile
from sensei_eval.models.judge_model import JudgeModel

__all__ = ('JudgeRunOptions',)


@dataclass(frozen=True)
class JudgeRunOptions:
    """How a run judges: `judges` (fused ones included) with `model` (None: deterministic checks only),
    `cache` (None: no cache), `concurrency` model calls in flight (None: the model's default), every
    record judged `repeat` times under the agent `profile` (`profiles`: the ones a record's
    `metadata.profile` may name besides the built-ins), at most `window` records in flight (None: twice
    the concurrency, at least 8), and spans to `tracer_provider` (None: the global one)."""

    judges: Sequence[Judge] = ()
    model: JudgeModel | None = None
    cache: JudgeCache | None = None
    concurrency: int | None = None
    repeat: int = 1
    profile: Profile = DEFAULT_PROFILE
    profiles: Mapping[str, Profile] | None = None
    window: int | None = None
    tracer_provider: TracerProvider | None = None
