"""`sensei-eval view RUN [RUN2]`: a judge run (or two) as one self-contained HTML file a person can read.

`write_view(run_dirs, out)` reads one or two run folders (`summary.json` and `records/*.json`) and writes
one HTML file with everything inline — styles, no script, no font, no image, no link to anything outside
the file — so it opens offline and can be attached to a CI job.

What the page shows, every figure read from the verdict model (`core.verdicts`) and every reason from
`core.explain` (nothing is decided here):

* the header of each run: model, judges with their criteria hashes, datasets, records, tokens and
  model requests (the run folder records no money cost, so tokens stand for it);
* per judge: verdicts judged / passed / failed / errored / inconclusive / smoke and the pass rate;
* each record's overall score beside its coverage ("0.82 (checks only, 8 of 11 judges)"), or "not
  judged", with why it is below 1.00: the verdicts that cost points (a pass with a minor finding too),
  those not counted (error, inconclusive, smoke) and the judges skipped, each with its reason;
* each record's input warnings (what the loader could not place, folded with their count) and its
  required outputs (what the reference says the agent had to tell the user);
* every record with its verdicts that are not a clean pass and each one's FULL reason (the reasoning and
  every issue), and its transcript (numbered as the judges saw it), cited steps marked and linked;
* with a second run: the gate's own decision when it is given (`gate`: what `sensei-eval validate`
  decided, read from `validate`'s comparison, never recomputed here; else the page says it shows none),
  per judge the pass rates side by side, and per record and judge what changed — `regressed` (passed →
  failed), `fixed` (failed → passed), `changed status` (to or from an error or inconclusive) — and every
  overall score that moved; matched by query id and repeat; records on one side only are listed.

One colour rule everywhere: a verdict's colour is its status (pass, fail, inconclusive, error, smoke, not
applicable; a record's is fail when any verdict failed, pass when judged, else not judged), never a score
threshold.

Streaming: a run is read one report at a time and never held. What stays per record is a few hundred bytes
(its key, label, score and its verdicts' statuses, shared between records with the same ones); the records
table is written to a temporary file as the reports go by, the first `page_size` records' details are kept
for the main page and every later page file is written as its records are read. Bad report files do not
stop the page: each is listed at the top with the file and what failed.
"""

from __future__ import annotations

import html
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from sensei_eval.core.errors import ConfigError
from sensei_eval.core.explain import ScoreExplanation, explain_score
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, RunSummary
from sensei_eval.core.transcript import render_transcript
from sensei_eval.core.verdicts import Coverage, judge_status
from sensei_eval.judging.run_folder import ReportProblem, RunFolder, RunFolderError

__all__ = ('DEFAULT_NAME', 'DEFAULT_PAGE_SIZE', 'Change', 'GateDecision', 'compare_runs', 'write_view')

# The file name `view` writes inside the (first) run folder when --out is not given.
DEFAULT_NAME = 'view.html'
# Records shown in full (verdicts and transcript) per page file: a run of 100,000 records makes one page
# listing them all and 200 pages of details, instead of one file of over 100 MB.
DEFAULT_PAGE_SIZE = 500
# Score moves listed on the comparison page (the largest falls first); the rest are counted.
_MOVES_SHOWN = 200

_Key = tuple[str, int]  # (query_id, repeat): how a record of one run is matched in the other


# ---------------------------------------------------------------------------------------------------
# The gate's decision, as `validate` gives it (read, never computed here)


class GateMetric(Protocol):
    """One metric of the gate's comparison (`validate.results.MetricComparison` has it)."""

    @property
    def metric(self) -> str: ...
    @property
    def old_mean(self) -> float | None: ...
    @property
    def new_mean(self) -> float | None: ...
    @property
    def delta(self) -> float | None: ...
    @property
    def verdict(self) -> str: ...


class GateResultLike(Protocol):
    """The gate's result (`validate.results.GateResult` has it)."""

    @property
    def passed(self) -> bool: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def reasons(self) -> list[str]: ...


class GateDecision(Protocol):
    """What the comparison page reads of the gate beside it: `validate.results.Comparison`."""

    @property
    def gate(self) -> GateResultLike: ...
    @property
    def metrics(self) -> Sequence[GateMetric]: ...


# ---------------------------------------------------------------------------------------------------
# A run as read


@dataclass(frozen=True)
class Change:
    """One judge's verdict on one record that differs between the two runs."""

    query_id: str
    repeat: int
    judge: str
    kind: str  # regressed | fixed | changed status
    before: str
    after: str


