"""The service judges like the CLI: the packaged sample through `POST /sessions/{id}/evaluate` (no judges
named: the service's default) and through `sensei-eval judge` (no judges named: the CLI's default), with
the same scripted model, gives every record the same per-judge verdicts, failure modes and overall score.

The scripted model (`conformance.py`) answers from the prompt alone, and the sample spans the cases that
used to diverge: runs the checks fail (the dashboard used to run mvp only), runs whose LLM verdicts are all
inconclusive (judged by the checks alone), runs an LLM judge fails, and alert runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from sensei_eval.core.reports import RecordReport
from sensei_eval.evaluators.registry import DEFAULT_JUDGES, GROUPS, resolve_names

from .conformance import conformance_judge, judge_dataset, verdict_facts
from .conftest import fast_settings, live_server, wait_for

SAMPLE = Path(__file__).parents[2] / 'sensei_eval' / 'data' / 'sample.jsonl'
_JSON = {'Content-Type': 'application/json'}


def sample_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding='utf-8').splitlines() if line.strip()]


def judge_with_service(
    db_url: str, records: list[dict[str, Any]], body: dict[str, Any], *, asks_model: bool = True
) -> dict[str, dict[str, Any]]:
    """Ingest `records`, evaluate each with `body`, wait for every evaluation; query id → the evaluation."""
    judge = conformance_judge()
    with (
        live_server(fast_settings(db_url), judge.model()) as live,
        httpx.Client(base_url=live.url, timeout=30, headers=_JSON) as c,
    ):
        ids: dict[str, str] = {}
        for record in records:
            created = c.post('/api/v1/sessions', json={**record, 'agent': 'conformance'})
            assert created.status_code == 201, created.text
            ids[record['query_id']] = created.json()['session_id']
        for sid in ids.values():
            requested = c.post(f'/api/v1/sessions/{sid}/evaluate', json=body)
            assert requested.status_code == 202, requested.text

        def finished() -> dict[str, dict[str, Any]] | None:
            out = {qid: c.get(f'/api/v1/sessions/{sid}/evaluation').json() for qid, sid in ids.items()}
            return out if all(e['status'] not in ('pending', 'in_progress') for e in out.values()) else None

        evaluations: dict[str, dict[str, Any]] = wait_for(finished, timeout=120, what='every evaluation')
    assert bool(judge.calls) == asks_model, f'{len(judge.calls)} model call(s)'
    return evaluations


def test_service_api_gives_the_cli_verdicts_on_the_sample(db_url: str, tmp_path: Path) -> None:
    cli = judge_dataset(SAMPLE, tmp_path / 'reports', conformance_judge())
    records = sample_records()
    assert sorted(cli) == sorted(r['query_id'] for r in records)
    # the sample exercises what used to differ: a check failing, an LLM judge failing, all LLM verdicts inconclusive
    checks = set(GROUPS['checks'])
    assert any(not j.passed for r in cli.values() for n, j in r.judges.items() if n in checks and j.status == 'ok')
    assert any(not j.passed for r in cli.values() for n, j in r.judges.items() if n not in checks and j.status == 'ok')
    all_inconclusive = [
        q for q, r in cli.items() if all(j.status == 'inconclusive' for n, j in r.judges.items() if n not in checks)
    ]
    assert all_inconclusive and len(all_inconclusive) < len(cli)

    service = judge_with_service(db_url, records, {})
    assert set(service) == set(cli)
    for qid, evaluation in service.items():
        assert evaluation['status'] == 'completed', (qid, evaluation['error_message'])
        assert evaluation['judges'] == resolve_names(DEFAULT_JUDGES)  # the CLI's default judges
        assert verdict_facts(evaluation['report']) == verdict_facts(cli[qid]), qid
        assert evaluation['overall_score'] == cli[qid].overall_score, qid
        assert cli[qid].coverage is not None
        assert evaluation['coverage'] == cli[qid].coverage.model_dump(mode='json'), qid
    # a run whose LLM verdicts were all inconclusive says it was judged by the checks alone
    for qid in all_inconclusive:
        assert service[qid]['coverage']['label'].startswith('checks only, '), service[qid]['coverage']


def test_judges_named_per_request_match_the_cli_flag(tmp_path: Path) -> None:
    """`{"judges": ["checks"]}` on the API is `--judges checks` on the CLI (SQLite only: the path is the same)."""
    db = f'sqlite:///{tmp_path / "s.db"}'
    from sensei_eval.service.migrate import upgrade

    upgrade(db)
    records = sample_records()[:6]
    dataset = tmp_path / 'six.jsonl'
    dataset.write_text(''.join(json.dumps(r) + '\n' for r in records), encoding='utf-8')
    cli = judge_dataset(dataset, tmp_path / 'reports', conformance_judge(), 'checks')
    service = judge_with_service(db, records, {'judges': ['checks']}, asks_model=False)
    for qid, evaluation in service.items():
        assert evaluation['judges'] == resolve_names(['checks'])
        assert set(RecordReport.model_validate(evaluation['report']).judges) <= set(GROUPS['checks'])
        assert verdict_facts(evaluation['report']) == verdict_facts(cli[qid]), qid


def test_evaluate_request_names_judges_once(tmp_path: Path) -> None:
    db = f'sqlite:///{tmp_path / "s.db"}'
    from sensei_eval.service.migrate import upgrade

    upgrade(db)
    record = sample_records()[1]
    with (
        live_server(fast_settings(db, judges=('checks',)), conformance_judge().model()) as live,
        httpx.Client(base_url=live.url, timeout=30, headers=_JSON) as c,
    ):
        assert c.get('/api/v1/health').json()['judges'] == ['checks']
        sid = c.post('/api/v1/sessions', json=record).json()['session_id']
        both = c.post(f'/api/v1/sessions/{sid}/evaluate', json={'judges': ['mvp'], 'evaluators': ['mvp']})
        assert both.status_code == 422 and 'not both' in both.text
        unknown = c.post(f'/api/v1/sessions/{sid}/evaluate', json={'judges': ['checks,nonsense']})
        assert unknown.status_code == 422 and unknown.json()['detail'][0]['loc'] == ['body', 'judges']
        assert 'nonsense' in unknown.json()['detail'][0]['msg']
        old_name = c.post(f'/api/v1/sessions/{sid}/evaluate', json={'evaluators': ['completeness']})
        assert old_name.status_code == 202 and old_name.json()['judges'] == old_name.json()['evaluators'] == ['completeness']
        # the old field name is accepted for one release, and the answer says it is deprecated
        assert old_name.headers['Deprecation'] == 'true' and 'evaluators is deprecated' in old_name.headers['Warning']
        assert 'Deprecation' not in unknown.headers
        wait_for(lambda: c.get(f'/api/v1/sessions/{sid}/evaluation').json()['status'] == 'completed', what='evaluation')
        default = c.post(f'/api/v1/sessions/{sid}/evaluate', json={'force': True})  # names none: the service's
        assert default.status_code == 202 and default.json()['judges'] == resolve_names(['checks'])
        assert 'Deprecation' not in default.headers


def test_sample_and_tau2_runs_agree_through_the_api_and_the_dashboard(tmp_path: Path) -> None:
    """`benchmarks/conformance_service.py`'s comparison, asserted: the sample plus the 50 tau2-airline runs, with
    the library conformance benchmark's scripted model, agree record by record on every verdict and score."""
    from benchmarks.conformance import agreement, load_records, via_cli
    from benchmarks.conformance_service import via_service

    records = load_records()
    assert len(records) == len(sample_records()) + 50
    reference, reports = via_cli(records, tmp_path / 'cli')
    api, dash, evaluations = via_service(records, tmp_path)
    assert len(reference.seen) == len(records) == len(evaluations)
    for surface in (api, dash):
        agree, total, problems = agreement(reference, surface)
        assert problems == [] and agree == total == len(records), (surface.name, problems[:3])
    labels = {r.query_id: r.coverage.label if r.coverage else None for r in reports}
    assert {q: e['coverage']['label'] for q, e in evaluations.items()} == labels
    assert any(not r.coverage.complete for r in reports if r.coverage)  # partly judged runs are among them
