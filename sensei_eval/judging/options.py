"""The options of one judge run, in one object (changed with `dataclasses.replace`): what the CLI resolves
from its flags and every layer below (runner, Ray workers, agent runs, validator, optimizer) carries
instead of a dozen loose arguments.

The model's transcript budget and per-call deadline (`--max-transcript-tokens`, `--timeout`) travel on
the resolved `JudgeModel` (`transcript_budget`, `call_timeout_s`): each option has one home.

Fusing is a rule of the run, not of a surface: with a judge model, the selected LLM judges are judged in one
model call per record (`fuse=None`, the default, when two or more are selected and none is fused already);
`fuse=('none',)` judges each failure mode alone, and `fuse=('output', 'methodology')` (the `--fuse` groups)
fuses as named (`evaluators.registry.fuse_judges`). Measured with a capable model (docs/fused.md), fused
answers were as good as separate ones at 0.30x the input tokens. `JudgeRunOptions.fused` applies the rule
once; the runner and `judge_record` call it, so every way in fuses the same way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from opentelemetry.trace import TracerProvider

from sensei_eval.evaluators.base import FailureModeJudge, Judge
from sensei_eval.evaluators.registry import fuse_judges
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.profiles import DEFAULT_PROFILE, Profile
from sensei_eval.models.judge_model import JudgeModel

__all__ = ('NO_FUSING', 'JudgeRunOptions', 'members_of', 'report_judges')

# `fuse` that judges every failure mode alone (`--fuse none`).
NO_FUSING: tuple[str, ...] = ('none',)


@dataclass(frozen=True)
class JudgeRunOptions:
    """How a run judges: `judges` (fused ones included) with `model` (None: deterministic checks only),
    `cache` (None: no cache), `concurrency` model calls in flight (None: the model's default), every
    record judged `repeat` times under the agent `profile` (`profiles`: the ones a record's
    `metadata.profile` may name besides the built-ins), at most `window` records in flight (None: twice
    the concurrency, at least 8), and spans to `tracer_provider` (None: the global one). `fuse`: which LLM
    judges share a model call (None: all of them when there is a model; see the module docstring)."""

    judges: Sequence[Judge] = ()
    model: JudgeModel | None = None
    cache: JudgeCache | None = None
    concurrency: int | None = None
    repeat: int = 1
    profile: Profile = DEFAULT_PROFILE
    profiles: Mapping[str, Profile] | None = None
    window: int | None = None
    tracer_provider: TracerProvider | None = None
    fuse: Sequence[str] | None = None

    def fused(self, *, model: bool) -> JudgeRunOptions:
        """These options with the fusing rule applied to `judges` (`model`: a judge model will answer, here
        or on remote workers), and `fuse` set to `NO_FUSING` so applying it again changes nothing. Raises
        `FuseSpecError` for a group that names nothing selected."""
        if self.fuse is None:
            llm = sum(isinstance(j, FailureModeJudge) for j in self.judges)
            if not model or llm < 2 or any(members_of(j) for j in self.judges):
                return replace(self, fuse=NO_FUSING)
            return replace(self, judges=fuse_judges(self.judges, ['all']), fuse=NO_FUSING)
        if list(self.fuse) == list(NO_FUSING):
            return self
        return replace(self, judges=fuse_judges(self.judges, self.fuse), fuse=NO_FUSING)


def members_of(judge: Judge) -> list[Judge]:
    """A fused judge's members (several failure modes judged in one model call); empty for any other judge."""
    members = getattr(judge, 'members', None)
    return list(members) if members else []


def report_judges(judges: Iterable[Judge]) -> list[Judge]:
    """The judges whose results a report carries: every judge, a fused one by its members."""
    return [m for j in judges for m in (members_of(j) or [j])]
