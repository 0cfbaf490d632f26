"""The console of a judge run (`sensei-eval judge`): what the run says as it goes and when it ends.

The run itself is the library's (`judging.run.run_dataset`); this module only shows it, through the run's
hooks (`JudgeConsole.hooks`): the header (model, datasets, judges), notices as they come (bad lines, input
warnings folded after the first `_WARNED_SHOWN` records, the embedded model's server), a progress bar (plain
progress lines without a terminal: `_PlainProgress`), then the compact table read from the verdict model, the
failed verdicts and skipped judges, and the footer (counts, errors folded by `fold_errors`, where the reports
are and the next command). `--verbose` adds pydantic-evals' per-record table and why each score below 1.00 is
what it is (`core.explain`).
"""

from __future__ import annotations

import re
import shlex
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from sensei_eval.cli.common import make_console, print_table, shown
from sensei_eval.core.evaluator_outputs import to_pydantic_evals_report
from sensei_eval.core.explain import explain_score
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, RunSummary
from sensei_eval.core.verdicts import judge_status
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.registry import EXTRA_MODES, GROUPS, JUDGES
from sensei_eval.judging.profiles import BUILTIN_PROFILES
from sensei_eval.judging.record import JudgeEvent
from sensei_eval.judging.run import DatasetRun, RunHooks, RunInterrupted, RunStart
from sensei_eval.models.judge_model import EMBEDDED_NOTICE, NO_JUDGE_MODEL, JudgeModel

__all__ = ('JudgeConsole', 'err', 'fold_errors', 'out', 'print_judges')

err = make_console(stderr=True)
out = make_console()

# Records whose input warnings the console prints (one folded line each) before it only counts them.
_WARNED_SHOWN = 10


