"""`sensei-eval view`: one run folder (or two) as one self-contained HTML file.

Run folders are written with the library's own `RunFolder`, `build_report` and `RunSummary.build`, from
judge results chosen here (pass, fail with long reasons, error, inconclusive), so what the page must
show is known exactly."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from sensei_eval.cli.app import app
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult, RunFacts, RunSummary, build_report
from sensei_eval.judging.run_folder import RunFolder
from sensei_eval.judging.view import compare_runs, write_view

# Longer than any line a console would print: the page must show every word.
LONG_REASON = (
    'The answer claims the pod was mining cryptocurrency, but the only tool output (step 3) reports CPU and '
    'memory usage; nothing in the transcript names a process, a binary or a pool address, so the claim has '
    'no support at all and the recommendation to ban rests on it. ' * 3
).strip()
CLAIM = 'the pod runs a crypto miner <script>alert(1)</script>'


@dataclass(frozen=True)
class _Judge:
    """What `RunSummary.build` needs of a judge."""

    name: str
    hash: str

    def criteria_hash(self) -> str:
        return self.hash


def _hash(judge: str) -> str:
    return hashlib.sha256(judge.encode()).hexdigest()


def record(query_id: str) -> QueryRecord:
    return QueryRecord(
        query_id=query_id,
        messages=[
            {'role': 'user', 'content': f'Investigate {query_id}'},
            {
                'role': 'assistant',
                'content': None,
                'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'kubectl-top', 'arguments': '{}'}}],
            },
            {'role': 'tool', 'tool_call_id': 'c1', 'content': 'cpu=3980m memory=512Mi'},
            {'role': 'assistant', 'content': 'It is a miner. Ban it.'},
        ],
    )


def result(judge: str, verdict: str, *, reason: str = '') -> JudgeResult:
    base: dict[str, Any] = {'judge': judge, 'failure_mode': judge, 'category': 'output', 'criteria_hash': _hash(judge)}
    base |= {'input_tokens': 1800, 'output_tokens': 240, 'requests': 1}
    if verdict == 'pass':
        return JudgeResult(**base, model='m', status='ok', passed=True, score=1.0, reasoning='fine')
    if verdict == 'fail':
        issue = {'hallucinated_claim': CLAIM, 'what_tools_actually_said': 'cpu only', 'severity': 'major', 'steps': [3, 4]}
        return JudgeResult(**base, model='m', status='ok', passed=False, score=0.5, reasoning=reason, issues=[issue])
    if verdict == 'error':
        return JudgeResult(**base, model='m', status='error', error='the model timed out after 30 s')
    return JudgeResult(**base, model='m', status='inconclusive', error='reasoning copied from the prompt')


def make_run(out: Path, run_id: str, verdicts: dict[str, dict[str, str]]) -> Path:
    folder = RunFolder.create(out, run_id)
    reports = []
    for qid, by_judge in verdicts.items():
        results = [result(j, v, reason=f'{qid}: {LONG_REASON}') for j, v in by_judge.items()]
        report = build_report(record(qid), results, run_id=run_id, model='openai:gpt-test')
        folder.write_report(report)
        reports.append(report)
    judges = [_Judge(j, _hash(j)) for j in sorted({j for v in verdicts.values() for j in v})]
    started = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
    summary = RunSummary.build(
        run_id, reports, judges, RunFacts(started_at=started, finished_at=started + timedelta(minutes=2), model='openai:gpt-test')
    )
    folder.write_summary(summary)
    return folder.path


OLD = {
    'q1': {'hallucination': 'pass', 'completeness': 'pass'},
    'q2': {'hallucination': 'fail', 'completeness': 'pass'},
    'q3': {'hallucination': 'pass', 'completeness': 'error'},
}
NEW = {
    'q1': {'hallucination': 'fail', 'completeness': 'pass'},  # regressed
    'q2': {'hallucination': 'pass', 'completeness': 'pass'},  # fixed
    'q3': {'hallucination': 'pass', 'completeness': 'inconclusive'},  # changed status
}


def _text(page: str) -> str:
    """The page's text, roughly as a browser shows it (tags out, entities back)."""
    import html

    return html.unescape(re.sub(r'<[^>]+>', ' ', page))


def test_one_run_shows_header_rates_and_full_failed_reasons(tmp_path: Path) -> None:
    run = make_run(tmp_path, 'run-new', NEW)
    path = write_view([run])
    assert path == run / 'view.html'
    page = path.read_text(encoding='utf-8')
    text = ' '.join(_text(page).split())
    assert 'openai:gpt-test' in text and f'hallucination ({_hash("hallucination")[:12]})' in text
    assert '10,800 tokens in, 1,440 out, 6 model request(s)'  # 3 records × 2 judges in text
    assert 'tokens in' in text
    # every failed verdict's reason in full, and the issue it raised
    assert f'q1: {LONG_REASON}' in text
    assert CLAIM in text and '<script>alert(1)</script>' not in page  # shown as text, never markup
    assert 'completeness inconclusive reasoning copied from the prompt' in text  # named as such, with why
    # the hallucination judge passed 2 of 3
    row = re.search(r'<tr data-judge="hallucination">(.*?)</tr>', page)
    assert row is not None and '67%' in row.group(1)
    # cited steps are marked in the transcript and linked from the verdict
    assert re.search(r'id="r0-0-s3" class="step tool_result cited"', page)
    assert 'href="#r0-0-s3"' in page
    # nothing that would load from anywhere else
    assert not re.search(r'<(script|link|img|iframe)\b', page)
    assert 'http://' not in page and 'https://' not in page


