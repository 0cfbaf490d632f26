"""The production sampler: rate accuracy and determinism by trace-id hash, complaints always judged, a
judge-call budget never exceeded in any sliding hour, per-agent judges, and the `sample` command."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sensei_eval.cli.app import app
from sensei_eval.core.records import QueryRecord
from sensei_eval.production.sampler import (
    AgentJudging,
    Sampler,
    SamplerConfig,
    SamplerConfigError,
    load_sampler_config,
    trace_fraction,
)

DATA = Path(__file__).parent / 'data' / 'otlp'


def run(trace_id: str, *, agent: str | None = None, rating: int | None = None, **metadata: Any) -> QueryRecord:
    data: dict[str, Any] = {
        'query_id': trace_id,
        'messages': [{'role': 'user', 'content': f'question {trace_id}'}, {'role': 'assistant', 'content': 'an answer'}],
        'metadata': {'trace_id': trace_id, **({'agent': agent} if agent else {}), **metadata},
    }
    if rating is not None:
        data['rating'] = {'correctness': rating, 'relevance': 4, 'usefulness': 4}
    return QueryRecord.model_validate(data)


def ids(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [f'{rng.getrandbits(128):032x}' for _ in range(n)]


def test_the_sampled_share_converges_on_the_rate_per_agent() -> None:
    config = SamplerConfig(rate=0.1, agents={'support': AgentJudging(rate=0.5), 'batch': AgentJudging(rate=0.0)})
    sampler = Sampler(config)
    n = 10_000
    share = {
        agent: sum(sampler.decide(run(t, agent=agent)).sampled for t in ids(n, seed)) / n
        for agent, seed in (('docs', 1), ('support', 2), ('batch', 3))
    }
    # the binomial standard deviation at n=10000 is at most 0.005: 0.016 is over three of them
    assert abs(share['docs'] - 0.1) < 0.016
    assert abs(share['support'] - 0.5) < 0.016
    assert share['batch'] == 0.0


def test_decisions_are_deterministic_and_the_salt_changes_them() -> None:
    trace_ids = ids(2000)
    first = [Sampler(SamplerConfig(rate=0.3)).decide(run(t)).sampled for t in trace_ids]
    again = [Sampler(SamplerConfig(rate=0.3)).decide(run(t)).sampled for t in reversed(trace_ids)][::-1]
    salted = [Sampler(SamplerConfig(rate=0.3, salt='other')).decide(run(t)).sampled for t in trace_ids]
    assert first == again
    assert first != salted and abs(sum(salted) - sum(first)) < 120
    assert all(0 <= trace_fraction(t) < 1 for t in trace_ids[:100])
    # a run sampled at 10% is also sampled at 30%: raising the rate only adds runs
    at_10 = {t for t in trace_ids if Sampler(SamplerConfig(rate=0.1)).decide(run(t)).sampled}
    assert at_10 <= {t for t, s in zip(trace_ids, first, strict=True) if s}


def test_negative_signals_are_always_sampled() -> None:
    sampler = Sampler(SamplerConfig(rate=0.0, negative_rating=2))
    low = sampler.decide(run('a' * 32, rating=2))
    error = sampler.decide(run('b' * 32, status='error', status_message='tool crashed'))
    feedback = sampler.decide(run('c' * 32, feedback='the answer was wrong'))
    fine = sampler.decide(run('d' * 32, rating=3))
    assert (low.sampled, low.reason) == (True, 'negative') and 'rated 2' in low.detail
    assert error.sampled and 'tool crashed' in error.detail
    assert feedback.sampled and 'the answer was wrong' in feedback.detail
    assert (fine.sampled, fine.reason) == (False, 'not_sampled') and 'not in the 0% sample' in fine.detail
    quiet = Sampler(SamplerConfig(rate=0.0, sample_errors=False, sample_feedback=False))
    assert not quiet.decide(run('b' * 32, status='error')).sampled and not quiet.decide(run('c' * 32, feedback='x')).sampled


def test_the_budget_is_never_exceeded_in_any_sliding_hour() -> None:
    config = SamplerConfig(rate=0.6, budget_per_hour=40, negative_reserve=0.25, judges=('mvp',))
    sampler = Sampler(config)
    rng = random.Random(5)
    times = sorted(rng.uniform(0, 4 * 3600) for _ in range(600))
    spent: list[tuple[float, int]] = []
    decisions = []
    for i, (t, trace_id) in enumerate(zip(times, ids(600, 9), strict=True)):
        record = run(trace_id, rating=1 if i % 7 == 0 else None)
        decision = sampler.decide(record, at=1_700_000_000 + t)
        decisions.append(decision)
        if decision.sampled:
            assert decision.judge_calls == 3  # the mvp group: three model judges
            spent.append((t, decision.judge_calls))
        window = sum(c for s, c in spent if t - 3600 < s <= t)
        assert window <= 40
        rate_only = sum(
            c
            for (s, c), d in zip(spent, [d for d in decisions if d.sampled], strict=True)
            if t - 3600 < s <= t and d.reason == 'rate'
        )
        assert rate_only <= 30  # rate-sampled runs leave a quarter of the budget to complaints
    reasons = {d.reason for d in decisions}
    assert {'budget', 'rate', 'negative', 'not_sampled'} <= reasons
    refused = [d for d in decisions if d.reason == 'budget']
    assert all(not d.sampled and d.judge_calls == 0 and 'over budget' in d.detail for d in refused)
    assert sum(c for _, c in spent) > 40 * 3  # the window slides: later hours get their budget again


def test_per_agent_judges_and_free_checks() -> None:
    config = SamplerConfig(
        rate=1.0, budget_per_hour=0, judges=('mvp',), agents={'lint-bot': AgentJudging(judges=('checks',), profile='docs-agent')}
    )
    sampler = Sampler(config)
    checks_only = sampler.decide(run('e' * 32, agent='lint-bot'))
    assert checks_only.sampled and checks_only.judge_calls == 0 and checks_only.profile == 'docs-agent'
    model_judged = sampler.decide(run('f' * 32, agent='docs'))
    assert not model_judged.sampled and model_judged.reason == 'budget'  # a zero budget admits no model call


def test_configuration_mistakes_name_the_file_and_field(tmp_path: Path) -> None:
    good = tmp_path / 'sampling.yaml'
    good.write_text('rate: 0.25\nbudget_per_hour: 100\nagents:\n  support: {rate: 1.0, judges: [hallucination]}\n')
    config = load_sampler_config(good)
    assert config.for_agent('support') == (1.0, ('hallucination',), 'default') and config.for_agent('x')[0] == 0.25
    bad = tmp_path / 'bad.toml'
    bad.write_text('rate = 0.5\n[agents.support]\njudges = ["no_such_judge"]\n')
    with pytest.raises(SamplerConfigError, match=r'bad\.toml: field `agents\.support\.judges`.*no_such_judge'):
        load_sampler_config(bad)
    wrong = tmp_path / 'wrong.json'
    wrong.write_text(json.dumps({'rate': 1.5}))
    with pytest.raises(SamplerConfigError, match=r'wrong\.json: field `rate`'):
        load_sampler_config(wrong)


def test_sample_command_over_a_trace_file(tmp_path: Path) -> None:
    out, decisions = tmp_path / 'sampled.jsonl', tmp_path / 'decisions.jsonl'
    args = [
        'sample',
        '--dataset',
        str(DATA / 'bad_spans.otlp.jsonl'),
        '--rate',
        '0',
        '--out',
        str(out),
        '--decisions',
        str(decisions),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert '2 run(s): 1 sampled (1 for a negative signal, 0 by rate), 1 not sampled' in result.output
    assert 'bad_spans.otlp.jsonl:3' in result.output  # the input's problems are listed, located
    [sampled] = [json.loads(line) for line in out.read_text().splitlines()]
    assert sampled['query_id'] == '0af7651916cd43dd8448eb211c80319c'  # rated 2: a complaint
    assert sampled['metadata']['sampling']['reason'] == 'negative' and sampled['metadata']['profile'] == 'default'
    assert QueryRecord.model_validate(sampled).tool_calls()[0].tool_name == 'search_docs'  # a dataset judge reads
    rows = [json.loads(line) for line in decisions.read_text().splitlines()]
    assert sorted(r['reason'] for r in rows) == ['negative', 'not_sampled']
