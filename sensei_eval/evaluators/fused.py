"""Fused judging: one model call judges several failure modes of one transcript.

Each failure-mode judge sends the whole transcript for one rubric; fifteen judges send it fifteen times,
and a provider without prompt caching bills every copy. A `FusedJudge` sends it once, followed by every
member's question and rubric and one combined JSON schema: an object with one field per member, each
field the member's own verdict (`reasoning` + its own issue model). Opt-in (`--fuse`): a model judging
several rubrics at once may judge each less carefully, so measure it before relying on it (docs/fused.md).

What stays per failure mode:

* its issues, score, status and inconclusive detection (the same rules, against the fused prompt);
* its criteria hash, as `<member's own criteria hash>+fused:<first 12 hex of the fused prompt's hash>`:
  the member's own criteria are recognisable, and the suffix says the verdict came from a fused call and
  which combination of rubrics it shared the call with;
* a member whose part of the answer is missing or does not match its schema is judged again alone, by
  its normal single judge (that result carries the member's plain criteria hash and says why in
  `details.fused_fallback`); so is every member when the fused prompt cannot fit the model's context
  (fifteen rubrics take more than the embedded model's 8k tokens);
* a fused call that fails (the model unreachable, no JSON object after the retries, a crash) gives each
  member an error result; it never raises.

The token usage of the call is split evenly over the members' results so run totals stay right; the
call's own totals are in each member's `details.fused`.

Runner contract: a fused judge has `members` (non-empty) and
`judge_members(record, transcript, model) -> list[JudgeResult]`, one result per member, in order.
`registry.fuse_judges(judges, spec)` replaces chosen judges of a list by fused judges (`--fuse output,methodology`,
`--fuse hallucination+completeness`, `--fuse all`).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pydantic import ValidationError, create_model
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model

from sensei_eval.core.errors import ConfigError, describe_error
from sensei_eval.core.issues import Issue, Verdict
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.transcript import Transcript
from sensei_eval.core.verdicts import passes
from sensei_eval.evaluators.base import (
    JUDGE_SYSTEM_PROMPT,
    FailureModeJudge,
    FieldValues,
    Judge,
    _check_steps,
    _last_text,
    _limit,
    _strip,
    call_model,
    criteria_hash_of,
    default_judge_model,
    extract_json,
    fill_template,
    join_prompt,
    judge_agent,
    sent_text,
    short_errors,
    verdict_problems,
    with_values,
)
from sensei_eval.evaluators.inconclusive import why_inconclusive
from sensei_eval.models.fitting import fit_transcript
from sensei_eval.models.judge_model import JudgeModel, resolve_model

__all__ = ('FUSION_MARKER', 'FuseSpecError', 'FusedJudge', 'parse_fuse_spec')

FUSION_MARKER = 'fused'

_TASK_TEMPLATE = """\
## Your task: judge {{COUNT}} kinds of failure: {{NAMES}}

Judge each kind on its own, as if it were the only question: put a problem only under the kind it \
belongs to. A run without problems of one kind gets "issues": [] for that kind.

{{SECTIONS}}

## How to answer
Reply with one JSON object matching this JSON schema (no prose around it), with one field per kind of \
failure above:
{{SCHEMA}}

In each field put the reasoning first (two to five sentences citing [step] numbers), then the issues. \
Each issue lists in "steps" the step numbers it rests on and gives its "severity"."""

_SECTION_TEMPLATE = """\
### `{{NAME}}`
Question: {{QUESTION}}

