"""The TARSy investigation scorer: score extraction, reminders, the second turn, hashes, the structured variant."""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.core.records import QueryRecord
from sensei_eval.core.transcript import FENCE_END, FENCE_START, render_transcript
from sensei_eval.evaluators import investigation, investigation_answers, investigation_prompts
from sensei_eval.evaluators.investigation import InvestigationJudge, StructuredInvestigationJudge
from sensei_eval.evaluators.investigation_answers import constrained_score_schema, extract_score
from sensei_eval.evaluators.investigation_prompts import (
    FOLLOWUP_MISSING_TOOLS_PROMPT,
    INVESTIGATION_SYSTEM_PROMPT,
    PROMPT_HASH,
    SCORE_PROMPT,
    is_current_prompt,
)
from sensei_eval.models.judge_model import JudgeModel, smoke_schema


def tarsy_record() -> QueryRecord:
    return QueryRecord.model_validate(
        {
            'query_id': 'alert-1',
            'alert_data': {'alert_type': 'PodCrashLooping', 'namespace': 'payments', 'pod': 'api-7f9'},
            'messages': [
                {'role': 'system', 'content': 'You are an SRE agent.'},
                {'role': 'user', 'content': 'Investigate alert PodCrashLooping in payments.'},
                {
                    'role': 'assistant',
                    'content': 'Thought: check pods\nAction: kubectl-get-pods\nAction Input: {"namespace": "payments"}',
                },
                {'role': 'user', 'content': 'Observation: api-7f9 CrashLoopBackOff 12 restarts'},
                {'role': 'assistant', 'content': 'Final Answer: OOM kill. Confidence: HIGH'},
            ],
        }
    )


# --- extraction ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('text', 'score', 'analysis'),
    [
        ('Good work overall.\nLogical Flow: 15/25\n\n62', 62, 'Good work overall.\nLogical Flow: 15/25'),
        ('Analysis here.\n  71  \n\n  \n', 71, 'Analysis here.'),  # trailing whitespace and blank lines
        ('Analysis.\nSynthesis Quality: 14/25', None, 'Analysis.\nSynthesis Quality: 14/25'),  # not 25
        ('Total: 60 out of 100', None, 'Total: 60 out of 100'),  # several numbers on the line
        ('Analysis.\n150', 150, 'Analysis.'),  # out of range: extracted, rejected by the scorer
        ('Analysis.\n-5', -5, 'Analysis.'),
        ('', None, ''),
        ('Score 55 then more text\nno number', None, 'Score 55 then more text\nno number'),
    ],
)
def test_extract_score(text: str, score: int | None, analysis: str) -> None:
    assert extract_score(text) == (score, analysis)


# --- the two-turn conversation ---------------------------------------------------------------------


class Script:
    """Answers turn 1 with scripted texts, then the missing-tools turn; records what it saw."""

    def __init__(self, score_answers: list[str], missing: str = '1. kubectl-logs: would show the OOM message.') -> None:
        self.score_answers = list(score_answers)
        self.missing = missing
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        last = _last_user(messages)
        if last == FOLLOWUP_MISSING_TOOLS_PROMPT:
            return ModelResponse(parts=[TextPart(self.missing)])
        return ModelResponse(parts=[TextPart(self.score_answers.pop(0))])

    def model(self) -> JudgeModel:
        return JudgeModel(FunctionModel(self, model_name='scripted'), 'function:scripted')


