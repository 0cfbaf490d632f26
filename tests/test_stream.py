"""Streamed judge runs: flat memory, the run-wide same-reasoning rule, summaries equal to a run held in
memory, and the runner's contract with fused judges."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sensei_eval.core.datasets import iter_dataset, iter_datasets, load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, RunFacts, RunSummary
from sensei_eval.core.transcript import Transcript
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.output import Completeness, Hallucination
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.record import JudgeEvent, count_judge_calls
from sensei_eval.judging.run_folder import RunFolder
from sensei_eval.judging.runner import judge_records, judge_stream
from sensei_eval.models.judge_model import JudgeModel

from .helpers import ScriptedJudge, no_issues, openai_record

SAMPLE = Path(__file__).resolve().parents[1] / 'datasets' / 'sample.jsonl'
# Records of the memory test's big run (override to try another size).
BIG = int(os.environ.get('SENSEI_EVAL_STREAM_RECORDS', '20000'))


def _write_records(path: Path, n: int) -> Path:
    """`n` small distinct records, written one a line (never all in memory)."""
    with path.open('w', encoding='utf-8') as f:
        for i in range(n):
            messages = [{'role': 'user', 'content': f'question {i}?'}, {'role': 'assistant', 'content': f'answer {i}.'}]
            f.write(json.dumps({'query_id': f'rec-{i:06d}', 'messages': messages}) + '\n')
    return path


def _records(path: Path) -> Any:
    return (item for item in iter_datasets([path]) if isinstance(item, QueryRecord))


_MEASURE = """
import asyncio, json, sys, tracemalloc
from pathlib import Path
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.datasets import iter_datasets
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_stream

def peak(path, out):
    records = (r for r in iter_datasets([Path(path)]) if isinstance(r, QueryRecord))
    tracemalloc.start()
    try:
        run = asyncio.run(judge_stream(records, JudgeRunOptions(make_judges(['checks'])), run_dir=Path(out)))
        return tracemalloc.get_traced_memory()[1] / 2**20, run.reports, run.tally.records_judged
    finally:
        tracemalloc.stop()

