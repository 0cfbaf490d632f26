"""The standard OpenTelemetry environment, honoured by the CLI: spans reach a local OTLP/HTTP receiver.

The receiver is a stdlib HTTP server that decodes what it gets with the OTLP protobuf messages; the CLI
runs as a subprocess (a tracer provider is process-wide) with the deterministic checks only, so no model
is involved.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip('opentelemetry.sdk')
pytest.importorskip('opentelemetry.exporter.otlp.proto.http')

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from sensei_eval.judging.telemetry import configure_from_env


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """(endpoint, received spans as (name, resource attributes))."""
    spans: list[tuple[str, dict[str, Any]]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
            if self.path == '/v1/traces':
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                    for scope in resource_spans.scope_spans:
                        spans.extend((span.name, resource) for span in scope.spans)
            self.send_response(200)
            self.send_header('Content-Type', 'application/x-protobuf')
            self.send_header('Content-Length', '0')
            self.end_headers()

    httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{httpd.server_address[1]}', spans
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_judge_cli_exports_its_spans_where_the_environment_says(
    tmp_path: Path, receiver: tuple[str, list[tuple[str, dict[str, Any]]]]
) -> None:
    endpoint, spans = receiver
    env = {**os.environ, 'OTEL_EXPORTER_OTLP_ENDPOINT': endpoint, 'OTEL_SERVICE_NAME': 'judging-ci', 'COLUMNS': '200'}
    command = [sys.executable, '-m', 'sensei_eval', 'judge', '--judges', 'checks', '--query-id', 'docs-001']
    done = subprocess.run([*command, '--no-cache', '--out', str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f'spans of service {"judging-ci"!r} exported to OTLP to {endpoint}' in done.stderr
    names = [name for name, _ in spans]
    assert 'sensei_eval.record' in names and any(n.startswith('sensei_eval.judge ') for n in names)
    assert {resource.get('service.name') for _, resource in spans} == {'judging-ci'}


def test_nothing_is_configured_without_the_environment() -> None:
    assert configure_from_env({}) is None
    assert configure_from_env({'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://x', 'OTEL_TRACES_EXPORTER': 'none'}) is None
    assert configure_from_env({'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://x', 'OTEL_SDK_DISABLED': 'true'}) is None
