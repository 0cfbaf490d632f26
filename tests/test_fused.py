"""Fused judging: one model call for several failure modes, with the same per-mode verdicts as single judges."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sensei_eval.core.reports import build_report
from sensei_eval.core.transcript import FENCE_END, render_transcript
from sensei_eval.evaluators.fused import FUSION_MARKER, FusedJudge, FuseSpecError, parse_fuse_spec
from sensei_eval.evaluators.output import Completeness, Hallucination
from sensei_eval.evaluators.registry import fuse_judges, make_judges
from sensei_eval.evaluators.tool_usage import ToolSelection
from sensei_eval.judging import run as judging_run
from sensei_eval.models import retry

from .helpers import ScriptedJudge, about, openai_record, user_prompt

MVP = ('tool_selection', 'hallucination', 'completeness')


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, 'BASE_BACKOFF_S', 0.0)


def _transcript_of(prompt: str) -> str:
    return prompt[: prompt.index(FENCE_END)]


def _verdict(mode: str, transcript: str) -> dict[str, Any]:
    """What a scripted model finds for one mode on one transcript: the same whether asked alone or fused."""
    tag = about(transcript)
    if mode == 'hallucination':
        issue = {'steps': [5], 'hallucinated_claim': f'claim {tag}', 'what_tools_actually_said': 'nothing', 'severity': 'major'}
        return {'reasoning': f'The answer at [5] invents {tag}.', 'issues': [issue]}
    if mode == 'completeness':
        issue = {'steps': [2, 5], 'missed_aspects': [f'aspect {tag}'], 'reasoning': f'the answer skips {tag}'}
        return {'reasoning': f'Step [5] leaves out {tag}.', 'issues': [issue]}
    return {'reasoning': f'The tool at [3] fits the question ({tag}).', 'issues': []}


def _modes_asked(prompt: str) -> list[str]:
    fused = re.search(r'## Your task: judge \d+ kinds of failure: (.*)', prompt)
    if fused:
        return re.findall(r'`(\w+)`', fused.group(1))
    single = re.search(r'## Your task: judge `(\w+)`', prompt)
    assert single, prompt[-500:]
    return [single.group(1)]


def _answer(prompt: str, n: int) -> dict[str, Any]:
    transcript = _transcript_of(prompt)
    modes = _modes_asked(prompt)
    if len(modes) == 1 and '## Your task: judge `' in prompt:
        return _verdict(modes[0], transcript)
    return {mode: _verdict(mode, transcript) for mode in modes}


async def test_fused_verdicts_make_the_same_report_as_single_judges() -> None:
    records = [openai_record('r1'), openai_record('r2', answer='Use `Depends()` with a yield.')]
    single, fused = ScriptedJudge(_answer, split_fused=False), ScriptedJudge(_answer, split_fused=False)
    judges = make_judges(['mvp'])
    [fused_judge] = make_judges(['mvp'], fuse=['all'])
    assert isinstance(fused_judge, FusedJudge) and fused_judge.member_names == MVP
    for record in records:
        transcript = render_transcript(record)
        alone = [await j.judge(record, transcript, single.model()) for j in judges]
        together = await fused_judge.judge_members(record, transcript, fused.model())
        assert [r.judge for r in together] == list(MVP)
        a = build_report(record, alone, run_id='a')
        b = build_report(record, together, run_id='b')
        for mode in MVP:
            assert a.issues_of(mode) == b.issues_of(mode)
            assert a.judges[mode].score == b.judges[mode].score
            assert a.judges[mode].passed == b.judges[mode].passed
            assert a.judges[mode].reasoning == b.judges[mode].reasoning
            assert b.judges[mode].status == 'ok'
        assert len(b.issues_of('hallucination')) == 1 and b.judges['hallucination'].score == 0.5
        assert b.judges['tool_selection'].passed is True
        assert a.overall_score == b.overall_score
    # one call per record instead of three, and the transcript sent once per call
    assert len(fused.calls) == 2 and len(single.calls) == 6


async def test_member_criteria_hash_is_its_own_plus_the_fusion_marker() -> None:
    record = openai_record()
    fused = FusedJudge(members=[Hallucination(), Completeness()])
    results = await fused.judge_members(record, render_transcript(record), ScriptedJudge(_answer, split_fused=False).model())
    suffix = f'+{FUSION_MARKER}:{fused.criteria_hash()[:12]}'
    own = [Hallucination().criteria_hash(), Completeness().criteria_hash()]
    assert [r.criteria_hash for r in results] == [h + suffix for h in own]
    # a different combination of rubrics is a different fused prompt
    other = FusedJudge(members=[Hallucination(), ToolSelection()])
    assert other.member_criteria_hash(Hallucination()) != results[0].criteria_hash
    # the call's usage is split over the members so run totals stay right, the call's own totals kept
    call = results[0].details['fused']
    assert sum(r.input_tokens for r in results) == call['input_tokens'] > 0
    assert call['members'] == ['hallucination', 'completeness']


async def test_an_invalid_member_part_is_retried_alone() -> None:
    def answer(prompt: str, n: int) -> dict[str, Any]:
        out = _answer(prompt, n)
        if len(_modes_asked(prompt)) > 1:
            out['hallucination']['issues'][0]['severity'] = 'enormous'  # not in the schema's enum
        return out

    scripted = ScriptedJudge(answer, split_fused=False)
    record = openai_record()
    fused = FusedJudge(members=[ToolSelection(), Hallucination(), Completeness()])
    results = await fused.judge_members(record, render_transcript(record), scripted.model())
    assert len(scripted.calls) == 2  # the fused call, then hallucination alone
    assert _modes_asked(_first_prompt(scripted.calls[1])) == ['hallucination']
    by = {r.judge: r for r in results}
    assert by['hallucination'].status == 'ok'
    assert by['hallucination'].criteria_hash == Hallucination().criteria_hash()  # judged alone: its own hash
    assert 'severity' in by['hallucination'].details['fused_fallback']
    assert by['hallucination'].issues[0]['severity'] == 'major'
    assert by['completeness'].criteria_hash.endswith(fused.criteria_hash()[:12])
    assert 'fused_fallback' not in by['completeness'].details


async def test_a_missing_member_part_is_retried_alone() -> None:
    def answer(prompt: str, n: int) -> dict[str, Any]:
        out = _answer(prompt, n)
        if len(_modes_asked(prompt)) > 1:
            del out['completeness']
        return out

    scripted = ScriptedJudge(answer, split_fused=False)
    record = openai_record()
    results = await FusedJudge(members=[Hallucination(), Completeness()]).judge_members(
        record, render_transcript(record), scripted.model()
    )
    assert [r.status for r in results] == ['ok', 'ok']
    assert 'missing' in results[1].details['fused_fallback']
    assert len(scripted.calls) == 2


async def test_an_erroring_fused_call_gives_an_error_per_member() -> None:
    def down(prompt: str, n: int) -> dict[str, Any]:
        raise RuntimeError('the judge server fell over')

    record = openai_record()
    fused = FusedJudge(members=[ToolSelection(), Hallucination(), Completeness()])
    results = await fused.judge_members(record, render_transcript(record), ScriptedJudge(down, split_fused=False).model())
    assert [r.judge for r in results] == list(MVP)
    assert all(r.status == 'error' and 'fell over' in (r.error or '') for r in results)
    assert all(r.score is None and r.passed is None for r in results)


async def test_a_fused_answer_that_is_never_json_is_an_error_per_member() -> None:
    scripted = ScriptedJudge(lambda p, n: 'I think it is fine.', split_fused=False)
    record = openai_record()
    fused = FusedJudge(members=[Hallucination(), Completeness()], output_retries=1)
    results = await fused.judge_members(record, render_transcript(record), scripted.model())
    assert [r.status for r in results] == ['error', 'error']
    assert all('invalid output after 2 attempts' in (r.error or '') for r in results)
    assert results[0].raw_output == 'I think it is fine.'
    assert len(scripted.calls) == 2


async def test_inconclusive_detection_stays_per_member() -> None:
    echo = 'Two to five sentences weighing the evidence, citing [step] numbers.'  # the schema's own text

    def answer(prompt: str, n: int) -> dict[str, Any]:
        out = _answer(prompt, n)
        out['completeness'] = {'reasoning': echo, 'issues': []}
        return out

    record = openai_record()
    results = await FusedJudge(members=[Hallucination(), Completeness()]).judge_members(
        record, render_transcript(record), ScriptedJudge(answer, split_fused=False).model()
    )
    assert [r.status for r in results] == ['ok', 'inconclusive']
    assert results[1].score is None and results[1].passed is None
    assert results[1].raw_output and echo in results[1].raw_output


def test_the_fused_prompt_holds_every_rubric_and_the_transcript_once() -> None:
    record = openai_record()
    transcript = render_transcript(record)
    fused = FusedJudge(members=[ToolSelection(), Hallucination()])
    prompt = fused.build_prompt(transcript)
    assert prompt.startswith(transcript.fenced())  # the same prefix as every single judge's prompt
    assert prompt.count(transcript.text) == 1
    for member in fused.members:
        assert member.rubric.strip() in prompt and member.question in prompt
    schema = fused.prompt_schema()
    assert schema['required'] == ['tool_selection', 'hallucination']
    assert schema['additionalProperties'] is False


def test_fuse_spec_groups_by_category_name_or_all() -> None:
    assert parse_fuse_spec(['output,methodology', 'hallucination+completeness']) == [
        ['output'],
        ['methodology'],
        ['hallucination', 'completeness'],
    ]
    judges = make_judges(['mvp', 'checks'])
    fused = fuse_judges(judges, ['output'])  # hallucination and completeness are output judges
    names = [j.name for j in fused]
    assert names[0] == 'tool_selection'
    assert names[1] == 'fused:hallucination+completeness'
    assert names[2:] == [j.name for j in judges[3:]]  # the checks are untouched
    assert fuse_judges(judges, ['all'])[0].name == 'fused:tool_selection+hallucination+completeness'
    # a group left with one selected judge stays that judge; a judge goes to the first group naming it
    assert [j.name for j in fuse_judges(make_judges(['mvp']), ['tool_usage', 'output'])] == [
        'tool_selection',
        'fused:hallucination+completeness',
    ]
    with pytest.raises(FuseSpecError, match='unknown judge or group'):
        fuse_judges(judges, ['outptu'])
    with pytest.raises(FuseSpecError, match='none of the selected LLM judges'):
        fuse_judges(judges, ['methodology'])


def test_restricting_a_fused_judge_to_the_members_that_apply() -> None:
    fused = FusedJudge(members=[ToolSelection(), Hallucination(), Completeness()])
    narrower = fused.restricted_to({'hallucination', 'completeness'})
    assert isinstance(narrower, FusedJudge) and narrower.member_names == ('hallucination', 'completeness')
    assert isinstance(fused.restricted_to({'completeness'}), Completeness)
    assert fused.restricted_to(set()) is None
    with pytest.raises(ValueError, match='at least two'):
        FusedJudge(members=[Hallucination()])


def _first_prompt(messages: list[Any]) -> str:
    from .helpers import user_prompt

    return user_prompt(messages)


def test_judge_cli_fuse_option_makes_one_call_per_record(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from typer.testing import CliRunner

    from sensei_eval.cli import judge as judge_cli

    scripted = ScriptedJudge(_answer, split_fused=False)
    monkeypatch.setattr(judging_run, 'resolve_model', lambda *a, **k: scripted.model())
    data = tmp_path / 'd.jsonl'
    data.write_text(
        openai_record('f1').model_dump_json() + '\n' + openai_record('f2', answer='Use a yield.').model_dump_json() + '\n'
    )
    args = ['--dataset', str(data), '--judges', 'mvp', '--out', str(tmp_path / 'o'), '--no-cache']
    result = CliRunner().invoke(judge_cli.app, [*args, '--run-id', 'fused', '--fuse', 'all'])
    assert result.exit_code == 0, result.output
    assert len(scripted.calls) == 2  # one call per record for the three judges
    report = json.loads((tmp_path / 'o' / 'fused' / 'records' / 'f1.json').read_text())
    assert set(report['judges']) == set(MVP)
    assert all(f'+{FUSION_MARKER}:' in r['criteria_hash'] for r in report['judges'].values())
    assert report['judges']['hallucination']['score'] == 0.5
    bad = CliRunner().invoke(judge_cli.app, [*args, '--run-id', 'bad', '--fuse', 'nonsense'])
    assert bad.exit_code == 2 and 'nonsense' in bad.output


async def test_a_fused_prompt_too_big_for_the_context_falls_back_to_single_judges() -> None:
    """Fifteen rubrics take more than the embedded model's 8k context: each mode is judged alone instead."""
    pytest.importorskip('llama_cpp')
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.settings import ModelSettings

    from sensei_eval.models.judge_model import EMBEDDED_TRANSCRIPT_BUDGET, JudgeModel

    scripted = ScriptedJudge(_answer, split_fused=False)
    model = JudgeModel(
        FunctionModel(scripted, model_name='scripted'),
        'embedded:SmolLM2-135M-Instruct',
        settings=ModelSettings(temperature=0.0, max_tokens=700),
        embedded=True,
    )
    model.transcript_budget = EMBEDDED_TRANSCRIPT_BUDGET  # as resolve_model sets it
    [fused] = make_judges(['all'], fuse=['all'])[:1]
    assert isinstance(fused, FusedJudge) and len(fused.members) >= 15
    record = openai_record()
    results = await fused.judge_members(record, render_transcript(record), model)
    assert [r.judge for r in results] == list(fused.member_names)
    assert len(scripted.calls) == len(fused.members)  # no fused call was sent
    assert all(_modes_asked(_first_prompt(c)) == [r.judge] for c, r in zip(scripted.calls, results, strict=True))
    assert all('does not fit the context' in r.details['fused_fallback'] for r in results)
    assert all(FUSION_MARKER not in r.criteria_hash for r in results)
    assert {r.status for r in results} == {'ok'}, [r.error for r in results if r.status != 'ok']


