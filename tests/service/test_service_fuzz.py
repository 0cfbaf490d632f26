"""Fuzzing the ingest route (hypothesis): whatever is posted, the service never answers 500, and what
it stored can always be read back (list, detail, dashboard) — on SQLite and PostgreSQL.

Bodies are valid records with fields replaced by arbitrary JSON (text with lone surrogates and NULs
included), arbitrary JSON documents, and arbitrary bytes; reads get arbitrary ids and offsets.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest

hypothesis = pytest.importorskip('hypothesis')

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from .conftest import ScriptedScorer, alert_record, fast_settings, live_server  # noqa: E402

# Any code point, lone surrogates and NUL included (hypothesis leaves surrogates out by default).
TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT | st.just(2**63) | st.just('q' * 300)
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=12
)
FIELDS = ['query_id', 'query', 'messages', 'alert_data', 'metadata', 'status', 'agent', 'rating', 'message_format', 'extra']


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(['record', 'record', 'record', 'document', 'bytes']))
    if kind == 'bytes':
        return draw(st.binary(max_size=200))
    if kind == 'document':
        return json.dumps(draw(JSON_VALUES)).encode()
    record: dict[str, Any] = {**alert_record(), 'agent': 'fuzz'}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True)):
        record[name] = draw(JSON_VALUES)
    if draw(st.booleans()):
        record['query_id'] = draw(TEXT.filter(lambda t: t.strip() != ''))
    if draw(st.booleans()):
        messages = record['messages'] if isinstance(record['messages'], list) else []
        record['messages'] = [dict(m) if isinstance(m, dict) else m for m in messages]
        record['messages'].append({'role': 'assistant', 'content': draw(TEXT)})
    return json.dumps(record).encode()  # ensure_ascii: a lone surrogate travels as \\udXXX, as a client would send it


def test_ingest_never_answers_500(db_url: str) -> None:
    with live_server(fast_settings(db_url), ScriptedScorer().model()) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        statuses: list[int] = []

        @settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
        @given(body=bodies(), session_id=TEXT, offset=st.integers(min_value=-(2**70), max_value=2**70))
        def run(body: bytes, session_id: str, offset: int) -> None:
            r = c.post('/api/v1/sessions', content=body, headers={'Content-Type': 'application/json'})
            statuses.append(r.status_code)
            assert r.status_code != 500, r.text
            assert r.status_code in (201, 400, 413, 422), (r.status_code, r.text)
            if r.status_code == 201:
                stored = r.json()['session_id']
                assert c.get(f'/api/v1/sessions/{stored}').status_code == 200
                assert c.get(f'/api/v1/dashboard/sessions/{stored}').status_code == 200
            # as a client would send it: UTF-8, percent-encoded (a lone surrogate as its 3 raw bytes)
            raw_id = quote(session_id.encode('utf-8', 'surrogatepass'), safe='')
            for response in (
                c.get(f'/api/v1/sessions?offset={offset}'),
                c.get(f'/api/v1/dashboard/sessions?offset={offset}&q={raw_id}'),
                c.get(f'/api/v1/sessions/{raw_id}'),
                c.get(f'/api/v1/scoring/sessions/{raw_id}/score'),
            ):
                assert response.status_code < 500, (response.request.url, response.status_code, response.text)

        run()
        assert c.get('/api/v1/sessions', params={'limit': 500}).status_code == 200
        assert c.get('/api/v1/dashboard/sessions', params={'limit': 500}).status_code == 200
        assert c.get('/api/v1/dashboard/patterns').status_code == 200
    assert 201 in statuses and 422 in statuses  # both sides of validation were exercised
