"""Run judges over records as a stream: bounded work in flight, a report written the moment a record is done.

Records are read, judged and written one after another, with at most `window` records (× repeat) in
flight, so a run of any size holds the same memory: each report is written to the run folder and
dropped, and the run summary is counted as the reports go by (`reports.RunTally`). `judge_stream` is
that entry point (the CLI's); `judge_records` runs the same stream for small inputs and returns every
report, in record order.

Each record (× repeat) is rendered to a transcript once, with the model's budget, and every judge of
that record reads the same bytes. Judge calls share one semaphore of size `concurrency`; records are
started in order and asyncio's semaphore is first-come first-served, so a record's judges run close
together, which is what lets a single-slot local server (and provider caches) reuse the shared prefix.
A judge that raises instead of returning an error result is still caught and reported as an error:
one bad judge never takes the run down.

A fused judge (a judge with non-empty `members`: several failure modes judged in one model call) is
called once through `judge_members`, which returns one result per member; each member is cached under
its own criteria hash (`member_criteria_hash` when the fused judge has one; the call is skipped when
every member is cached), skipped by its own profile and `applies_to` rules (the fused judge is narrowed
to the members that apply when it offers `restricted_to`), and reported as its own judge.

With no model (`JudgeRunOptions.model` None, and no Ray workers holding one) the deterministic checks judge
and every judge that needs a model is listed as skipped in each report, its reason `NO_JUDGE_MODEL` (what
was missing and how to name a model): it did not run, which is neither a pass nor an error.

Each record runs under an agent profile (`sensei_eval.judging.profiles`): its own `metadata.profile`, else the
run's. Checks outside the profile are listed as skipped in the report; an unknown profile name is an
error in that record's report, never a silent fallback. Deterministic checks are not cached: they cost
less than a cache entry, and they read fields (expected calls, metadata) that the transcript hash does
not cover.

Once every record is done, a model judge that gave the same reasoning on every verdict of the run (over
three or more different transcripts) has those verdicts marked inconclusive. The runner keeps, per
model judge, only the first reasoning, whether every later one matched, and which reports it is in;
only those reports are read back, rewritten and re-counted.

The model calls can be made elsewhere (`judge_stream(remote=...)`, e.g. on a Ray cluster:
`sensei_eval.judging.ray_engine`): the calls a record needs and the cache does not answer go out together as
`JudgeCall`s and come back as results; the other side makes them with `RemoteJudgeCalls`, the same
per-call code. Transcripts, cache, checks, reports and the summary stay in this process.

Every record and every judge call is an OpenTelemetry span (`sensei_eval.judging.telemetry`): free when no
tracer provider is configured.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from opentelemetry.trace import Tracer

from sensei_eval.core.errors import ConfigError, describe_error
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, RunTally, build_report, rebuild_report
from sensei_eval.core.transcript import Transcript, render_transcript
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.inconclusive import MIN_RECORDS_FOR_SAME_TEXT, normalise
from sensei_eval.judging import telemetry
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import BUILTIN_PROFILES, DEFAULT_PROFILE, Profile
from sensei_eval.judging.run_folder import RunFolder
from sensei_eval.models.judge_model import NO_JUDGE_MODEL, JudgeModel

__all__ = (
    'JudgeCall',
    'JudgeEvent',
    'RemoteJudge',
    'RemoteJudgeCalls',
    'StreamedRun',
    'count_judge_calls',
    'judge_records',
    'judge_stream',
    'members_of',
    'report_judges',
)

Records = Iterable[QueryRecord] | AsyncIterable[QueryRecord]


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


@dataclass
class StreamedRun:
    """What a streamed run keeps: the summary's counts, and what the run-wide rule changed.

    `tally.summary(...)` is the run's `RunSummary`; `same_text` maps each judge whose verdicts were
    marked inconclusive (the same reasoning on every record) to how many verdicts that was."""

    tally: RunTally
    reports: int = 0
    same_text: dict[str, int] = field(default_factory=dict)


def members_of(judge: Judge) -> list[Judge]:
    """A fused judge's members (several failure modes judged in one model call); empty for any other judge."""
    members = getattr(judge, 'members', None)
    return list(members) if members else []