def test_two_runs_list_regressions_and_fixes(tmp_path: Path) -> None:
    old, new = make_run(tmp_path, 'run-old', OLD), make_run(tmp_path, 'run-new', NEW)
    changes = compare_runs(RunFolder(old).load_reports(), RunFolder(new).load_reports())
    assert [(c.kind, c.query_id, c.judge) for c in changes] == [
        ('regressed', 'q1', 'hallucination'),
        ('fixed', 'q2', 'hallucination'),
        ('changed status', 'q3', 'completeness'),
    ]
    out = tmp_path / 'ci' / 'compare.html'
    assert write_view([old, new], out) == out
    page = out.read_text(encoding='utf-8')
    assert re.search(r'<tr class="regressed" data-kind="regressed">.*?q1.*?hallucination.*?pass → fail', page)
    assert 'changed status' in page and 'error → inconclusive' in page
    assert '1 regressed · 1 fixed · 1 changed status' in page


def test_cli_writes_the_file_and_refuses_a_missing_folder(tmp_path: Path) -> None:
    run = make_run(tmp_path, 'run-a', NEW)
    runner = CliRunner()
    done = runner.invoke(app, ['view', str(run), '--out', str(tmp_path / 'x.html')])
    assert done.exit_code == 0, done.output
    assert (tmp_path / 'x.html').is_file() and str(tmp_path / 'x.html') in done.output
    missing = runner.invoke(app, ['view', str(tmp_path / 'nope')])
    assert missing.exit_code == 2 and 'no run folder' in missing.output


def test_a_bad_report_file_is_listed_and_the_rest_shown(tmp_path: Path) -> None:
    run = make_run(tmp_path, 'run-b', NEW)
    (run / 'records' / 'broken.json').write_text('{"query_id": 1', encoding='utf-8')
    page = write_view([run]).read_text(encoding='utf-8')
    assert 'run: run-b: 1 report file(s) did not load' in page and 'broken.json' in page
    assert 'q1' in page and 'q3' in page


def test_validate_writes_the_view_of_its_two_runs(tmp_path: Path) -> None:
    old, new = make_run(tmp_path, 'run-old', OLD), make_run(tmp_path, 'run-new', NEW)
    out = tmp_path / 'gate'
    done = CliRunner().invoke(app, ['validate', '--old-reports', str(old), '--new-reports', str(new), '--out', str(out)])
    assert done.exit_code in (0, 1), done.output  # the gate's verdict is not this test's business
    page = (out / 'view.html').read_text(encoding='utf-8')
    assert 'run-old vs run-new' in page and 'data-kind="regressed"' in page
    assert str(out / 'view.html') in done.output


# ---------------------------------------------------------------------------------------------------
# Every score explained; the gate's own decision beside the comparison


def _minor_pass(judge: str) -> JudgeResult:
    """A pass that cost half the score: one advisory (minor) finding, as the reference check writes it."""
    issue = {
        'missed_tools': ['lookup_order'],
        'unnecessary_tools': [],
        'reasoning': 'lookup_order was expected but never called (advisory)',
        'severity': 'minor',
        'steps': [2],
    }
    return JudgeResult(
        judge=judge,
        failure_mode='tool_selection',
        category='tools',
        criteria_hash=_hash(judge),
        model=None,
        status='ok',
        passed=True,
        score=0.5,
        reasoning='1 of 2 expected calls made',
        issues=[issue],
    )


def test_a_050_score_with_every_verdict_passed_says_why(tmp_path: Path) -> None:
    """The page once read "overall 0.50 · all passed" with no reason: the minor finding that cost the half is
    named in the records table and in full in the record's card, and the skipped judge with its reason."""
    folder = RunFolder.create(tmp_path, 'half')
    report = build_report(
        record('q1'),
        [_minor_pass('reference_check'), result('hallucination', 'pass')],
        run_id='half',
        skipped={'citation_check': "not in profile 'default'"},
    )
    # every verdict passed: the upper band, 0.5 + 0.5 * 0.5 (`core.verdicts`)
    assert report.overall_score == 0.75 and not report.failure_modes
    folder.write_report(report)
    page = write_view([folder.path]).read_text(encoding='utf-8')
    text = ' '.join(_text(page).split())
    assert 'all passed' not in text
    assert re.search(r'<span class="chip pass">reference_check 0\.50 minor</span>', page), page
    assert 'Why 0.75: pass reference_check · tool_selection 0.50' in text
    assert 'minor lookup_order was expected but never called (advisory) ( step 2 )' in text
    assert "skipped citation_check : not in profile 'default'" in text
    assert 'passed without a finding: hallucination' in text
    # the colour is the verdict's: the record passed (green), whatever its score
    assert '<span class="score pass">overall 0.75</span>' in page


