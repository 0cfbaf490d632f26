"""A billing agent with hidden rules, and a stand-in generator that sees only what it is sent.

**Scripted, not a language model.** `BillingRunner` plays a billing support agent by script: it reads
the system prompt it is given and behaves by two rules the optimizer is not told:

* `ticket` — on a refund, it opens a ticket (`open_ticket`) when its prompt says to open/file/raise
  tickets (or names `open_ticket`); otherwise it refunds without one;
* `currency` — it passes `currency=` to `create_invoice` when its prompt mentions the currency;
  otherwise it leaves it out.

And one harmful phrasing: a prompt that says to skip the account lookup makes it skip
`lookup_account` everywhere. Noise: with probability `noise` per run (seeded by the run, the prompt
and the query) it forgets the account lookup, so a prompt is never scored exactly the same twice.

Queries are of three kinds, each with the tool calls a good run makes (`expected_tool_calls`, judged
by the reference check): refunds (~35%: lookup, refund, ticket), invoices (~30%: lookup, invoice with
amount and currency), balances (~35%: lookup). The rules thus help minorities of the queries.

`proposer_lm(kind, seed)` is the stand-in variant generator (a `ScriptedLM`, also GEPA's reflection
LM). It never reads the rules: from each kind of failure it is sent ("open_ticket missing ×3",
"create_invoice currency absent ×5") it writes one sentence by generic text rules ("Call open_ticket
whenever the request calls for it.", "Always pass the currency argument to create_invoice."), and like a
model that does not always get it right, about a third of its answers are vague ("Take care with
open_ticket.") and change nothing. `kind='useless'` only ever writes such sentences; `kind='harmful'`
writes one that makes the agent skip the lookup; `kind='reliable'` never writes a vague one (each of its
variants is the real fix, phrased differently), so what decides is the acceptance test alone.

`make_queries_of({'refund': 6, 'balance': 8}, seed)` makes a set with exactly those kinds: the fixture of
`benchmarks/optimizer_decision.py`, where the ticket rule helps 6 of 14 test queries and hurts none.

Run as a script, it prints what the fixture is: for the shipped prompt, each rule added, both, and the
harmful phrasing, the mean overall score and the share of runs the reference check passes, over the same
queries (the other benchmarks build on these differences):

    python benchmarks/billing_agent.py [--queries 60] [--seeds 3]   # --quick: 20 queries, 1 seed
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from sensei_eval.agents.components import PromptComponents
from sensei_eval.agents.runner import Query
from sensei_eval.core.records import ExpectedToolCall, QueryRecord
from sensei_eval.optimize.scripted import ScriptedLM

__all__ = ('COMPONENTS', 'COMPONENT_MAP', 'BillingRunner', 'follows', 'make_queries', 'make_queries_of', 'proposer_lm')

COMPONENTS = PromptComponents(
    sections=(
        ('role', 'You are the billing support agent of Acme.'),
        ('workflow', 'Look up the account before acting on it. Use the tools to act, not to guess.'),
        ('refunds', 'Refund the amount the customer asks for when the account allows it.'),
        ('invoices', 'Create invoices for the amount the customer names.'),
        ('tone', 'Be brief and polite.'),
    ),
    source='benchmarks/billing_agent.py',
)
# Which component a failure mode's findings go to (the optimizer's --component-map).
COMPONENT_MAP = {'tool_selection': ['workflow'], 'tool_parameters': ['invoices']}

_TICKET = re.compile(r'open_ticket|\b(?:open|file|raise|create|log)\w*\s+(?:a\s+|the\s+)?(?:support\s+)?tickets?\b', re.I)
_CURRENCY = re.compile(r'\bcurrenc(?:y|ies)\b', re.I)
_SKIP_LOOKUP = re.compile(r'\b(?:skip|no need for|don.t do)\b[^.]{0,30}\b(?:look ?up|lookup_account)', re.I)
_CURRENCIES = ('EUR', 'USD', 'GBP', 'CHF')


def follows(prompt: str) -> dict[str, bool]:
    """Which hidden rules (and the harmful phrasing) a prompt triggers."""
    return {
        'ticket': bool(_TICKET.search(prompt)),
        'currency': bool(_CURRENCY.search(prompt)),
        'skip_lookup': bool(_SKIP_LOOKUP.search(prompt)),
    }


def make_queries(n: int, seed: int, prefix: str = 'b') -> list[Query]:
    """`n` billing queries (refunds ~35%, invoices ~30%, balances the rest), deterministic by seed."""
    rng = random.Random(f'queries:{seed}')
    kinds = ['refund'] * round(n * 0.35) + ['invoice'] * round(n * 0.30)
    kinds += ['balance'] * (n - len(kinds))
    rng.shuffle(kinds)
    return _queries(kinds, rng, prefix)


def make_queries_of(counts: dict[str, int], seed: int, prefix: str = 'b') -> list[Query]:
    """Exactly `counts[kind]` queries of each kind ('refund', 'invoice', 'balance'), shuffled by seed."""
    rng = random.Random(f'queries:{prefix}:{seed}')
    kinds = [kind for kind, n in counts.items() for _ in range(n)]
    rng.shuffle(kinds)
    return _queries(kinds, rng, prefix)


def _queries(kinds: list[str], rng: random.Random, prefix: str) -> list[Query]:
    out = []
    for i, kind in enumerate(kinds):
        account = f'A-{rng.randint(1000, 9999)}'
        amount = rng.randint(5, 500)
        currency = rng.choice(_CURRENCIES)
        lookup = ExpectedToolCall(tool_name='lookup_account', args={'account_id': account})
        if kind == 'refund':
            text = f'Please refund {amount} {currency} to account {account}, the last charge was a mistake.'
            expected = [
                lookup,
                ExpectedToolCall(tool_name='issue_refund', args={'account_id': account, 'amount': amount}),
                ExpectedToolCall(tool_name='open_ticket'),
            ]
        elif kind == 'invoice':
            text = f'Invoice account {account} for {amount} {currency} for the consulting work.'
            expected = [
                lookup,
                ExpectedToolCall(
                    tool_name='create_invoice', args={'account_id': account, 'amount': amount, 'currency': currency}
                ),
            ]
        else:
            text = f'What is the balance of account {account}?'
            expected = [lookup]
        meta = {'kind': kind, 'account': account, 'amount': amount, 'currency': currency}
        out.append(Query(f'{prefix}{i:03d}', text, expected, meta))
    return out


@dataclass
class BillingRunner:
    """The scripted billing agent (an `AgentRunner`); see the module docstring."""

    noise: float = 0.1
    seed: int = 0
    runs: Counter[str] = field(default_factory=Counter)

    async def run(self, system_prompt: str, query: Query) -> QueryRecord:
        key = hashlib.sha256(f'{system_prompt}\x00{query.query_id}'.encode()).hexdigest()[:16]
        self.runs[key] += 1
        rng = random.Random(f'{self.seed}:{key}:{self.runs[key]}')
        rules = follows(system_prompt)
        meta = query.metadata
        account, amount, currency = meta['account'], meta['amount'], meta['currency']
        calls: list[tuple[str, dict[str, Any], str]] = []
        if not rules['skip_lookup'] and rng.random() >= self.noise:
            calls.append(('lookup_account', {'account_id': account}, f'{account}: active, balance 120.00'))
        if meta['kind'] == 'refund':
            calls.append(('issue_refund', {'account_id': account, 'amount': amount}, 'refund R-1 issued'))
            if rules['ticket']:
                calls.append(('open_ticket', {'account_id': account, 'reason': 'refund'}, 'ticket T-1 opened'))
            answer = f'I refunded {amount} {currency} to {account}.'
        elif meta['kind'] == 'invoice':
            args: dict[str, Any] = {'account_id': account, 'amount': amount}
            if rules['currency']:
                args['currency'] = currency
            calls.append(('create_invoice', args, 'invoice I-1 created'))
            answer = f'I invoiced {account} for {amount} {currency}.'
        else:
            answer = f'The balance of {account} is 120.00.'
        messages: list[dict[str, Any]] = [{'role': 'system', 'content': system_prompt}, {'role': 'user', 'content': query.query}]
        for k, (name, arguments, result) in enumerate(calls):
            call = {'id': f'c{k}', 'type': 'function', 'function': {'name': name, 'arguments': json.dumps(arguments)}}
            messages.append({'role': 'assistant', 'content': None, 'tool_calls': [call]})
            messages.append({'role': 'tool', 'tool_call_id': f'c{k}', 'content': result})
        messages.append({'role': 'assistant', 'content': answer})
        return QueryRecord.model_validate(
            {
                'query_id': query.query_id,
                'query': query.query,
                'messages': messages,
                'expected_tool_calls': [e.model_dump() for e in query.expected_tool_calls or []],
                'metadata': {'agent_requests': len(calls) + 1},
            }
        )


# ---------------------------------------------------------------------------------------------------
# The stand-in generator

ProposerKind = Literal['real', 'useless', 'harmful', 'reliable']
# Share of answers that are vague (change nothing), as a model's often are.
VAGUE_SHARE = 0.35


def proposer_lm(kind: ProposerKind = 'real', seed: int = 0) -> ScriptedLM:
    """The stand-in generator as a DSPy LM (the variant generator's LM and GEPA's reflection LM)."""

    def respond(messages: list[dict[str, Any]]) -> str:
        user = str(messages[-1].get('content', ''))
        rng = random.Random(f'{seed}:{hashlib.sha256(user.encode()).hexdigest()}')
        if 'Section to rewrite:' in user:
            current = _between(user, 'Current text:\n', '\n\nFailure examples:')
            labels = _labels(_between(user, 'Failure examples:\n', '\n\n'))
            earlier = _between(user, 'Already proposed (write a different one):\n', '\n\nAnswer with JSON')
            return json.dumps({'variant': _variant(kind, current, labels, earlier, rng)})
        current = _gepa_current(user)
        counts = Counter(_feedback_labels(_gepa_feedback(user) or user))
        return json.dumps({'new_instruction': _variant(kind, current, [x for x, _ in counts.most_common()], '', rng)})

    return ScriptedLM(respond)


def _variant(kind: ProposerKind, current: str, labels: list[str], earlier: str, rng: random.Random) -> str:
    if kind == 'harmful':
        options = ['Skip the account lookup when the customer gives an account id.', 'No need for a lookup on refunds.']
    elif kind == 'useless':
        options = ['Keep answers short.', 'Thank the customer.', 'Double-check your answer.', 'Stay friendly.']
    elif kind == 'reliable':
        options = [phrasing for label in labels for phrasing in _phrasings(label)] or ['Double-check your answer.']
    else:
        options = []
        for label in labels:
            sentence = _sentence(label)
            if rng.random() < VAGUE_SHARE:
                sentence = f'Take care with {label.split()[0]}.'
            options.append(sentence)
        options = options or ['Double-check your answer.']
    for sentence in options:
        if sentence not in current and sentence not in earlier:
            return f'{current} {sentence}'.strip()
    return f'{current} {rng.choice(options)} Check twice.'.strip()


def _sentence(label: str) -> str:
    """One instruction from a kind of failure, by generic text rules (no knowledge of the agent)."""
    m = re.match(r'^(\S+) missing$', label)
    if m:
        return f'Call {m.group(1)} whenever the request calls for it.'
    m = re.match(r'^(\S+) (\S+) (?:absent|wrong)$', label)
    if m:
        return f'Always pass the {m.group(2)} argument to {m.group(1)}.'
    return f'Avoid this: {label}.'


def _phrasings(label: str) -> list[str]:
    """The real fix for one kind of failure, in a few wordings (distinct variants that all fix it)."""
    first = _sentence(label)
    m = re.match(r'^(\S+) missing$', label)
    if m is None:
        return [first]
    tool = m.group(1)
    return [first, f'Remember to call {tool} when the request needs it.', f'Do not forget {tool} where it applies.']


def _labels(block: str) -> list[str]:
    """The kinds of failure in the generator's request, most frequent first ("- <label> ×N in ...")."""
    return [m.group(1) for m in re.finditer(r'^- (.+?) ×\d+', block, re.M)]