def report_judges(judges: Iterable[Judge]) -> list[Judge]:
    """The judges whose results a report carries: every judge, a fused one by its members."""
    return [m for j in judges for m in (members_of(j) or [j])]


async def judge_stream(
    records: Records,
    options: JudgeRunOptions,
    *,
    run_dir: RunFolder | Path,
    run_id: str | None = None,
    on_judge: Callable[[JudgeEvent], None] | None = None,
    on_report: Callable[[RecordReport, Path | None], None] | None = None,
    remote: RemoteJudge | None = None,
) -> StreamedRun:
    """Judge a stream of records in constant memory: every report goes to the run folder, none is kept.

    `records` may be any iterable (a generator over a file: `datasets.iter_datasets`) or async iterable.
    At most `options.window` records (× repeat) are in flight (default: twice the concurrency, at least 8).
    `on_report` sees each report in record order, and again when the run-wide rule rewrites it. The
    run id defaults to the folder's name. Returns the counts `summary.json` is built from.

    `remote`: the model calls a record needs and the cache does not answer are made there (a Ray
    cluster: `sensei_eval.judging.ray_engine`), all of one record in one go; everything else (transcripts,
    cache, checks, reports, the summary) stays here, so the run folder is the one a local run writes."""
    folder = run_dir if isinstance(run_dir, RunFolder) else RunFolder(run_dir)
    store = _FolderStore(folder)
    return await _judge_run(
        records, options, run_id=run_id or folder.run_id, store=store, hooks=_Hooks(on_judge, on_report), remote=remote
    )


async def judge_records(
    records: Iterable[QueryRecord],
    options: JudgeRunOptions,
    *,
    run_id: str,
    run_dir: RunFolder | Path | None = None,
    on_judge: Callable[[JudgeEvent], None] | None = None,
    on_report: Callable[[RecordReport, Path | None], None] | None = None,
) -> list[RecordReport]:
    """Judge every record with every judge of `options`; returns the reports in record order (all in memory:
    for small inputs; a large run is `judge_stream`).

    With `run_dir` (a `RunFolder` or its path), each report is written there as soon as it is done.
    """
    folder = run_dir if isinstance(run_dir, RunFolder) or run_dir is None else RunFolder(run_dir)
    store = _MemoryStore(folder)
    await _judge_run(records, options, run_id=run_id, store=store, hooks=_Hooks(on_judge, on_report))
    return [store.reports[seq] for seq in sorted(store.reports)]


# ---------------------------------------------------------------------------------------------------
# The stream


@dataclass(frozen=True, slots=True)
class _Key:
    """Where a written report is, for the run-wide rule to read it back: its record, repeat and place."""

    query_id: str
    repeat: int
    seq: int
    speakers: dict[int, str] | None  # who spoke at which step (multi-agent runs), for the rewritten report


class _Hooks(NamedTuple):
    """What a run tells its caller as it goes: each judge result, each report (and where it was written)."""

    on_judge: Callable[[JudgeEvent], None] | None
    on_report: Callable[[RecordReport, Path | None], None] | None


class _Store(Protocol):
    def write(self, report: RecordReport, seq: int) -> Path | None: ...

    def load(self, key: _Key) -> RecordReport: ...


class _FolderStore:
    """Reports live in the run folder only."""

    def __init__(self, folder: RunFolder) -> None:
        self.folder = folder

    def write(self, report: RecordReport, seq: int) -> Path | None:
        return self.folder.write_report(report)

    def load(self, key: _Key) -> RecordReport:
        return RecordReport.model_validate_json(self.folder.report_path(key.query_id, key.repeat).read_text('utf-8'))


