"""Routing failures to prompt components: the user's map, the profile's map, lexical similarity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dspy
import pytest

from sensei_eval.agents.components import PromptComponents
from sensei_eval.agents.runner import Query
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.profiles import BUILTIN_PROFILES, DEFAULT_PROFILE
from sensei_eval.optimize.loop import SequentialOptimizer
from sensei_eval.optimize.metrics import AgentProgram, JudgeMetric, judges_for_component
from sensei_eval.optimize.routing import Routing, RoutingError, best_component, resolve_routing
from sensei_eval.optimize.scripted import ScriptedLM
from sensei_eval.optimize.state import OptimizeConfig
from sensei_eval.optimize.variants import VariantGenerator
from tests.test_optimize import RuleAgent

# A user's agent whose sections are named nothing like the documentation agent's
CUSTOM = PromptComponents.from_mapping(
    {
        'PERSONA': 'You are a friendly helper; greet the user warmly before you answer their question.',
        'EVIDENCE': 'When you use the documentation, add citations that point to the source pages you read.',
        'STYLE': 'Write short paragraphs. Use bullet lists for steps. Keep code blocks minimal and runnable. '
        'Prefer plain words over jargon, and explain any term the reader may not know.',
    }
)
# the docs-agent profile runs the greeting and citation checks; a profile map for other section names
QUERIES = [Query(f'q{i}', f'How do I configure FastAPI feature {i}?', metadata={'profile': 'docs-agent'}) for i in range(1, 13)]


def _optimizer(tmp_path: Path, queries: list[Query], **config: Any) -> SequentialOptimizer:
    def respond(messages: list[dict[str, Any]]) -> str:
        return json.dumps({'variant': 'unchanged in spirit: ' + messages[-1]['content'][-40:]})

    return SequentialOptimizer(
        CUSTOM, RuleAgent(), queries, make_judges(['greeting_check', 'citation_check']), None,
        VariantGenerator(ScriptedLM(respond)), tmp_path / 'run', OptimizeConfig(variants=1, max_components=1, **config),
    )  # fmt: skip


def test_resolution_order_and_map_errors() -> None:
    names = ['A', 'B']
    user = resolve_routing(names, user_map={'agent_format': ['B']}, profile_map={'agent_format': ('A',)})
    assert user.source == 'user map' and user.route('agent_format', '', {'A': '', 'B': ''}) == ['B']
    assert user.route('citation_quality', '', {'A': '', 'B': ''}) == []  # the map does not name it
    with pytest.raises(RoutingError, match=r'component map entry agent_format=NOPE: the prompt has no component'):
        resolve_routing(names, user_map={'agent_format': ['A', 'NOPE']})
    profile = resolve_routing(names, profile_map={'agent_format': ('A', 'GONE'), 'x': ('GONE',)}, profile='p')
    assert profile.source == 'profile map' and dict(profile.component_map) == {'agent_format': ('A',)}
    assert profile.dropped == ('agent_format=GONE', 'x=GONE')
    assert resolve_routing(names, profile_map={'x': ('GONE',)}).source == 'lexical'
    assert resolve_routing(names).source == 'lexical'


def test_lexical_routing_by_meaningful_overlap_and_fallback() -> None:
    texts = CUSTOM.as_dict()
    greeting = 'greeting_check agent_format {"problem_type": "greeting", "suggested_fix": "Drop it: start with the answer."}'
    citation = 'citation_check citation_quality {"reasoning": "The answer cites no source at all.", "citation_balance": "under"}'
    assert best_component(greeting, texts) == 'PERSONA'
    assert best_component(citation, texts) == 'EVIDENCE'
    assert best_component('zzz qqq', texts) == 'STYLE'  # nothing in common: the longest component


async def test_custom_component_names_with_a_user_map(tmp_path: Path) -> None:
    opt = _optimizer(tmp_path, QUERIES, component_map={'agent_format': ['PERSONA'], 'citation_quality': ['EVIDENCE']})
    state = await opt.run()
    assert state.routing == 'user map'
    n_train = len(opt.split.train)
    assert state.components['PERSONA'].failures == n_train and state.components['EVIDENCE'].failures == n_train
    assert state.components['STYLE'].failures == 0 and state.components['STYLE'].status == 'skipped'
    assert state.order == ['PERSONA', 'EVIDENCE']


async def test_custom_component_names_routed_lexically_without_a_map(tmp_path: Path) -> None:
    # the docs-agent profile's map names none of these components, so routing falls through to lexical
    opt = _optimizer(tmp_path, QUERIES)
    assert opt.routing.source == 'lexical'
    state = await opt.run()
    assert state.routing == 'lexical' and 'lexical' in (state.routing_detail or '')
    n_train = len(opt.split.train)
    assert state.components['PERSONA'].failures == n_train  # greetings
    assert state.components['EVIDENCE'].failures == n_train  # citations
    assert state.components['PERSONA'].failure_queries == {'greeting_check': sorted(opt.split.train, key=_num)}
    assert state.unrouted_failures == 0


async def test_a_map_entry_naming_an_absent_component_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RoutingError, match='agent_format=IDENTITY'):
        _optimizer(tmp_path, QUERIES, component_map={'agent_format': ['IDENTITY']})


def test_the_seed_map_belongs_to_the_docs_agent_profile_only() -> None:
    assert BUILTIN_PROFILES['docs-agent'].component_map is not None
    assert BUILTIN_PROFILES['docs-agent'].component_map['citation_quality'] == ('CITATIONS',)
    assert DEFAULT_PROFILE.component_map is None and BUILTIN_PROFILES['tarsy'].component_map is None


def test_gepa_feedback_goes_through_the_routing() -> None:
    program = AgentProgram(CUSTOM, RuleAgent())
    pred = program(query='How do I configure FastAPI?')
    judges = make_judges(['greeting_check', 'citation_check'])
    metric = JudgeMetric(judges, None, feedback=True, profile=BUILTIN_PROFILES['docs-agent'])  # lexical: no map fits
    out = metric(dspy.Example(query='q'), pred, None, 'EVIDENCE', None)
    assert 'citation_check: {' in out.feedback and 'greeting_check: {' not in out.feedback and 'lexical' in out.feedback
    mapped = Routing('user map', {'agent_format': ('STYLE',)})
    metric = JudgeMetric(judges, None, feedback=mapped, profile=BUILTIN_PROFILES['docs-agent'])
    assert 'greeting_check: {' in metric(dspy.Example(query='q'), pred, None, 'STYLE', None).feedback
    assert judges_for_component('STYLE', judges, mapped) == ['greeting_check']


def _num(query_id: str) -> int:
    return int(query_id[1:])
