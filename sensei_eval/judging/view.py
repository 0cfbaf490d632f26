"""`sensei-eval view RUN [RUN2]`: a judge run (or two) as one self-contained HTML file a person can read.

`write_view(run_dirs, out)` reads one or two run folders (`RunFolder.load`: `summary.json` and
`records/*.json`) and writes one HTML file with everything inline — styles, no script, no font, no
image, no link to anything outside the file — so it opens offline and can be attached to a CI job.

What the page shows:

* the header of each run: model, judges with their criteria hashes, datasets, records, tokens and
  model requests (the run folder records no money cost, so tokens stand for it);
* per judge: verdicts judged / passed / failed / errored / inconclusive / smoke and the pass rate
  (passed / judged), all read from the verdict model (`core.verdicts`);
* each record's overall score beside its coverage ("0.82 (checks only, 8 of 11 judges)"), or
  "not judged" when no judge gave a verdict;
* each record's input warnings (what the loader could not place, folded with their count);
* every record with its failed verdicts and each one's FULL reason (the reasoning and every issue),
  errors and inconclusive verdicts named as such (an error is never a pass or a fail);
* each record's transcript (numbered as the judges saw it), steps cited by a failed verdict marked and
  linked from the verdict;
* with a second run: per judge the pass rates side by side, and per record and judge what changed —
  `regressed` (passed → failed), `fixed` (failed → passed), `changed status` (to or from an error or
  inconclusive), matched by query id and repeat; records present on one side only are listed.

Bad report files do not stop the page: each is listed at the top with the file and what failed.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sensei_eval.core.errors import ConfigError
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RecordReport, RunSummary
from sensei_eval.core.transcript import render_transcript
from sensei_eval.core.verdicts import Coverage, judge_status
from sensei_eval.judging.run_folder import ReportProblem, RunFolder, RunFolderError

__all__ = ('DEFAULT_NAME', 'DEFAULT_PAGE_SIZE', 'Change', 'compare_runs', 'render_view', 'write_view')

# The file name `view` writes inside the (first) run folder when --out is not given.
DEFAULT_NAME = 'view.html'
# Records shown in full (verdicts and transcript) per page file: a run of 100,000 records makes one page
# listing them all and 200 pages of details, instead of one file of over 100 MB.
DEFAULT_PAGE_SIZE = 500

_Key = tuple[str, int]  # (query_id, repeat): how a record of one run is matched in the other


@dataclass
class _Run:
    path: Path
    summary: RunSummary | None
    reports: list[RecordReport]  # past the first page, without their transcripts (`_light`)
    problems: list[ReportProblem]
    index: int = 0  # 0: the only or the old run, 1: the new run
    paths: list[Path] = field(default_factory=list)  # each report's file, to read a later page in full
    page_size: int = 0  # records shown in full per page file (0: all on the one page)
    stem: str = 'view'  # the main page's file name without .html; later pages are <stem>-<run>-<page>.html

    def anchor(self, report: RecordReport) -> str:
        """The page id of a record: made of its position, never of its (untrusted) text."""
        return f'r{self.index}-{self._positions.get((report.query_id, report.repeat), 0)}'

    def page_of(self, report: RecordReport) -> int:
        """The page (1 = the main file) showing this record in full."""
        position = self._positions.get((report.query_id, report.repeat), 0)
        return 1 + position // self.page_size if self.page_size else 1

    def page_file(self, page: int) -> str:
        return f'{self.stem}.html' if page == 1 else f'{self.stem}-{self.index}-{page}.html'

    def href(self, report: RecordReport) -> str:
        """The link to a record's full entry, on this page or the page file holding it."""
        page = self.page_of(report)
        return f'#{self.anchor(report)}' if page == 1 else f'{self.page_file(page)}#{self.anchor(report)}'

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.reports) // self.page_size)) if self.page_size else 1

    @functools.cached_property
    def _positions(self) -> dict[_Key, int]:
        return {(r.query_id, r.repeat): n for n, r in enumerate(self.reports)}

    @property
    def name(self) -> str:
        return self.summary.run_id if self.summary else self.path.name

    def by_key(self) -> dict[_Key, RecordReport]:
        return {(r.query_id, r.repeat): r for r in self.reports}


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

    @property
    def failed(self) -> int:
        return self.ok - self.passed

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.ok if self.ok else None


@dataclass
class _Comparison:
    changes: list[Change] = field(default_factory=list)
    only_old: list[_Key] = field(default_factory=list)
    only_new: list[_Key] = field(default_factory=list)