def _last_user(messages: list[ModelMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    return p.content
    return ''


async def test_two_turns_in_one_conversation() -> None:
    record = tarsy_record()
    transcript = render_transcript(record)
    script = Script(['The agent failed to read logs.\nLogical Flow: 12/25\nConsistency: 15/25\n58'])
    result = await InvestigationJudge().judge(record, transcript, script.model())
    assert result.status == 'ok'
    assert result.score == pytest.approx(0.58) and result.passed is None
    d = result.details
    assert d['total_score'] == 58
    assert d['score_analysis'] == 'The agent failed to read logs.\nLogical Flow: 12/25\nConsistency: 15/25'
    assert d['missing_tools_analysis'].startswith('1. kubectl-logs')
    assert d['prompt_hash'] == PROMPT_HASH and d['current_prompt_used'] is True
    # turn 1: rubric first, then the session (alert and conversation) inside the fence, then the score-line rule
    first_prompt = _last_user(script.seen[0])
    assert first_prompt.index('THE FOUR CATEGORIES') < first_prompt.index(FENCE_START) < first_prompt.index(FENCE_END)
    assert transcript.fenced() in first_prompt
    alert_at = first_prompt.index('"alert_type": "PodCrashLooping"')
    assert first_prompt.index(FENCE_START) < alert_at < first_prompt.index(FENCE_END)
    assert first_prompt.count('"alert_type": "PodCrashLooping"') == 1  # no copy outside the fence
    assert first_prompt.rstrip().endswith('ONLY the total score as an integer (0-100).')
    # turn 2 carries turn 1's messages: the prompt and the model's own analysis
    second = script.seen[1]
    texts = [p.content for m in second for p in m.parts if isinstance(p, TextPart | UserPromptPart)]
    assert first_prompt in texts
    assert any(isinstance(t, str) and t.endswith('\n58') for t in texts)
    assert _last_user(second) == FOLLOWUP_MISSING_TOOLS_PROMPT
    assert result.requests == 2


async def test_missing_score_is_reminded_and_best_analysis_kept() -> None:
    record = tarsy_record()
    script = Script(['A long analysis without a score line. ' * 5, 'Short.\n130', 'Better analysis.\n64'])
    result = await InvestigationJudge().judge(record, render_transcript(record), script.model())
    assert result.status == 'ok'
    assert result.details['total_score'] == 64 and result.details['score_attempts'] == 3
    reminders = [_last_user(s) for s in script.seen[1:3]]
    assert 'did not end with a line containing only the total score' in reminders[0]
    assert '(130) is outside 0-100' in reminders[1]


async def test_no_valid_score_after_three_tries_is_an_error_with_the_raw_response() -> None:
    record = tarsy_record()
    long_one = 'The most detailed analysis of all.\nSynthesis Quality: 14/25'
    script = Script(['No score.', long_one, 'Still none.'])
    result = await InvestigationJudge().judge(record, render_transcript(record), script.model())
    assert result.status == 'error' and result.score is None
    assert 'after 3 attempt(s)' in (result.error or '')
    assert result.raw_output == long_one
    assert len(script.seen) == 3  # no second turn after a failed first one


def test_prompt_hash_is_sha256_of_both_prompts_and_changes_with_either(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hashlib.sha256((SCORE_PROMPT + FOLLOWUP_MISSING_TOOLS_PROMPT).encode()).hexdigest() == PROMPT_HASH
    assert InvestigationJudge().criteria_hash() == PROMPT_HASH
    changed_score = hashlib.sha256((SCORE_PROMPT + ' ' + FOLLOWUP_MISSING_TOOLS_PROMPT).encode()).hexdigest()
    changed_followup = hashlib.sha256((SCORE_PROMPT + FOLLOWUP_MISSING_TOOLS_PROMPT + ' ').encode()).hexdigest()
    assert len({PROMPT_HASH, changed_score, changed_followup}) == 3
    assert is_current_prompt(PROMPT_HASH) and not is_current_prompt(changed_score)


def test_rubric_covers_the_seed_criteria() -> None:
    for needle in (
        'Logical flow',
        'Consistency',
        'Tool relevance',
        'Synthesis quality',
        '25',
        'at most 60',
        'at most 55',
        '55-75',
    ):
        assert needle in SCORE_PROMPT
    for placeholder in ('{{SESSION_CONVERSATION}}', '{{OUTPUT_SCHEMA}}'):
        assert SCORE_PROMPT.count(placeholder) == 1
    # the alert is the session's ALERT line, inside the fence: no placeholder of its own outside it
    assert '{{ALERT_DATA}}' not in SCORE_PROMPT and 'ALERT line' in SCORE_PROMPT
    assert 'No critical missing tools identified.' in FOLLOWUP_MISSING_TOOLS_PROMPT


def test_only_applies_to_alert_records() -> None:
    from tests.helpers import openai_record

    assert InvestigationJudge().applies_to(tarsy_record()) is None
    assert InvestigationJudge().applies_to(openai_record()) is not None


# --- structured variant ----------------------------------------------------------------------------


async def test_structured_variant_returns_typed_output() -> None:
    answer = {
        'total_score': 61,
        'score_breakdown': {'logical_flow': 14, 'consistency': 16, 'tool_relevance': 12, 'synthesis_quality': 19},
        'score_reasoning': 'However, the agent never read the logs.',
        'missing_tools': [{'tool_name': 'kubectl-logs', 'rationale': 'direct evidence of the crash'}],
        'alternative_approaches': [
            {
                'name': 'Logs first',
                'description': 'Read logs before concluding.',
                'steps': ['kubectl-logs api-7f9', 'kubectl-describe-pod'],
            }
        ],
    }
    calls: list[str] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(_last_user(messages))
        return ModelResponse(parts=[TextPart('not json' if len(calls) == 1 else json.dumps(answer))])

    model = JudgeModel(FunctionModel(fn, model_name='s'), 'function:s')
    record = tarsy_record()
    result = await StructuredInvestigationJudge().judge(record, render_transcript(record), model)
    assert result.status == 'ok', result.error
    assert result.score == pytest.approx(0.61)
    d = result.details
    assert d['missing_tools'][0]['tool_name'] == 'kubectl-logs'
    assert d['alternative_approaches'][0]['steps'][0] == 'kubectl-logs api-7f9'
    assert d['score_breakdown']['tool_relevance'] == 12
    assert d['prompt_hash'] == investigation_prompts.STRUCTURED_PROMPT_HASH != PROMPT_HASH
    assert 'ALTERNATIVE APPROACHES' in calls[0] and '"alternative_approaches"' in calls[0]


async def test_structured_variant_error_keeps_raw_output() -> None:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart('{"total_score": 500}')])

    model = JudgeModel(FunctionModel(fn, model_name='s'), 'function:s')
    record = tarsy_record()
    result = await StructuredInvestigationJudge(output_retries=1).judge(record, render_transcript(record), model)
    assert result.status == 'error' and result.raw_output == '{"total_score": 500}'


# --- the embedded model: decoding constrained to a schema ------------------------------------------


def embedded_model(fn: Any) -> JudgeModel:
    return JudgeModel(FunctionModel(fn, model_name='embedded'), 'embedded:scripted', json_schema_constrained=True, embedded=True)


class ConstrainedScript:
    """Answers like llama.cpp under `response_format`: JSON only; records the schema each call was given."""

    def __init__(self, answers: list[dict[str, Any] | str], missing: dict[str, Any] | None = None) -> None:
        self.answers = list(answers)
        self.missing = missing if missing is not None else {'missing_tools': [{'tool_name': 'kubectl-logs', 'rationale': 'OOM'}]}
        self.schemas: list[dict[str, Any]] = []
        self.prompts: list[str] = []
        self.systems: list[str | None] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        extra = cast(dict[str, Any], (info.model_settings or {}).get('extra_body') or {})
        self.schemas.append(extra['response_format']['schema'])
        self.prompts.append(_last_user(messages))
        self.systems.append(info.instructions)
        if self.prompts[-1].startswith(FOLLOWUP_MISSING_TOOLS_PROMPT):
            return ModelResponse(parts=[TextPart(json.dumps(self.missing))])
        answer = self.answers.pop(0)
        return ModelResponse(parts=[TextPart(answer if isinstance(answer, str) else json.dumps(answer))])


def scores(lf: int, c: int, tr: int, sq: int, analysis: str = 'The agent never read the logs. ' * 8) -> dict[str, Any]:
    return {'analysis': analysis, 'logical_flow': lf, 'consistency': c, 'tool_relevance': tr, 'synthesis_quality': sq}


async def test_embedded_model_scores_under_a_schema_and_is_marked_smoke() -> None:
    record = tarsy_record()
    script = ConstrainedScript([scores(12, 15, 10, 14)])
    result = await InvestigationJudge().judge(record, render_transcript(record), embedded_model(script))
    assert result.status == 'ok', result.error
    d = result.details
    assert d['total_score'] == 51 and result.score == pytest.approx(0.51)
    # rendered into the freeform result: analysis, breakdown, total parsed from the last line as always
    assert d['score_analysis'].endswith(
        'Logical Flow: 12/25\nConsistency: 15/25\nTool Relevance: 10/25\nSynthesis Quality: 14/25'
    )
    assert d['missing_tools_analysis'] == '1. kubectl-logs: OOM'
    assert d['smoke'] is True and any('smoke' in w for w in result.warnings)
    # turn 1 constrained to the score schema, turn 2 to the missing-tools schema
    # the embedded model's answers are bounded short (`smoke_schema`): the score schema, smoke-sized
    assert script.schemas[0] == smoke_schema(constrained_score_schema())
    assert script.schemas[0]['properties']['logical_flow']['enum'] == list(range(26))
    assert 'missing_tools' in script.schemas[1]['properties']
    assert '"logical_flow"' in script.prompts[0] and 'ONLY the total score' not in script.prompts[0]
    assert script.systems[0] == INVESTIGATION_SYSTEM_PROMPT


async def test_embedded_out_of_range_category_is_not_clamped_but_reminded() -> None:
    record = tarsy_record()
    script = ConstrainedScript([scores(30, 25, 25, 25), '{"analysis": "x"', scores(20, 20, 20, 20)])
    result = await InvestigationJudge().judge(record, render_transcript(record), embedded_model(script))
    assert result.status == 'ok' and result.details['total_score'] == 80 and result.details['score_attempts'] == 3
    assert '"logical_flow" must be an integer from 0 to 25, got 30' in script.prompts[1]
    assert 'not valid JSON' in script.prompts[2]


async def test_embedded_nonsense_never_passes_silently() -> None:
    record = tarsy_record()
    script = ConstrainedScript([scores(25, 25, 25, 25, analysis='')], missing={'missing_tools': []})
    result = await InvestigationJudge().judge(record, render_transcript(record), embedded_model(script))
    assert result.status == 'ok' and result.details['total_score'] == 100
    assert result.details['smoke'] is True
    assert any('0 word(s)' in w for w in result.warnings)
    assert result.details['missing_tools_analysis'] == 'No critical missing tools identified.'


async def test_embedded_scoring_that_never_fits_is_an_error_with_raw_output() -> None:
    record = tarsy_record()
    script = ConstrainedScript(['{}', '[]', 'null'])
    result = await InvestigationJudge().judge(record, render_transcript(record), embedded_model(script))
    assert result.status == 'error' and 'after 3 attempt(s)' in (result.error or '')


async def test_hosted_model_is_not_constrained_nor_smoke() -> None:
    record = tarsy_record()
    seen: list[Any] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((info.model_settings or {}).get('extra_body'))
        return ModelResponse(parts=[TextPart('Analysis.\n55' if len(seen) == 1 else 'No critical missing tools identified.')])

    result = await InvestigationJudge().judge(record, render_transcript(record), JudgeModel(FunctionModel(fn), 'f'))
    assert seen == [None, None]
    assert result.details['smoke'] is False and result.warnings == []


async def test_structured_variant_on_the_embedded_model_is_smoke_and_bounded() -> None:
    answer = {
        'total_score': 95,
        'score_breakdown': {'logical_flow': 25},
        'score_reasoning': 'ok',
        'missing_tools': [],
        'alternative_approaches': [],
    }
    schemas: list[Any] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        schemas.append(cast(dict[str, Any], (info.model_settings or {})['extra_body'])['response_format']['schema'])
        return ModelResponse(parts=[TextPart(json.dumps(answer))])

    record = tarsy_record()
    result = await StructuredInvestigationJudge().judge(record, render_transcript(record), embedded_model(fn))
    assert result.status == 'ok' and result.details['smoke'] is True and result.warnings
    assert '"maxLength"' in json.dumps(schemas[0]) and '"maxItems"' in json.dumps(schemas[0])


# --- typed result and phases -----------------------------------------------------------------------


async def test_phase_callback_reports_the_phases_in_order_for_a_scripted_scoring() -> None:
    """The scorer says which phase it is in; each model call happens inside the phase reported before it."""
    record = tarsy_record()
    phases: list[str] = []
    during: list[tuple[str, str]] = []  # (phase reported so far, the turn the model was asked)
    script = Script(
        ['no score line', 'Logical Flow: 12/25\nConsistency: 15/25\nTool Relevance: 9/25\nSynthesis Quality: 10/25\n46']
    )

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = 'missing_tools' if _last_user(messages) == FOLLOWUP_MISSING_TOOLS_PROMPT else 'scoring'
        during.append((phases[-1] if phases else '', asked))
        return script(messages, info)

    model = JudgeModel(FunctionModel(fn, model_name='scripted'), 'function:scripted')
    result = await InvestigationJudge().score(record, render_transcript(record), model, on_phase=phases.append)
    assert phases == list(investigation_answers.SCORING_PHASES) == ['scoring', 'missing_tools']
    assert during == [('scoring', 'scoring'), ('scoring', 'scoring'), ('missing_tools', 'missing_tools')]
    assert result.status == 'ok' and result.score_attempts == 2


async def test_phase_callback_of_a_failed_scoring_stops_at_scoring() -> None:
    record = tarsy_record()
    phases: list[str] = []
    result = await InvestigationJudge().score(
        record, render_transcript(record), Script(['x', 'y', 'z']).model(), on_phase=phases.append
    )
    assert result.status == 'error' and phases == ['scoring']


async def test_freeform_result_is_typed_and_converts_to_the_judge_result() -> None:
    record = tarsy_record()
    transcript = render_transcript(record)
    answer = 'Weak.\n**Logical Flow: 12/25**\n- Consistency: 14 / 25\nTool Relevance: 10/25\nSynthesis Quality: 9/25\n45'
    missing = (
        '1. read-file: shows whether it ran\n2) **kubectl-logs** - the crash\n- `netstat`: sockets\n'
        '1. read-file: again\nprose: no'
    )
    result = await InvestigationJudge().score(record, transcript, Script([answer], missing=missing).model())
    assert isinstance(result, investigation_answers.InvestigationResult) and result.variant == 'freeform'
    assert result.total_score == 45 and result.smoke is False and result.prompt_hash == PROMPT_HASH
    assert result.breakdown.as_dict() == {'logical_flow': 12, 'consistency': 14, 'tool_relevance': 10, 'synthesis_quality': 9}
    assert [(t.tool_name, t.rationale) for t in result.missing_tools] == [
        ('read-file', 'shows whether it ran'),
        ('kubectl-logs', 'the crash'),
        ('netstat', 'sockets'),
    ]
    assert result.raw_output == answer and result.missing_tools_analysis == missing
    judged = InvestigationJudge().to_judge_result(result)
    assert judged.status == 'ok' and judged.score == pytest.approx(0.45) and judged.judge == 'investigation_score'
    assert judged.details['total_score'] == 45 and judged.details['missing_tools_analysis'] == missing
    assert judged.criteria_hash == PROMPT_HASH


async def test_structured_result_is_typed_and_reports_both_phases() -> None:
    answer = {
        'total_score': 61,
        'score_breakdown': {'logical_flow': 14, 'consistency': 16, 'tool_relevance': 12, 'synthesis_quality': 19, 'x': 3},
        'score_reasoning': 'However, the agent never read the logs.',
        'missing_tools': [{'tool_name': 'kubectl-logs', 'rationale': 'direct evidence'}],
        'alternative_approaches': [],
    }
    model = JudgeModel(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart(json.dumps(answer))]), model_name='s'), 'f:s')
    record = tarsy_record()
    phases: list[str] = []
    result = await StructuredInvestigationJudge().score(record, render_transcript(record), model, on_phase=phases.append)
    assert phases == ['scoring', 'missing_tools']
    assert result.variant == 'structured' and result.total_score == 61
    assert result.breakdown.as_dict() == {'logical_flow': 14, 'consistency': 16, 'tool_relevance': 12, 'synthesis_quality': 19}
    assert [t.tool_name for t in result.missing_tools] == ['kubectl-logs']
    assert result.missing_tools_analysis == '1. kubectl-logs: direct evidence'