@dataclass
class _JudgeTally:
    ok: int = 0
    passed: int = 0
    errors: int = 0
    inconclusive: int = 0
    smoke: int = 0
    other: int = 0  # any other status that is not a verdict (not applicable)

    @property
    def failed(self) -> int:
        return self.ok - self.passed

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.ok if self.ok else None

    def add(self, status: str) -> None:
        if status in ('pass', 'fail'):
            self.ok += 1
            self.passed += status == 'pass'
        elif status == 'error':
            self.errors += 1
        elif status == 'inconclusive':
            self.inconclusive += 1
        elif status == 'smoke':
            self.smoke += 1
        else:
            self.other += 1


@dataclass(frozen=True)
class _Seen:
    """What the page keeps of a record once its report is read: a few hundred bytes."""

    key: _Key
    label: str
    position: int
    statuses: tuple[tuple[str, str], ...]  # (judge, status), shared between records with the same ones
    score: float | None


@dataclass
class _Run:
    path: Path
    index: int  # 0: the only or the old run, 1: the new run
    page_size: int  # records shown in full per page file (0: all on the one page)
    stem: str  # the main page's file name without .html; later pages are <stem>-<run>-<page>.html
    summary: RunSummary | None = None
    problems: list[ReportProblem] = field(default_factory=list)
    seen: list[_Seen] = field(default_factory=list)
    tallies: dict[str, _JudgeTally] = field(default_factory=dict)
    first_page: list[str] = field(default_factory=list)  # the main page's record details, HTML
    rows: IO[str] | None = None  # the records table's rows, HTML, in a temporary file

    @property
    def name(self) -> str:
        return self.summary.run_id if self.summary else self.path.name

    def anchor(self, position: int) -> str:
        """The page id of a record: made of its position, never of its (untrusted) text."""
        return f'r{self.index}-{position}'

    def page_of(self, position: int) -> int:
        return 1 + position // self.page_size if self.page_size else 1

    def page_file(self, page: int) -> str:
        return f'{self.stem}.html' if page == 1 else f'{self.stem}-{self.index}-{page}.html'

    def href(self, position: int) -> str:
        """The link to a record's full entry, on this page or the page file holding it."""
        page = self.page_of(position)
        anchor = self.anchor(position)
        return f'#{anchor}' if page == 1 else f'{self.page_file(page)}#{anchor}'

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.seen) // self.page_size)) if self.page_size else 1

    def by_key(self) -> dict[_Key, _Seen]:
        return {s.key: s for s in self.seen}


def _scan(run: _Run, folder_out: Path, title: str) -> None:
    """Read `run`'s reports one at a time: tallies, the compact `_Seen` per record, the records table's rows
    (to a temporary file), the first page's details (kept) and every later page (written as it fills)."""
    folder = RunFolder(run.path)
    try:
        run.summary = folder.load_summary()
    except RunFolderError as e:  # a bad summary is listed like a bad report; the records still show
        run.problems.append(ReportProblem(folder.summary_path, str(e).removeprefix(f'{folder.summary_path}: ')))
    run.rows = tempfile.TemporaryFile('w+', encoding='utf-8')  # noqa: SIM115 - closed by write_view when the page is out
    patterns: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
    page_out: IO[str] | None = None
    page_number = 1
    try:
        for _, item in folder.iter_reports():  # raises FileNotFoundError / RunFolderError for a missing folder
            if isinstance(item, ReportProblem):
                run.problems.append(item)
                continue
            position = len(run.seen)
            statuses = tuple((name, judge_status(result)) for name, result in item.judges.items())
            for name, status in statuses:
                run.tallies.setdefault(name, _JudgeTally()).add(status)
            why = explain_score(list(item.judges.values()), item.skipped)
            run.seen.append(
                _Seen(
                    (item.query_id, item.repeat),
                    _label(item),
                    position,
                    patterns.setdefault(statuses, statuses),
                    item.overall_score,
                )
            )
            run.rows.write(_row_html(run, item, position, why))
            detail = _record_html(item, run.anchor(position), why)
            page = run.page_of(position)
            if page == 1:
                run.first_page.append(detail)
                continue
            if page != page_number:  # the next page file starts
                if page_out is not None:
                    page_out.write(_document_end())
                    page_out.close()
                page_number = page
                page_out = (folder_out / run.page_file(page)).open('w', encoding='utf-8')
                back = f'<p><a href="{_e(run.page_file(1))}">← {_e(title)}: {_e(run.path.name)}</a> · page {page}</p>'
                page_out.write(_document_start(f'{run.path.name} (page {page})') + back)
            assert page_out is not None
            page_out.write(detail)
    finally:
        if page_out is not None:
            page_out.write(_document_end())
            page_out.close()