def _feedback_labels(text: str) -> list[str]:
    """Kinds of failure in GEPA's feedback (issues quoted as JSON, possibly escaped inside a JSON string)."""
    text = text.replace('\\"', '"')
    labels = [f'{m.group(1)} missing' for m in re.finditer(r'"missed_tools":\s*\["(\w+)"', text)]
    pattern = r'"tool_name":\s*"(\w+)",\s*"parameter":\s*"(\w+)"'
    labels += [f'{m.group(1)} {m.group(2)} absent' for m in re.finditer(pattern, text)]
    return labels


def _between(text: str, start: str, end: str) -> str:
    i = text.find(start)
    if i < 0:
        return ''
    i += len(start)
    j = text.find(end, i)
    return text[i : j if j >= 0 else len(text)].strip()


def _gepa_current(text: str) -> str:
    if text.lstrip().startswith('{'):
        try:
            return str(json.loads(text).get('current_instruction', ''))
        except (json.JSONDecodeError, AttributeError):
            pass
    m = re.search(r'current_instruction[^\n]*\n(.*?)\n\n\[\[', text, re.DOTALL)
    return m.group(1).strip() if m else ''


def _gepa_feedback(text: str) -> str:
    marker = '[[ ## examples_with_feedback ## ]]'
    return text.split(marker, 1)[1] if marker in text else ''