class JudgeConsole:
    """A judge run on the console: `hooks()` for `run_dataset`, then `show(run)` or `interrupted(e)`."""

    def __init__(self) -> None:
        self.failures = _Failures()
        self.warned_records = 0  # records that came with input warnings (printed folded, `_WARNED_SHOWN` of them)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._plain: _PlainProgress | None = None
        self._start: RunStart | None = None
        self._total = 0
        self._done = 0

    def hooks(self) -> RunHooks:
        return RunHooks(on_notice=self.notice, on_start=self.start, on_judge=self.judged, on_report=self.reported)

    # -- as the run goes -------------------------------------------------------------------------------

    def notice(self, kind: str, subject: Any) -> None:
        """A notice of the run (`RunHooks.on_notice`), printed as it comes."""
        if kind == 'skipped':  # skipped on purpose (a trace holding no run): information, not a failure
            err.print(f'[dim]skipped:[/] {escape(str(subject))}', highlight=False)
        elif kind == 'bad_record':
            err.print(f'[red]bad record:[/] {escape(str(subject))}', highlight=False)
        elif kind == 'input_warnings':
            self._warned(subject)
        elif kind == 'not_found':
            err.print(f'[red]error:[/] query id {escape(repr(subject))} not found in the dataset(s)', highlight=False)
        elif kind == 'smoke':
            err.print(f'[yellow]smoke:[/] {EMBEDDED_NOTICE}', highlight=False)
        elif kind == 'batch':
            err.print(subject.describe(), highlight=False)
        else:  # the embedded model server's lines, and anything else: as it is
            err.print(str(subject), highlight=False)

    def _warned(self, record: QueryRecord) -> None:
        """A record's input warnings, folded: its first one and how many more (all are in its report), for the
        first `_WARNED_SHOWN` records; then one line counting the rest."""
        self.warned_records += 1
        if self.warned_records <= _WARNED_SHOWN:
            warnings = record.input_warnings
            more = f' (+{len(warnings) - 1} more in its report)' if len(warnings) > 1 else ''
            line = f'input warning: {record.query_id}: {" ".join(warnings[0].split())}{more}'
            err.print(f'[yellow]{escape(line)}[/]', highlight=False)
        elif self.warned_records == _WARNED_SHOWN + 1:
            err.print('[yellow]more records have input warnings: see input_warnings in their reports[/]', highlight=False)

    def start(self, start: RunStart) -> None:
        """The header, then the progress bar (plain progress lines without a terminal). Both count a bad line
        as a record done, and end on the run's real count (the total was read ahead)."""
        _print_header(start.datasets, start.judges, start.model)
        self._start = start
        self._total = total = start.stream.expected(start.repeat)
        self._plain = None if err.is_terminal else _PlainProgress(total, err)
        columns = (
            TextColumn('[bold]judging'),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn('{task.description}'),
            TimeElapsedColumn(),
        )
        self._progress = Progress(*columns, console=err, transient=False, disable=total == 0 or self._plain is not None)
        self._progress.start()
        self._task = self._progress.add_task('', total=total)

    def _records_done(self) -> int:
        start = self._start
        return self._done + (start.repeat * len(start.stream.load_errors) if start is not None else 0)

    def judged(self, event: JudgeEvent) -> None:
        mark = 'cached' if event.result.cached else event.result.status
        if self._progress is not None and self._task is not None:
            # a description is markup to Rich: a query id is text (`[link=…]` stays brackets)
            self._progress.update(self._task, description=shown(f'{event.query_id} · {event.result.judge} · {mark}'))
        if self._plain is not None:
            self._plain.judged(event)

    def reported(self, report: RecordReport, path: Path | None) -> None:
        self.failures.add(report)
        self._done += 1  # a report rewritten at the end is capped
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=min(self._total, self._records_done()))
        if self._plain is not None:
            self._plain.reported(min(self._total, self._records_done()))

    def stop_progress(self, reports: int | None = None) -> None:
        """The progress display closed: on the run's real count of `reports` when it finished (None: it did not)."""
        if self._progress is None:
            return
        if reports is not None and self._task is not None:
            self._done = reports
            final = self._records_done()
            self._progress.update(self._task, total=final, completed=final, description='')
            if self._plain is not None:
                self._plain.finish(final)
        elif self._plain is not None:
            self._plain.finish()
        self._progress.stop()
        self._progress = None

    # -- when it ends ----------------------------------------------------------------------------------

    def show(self, run: DatasetRun, *, verbose: bool) -> int:
        """The run shown (the compact table, or with `verbose` every record too) and the footer; the exit code."""
        self.stop_progress(run.reports)
        failures = self.failures
        failures.forget(run.same_text)  # those verdicts were set aside as inconclusive after the fact
        summary, folder, stopped = run.summary, run.folder, run.stopped
        if run.reports and verbose:
            loaded = folder.load_reports()  # the per-record detail: the whole run in memory, on request only
            listed = loaded if stopped is None else [_shorten_stopped(r, stopped) for r in loaded]
            with out.wide():  # pydantic-evals' table, whole in a CI log
                to_pydantic_evals_report(listed, name=summary.run_id).print(include_durations=False, console=out)
            failures = _Failures(limit=None, full=True)
            for report in loaded:
                failures.add(report)
        if run.reports:
            _print_compact(summary, failures, stopped)
        _print_footer(summary, folder.path, stopped)
        return summary.exit_code

    def interrupted(self, e: RunInterrupted) -> int:
        """Ctrl-C: what was written and how to finish the run; exit code 130."""
        self.stop_progress()
        run_id = e.folder.run_id
        if e.kind == 'ray':
            err.print(f'interrupted: resume with the same command and --run-id {run_id}\n(the cache keeps what was judged)')
        elif e.kind == 'batch':
            err.print(
                f'interrupted: submitted batches keep running at the provider;\n'
                f'resume them with the same command and --run-id {run_id}',
                highlight=False,
            )
        else:
            again = 'finished judge calls come from the cache' if e.cached else 'every record is judged again'
            err.print(
                f'\ninterrupted: {e.reports} report(s) written, summary in\n  {e.folder.summary_path}\n'
                f'to finish the run ({again}):\n  {_resume_command(run_id)}',
                highlight=False,
                soft_wrap=True,
            )
        return e.exit_code


