"""List pages carry bounded previews of a session's text; the detail endpoints keep the full text.

Reproduced as reported, on SQLite and PostgreSQL, against the real server: sessions whose query is megabytes
long made every list page carry each one whole (60 sessions of 4.7 MB: a 282 MB page and a 1,092 MB peak;
PostgreSQL, 30 sessions: 735 MB). The service's own peak memory, in a child process at the reported sizes, is
`benchmarks/hostile.py`'s item 4.
"""

from __future__ import annotations

import httpx

from sensei_eval.service.previews import PREVIEW_CHARS, alert_line, cut

from .conftest import ScriptedScorer, alert_record, fast_settings, live_server

BIG = 1_000_000  # characters of each long text (the reproduction's 4.7 MB runs in the benchmark)


def _long_query_record(query_id: str, n: int = BIG) -> dict[str, object]:
    query = ('Why did the checkout service fail? ' * (n // 35 + 1))[:n]
    return {
        'query_id': query_id,
        'query': query,
        'message_format': 'openai',
        'messages': [{'role': 'user', 'content': query}, {'role': 'assistant', 'content': 'A timeout.'}],
        'rating': {'correctness': 4, 'usefulness': 2, 'reasoning': 'r' * 200_000},
        'prompt_version': 'v' * 3000,
    }


def test_lists_carry_previews_and_the_detail_keeps_the_full_text(db_url: str) -> None:
    alert = alert_record('alert-long', alert_data={'alert_type': 'SuspiciousCPU', 'pod': 'miner', 'log': 'x' * BIG})
    with (
        live_server(fast_settings(db_url), ScriptedScorer().model()) as server,
        httpx.Client(base_url=server.url, timeout=60) as c,
    ):
        ids = [c.post('/api/v1/sessions', json=_long_query_record(f'long-{i}')).json()['session_id'] for i in range(3)]
        assert c.post('/api/v1/sessions', json=alert).status_code == 201
        short = c.post('/api/v1/sessions', json=_long_query_record('short', 40)).json()['session_id']
        api = c.get('/api/v1/sessions', params={'limit': 50})
        dashboard = c.get('/api/v1/dashboard/sessions', params={'limit': 50})
        detail = c.get(f'/api/v1/sessions/{ids[0]}').json()
        page = c.get(f'/api/v1/dashboard/sessions/{ids[0]}').json()
    assert api.status_code == dashboard.status_code == 200
    assert len(api.content) < 50_000 and len(dashboard.content) < 50_000  # five sessions of a megabyte each
    items = {i['query_id']: i for i in api.json()['items']}
    for i in range(3):
        listed = items[f'long-{i}']
        assert len(listed['query']) == PREVIEW_CHARS and listed['query'].endswith('…') and listed['query_truncated']
    assert items['short']['query_truncated'] is False and len(items['short']['query']) == 40
    rows = {r['query_id']: r for r in dashboard.json()['items']}
    assert len(rows['long-0']['query']) == PREVIEW_CHARS and rows['long-0']['query'].startswith('Why did the checkout')
    assert rows['long-0']['rating'] == 3.0  # the mean of the rating's numbers, its 200 KB reasoning never read
    assert len(rows['long-0']['prompt_version']) == PREVIEW_CHARS
    assert rows['alert-long']['is_alert'] and rows['alert-long']['query'].startswith('Investigate the alert')
    assert rows['short']['session_id'] == short
    assert len(detail['query']) == BIG and detail['query_truncated'] is False
    assert len(detail['record']['query']) == BIG and len(page['query']) == BIG


def test_previews_are_cut_on_characters_and_alert_lines_keep_whole_pairs() -> None:
    assert cut('é' * PREVIEW_CHARS) == ('é' * PREVIEW_CHARS, False)
    text, truncated = cut('é' * (PREVIEW_CHARS + 1))
    assert truncated and len(text) == PREVIEW_CHARS and text.endswith('…')
    assert cut(None) == ('', False)
    assert alert_line('{"a": 1, "b": "two", "c": [3], "d": {"e": 4}, "f": 5}') == "a=1, b=two, c=[3], d={'e': 4}"
    assert alert_line('{"a": 1, "b": "a very long value cut he') == 'a=1'
    assert alert_line('"a plain alert"') == 'a plain alert'
    assert alert_line(None) == ''
