"""The record engine: one record judged by a set of judges into its `RecordReport`, the same way on every surface.

`judge_record(record, judges, options)` is what every way in calls, directly or through the run
(`judging.runner`: `sensei-eval judge`, `--ray`, validate, the optimizer, the service, online
evaluation) or through a judge's pydantic-evals `evaluate()` (`judging.evaluation`). For one record
(× repeat) it

* picks the record's **agent profile** (its own `metadata.profile`, else the run's;
  `sensei_eval.judging.profiles`): checks outside it and LLM judges it does not run are listed as
  skipped, an unknown profile name is an error in the report, never a silent fallback;
* **plans the calls**: a judge that does not apply (`applies_to`) is skipped with why; with no model (and no
  remote workers holding one) every judge that needs one is skipped, its reason `NO_JUDGE_MODEL`;
  a fused judge (several failure modes in one model call) is narrowed to the members that apply
  (`restricted_to`), so no rubric is paid for and thrown away;
* renders the **transcript** once, cut to the model's budget, which every LLM judge reads (byte-identical:
  the shared prefix), while the deterministic checks read the whole run; each judge then **fits** its
  prompt to the model's context (`models.fitting`);
* answers each call from the **cache** first (`judging.cache.JudgeCache`, keyed by criteria hash, model,
  settings, transcript and repeat; a fused judge's members each under their own hash, the call skipped
  only when every member is cached), else calls the judge under the run's semaphore;
* builds the **report** with the one verdict model (`core.reports.build_report` → `core.verdicts`).

A judge that raises instead of returning an error result is caught and reported as an error, never a
verdict: one bad judge never takes the run down. Deterministic checks are not cached: they cost less than
a cache entry and read fields (expected calls, metadata) the transcript hash does not cover.

The model calls can be made elsewhere (`RecordJudging(remote=...)`, e.g. Ray workers:
`sensei_eval.judging.ray_engine`): the calls a record needs and the cache does not answer go out together
as `JudgeCall`s and come back as results; the other side makes them with `RemoteJudgeCalls`, the same
per-call code. Every record and judge call is an OpenTelemetry span (`sensei_eval.judging.telemetry`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from opentelemetry.trace import Tracer

from sensei_eval.core.errors import ConfigError, describe_error
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, build_report
from sensei_eval.core.transcript import Transcript, render_transcript
from sensei_eval.evaluators.base import Judge
from sensei_eval.judging import telemetry
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions, members_of, report_judges
from sensei_eval.judging.profiles import BUILTIN_PROFILES, DEFAULT_PROFILE, Profile
from sensei_eval.models.judge_model import NO_JUDGE_MODEL, JudgeModel

__all__ = (
    'JudgeCall',
    'JudgeEvent',
    'RecordJudging',
    'RemoteJudge',
    'RemoteJudgeCalls',
    'count_judge_calls',
    'judge_record',
    'members_of',
    'record_profile',
    'report_judges',
)


async def judge_record(
    record: QueryRecord,
    judges: Sequence[Judge] | None = None,
    options: JudgeRunOptions | None = None,
    *,
    repeat: int = 1,
    run_id: str = 'record',
) -> RecordReport:
    """`record` judged by `judges` (default: `options.judges`) under `options` (model, cache, profile,
    fusing): its report, as a run writes it (see the module docstring). `repeat` is which repeat this is
    (it keys the cache). The run-wide rule (the same reasoning on every record) needs a run:
    `runner.judge_records`."""
    options = options or JudgeRunOptions()
    if judges is not None:
        options = replace(options, judges=judges)
    options = options.fused(model=options.model is not None)
    report, _ = await RecordJudging(options, run_id=run_id).report(record, repeat)
    return report


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """One judge call a record needs, named so that another process holding the run's judges and
    profiles makes the same call (`RemoteJudgeCalls`): the judge's place in the run's judges, the profile
    that configures it, and for a fused judge the members judged (`narrowed`: restricted to them)."""

    judge: int
    profile: str
    members: tuple[str, ...] = ()
    narrowed: bool = False


class RemoteJudge(Protocol):
    """Makes a record's uncached model calls elsewhere (`sensei_eval.judging.ray_engine`): one result list per
    call, in order. Raising is a lost call: each of its judges reports an error, never a verdict."""

    def __call__(
        self, record: QueryRecord, transcript: Transcript, calls: list[JudgeCall], repeat: int
    ) -> Awaitable[list[list[JudgeResult]]]: ...


@dataclass(frozen=True)
class JudgeEvent:
    """Progress: one judge finished on one record."""

    query_id: str
    repeat: int
    result: JudgeResult


_PlannedCall = tuple[Judge, list[Judge], JudgeCall]
"""A call a record needs: the judge (configured by the record's profile), its active members, and its name."""


class RecordJudging:
    """The engine of one run, record by record: a record's profile, the calls it needs (`plan`), the
    calls made (locally through the cache, or by `remote`), its report built (`report`). The judges of
    `options` are used as they are: fusing is `JudgeRunOptions.fused`'s, applied by the caller."""

    def __init__(
        self,
        options: JudgeRunOptions,
        *,
        run_id: str,
        on_judge: Callable[[JudgeEvent], None] | None = None,
        remote: RemoteJudge | None = None,
    ) -> None:
        model = options.model
        limit = max(1, options.concurrency or (model.default_concurrency if model else 4))
        self.window = max(1, options.window or max(8, 2 * limit))
        self.judges, self.model, self.profile = options.judges, model, options.profile
        self.run_id, self.on_judge, self.remote = run_id, on_judge, remote
        tracer = telemetry.get_tracer(options.tracer_provider)
        self.caller = _Caller(model, asyncio.Semaphore(limit), options.cache, tracer)
        self.budget = model.transcript_budget if model else None
        self.known = _known_profiles(options.profile, options.profiles)
        self._configured: dict[tuple[str, int], Judge] = {}
        # no model here and none on remote workers: the judges that need one are skipped (module docstring)
        self.no_model = model is None and remote is None

    @property
    def model_name(self) -> str | None:
        return self.model.name if self.model else None

    def for_profile(self, profile: Profile, judge: Judge) -> Judge:
        """`judge` as `profile` configures it (configured once per profile and judge)."""
        key = (profile.name, id(judge))
        if key not in self._configured:
            self._configured[key] = profile.configure(judge)
        return self._configured[key]

    async def report(self, record: QueryRecord, rep: int = 1) -> tuple[RecordReport, dict[int, str] | None]:
        """The record's report (and who spoke at which step, for a report rebuilt later); a record that
        breaks rendering or reporting is reported as an error of each judge (the run goes on)."""
        try:
            return await self._report(record, rep)
        except Exception as e:  # defence in depth: one record that breaks rendering or reporting never stops the run
            return self._crash_report(record, rep, f'the record could not be judged ({describe_error(e, limit=200)})'), None

    def _crash_report(self, record: QueryRecord, rep: int, message: str) -> RecordReport:
        results = [_crashed(m, self.model, message) for j in self.judges for m in (members_of(j) or [j])]
        try:
            report = build_report(record, results, run_id=self.run_id, repeat=rep, model=self.model_name)
        except Exception:
            bare = record.model_copy(update={'messages': []})
            report = build_report(bare, results, run_id=self.run_id, repeat=rep, model=self.model_name)
        report.errors.append(message)
        return report

    async def _report(self, record: QueryRecord, rep: int) -> tuple[RecordReport, dict[int, str] | None]:
        """Render the record once, make the calls its profile and rules ask for, build its report."""
        transcript = render_transcript(record, budget_tokens=self.budget)
        chosen, problems = _record_profile(record, self.profile, self.known)
        calls, skipped = self.plan(record, chosen)
        with telemetry.record_span(
            self.caller.tracer, query_id=record.query_id, repeat=rep, profile=chosen.name, run_id=self.run_id
        ) as span:
            results = await self._make_calls(calls, record, transcript, rep)
            telemetry.end_record_span(span, results, len(skipped), problems)
        report = build_report(
            record,
            results,
            run_id=self.run_id,
            repeat=rep,
            model=self.model_name,
            transcript=transcript,
            skipped=skipped,
            profile=chosen.name,
        )
        report.errors.extend(problems)
        return report, transcript.speakers or None

    def plan(self, record: QueryRecord, chosen: Profile) -> tuple[list[_PlannedCall], dict[str, str]]:
        """The calls `record` needs under `chosen`, and why each judge left out was skipped."""
        skipped: dict[str, str] = {}
        calls: list[_PlannedCall] = []
        for index, judge in enumerate(self.for_profile(chosen, j) for j in self.judges):
            members = members_of(judge)
            active = []
            for target in members or [judge]:
                why = (NO_JUDGE_MODEL if self.no_model and target.needs_model else None) or (
                    chosen.skip_reason(target) or target.applies_to(record)
                )
                if why is None:
                    active.append(target)
                else:
                    skipped[target.name] = why
            call = _planned_call(judge, index, chosen.name, members, active)
            if call is not None:
                calls.append(call)
        return calls, skipped

    async def _make_calls(
        self, calls: list[_PlannedCall], record: QueryRecord, transcript: Transcript, rep: int
    ) -> list[JudgeResult]:
        """Every planned call's results, flat, in call order; each result told to `on_judge` as it lands."""
        if self.remote is None:
            seen = _SeenBy(record, transcript)
            done = await asyncio.gather(*(self._tracked(j, m, record, seen(j), rep) for j, m, _ in calls))
        else:
            done = await self.caller.call_remote(calls, record, transcript, rep, self.remote)
            self._tell(record, rep, [r for group in done for r in group])
        return [r for group in done for r in group]

    async def _tracked(
        self, judge: Judge, members: list[Judge], record: QueryRecord, transcript: Transcript, rep: int
    ) -> list[JudgeResult]:
        results = await self.caller.call(judge, members, record, transcript, rep)
        self._tell(record, rep, results)
        return results

    def _tell(self, record: QueryRecord, rep: int, results: Iterable[JudgeResult]) -> None:
        if self.on_judge is not None:
            for result in results:
                self.on_judge(JudgeEvent(record.query_id, rep, result))


class _SeenBy:
    """The transcript each judge of a record reads: the model's judges the one cut to the model's budget,
    the deterministic checks the whole run (a final answer cut to its head would fail citation_check on a
    run that cites its sources); the whole run is rendered only when a cut happened and a check needs it."""

    def __init__(self, record: QueryRecord, transcript: Transcript) -> None:
        self.record, self.transcript = record, transcript
        self._whole: Transcript | None = None

    def __call__(self, judge: Judge) -> Transcript:
        if judge.needs_model or self.transcript.truncation is None:
            return self.transcript
        if self._whole is None:
            self._whole = render_transcript(self.record, budget_tokens=None)
        return self._whole


def _planned_call(judge: Judge, index: int, profile: str, members: list[Judge], active: list[Judge]) -> _PlannedCall | None:
    """The call for one judge of a record (None: nothing of it applies). A fused judge is narrowed to the
    members that apply when it offers `restricted_to`: no rubric paid for and thrown away."""
    if not members:
        return (judge, [], JudgeCall(index, profile)) if active else None
    if len(active) < len(members) and hasattr(judge, 'restricted_to'):
        narrowed = judge.restricted_to({m.name for m in active}) if active else None
        if narrowed is None:
            return None
        kept = members_of(narrowed)
        return narrowed, kept, JudgeCall(index, profile, tuple(m.name for m in kept), True)
    if active:
        return judge, active, JudgeCall(index, profile, tuple(m.name for m in active))
    return None


class RemoteJudgeCalls:
    """The other side of `judge_stream(remote=...)`: makes the judge calls a run sends (`JudgeCall`s)
    with the same judges, profiles and per-call code as a local run (crash guard, spans), no cache (the
    sending side has one: `options.cache` is not used). `options.concurrency` bounds the model calls in
    flight here, across records. The judges are fused by the run's rule, as the sending side fused them
    (it has remote workers holding a model), so a call's judge index names the same judge here."""

    def __init__(self, options: JudgeRunOptions) -> None:
        model = options.model
        self.judges = list(options.fused(model=True).judges)
        self.known = _known_profiles(options.profile, options.profiles)
        limit = max(1, options.concurrency or (model.default_concurrency if model else 4))
        self.caller = _Caller(model, asyncio.Semaphore(limit), None, telemetry.get_tracer(options.tracer_provider))
        self._configured: dict[tuple[str, int], Judge] = {}

    def resolve(self, call: JudgeCall) -> tuple[Judge, list[Judge]]:
        """The judge (configured by the call's profile) and the members a call names."""
        key = (call.profile, call.judge)
        if key not in self._configured:
            self._configured[key] = self.known[call.profile].configure(self.judges[call.judge])
        judge = self._configured[key]
        if call.narrowed:
            narrowed = judge.restricted_to(set(call.members))  # type: ignore[attr-defined]
            if narrowed is None:
                raise ConfigError(f'{judge.name}: cannot be narrowed to {", ".join(call.members)}')
            judge = narrowed
        wanted = set(call.members)
        return judge, [m for m in members_of(judge) if m.name in wanted] if call.members else []

    async def run(
        self, record: QueryRecord, transcript: Transcript, calls: Sequence[JudgeCall], repeat: int
    ) -> list[list[JudgeResult]]:
        """Each call's results (one, or one per member), in call order."""
        resolved = [self.resolve(c) for c in calls]
        return list(await asyncio.gather(*(self.caller.call(j, m, record, transcript, repeat) for j, m in resolved)))


# ---------------------------------------------------------------------------------------------------
# One judge call


class _Caller:
    """Calls one judge (or one fused judge) on one transcript: cache, semaphore, span, crash guard."""

    def __init__(self, model: JudgeModel | None, semaphore: asyncio.Semaphore, cache: JudgeCache | None, tracer: Tracer | None):
        self.model = model
        self.semaphore = semaphore
        self.cache = cache
        self.tracer = tracer
        self.model_name = model.name if model else '-'
        self.settings: dict[str, Any] = dict(model.settings) if model else {}

    async def call(
        self, judge: Judge, members: list[Judge], record: QueryRecord, transcript: Transcript, rep: int
    ) -> list[JudgeResult]:
        """The results of `judge` (one), or of a fused judge's active `members` (one each, in member order)."""
        model = self.model if judge.needs_model else None
        cached, keys = self._cached(judge, members, record, transcript, rep)
        if cached is not None:
            return cached
        async with self.semaphore:
            with telemetry.judge_span(
                self.tracer, judge, query_id=record.query_id, repeat=rep, model=model, members=members
            ) as span:
                start = time.perf_counter()
                results = await self._invoke(judge, members, record, transcript, model)
                telemetry.end_judge_span(span, judge, results, latency_s=time.perf_counter() - start)
        if self.cache is not None:
            for key, result in zip(keys, results, strict=False):
                self.cache.put(key, result)
        return results

    def _cached(
        self, judge: Judge, members: list[Judge], record: QueryRecord, transcript: Transcript, rep: int
    ) -> tuple[list[JudgeResult] | None, list[str]]:
        """The call's results when the cache holds every one of them (else None), and its cache keys."""
        keys: list[str] = []
        if self.cache is not None and judge.needs_model:
            hashes = _member_hashes(judge, members) if members else [judge.criteria_hash()]
            keys = [JudgeCache.key(h, self.model_name, self.settings, transcript.sha256, rep) for h in hashes]
            hits = [self.cache.get(k) for k in keys]
            cached = [h for h in hits if h is not None]
            if len(cached) == len(keys):
                with telemetry.judge_span(
                    self.tracer, judge, query_id=record.query_id, repeat=rep, model=self.model, members=members
                ) as span:
                    telemetry.end_judge_span(span, judge, cached, latency_s=0.0)
                return cached, keys
            self.cache.hits -= len(cached)  # a partly cached fused judge is called whole: not a hit
        return None, keys

    async def call_remote(
        self,
        calls: Sequence[tuple[Judge, list[Judge], JudgeCall]],
        record: QueryRecord,
        transcript: Transcript,
        rep: int,
        remote: RemoteJudge,
    ) -> list[list[JudgeResult]]:
        """A record's calls with the model calls made by `remote`: the cache is read before and written
        after here, checks (no model) run here, the rest go in one `remote` call."""
        out: list[list[JudgeResult]] = [[] for _ in calls]
        here: list[int] = []
        away: dict[int, list[str]] = {}  # call -> its cache keys
        for i, (judge, members, _) in enumerate(calls):
            if not judge.needs_model:
                here.append(i)
                continue
            cached, keys = self._cached(judge, members, record, transcript, rep)
            if cached is None:
                away[i] = keys
            else:
                out[i] = cached

        async def send() -> list[list[JudgeResult]]:
            if not away:
                return []
            try:
                got = list(await remote(record, transcript, [calls[i][2] for i in away], rep))
                if len(got) != len(away) or any(len(g) != len(calls[i][1] or [0]) for g, i in zip(got, away, strict=False)):
                    raise RuntimeError(f'{len(got)} answer(s) for {len(away)} call(s)')
            except Exception as e:  # a lost call: each of its judges an error, never a verdict
                first = (describe_error(e).splitlines() or [''])[0]
                why = f'not judged: {first}'[:500]
                return [[_crashed(t, self.model, why) for t in calls[i][1] or [calls[i][0]]] for i in away]
            return got

        seen = _SeenBy(record, transcript)  # the checks read the whole run, as in a local run
        local, sent = await asyncio.gather(
            asyncio.gather(*(self.call(calls[i][0], calls[i][1], record, seen(calls[i][0]), rep) for i in here)), send()
        )
        for i, results in zip(here, local, strict=True):
            out[i] = results
        for (i, keys), results in zip(away.items(), sent, strict=True):
            judge, members, _ = calls[i]
            with telemetry.judge_span(
                self.tracer, judge, query_id=record.query_id, repeat=rep, model=self.model, members=members
            ) as span:
                telemetry.end_judge_span(span, judge, results, latency_s=max(r.latency_s for r in results))
            if self.cache is not None:
                for key, result in zip(keys, results, strict=False):
                    self.cache.put(key, result)
            out[i] = results
        return out

    async def _invoke(
        self, judge: Judge, members: list[Judge], record: QueryRecord, transcript: Transcript, model: JudgeModel | None
    ) -> list[JudgeResult]:
        try:
            if not members:
                return [await judge.judge(record, transcript, model)]
            everyone = members_of(judge)
            out = list(await judge.judge_members(record, transcript, model))  # type: ignore[attr-defined]
            if len(out) != len(everyone):
                message = f'fused judge {judge.name} returned {len(out)} result(s) for {len(everyone)} members'
                return [_crashed(m, model, message) for m in members]
            wanted = {m.name for m in members}
            kept = [r for m, r in zip(everyone, out, strict=True) if m.name in wanted]
            dropped = [r for m, r in zip(everyone, out, strict=True) if m.name not in wanted]
            if dropped:  # the call's cost stays counted: a skipped member's usage goes to the first one kept
                usage = {k: sum(getattr(r, k) for r in [kept[0], *dropped]) for k in _USAGE}
                kept[0] = kept[0].model_copy(update=usage)
            return kept
        except Exception as e:  # a judge bug must not sink the run
            return [_crashed(t, model, f'judge crashed: {describe_error(e)}') for t in members or [judge]]


_USAGE = ('input_tokens', 'output_tokens', 'requests')


def _member_hashes(fused: Judge, members: list[Judge]) -> list[str]:
    """The criteria hashes a fused judge's members are cached under: the fused judge's name for each (its
    own hash marked as judged in that fused call) when it has them, so fused and single verdicts never
    mix. All at once: the fused prompt is hashed once, not once per member."""
    of = getattr(fused, 'member_criteria_hashes', None)
    if callable(of):
        return [str(h) for h in of(members)]
    one = getattr(fused, 'member_criteria_hash', None)  # a fused judge of the user's that hashes one at a time
    return [str(one(m)) for m in members] if callable(one) else [m.criteria_hash() for m in members]


def _crashed(judge: Judge, model: JudgeModel | None, message: str) -> JudgeResult:
    return JudgeResult(
        judge=judge.name,
        failure_mode=judge.failure_mode,
        category=judge.category,
        criteria_hash=judge.criteria_hash(),
        model=model.name if model else None,
        status='error',
        error=message,
    )


# ---------------------------------------------------------------------------------------------------
# Profiles and counts


def count_judge_calls(
    records: Iterable[QueryRecord],
    judges: Sequence[Judge],
    profile: Profile = DEFAULT_PROFILE,
    profiles: Mapping[str, Profile] | None = None,
) -> int:
    """How many judge results `judge_records` will produce (per repeat): what a progress bar counts to.
    A fused judge counts once per member it judges (one model call, several results)."""
    known = _known_profiles(profile, profiles)
    total = 0
    for record in records:
        chosen, _ = _record_profile(record, profile, known)
        total += sum(1 for j in report_judges(judges) if chosen.skip_reason(j) is None and j.applies_to(record) is None)
    return total


def record_profile(record: QueryRecord, options: JudgeRunOptions) -> tuple[Profile, list[str]]:
    """The profile `record` is judged under in a run with `options` (its own `metadata.profile` when it names
    a known one, else the run's), and the problem with its choice when there is one."""
    return _record_profile(record, options.profile, _known_profiles(options.profile, options.profiles))


def _known_profiles(profile: Profile, profiles: Mapping[str, Profile] | None) -> dict[str, Profile]:
    """The profiles a record may name: the built-ins, the ones given, and the run's own."""
    return {**BUILTIN_PROFILES, **(profiles or {}), profile.name: profile}


def _record_profile(record: QueryRecord, run_profile: Profile, known: Mapping[str, Profile]) -> tuple[Profile, list[str]]:
    """The record's own profile when it names one (`metadata.profile`), else the run's."""
    name = record.metadata.get('profile')
    if name is None:
        return run_profile, []
    if isinstance(name, str) and name in known:
        return known[name], []
    return run_profile, [
        f'metadata.profile: unknown profile {name!r} (known: {", ".join(known)}); '
        f'judged with {run_profile.name!r} instead, declare it with --profile FILE'
    ]