def _resume_command(run_id: str) -> str:
    """This command line again, with `--run-id run_id` (replacing any given)."""
    args = sys.argv[1:]
    if not args or args[0] != 'judge':
        args = ['judge', *args]
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == '--run-id':
            skip = True
        elif not arg.startswith('--run-id='):
            kept.append(arg)
    return shlex.join(['sensei-eval', *kept, '--run-id', run_id])


class _Failures:
    """What the console lists after the table, gathered as reports come: the first `limit` failed verdicts
    (all with `--verbose`), the judges skipped and why (counted once per record and repeat), and with
    `--verbose` why each score below 1.00 is what it is (`core.explain`)."""

    def __init__(self, limit: int | None = 20, *, full: bool = False) -> None:
        self.limit = limit
        self.full = full  # --verbose: every reason in full, not cut to one line
        self.shown: dict[tuple[str, str], str] = {}
        self.skipped: dict[str, Counter[str]] = {}  # judge -> why -> records
        self.explained: dict[str, list[str]] = {}  # --verbose: record -> the lines explaining its score
        self._seen: set[tuple[str, int]] = set()

    def add(self, report: RecordReport) -> None:
        key = (report.query_id, report.repeat)
        if key not in self._seen:  # a report rewritten by the run-wide rules keeps its skipped judges
            self._seen.add(key)
            for name, why in report.skipped.items():
                self.skipped.setdefault(name, Counter())[why] += 1
        if self.full:
            explanation = explain_score(list(report.judges.values()))
            if not explanation.full_marks:
                score = f'{explanation.overall_score:.2f}' if explanation.overall_score is not None else 'not judged'
                head = f'{_record_label(report)} · {score}' + (f' · {explanation.coverage}' if explanation.coverage else '')
                self.explained[head] = explanation.lines()
        for name, result in report.judges.items():
            if self.limit is not None and len(self.shown) >= self.limit:
                return
            if judge_status(result) == 'fail':  # the verdict model's: a minor finding is not a failure
                reason = _full_reason(result) if self.full else _short_reason(result)
                self.shown.setdefault((_record_label(report), name), reason)

    def forget(self, judges: Iterable[str]) -> None:
        gone = set(judges)
        self.shown = {k: v for k, v in self.shown.items() if k[1] not in gone}


def _shorten_stopped(report: RecordReport, stopped: str) -> RecordReport:
    """For the table: judges the "first failure" rule stopped say so briefly; the footer gives the reason once."""
    judges = {
        name: r.model_copy(update={'error': 'not run (judge model unreachable, see below)'}) if r.error == stopped else r
        for name, r in report.judges.items()
    }
    return report.model_copy(update={'judges': judges})


# Without a terminal (CI, a log file) a progress line goes out at least this often, and at every
# `_PLAIN_STEP` of the records (but not more than once every `_PLAIN_MIN_S`: a fast run is not a wall of
# progress lines), so a long run is never silent; the last line always says where the run ended.
_PLAIN_EVERY_S = 10.0
_PLAIN_STEP = 0.05
_PLAIN_MIN_S = 1.0


