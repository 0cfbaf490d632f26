"""The gate decides on what moved (issue 39, item 5), shown with an agent of our own.

A quoting agent (a real pydantic-ai `Agent` with two tools, its model a `FunctionModel` that acts by its
system prompt) runs 20 queries under two prompts, judged by the reference check. The new prompt stops the
customer lookup on 8 queries ("returning customers need no lookup") while fixing the currency argument on 6
others. The lookup is a read, so missing it is an advisory (minor) finding: `tool_selection` *scores* drop on
8 queries and no verdict flips. Tested on flips only, the gate said "no change" there and passed on the
overall improvement; tested on what moved, it fails, unless the user allows the mode by name.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

from sensei_eval.agents.runner import AgentRuns, PydanticAIRunner, Query
from sensei_eval.cli import validate as validate_cli
from sensei_eval.core.records import ExpectedToolCall
from sensei_eval.evaluators.reference import ReferenceCheck
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.validate import Comparison, Thresholds, ValidateOptions, to_markdown, validate_prompts

OLD = 'You are the quoting agent of Acme. Look up the customer, then create the quote in US dollars.'
NEW = (
    'You are the quoting agent of Acme. Create the quote in the currency the customer names. Returning customers need no lookup.'
)
N = 20
RETURNING = range(8)  # the new prompt skips their lookup: 8 of 20 lose an advisory call
FOREIGN = range(8, 14)  # not in dollars: the old prompt quotes them in USD, the new one right (6 fixes)
_QUERY = re.compile(r'Quote (?P<amount>\d+) (?P<currency>[A-Z]{3}) for (?P<kind>returning|new) customer (?P<id>C-\d+)')


def _queries() -> list[Query]:
    out = []
    for i in range(N):
        cid, amount = f'C-{100 + i}', 50 + 10 * i
        currency = ('EUR', 'GBP', 'CHF')[i % 3] if i in FOREIGN else 'USD'
        kind = 'returning' if i in RETURNING else 'new'
        expected = [
            ExpectedToolCall(tool_name='lookup_customer', args={'customer_id': cid}),
            ExpectedToolCall(tool_name='create_quote', args={'customer_id': cid, 'amount': amount, 'currency': currency}),
        ]
        out.append(Query(f'q{i:02d}', f'Quote {amount} {currency} for {kind} customer {cid}.', expected))
    return out


def _user_text(messages: list[ModelMessage]) -> str:
    return next(
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str)
    )


def _quoting_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The agent's decisions, by its system prompt: which calls it makes, then its answer."""
    q = _QUERY.search(_user_text(messages))
    assert q is not None
    prompt = info.instructions or ''
    plan: list[tuple[str, dict[str, object]]] = []
    if not ('no lookup' in prompt and q['kind'] == 'returning'):
        plan.append(('lookup_customer', {'customer_id': q['id']}))
    currency = q['currency'] if 'currency the customer names' in prompt else 'USD'
    plan.append(('create_quote', {'customer_id': q['id'], 'amount': int(q['amount']), 'currency': currency}))
    done = sum(isinstance(p, ToolReturnPart) for m in messages if isinstance(m, ModelRequest) for p in m.parts)
    if done < len(plan):
        name, args = plan[done]
        return ModelResponse(parts=[ToolCallPart(name, json.dumps(args), tool_call_id=f'call_{done}')])
    return ModelResponse(parts=[TextPart(f'Your quote for {q["amount"]} {currency} is ready.')])


def _agent() -> Agent[None, str]:
    agent = Agent(FunctionModel(_quoting_model, model_name='quoting-agent'), instructions=OLD)

    @agent.tool_plain
    def lookup_customer(customer_id: str) -> str:
        """Look up a customer's account."""
        return f'{customer_id}: active'

    @agent.tool_plain
    def create_quote(customer_id: str, amount: int, currency: str) -> str:
        """Create a quote for a customer."""
        return f'quote Q-{customer_id} for {amount} {currency} created'

    return agent


@pytest.fixture(scope='module')
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Comparison, Path]:
    out = tmp_path_factory.mktemp('validate')
    comparison = asyncio.run(
        validate_prompts(
            OLD, NEW, AgentRuns(PydanticAIRunner(_agent()), concurrency=1), _queries(),
            JudgeRunOptions([ReferenceCheck()]), ValidateOptions(out_dir=out),
        )
    )  # fmt: skip
    return comparison, out