def _label(report: RecordReport) -> str:
    return report.query_id if report.repeat == 1 else f'{report.query_id} (r{report.repeat})'


# ---------------------------------------------------------------------------------------------------
# Comparing


@dataclass
class _Comparison:
    changes: list[Change] = field(default_factory=list)
    moves: list[tuple[_Seen, float | None, float | None]] = field(default_factory=list)  # new record, before, after
    only_old: list[_Key] = field(default_factory=list)
    only_new: list[_Key] = field(default_factory=list)


def compare_runs(old: Sequence[RecordReport], new: Sequence[RecordReport]) -> list[Change]:
    """Every judge verdict that differs between two runs, matched by (query id, repeat), regressions first."""

    def seen(r: RecordReport) -> _Seen:
        return _Seen(
            (r.query_id, r.repeat), _label(r), 0, tuple((n, judge_status(j)) for n, j in r.judges.items()), r.overall_score
        )

    return _compare({(r.query_id, r.repeat): seen(r) for r in old}, {(r.query_id, r.repeat): seen(r) for r in new}).changes


def _compare(old: dict[_Key, _Seen], new: dict[_Key, _Seen]) -> _Comparison:
    out = _Comparison(only_old=sorted(set(old) - set(new)), only_new=sorted(set(new) - set(old)))
    for key in sorted(set(old) & set(new)):
        a, b = dict(old[key].statuses), dict(new[key].statuses)
        for judge in sorted(set(a) | set(b)):
            before, after = a.get(judge, 'absent'), b.get(judge, 'absent')
            if before == after:
                continue
            pair = (before, after)
            kind = 'regressed' if pair == ('pass', 'fail') else 'fixed' if pair == ('fail', 'pass') else 'changed status'
            out.changes.append(Change(key[0], key[1], judge, kind, before, after))
        if old[key].score != new[key].score:
            out.moves.append((new[key], old[key].score, new[key].score))
    order = {'regressed': 0, 'fixed': 1, 'changed status': 2}
    out.changes.sort(key=lambda c: (order[c.kind], c.query_id, c.repeat, c.judge))
    out.moves.sort(key=lambda m: ((m[2] if m[2] is not None else -1.0) - (m[1] if m[1] is not None else -1.0), m[0].key))
    return out


# ---------------------------------------------------------------------------------------------------
# HTML pieces


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _pct(value: float | None) -> str:
    return '–' if value is None else f'{value:.0%}'


def _cls(status: str) -> str:
    """The CSS class of a status: the one colour rule (`pass`, `fail`, `not-applicable` ...)."""
    return status.replace(' ', '-').replace('_', '-')


def _score_text(score: float | None, coverage: Coverage | None) -> str:
    """A score beside its coverage (`core.verdicts`): "0.82 (checks only, 8 of 11 judges)", "not judged"."""
    if score is None:
        return 'not judged'
    return f'{score:.2f}' if coverage is None or coverage.complete else f'{score:.2f} ({coverage.label})'


def _record_status(statuses: Sequence[tuple[str, str]], score: float | None) -> str:
    """A record's colour: fail when any verdict failed, pass when judged, else not judged."""
    if any(s == 'fail' for _, s in statuses):
        return 'fail'
    return 'pass' if score is not None else 'not judged'


def _steps(steps: Sequence[int], anchor: str) -> str:
    return ' '.join(f'<a href="#{anchor}-s{n}">step {n}</a>' for n in steps)