def test_every_rubric_category_has_a_breakdown_field_and_a_schema_key() -> None:
    """The categories are defined once (`CATEGORIES`); what cannot be derived from it is held equal here."""
    keys = [key for key, _ in investigation_answers.CATEGORIES]
    assert list(investigation_answers.ScoreBreakdown.model_fields) == keys
    assert [k for k in investigation_answers.constrained_score_schema()['properties'] if k != 'analysis'] == keys
    lines = '\n'.join(f'{label}: {n}/25' for n, (_, label) in enumerate(investigation_answers.CATEGORIES, 1))
    assert investigation_answers.parse_breakdown(lines).as_dict() == {key: n for n, key in enumerate(keys, 1)}


def test_the_investigation_judges_old_names_still_import_with_a_deprecation_warning() -> None:
    import sensei_eval.evaluators as evaluators

    for old, new in (
        ('InvestigationScorer', 'InvestigationJudge'),
        ('StructuredInvestigationScorer', 'StructuredInvestigationJudge'),
    ):
        for module in (evaluators, investigation):
            with pytest.warns(DeprecationWarning, match=f'{old} is now {new}'):
                assert getattr(module, old) is getattr(investigation, new)
    with pytest.raises(AttributeError):
        evaluators.NoSuchJudge  # noqa: B018