# ---------------------------------------------------------------------------------------------------
# As a script: what each prompt scores


def _score(prompt: str, queries: list[Query], seed: int) -> tuple[float, float]:
    """Mean overall score and the share of runs whose reference check passed, under `prompt`."""
    import asyncio

    from sensei_eval.core.verdicts import judge_status
    from sensei_eval.evaluators.registry import make_judges
    from sensei_eval.optimize.evaluate import evaluate_prompt

    _, reports = asyncio.run(evaluate_prompt(prompt, queries, BillingRunner(seed=seed), make_judges(['reference_check']), None))
    scores = [r.overall_score for r in reports if r.overall_score is not None]
    passed = [judge_status(r.judges['reference_check']) == 'pass' for r in reports if 'reference_check' in r.judges]
    return sum(scores) / max(1, len(scores)), sum(passed) / max(1, len(passed))


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--queries', type=int, default=60)
    parser.add_argument('--seeds', type=int, default=3)
    parser.add_argument('--quick', action='store_true', help='20 queries, 1 seed: CI runs it so the script cannot rot')
    args = parser.parse_args()
    if args.quick:
        args.queries, args.seeds = 20, 1
    base = COMPONENTS.build()
    prompts = {
        'shipped prompt': base,
        '+ ticket rule': base + '\nOpen a ticket with open_ticket for every refund.',
        '+ currency rule': base + '\nAlways pass the currency to create_invoice.',
        '+ both rules': base + '\nOpen a ticket with open_ticket for every refund.\nAlways pass the currency to create_invoice.',
        'harmful phrasing': base + '\nSkip the account lookup to save time.',
    }
    print(f'{args.queries} queries x {args.seeds} seed(s), noise {BillingRunner.noise}, judged by reference_check')
    print(f'{"prompt":<18} {"rules it triggers":<28} {"overall":>8} {"passed":>7}')
    for name, prompt in prompts.items():
        triggered = ', '.join(k for k, v in follows(prompt).items() if v) or '-'
        figures = [_score(prompt, make_queries(args.queries, seed), seed) for seed in range(args.seeds)]
        overall = sum(f[0] for f in figures) / len(figures)
        passed = sum(f[1] for f in figures) / len(figures)
        print(f'{name:<18} {triggered:<28} {overall:>8.3f} {passed:>7.0%}')


if __name__ == '__main__':
    main()