async def test_the_fused_prompt_is_built_and_indexed_once_per_call_whatever_the_members(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per member, a fused call does constant work: the fused prompt (which grows with the members) is
    built a fixed number of times per call and indexed for the copy check once, not once per member."""
    from sensei_eval.evaluators import inconclusive

    built = 0
    real = FusedJudge.task_prompt

    def counting(self: FusedJudge) -> str:
        nonlocal built
        built += 1
        return real(self)

    monkeypatch.setattr(FusedJudge, 'task_prompt', counting)
    record = openai_record('r1')
    transcript = render_transcript(record)
    per_call = {}
    for spec in (['mvp'], ['all']):
        [fused_judge] = [j for j in make_judges(spec, fuse=['all']) if isinstance(j, FusedJudge)]
        inconclusive._prompt_index.cache_clear()
        built = 0
        results = await fused_judge.judge_members(record, transcript, ScriptedJudge(_answer, split_fused=False).model())
        assert len(results) == len(fused_judge.members) and {r.status for r in results} == {'ok'}
        # the fused prompt and the schema's own texts (the paraphrase rule), each indexed once per call
        assert inconclusive._prompt_index.cache_info().misses == 2
        per_call[len(fused_judge.members)] = built
    assert len(per_call) == 2 and len(set(per_call.values())) == 1, per_call


async def test_a_task_first_model_gets_the_fused_task_before_the_transcript_and_the_same_verdicts() -> None:
    """The embedded model's layout: consecutive records share system prompt + task as a cached prefix."""
    from sensei_eval.core.transcript import FENCE_START
    from sensei_eval.evaluators.base import TASK_FIRST_CLOSING

    def answer(prompt: str, n: int) -> dict[str, Any]:
        start, end = prompt.index(FENCE_START), prompt.index(FENCE_END)
        assert '## Your task: judge 3 kinds of failure' in prompt[:start]  # the task, then the transcript
        assert prompt.endswith(TASK_FIRST_CLOSING)
        return {mode: _verdict(mode, prompt[start:end]) for mode in _modes_asked(prompt)}

    [fused_judge] = make_judges(['mvp'], fuse=['all'])
    scripted = ScriptedJudge(answer, split_fused=False)
    model = scripted.model()
    model.task_first = True
    prompts = []
    for record in (openai_record('r1'), openai_record('r2', answer='Use `Depends()` with a yield.')):
        results = await fused_judge.judge_members(record, render_transcript(record), model)
        assert [r.status for r in results] == ['ok', 'ok', 'ok']
        assert len(results[1].issues) == 1  # hallucination found, as in the transcript-first layout
        prompts.append(user_prompt(scripted.calls[-1]))
    # the two records' prompts share everything up to their transcripts
    shared = prompts[0][: prompts[0].index(FENCE_START)]
    assert prompts[1].startswith(shared) and len(shared) > 1000


def test_fuse_none_fuses_nothing() -> None:
    judges = make_judges(['mvp'])
    assert fuse_judges(judges, ['none']) == judges