print(json.dumps([peak(path, out) for path, out in zip(sys.argv[1::2], sys.argv[2::2])]))
"""


def _peak_mib(*runs: tuple[Path, Path]) -> list[tuple[float, int, int]]:
    """Peak traced memory of each streamed run, measured in a fresh interpreter: threads and global state
    left by other tests (servers, span processors) must not count in this process's peak."""
    import subprocess
    import sys

    args = [str(x) for pair in runs for x in pair]
    done = subprocess.run([sys.executable, '-c', _MEASURE, *args], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return [tuple(x) for x in json.loads(done.stdout.strip().splitlines()[-1])]  # type: ignore[misc]


def test_peak_memory_does_not_grow_with_the_number_of_records(tmp_path: Path) -> None:
    (_, _, _), (small, small_n, _), (big, big_n, judged) = _peak_mib(
        (_write_records(tmp_path / 'warm.jsonl', 50), tmp_path / 'warm'),  # imports, caches, compiled patterns
        (_write_records(tmp_path / 'small.jsonl', BIG // 10), tmp_path / 'small'),
        (_write_records(tmp_path / 'big.jsonl', BIG), tmp_path / 'big'),
    )
    assert small_n == BIG // 10 and big_n == BIG and judged == BIG
    assert len(RunFolder(tmp_path / 'big').report_paths()) == BIG
    # What may grow: one query id per record (duplicate checks, records_judged), about 200 bytes each.
    assert big - small < 0.0003 * BIG + 1, (small, big)


def test_the_loader_streams_and_skips_an_oversized_line_without_reading_it(tmp_path: Path) -> None:
    data = tmp_path / 'd.jsonl'
    good = openai_record('after').model_dump_json()
    data.write_bytes(
        b'\xef\xbb\xbf' + openai_record('first').model_dump_json().encode() + b'\n' + b'x' * 5000 + b'\n\n' + good.encode()
    )
    items = list(iter_dataset(data, max_record_bytes=2000))
    assert [getattr(i, 'query_id', None) for i in items] == ['first', None, 'after']
    assert str(items[1]) == f'{data}:2: record is 5,000 bytes, over the 2,000-byte limit'
    assert load_dataset(data, max_record_bytes=2000).lines == {'first': 1, 'after': 4}


# ---------------------------------------------------------------------------------------------------
# The run-wide same-reasoning rule, streamed


def _same_for_hallucination(prompt: str, n: int) -> dict[str, Any]:
    if 'judge `hallucination`' in prompt:
        # cites a step (so only the run-wide rule can catch it), the same on every record
        return {'reasoning': 'The answer at [5] uses the tool output at [4] well.', 'issues': []}
    return no_issues(prompt, n)


def test_same_reasoning_everywhere_is_inconclusive_in_a_streamed_run(tmp_path: Path) -> None:
    records = [openai_record(f'r{i}', tool_result=f'Depends() declares dependency number {i}.') for i in range(4)]
    seen: list[tuple[str, str]] = []
    options = JudgeRunOptions([Hallucination(), Completeness()], ScriptedJudge(_same_for_hallucination).model())
    run = asyncio.run(
        judge_stream(
            iter(records),
            options,
            run_dir=tmp_path / 'run',
            on_report=lambda r, p: seen.append((r.query_id, r.judges['hallucination'].status)),
        )
    )
    assert run.same_text == {'hallucination': 4}
    written = RunFolder(tmp_path / 'run').load_reports()
    assert len(written) == 4
    for report in written:
        assert report.judges['hallucination'].status == 'inconclusive' and report.inconclusive == ['hallucination']
        assert 'same reasoning on all 4 records' in (report.judges['hallucination'].error or '')
        assert report.judges['completeness'].status == 'ok'  # a judge with varied reasoning is untouched
        assert 'hallucination' not in report.category_scores or report.category_scores['output'] == 1.0
    # reports are seen in record order, then again once rewritten
    assert seen == [(f'r{i}', 'ok') for i in range(4)] + [(f'r{i}', 'inconclusive') for i in range(4)]
    summary = run.tally.summary('run', RunFacts(started_at=datetime.now(UTC)))
    assert summary.per_judge['hallucination'].inconclusive == 4 and summary.per_judge['hallucination'].ok == 0
    assert summary.per_judge['completeness'].ok == 4 and len(summary.inconclusive) == 4
    # the streamed summary is the one built from the rewritten reports on disk
    rebuilt = RunSummary.build(
        'run',
        sorted(written, key=lambda r: r.query_id),
        [Hallucination(), Completeness()],
        RunFacts(started_at=summary.started_at, finished_at=summary.finished_at),
    )
    assert rebuilt == summary


def test_one_different_reasoning_keeps_every_verdict(tmp_path: Path) -> None:
    def answer(prompt: str, n: int) -> dict[str, Any]:
        text = 'Fine.' if 'number 2' not in prompt else 'The answer at [5] follows the tool result at [4].'
        return {'reasoning': f'{text} The agent answered well at [5].', 'issues': []}

    records = [openai_record(f'r{i}', tool_result=f'Depends() declares dependency number {i}.') for i in range(5)]
    run = asyncio.run(judge_stream(records, JudgeRunOptions([Hallucination()], ScriptedJudge(answer).model()), run_dir=tmp_path))
    assert run.same_text == {}
    assert all(r.judges['hallucination'].status == 'ok' for r in RunFolder(tmp_path).load_reports())


# ---------------------------------------------------------------------------------------------------
# Streamed and in-memory runs agree


def test_the_streamed_summary_equals_the_in_memory_one_on_the_sample(tmp_path: Path) -> None:
    judges = make_judges(['mvp', 'checks'])
    scripted = ScriptedJudge(no_issues)
    loaded = load_dataset(SAMPLE)
    started = datetime(2026, 1, 1, tzinfo=UTC)
    kwargs: dict[str, Any] = {'started_at': started, 'finished_at': started, 'datasets': [SAMPLE], 'repeat': 2}
    reports = asyncio.run(judge_records(loaded.records, JudgeRunOptions(judges, scripted.model(), repeat=2), run_id='mem'))
    in_memory = RunSummary.build('s', reports, judges, RunFacts(**kwargs))

    run = asyncio.run(
        judge_stream(_records(SAMPLE), JudgeRunOptions(judges, scripted.model(), repeat=2, window=3), run_dir=tmp_path / 's')
    )
    streamed = run.tally.summary('s', RunFacts(**kwargs))
    assert streamed == in_memory
    assert streamed.records_judged == len(loaded.records) and streamed.per_judge['version_check'].ok > 0
    # the reports on disk are the in-memory ones (their time and run id aside)
    on_disk = {(r.query_id, r.repeat): r for r in RunFolder(tmp_path / 's').load_reports()}
    assert len(on_disk) == 2 * len(loaded.records)
    for report in reports:
        assert _timeless(on_disk[(report.query_id, report.repeat)]) == _timeless(report)


def _timeless(report: RecordReport) -> dict[str, Any]:
    """A report without what differs between two runs of the same judging: its times and run id."""
    data = report.model_dump(exclude={'evaluated_at', 'run_id', 'latency_s'})
    for result in data['judges'].values():
        result.pop('latency_s')
        result['details'].get('fused', {}).pop('latency_s', None)  # a fused call's own timing
    return data


def test_judge_records_keeps_record_order_and_takes_a_generator() -> None:
    records = (openai_record(f'r{i}') for i in range(12))
    reports = asyncio.run(judge_records(records, JudgeRunOptions(make_judges(['checks']), window=2), run_id='g'))
    assert [r.query_id for r in reports] == [f'r{i}' for i in range(12)]


# ---------------------------------------------------------------------------------------------------
# Fused judges: one model call, one result per member


class _SkipsRecordB(Hallucination):
    def applies_to(self, record: QueryRecord) -> str | None:
        return 'not for b' if record.query_id == 'b' else None


@dataclass(repr=False)
class FakeFused(Judge):
    """Two failure modes in one (scripted) call: what the runner needs of a fused judge, and nothing more."""

    name: ClassVar[str] = 'fake_fused'
    members: tuple[Judge, ...] = (_SkipsRecordB(), Completeness())
    calls: list[str] = field(default_factory=list)
    crash: bool = False

    def criteria_hash(self) -> str:
        return hashlib.sha256(''.join(m.criteria_hash() for m in self.members).encode()).hexdigest()

    async def judge_members(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> list[JudgeResult]:
        self.calls.append(record.query_id)
        if self.crash:
            raise RuntimeError('fused judge broke')
        assert model is not None
        return [
            m._result(
                model=model.name, status='ok', reasoning=f'{m.name} on {transcript.sha256[:12]}', score=1.0, passed=True,
                requests=int(k == 0), input_tokens=100 * (k == 0), output_tokens=10,
            )
            for k, m in enumerate(self.members)
        ]  # fmt: skip


def test_a_fused_judge_is_one_call_per_record_and_one_result_per_member(tmp_path: Path) -> None:
    fused = FakeFused()
    model = ScriptedJudge(no_issues).model()
    records = [openai_record('a'), openai_record('b', answer='Other.'), openai_record('c', answer='Third.')]
    events: list[JudgeEvent] = []
    cache = JudgeCache(tmp_path / 'cache')
    reports = asyncio.run(
        judge_records(records, JudgeRunOptions([fused], model, cache=cache), run_id='f', on_judge=events.append)
    )
    assert fused.calls == ['a', 'b', 'c']  # one call per record
    assert set(reports[0].judges) == {'hallucination', 'completeness'}
    assert reports[1].skipped == {'hallucination': 'not for b'} and set(reports[1].judges) == {'completeness'}
    assert len(events) == 5 and count_judge_calls(records, [fused]) == 5  # results, not calls
    summary = RunSummary.build('f', reports, [fused], RunFacts(started_at=datetime.now(UTC)))
    assert summary.model_requests == 3 and set(summary.per_judge) == {'hallucination', 'completeness'}
    # every member is cached under its own criteria hash ...
    key = JudgeCache.key(Completeness().criteria_hash(), model.name, dict(model.settings), '', 1)
    assert key  # (the transcript hash is in the report)
    sha = reports[0].transcript_sha256 or ''
    for member in (Hallucination(), Completeness()):
        assert JudgeCache(tmp_path / 'cache').get(
            JudgeCache.key(member.criteria_hash(), model.name, dict(model.settings), sha, 1)
        )
    # ... so a second run makes no call at all
    again = asyncio.run(
        judge_records(records, JudgeRunOptions([fused], model, cache=JudgeCache(tmp_path / 'cache')), run_id='f2')
    )
    assert fused.calls == ['a', 'b', 'c'] and all(r.cached for rep in again for r in rep.judges.values())


def test_a_partly_cached_fused_judge_is_called_and_not_counted_as_a_hit(tmp_path: Path) -> None:
    model = ScriptedJudge(no_issues).model()
    record = openai_record('a')
    asyncio.run(
        judge_records([record], JudgeRunOptions([Completeness()], model, cache=JudgeCache(tmp_path)), run_id='c')
    )  # one member cached
    fused = FakeFused()
    cache = JudgeCache(tmp_path)
    [report] = asyncio.run(judge_records([record], JudgeRunOptions([fused], model, cache=cache), run_id='f'))
    assert fused.calls == ['a'] and cache.hits == 0
    assert not any(r.cached for r in report.judges.values())


def test_a_crashing_fused_judge_errors_each_member_and_the_run_goes_on(tmp_path: Path) -> None:
    fused = FakeFused(crash=True)
    options = JudgeRunOptions([fused, *make_judges(['repeated_call_check'])], ScriptedJudge(no_issues).model())
    reports = asyncio.run(judge_records([openai_record('a'), openai_record('b')], options, run_id='x'))
    assert reports[0].judges['hallucination'].status == 'error' and reports[0].judges['completeness'].status == 'error'
    assert 'fused judge broke' in (reports[0].judges['completeness'].error or '')
    assert reports[1].judges['repeated_call_check'].status == 'ok' and len(reports[0].errors) == 2


@pytest.mark.parametrize('returned', [0, 1, 3])
def test_a_fused_judge_returning_the_wrong_number_of_results_is_an_error(returned: int) -> None:
    class Short(FakeFused):
        async def judge_members(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> list[JudgeResult]:
            full = await super().judge_members(record, transcript, model)
            return (full * 2)[:returned]

    [report] = asyncio.run(
        judge_records([openai_record('a')], JudgeRunOptions([Short()], ScriptedJudge(no_issues).model()), run_id='s')
    )
    assert {r.status for r in report.judges.values()} == {'error'}
    assert f'returned {returned} result(s) for 2 members' in (report.judges['completeness'].error or '')


@dataclass(repr=False)
class NarrowingFused(FakeFused):
    """A fused judge that can be narrowed to some of its members, as `evaluators.fused.FusedJudge` can."""

    def restricted_to(self, names: set[str]) -> Judge | None:
        kept = [m for m in self.members if m.name in names]
        if len(kept) >= 2:
            return NarrowingFused(members=tuple(kept), calls=self.calls)
        return kept[0] if kept else None

    def member_criteria_hash(self, member: Judge) -> str:
        return f'{member.criteria_hash()}+fused:{self.criteria_hash()[:12]}'


def test_a_fused_judge_is_narrowed_to_the_members_that_apply(tmp_path: Path) -> None:
    fused = NarrowingFused()
    scripted = ScriptedJudge(no_issues)
    model = scripted.model()
    cache = JudgeCache(tmp_path)
    reports = asyncio.run(
        judge_records([openai_record('a'), openai_record('b')], JudgeRunOptions([fused], model, cache=cache), run_id='n')
    )
    assert fused.calls == ['a']  # on b only completeness applies: judged alone by its single judge, not the fused call
    assert len(scripted.calls) == 1 and 'judge `completeness`' in str(scripted.calls[0])
    assert reports[1].skipped == {'hallucination': 'not for b'} and reports[1].judges['completeness'].status == 'ok'
    # fused verdicts are cached under the fused judge's name for each member, apart from single verdicts
    sha = reports[0].transcript_sha256 or ''
    fused_key = JudgeCache.key(fused.member_criteria_hash(Completeness()), model.name, dict(model.settings), sha, 1)
    single_key = JudgeCache.key(Completeness().criteria_hash(), model.name, dict(model.settings), sha, 1)
    assert JudgeCache(tmp_path).get(fused_key) is not None and JudgeCache(tmp_path).get(single_key) is None


# ---------------------------------------------------------------------------------------------------
# The CLI on a stream


def test_cli_lists_the_first_failed_verdicts_and_counts_the_rest(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sensei_eval.cli import judge as judge_cli

    data = tmp_path / 'd.jsonl'
    lines = [openai_record(f'g{i:02d}', answer=f'Great question! Happy to help. Use Depends() ({i}).') for i in range(25)]
    data.write_text('\n'.join(r.model_dump_json() for r in lines) + '\n{"query_id": "bad"}\n')
    args = ['--dataset', str(data), '--judges', 'greeting_check', '--profile', 'docs-agent', '--out', str(tmp_path / 'o')]
    result = CliRunner().invoke(judge_cli.app, [*args, '--run-id', 'r'])
    assert result.exit_code == 1, result.output  # the bad line
    listed = [line for line in result.stdout.splitlines() if ' · greeting_check · ' in line]
    assert len(listed) == 20 and listed[0].startswith('  g00 ')
    assert 'failed verdicts (25)' in result.stdout and 'and 5 more (--verbose' in result.stdout
    summary = json.loads((tmp_path / 'o' / 'r' / 'summary.json').read_text())
    assert summary['records_loaded'] == 25 and summary['per_judge']['greeting_check']['ok'] == 25
    assert len(summary['load_errors']) == 1 and f'{data}:26' in summary['load_errors'][0]
    verbose = CliRunner().invoke(judge_cli.app, [*args, '--run-id', 'v', '--verbose'])
    assert len([line for line in verbose.stdout.splitlines() if ' · greeting_check · ' in line]) == 25