def _why_html(why: ScoreExplanation, anchor: str) -> str:
    """Why the score is what it is: each cost with its findings, the verdicts not counted, the judges skipped."""
    items = []
    for c in why.costs:
        score = f' {c.score:.2f}' if c.score is not None else ''
        findings = ''.join(
            f'<li><span class="sev">{_e(f.severity or "finding")}</span> {_e(f.text)}'
            + (f' <span class="cites">({_steps(f.steps, anchor)})</span>' if f.steps else '')
            + '</li>'
            for f in c.findings
        )
        reason = f' <span class="muted">{_e(c.why)}</span>' if c.why and not c.findings else ''
        items.append(
            f'<li class="cost {_cls(c.status)}" data-judge="{_e(c.judge)}"><span class="tag {_cls(c.status)}">'
            f'{_e(c.status)}</span> <b>{_e(c.label)}</b>{score}{reason}' + (f'<ul>{findings}</ul>' if findings else '') + '</li>'
        )
    for c in why.not_counted:
        reason = f' {_e(c.why)}' if c.why else ''
        items.append(
            f'<li class="uncounted {_cls(c.status)}" data-judge="{_e(c.judge)}"><span class="tag {_cls(c.status)}">'
            f'{_e(c.status)}</span> <b>{_e(c.label)}</b>: not counted in the score.{reason}</li>'
        )
    for name, reason in why.skipped.items():
        items.append(f'<li class="skipped"><span class="tag skipped">skipped</span> <b>{_e(name)}</b>: {_e(reason)}</li>')
    if why.overall_score is None:
        head = 'Not judged: no judge gave a pass/fail verdict.'
    elif why.full_marks:
        head = f'{why.overall_score:.2f}: every verdict passed without a finding.'
    else:
        head = f'Why {why.overall_score:.2f}:'
    body = f'<ul>{"".join(items)}</ul>' if items else ''
    return f'<div class="why-score"><p><b>{_e(head)}</b></p>{body}</div>'


def _why_chips(why: ScoreExplanation) -> str:
    """The records table's "why" cell: a chip per cost and per verdict not counted, coloured by status."""
    chips = []
    for c in why.costs:
        minor = ' minor' if c.findings and all(f.severity == 'minor' for f in c.findings) else ''
        score = f' {c.score:.2f}' if c.score is not None else ''
        chips.append(f'<span class="chip {_cls(c.status)}">{_e(c.judge)}{score}{minor}</span>')
    chips += [f'<span class="chip {_cls(c.status)}">{_e(c.judge)}: {_e(c.status)}</span>' for c in why.not_counted]
    if not chips:
        chips.append('<span class="muted">every verdict passed, no finding</span>' if why.overall_score is not None else '')
    if why.skipped:
        chips.append(f'<span class="muted">{len(why.skipped)} skipped</span>')
    return ' '.join(c for c in chips if c)


def _row_html(run: _Run, report: RecordReport, position: int, why: ScoreExplanation) -> str:
    status = _record_status([(n, judge_status(r)) for n, r in report.judges.items()], report.overall_score)
    score = _score_text(report.overall_score, report.coverage)
    return (
        f'<tr><td><a href="{_e(run.href(position))}">{_e(_label(report))}</a></td>'
        f'<td><span class="score {_cls(status)}">{_e(score)}</span></td><td>{_why_chips(why)}</td></tr>'
    )


def _reason_html(result: JudgeResult, anchor: str) -> str:
    """The full reason of a verdict: the error, the reasoning, then every issue with all its fields and steps."""
    parts: list[str] = []
    if result.error:
        parts.append(f'<p class="why">{_e(result.error)}</p>')
    if result.reasoning:
        parts.append(f'<p class="reasoning">{_e(result.reasoning)}</p>')
    for issue in result.issues:
        rows = []
        for key, value in issue.items():
            if key in ('steps', 'source') or value in (None, '', []):
                continue
            text = ', '.join(map(str, value)) if isinstance(value, list) else value
            rows.append(f'<dt>{_e(key.replace("_", " "))}</dt><dd>{_e(text)}</dd>')
        steps = [n for n in issue.get('steps') or [] if isinstance(n, int)]
        cites = f'<p class="cites">cites {_steps(steps, anchor)}</p>' if steps else ''
        parts.append(f'<div class="issue"><dl>{"".join(rows)}</dl>{cites}</div>')
    return ''.join(parts) or '<p class="muted">no reason given</p>'


def _record_html(report: RecordReport, anchor: str, why: ScoreExplanation) -> str:
    """A record in full: its score and why, every verdict but a clean pass with its whole reason, the
    transcript with the steps a finding cites marked."""
    cited: set[int] = set()
    verdicts = ''
    clean: list[str] = []
    for name, result in report.judges.items():
        status = judge_status(result)
        if status == 'pass' and not result.issues:
            clean.append(name)
            continue
        for issue in result.issues:
            cited.update(n for n in issue.get('steps') or [] if isinstance(n, int))
        verdicts += (
            f'<div class="verdict {_cls(status)}" data-judge="{_e(name)}" data-verdict="{_e(status)}">'
            f'<h4>{_e(name)} <span class="tag {_cls(status)}">{_e(status)}</span></h4>{_reason_html(result, anchor)}</div>'
        )
    if clean:
        verdicts += f'<p class="muted">passed without a finding: {_e(", ".join(clean))}</p>'
    if report.input_warnings:  # what the loader could not place or changed: the judges saw the record without it
        items = ''.join(f'<li>{_e(w)}</li>' for w in report.input_warnings)
        count = len(report.input_warnings)
        verdicts += f'<details class="warnings"><summary>input warnings ({count})</summary><ul>{items}</ul></details>'
    outputs = ''
    if report.expected_outputs:  # what the reference says the agent had to tell the user
        outputs = f'<p class="expected-outputs muted">required outputs: {_e(", ".join(map(repr, report.expected_outputs)))}</p>'
    statuses = [(n, judge_status(r)) for n, r in report.judges.items()]
    score = _score_text(report.overall_score, report.coverage)
    return (
        f'<section class="card record" id="{anchor}"><h3>{_e(_label(report))} <span class="score '
        f'{_cls(_record_status(statuses, report.overall_score))}">overall {_e(score)}</span></h3>'
        f'<p class="query">{_e(report.query)}</p>{_why_html(why, anchor)}{outputs}{verdicts}'
        f'{_transcript_html(report, anchor, cited)}</section>'
    )