def _load(path: str | Path, page_size: int = 0) -> _Run:
    """A run folder's reports, streamed: the first `page_size` in full, the rest without their transcripts
    (`page_size` 0: all in full), so a run of 100,000 records is never held whole."""
    folder = RunFolder(path)
    reports: list[RecordReport] = []
    problems: list[ReportProblem] = []
    paths: list[Path] = []
    # raises FileNotFoundError / RunFolderError for a missing folder
    for file, item in folder.iter_reports():
        if isinstance(item, ReportProblem):
            problems.append(item)
            continue
        reports.append(item if not page_size or len(reports) < page_size else _light(item))
        paths.append(file)
    try:
        summary = folder.load_summary()
    except RunFolderError as e:  # a bad summary is listed like a bad report; the records still show
        summary = None
        problems.append(ReportProblem(folder.summary_path, str(e).removeprefix(f'{folder.summary_path}: ')))
    return _Run(folder.path, summary, reports, problems, paths=paths, page_size=page_size)


# What a report past the first page keeps of each verdict's texts: none (its page reads the file again).
_TEXTS: dict[str, Any] = {'reasoning': None, 'issues': [], 'raw_output': None, 'details': {}, 'warnings': [], 'truncation': None}


def _light(report: RecordReport) -> RecordReport:
    """A report without its transcript and texts (the bulk of it), for the tallies, the comparison and the
    list: every verdict's status, pass/fail and scores stay."""
    judges = {name: result.model_copy(update=_TEXTS) for name, result in report.judges.items()}
    return report.model_copy(update={'messages': [], 'query': '', 'issues': {}, 'judges': judges})


def _verdict(result: JudgeResult | None) -> str:
    """A verdict in one word (`core.verdicts.judge_status`): pass, fail, error, inconclusive, smoke, or
    absent (the judge did not run here)."""
    return 'absent' if result is None else judge_status(result)


def _score_text(score: float | None, coverage: Coverage | None) -> str:
    """A score beside its coverage (`core.verdicts`): "0.82 (checks only, 8 of 11 judges)", "not judged"."""
    if score is None:
        return 'not judged'
    return f'{score:.2f}' if coverage is None or coverage.complete else f'{score:.2f} ({coverage.label})'


def _tallies(reports: Sequence[RecordReport]) -> dict[str, _JudgeTally]:
    out: dict[str, _JudgeTally] = {}
    for report in reports:
        for name, result in report.judges.items():
            t = out.setdefault(name, _JudgeTally())
            status = judge_status(result)
            if status == 'error':
                t.errors += 1
            elif status == 'inconclusive':
                t.inconclusive += 1
            elif status == 'smoke':
                t.smoke += 1
            elif status == 'not_applicable':  # nothing to inspect: not a verdict, not an error
                continue
            else:
                t.ok += 1
                t.passed += status == 'pass'
    return out


def compare_runs(old: Sequence[RecordReport], new: Sequence[RecordReport]) -> list[Change]:
    """Every judge verdict that differs between two runs, matched by (query id, repeat), regressions first."""
    return _compare({(r.query_id, r.repeat): r for r in old}, {(r.query_id, r.repeat): r for r in new}).changes


def _compare(old: dict[_Key, RecordReport], new: dict[_Key, RecordReport]) -> _Comparison:
    out = _Comparison(only_old=sorted(set(old) - set(new)), only_new=sorted(set(new) - set(old)))
    for key in sorted(set(old) & set(new)):
        a, b = old[key], new[key]
        for judge in sorted(set(a.judges) | set(b.judges)):
            before, after = _verdict(a.judges.get(judge)), _verdict(b.judges.get(judge))
            if before == after:
                continue
            kind = (
                'regressed'
                if (before, after) == ('pass', 'fail')
                else 'fixed'
                if (before, after) == ('fail', 'pass')
                else 'changed status'
            )
            out.changes.append(Change(key[0], key[1], judge, kind, before, after))
    order = {'regressed': 0, 'fixed': 1, 'changed status': 2}
    out.changes.sort(key=lambda c: (order[c.kind], c.query_id, c.repeat, c.judge))
    return out


# ---------------------------------------------------------------------------------------------------
# HTML


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _pct(value: float | None) -> str:
    return '–' if value is None else f'{value:.0%}'


def _label(report: RecordReport) -> str:
    return report.query_id if report.repeat == 1 else f'{report.query_id} (r{report.repeat})'


