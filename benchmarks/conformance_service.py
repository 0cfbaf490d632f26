"""One run, one verdict, through the scoring service: the records of `benchmarks/conformance.py` judged by the
service (`POST /api/v1/sessions/{id}/evaluate` naming no judges: the service's default) and read back from
the evaluation API and from the dashboard's session page, compared record by record with `sensei-eval judge`.

Same records (the packaged sample and the 50 tau2-airline runs), same scripted model, same comparison as
`benchmarks/conformance.py` (`differences`): per judge its verdict and score, per (judge, failure mode) its
verdict and score, and the overall score. The dashboard shows verdicts per (judge, mode) and the overall
score, so that is what is compared there. The service runs in-process (FastAPI's TestClient, lifespan and
worker included) on a temporary SQLite store.

Prints per surface the share of records that agree with the CLI's (expected 100%), and the coverage labels
the service gave (a run whose LLM verdicts were all inconclusive: "checks only, ...").

    python benchmarks/conformance_service.py [--quick]

`--quick`: the sample and the first 10 tau2 runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/conformance_service.py` finds its sibling

from benchmarks.conformance import (
    JUDGES,
    ModelFactory,
    Seen,
    Surface,
    conformance_model,
    load_records,
    print_agreement,
    seen_in_report,
    via_cli,
)
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import RecordReport

__all__ = ('via_service',)

# The worker polls the store this often for finished work; the client waits this long for all of it.
_POLL_S = 0.05
_WAIT_S = 600.0


def via_service(
    records: Sequence[QueryRecord], folder: Path, *, judges: str = JUDGES, model: ModelFactory | None = None
) -> tuple[Surface, Surface, dict[str, Any]]:
    """The records through a service on a fresh SQLite store: (the evaluation API, the dashboard page, and
    per query id the API's evaluation). `judges` other than the default are named in each request."""
    from fastapi.testclient import TestClient

    from sensei_eval.service import ServiceSettings, create_app

    folder.mkdir(parents=True, exist_ok=True)
    url = f'sqlite:///{folder / "service.db"}'
    settings = ServiceSettings(db_url=url, allowed_hosts=frozenset({'testserver'}), poll_s=_POLL_S, heartbeat_s=1.0)
    api, dash = Surface('service API'), Surface('dashboard page')
    evaluations: dict[str, Any] = {}
    start = time.perf_counter()
    body: dict[str, Any] = {} if judges == JUDGES else {'judges': judges.split(',')}
    with TestClient(create_app(settings, (model or conformance_model)()), headers={'Content-Type': 'application/json'}) as c:
        sessions: dict[str, str] = {}
        for record in records:
            created = c.post('/api/v1/sessions', json=record.model_dump(mode='json'))
            created.raise_for_status()
            sessions[record.query_id] = created.json()['session_id']
        for sid in sessions.values():
            c.post(f'/api/v1/sessions/{sid}/evaluate', json=body).raise_for_status()
        deadline = time.monotonic() + _WAIT_S
        pending = dict(sessions)
        while pending and time.monotonic() < deadline:
            for qid, sid in list(pending.items()):
                evaluation = c.get(f'/api/v1/sessions/{sid}/evaluation').json()
                if evaluation['status'] not in ('pending', 'in_progress'):
                    evaluations[qid] = evaluation
                    del pending[qid]
            time.sleep(_POLL_S)
        api.problems += [f'{qid}: not finished after {_WAIT_S:.0f} s' for qid in pending]
        api.seconds = time.perf_counter() - start
        for qid, evaluation in evaluations.items():
            if evaluation['status'] != 'completed' or not evaluation['report']:
                api.problems.append(f'{qid}: evaluation {evaluation["status"]}: {evaluation["error_message"]}')
                continue
            seen = seen_in_report(RecordReport.model_validate(evaluation['report']))
            seen.overall = evaluation['overall_score']  # the API's own field, not the report's copy
            api.seen[qid] = seen
            judgement = c.get(f'/api/v1/dashboard/sessions/{sessions[qid]}').json()['judgement']
            modes = {(v['judge'], v['failure_mode']): (v['status'], v['score']) for v in judgement['verdicts']}
            dash.seen[qid] = Seen(seen.judges, modes, judgement['overall_score'], True)
            if judgement['coverage'] != evaluation['coverage']:
                dash.problems.append(f'{qid}: coverage {judgement["coverage"]} != {evaluation["coverage"]}')
        dash.seconds = api.seconds
    return api, dash, evaluations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true', help='the sample and 10 tau2 runs')
    args = parser.parse_args()
    records = load_records(args.quick)
    with tempfile.TemporaryDirectory() as tmp:
        reference, reports = via_cli(records, Path(tmp) / 'cli')
        api, dash, evaluations = via_service(records, Path(tmp))
    cli_coverage = {r.query_id: r.coverage.label if r.coverage else None for r in reports}
    labels = Counter(e['coverage']['label'] if e.get('coverage') else 'none' for e in evaluations.values())
    differ = sum(1 for q, e in evaluations.items() if (e.get('coverage') or {}).get('label') != cli_coverage.get(q))
    print(f'{len(records)} records (sample + tau2-airline), judges: the service default vs judge --judges {JUDGES}')
    print('service coverage labels: ' + ', '.join(f'{k!r} {v}' for k, v in sorted(labels.items())))
    print(f'coverage labels differing from the CLI: {differ}')
    failed = print_agreement(reference, (api, dash))
    sys.exit(1 if failed or differ else 0)


if __name__ == '__main__':
    main()
