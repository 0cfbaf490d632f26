"""Agent traces end to end: a pydantic-ai agent instrumented by Logfire exports through the real OTLP/HTTP
exporter to a running service; its runs become sessions, are sampled (always when rated badly), judged by
the scripted judges through the scoring worker, and read back through the API. The same spans written
to an OTLP/JSON file give the same records through the CLI's loader."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import logfire
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.traces import TraceConfig, otlp_json_from_protobuf
from sensei_eval.production.sampler import SamplerConfig, trace_fraction

from ..helpers import about
from ..test_traces import make_agent
from .conftest import ScriptedScorer, fast_settings, live_server, wait_for

DATA = Path(__file__).resolve().parents[1] / 'data' / 'otlp'
TOKEN = 's3cret'
AUTH = {'Authorization': f'Bearer {TOKEN}'}


def _judge_answer(prompt: str) -> str:
    return json.dumps({'reasoning': f'The run holds up at [2] ({about(prompt)}).', 'issues': []})


def test_traced_runs_become_sampled_judged_sessions(db_url: str, tmp_path: Path) -> None:
    judge = ScriptedScorer(answer=_judge_answer)
    sampler = SamplerConfig(rate=0.5, judges=('tool_selection', 'completeness'), salt='e2e')
    settings = fast_settings(db_url, token=TOKEN, sampler=sampler, traces=TraceConfig(root_timeout_s=30))
    with live_server(settings, judge.model()) as srv, httpx.Client(base_url=srv.url, headers=AUTH) as c:
        memory = InMemorySpanExporter()
        otlp = OTLPSpanExporter(endpoint=f'{srv.url}/v1/traces', headers=AUTH)
        lf = logfire.configure(
            local=True, send_to_logfire=False, console=False, metrics=False, scrubbing=False,
            additional_span_processors=[SimpleSpanProcessor(otlp), SimpleSpanProcessor(memory)],
        )  # fmt: skip
        agent = make_agent()
        lf.instrument_pydantic_ai(agent)
        prompts = [f'How do I configure feature {n}?' for n in range(10)]
        rated_badly = {prompts[1], prompts[6]}
        for prompt in prompts:
            with lf.span('POST /ask') as span:
                agent.run_sync(prompt)
                if prompt in rated_badly:
                    span.set_attribute('sensei_eval.rating', 1)
        lf.force_flush()
        spans = list(memory.get_finished_spans())
        trace_ids = {format(s.context.trace_id, '032x') for s in spans}
        assert len(trace_ids) == 10

        page = wait_for(
            lambda: (p := c.get('/api/v1/sessions', params={'limit': 50}).json())['total'] == 10 and p, what='sessions'
        )
        sessions = {s['session_id']: c.get(f'/api/v1/sessions/{s["session_id"]}').json() for s in page['items']}
        by_query = {d['record']['query']: d for d in sessions.values()}
        assert set(by_query) == set(prompts)
        assert all(d['agent'] == 'docs-helper' and d['status'] == 'completed' for d in sessions.values())

        # sampled: the badly rated runs always, the others when their trace id hashes under the rate
        def expected(detail: dict[str, Any]) -> bool:
            return (
                detail['record']['query'] in rated_badly or trace_fraction(detail['record']['metadata']['trace_id'], 'e2e') < 0.5
            )

        decisions = {}
        for detail in sessions.values():
            trace = c.get(f'/api/v1/traces/{detail["record"]["metadata"]["trace_id"]}').json()
            assert trace['status'] == 'ingested' and trace['root_seen'] and trace['span_count'] == 5
            [decision] = trace['runs']
            decisions[detail['session_id']] = decision
            assert decision['sampled'] == expected(detail)
            if detail['record']['query'] in rated_badly:
                assert decision['reason'] == 'negative' and 'rated 1' in decision['detail']
            elif not decision['sampled']:
                assert decision['reason'] == 'not_sampled' and decision['evaluation_id'] is None
        sampled = [sid for sid, d in decisions.items() if d['sampled']]
        # the badly rated runs always; the others as their trace ids hash (checked run by run above). The ids are
        # random, so how many of the 8 others get in varies: all or none happens 1 run in 128
        assert len(sampled) >= len(rated_badly)

        for sid in sampled:
            done = wait_for(
                lambda sid=sid: (e := c.get(f'/api/v1/sessions/{sid}/evaluation').json()).get('status') == 'completed' and e,
                timeout=60,
                what=f'evaluation of {sid}',
            )
            assert done['evaluation_id'] == decisions[sid]['evaluation_id']
            assert set(done['report']['judges']) == {'tool_selection', 'completeness'}
            assert done['report']['profile'] == 'default' and done['overall_score'] == 1.0
        for sid in set(decisions) - set(sampled):
            assert c.get(f'/api/v1/sessions/{sid}/evaluation').status_code == 404
        assert judge.calls == len(sampled)  # two model judges fused into one call per sampled run, none for the others

        # the same spans through the file loader give the same records
        path = tmp_path / 'captured.otlp.jsonl'
        path.write_text(json.dumps(otlp_json_from_protobuf(encode_spans(spans))) + '\n')
        loaded = load_dataset(path)
        assert loaded.errors == []
        from_file = {r.query_id: r.model_dump(mode='json') for r in loaded.records}
        for detail in sessions.values():
            stored = QueryRecord.model_validate(detail['record']).model_dump(mode='json')
            assert stored['metadata'].pop('profile') == 'default'  # the service notes the profile it judged with
            assert stored == from_file[stored['query_id']]


def test_otlp_endpoint_answers_partial_success_and_holds_rootless_traces(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "traces.db"}'
    from sensei_eval.service.migrate import upgrade

    upgrade(url)
    sampler = SamplerConfig(rate=1.0, judges=('tool_selection', 'completeness'), budget_per_hour=4, negative_reserve=0)
    settings = fast_settings(
        url, token=TOKEN, sampler=sampler, traces=TraceConfig(root_timeout_s=0.5), trace_sweep_s=0.1, max_body_bytes=100_000
    )
    judge = ScriptedScorer(answer=_judge_answer)
    lines = [json.loads(line) for line in (DATA / 'bad_spans.otlp.jsonl').read_text().splitlines() if line.startswith('{')]
    with live_server(settings, judge.model()) as srv, httpx.Client(base_url=srv.url) as c:
        assert c.post('/v1/traces', json=lines[0]).status_code == 401  # the trace route needs the token like any write
        refused = c.post('/v1/traces', content=b'x', headers={**AUTH, 'Content-Type': 'text/plain'})
        assert refused.status_code == 415
        assert (
            c.post(
                '/api/v1/sessions', content=b'\x0a\x00', headers={**AUTH, 'Content-Type': 'application/x-protobuf'}
            ).status_code
            == 415
        )

        # a bad span is refused with its location; its good neighbours are kept
        r = c.post('/v1/traces', json=lines[2], headers=AUTH)  # the unknown AnyValue kind
        assert r.status_code == 200
        partial = r.json()['partialSuccess']
        assert partial['rejectedSpans'] == 1 and 'spans[0].attributes[0].value: unknown AnyValue kind' in partial['errorMessage']
        child = gzip.compress(json.dumps(lines[0]).encode())  # as OTEL_EXPORTER_OTLP_COMPRESSION=gzip sends it
        gz = {**AUTH, 'Content-Type': 'application/json', 'Content-Encoding': 'gzip'}
        assert c.post('/v1/traces', content=child, headers=gz).json() == {}  # a child: held, no session yet
        bomb = gzip.compress(b' ' * 3_000_000)  # 3 KB that inflate past 20 times the 100 KB body limit
        assert c.post('/v1/traces', content=bomb, headers=gz).status_code == 413
        assert c.get('/api/v1/sessions', headers=AUTH).json()['total'] == 0
        assert c.post('/v1/traces', json=lines[5], headers=AUTH).json() == {}  # its root, last: the trace is built
        trace = c.get('/api/v1/traces/0af7651916cd43dd8448eb211c80319c', headers=AUTH).json()
        assert trace['status'] == 'ingested' and trace['span_count'] == 2 and trace['runs'][0]['reason'] == 'negative'

        # the same request again (an exporter retry after the trace was built): refused as late, nothing doubled
        late = c.post('/v1/traces', json=lines[5], headers=AUTH).json()['partialSuccess']
        assert late['rejectedSpans'] == 1 and 'already ingested' in late['errorMessage']

        # protobuf in, protobuf out; not a protobuf request at all is a 400
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        bad_pb = c.post('/v1/traces', content=b'\xff\xff\xff', headers={**AUTH, 'Content-Type': 'application/x-protobuf'})
        assert bad_pb.status_code == 400
        empty = c.post('/v1/traces', content=ExportTraceServiceRequest().SerializeToString(),
                       headers={**AUTH, 'Content-Type': 'application/x-protobuf'})  # fmt: skip
        assert empty.status_code == 200 and empty.headers['content-type'] == 'application/x-protobuf'
        assert not ExportTraceServiceResponse.FromString(empty.content).HasField('partial_success')

        # a trace whose only span is a child of a root that never comes: held, then dropped with the reason
        orphan = json.loads(json.dumps(lines[0]).replace('0af7651916cd43dd8448eb211c80319c', '3df7651916cd43dd8448eb211c80319f'))
        assert c.post('/v1/traces', json=orphan, headers=AUTH).json() == {}
        orphan_url = '/api/v1/traces/3df7651916cd43dd8448eb211c80319f'
        rejected = wait_for(
            lambda: (t := c.get(orphan_url, headers=AUTH).json())['status'] == 'rejected' and t,
            what='the rootless trace to time out',
        )
        assert 'never arrived within 0.5 s' in rejected['error'] and rejected['runs'] == []

        # the budget: 4 model-judge calls an hour, two per run — the third and fourth run are not judged
        for n in range(4):
            trace = json.loads(json.dumps(lines[5]).replace('0af7651916cd43dd8448eb211c80319c', f'{n + 5:x}' * 32))
            trace['resourceSpans'][0]['scopeSpans'][0]['spans'][0]['attributes'] = [
                a
                for a in trace['resourceSpans'][0]['scopeSpans'][0]['spans'][0]['attributes']
                if a['key'] != 'sensei_eval.rating'
            ]
            assert c.post('/v1/traces', json=trace, headers=AUTH).json() == {}
        runs = [c.get(f'/api/v1/traces/{f"{n + 5:x}" * 32}', headers=AUTH).json()['runs'][0] for n in range(4)]
        # the negatively rated run above already spent 2 of the 4 calls
        assert [r['reason'] for r in runs] == ['rate', 'budget', 'budget', 'budget']
        assert 'over budget: 4 of 4 judge calls' in runs[1]['detail']
        listed = c.get('/api/v1/traces', params={'status': 'rejected'}, headers=AUTH).json()
        assert [t['trace_id'] for t in listed['items']] == ['3df7651916cd43dd8448eb211c80319f']


def test_buffered_spans_survive_a_restart(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "restart.db"}'
    from sensei_eval.service.migrate import upgrade

    upgrade(url)
    settings = fast_settings(url, sampler=SamplerConfig(rate=0.0, judges=('checks',)), traces=TraceConfig(root_timeout_s=300))
    judge = ScriptedScorer(answer=_judge_answer)
    lines = [json.loads(line) for line in (DATA / 'bad_spans.otlp.jsonl').read_text().splitlines() if line.startswith('{')]
    with live_server(settings, judge.model()) as srv, httpx.Client(base_url=srv.url) as c:
        assert c.post('/v1/traces', json=lines[0]).json() == {}  # the tool call's span; its run's root comes later
        assert c.get('/api/v1/traces/0af7651916cd43dd8448eb211c80319c').json()['status'] == 'pending'
    with live_server(settings, judge.model()) as srv, httpx.Client(base_url=srv.url) as c:
        assert c.post('/v1/traces', json=lines[5]).json() == {}
        [session] = c.get('/api/v1/sessions').json()['items']
        detail = c.get(f'/api/v1/sessions/{session["session_id"]}').json()
        record = QueryRecord.model_validate(detail['record'])
        assert record.metadata['span_count'] == 2  # the span buffered before the restart is part of the run
        trace = c.get('/api/v1/traces/0af7651916cd43dd8448eb211c80319c').json()
        # rated 2: sampled; the checks cost no model call, so they are judged whatever the budget
        assert trace['runs'][0]['reason'] == 'negative' and trace['runs'][0]['judge_calls'] == 0
        done = wait_for(
            lambda: (
                (e := c.get(f'/api/v1/sessions/{session["session_id"]}/evaluation').json()).get('status') == 'completed' and e
            ),
            what='the checks',
        )
        assert 'error_recovery_check' in done['report']['judges'] and judge.calls == 0


def test_concurrent_requests_never_overspend_the_budget(db_url: str) -> None:
    """Traces posted from several clients at once: the budget is decided under a lock, so the sampled runs
    spend exactly the budget and no more (API only: nothing is judged here)."""
    import concurrent.futures

    sampler = SamplerConfig(rate=1.0, judges=('tool_selection', 'completeness'), budget_per_hour=10, negative_reserve=0)
    settings = fast_settings(db_url, sampler=sampler, concurrency=0)
    template = (DATA / 'bad_spans.otlp.jsonl').read_text().splitlines()[6]  # a complete one-span trace
    bodies = [
        template.replace('0af7651916cd43dd8448eb211c80319c', f'{n:032x}').replace('"intValue": "2"', '"intValue": "4"')
        for n in range(1, 31)
    ]
    with live_server(settings, ScriptedScorer().model()) as srv:

        def post(body: str) -> dict[str, Any]:
            with httpx.Client(base_url=srv.url) as c:
                answer: dict[str, Any] = c.post('/v1/traces', content=body, headers={'Content-Type': 'application/json'}).json()
                return answer

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            assert list(pool.map(post, bodies)) == [{}] * 30
        with httpx.Client(base_url=srv.url) as c:
            runs = [c.get(f'/api/v1/traces/{n:032x}').json()['runs'][0] for n in range(1, 31)]
    assert sum(r['judge_calls'] for r in runs if r['sampled']) == 10
    assert sum(r['sampled'] for r in runs) == 5 and sum(r['reason'] == 'budget' for r in runs) == 25