class _PlainProgress:
    """Progress as plain lines for a console that is not a terminal: records done (bad lines included, as
    the bar counts them), errors, model calls and tokens, every `_PLAIN_EVERY_S` seconds (a ticker
    thread, so a slow judge call is not silence) and at every 5% of the records."""

    def __init__(self, total: int, console: Console) -> None:
        self.total, self.console = total, console
        self.records = self.errors = self.calls = self.tokens = 0
        self._start = self._last = time.monotonic()
        self._last_records = 0
        self._shown: tuple[int, int, int] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name='sensei-eval-progress', daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self._maybe_print()

    def judged(self, event: JudgeEvent) -> None:
        result = event.result
        with self._lock:
            self.errors += result.status == 'error'
            if not result.cached:
                self.calls += result.requests
                self.tokens += result.input_tokens + result.output_tokens
        self._maybe_print()

    def reported(self, done: int) -> None:
        with self._lock:
            self.records = done
        self._maybe_print()

    def _maybe_print(self, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            state = (self.records, self.errors, self.calls)
            by_time = now - self._last >= _PLAIN_EVERY_S
            stepped = self.records - self._last_records >= max(1, int(self.total * _PLAIN_STEP))
            by_step = stepped and now - self._last >= _PLAIN_MIN_S
            if not (by_time or by_step or (force and state != self._shown)):
                return
            self._last, self._last_records, self._shown = now, self.records, state
            line = (
                f'progress: {self.records}/{self.total} records · {self.errors} error(s) · {self.calls} model '
                f'call(s) · {self.tokens:,} tokens · {now - self._start:.0f} s'
            )
        self.console.print(line, highlight=False, markup=False)

    def finish(self, total: int | None = None) -> None:
        """The last line: `total` is what the run really had (the bar's count was read ahead from line counts)."""
        self._stop.set()
        self._ticker.join(2)
        if total is not None:
            with self._lock:
                self.total = self.records = total
        self._maybe_print(force=True)


def _print_header(datasets: Sequence[Path], judges: Sequence[Judge], judge_model: JudgeModel | None) -> None:
    """What the run is about to do, before it does it: the model and its URL (credentials redacted),
    the dataset(s) and the judges."""
    model = judge_model.where if judge_model is not None else 'none (deterministic checks only)'
    if judge_model is None and any(j.needs_model for j in judges):
        model = 'none named (the checks judge; LLM judges do not run, see the end)'
    if judge_model is not None and judge_model.embedded:  # its server starts in the background (see above)
        model = judge_model.name
    if judge_model is not None:
        model += f' · deadline {judge_model.timeout_s:g} s per judge call'
    err.print(f'judge model: {model}', highlight=False, markup=False)
    err.print(f'dataset(s): {", ".join(map(str, datasets))}', highlight=False, markup=False, soft_wrap=True)
    err.print(f'judges ({len(judges)}): {", ".join(j.name for j in judges)}', highlight=False, markup=False)


# The width the lines under the table wrap at (reasons, lists): a terminal's 80 columns.
_WIDTH = 80


def _wrap(text: str, width: int, *, initial_indent: str = '', subsequent_indent: str = '') -> list[str]:
    """`textwrap.wrap` at spaces only: `docs-agent` and `--profile` stay whole."""
    return textwrap.wrap(text, width, initial_indent=initial_indent, subsequent_indent=subsequent_indent, break_on_hyphens=False)


_LEGEND = 'judged: gave a pass/fail verdict · passed: share of those · score: mean'


def _print_compact(summary: RunSummary, failures: _Failures, stopped: str | None) -> None:
    """The run at a glance, read from the verdict model (`core.verdicts`): one row per judge that ran
    (verdicts, share passed, mean score, inconclusive, errors), the judges that ran on no record named in
    its title, a legend, the overall score beside its coverage, the judges skipped and why, then failed
    verdicts as record · judge · reason (the first ones; all, in full, with -v) and, with -v, why each
    score below 1.00 is what it is; last, the LLM judges that had no model, and how to name one."""
    from rich.table import Table

    rows = {n: j for n, j in summary.per_judge.items() if j.ok or j.errors or j.inconclusive or j.smoke}
    smoke = any(j.smoke for j in rows.values())
    idle = [n for n in summary.per_judge if n not in rows]  # asked for, ran on no record: named, not hidden
    title = f'judges ({len(summary.per_judge)})' + (f': {len(rows)} ran; did not run: {", ".join(idle)}' if idle else '')
    for line in _wrap(title, _WIDTH, subsequent_indent='  '):
        out.print(line, style='bold', highlight=False, markup=False)
    table = Table(box=None, pad_edge=False)
    table.add_column('judge', overflow='fold')
    columns = ('judged', 'passed', 'score', 'inconclusive', 'errors', *(('smoke',) if smoke else ()))
    for column in columns:
        table.add_column(column, justify='right', no_wrap=True)
    failed = 0
    for name, j in rows.items():
        failed += j.ok - round((j.pass_rate or 0.0) * j.ok)
        cells = [
            str(j.ok),
            f'{j.pass_rate:.0%}' if j.pass_rate is not None else '-',
            f'{j.mean_score:.2f}' if j.mean_score is not None else '-',
            str(j.inconclusive),
            str(j.errors),
            *((str(j.smoke),) if smoke else ()),
        ]
        table.add_row(name, *cells)
    print_table(out, table)
    legend = _LEGEND + (' · smoke: embedded model, not a verdict' if smoke else '')
    for line in _wrap(legend, _WIDTH):
        out.print(line, style='dim', highlight=False, markup=False)
    out.print(_overall_line(summary, failures), highlight=False, markup=False)
    _print_skipped(failures)
    if failed:
        out.print(f'[bold]failed verdicts[/] ({failed}):')
        cut = False
        for (record, name), reason in failures.shown.items():
            head = f'  {record} · {name} · '
            if failures.full:  # every word, each part of the reason wrapped to the width on its own lines
                first, *rest = reason.split('\n')
                lines = _wrap(head + first.strip(), _WIDTH, subsequent_indent='    ')
                for part in rest:
                    lines += _wrap(part.strip(), _WIDTH, initial_indent='    ', subsequent_indent='    ')
            else:
                line = head + reason
                if len(line) > _WIDTH:
                    line, cut = line[: _WIDTH - 3] + '...', True
                lines = [line]
            for line in lines:
                out.print(line, highlight=False, markup=False)
        if cut:
            out.print('  (reasons cut to one line: --verbose prints them in full)', highlight=False, markup=False)
        if failed > len(failures.shown):
            more = failed - len(failures.shown)
            out.print(f'  and {more} more (--verbose lists them all)', highlight=False, markup=False)
    elif stopped is None:
        out.print('no failed verdicts')
    if failures.explained:
        out.print(f'[bold]why each score is below 1.00[/] ({len(failures.explained)} record(s)):')
        for head, lines in failures.explained.items():
            out.print(f'  {head}', highlight=False, markup=False)
            for line in lines:
                for part in _wrap(line, _WIDTH, initial_indent='    ', subsequent_indent='      '):
                    out.print(part, highlight=False, markup=False)
    _print_not_run(failures)


def _print_skipped(failures: _Failures) -> None:
    """The judges that did not run on some records, with their most common reason, judges with the same
    reason and count on one line (the LLM judges that had no model are `_print_not_run`'s)."""
    groups: dict[tuple[str, int, int], list[str]] = {}
    for name, whys in failures.skipped.items():
        why, n = whys.most_common(1)[0]
        if why != NO_JUDGE_MODEL:
            groups.setdefault((why, n, sum(whys.values()) - n), []).append(name)
    if not groups:
        return
    out.print('[bold]skipped[/] (the judge does not apply there):')
    for (why, n, others), names in groups.items():
        more = f' (and {others} record(s) for other reasons)' if others else ''
        line = f'  {", ".join(names)}: {n} record(s): {why}{more}'
        for part in _wrap(line, _WIDTH, subsequent_indent='    '):
            out.print(part, highlight=False, markup=False)


def _print_not_run(failures: _Failures) -> None:
    """One line per LLM judge that did not run for want of a model, then how to name one."""
    names = [n for n, whys in failures.skipped.items() if NO_JUDGE_MODEL in whys]
    if not names:
        return
    out.print('[bold]LLM judges not run[/] (no judge model named):')
    for name in names:
        out.print(f'  {name}: needs a judge model', highlight=False, markup=False)
    for line in _NAME_A_MODEL:
        out.print(line, highlight=False, markup=False)


# How to name a judge model, printed under the LLM judges that did not run.
_NAME_A_MODEL = (
    'name a model to run them: --model openai:gpt-5.2 (any pydantic-ai model string),',
    '  --base-url URL --model NAME (Ollama, vLLM), or SENSEI_EVAL_MODEL=...;',
    '  --model embedded runs the offline smoke model ("embedded" extra): it checks',
    '  the LLM pipeline, it cannot judge',
)


def _overall_line(summary: RunSummary, failures: _Failures) -> str:
    """The run's overall score beside its coverage; "not judged" when no record has a score."""
    coverage = summary.coverage.label if summary.coverage is not None else 'not judged'
    not_run = sum(1 for whys in failures.skipped.values() if NO_JUDGE_MODEL in whys)
    if summary.mean_overall_score is None:  # no record has a score: no judge gave a verdict
        return 'overall: not judged (no judge gave a pass/fail verdict)'
    line = f'overall score {summary.mean_overall_score:.2f} · {coverage}'
    if not_run:  # the coverage counts the judges that ran: say the LLM judges were not among them
        line = f'overall score {summary.mean_overall_score:.2f} · checks only: {coverage}, {not_run} LLM judge(s) not run'
    unscored = summary.records_judged - summary.records_scored
    if unscored > 0:
        line += f' · {unscored} record(s) not judged'
    if summary.records_partly_judged:
        line += f' · {summary.records_partly_judged} partly judged'
    return line


def _record_label(report: RecordReport) -> str:
    return report.query_id if report.repeat == 1 else f'{report.query_id} (r{report.repeat})'


def _short_reason(result: JudgeResult) -> str:
    """One line: the judge's reasoning, or the first issue's first sentence-like text."""
    texts = [result.reasoning or '']
    for issue in result.issues[:1]:
        texts += [v for k, v in issue.items() if isinstance(v, str) and k != 'source']
    text = next((t for t in texts if ' ' in t.strip()), texts[0] if texts[0] else 'failed')
    return ' '.join(text.split())


def _full_reason(result: JudgeResult) -> str:
    """Every word of why a verdict failed (--verbose): the reasoning, then each issue's text fields."""
    parts = [result.reasoning.strip()] if result.reasoning and result.reasoning.strip() else []
    for issue in result.issues:
        fields = [f'{k}: {v}' for k, v in issue.items() if k not in ('source', 'steps') and v not in (None, '', [])]
        steps = issue.get('steps')
        cited = f' (steps {", ".join(map(str, steps))})' if isinstance(steps, list) and steps else ''
        if fields:
            parts.append('; '.join(fields) + cited)
    return '\n    '.join(parts) or 'failed'


def _print_footer(summary: RunSummary, run_dir: Path, stopped: str | None = None) -> None:
    ran = sum(1 for j in summary.per_judge.values() if j.ok or j.errors or j.inconclusive or j.smoke)
    judges = f'{ran} of {len(summary.judges)}' if ran < len(summary.judges) else str(len(summary.judges))
    calls = (
        f'{summary.model_requests} model request(s), {summary.cache_hits} cached · '
        f'{summary.input_tokens:,} tokens in / {summary.output_tokens:,} out'
        if summary.model_requests or summary.cache_hits or summary.model
        else 'no model requests'
    )
    err.print(f'{summary.records_judged} record(s) judged by {judges} judge(s) · {calls}', highlight=False)
    if summary.truncated_records:
        err.print(
            f'transcripts cut to the token budget: {", ".join(summary.truncated_records)} (see "truncation" in their reports)'
        )
    if summary.load_errors:
        err.print(f'[red]{len(summary.load_errors)} record(s) could not be loaded[/] (listed above)')
    if summary.judge_errors:
        err.print(f'[red]{len(summary.judge_errors)} judge error(s):[/]')
        # after the "first failure" rule stopped the run, its one reason is printed once, not per judge
        shared = [e for e in summary.judge_errors if stopped is not None and e.endswith(stopped)]
        for folded in fold_errors([e for e in summary.judge_errors if e not in shared]):
            for line in _wrap(folded, _WIDTH, initial_indent='  ', subsequent_indent='    '):
                err.print(line, highlight=False, markup=False)
        if shared:
            err.print(f'  {len(shared)} judge(s) not run: {stopped}', highlight=False, markup=False)
    if summary.inconclusive:
        err.print(
            f'[yellow]{len(summary.inconclusive)} verdict(s) inconclusive[/] (the judge answered without judging; '
            'left out of the scores, raw output kept in the reports):'
        )
        for line in summary.inconclusive[:10]:
            err.print(f'  {line}', highlight=False, markup=False)
        if len(summary.inconclusive) > 10:
            err.print(f'  … and {len(summary.inconclusive) - 10} more (summary.json lists them all)', highlight=False)
    err.print(f'reports: {run_dir}/', highlight=False, markup=False)
    # relative to the working directory when it can be (`reports/<run>`), so the command fits the 80 columns
    err.print(f'next: sensei-eval view {_shown_path(run_dir)}', highlight=False, markup=False)


# What makes two error messages "the same" for folding: numbers and long hex runs (ports, request ids,
# timings, attempt counts) are masked before comparing.
_VARYING = re.compile(r'\b[0-9a-f]{8,}\b|\d+(?:\.\d+)?')
# Records and judges named in a folded error line; the rest are counted.
_FOLD_NAMES = 3


def fold_errors(errors: Sequence[str]) -> list[str]:
    """`record: judge: message` lines with near-identical messages folded into one, with a count and the
    records and judges it happened to (one failing server gives one line, not one per call)."""
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for line in errors:
        record, _, rest = line.partition(': ')
        judge, _, why = rest.partition(': ')
        groups.setdefault(_VARYING.sub('#', why or rest), []).append((record, judge, why or rest))
    out = []
    for items in groups.values():
        if len(items) == 1:
            out.append(': '.join(p for p in items[0] if p))
            continue
        records = list(dict.fromkeys(r for r, _, _ in items))
        judges = list(dict.fromkeys(j for _, j, _ in items))
        out.append(f'{len(items)}× {items[0][2]} (records: {_few(records)}; judges: {_few(judges)})')
    return out


def _few(names: Sequence[str]) -> str:
    shown_ = ', '.join(names[:_FOLD_NAMES])
    return shown_ + (f' and {len(names) - _FOLD_NAMES} more' if len(names) > _FOLD_NAMES else '')


def _shown_path(path: Path) -> str:
    """`path` relative to the working directory when it is under it (`reports/<run>`), else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def print_judges() -> None:
    """`judge --list`: every judge, its groups, whether it needs a model and its criteria hash; the profiles."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    table.add_column('judge', no_wrap=True)
    table.add_column('groups')
    table.add_column('model', no_wrap=True)
    table.add_column('criteria hash', no_wrap=True)
    for name, cls in JUDGES.items():
        groups = ','.join(g for g, names in GROUPS.items() if name in names and g != 'all') or '-'
        mark = '*' if name in EXTRA_MODES else ''
        table.add_row(name + mark, groups, 'yes' if cls.needs_model else 'no', cls().criteria_hash()[:12])
    print_table(out, table)
    out.print('* beyond the 15 standard failure modes: judges the run against its own instructions')
    out.print('profiles (--profile, or metadata.profile per record):')
    for p in BUILTIN_PROFILES.values():
        out.print(f'  {p.name}: {p.description} Checks: {", ".join(p.checks)}.', highlight=False)
    out.print('group all: every judge above except investigation_score_structured')
