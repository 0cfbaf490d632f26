"""Token counts with the judge model's own tokenizer, and prompts that fit its context."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.settings import ModelSettings

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import estimate_tokens, render_transcript
from sensei_eval.evaluators.base import JUDGE_SYSTEM_PROMPT, FailureModeJudge
from sensei_eval.evaluators.fused import FusedJudge
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.models import counting, fitting
from sensei_eval.models.judge_model import EMBEDDED_TRANSCRIPT_BUDGET, JudgeModel

from .helpers import ScriptedJudge, about

# all 50 tau2-airline runs: the packaged copy of ../shared/datasets/tau2-airline, so the test runs on any clone
TAU = Path(__file__).resolve().parents[1] / 'sensei_eval' / 'data' / 'tau2_airline' / 'records.jsonl'
# the longest of them (tau2-airline-18, 84 steps), committed so the context tests always run
LONGEST = Path(__file__).resolve().parent / 'data' / 'tau2_airline' / 'longest.jsonl'
SAMPLE = Path(__file__).resolve().parents[1] / 'sensei_eval' / 'data' / 'sample.jsonl'
EMBEDDED_MAX_TOKENS = 700  # what resolve_model gives the embedded model

llama_cpp = pytest.importorskip('llama_cpp')


@cache
def _records(path: Path) -> tuple[QueryRecord, ...]:
    return tuple(load_dataset(path).records)


def _embedded(model: Any = None, budget: int | None = None) -> JudgeModel:
    """The embedded model's JudgeModel as `resolve_model` sets it up, calling `model` instead of the server."""
    judge_model = JudgeModel(
        model or TestModel(),
        'embedded:SmolLM2-135M-Instruct',
        settings=ModelSettings(temperature=0.0, max_tokens=EMBEDDED_MAX_TOKENS),
        embedded=True,
    )
    judge_model.transcript_budget = budget or EMBEDDED_TRANSCRIPT_BUDGET
    return judge_model


@cache
def _smollm2() -> Any:
    """A second, independent load of the SmolLM2 tokenizer to check our counts against."""
    from llama_cpp._utils import suppress_stdout_stderr

    from sensei_eval.models.embedded import gguf_path

    with suppress_stdout_stderr(disable=False):
        return llama_cpp.Llama(model_path=str(gguf_path()), vocab_only=True, verbose=False)


def _chatml_tokens(system: str, user: str) -> int:
    """The whole request as llama.cpp sees it: SmolLM2's ChatML template, BOS and special tokens included."""
    text = f'<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n'
    return len(_smollm2().tokenize(text.encode('utf-8', 'replace'), add_bos=True, special=True))


def test_the_embedded_model_counts_with_smollm2s_own_tokenizer() -> None:
    counter = counting.counter_for(_embedded())
    assert counter.exact and 'SmolLM2' in counter.name
    assert _embedded().token_counter is counter  # loaded once
    text = 'QUERY: change my flight [3] tool_call get_reservation_details {"reservation_id": "ZFA04Y"}'
    assert counter.count(text) == len(_smollm2().tokenize(text.encode(), add_bos=False, special=False))
    assert 0 <= counter.chat('sys', text) - _chatml_tokens('sys', text) <= 1  # a BOS token counted in case


def test_prompt_fits_the_embedded_context_on_the_longest_tau_run() -> None:
    model = _embedded()
    limit = counting.prompt_limit(model)
    assert limit == 8192 - EMBEDDED_MAX_TOKENS - counting.SAFETY_MARGIN
    record = max(_records(LONGEST), key=lambda r: len(render_transcript(r).text))
    transcript = render_transcript(record, budget_tokens=model.transcript_budget)  # as the runner renders it
    assert transcript.truncation is not None  # the run is far longer than the context
    judges = [j for j in make_judges(['all']) if isinstance(j, FailureModeJudge)]
    assert len(judges) >= 15
    shas = set()
    for judge in judges:
        fit = judge.fit(record, transcript, model)
        real = _chatml_tokens(JUDGE_SYSTEM_PROMPT, judge.build_prompt(fit.transcript))
        assert real <= 8192 - EMBEDDED_MAX_TOKENS, judge.name
        assert abs(fit.prompt_tokens - real) <= 8, (judge.name, fit.prompt_tokens, real)  # counted, not guessed
        shas.add(fit.transcript.sha256)
    assert len(shas) == 1  # every judge sends the same transcript: the prefix stays shared