class _MemoryStore:
    """Reports kept in memory (and written to the run folder when there is one)."""

    def __init__(self, folder: RunFolder | None) -> None:
        self.folder = folder
        self.reports: dict[int, RecordReport] = {}

    def write(self, report: RecordReport, seq: int) -> Path | None:
        self.reports[seq] = report
        return self.folder.write_report(report) if self.folder is not None else None

    def load(self, key: _Key) -> RecordReport:
        return self.reports[key.seq]


class _SameText:
    """One model judge's run-wide "same reasoning everywhere" rule, in constant state: the first
    reasoning, whether every later one matched, up to three transcripts, and the reports it is in."""

    __slots__ = ('entries', 'same', 'text', 'transcripts')

    def __init__(self) -> None:
        self.text: str | None = None
        self.same = True
        self.transcripts: set[str] = set()
        self.entries: list[_Key] = []

    def add(self, transcript: str, reasoning: str, key: _Key) -> None:
        if not self.same:
            return
        text = normalise(reasoning)
        if self.text is None:
            self.text = text
        elif text != self.text:
            self.same, self.entries, self.transcripts = False, [], set()
            return
        if len(self.transcripts) < MIN_RECORDS_FOR_SAME_TEXT:
            self.transcripts.add(transcript)
        self.entries.append(key)

    @property
    def fired(self) -> bool:
        return self.same and len(self.transcripts) >= MIN_RECORDS_FOR_SAME_TEXT


async def _judge_run(
    records: Records,
    options: JudgeRunOptions,
    *,
    run_id: str,
    store: _Store,
    hooks: _Hooks,
    remote: RemoteJudge | None = None,
) -> StreamedRun:
    """The stream: each record (× repeat) judged by `_RecordJudging`, its report counted as it comes out
    (`_Emitter`, in record order), then the run-wide "same reasoning" rule applied."""
    judges = options.judges
    judging = _RecordJudging(options, run_id=run_id, store=store, on_judge=hooks.on_judge, remote=remote)
    emitter = _Emitter(StreamedRun(RunTally(report_judges(judges))), report_judges(judges), hooks.on_report)
    await _pump(records, options.repeat, judging.window, judging.judge_guarded, emitter.emit)
    _apply_same_text(emitter.run, emitter.same_text, store, hooks.on_report)
    return emitter.run


_Done = tuple[RecordReport, _Key, Path | None]
"""A judged record: its report, where it is (for the run-wide rule), and the file it was written to."""

_PlannedCall = tuple[Judge, list[Judge], JudgeCall]
"""A call a record needs: the judge (configured by the record's profile), its active members, and its name."""


async def _pump(
    records: Records,
    repeat: int,
    in_flight: int,
    judge: Callable[[QueryRecord, int, int], Coroutine[Any, Any, _Done]],
    emit: Callable[[RecordReport, _Key, Path | None], None],
) -> None:
    """Start each record (× repeat) in order with at most `in_flight` running, and emit each in order."""
    pending: deque[asyncio.Task[_Done]] = deque()
    seq = 0
    try:
        async for record in _aiter(records):
            for rep in range(1, repeat + 1):
                pending.append(asyncio.create_task(judge(record, rep, seq)))
                seq += 1
                while len(pending) >= in_flight:
                    emit(*await pending.popleft())
        while pending:
            emit(*await pending.popleft())
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


class _Emitter:
    """Counts each finished report into the run, feeds the "same reasoning" rules, tells the caller."""

    def __init__(
        self,
        run: StreamedRun,
        judges: Sequence[Judge],
        on_report: Callable[[RecordReport, Path | None], None] | None,
    ) -> None:
        self.run = run
        self.same_text = {j.name: _SameText() for j in judges if j.needs_model}
        self.on_report = on_report

    def emit(self, report: RecordReport, key: _Key, path: Path | None) -> None:
        self.run.tally.add(report, key.seq)
        self.run.reports += 1
        for name, rule in self.same_text.items():
            result = report.judges.get(name)
            if result is not None and result.status == 'ok':
                rule.add(report.transcript_sha256 or '', result.reasoning or '', key)
        if self.on_report is not None:
            self.on_report(report, path)


