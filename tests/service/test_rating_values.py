"""A rating of NaN or ±Infinity (as numbers or as the text `"Infinity"`) is a located error, never stored.

`{"score": "Infinity", "max": "Infinity"}` passed every check (infinity is within an infinite scale) and was
stored as an empty rating (a JSON column keeps a non-finite number as null). It is a 422 naming the field
on both stores, and a load error naming file, line and field for a dataset; the run's other lines load.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import Rating

from .conftest import ScriptedScorer, alert_record, fast_settings, live_server

NON_FINITE = [
    ({'score': 'Infinity', 'max': 'Infinity'}, 'rating.score'),
    ({'score': '-Infinity', 'max': 10}, 'rating.score'),
    ({'score': 'NaN', 'max': 'NaN'}, 'rating.score'),
    ({'thumbs_up': True, 'max': 'NaN'}, 'rating.max'),
    ({'correctness': 4, 'min': '-inf'}, 'rating.min'),
    ({'score': '1e999', 'max': 10}, 'rating.score'),
    ({'score': 10**400, 'max': 10}, 'rating.score'),
]


@pytest.mark.parametrize(('rating', 'field'), NON_FINITE)
def test_a_non_finite_rating_value_is_refused_naming_its_field(rating: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError, match=rf'{field}`: expected a finite number'):
        Rating.model_validate(rating)


def test_finite_ratings_still_load() -> None:
    assert Rating.model_validate({'score': 7, 'max': 10}).value == pytest.approx(0.7)
    assert Rating.model_validate({'score': '3', 'min': '1', 'max': '7'}).value == pytest.approx(1 / 3)


def test_the_api_answers_422_and_stores_nothing(db_url: str) -> None:
    with live_server(fast_settings(db_url), ScriptedScorer().model()) as server, httpx.Client(base_url=server.url) as c:
        refused = c.post('/api/v1/sessions', json=alert_record('inf-rating', rating={'score': 'Infinity', 'max': 'Infinity'}))
        kept = c.post('/api/v1/sessions', json=alert_record('good-rating', rating={'score': 7, 'max': 10}))
        listed = c.get('/api/v1/sessions').json()
    assert refused.status_code == 422, refused.text
    assert 'rating.score' in refused.json()['message'] and 'finite' in refused.json()['message']
    assert kept.status_code == 201
    assert [i['query_id'] for i in listed['items']] == ['good-rating']


def test_a_dataset_line_with_an_infinite_rating_is_a_located_error_and_the_rest_loads(tmp_path: Path) -> None:
    lines = [
        alert_record('a', rating={'score': 7, 'max': 10}),
        alert_record('b', rating={'score': 'Infinity', 'max': 'Infinity'}),
        alert_record('c', rating={'thumbs_up': True}),
    ]
    path = tmp_path / 'rated.jsonl'
    path.write_text(''.join(json.dumps(line) + '\n' for line in lines))
    result = load_dataset(path)
    assert [r.query_id for r in result.records] == ['a', 'c']
    (error,) = result.errors
    assert (error.line, error.field) == (2, 'rating.score') and 'finite' in error.message