def test_a_transcript_over_the_context_is_recut_with_the_real_tokenizer() -> None:
    model = _embedded()
    record = max(_records(LONGEST), key=lambda r: len(render_transcript(r).text))
    uncut = render_transcript(record)  # ~15k tokens: what a wrong budget would have let through
    judges = [j for j in make_judges(['mvp']) if isinstance(j, FailureModeJudge)]
    fits = [j.fit(record, uncut, model) for j in judges]
    assert all(f.recut for f in fits)
    assert len({f.transcript.sha256 for f in fits}) == 1  # one shared re-cut, whatever each rubric's length
    for judge, fit in zip(judges, fits, strict=True):
        assert _chatml_tokens(JUDGE_SYSTEM_PROMPT, judge.build_prompt(fit.transcript)) <= 8192 - EMBEDDED_MAX_TOKENS
        assert fit.details()['prompt_tokens_counted'] == fit.prompt_tokens
        assert fit.transcript.truncation is not None and fit.transcript.truncation.steps_cut


async def test_the_judge_sends_what_it_counted_and_reports_it() -> None:
    record = max(_records(LONGEST), key=lambda r: len(render_transcript(r).text))
    sent: list[int] = []

    def answer(prompt: str, n: int) -> dict[str, Any]:
        sent.append(_chatml_tokens(JUDGE_SYSTEM_PROMPT, prompt))
        return {'reasoning': f'Nothing wrong at [2] ({about(prompt)}).', 'issues': []}

    scripted = ScriptedJudge(answer)
    model = _embedded(FunctionModel(scripted, model_name='scripted'))
    [judge] = make_judges(['hallucination'])
    result = await judge.judge(record, render_transcript(record), model)  # given uncut: the judge re-cuts
    assert result.status == 'ok', result.error
    assert sent[0] <= 8192 - EMBEDDED_MAX_TOKENS
    assert abs(result.details['prompt_tokens_counted'] - sent[0]) <= 8
    assert 'SmolLM2' in result.details['token_counter'] and result.details['transcript_recut'] is True
    assert result.truncation is not None  # the cut the judge really read is in its result


def test_a_fused_prompt_fits_too() -> None:
    model = _embedded()
    record = max(_records(LONGEST), key=lambda r: len(render_transcript(r).text))
    # the three MVP rubrics (2.3k tokens with the embedded tokenizer): five rubrics and the system prompt leave
    # an 84-step transcript too little room even cut to previews, and the fused judge then judges each alone
    # (tests/test_fused.py)
    [fused] = make_judges(['mvp'], fuse=['all'])
    assert isinstance(fused, FusedJudge)
    from sensei_eval.models.fitting import fit_transcript

    fit = fit_transcript(
        record,
        render_transcript(record, budget_tokens=model.transcript_budget),
        model,
        system=JUDGE_SYSTEM_PROMPT,
        task=fused.task_prompt(),
    )
    assert fit.recut  # three rubrics leave less room than one
    assert _chatml_tokens(JUDGE_SYSTEM_PROMPT, fused.build_prompt(fit.transcript)) <= 8192 - EMBEDDED_MAX_TOKENS


