"""`sensei-eval view`: one run folder (or two) as one self-contained HTML file.

Run folders are written with the library's own `RunFolder`, `build_report` and `RunSummary.build`, from
judge results chosen here (pass, fail with long reasons, error, inconclusive), so what the page must
show is known exactly."""

from __future__ import annotations

import hashlib
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