def test_a_regression_in_scores_alone_fails_the_gate_whatever_the_overall_does(run: tuple[Comparison, Path]) -> None:
    c, _ = run
    selection = c.metric('tool_selection/reference_check')
    # no verdict moved on tool_selection: the missed lookup is advisory, a pass at a lower score
    assert (selection.flips, selection.fixes) == (0, 0) and selection.old_pass_rate == selection.new_pass_rate == 1.0
    assert selection.delta is not None and selection.delta < 0
    assert selection.dropped_reason == 'no discordant query: none flipped or was fixed'
    # ... its scores did: 8 of 20 queries lower, none higher, one-sided exact sign-flip p = 1/2^8
    assert selection.scores is not None and selection.scores.p_regression == pytest.approx(0.5**8)
    assert selection.scores.in_family and selection.scores.p_adjusted is not None and selection.scores.p_adjusted <= 0.05
    assert selection.verdict == 'regressed' and selection.explanation.startswith('regressed: scores of 8 queries')
    parameters = c.metric('tool_parameters/reference_check')
    # 6 fixes: reported; with each moved mode's flips and scores both in the family (K = 4 here), 1/64 does not
    # reach alpha / K, so the improvement is not called significant (an improvement never changes the exit code)
    assert (parameters.flips, parameters.fixes) == (0, 6) and parameters.verdict == 'not_significant'
    assert '0 pass→fail, 6 fail→pass' in parameters.explanation and c.gate.tarone_k == 4
    overall = c.metric('overall')
    assert overall.delta is not None and overall.delta > 0  # the overall score went up ...
    assert c.gate.exit_code == 1 and not c.gate.passed  # ... and the gate fails on the regressed mode anyway
    assert c.gate.regressed == ['tool_selection/reference_check']
    assert [r.split(' ', 1)[0] for r in c.gate.reasons] == ['tool_selection/reference_check']
    assert 'tool_selection/reference_check (scores)' in c.gate.family
    md = to_markdown(c)
    assert '🔴 **regressed**' in md and '`tool_selection/reference_check (scores)`' in md


def test_nothing_moved_is_no_change_and_moved_but_not_significant_is_said(run: tuple[Comparison, Path]) -> None:
    c, _ = run
    for m in c.metrics:
        if not m.moved:
            assert m.verdict == 'no_change'
        else:
            assert m.verdict != 'no_change', m.metric


def test_allow_names_the_mode_whose_regression_is_accepted(run: tuple[Comparison, Path]) -> None:
    from sensei_eval.validate.gate import decide

    c, _ = run
    allowed = c.model_copy(update={'thresholds': Thresholds(allow=('tool_selection',)), 'warnings': []}, deep=True)
    decide(allowed)
    assert allowed.gate.passed and allowed.gate.exit_code == 0
    assert allowed.gate.regressed == allowed.gate.allowed == ['tool_selection/reference_check']
    assert any('allowed by --allow' in w and w.startswith('tool_selection/reference_check regressed') for w in allowed.warnings)
    # allowing another mode changes nothing; a name that matches no metric is said
    other = c.model_copy(update={'thresholds': Thresholds(allow=('hallucination',)), 'warnings': []}, deep=True)
    decide(other)
    assert other.gate.exit_code == 1
    assert any(w.startswith('--allow hallucination: no such metric or failure mode') for w in other.warnings)


def test_the_cli_fails_the_change_and_passes_it_with_allow(run: tuple[Comparison, Path], tmp_path: Path) -> None:
    _, out = run
    args = ['--old-reports', str(out / 'old'), '--new-reports', str(out / 'new')]
    failed = CliRunner().invoke(validate_cli.app, [*args, '--out', str(tmp_path / 'a')])
    assert failed.exit_code == 1, failed.output
    assert 'gate: failed' in failed.stdout and 'tool_selection/reference_check regressed' in failed.stdout
    allowed = CliRunner().invoke(validate_cli.app, [*args, '--out', str(tmp_path / 'b'), '--allow', 'tool_selection'])
    assert allowed.exit_code == 0, allowed.output
    assert 'allowed by --allow' in allowed.stdout and 'gate: passed' in allowed.stdout
    data = json.loads((tmp_path / 'b' / 'comparison.json').read_text())
    assert data['gate']['allowed'] == ['tool_selection/reference_check'] and data['thresholds']['allow'] == ['tool_selection']