@pytest.mark.parametrize('path', [TAU, SAMPLE], ids=['tau2-airline', 'sample'])
def test_the_estimate_counts_high_on_every_published_run(path: Path) -> None:
    """bytes / 2.5 over-counts every transcript against SmolLM2's tokenizer (a small, token-hungry vocabulary)."""
    if not path.is_file():
        pytest.skip(f'{path} is not on this machine')
    counter = counting.counter_for(_embedded())
    for record in _records(path):
        text = render_transcript(record).text
        assert estimate_tokens(text) >= counter.count(text), record.query_id
    # while characters / 3.2, the old estimate, fell short on some
    if path == TAU:
        assert any(len(t) / 3.2 < counter.count(t) for t in (render_transcript(r).text for r in _records(path)))


def test_tiktoken_is_used_only_from_its_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No network: an encoding not on disk means the estimate, and tiktoken is never asked to fetch it."""
    import tiktoken.load

    def no_network(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError('tiktoken tried to download an encoding')

    monkeypatch.setattr(tiktoken.load, 'read_file', no_network)
    monkeypatch.setenv('TIKTOKEN_CACHE_DIR', str(tmp_path))
    monkeypatch.delenv('SENSEI_EVAL_TIKTOKEN_DOWNLOAD', raising=False)
    assert counting.tiktoken_counter('gpt-4o') is None
    assert counting.tiktoken_counter('llama3') is None  # not an OpenAI model name at all
    openai_model = JudgeModel('openai:gpt-4o', 'openai:gpt-4o')
    assert not counting.counter_for(openai_model).exact
    # asked to download, a failing fetch still falls back instead of raising
    monkeypatch.setattr(tiktoken.load, 'read_file', lambda *a, **k: (_ for _ in ()).throw(OSError('offline')))
    assert counting.tiktoken_counter('gpt-4o', allow_download=True) is None


def test_our_tiktoken_cache_lookup_is_tiktokens_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The file we look for is the one tiktoken reads instead of fetching (so "on disk" means no download)."""
    import tiktoken.load

    monkeypatch.setattr(tiktoken.load, 'read_file', lambda *a, **k: (_ for _ in ()).throw(AssertionError('fetched')))
    monkeypatch.setenv('TIKTOKEN_CACHE_DIR', str(tmp_path))
    assert not counting._tiktoken_cached('o200k_base')
    url = 'https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken'
    for path in tmp_path.iterdir():
        path.unlink()
    import hashlib

    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b'cached bytes')
    assert counting._tiktoken_cached('o200k_base')
    assert tiktoken.load.read_file_cached(url) == b'cached bytes'  # tiktoken reads that very file, no fetch


def test_a_hosted_model_without_a_known_context_keeps_its_budget() -> None:
    model = JudgeModel(TestModel(), 'test', transcript_budget=300)
    assert counting.prompt_limit(model) is None
    assert counting.transcript_budget(model, 10_000) == 300
    record = _long_record()
    fit = fitting.fit_transcript(record, render_transcript(record), model, system='s', task='t')
    assert fit.recut and fit.transcript.truncation is not None
    assert estimate_tokens(fit.transcript.text) <= 300
    assert fit.limit is None and 'prompt_token_limit' not in fit.details()


def test_output_reserve_follows_max_tokens() -> None:
    assert counting.output_reserve(_embedded()) == EMBEDDED_MAX_TOKENS
    assert counting.output_reserve(JudgeModel('test', 'test')) == counting.DEFAULT_OUTPUT_RESERVE


def _long_record() -> QueryRecord:
    return QueryRecord.model_validate(
        {
            'query_id': 'long',
            'messages': [
                {'role': 'user', 'content': 'Summarise the logs.'},
                {'role': 'assistant', 'content': None, 'tool_calls': [_call()]},
                {'role': 'tool', 'tool_call_id': 'c1', 'content': 'log line 12345 ok\n' * 400},
                {'role': 'assistant', 'content': 'All ok.'},
            ],
        }
    )


def _call() -> dict[str, Any]:
    return {'id': 'c1', 'type': 'function', 'function': {'name': 'read_logs', 'arguments': '{}'}}
