"""The service's trace routes, issue 42 and issue 41 items 2-3, against the real server (uvicorn on loopback):

* content sent as OTel log events: the official GenAI instrumentation with event-only content, exporting its
  spans to `POST /v1/traces` and its log events to `POST /v1/logs` with the SDK's own OTLP/HTTP exporters; the
  run becomes a session with its tool result; events late for a built trace are refused in `partial_success`;
* a trace holding only an agent being built (`create_agent`) is `skipped`, not rejected;
* one hostile value (a 5,000-digit `intValue`, a 5,000-digit list index in an attribute key, a rating `NaN`)
  refuses its own span or run, answered in `partial_success`, while the good traces of the same request are
  kept — never a 500, over JSON and protobuf;
* a 10,000-span chain in one request is ingested as one run (its cost is in `benchmarks/hostile.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.traces import TraceConfig
from sensei_eval.production.sampler import SamplerConfig

from ..test_trace_producers import _instrumented, check_weather_record, traced_run
from .conftest import ScriptedScorer, fast_settings, live_server, wait_for
from .test_trace_producers_service import AUTH, TOKEN, _base64_ids, _judge_answer, _request

QUESTION = 'What is the weather in Paris?'
ANSWER = 'It is rainy in Paris.'


def _server(tmp_path: Path, name: str, **overrides: Any) -> Any:
    url = f'sqlite:///{tmp_path / f"{name}.db"}'
    from sensei_eval.service.migrate import upgrade

    upgrade(url)
    settings = fast_settings(
        url, token=TOKEN, sampler=SamplerConfig(rate=0.0), traces=TraceConfig(root_timeout_s=30), **overrides
    )
    return live_server(settings, ScriptedScorer(answer=_judge_answer).model())


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)).endswith('Value'):
        return {'key': key, 'value': value}
    return {'key': key, 'value': {'stringValue': value if isinstance(value, str) else json.dumps(value)}}


def _run(trace: str, *chat_attributes: dict[str, Any], agent: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """An agent span and one model call with the question and the answer (more attributes on either)."""
    inputs = [{'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]}]
    outputs = [{'role': 'assistant', 'parts': [{'type': 'text', 'content': ANSWER}]}]
    run_attrs = [_attr('gen_ai.operation.name', 'invoke_agent'), *([agent] if agent else [])]
    return [
        {'traceId': trace, 'spanId': '1' * 16, 'name': 'invoke_agent a', 'startTimeUnixNano': '1000',
         'endTimeUnixNano': '9000', 'attributes': run_attrs},
        {'traceId': trace, 'spanId': '2' * 16, 'parentSpanId': '1' * 16, 'name': 'chat m', 'startTimeUnixNano': '2000',
         'endTimeUnixNano': '3000', 'attributes': [_attr('gen_ai.operation.name', 'chat'), _attr('gen_ai.input.messages', inputs),
                                                   _attr('gen_ai.output.messages', outputs), *chat_attributes]},
    ]  # fmt: skip


def test_content_sent_as_log_events_reaches_the_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    monkeypatch.setenv('OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', 'EVENT_ONLY')
    monkeypatch.setenv('OTEL_SEMCONV_STABILITY_OPT_IN', 'gen_ai_latest_experimental')
    with _server(tmp_path, 'logs') as srv, httpx.Client(base_url=srv.url, headers=AUTH) as c:
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f'{srv.url}/v1/logs', headers=AUTH))
        )
        instrumentor = OpenAIInstrumentor()
        spans = OTLPSpanExporter(endpoint=f'{srv.url}/v1/traces', headers=AUTH)
        original = instrumentor.instrument

        def with_logs(**kwargs: Any) -> None:
            original(**kwargs, logger_provider=logger_provider)

        monkeypatch.setattr(instrumentor, 'instrument', with_logs)
        for provider, memory in _instrumented(instrumentor, spans):
            traced_run(provider, memory)
            provider.force_flush()
        page = wait_for(lambda: (p := c.get('/api/v1/sessions').json())['total'] == 1 and p, what='the session')
        detail = c.get(f'/api/v1/sessions/{page["items"][0]["session_id"]}').json()
        check_weather_record(QueryRecord.model_validate(detail['record']))
        trace_id = detail['record']['metadata']['trace_id']
        # an event for the trace now built is late: refused, and said so
        event = {'eventName': 'gen_ai.user.message', 'traceId': trace_id, 'spanId': '3' * 16, 'body': {'stringValue': 'late'}}
        late = {'resourceLogs': [{'scopeLogs': [{'logRecords': [event]}]}]}
        answer = c.post('/v1/logs', json=late).json()['partialSuccess']
        assert answer['rejectedLogRecords'] == 1 and 'late log record' in answer['errorMessage']


def test_a_trace_of_an_agent_being_built_is_skipped_not_rejected(tmp_path: Path) -> None:
    attributes = [_attr('gen_ai.operation.name', 'create_agent'), _attr('gen_ai.agent.name', 'w')]
    build = [{'traceId': 'e' * 32, 'spanId': '5' * 16, 'name': 'create_agent w', 'startTimeUnixNano': '1', 'endTimeUnixNano': '2',
              'attributes': attributes}]  # fmt: skip
    with _server(tmp_path, 'skip') as srv, httpx.Client(base_url=srv.url, headers=AUTH) as c:
        answer = c.post('/v1/traces', json=_request(*build, *_run('f' * 32))).json()
        assert answer == {}  # nothing refused
        assert c.get(f'/api/v1/traces/{"e" * 32}').json()['status'] == 'skipped'
        assert c.get(f'/api/v1/traces/{"f" * 32}').json()['status'] == 'ingested'
        assert [t['trace_id'] for t in c.get('/api/v1/traces', params={'status': 'skipped'}).json()['items']] == ['e' * 32]


def test_one_hostile_value_refuses_its_own_trace_and_the_request_keeps_the_rest(tmp_path: Path) -> None:
    digits = _run('a' * 32, _attr('gen_ai.usage.input_tokens', {'intValue': '9' * 5000}))
    index = _run('b' * 32)
    index[1]['attributes'] = [
        _attr('gen_ai.operation.name', 'chat'),
        _attr(f'llm.input_messages.{"7" * 5000}.message.role', 'user'),
    ]
    nan = _run('c' * 32, agent=_attr('sensei_eval.rating', {'doubleValue': 'NaN'}))
    good = _run('d' * 32)
    with _server(tmp_path, 'hostile') as srv, httpx.Client(base_url=srv.url, headers=AUTH) as c:
        r = c.post('/v1/traces', json=_request(*digits, *index, *nan, *good))
        assert r.status_code == 200, r.text
        message = r.json()['partialSuccess']['errorMessage']
        assert 'expected a 64-bit integer, got 5,000 characters' in message and 'list index of 5,000 digits' in message
        statuses = {t: c.get(f'/api/v1/traces/{t * 32}').json()['status'] for t in 'abcd'}
        # the bad span is left out (its run refused for want of it, or built without it); the bad index refuses
        # its run; the NaN rating is a problem of the run, which is kept unrated; the good trace is whole
        assert statuses['b'] == 'rejected' and statuses['c'] == statuses['d'] == 'ingested'
        assert 'rating nan is not a whole number' in c.get(f'/api/v1/traces/{"c" * 32}').json()['error']
        # protobuf: the index key and a NaN double the same way (no 64-bit int can hold 5,000 digits there)
        fresh = json.loads(json.dumps(_request(*index, *nan, *good)).replace('b' * 32, '1' * 32).replace('c' * 32, '2' * 32))
        fresh = json.loads(json.dumps(fresh).replace('d' * 32, '3' * 32))
        body = ParseDict(_base64_ids(fresh), ExportTraceServiceRequest())
        r = c.post('/v1/traces', content=body.SerializeToString(), headers={'Content-Type': 'application/x-protobuf'})
        assert r.status_code == 200
        response = ExportTraceServiceResponse.FromString(r.content)
        assert 'list index of 5,000 digits' in response.partial_success.error_message
        assert c.get(f'/api/v1/traces/{"3" * 32}').json()['status'] == 'ingested'
        assert c.get(f'/api/v1/traces/{"2" * 32}').json()['status'] == 'ingested'


def test_a_10000_span_chain_in_one_request_is_one_run(tmp_path: Path) -> None:
    trace = 'ab' * 16
    inputs = json.dumps([{'role': 'user', 'parts': [{'type': 'text', 'content': QUESTION}]}])
    outputs = json.dumps([{'role': 'assistant', 'parts': [{'type': 'text', 'content': ANSWER}]}])
    spans = []
    for i in range(10_000):
        attrs = [_attr('gen_ai.operation.name', 'invoke_agent' if i == 0 else 'chat')]
        if i:
            attrs += [_attr('gen_ai.input.messages', inputs), _attr('gen_ai.output.messages', outputs)]
        span = {'traceId': trace, 'spanId': f'{i + 1:016x}', 'name': f's{i}', 'startTimeUnixNano': str(1000 + i),
                'endTimeUnixNano': str(10**9 - i), 'attributes': attrs}  # fmt: skip
        if i:
            span['parentSpanId'] = f'{i:016x}'
        spans.append(span)
    with (
        _server(tmp_path, 'chain', max_body_bytes=50_000_000) as srv,
        httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as c,
    ):
        r = c.post('/v1/traces', json=_request(*spans))
        assert r.status_code == 200 and r.json() == {}, r.text
        trace_row = c.get(f'/api/v1/traces/{trace}').json()
        assert trace_row['status'] == 'ingested' and trace_row['span_count'] == 10_000 and len(trace_row['runs']) == 1
