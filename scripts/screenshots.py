"""Screenshots of the dashboard for docs/dashboard.md: `python scripts/screenshots.py [--out docs/screenshots]`.

Starts the service (with the dashboard mounted) on a throwaway SQLite file with a scripted judge, seeds
a score of sessions — alert investigations (one scored by the real background worker through the API,
the rest written as completed scores over the past week) and question-answering runs that are not
alerts, one judged with the checks by the real worker, the rest with failure-mode evaluations over two
weeks and two prompt versions — and saves `sessions.png`, `session.png` (a judged run's verdicts),
`patterns.png` (1280×1000), `view.png` (1280×1300: `sensei-eval view` of two run folders written with
the library's own writers, with the gate's decision `validate` made on them) and `view-run.png` (1280×1100:
one run of the packaged tau2-airline records judged by the checks, at a record whose every verdict passed
and that scores 0.50, saying why), the others at 1280×800, with Debian's Chromium driven by Playwright.
No network, no API key; the same helpers as the browser tests (`tests/dashboard/seed.py`, `tests/test_view.py`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sensei_eval.judging.view import write_view  # noqa: E402
from tests.dashboard.seed import (  # noqa: E402  (the repository root goes on sys.path first)
    CHROMIUM,
    CHROMIUM_ARGS,
    ScriptedScorer,
    alert_record,
    dashboard_server,
    ingest,
    insert_evaluation,
    insert_score,
    plain_record,
    set_created,
)
from tests.test_view import NEW, OLD, make_run  # noqa: E402

ALERTS: list[tuple[str, str, str, str, int | None, float]] = [
    # query_id, agent, alert type, pod, score (None: scored live or not at all), days ago
    ('alert-cpu-miner', 'sre-investigator', 'SuspiciousCPU', 'miner-7f', None, 0),
    ('alert-oom-api', 'sre-investigator', 'OOMKilled', 'api-6d9c', 82, 1),
    ('alert-crashloop', 'sre-investigator', 'CrashLoopBackOff', 'worker-55b', 58, 2),
    ('alert-egress', 'security-triage', 'UnexpectedEgress', 'billing-2a', 34, 2),
    ('alert-disk', 'sre-investigator', 'DiskPressure', 'db-0', 91, 3),
    ('alert-priv-esc', 'security-triage', 'PrivilegedContainer', 'debug-x1', 47, 4),
    ('alert-latency', 'sre-investigator', 'HighLatency', 'gateway-9', 76, 5),
    ('alert-cert', 'sre-investigator', 'CertExpiring', 'ingress-1', 68, 6),
    ('alert-dns', 'security-triage', 'DNSTunnel', 'chat-7', 29, 6),
    ('alert-node', 'sre-investigator', 'NodeNotReady', 'node-14', None, 0),
]
MISSING = [
    '1. read-file: would have shown whether the binary ran.\n2. kubectl-logs: the container logs around the spike.',
    '1. kubectl-logs: the crash reason was never read.',
    '1. network-flows: which hosts the pod talked to.\n2. read-file: the binary itself.',
    '1. kubectl-describe: events of the pod.\n2. kubectl-logs: the last 100 lines.',
]


def _record(query_id: str, alert_type: str, pod: str) -> dict[str, Any]:
    record = alert_record(query_id)
    record['alert_data'] = {'alert_type': alert_type, 'pod': pod, 'namespace': 'prod', 'timestamp': '2026-11-20T10:00:00Z'}
    messages = [dict(m) for m in record['messages']]
    messages[0]['content'] = f'Investigate the alert: {alert_type} on pod {pod}.'
    messages[1] = {
        **messages[1],
        'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'kubectl-top', 'arguments': f'{{"pod": "{pod}"}}'}}],
    }
    messages[2] = {**messages[2], 'content': f'{pod} cpu=3980m memory=512Mi restarts=0'}
    messages[3] = {
        **messages[3],
        'content': f'{alert_type} on {pod}: the process pattern matches a crypto miner. Confidence: HIGH. Recommend BAN.',
    }
    record['messages'] = messages
    record['rating'] = {'correctness': 3, 'relevance': 4, 'usefulness': 3}
    return record


def _gate(old: Path, new: Path) -> Any:
    """The decision `sensei-eval validate --old-reports old --new-reports new` makes (its comparison)."""
    from sensei_eval.judging.run_folder import RunFolder
    from sensei_eval.validate.compare import compare_reports

    return compare_reports(RunFolder(old).load_reports(), RunFolder(new).load_reports())


def _tau2_run(out: Path) -> Path:
    """Three of the packaged tau2-airline runs judged by the checks (`sensei-eval judge`), in `out/tau2`."""
    import subprocess

    from sensei_eval.data import SAMPLE_DATASET

    dataset = Path(SAMPLE_DATASET).parent / 'tau2_airline' / 'records.jsonl'
    ids = [a for q in ('tau2-airline-12', 'tau2-airline-13', 'tau2-airline-9') for a in ('--query-id', q)]
    command = [sys.executable, '-m', 'sensei_eval', 'judge', '--dataset', str(dataset), '--judges', 'checks', *ids]
    subprocess.run([*command, '--out', str(out), '--run-id', 'tau2', '--no-cache'], check=False, capture_output=True)
    return out / 'tau2'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', type=Path, default=ROOT / 'docs' / 'screenshots')
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory() as tmp, dashboard_server(Path(tmp) / 'shots.db', ScriptedScorer().model()) as server:
        ids: dict[str, str] = {}
        for i, (qid, agent, alert_type, pod, score, days) in enumerate(ALERTS):
            ids[qid] = ingest(server, _record(qid, alert_type, pod), agent=agent)
            if score is not None:
                insert_score(server.store, ids[qid], score, days_ago=days, missing=MISSING[i % len(MISSING)])
        live = ids['alert-cpu-miner']
        assert server.client.post(f'/api/v1/scoring/sessions/{live}/score').status_code == 202
        deadline = time.monotonic() + 30
        while server.client.get(f'/api/v1/scoring/sessions/{live}/score').json()['status'] != 'completed':
            if time.monotonic() > deadline:
                raise SystemExit('the scripted scoring did not finish')
            time.sleep(0.05)
        hallucination = {
            'hallucinated_claim': 'the process pattern matches a crypto miner',
            'what_tools_actually_said': 'kubectl-top only reported CPU and memory usage',
            'severity': 'major',
            'steps': [3, 4],
        }
        tool_selection = {
            'missed_tools': ['kubectl-logs', 'read-file'],
            'unnecessary_tools': [],
            'reasoning': 'One metrics call cannot tell a miner from a busy build job.',
            'steps': [2],
        }
        completeness = {'missed_aspects': ['what the binary is'], 'reasoning': 'the answer leaves this out', 'steps': [4]}
        insert_evaluation(server.store, live, {'hallucination': [hallucination], 'tool_selection': [tool_selection]})
        for qid in ('alert-egress', 'alert-dns', 'alert-priv-esc'):
            insert_evaluation(server.store, ids[qid], {'tool_selection': [tool_selection], 'completeness': [completeness]})
        insert_evaluation(server.store, ids['alert-crashloop'], {'completeness': [completeness]})

        # question-answering runs (not alerts): one judged with the checks by the real worker, the rest
        # with stored evaluations over two weeks, two prompt versions, two agents
        plain = ids['docs-retries'] = ingest(server, plain_record('docs-retries'), agent='docs-agent')
        assert server.client.post(f'/api/v1/sessions/{plain}/evaluate', json={'evaluators': ['checks']}).status_code == 202
        claim = {
            'hallucinated_claim': 'retries=3 also retries HTTP 500 responses',
            'what_tools_actually_said': 'the transport retries failed connections only',
            'severity': 'major',
            'steps': [3, 4],
        }
        missing = {'missed_aspects': ['how to retry on status codes'], 'reasoning': 'the answer leaves this out', 'steps': [4]}
        for i in range(14):
            version = 'v1' if i >= 6 else 'v2'
            agent = 'docs-agent' if i % 3 else 'support-bot'
            qid = f'docs-q{i:02d}'
            ids[qid] = sid = ingest(server, plain_record(qid, prompt_version=version), agent=agent)
            set_created(server.store, sid, i)
            fails = (i % 2 == 0) if version == 'v1' else (i % 4 == 0)
            issues: dict[str, list[dict[str, Any]]] = {'hallucination': [claim] if fails else []}
            issues['completeness'] = [missing] if i % 3 == 0 else []
            issues['tool_selection'] = [tool_selection] if i % 5 == 0 else []
            insert_evaluation(server.store, sid, issues, days_ago=i)
        deadline = time.monotonic() + 30
        while server.client.get(f'/api/v1/sessions/{plain}/evaluation').json()['status'] != 'completed':
            if time.monotonic() > deadline:
                raise SystemExit('the checks evaluation did not finish')
            time.sleep(0.05)

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={'width': 1280, 'height': 800})
            page.goto(f'{server.url}/#/')
            expect(page.locator('[data-testid=session-row]')).to_have_count(25)
            expect(page.locator('#live')).to_have_attribute('data-state', 'live')
            page.screenshot(path=str(args.out / 'sessions.png'))
            page.goto(f'{server.url}/#/session/{ids["docs-q00"]}/judgement')
            expect(page.locator('[data-testid=verdict]').first).to_be_visible()
            expect(page.locator('#live')).to_have_attribute('data-state', 'live')
            page.screenshot(path=str(args.out / 'session.png'))
            page.set_viewport_size({'width': 1280, 'height': 1000})
            page.goto(f'{server.url}/#/patterns?bucket=day&group=prompt_version')
            expect(page.locator('section.patterns')).to_have_attribute('data-loaded', 'true')
            page.screenshot(path=str(args.out / 'patterns.png'))
            page.set_viewport_size({'width': 1280, 'height': 1300})  # header, the gate, judges and what changed
            with tempfile.TemporaryDirectory() as runs:
                old, new = make_run(Path(runs), 'run-old', OLD), make_run(Path(runs), 'run-new', NEW)
                view = write_view([old, new], Path(runs) / 'view.html', gate=_gate(old, new))
                page.goto(view.as_uri())
                expect(page.locator('#changes')).to_be_visible()
                page.screenshot(path=str(args.out / 'view.png'))
                page.set_viewport_size({'width': 1280, 'height': 1100})
                one = _tau2_run(Path(runs))
                page.goto(f'{write_view([one]).as_uri()}#r0-1')  # tau2-airline-13: 0.50, every verdict passed
                expect(page.locator('#r0-1 .why-score')).to_be_visible()
                page.screenshot(path=str(args.out / 'view-run.png'))
            browser.close()
    for name in ('sessions.png', 'session.png', 'patterns.png', 'view.png', 'view-run.png'):
        print(args.out / name, (args.out / name).stat().st_size, 'bytes')


if __name__ == '__main__':
    main()