{{RUBRIC}}"""


class FuseSpecError(ConfigError):
    """A `--fuse` group that names nothing known, or none of the judges selected."""


@dataclass(repr=False)
class FusedJudge(Judge):
    """Several failure-mode judges answered by one model call (see the module docstring)."""

    members: Sequence[FailureModeJudge] = ()
    model: Model | str | None = None
    output_retries: int = 2
    _resolved: JudgeModel | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [m.name for m in self.members]
        if len(names) < 2:
            raise ConfigError(f'a fused judge needs at least two members, got {names}')
        if len(set(names)) != len(names):
            raise ConfigError(f'a fused judge lists a member twice: {names}')
        # an instance name: a judge's name is otherwise its class's
        object.__setattr__(self, 'name', f'{FUSION_MARKER}:{"+".join(names)}')

    @property
    def member_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.members)

    # -- prompt ----------------------------------------------------------------------------------------

    def task_prompt(self) -> str:
        """Everything after the transcript: each member's question and rubric, then the combined schema
        (built once per set of member texts)."""
        return _fused_task_prompt(
            tuple((m.name, m.question, m.full_rubric(), type(m).issue_model, m.field_values()) for m in self.members)
        )

    def build_prompt(self, transcript: Transcript, *, task_first: bool = False) -> str:
        return join_prompt(self.task_prompt(), transcript, task_first=task_first)

    def prompt_schema(self) -> dict[str, Any]:
        return _fused_schema(tuple((m.name, type(m).issue_model, m.field_values()) for m in self.members))

    def grammar_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = json.loads(json.dumps(self.prompt_schema()))
        _limit(schema)
        return schema

    def criteria_hash(self) -> str:
        return criteria_hash_of(self.task_prompt())

    def member_criteria_hash(self, member: FailureModeJudge) -> str:
        """A member's criteria hash in a fused verdict: its own, plus the fusion marker and the fused prompt."""
        return self.member_criteria_hashes([member])[0]

    def member_criteria_hashes(self, members: Sequence[FailureModeJudge]) -> list[str]:
        """`member_criteria_hash` of each of `members`, the fused prompt hashed once (not once per member:
        the prompt grows with the members, so per member it would be members² work)."""
        fused = self.criteria_hash()[:12]
        return [f'{m.criteria_hash()}+{FUSION_MARKER}:{fused}' for m in members]

    # -- which members run -----------------------------------------------------------------------------

    def applies_to(self, record: QueryRecord) -> str | None:
        reasons = [why for m in self.members if (why := m.applies_to(record)) is not None]
        return None if len(reasons) < len(self.members) else '; '.join(dict.fromkeys(reasons))

    def restricted_to(self, names: Collection[str]) -> Judge | None:
        """This judge over only the members named: fused (two or more), the single judge (one) or None."""
        kept = [m for m in self.members if m.name in names]
        if len(kept) >= 2:
            return FusedJudge(members=kept, model=self.model, output_retries=self.output_retries)
        return kept[0] if kept else None

    # -- running ---------------------------------------------------------------------------------------

    def resolve_judge_model(self) -> JudgeModel:
        """Resolved once per fused judge, like a single judge's (`FailureModeJudge.resolve_judge_model`)."""
        if self.model is None:
            return default_judge_model()
        if self._resolved is None:
            self._resolved = resolve_model(self.model)
        return self._resolved

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        raise NotImplementedError(f'{self.name} judges several failure modes: call judge_members()')

    async def judge_members(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> list[JudgeResult]:
        """One result per member, in order; errors are error results, never raised."""
        start = time.perf_counter()
        try:
            model = model or self.resolve_judge_model()
            return await self._judge_members(record, transcript, model, start)
        except Exception as e:  # a bug here must not sink the run, nor pass as a verdict
            name = model.name if isinstance(model, JudgeModel) else None
            return self._errors(name, None, start, [], f'fused judge crashed: {describe_error(e)}')

    async def _judge_members(self, record: QueryRecord, given: Transcript, model: JudgeModel, start: float) -> list[JudgeResult]:
        fit = fit_transcript(record, given, model, system=JUDGE_SYSTEM_PROMPT, task=self.task_prompt())
        if fit.limit is not None and fit.prompt_tokens > fit.limit:
            # the rubrics alone leave no room for the transcript (a small context): each mode alone
            why = f'the fused prompt ({fit.prompt_tokens:,} tokens) does not fit the context (limit {fit.limit:,})'
            return [await self._alone(member, record, given, model, why, None) for member in self.members]
        transcript = fit.transcript
        agent = self._agent(model)
        prompt = self.build_prompt(transcript, task_first=model.task_first)
        settings = model.settings_for(self.grammar_schema())
        done = await call_model(agent, prompt, settings, model, self.output_retries)
        if done.run is None:
            return self._errors(model.name, transcript, start, done.messages, done.error or 'no answer')
        run = done.run
        answer: dict[str, Any] = run.output
        usage = run.usage
        latency = time.perf_counter() - start
        call = {
            'judge': self.name,
            'members': list(self.member_names),
            'input_tokens': usage.input_tokens,
            'output_tokens': usage.output_tokens,
            'requests': usage.requests,
            'latency_s': round(latency, 3),
        }
        sent = sent_text(self.task_prompt())  # one object: its index is built once for all members
        hashes = self.member_criteria_hashes(self.members)
        results: list[JudgeResult] = []
        n = len(self.members)
        for k, member in enumerate(self.members):
            issue_model = type(member).issue_model
            verdict_model: type[Verdict[Any]] = Verdict[issue_model]  # type: ignore[valid-type]
            part = answer.get(member.name)
            try:
                verdict = verdict_model.model_validate(part)
                problems = verdict_problems(verdict, member.field_values())
            except ValidationError as e:
                problems = 'missing from the fused answer' if part is None else f'did not match its schema: {short_errors(e)}'
            else:
                problems = f'did not match its schema: {problems}' if problems else None
            if problems is not None:
                results.append(
                    await self._alone(member, record, given, model, f'its part of the fused answer was {problems}', call)
                )
                continue
            inconclusive = why_inconclusive(verdict.reasoning, verdict.issues, len(transcript.steps), sent, transcript.text)
            issues, warnings = _check_steps(list(verdict.issues), len(transcript.steps))
            results.append(
                self._member_result(
                    member,
                    hashes[k],
                    model=model.name,
                    status='inconclusive' if inconclusive else 'ok',
                    error=inconclusive,
                    raw_output=json.dumps(part, ensure_ascii=False)[:4000] if inconclusive else None,
                    reasoning=verdict.reasoning,
                    issues=[i.model_dump(mode='json') for i in issues],
                    score=None if inconclusive else member.score(issues),
                    passed=None if inconclusive else passes(issues),  # a minor finding does not fail (core.verdicts)
                    input_tokens=_share(usage.input_tokens, k, n),
                    output_tokens=_share(usage.output_tokens, k, n),
                    requests=_share(usage.requests, k, n),
                    latency_s=latency / n,
                    truncation=transcript.truncation,
                    warnings=warnings,
                    details={'fused': call, **fit.details()},
                )
            )
        return results

    async def _alone(
        self,
        member: FailureModeJudge,
        record: QueryRecord,
        transcript: Transcript,
        model: JudgeModel,
        why: str,
        call: dict[str, Any] | None,
    ) -> JudgeResult:
        """The member judged by its own single judge (its plain criteria hash), saying why."""
        result = await member.judge(record, transcript, model)
        result.details['fused_fallback'] = f'{member.name} judged alone: {why}'
        if call is not None:
            result.details['fused'] = call
        return result

    def _member_result(self, member: FailureModeJudge, criteria_hash: str | None = None, **kwargs: Any) -> JudgeResult:
        return JudgeResult(
            judge=member.name,
            failure_mode=member.failure_mode,
            category=member.category,
            criteria_hash=criteria_hash or self.member_criteria_hash(member),
            **kwargs,
        )

    def _errors(
        self, model: str | None, transcript: Transcript | None, start: float, messages: list[ModelMessage], error: str
    ) -> list[JudgeResult]:
        responses = [m for m in messages if isinstance(m, ModelResponse)]
        tokens_in = sum(r.usage.input_tokens for r in responses)
        tokens_out = sum(r.usage.output_tokens for r in responses)
        raw = _last_text(messages)
        latency = time.perf_counter() - start
        n = len(self.members)
        hashes = self.member_criteria_hashes(self.members)
        return [
            self._member_result(
                member,
                hashes[k],
                model=model,
                status='error',
                error=f'{self.name}: {error}',
                input_tokens=_share(tokens_in, k, n),
                output_tokens=_share(tokens_out, k, n),
                requests=_share(len(responses), k, n),
                latency_s=latency / n,
                truncation=transcript.truncation if transcript else None,
                raw_output=raw,
            )
            for k, member in enumerate(self.members)
        ]

    def _agent(self, model: JudgeModel) -> Agent[None, dict[str, Any]]:
        names = self.member_names

        def parse(text: str) -> dict[str, Any]:
            data = extract_json(text)
            if not isinstance(data, dict) or not any(name in data for name in names):
                raise ModelRetry(
                    f'Reply with one JSON object whose fields are {", ".join(names)}, each with "reasoning" and "issues".'
                )
            return data

        return judge_agent(model, ('fused', names), parse, output_retries=self.output_retries, name=self.name)


def _share(total: int, k: int, n: int) -> int:
    """Member k's even share of a total over n members (the first ones take the remainder)."""
    return total // n + (1 if k < total % n else 0)


@functools.lru_cache(maxsize=256)
def _fused_task_prompt(members: tuple[tuple[str, str, str, type[Issue], FieldValues], ...]) -> str:
    """The fused task prompt of members given as (name, question, rubric with conventions, issue model, field
    values): a pure function of those texts, built once per set rather than on every call."""
    sections = [
        fill_template(_SECTION_TEMPLATE, {'NAME': name, 'QUESTION': question, 'RUBRIC': rubric.strip()})
        for name, question, rubric, _, _ in members
    ]
    schema = _fused_schema(tuple((name, issue_model, values) for name, _, _, issue_model, values in members))
    return fill_template(
        _TASK_TEMPLATE,
        {
            'COUNT': str(len(members)),
            'NAMES': ', '.join(f'`{name}`' for name, _, _, _, _ in members),
            'SECTIONS': '\n\n'.join(sections),
            'SCHEMA': json.dumps(schema, separators=(',', ':')),
        },
    )


@cache
def _fused_schema(members: tuple[tuple[str, type[Issue], FieldValues], ...]) -> dict[str, Any]:
    fields: dict[str, Any] = {name: (Verdict[issue_model], ...) for name, issue_model, _ in members}  # type: ignore[valid-type]
    combined = create_model('FusedVerdict', **fields)
    schema: dict[str, Any] = _strip(combined.model_json_schema())
    schema['additionalProperties'] = False
    for _, issue_model, values in members:  # each member's open fields, in its own issue model's definition
        if values:
            with_values({'$defs': {issue_model.__name__: schema.get('$defs', {}).get(issue_model.__name__, {})}}, values)
    return schema


# ---------------------------------------------------------------------------------------------------
# Choosing what to fuse


def parse_fuse_spec(spec: Iterable[str]) -> list[list[str]]:
    """`--fuse` values into groups of names: commas separate fused calls, `+` joins names into one.

    `output,methodology` is two fused calls (one per category), `output+methodology` one call,
    `hallucination+completeness` one call of two modes, `all` one call of every selected LLM judge."""
    groups: list[list[str]] = []
    for item in spec:
        for group in item.split(','):
            tokens = [t.strip() for t in group.split('+') if t.strip()]
            if tokens:
                groups.append(tokens)
    return groups
