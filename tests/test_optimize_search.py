"""The search: a stratified split, grouped generator input, top-k candidates, rounds, a test on the
modes a variant was written from — on the billing agent of `benchmarks/billing_agent.py` (two hidden
rules, noisy runs, a stand-in generator that sees only what it is sent)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.billing_agent import COMPONENT_MAP, COMPONENTS, BillingRunner, ProposerKind, follows, make_queries, proposer_lm
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.optimize.acceptance import split_queries
from sensei_eval.optimize.evaluate import FailureExample
from sensei_eval.optimize.loop import SequentialOptimizer, _grouped
from sensei_eval.optimize.state import OptimizeConfig
from sensei_eval.optimize.variants import VariantGenerator, _messages


def test_the_split_keeps_each_failure_group_on_both_sides() -> None:
    ids = [f'q{i:02d}' for i in range(20)]
    strata = {q: 'tool_parameters' if i < 6 else 'none' for i, q in enumerate(ids)}  # a 30% minority
    for seed in range(5):
        split = split_queries(ids, OptimizeConfig(seed=seed), strata)
        minority = [q for q in split.validation if strata[q] == 'tool_parameters']
        assert len(split.validation) == 10 and len(minority) == 3  # half of the group, every seed


def test_the_generator_sees_failures_grouped_with_counts_and_passing_runs() -> None:
    examples = [
        FailureExample(query_id=f'q{i}', query='Invoice A-1', judge='reference_check', failure_mode='tool_parameters',
                       summary='{"parameter": "currency"}', label='create_invoice currency absent')
        for i in range(5)
    ] + [
        FailureExample(query_id='q9', query='Refund', judge='reference_check', failure_mode='tool_selection',
                       summary='{"missed_tools": ["open_ticket"]}', label='open_ticket missing')
    ]  # fmt: skip
    groups, shown = _grouped(examples, per=2)
    assert groups[0].startswith('create_invoice currency absent ×5 in 5 run(s) (tool_parameters, reference_check)')
    assert groups[1].startswith('open_ticket missing ×1')
    assert shown == {'q0', 'q1', 'q9'}  # two examples of the first kind, one of the second
    user = _messages('invoices', 'Create invoices.', '', groups, [], ['query b7 ("balance"): passed reference_check'])[1]
    assert '×5' in user['content'] and user['content'].count('query ') == 4
    assert 'Runs that passed every judge' in user['content']


async def _run(tmp_path: Path, kind: ProposerKind, seed: int = 0) -> tuple[SequentialOptimizer, dict[str, str]]:
    config = OptimizeConfig(variants=3, seed=seed, component_map=COMPONENT_MAP)
    optimizer = SequentialOptimizer(
        COMPONENTS, BillingRunner(noise=0.1, seed=seed), make_queries(40, seed), make_judges(['reference_check']), None,
        VariantGenerator(proposer_lm(kind, seed)), tmp_path / kind, config,
    )  # fmt: skip
    state = await optimizer.run()
    return optimizer, state.current


async def test_both_hidden_rules_are_found_and_the_suggestions_say_what_failed(tmp_path: Path) -> None:
    optimizer, current = await _run(tmp_path, 'real')
    prompt = COMPONENTS.from_mapping(current).build()
    assert follows(prompt)['ticket'] and follows(prompt)['currency']
    suggestions = json.loads((optimizer.run_dir / 'suggestions.json').read_text())
    by_section = {s['current_prompt_section']: s for s in suggestions}
    assert 'open_ticket missing ×' in by_section['workflow']['failure_pattern']
    assert by_section['invoices']['failure_pattern'].startswith('create_invoice currency absent ×')
    for s in suggestions:
        assert 'reference_check' in s['expected_improvement'] and 'p=' in s['expected_improvement']
        low, high = s['gain_interval']
        assert low <= s['validation_gain'] <= high and s['p_value'] < 0.05 / 2 / 3
    state = json.loads((optimizer.run_dir / 'state.json').read_text())
    assert state['plan'].startswith('acceptance:') and 'improved queries' in state['plan']
    tests = [c['validation'] for cs in state['components'].values() for c in cs['candidates'] if c['validation']]
    assert {tuple(t['modes']) for t in tests if t['accepted']} == {('tool_selection',), ('tool_parameters',)}


async def test_useless_and_harmful_variants_are_never_frozen(tmp_path: Path) -> None:
    for kind in ('useless', 'harmful'):
        _, current = await _run(tmp_path, kind, seed=1)
        assert current == COMPONENTS.as_dict(), kind


def test_the_acceptance_test_is_exact_and_counts_queries_not_judged_on_one_side() -> None:
    """6 improved, none hurt, 8 ties: p = 1/64 < 0.05 / 3 in any order; a query with no overall score on
    one side (a judge error: not judged) is left out of the pairs and counted, never a 0."""
    from sensei_eval.optimize.acceptance import validation_test
    from sensei_eval.optimize.evaluate import PromptEvaluation

    before = {f'v{i:02d}': (0.5 if i < 6 else 1.0) for i in range(14)}
    after = {f'v{i:02d}': 1.0 for i in range(14)}
    level = 0.05 / 3
    for order in (sorted(before), sorted(before, reverse=True)):
        old = PromptEvaluation(prompt_version='a', score=None, per_query={q: before[q] for q in order})
        new = PromptEvaluation(prompt_version='b', score=None, per_query={q: after[q] for q in order})
        test = validation_test(old, new, alpha=level, margin=0.01)
        assert test.p_value == 1 / 64 and test.accepted and test.pairs == 14 and test.unpaired == 0
        assert test.delta is not None and abs(test.delta - 3 / 14) < 1e-12
    # v13 not judged under the new prompt: 13 pairs, the unchanged query left out and counted
    new = PromptEvaluation(prompt_version='b', score=None, per_query={q: 1.0 for q in sorted(before) if q != 'v13'})
    old = PromptEvaluation(prompt_version='a', score=None, per_query=before)
    test = validation_test(old, new, alpha=level, margin=0.01)
    assert test.pairs == 13 and test.unpaired == 1 and test.p_value == 1 / 64
    assert 'not judged on one side left out' in test.reason
