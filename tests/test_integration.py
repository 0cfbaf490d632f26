"""End to end with the real embedded model (SmolLM2-135M via llama-cpp-python), offline.

The one test that runs a real model: it proves the offline default path works — the server starts
from the wheel's GGUF, schema-constrained output parses into typed verdicts, tokens are counted.
It does not judge verdict quality: a 135M model's verdicts are smoke-quality, often inconclusive.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic_ai.models import override_allow_model_requests

from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from sensei_eval.models.judge_model import resolve_model

from .helpers import openai_record

pytestmark = pytest.mark.integration


def test_embedded_model_judges_a_record_end_to_end(tmp_path: Path) -> None:
    model = resolve_model('embedded')  # opt-in: the offline smoke model, named
    try:
        assert model.embedded and model.json_schema_constrained
        assert model.model.base_url.startswith('http://127.0.0.1:')  # type: ignore[union-attr]
        # the only model requests any test makes: to the embedded server on loopback
        with override_allow_model_requests(True):
            [report] = asyncio.run(
                judge_records([openai_record()], JudgeRunOptions(make_judges(['mvp']), model), run_id='it', run_dir=tmp_path)
            )
    finally:
        model.close()
    assert model._server is None
    assert set(report.judges) == {'tool_selection', 'hallucination', 'completeness'}
    results = list(report.judges.values())
    # the three judges fused into one call (the run's default): its cost is shared out over them, and each
    # result names the call (or, answered alone, why)
    assert sum(r.requests for r in results) >= 1 and sum(r.input_tokens for r in results) > 500
    assert sum(r.output_tokens for r in results) > 0
    assert all('fused' in r.details or 'fused_fallback' in r.details for r in results)
    for result in results:
        # a 135M model often echoes the schema's text instead of judging: that parses, and is inconclusive
        assert result.status in ('ok', 'inconclusive'), result.error
        assert result.model == 'embedded:SmolLM2-135M-Instruct'
        if result.status == 'ok':
            assert result.score is not None and 0.0 <= result.score <= 1.0
        else:
            assert result.score is None and result.passed is None and result.raw_output and result.error
    assert sorted(report.inconclusive) == sorted(n for n, r in report.judges.items() if r.status == 'inconclusive')
    # the embedded model's answers are smoke (`core.verdicts`): never a verdict, never a score
    assert report.overall_score is None and report.coverage is not None
    assert (report.coverage.label, report.coverage.smoke) == ('not judged', 3)
    assert (tmp_path / 'records' / 'r1.json').exists()