class _RecordJudging:
    """One record (× repeat) of a run, from record to written report: its profile, the calls it needs
    (`plan`), the calls made (locally or by `remote`), the report built and stored."""

    def __init__(
        self,
        options: JudgeRunOptions,
        *,
        run_id: str,
        store: _Store,
        on_judge: Callable[[JudgeEvent], None] | None,
        remote: RemoteJudge | None,
    ) -> None:
        model = options.model
        limit = max(1, options.concurrency or (model.default_concurrency if model else 4))
        self.window = max(1, options.window or max(8, 2 * limit))
        self.judges, self.model, self.profile = options.judges, model, options.profile
        self.run_id, self.store, self.on_judge, self.remote = run_id, store, on_judge, remote
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

    async def judge_guarded(self, record: QueryRecord, rep: int, seq: int) -> _Done:
        """`judge`, with a record that breaks rendering or reporting reported as an error (the run goes on)."""
        try:
            return await self.judge(record, rep, seq)
        except Exception as e:  # defence in depth: one record that breaks rendering or reporting never stops the run
            report = self._crash_report(record, rep, f'the record could not be judged ({describe_error(e, limit=200)})')
            return report, _Key(record.query_id, rep, seq, None), self.store.write(report, seq)

    def _crash_report(self, record: QueryRecord, rep: int, message: str) -> RecordReport:
        results = [_crashed(m, self.model, message) for j in self.judges for m in (members_of(j) or [j])]
        try:
            report = build_report(record, results, run_id=self.run_id, repeat=rep, model=self.model_name)
        except Exception:
            bare = record.model_copy(update={'messages': []})
            report = build_report(bare, results, run_id=self.run_id, repeat=rep, model=self.model_name)
        report.errors.append(message)
        return report

    async def judge(self, record: QueryRecord, rep: int, seq: int) -> _Done:
        """Render the record once, make the calls its profile and rules ask for, build and store its report."""
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
        path = self.store.write(report, seq)
        return report, _Key(record.query_id, rep, seq, transcript.speakers or None), path

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
    flight here, across records."""

    def __init__(self, options: JudgeRunOptions) -> None:
        model = options.model
        self.judges = list(options.judges)
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


async def _aiter(records: Records) -> AsyncIterator[QueryRecord]:
    if isinstance(records, AsyncIterable):
        async for record in records:
            yield record
    else:
        for record in records:
            yield record


def _apply_same_text(
    run: StreamedRun,
    rules: Mapping[str, _SameText],
    store: _Store,
    on_report: Callable[[RecordReport, Path | None], None] | None,
) -> None:
    """Mark inconclusive every verdict of a model judge that wrote one reasoning for every transcript,
    rewriting (and re-counting) only the reports that hold one."""
    fired = {name: rule for name, rule in rules.items() if rule.fired}
    affected: dict[int, tuple[_Key, list[str]]] = {}
    for name, rule in fired.items():
        run.same_text[name] = len(rule.entries)
        for key in rule.entries:
            affected.setdefault(key.seq, (key, []))[1].append(name)
    for seq in sorted(affected):
        key, names = affected[seq]
        old = store.load(key)
        results = [_same_text_verdict(r, run.same_text[r.judge]) if r.judge in names else r for r in old.judges.values()]
        new = rebuild_report(old, results, key.speakers)
        path = store.write(new, seq)
        run.tally.replace(old, new, seq)
        if on_report is not None:
            on_report(new, path)


def _same_text_verdict(result: JudgeResult, count: int) -> JudgeResult:
    return result.model_copy(
        update={
            'status': 'inconclusive',
            'error': f'the same reasoning on all {count} records of the run: {result.reasoning!r}'[:500],
            'score': None,
            'passed': None,
            'raw_output': result.raw_output or result.reasoning,
        }
    )


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