def _comparison(passed: bool) -> Any:
    from sensei_eval.validate.results import Comparison, GateResult, MetricComparison, SideSummary, Thresholds

    overall = MetricComparison(metric='overall', kind='overall', n_pairs=3, old_mean=0.83, new_mean=0.5, delta=-0.33)
    overall.verdict = 'regressed' if not passed else 'no_change'
    gate = GateResult(exit_code=0 if passed else 1, passed=passed, reasons=[] if passed else ['overall regressed: 0.83 → 0.50'])
    return Comparison(
        thresholds=Thresholds(), old=SideSummary(label='old'), new=SideSummary(label='new'), metrics=[overall], gate=gate
    )


def test_the_comparison_page_shows_the_gates_own_decision(tmp_path: Path) -> None:
    """Scores fell without a pass/fail flip: the page beside a failing gate says the gate failed and why,
    lists the scores that fell, and never reads as "nothing changed"."""
    before = {f'q{i}': {'reference_check': 'pass'} for i in range(3)}
    old, new = make_run(tmp_path, 'run-old', before), tmp_path / 'run-new'
    folder = RunFolder.create(tmp_path, 'run-new')
    for qid in before:
        folder.write_report(build_report(record(qid), [_minor_pass('reference_check')], run_id='run-new'))
    page = write_view([old, new], tmp_path / 'cmp.html', gate=_comparison(passed=False)).read_text(encoding='utf-8')
    text = ' '.join(_text(page).split())
    assert re.search(r'id="gate-decision">failed</span> \(exit 1\)', page)
    assert 'overall regressed: 0.83 → 0.50' in text
    assert re.search(r'<tr data-metric="overall" data-verdict="regressed">', page)
    assert 'No pass/fail verdict changed.' in text and '3 fell · 0 rose' in text
    assert 'q0 1.00 → 0.75' in text
    assert 'No verdict changed' not in text.replace('No pass/fail verdict changed', '')
    # without a gate, the page says it shows none rather than implying a decision
    bare = write_view([old, new], tmp_path / 'bare.html').read_text(encoding='utf-8')
    assert 'No gate decision on this page' in bare and 'id="gate-decision"' not in bare


def test_validate_puts_its_decision_on_its_view(tmp_path: Path) -> None:
    old, new = make_run(tmp_path, 'run-old', OLD), make_run(tmp_path, 'run-new', NEW)
    out = tmp_path / 'gate'
    done = CliRunner().invoke(app, ['validate', '--old-reports', str(old), '--new-reports', str(new), '--out', str(out)])
    decision = json.loads((out / 'comparison.json').read_text())['gate']
    assert done.exit_code == decision['exit_code']
    page = (out / 'view.html').read_text(encoding='utf-8')
    word = 'passed' if decision['passed'] else 'failed'
    assert f'id="gate-decision">{word}</span> (exit {decision["exit_code"]})' in page
    # and `view --gate` reads the same file into the same decision
    again = CliRunner().invoke(
        app, ['view', str(old), str(new), '--gate', str(out / 'comparison.json'), '--out', str(tmp_path / 'v.html')]
    )
    assert again.exit_code == 0, again.output
    assert f'id="gate-decision">{word}</span>' in (tmp_path / 'v.html').read_text(encoding='utf-8')
    bad = CliRunner().invoke(app, ['view', str(old), str(new), '--gate', str(old / 'summary.json')])
    assert bad.exit_code == 2 and 'is not a comparison.json of validate' in ' '.join(bad.output.split())


def test_a_large_run_is_streamed_page_by_page(tmp_path: Path) -> None:
    """Pages beyond the first are written as their records are read; every record is linked and in full once."""
    verdicts = {f'q{i:03d}': {'hallucination': 'fail' if i % 4 == 0 else 'pass'} for i in range(23)}
    run = make_run(tmp_path, 'big', verdicts)
    path = write_view([run], page_size=5)
    pages = sorted(run.glob('view-0-*.html'))
    assert [p.name for p in pages] == [f'view-0-{n}.html' for n in range(2, 6)]
    cards = [re.findall(r'<section class="card record" id="(r0-\d+)"', p.read_text(encoding='utf-8')) for p in [path, *pages]]
    assert [len(c) for c in cards] == [5, 5, 5, 5, 3]
    main = path.read_text(encoding='utf-8')
    assert main.count('<tr><td><a href=') == 23 and 'href="view-0-5.html#r0-22"' in main