def _transcript_html(report: RecordReport, anchor: str, cited: set[int]) -> str:
    try:
        record = QueryRecord(
            query_id=report.query_id,
            query=report.query,
            messages=report.messages,
            message_format=report.message_format,
            metadata=report.metadata,
        )
        steps = render_transcript(record, include_system=False).steps
    except Exception as e:  # a report whose messages no longer parse: say so, keep the page
        return f'<p class="problems">transcript not shown: {_e(type(e).__name__)}: {_e(e)}</p>'
    items = ''
    for step in steps:
        mark = ' cited' if step.number in cited else ''
        who = (f' ({step.speaker})' if step.speaker else '') + (f' {step.tool_name}' if step.tool_name else '')
        items += (
            f'<li id="{anchor}-s{step.number}" class="step {_e(step.kind)}{mark}"><span class="n">[{step.number}] '
            f'{_e(step.kind.replace("_", " "))}{_e(who)}</span><pre>{_e(step.text)}</pre></li>'
        )
    open_ = ' open' if cited else ''
    return f'<details class="transcript"{open_}><summary>transcript ({len(steps)} steps)</summary><ol>{items}</ol></details>'


def _header_rows(run: _Run) -> dict[str, str]:
    s = run.summary
    rows = {'folder': str(run.path)}
    if s is not None:
        rows |= {
            'run id': s.run_id,
            'model': s.model or '–',
            'judges (criteria hash)': ', '.join(f'{n} ({h[:12]})' for n, h in s.judges.items()) or '–',
            'datasets': ', '.join(s.datasets) or '–',
            'profile': s.profile or '–',
            'records': f'{s.records_judged} judged of {s.records_loaded} loaded, repeat {s.repeat}',
            'mean overall score': _score_text(s.mean_overall_score, s.coverage),
            'cost': f'{s.input_tokens:,} tokens in, {s.output_tokens:,} out, {s.model_requests} model request(s), '
            f'{s.cache_hits} cached (no price is recorded)',
            'when': f'{s.started_at:%Y-%m-%d %H:%M:%S} → {s.finished_at:%Y-%m-%d %H:%M:%S} UTC',
        }
    else:
        rows |= {
            'judges': ', '.join(sorted(run.tallies)) or '–',
            'records': str(len(run.seen)),
            'summary': 'no summary.json in this folder',
        }
    return rows


def _header_html(runs: Sequence[_Run], titles: Sequence[str]) -> str:
    """The runs' headers, one column per run, and the report files that did not load."""
    columns = [_header_rows(r) for r in runs]
    keys = list(dict.fromkeys(k for c in columns for k in c))
    head = '<tr><th></th>' + ''.join(f'<th>{_e(t)}</th>' for t in titles) + '</tr>' if len(runs) > 1 else ''
    body = ''.join(f'<tr><th>{_e(k)}</th>' + ''.join(f'<td>{_e(c.get(k, "–"))}</td>' for c in columns) + '</tr>' for k in keys)
    problems = ''
    for run, title in zip(runs, titles, strict=True):
        if run.problems:
            items = ''.join(f'<li>{_e(p)}</li>' for p in run.problems)
            problems += (
                f'<div class="problems"><strong>{_e(title)}: {len(run.problems)} report file(s) did not load:</strong>'
                f'<ul>{items}</ul></div>'
            )
    title = 'The runs' if len(runs) > 1 else 'The run'
    return f'<section class="card"><h2>{title}</h2><table class="kv">{head}{body}</table>{problems}</section>'


