"""The example documentation agent (`examples/docs_agent`): tools, the scripted model's rules, and the
end-to-end promise the optimizer relies on — a better prompt gives runs with fewer issues — offline."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolCallPart

from examples.docs_agent import prompts, tools
from examples.docs_agent.agent import AGENT_MODEL_ENV, make_agent
from examples.docs_agent.simulated import RULE_COMPONENTS, RULES, detect_rules, improved_components, improved_prompt
from sensei_eval.core.records import QueryRecord
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records

QUERIES_PATH = Path(__file__).parent.parent / 'examples' / 'docs_agent' / 'queries.jsonl'
QUERIES: list[dict[str, Any]] = [json.loads(line) for line in QUERIES_PATH.read_text().splitlines() if line.strip()]
CHECKS = ('version_check', 'docs_tool_check', 'greeting_check', 'citation_check')


async def _run(agent: Agent[None, str], prompt: str, query: str) -> tuple[str, list[ToolCallPart], list[dict[str, Any]]]:
    with agent.override(instructions=prompt):
        result = await agent.run(query)
    messages = result.all_messages()
    calls = [p for m in messages for p in m.parts if isinstance(p, ToolCallPart)]
    return result.output, calls, ModelMessagesTypeAdapter.dump_python(messages, mode='json')


# ---------------------------------------------------------------------------------------------------
# Corpus and tools


def test_corpus_front_matter() -> None:
    docs = tools.load_corpus()
    assert 10 <= len(docs) <= 16
    assert {d.trust for d in docs} == {'official_docs', 'community'}
    assert all(d.library_id.startswith('/') and d.title and d.version for d in docs)
    assert all(d.date for d in docs if d.trust == 'community')
    assert all(d.body.count('```') == 2 for d in docs), 'one code block per page'


def test_resolve_library_id() -> None:
    assert 'library_id: /vercel/next.js' in tools.context7_resolve_library_id('Next.js')
    result = tools.context7_resolve_library_id('pydantic')
    assert result.splitlines()[1].startswith('- library_id: /pydantic/pydantic ')  # exact match before pydantic-settings
    assert tools.context7_resolve_library_id('left-pad').startswith('Error:')


@pytest.mark.parametrize(
    ('library_id', 'topic', 'version', 'expected'),
    [
        ('/vercel/next.js', 'route handler caching', '15', 'corpus/nextjs-15-caching.md'),
        ('/vercel/next.js', 'route handler caching', '14', 'corpus/nextjs-14-caching.md'),
        ('/vercel/next.js', 'route handler caching', None, 'corpus/nextjs-15-caching.md'),  # latest
        ('/pydantic/pydantic', 'validators', 'v1', 'corpus/pydantic-v1-validators.md'),
        ('/pydantic/pydantic', 'validators', '2', 'corpus/pydantic-v2-validators.md'),
        ('/pydantic/pydantic', 'validators', None, 'corpus/pydantic-v2-validators.md'),
        ('/pydantic/pydantic', 'migrate dict to model_dump', None, 'corpus/pydantic-v2-migration.md'),
        ('/pydantic/pydantic-settings', 'env prefix', None, 'corpus/pydantic-settings.md'),
        ('/fastapi/fastapi', 'background tasks after response', None, 'corpus/fastapi-background-tasks.md'),
        ('/fastapi/fastapi', 'database session yield', None, 'corpus/fastapi-dependencies.md'),
        ('/encode/httpx', 'connect timeout', None, 'corpus/httpx-timeouts.md'),
        ('/encode/httpx', 'retry connections transport', None, 'corpus/httpx-transports-retries.md'),
        ('/tokio-rs/tokio', 'spawn task JoinHandle', None, 'corpus/tokio-spawn.md'),
        ('/tokio-rs/tokio', 'select cancel', '1', 'corpus/tokio-select.md'),
    ],
)
def test_get_docs_finds_the_right_official_page(library_id: str, topic: str, version: str | None, expected: str) -> None:
    result = tools.context7_get_docs(library_id, topic, version)
    assert result.splitlines()[0] == f'source: {expected}'
    assert 'trust: official_docs' in result


def test_get_docs_errors() -> None:
    assert tools.context7_get_docs('/nope/nope', 'anything') == (
        "Error: library not found: '/nope/nope' (resolve the name with context7_resolve_library_id first)"
    )
    assert 'no documentation for version 9' in tools.context7_get_docs('/vercel/next.js', 'caching', '9')


def test_scout_grep_and_tavily() -> None:
    grep = tools.scout_grep(r'HTTPTransport\(')
    assert grep.startswith('source: corpus/httpx-transports-retries.md')
    assert re.search(r'^corpus/httpx-transports-retries\.md:\d+: transport = httpx\.HTTPTransport\(retries=3\)$', grep, re.M)
    assert 'no matches' in tools.scout_grep('no_such_identifier_anywhere')
    assert tools.scout_grep('(').startswith('Error: invalid regex')
    web = tools.tavily_search('retry failed requests with httpx')
    assert web.startswith('source: corpus/blog-httpx-retries-2022.md')
    assert 'trust: community (published 2022-03-09)' in web


# ---------------------------------------------------------------------------------------------------
# Prompt components and rules


def test_prompt_components_and_build_prompt_reads_globals(monkeypatch: pytest.MonkeyPatch) -> None:
    assert prompts.COMPONENTS == [
        'IDENTITY', 'AVAILABLE_TOOLS', 'CHOOSING_SOURCES', 'CONFIDENCE_LEVELS',
        'QUERY_DECOMPOSITION', 'RESEARCH_METHODOLOGY', 'CITATIONS', 'REPORTING_RESULTS',
    ]  # fmt: skip
    prompt = prompts.build_prompt()
    assert [line[3:] for line in prompt.splitlines() if line.startswith('## ')] == prompts.COMPONENTS
    monkeypatch.setattr(prompts, 'CITATIONS', 'SWAPPED')
    assert '## CITATIONS\nSWAPPED' in prompts.build_prompt()


def test_mediocre_prompt_states_no_rule_and_each_rule_sentence_states_only_its_rule() -> None:
    assert detect_rules(prompts.build_prompt()) == frozenset()
    for name, sentence in RULES:
        assert detect_rules(sentence) == {name}, name
        assert RULE_COMPONENTS[name] in prompts.COMPONENTS
    assert detect_rules(improved_prompt()) == {name for name, _ in RULES}


@pytest.mark.parametrize(
    ('text', 'rule'),
    [
        ('Never greet the caller and skip the small talk.', 'no_greeting'),
        ('Responses are for machine consumption.', 'no_greeting'),
        ('Always include the version parameter when calling context7_get_docs.', 'pass_version'),
        ('Queries are often version-specific.', 'pass_version'),
        ('Consult the official documentation before anything else.', 'official_first'),
        ('Follow the trust hierarchy.', 'official_first'),
        ('Use blogs only when the docs have nothing.', 'official_first'),
        ('Communicate your confidence based on the source.', 'state_confidence'),
        ('Break compound questions into sub-questions.', 'decompose'),
        ('Confirm API names with grep.', 'verify'),
        ('Report which tools you tried.', 'report_searches'),
    ],
)
def test_rules_tolerate_paraphrase(text: str, rule: str) -> None:
    assert rule in detect_rules(text)


def test_citation_rule_levels() -> None:
    assert detect_rules('Cite sources with <source ref="..."/> tags.') == {'cite_sources'}
    assert detect_rules('Use <source> tags around a quoted excerpt.') == {'cite_snippets'}
    assert detect_rules('Quote the docs.') == frozenset()  # snippets without tags: not the tag format


# ---------------------------------------------------------------------------------------------------
# The simulated agent: behaviour flips with each rule


async def test_mediocre_vs_improved_behaviour() -> None:
    agent = make_agent()
    query = 'How do I cache a GET route handler in Next.js 15?'
    output, calls, _ = await _run(agent, prompts.build_prompt(), query)
    assert output.startswith("Hello! I'd be happy to help")
    assert '<source' not in output and 'Confidence:' not in output and 'Searched:' not in output
    assert all('version' not in c.args_as_dict() for c in calls)

    output, calls, _ = await _run(agent, improved_prompt(), query)
    assert not re.search(r'hello|happy to help|hope this helps', output, re.I)
    assert [c.tool_name for c in calls] == ['context7_resolve_library_id', 'context7_get_docs', 'scout_grep']
    assert calls[1].args_as_dict() == {'library_id': '/vercel/next.js', 'topic': 'cache route handler', 'version': '15'}
    assert re.search(r'<source ref="corpus/nextjs-15-caching\.md">"[^"<]{20,}"</source>', output)
    assert "export const dynamic = 'force-static'" in output
    assert 'Confidence: high (official docs, version 15)' in output
    assert 'Searched:\n- context7_resolve_library_id' in output


async def test_version_rule_reads_the_asked_version() -> None:
    agent = make_agent()
    query = 'Why does my GET route handler return the same data on every request in Next.js 14?'
    _, calls, _ = await _run(agent, improved_prompt(['official_first']), query)
    assert calls[-1].args_as_dict().get('version') is None  # reads the latest (15) page: wrong for 14
    output, calls, _ = await _run(agent, improved_prompt(['official_first', 'pass_version']), query)
    assert calls[-1].args_as_dict()['version'] == '14'
    assert 'nextjs-14-caching.md' in output


async def test_source_rule_and_web_only_queries() -> None:
    agent = make_agent()
    query = 'How do I retry failed requests with httpx?'  # one of the queries the script sends to the web
    output, calls, _ = await _run(agent, prompts.build_prompt(), query)
    assert [c.tool_name for c in calls] == ['tavily_search']
    assert 'blog-httpx-retries-2022.md' in output
    output, calls, _ = await _run(agent, improved_prompt(['official_first']), query)
    assert [c.tool_name for c in calls] == ['context7_resolve_library_id', 'context7_get_docs']
    assert 'HTTPTransport(retries=3)' in output


async def test_decomposition_rule() -> None:
    agent = make_agent()
    query = 'How do I spawn a task in tokio, and how do I get its result back?'
    base = improved_prompt(['official_first', 'no_greeting'])
    output, calls, _ = await _run(agent, base, query)
    assert [c.tool_name for c in calls].count('context7_get_docs') == 1 and '###' not in output
    output, calls, _ = await _run(agent, improved_prompt(['official_first', 'no_greeting', 'decompose']), query)
    assert [c.tool_name for c in calls].count('context7_get_docs') == 2
    assert output.count('### ') == 2


async def test_confidence_marks_community_posts_low() -> None:
    agent = make_agent()
    output, _, _ = await _run(agent, improved_prompt(['state_confidence']), 'How do I retry failed requests with httpx?')
    assert 'Confidence: low (community post from 2022-03-09; may be outdated)' in output


async def test_runs_are_deterministic() -> None:
    agent = make_agent()
    first = await _run(agent, improved_prompt(), QUERIES[1]['query'])
    second = await _run(agent, improved_prompt(), QUERIES[1]['query'])
    assert first[0] == second[0]
    assert [(c.tool_name, c.args, c.tool_call_id) for c in first[1]] == [(c.tool_name, c.args, c.tool_call_id) for c in second[1]]


def test_model_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    assert make_agent().model is not None and 'simulated' in str(getattr(make_agent().model, 'model_name', ''))
    monkeypatch.setenv(AGENT_MODEL_ENV, 'test')
    assert type(make_agent().model).__name__ == 'TestModel' or make_agent().model == 'test'


def test_load_runner_accepts_the_factory() -> None:
    from sensei_eval.agents.runner import PydanticAIRunner, load_runner

    assert isinstance(load_runner('examples.docs_agent.agent:make_agent'), PydanticAIRunner)


# ---------------------------------------------------------------------------------------------------
# End to end: records validate, and the deterministic checks see the improvement


async def _records(prompt: str) -> list[QueryRecord]:
    agent = make_agent()
    records = []
    for q in QUERIES:
        _, _, messages = await _run(agent, prompt, q['query'])
        records.append(
            QueryRecord(
                query_id=q['query_id'],
                query=q['query'],
                message_format='pydantic-ai',
                messages=messages,
                expected_tool_calls=q.get('expected_tool_calls'),
                metadata=q.get('metadata', {}),
            )
        )
    return records


_COUNTS: dict[tuple[str, str], Counter[str]] = {}  # runs are deterministic: judge each (prompt, judges) once


async def _issue_counts(prompt: str, judges: str = 'checks') -> Counter[str]:
    if (prompt, judges) not in _COUNTS:
        records = await _records(prompt)
        assert all(r.tool_calls() and r.final_answer() for r in records)
        reports = await judge_records(records, JudgeRunOptions(make_judges([judges])), run_id='t')
        counts: Counter[str] = Counter()
        for report in reports:
            for name, result in report.judges.items():
                assert result.status == 'ok', (name, result.error)
                counts[name] += len(result.issues)
        _COUNTS[prompt, judges] = counts
    return _COUNTS[prompt, judges]


def test_queries_file() -> None:
    assert 16 <= len(QUERIES) <= 20
    assert len({q['query_id'] for q in QUERIES}) == len(QUERIES)
    assert sum(bool(re.search(r'Next\.js 1\d|Pydantic v\d', q['query'])) for q in QUERIES) >= 5
    assert sum(', and ' in q['query'] for q in QUERIES) >= 5


async def test_checks_find_fewer_issues_with_the_improved_prompt() -> None:
    mediocre = await _issue_counts(prompts.build_prompt())
    improved = await _issue_counts(improved_prompt())
    for check in CHECKS:
        assert mediocre[check] > 0, check
        assert improved[check] == 0, check
    assert improved['identifier_check'] == 0 and improved['error_recovery_check'] == 0


async def test_each_rule_moves_its_check() -> None:
    mediocre = await _issue_counts(prompts.build_prompt())
    moved = {
        'no_greeting': 'greeting_check',
        'pass_version': 'version_check',
        'official_first': 'docs_tool_check',
        'cite_snippets': 'citation_check',
    }
    for rule, check in moved.items():
        counts = await _issue_counts(improved_prompt([rule]), check)
        assert counts[check] < mediocre[check], (rule, check)


def test_improved_components_only_append() -> None:
    components = improved_components()
    for name in prompts.COMPONENTS:
        assert components[name].startswith(getattr(prompts, name))


def test_optimizer_assembles_the_same_prompt() -> None:
    from sensei_eval.agents.components import load_components

    components = load_components('examples.docs_agent.prompts')
    assert list(components.names) == prompts.COMPONENTS
    assert components.build() == prompts.build_prompt()
    for name, text in improved_components().items():
        components = components.with_text(name, text)
    assert components.build() == improved_prompt()
