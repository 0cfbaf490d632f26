"""Real producers into the service: the weather agent on the plain `openai` client, traced by the official
OpenTelemetry GenAI instrumentation and by OpenInference's, exporting with the SDK's OTLP/HTTP exporter to
`POST /v1/traces`; each run becomes a session with its tool result intact and is judged. And the OTLP
`partial_success` answer for traces that give no run, over protobuf and JSON."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.traces import TraceConfig
from sensei_eval.production.sampler import SamplerConfig

from ..helpers import about
from ..test_trace_producers import _instrumented, check_weather_record, traced_run
from .conftest import ScriptedScorer, fast_settings, live_server, wait_for

TOKEN = 's3cret'
AUTH = {'Authorization': f'Bearer {TOKEN}'}


def _judge_answer(prompt: str) -> str:
    return json.dumps({'reasoning': f'The run holds up at [2] ({about(prompt)}).', 'issues': []})


def _instrumentor(name: str) -> Any:
    if name == 'genai':
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        return OpenAIInstrumentor()
    from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor

    return OpenInferenceInstrumentor()


@pytest.mark.parametrize('convention', ['genai', 'openinference'])
def test_instrumented_openai_agent_becomes_a_judged_session(
    convention: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', 'SPAN_ONLY')
    monkeypatch.setenv('OTEL_SEMCONV_STABILITY_OPT_IN', 'gen_ai_latest_experimental')
    url = f'sqlite:///{tmp_path / "producers.db"}'
    from sensei_eval.service.migrate import upgrade

    upgrade(url)
    judge = ScriptedScorer(answer=_judge_answer)
    sampler = SamplerConfig(rate=1.0, judges=('tool_selection',))
    settings = fast_settings(url, token=TOKEN, sampler=sampler, traces=TraceConfig(root_timeout_s=30))
    with live_server(settings, judge.model()) as srv, httpx.Client(base_url=srv.url, headers=AUTH) as c:
        exporter = OTLPSpanExporter(endpoint=f'{srv.url}/v1/traces', headers=AUTH)
        for provider, memory in _instrumented(_instrumentor(convention), exporter):
            traced_run(provider, memory)
            provider.force_flush()
        page = wait_for(lambda: (p := c.get('/api/v1/sessions').json())['total'] == 1 and p, what='the session')
        [item] = page['items']
        detail = c.get(f'/api/v1/sessions/{item["session_id"]}').json()
        check_weather_record(QueryRecord.model_validate(detail['record']))
        trace = c.get(f'/api/v1/traces/{detail["record"]["metadata"]["trace_id"]}').json()
        assert trace['status'] == 'ingested' and trace['span_count'] == 3 and trace['error'] is None
        done = wait_for(
            lambda: (e := c.get(f'/api/v1/sessions/{item["session_id"]}/evaluation').json()).get('status') == 'completed' and e,
            timeout=60,
            what='the evaluation',
        )
        assert set(done['report']['judges']) == {'tool_selection'}
        assert judge.calls == 1


def _span(trace_id: str, span_id: str, name: str, parent: str | None = None, **attributes: str) -> dict[str, Any]:
    span: dict[str, Any] = {
        'traceId': trace_id, 'spanId': span_id, 'name': name, 'startTimeUnixNano': '1000', 'endTimeUnixNano': '2000',
        'attributes': [{'key': k.replace('__', '.'), 'value': {'stringValue': v}} for k, v in attributes.items()],
    }  # fmt: skip
    if parent:
        span['parentSpanId'] = parent
    return span


def _base64_ids(node: Any) -> Any:
    """OTLP/JSON ids (hex) as protobuf's JSON mapping wants them (base64)."""
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode() if k in ('traceId', 'spanId', 'parentSpanId') else _base64_ids(v)
            for k, v in node.items()
        }
    return [_base64_ids(v) for v in node] if isinstance(node, list) else node


def _request(*spans: dict[str, Any]) -> dict[str, Any]:
    return {'resourceSpans': [{'resource': {'attributes': []}, 'scopeSpans': [{'scope': {'name': 't'}, 'spans': list(spans)}]}]}


def test_traces_that_give_no_run_are_counted_in_partial_success(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "partial.db"}'
    from sensei_eval.service.migrate import upgrade

    upgrade(url)
    settings = fast_settings(url, token=TOKEN, sampler=SamplerConfig(rate=0.0))
    judge = ScriptedScorer(answer=_judge_answer)
    no_run = _request(_span('a' * 32, '1' * 16, 'GET /health'), _span('a' * 32, '2' * 16, 'db query', '1' * 16))
    good = _request(
        _span('b' * 32, '3' * 16, 'chat m', gen_ai__operation__name='chat',
              gen_ai__input__messages=json.dumps([{'role': 'user', 'parts': [{'type': 'text', 'content': 'hi'}]}]),
              gen_ai__output__messages=json.dumps([{'role': 'assistant', 'parts': [{'type': 'text', 'content': 'hello'}]}])),
    )  # fmt: skip
    with live_server(settings, judge.model()) as srv, httpx.Client(base_url=srv.url, headers=AUTH) as c:
        # JSON: the trace with no run is refused, with its span count and reason
        answer = c.post('/v1/traces', json=no_run).json()
        partial = answer['partialSuccess']
        assert partial['rejectedSpans'] == 2
        assert (
            f'trace {"a" * 32} rejected (2 span(s))' in partial['errorMessage'] and 'no agent-run span' in partial['errorMessage']
        )
        # protobuf: the same answer in the request's encoding; a good trace in the same request is kept
        fresh = json.loads(json.dumps(no_run).replace('a' * 32, 'c' * 32))  # a new trace id: the first is already rejected
        body = ParseDict(
            _base64_ids({'resourceSpans': fresh['resourceSpans'] + good['resourceSpans']}), ExportTraceServiceRequest()
        )
        r = c.post('/v1/traces', content=body.SerializeToString(), headers={'Content-Type': 'application/x-protobuf'})
        assert r.status_code == 200
        response = ExportTraceServiceResponse.FromString(r.content)
        assert response.partial_success.rejected_spans == 2
        assert f'trace {"c" * 32} rejected' in response.partial_success.error_message
        # the rejected traces are listed with their reason; the good one became a session
        rejected = c.get('/api/v1/traces', params={'status': 'rejected'}).json()
        assert {t['trace_id'] for t in rejected['items']} == {'a' * 32, 'c' * 32}
        assert all('no agent-run span' in t['error'] for t in rejected['items'])
        assert c.get(f'/api/v1/traces/{"b" * 32}').json()['status'] == 'ingested'