def _bar(t: _JudgeTally) -> str:
    """The verdicts as a bar: the passed share green, the failed share red (the colour rule)."""
    if not t.ok:
        return ''
    return (
        f'<span class="meter"><span class="pass" style="width:{t.passed / t.ok * 100:.0f}%"></span>'
        f'<span class="fail" style="width:{t.failed / t.ok * 100:.0f}%"></span></span>'
    )


def _judges_html(runs: Sequence[_Run]) -> str:
    tallies = [r.tallies for r in runs]
    names = sorted(set().union(*tallies))
    if len(runs) == 1:
        head = _head('judge', 'judged', 'passed', 'failed', 'errors', 'inconclusive', 'smoke', 'pass rate')
        body = ''
        for n in names:
            t = tallies[0][n]
            body += (
                f'<tr data-judge="{_e(n)}"><td>{_e(n)}</td><td>{t.ok}</td><td>{t.passed}</td><td>{t.failed}</td>'
                f'<td>{t.errors}</td><td>{t.inconclusive}</td><td>{t.smoke}</td><td class="rate">{_pct(t.pass_rate)}'
                f'{_bar(t)}</td></tr>'
            )
    else:
        head = _head('judge', 'old pass rate', 'new pass rate', 'Δ', 'old err/inc', 'new err/inc')
        body = ''
        for n in names:
            a, b = tallies[0].get(n, _JudgeTally()), tallies[1].get(n, _JudgeTally())
            delta = '–'
            if a.pass_rate is not None and b.pass_rate is not None:
                delta = f'{b.pass_rate - a.pass_rate:+.0%}'
            body += (
                f'<tr data-judge="{_e(n)}"><td>{_e(n)}</td><td>{_pct(a.pass_rate)} ({a.passed}/{a.ok})</td>'
                f'<td>{_pct(b.pass_rate)} ({b.passed}/{b.ok})</td><td>{delta}</td>'
                f'<td>{a.errors}/{a.inconclusive}</td><td>{b.errors}/{b.inconclusive}</td></tr>'
            )
    caption = (
        'Pass rate = passed / verdicts that judged (errors, inconclusive verdicts and smoke answers of the '
        'embedded model are not counted as either).'
    )
    return (
        f'<section class="card"><h2>Per judge</h2><p class="muted">{caption}</p>'
        f'<table class="list" id="judges">{head}{body}</table></section>'
    )


def _head(*names: str) -> str:
    return '<tr>' + ''.join(f'<th>{_e(n)}</th>' for n in names) + '</tr>'


def _gate_html(gate: GateDecision | None, runs: Sequence[_Run]) -> str:
    """The gate's decision as `validate` made it (its exit code, reasons and metric verdicts), or a note
    that this page shows none: the changes below are listed, not tested."""
    if gate is None:
        old, new = (_e(r.path) for r in runs)
        return (
            '<section class="card" id="gate"><h2>The gate</h2><p class="muted">No gate decision on this page: '
            f'<code>sensei-eval validate --old-reports {old} --new-reports {new}</code> decides (and writes this page '
            'with its decision). What changed below is listed per verdict and per score, not tested.</p></section>'
        )
    result = gate.gate
    word = 'passed' if result.passed else 'failed'
    reasons = ''.join(f'<li>{_e(r)}</li>' for r in result.reasons)
    rows = ''
    for m in gate.metrics:
        means = '–' if m.old_mean is None or m.new_mean is None else f'{m.old_mean:.3f} → {m.new_mean:.3f}'
        delta = '–' if m.delta is None else f'{m.delta:+.3f}'
        verdict = m.verdict.replace('_', ' ')
        rows += (
            f'<tr data-metric="{_e(m.metric)}" data-verdict="{_e(m.verdict)}"><td>{_e(m.metric)}</td><td>{means}</td>'
            f'<td>{delta}</td><td><span class="tag v-{_e(m.verdict)}">{_e(verdict)}</span></td></tr>'
        )
    return (
        f'<section class="card" id="gate"><h2>The gate: <span class="tag {_cls("pass" if result.passed else "fail")}" '
        f'id="gate-decision">{word}</span> (exit {result.exit_code})</h2>'
        + (f'<ul class="reasons">{reasons}</ul>' if reasons else '')
        + f'<table class="list" id="gate-metrics">{_head("metric", "before → after", "Δ", "verdict")}{rows}</table></section>'
    )


