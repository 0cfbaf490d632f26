"""Run judges over records as a stream: bounded work in flight, a report written the moment a record is done.

Records are read, judged and written one after another, with at most `window` records (× repeat) in
flight, so a run of any size holds the same memory: each report is written to the run folder and
dropped, and the run summary is counted as the reports go by (`reports.RunTally`). `judge_stream` is
that entry point (`run_dataset`'s); `judge_records` runs the same stream for small inputs and returns every
report, in record order.

Each record (× repeat) is judged by the record engine (`judging.record.RecordJudging`: profile, cache,
fitting, verdict; the same code as `judge_record`). Judge calls share one semaphore of size
`concurrency`; records are started in order and asyncio's semaphore is first-come first-served, so a
record's judges run close together, which is what lets a single-slot local server (and provider caches)
reuse the shared prefix. The run's judges are fused once, by the run's rule (`JudgeRunOptions.fused`:
with a model, the LLM judges in one call per record unless `fuse` says otherwise).

Once every record is done, a model judge that gave the same reasoning on every verdict of the run (over
three or more different transcripts) has those verdicts marked inconclusive. The runner keeps, per
model judge, only the first reasoning, whether every later one matched, and which reports it is in;
only those reports are read back, rewritten and re-counted.

The model calls can be made elsewhere (`judge_stream(remote=...)`, e.g. on a Ray cluster:
`sensei_eval.judging.ray_engine`); transcripts, cache, checks, reports and the summary stay in this process.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, RunTally, rebuild_report
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.inconclusive import MIN_RECORDS_FOR_SAME_TEXT, normalise
from sensei_eval.judging.options import JudgeRunOptions, report_judges
from sensei_eval.judging.record import JudgeEvent, RecordJudging, RemoteJudge
from sensei_eval.judging.run_folder import RunFolder

__all__ = (
    'Records',
    'StreamedRun',
    'judge_records',
    'judge_stream',
)

Records = Iterable[QueryRecord] | AsyncIterable[QueryRecord]


@dataclass
class StreamedRun:
    """What a streamed run keeps: the summary's counts, and what the run-wide rule changed.

    `tally.summary(...)` is the run's `RunSummary`; `same_text` maps each judge whose verdicts were
    marked inconclusive (the same reasoning on every record) to how many verdicts that was."""

    tally: RunTally
    reports: int = 0
    same_text: dict[str, int] = field(default_factory=dict)


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
    """The stream: each record (× repeat) judged by the record engine and stored, its report counted as it
    comes out (`_Emitter`, in record order), then the run-wide "same reasoning" rule applied."""
    options = options.fused(model=options.model is not None or remote is not None)
    judges = options.judges
    judging = RecordJudging(options, run_id=run_id, on_judge=hooks.on_judge, remote=remote)

    async def judge(record: QueryRecord, rep: int, seq: int) -> _Done:
        report, speakers = await judging.report(record, rep)
        return report, _Key(record.query_id, rep, seq, speakers), store.write(report, seq)

    emitter = _Emitter(StreamedRun(RunTally(report_judges(judges))), report_judges(judges), hooks.on_report)
    await _pump(records, options.repeat, judging.window, judge, emitter.emit)
    _apply_same_text(emitter.run, emitter.same_text, store, hooks.on_report)
    return emitter.run


_Done = tuple[RecordReport, _Key, Path | None]
"""A judged record: its report, where it is (for the run-wide rule), and the file it was written to."""


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