def _reason_html(result: JudgeResult, anchor: str) -> str:
    """The full reason of a verdict: the reasoning, then every issue with all its fields and cited steps."""
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
        cites = ''
        if steps:
            links = ' '.join(f'<a href="#{anchor}-s{n}">step {n}</a>' for n in steps)
            cites = f'<p class="cites">cites {links}</p>'
        parts.append(f'<div class="issue"><dl>{"".join(rows)}</dl>{cites}</div>')
    return ''.join(parts) or '<p class="muted">no reason given</p>'


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
        hashes: dict[str, str] = {}
        for r in run.reports:
            hashes.update(r.criteria_hashes)
        models = sorted({r.model for r in run.reports if r.model})
        rows |= {
            'model': ', '.join(models) or '–',
            'judges (criteria hash)': ', '.join(f'{n} ({h[:12]})' for n, h in sorted(hashes.items())) or '–',
            'records': str(len(run.reports)),
            'summary': 'no summary.json in this folder',
        }
    return rows


def _header_html(runs: Sequence[_Run], titles: Sequence[str]) -> str:
    """The runs' headers, one column per run."""
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


def _judges_html(runs: Sequence[_Run]) -> str:
    tallies = [_tallies(r.reports) for r in runs]
    names = sorted(set().union(*tallies))
    if len(runs) == 1:
        head = _head('judge', 'judged', 'passed', 'failed', 'errors', 'inconclusive', 'smoke', 'pass rate')
        body = ''
        for n in names:
            t = tallies[0][n]
            body += (
                f'<tr data-judge="{_e(n)}"><td>{_e(n)}</td><td>{t.ok}</td><td>{t.passed}</td><td>{t.failed}</td>'
                f'<td>{t.errors}</td><td>{t.inconclusive}</td><td>{t.smoke}</td><td class="rate">{_pct(t.pass_rate)}'
                f'{_bar(t.pass_rate)}</td></tr>'
            )
    else:
        head = _head('judge', 'old pass rate', 'new pass rate', 'Δ', 'old err/inc', 'new err/inc')
        body = ''
        for n in names:
            a, b = tallies[0].get(n, _JudgeTally()), tallies[1].get(n, _JudgeTally())
            delta = '–'
            cls = ''
            if a.pass_rate is not None and b.pass_rate is not None:
                d = b.pass_rate - a.pass_rate
                delta = f'{d:+.0%}'
                cls = ' class="worse"' if d < 0 else ' class="better"' if d > 0 else ''
            body += (
                f'<tr data-judge="{_e(n)}"><td>{_e(n)}</td><td>{_pct(a.pass_rate)} ({a.passed}/{a.ok})</td>'
                f'<td>{_pct(b.pass_rate)} ({b.passed}/{b.ok})</td><td{cls}>{delta}</td>'
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


def _bar(rate: float | None) -> str:
    if rate is None:
        return ''
    return f'<span class="meter"><span style="width:{rate * 100:.0f}%"></span></span>'


def _diff_html(cmp: _Comparison, run: _Run) -> str:
    new = run.by_key()
    counts = {k: sum(1 for c in cmp.changes if c.kind == k) for k in ('regressed', 'fixed', 'changed status')}
    summary = ' · '.join(f'{n} {k}' for k, n in counts.items())
    rows = ''
    for c in cmp.changes:
        report = new[(c.query_id, c.repeat)]
        link = f'<a href="#{run.anchor(report)}">{_e(_label(report))}</a>'
        rows += (
            f'<tr class="{c.kind.replace(" ", "-")}" data-kind="{_e(c.kind)}"><td>{_e(c.kind)}</td><td>{link}</td>'
            f'<td>{_e(c.judge)}</td><td>{_e(c.before)} → {_e(c.after)}</td></tr>'
        )
    table = (
        f'<table class="list" id="changes"><tr><th>change</th><th>record</th><th>judge</th><th>verdict</th></tr>{rows}</table>'
        if rows
        else '<p class="muted">No verdict changed.</p>'
    )
    extra = ''
    if cmp.only_old or cmp.only_new:
        gone = ', '.join(_e(k[0]) for k in cmp.only_old) or '–'
        added = ', '.join(_e(k[0]) for k in cmp.only_new) or '–'
        extra = f'<p class="muted">Only in the old run: {gone}. Only in the new run: {added}.</p>'
    return (
        f'<section class="card"><h2>What changed (old → new)</h2><p id="change-counts">{_e(summary)}</p>{table}{extra}</section>'
    )


def _records_html(run: _Run, title: str) -> str:
    rows = ''
    for report in run.reports:
        status = {n: judge_status(r) for n, r in report.judges.items()}
        names = ''.join(f'<span class="chip fail">{_e(n)}</span>' for n, v in status.items() if v == 'fail')
        names += ''.join(f'<span class="chip {v}">{_e(n)}: {v}</span>' for n, v in status.items() if v not in ('pass', 'fail'))
        score = _score_text(report.overall_score, report.coverage)
        rows += (
            f'<tr><td><a href="{_e(run.href(report))}">{_e(_label(report))}</a></td><td>{score}</td>'
            f'<td>{names or "<span class=muted>all passed</span>"}</td></tr>'
        )
    table = f'<table class="list"><tr><th>record</th><th>overall</th><th>failed verdicts</th></tr>{rows}</table>'
    shown = run.reports[: run.page_size] if run.page_size else run.reports
    details = ''.join(_record_html(report, run.anchor(report)) for report in shown)
    more = ''
    if run.pages > 1:
        links = ' '.join(f'<a href="{_e(run.page_file(p))}">{p}</a>' for p in range(2, run.pages + 1))
        more = (
            f'<p class="muted">{len(run.reports):,} records: the first {run.page_size:,} in full below, '
            f'the others {run.page_size:,} per page: {links}</p>'
        )
    return f'<section class="card"><h2>{_e(title)}: records</h2>{more}{table}</section>{details}'


def _page_html(run: _Run, page: int, title: str) -> str:
    """A later page of a run's records, in full (read again from their files, one page at a time)."""
    start = (page - 1) * run.page_size
    details = ''
    for path in run.paths[start : start + run.page_size]:
        report = RecordReport.model_validate_json(path.read_text(encoding='utf-8'))
        details += _record_html(report, run.anchor(report))
    back = f'<p><a href="{_e(run.page_file(1))}">← {_e(title)}: {_e(run.name)}</a> · page {page} of {run.pages}</p>'
    return _document(f'{run.name} (page {page})', back + details)


def _record_html(report: RecordReport, anchor: str) -> str:
    cited: set[int] = set()
    verdicts = ''
    for name, result in report.judges.items():
        verdict = _verdict(result)
        if verdict == 'pass':
            continue
        for issue in result.issues:
            cited.update(n for n in issue.get('steps') or [] if isinstance(n, int))
        verdicts += (
            f'<div class="verdict {verdict.replace(" ", "-")}" data-judge="{_e(name)}" data-verdict="{_e(verdict)}">'
            f'<h4>{_e(name)} <span class="tag">{_e(verdict)}</span></h4>{_reason_html(result, anchor)}</div>'
        )
    passed = [n for n, r in report.judges.items() if _verdict(r) == 'pass']
    if passed:
        verdicts += f'<p class="muted">passed: {_e(", ".join(passed))}</p>'
    for name, why in report.skipped.items():
        verdicts += f'<p class="muted">not run: {_e(name)} ({_e(why)})</p>'
    if report.input_warnings:  # what the loader could not place or changed: the judges saw the record without it
        items = ''.join(f'<li>{_e(w)}</li>' for w in report.input_warnings)
        count = len(report.input_warnings)
        verdicts += f'<details class="warnings"><summary>input warnings ({count})</summary><ul>{items}</ul></details>'
    score = _score_text(report.overall_score, report.coverage)
    outputs = ''
    if report.expected_outputs:  # what the reference says the agent had to tell the user
        outputs = f'<p class="expected-outputs muted">required outputs: {_e(", ".join(map(repr, report.expected_outputs)))}</p>'
    return (
        f'<section class="card record" id="{anchor}"><h3>{_e(_label(report))} '
        f'<span class="muted">overall {score}</span></h3><p class="query">{_e(report.query)}</p>'
        f'{outputs}{verdicts}{_transcript_html(report, anchor, cited)}</section>'
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


_CSS = """
body{font:14px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f6f7f9;margin:0}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:20px}h2{font-size:15px;margin:0 0 8px}h3{font-size:14px;margin:0 0 6px}h4{margin:8px 0 4px;font-size:13px}
.card{background:#fff;border:1px solid #e3e6eb;border-radius:8px;padding:12px 14px;margin:12px 0}
.muted{color:#667085}table{border-collapse:collapse;width:100%}
table.list th,table.list td,table.kv th,table.kv td{text-align:left;padding:5px 8px;vertical-align:top;
  border-bottom:1px solid #e3e6eb}
table.kv th{width:170px;color:#667085;font-weight:500}
.chip{display:inline-block;margin:2px 4px 2px 0;padding:1px 6px;border-radius:4px;font-size:12px;background:#eef0f3}
.chip.fail{background:#fde2df;color:#b42318}.chip.error{background:#fff1c2;color:#8a6100}
.chip.inconclusive,.chip.smoke{background:#e4e6ea;color:#5b6270}
.verdict{border-left:3px solid #b42318;padding:2px 10px;margin:8px 0}
.verdict.error,.verdict.inconclusive,.verdict.smoke{border-left-color:#e0b000}
.tag{font-size:11px;padding:1px 6px;border-radius:4px;background:#fde2df;color:#b42318}
.reasoning,.why{white-space:pre-wrap;margin:4px 0}
.issue dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0}
.issue dt{color:#667085}.issue dd{margin:0;white-space:pre-wrap;word-break:break-word}
.transcript ol{list-style:none;padding:0;margin:6px 0}
.step{border-bottom:1px solid #eef0f3;padding:4px 8px}.step .n{font-weight:600;font-size:12px}
.step pre{margin:2px 0;white-space:pre-wrap;word-break:break-word;font:12px ui-monospace,Menlo,monospace;
  max-height:260px;overflow:auto}
.step.cited{background:#fffbea;outline:2px solid #fbbf24}
.step:target{background:#fff3c4}
tr.regressed td:first-child,.worse{color:#b42318;font-weight:600}tr.fixed td:first-child,.better{color:#1f8f4e;font-weight:600}
.meter{display:inline-block;width:80px;height:8px;background:#eef0f3;border-radius:4px;margin-left:8px;vertical-align:middle}
.meter span{display:block;height:8px;background:#34a364;border-radius:4px}
.problems{background:#fde2df;color:#b42318;padding:6px 10px;border-radius:6px}
.query{white-space:pre-wrap;margin:4px 0 8px}
"""

# The page may load nothing from anywhere: no script, no external style, image, font or frame.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def render_view(runs: Sequence[_Run]) -> str:
    """The HTML page of one run, or of two (old, new) with their differences."""
    if not 1 <= len(runs) <= 2:
        raise ConfigError('view shows one run, or two to compare')
    for i, run in enumerate(runs):
        run.index = i
    titles = ['run'] if len(runs) == 1 else ['old run', 'new run']
    parts = [_header_html(runs, [f'{t}: {run.name}' for run, t in zip(runs, titles, strict=True)])]
    parts.append(_judges_html(runs))
    if len(runs) == 2:
        parts.append(_diff_html(_compare(runs[0].by_key(), runs[1].by_key()), runs[1]))
    # the records of the (new) run, in full; with two runs the old run's records follow
    for i in reversed(range(len(runs))):
        parts.append(_records_html(runs[i], titles[i]))
    return _document(' vs '.join(r.name for r in runs), ''.join(parts))


def _document(name: str, body: str) -> str:
    made = datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>sensei-eval: {_e(name)}</title>'
        f'<style>{_CSS}</style></head><body><main><h1>sensei-eval · {_e(name)}</h1>'
        f'<p class="muted">Written {made} by sensei-eval view.</p>{body}</main></body></html>\n'
    )


def write_view(run_dirs: Sequence[str | Path], out: str | Path | None = None, *, page_size: int = DEFAULT_PAGE_SIZE) -> Path:
    """Write the page of one run folder (or two: old, new) to `out` (default `<first run>/view.html`).

    Each run's first `page_size` records are shown in full on that page; the others, `page_size` per file,
    on pages written beside it (`view-0-2.html` ...), linked from the records table (0: all on one page).
    Reports are read one at a time and later pages are written one at a time, so memory stays bounded by
    a page, not by the run."""
    if page_size < 0:
        raise ConfigError('page_size must be 0 (one page) or more')
    runs = [_load(p, page_size) for p in run_dirs]
    path = Path(out) if out is not None else runs[0].path / DEFAULT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    titles = ['run'] if len(runs) == 1 else ['old run', 'new run']
    for run in runs:
        run.stem = path.stem
    path.write_text(render_view(runs), encoding='utf-8')
    for run, title in zip(runs, titles, strict=True):
        for page in range(2, run.pages + 1):
            (path.parent / run.page_file(page)).write_text(_page_html(run, page, title), encoding='utf-8')
    return path