def _diff_html(cmp: _Comparison, new: _Run) -> str:
    counts = {k: sum(1 for c in cmp.changes if c.kind == k) for k in ('regressed', 'fixed', 'changed status')}
    summary = ' · '.join(f'{n} {k}' for k, n in counts.items())
    by_key = new.by_key()
    rows = ''
    for c in cmp.changes:
        seen = by_key[(c.query_id, c.repeat)]
        link = f'<a href="{_e(new.href(seen.position))}">{_e(seen.label)}</a>'
        rows += (
            f'<tr class="{c.kind.replace(" ", "-")}" data-kind="{_e(c.kind)}"><td>{_e(c.kind)}</td><td>{link}</td>'
            f'<td>{_e(c.judge)}</td><td>{_e(c.before)} → {_e(c.after)}</td></tr>'
        )
    table = (
        f'<table class="list" id="changes"><tr><th>change</th><th>record</th><th>judge</th><th>verdict</th></tr>{rows}</table>'
        if rows
        else '<p class="muted">No pass/fail verdict changed.</p>'
    )
    fell = sum(1 for _, a, b in cmp.moves if (b if b is not None else -1.0) < (a if a is not None else -1.0))
    moves = ''
    for seen, before, after in cmp.moves[:_MOVES_SHOWN]:
        a, b = ('not judged' if x is None else f'{x:.2f}' for x in (before, after))
        moves += f'<tr><td><a href="{_e(new.href(seen.position))}">{_e(seen.label)}</a></td><td>{a} → {b}</td></tr>'
    more = f'<p class="muted">and {len(cmp.moves) - _MOVES_SHOWN} more</p>' if len(cmp.moves) > _MOVES_SHOWN else ''
    moved = (
        f'<h3>Scores that moved</h3><p id="score-moves">{fell} fell · {len(cmp.moves) - fell} rose</p>'
        f'<table class="list" id="moves"><tr><th>record</th><th>overall score, old → new</th></tr>{moves}</table>{more}'
        if cmp.moves
        else '<p class="muted" id="score-moves">No overall score moved.</p>'
    )
    extra = ''
    if cmp.only_old or cmp.only_new:
        gone = ', '.join(_e(k[0]) for k in cmp.only_old) or '–'
        added = ', '.join(_e(k[0]) for k in cmp.only_new) or '–'
        extra = f'<p class="muted">Only in the old run: {gone}. Only in the new run: {added}.</p>'
    return (
        f'<section class="card"><h2>What changed (old → new)</h2><h3>Verdicts</h3><p id="change-counts">{_e(summary)}</p>'
        f'{table}{moved}{extra}</section>'
    )


def _records_head(run: _Run, title: str) -> str:
    more = ''
    if run.pages > 1:
        links = ' '.join(f'<a href="{_e(run.page_file(p))}">{p}</a>' for p in range(2, run.pages + 1))
        more = (
            f'<p class="muted">{len(run.seen):,} records: the first {run.page_size:,} in full below, '
            f'the others {run.page_size:,} per page: {links}</p>'
        )
    return (
        f'<section class="card"><h2>{_e(title)}: records</h2>{more}<table class="list">'
        '<tr><th>record</th><th>overall</th><th>why (what cost points, what did not count)</th></tr>'
    )


def _write_records(out: IO[str], run: _Run, title: str) -> None:
    """The records table (copied from the run's temporary file), then the first page's details."""
    out.write(_records_head(run, title))
    assert run.rows is not None
    run.rows.seek(0)
    shutil.copyfileobj(run.rows, out)
    out.write('</table></section>')
    for detail in run.first_page:
        out.write(detail)


# One colour per status, the only colour rule of the page: pass, fail, inconclusive, error, smoke, not
# applicable (and a record not judged, a judge skipped). No colour is ever chosen by a score.
_CSS = """
body{font:14px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f6f7f9;margin:0}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:20px}h2{font-size:15px;margin:0 0 8px}h3{font-size:14px;margin:8px 0 6px}h4{margin:8px 0 4px;font-size:13px}
.card{background:#fff;border:1px solid #e3e6eb;border-radius:8px;padding:12px 14px;margin:12px 0}
.muted{color:#667085}table{border-collapse:collapse;width:100%}
table.list th,table.list td,table.kv th,table.kv td{text-align:left;padding:5px 8px;vertical-align:top;
  border-bottom:1px solid #e3e6eb}
table.kv th{width:170px;color:#667085;font-weight:500}
.pass{--c:#1f8f4e;--b:#dff5e8}.fail{--c:#b42318;--b:#fde2df}.error{--c:#8a4b00;--b:#ffe6c7}
.inconclusive{--c:#5b6270;--b:#e4e6ea}.smoke{--c:#3f5b8a;--b:#e3eaf5}
.not-applicable,.not-judged,.skipped,.absent{--c:#667085;--b:#f0f1f3}
.chip,.tag,.score{display:inline-block;border-radius:4px;color:var(--c,#5b6270);background:var(--b,#eef0f3)}
.chip{margin:2px 4px 2px 0;padding:1px 6px;font-size:12px}.tag{font-size:11px;padding:1px 6px}
.score{padding:1px 6px;font-weight:600}
.verdict{border-left:3px solid var(--c,#cfd4dc);padding:2px 10px;margin:8px 0}
.why-score{margin:6px 0 10px}.why-score ul{margin:4px 0;padding-left:18px}.why-score li{margin:3px 0}
.why-score .sev{font-size:11px;text-transform:uppercase;color:#667085;margin-right:4px}
.reasoning,.why{white-space:pre-wrap;margin:4px 0}
.issue dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0}
.issue dt{color:#667085}.issue dd{margin:0;white-space:pre-wrap;word-break:break-word}
.transcript ol{list-style:none;padding:0;margin:6px 0}
.step{border-bottom:1px solid #eef0f3;padding:4px 8px}.step .n{font-weight:600;font-size:12px}
.step pre{margin:2px 0;white-space:pre-wrap;word-break:break-word;font:12px ui-monospace,Menlo,monospace;
  max-height:260px;overflow:auto}
.step.cited{background:#fffbea;outline:2px solid #fbbf24}
.step:target{background:#fff3c4}
tr.regressed td:first-child{color:#b42318;font-weight:600}tr.fixed td:first-child{color:#1f8f4e;font-weight:600}
.meter{display:inline-flex;width:80px;height:8px;background:#eef0f3;border-radius:4px;margin-left:8px;vertical-align:middle;
  overflow:hidden}.meter span{display:block;height:8px;background:var(--c)}
.v-regressed{color:#b42318;background:#fde2df}.v-improved{color:#1f8f4e;background:#dff5e8}
.problems{background:#fde2df;color:#b42318;padding:6px 10px;border-radius:6px}
.query{white-space:pre-wrap;margin:4px 0 8px}
"""

# The page may load nothing from anywhere: no script, no external style, image, font or frame.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _document_start(name: str) -> str:
    made = datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>sensei-eval: {_e(name)}</title>'
        f'<style>{_CSS}</style></head><body><main><h1>sensei-eval · {_e(name)}</h1>'
        f'<p class="muted">Written {made} by sensei-eval view.</p>'
    )


def _document_end() -> str:
    return '</main></body></html>\n'


def write_view(
    run_dirs: Sequence[str | Path],
    out: str | Path | None = None,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    gate: GateDecision | None = None,
) -> Path:
    """Write the page of one run folder (or two: old, new) to `out` (default `<first run>/view.html`).

    Each run's first `page_size` records are shown in full on that page; the others, `page_size` per file,
    on pages written beside it (`view-0-2.html` ...), linked from the records table (0: all on one page).
    Reports are read one at a time (module docstring), so memory stays bounded by a page, not by the run.
    With two runs, `gate` is the decision of the gate beside the page (`validate`'s comparison)."""
    if page_size < 0:
        raise ConfigError('page_size must be 0 (one page) or more')
    if not 1 <= len(run_dirs) <= 2:
        raise ConfigError('view shows one run, or two to compare')
    path = Path(out) if out is not None else Path(run_dirs[0]) / DEFAULT_NAME
    titles = ['run'] if len(run_dirs) == 1 else ['old run', 'new run']
    runs = [_Run(Path(d), i, page_size, path.stem) for i, d in enumerate(run_dirs)]
    for run in runs:
        RunFolder(run.path).check()  # FileNotFoundError / RunFolderError before anything is written
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for run, title in zip(runs, titles, strict=True):
            _scan(run, path.parent, title)
        with path.open('w', encoding='utf-8') as page:
            page.write(_document_start(' vs '.join(r.name for r in runs)))
            page.write(_header_html(runs, [f'{t}: {r.name}' for r, t in zip(runs, titles, strict=True)]))
            if len(runs) == 2:
                page.write(_gate_html(gate, runs))
            page.write(_judges_html(runs))
            if len(runs) == 2:
                page.write(_diff_html(_compare(runs[0].by_key(), runs[1].by_key()), runs[1]))
            for i in reversed(range(len(runs))):  # the records of the (new) run, in full; the old run's follow
                _write_records(page, runs[i], titles[i])
            page.write(_document_end())
    finally:
        for run in runs:
            if run.rows is not None:
                run.rows.close()
    return path
