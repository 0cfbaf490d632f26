"""The investigation judge: a 0-100 score for an SRE investigation, then missing tools.

Two variants, both applying only to records that carry an alert (`alert_data`):

* `investigation_score` (freeform): turn 1 sends the scoring rubric — four categories of 25
  points (logical flow, consistency, tool relevance, synthesis quality), a critical stance and
  calibration rules — with the session (the alert, then the conversation) inside the transcript fence, and
  asks for the total alone on the last line. The score is read from the last non-empty line only when that
  line is nothing but an integer (`_SCORE_LINE`; an unanchored `(\\d+)\\s*$` would read
  `Synthesis Quality: 14/25` as 25). A missing or out-of-range score gets a reminder in the same
  conversation, up to `max_score_attempts` tries in all, keeping the best analysis seen; after that the
  result is an error that keeps the raw response. Turn 2, in the same conversation, asks which tools
  were missing (freeform). `prompt_hash` is the SHA256 of both prompt texts concatenated.
  With a schema-constrained model (the embedded SmolLM2, which cannot be relied on to end with a score
  line) turn 1 is decoded under a JSON schema — analysis and the four category scores — and rendered
  into the same text (breakdown, then the total alone on the last line) before the same parsing and
  checks; turn 2 is constrained to a list of missing tools the same way.
* `investigation_score_structured`: one turn whose answer is typed JSON —
  `score_breakdown`, `score_reasoning`, `missing_tools` `[{tool_name, rationale}]`,
  `alternative_approaches` `[{name, description, steps}]` — validated and retried like every judge.

Both scorers' own answer is `score(record, transcript, model, on_phase=...)`: a typed
`InvestigationResult` (total, points per category, missing tools as name + rationale, analysis, raw
output, smoke flag, cost). The scorer reads its own answer once — the breakdown lines and the numbered
missing-tools list of the freeform text, or the JSON of the structured and constrained answers — so
nothing downstream parses text again. `on_phase` is told when the scoring turn starts (`scoring`) and
when the missing tools are being identified (`missing_tools`).

`judge()` (the path of every run: the CLI, the runner, the service's jobs) converts that result to a
`JudgeResult`. Neither is a seed-004 failure mode: its `score` is `total_score / 100`, `passed` is None, and
the details (analysis, missing tools, hash, and the typed result itself under `RESULT_DETAIL`) are in
`JudgeResult.details`. A score from the embedded model is marked
`details["smoke"] = True` with a warning: a grammar guarantees the shape of its answer, not its sense.

Prompt safety, as for every judge: the template is filled in one pass (`base.fill_template`), so a
placeholder written inside data is never expanded; everything untrusted (alert, conversation, tool
results) is inside the transcript fence; and the system prompt says it is data, not instructions.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ValidationError
from pydantic_ai import Agent, ModelRetry, TextOutput, capture_run_messages
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import Model
from pydantic_ai.usage import RunUsage

from sensei_eval.core.errors import describe_error
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import JudgeResult
from sensei_eval.core.transcript import Transcript
from sensei_eval.evaluators.base import (
    Judge,
    default_judge_model,
    extract_json,
    register_judge,
    short_errors,
    timed_out,
)
from sensei_eval.evaluators.investigation_answers import (
    CATEGORIES,
    RESULT_DETAIL,
    SCORING_PHASE_CALLBACK,
    InvestigationResult,
    InvestigationScore,
    PhaseCallback,
    ScoreBreakdown,
    StructuredInvestigationScore,
    StructuredScoreOutput,
    bounded_schema,
    constrained_missing_tools_schema,
    constrained_score_schema,
    extract_score,
    numbered_tools,
    parse_breakdown,
    parse_missing_tools,
    render_constrained_missing_tools,
    render_constrained_score,
    smoke_warnings,
)
from sensei_eval.evaluators.investigation_prompts import (
    CONSTRAINED_FOLLOWUP,
    CONSTRAINED_OUTPUT,
    FOLLOWUP_MISSING_TOOLS_PROMPT,
    FREEFORM_OUTPUT,
    INVESTIGATION_SYSTEM_PROMPT,
    PROMPT_HASH,
    SCORE_PROMPT,
    STRUCTURED_PROMPT_HASH,
    STRUCTURED_SCORE_PROMPT,
    fill,
    structured_output_instructions,
)
from sensei_eval.models.judge_model import JudgeModel, resolve_model
from sensei_eval.models.retry import call_deadline

__all__ = (
    'JUDGE_OF_VARIANT',
    'InvestigationJudge',
    'StructuredInvestigationJudge',
)


@dataclass(repr=False)
class _InvestigationJudge(Judge):
    failure_mode: ClassVar[str | None] = None

    model: Model | str | None = None

    def applies_to(self, record: QueryRecord) -> str | None:
        if record.alert_data is None:
            return 'not an alert investigation (no alert_data)'
        return None

    def resolve_judge_model(self) -> JudgeModel:
        return resolve_model(self.model) if self.model is not None else default_judge_model()

    async def score(
        self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None, on_phase: PhaseCallback | None = None
    ) -> InvestigationResult:
        """Score one investigation: the typed result, never an exception (an error is `status='error'`)."""
        raise NotImplementedError

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        """`score` as a `JudgeResult`, under the judge model's deadline (every call of the scoring included),
        telling `SCORING_PHASE_CALLBACK`'s callback (the service's progress events) each phase."""
        model = model or self.resolve_judge_model()
        with call_deadline(model.timeout_s):
            result = await self.score(record, transcript, model, on_phase=SCORING_PHASE_CALLBACK.get())
        return self.to_judge_result(result)

    def _details(self, result: InvestigationResult) -> dict[str, Any]:
        raise NotImplementedError

    def to_judge_result(self, result: InvestigationResult) -> JudgeResult:
        """The typed result as the runner's and CLI's `JudgeResult` (details as each variant has them)."""
        common: dict[str, Any] = {
            'model': result.model,
            'input_tokens': result.input_tokens,
            'output_tokens': result.output_tokens,
            'requests': result.requests,
            'latency_s': result.latency_s,
            'truncation': result.truncation,
        }
        if result.status != 'ok' or result.total_score is None:
            return self._result(status='error', error=result.error, raw_output=result.raw_output, **common)
        typed = result.model_dump(mode='json', exclude={'truncation', 'warnings', 'latency_s'})
        return self._result(
            status='ok',
            reasoning=result.analysis[:2000],
            score=result.total_score / 100,
            passed=None,
            details={**self._details(result), RESULT_DETAIL: typed},
            warnings=list(result.warnings),
            **common,
        )


@register_judge
@dataclass(repr=False)
class InvestigationJudge(_InvestigationJudge):
    """The two-turn freeform scorer."""

    name: ClassVar[str] = 'investigation_score'
    groups: ClassVar[tuple[str, ...]] = ('investigation',)
    max_score_attempts: int = 3

    def criteria_hash(self) -> str:
        return PROMPT_HASH

    def _details(self, result: InvestigationResult) -> dict[str, Any]:
        assert result.total_score is not None
        return InvestigationScore(
            total_score=result.total_score,
            score_analysis=result.analysis,
            missing_tools_analysis=result.missing_tools_analysis,
            prompt_hash=result.prompt_hash,
            current_prompt_used=True,
            score_attempts=result.score_attempts,
            smoke=result.smoke,
        ).model_dump()

    async def score(
        self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None, on_phase: PhaseCallback | None = None
    ) -> InvestigationResult:
        model = model or self.resolve_judge_model()
        agent: Agent[None, str] = Agent(
            model.request_model, output_type=str, instructions=INVESTIGATION_SYSTEM_PROMPT, name='judge:investigation_score'
        )
        # a schema-constraining server (the embedded model) decodes each turn under a JSON schema
        constrained = model.json_schema_constrained
        settings = model.settings_for(constrained_score_schema() if constrained else None)
        output_rules = CONSTRAINED_OUTPUT if constrained else FREEFORM_OUTPUT
        prompt: str | None = fill(SCORE_PROMPT, transcript, output_rules)
        start = time.perf_counter()
        history: list[ModelMessage] = []
        best: tuple[int, str] | None = None
        best_raw = ''
        attempts = 0
        usage = RunUsage()

        def result(**kwargs: Any) -> InvestigationResult:
            return InvestigationResult(
                **_identity('freeform', model, PROMPT_HASH, transcript),
                **_usage_fields(usage),
                score_attempts=attempts,
                latency_s=time.perf_counter() - start,
                **kwargs,
            )

        try:
            async with asyncio.timeout(model.timeout_s):
                if on_phase is not None:
                    on_phase('scoring')
                while attempts < self.max_score_attempts:
                    attempts += 1
                    run = await agent.run(prompt, message_history=history or None, model_settings=settings)
                    history = run.all_messages()
                    usage.incr(run.usage)
                    text, problem = render_constrained_score(run.output) if constrained else (run.output, None)
                    score, analysis = extract_score(text)
                    if len(run.output) > len(best_raw):
                        best_raw = run.output
                    if score is not None and 0 <= score <= 100:
                        best = (score, analysis)
                        break
                    prompt = f'{problem} {CONSTRAINED_OUTPUT}' if problem else _reminder(score)
                if best is None:
                    return result(
                        status='error',
                        error=f'no valid total score on the last line after {attempts} attempt(s)',
                        raw_output=best_raw[:8000],
                    )
                if on_phase is not None:
                    on_phase('missing_tools')
                if constrained:
                    followup = await agent.run(
                        FOLLOWUP_MISSING_TOOLS_PROMPT + CONSTRAINED_FOLLOWUP,
                        message_history=history,
                        model_settings=model.settings_for(constrained_missing_tools_schema()),
                    )
                    missing_text, tools = render_constrained_missing_tools(followup.output)
                else:
                    followup = await agent.run(FOLLOWUP_MISSING_TOOLS_PROMPT, message_history=history, model_settings=settings)
                    missing_text, tools = followup.output, parse_missing_tools(followup.output)
                usage.incr(followup.usage)
        except TimeoutError:
            return result(status='error', error=timed_out(model), raw_output=best_raw[:8000] or None)
        except Exception as e:
            return result(status='error', error=describe_error(e), raw_output=best_raw[:8000] or None)
        score_value, analysis = best
        return result(
            status='ok',
            total_score=score_value,
            breakdown=parse_breakdown(analysis),
            missing_tools=tools,
            analysis=analysis,
            missing_tools_analysis=missing_text.strip(),
            raw_output=best_raw[:8000] or None,
            warnings=smoke_warnings(model, analysis),
        )


def _identity(variant: str, model: JudgeModel, prompt_hash: str, transcript: Transcript) -> dict[str, Any]:
    """The fields of an `InvestigationResult` that say what scored what: variant, model, prompt, smoke, truncation."""
    return dict(
        variant=variant, model=model.name, prompt_hash=prompt_hash, smoke=model.embedded, truncation=transcript.truncation
    )


def _usage_fields(usage: RunUsage) -> dict[str, int]:
    """What the model calls cost, as `InvestigationResult` fields."""
    return {'input_tokens': usage.input_tokens, 'output_tokens': usage.output_tokens, 'requests': usage.requests}


def _reminder(score: int | None) -> str:
    if score is None:
        problem = 'Your answer did not end with a line containing only the total score.'
    else:
        problem = f'The total score on your last line ({score}) is outside 0-100.'
    return f'{problem} Write your evaluation again. {FREEFORM_OUTPUT}'


@register_judge
@dataclass(repr=False)
class StructuredInvestigationJudge(_InvestigationJudge):
    """The structured variant: one turn, typed JSON output."""

    name: ClassVar[str] = 'investigation_score_structured'
    in_all: ClassVar[bool] = False  # `all` holds one investigation judge: the freeform one
    output_retries: int = 2

    def criteria_hash(self) -> str:
        return STRUCTURED_PROMPT_HASH

    def _details(self, result: InvestigationResult) -> dict[str, Any]:
        assert result.total_score is not None
        return StructuredInvestigationScore(
            total_score=result.total_score,
            score_breakdown=result.breakdown.as_dict(),
            score_reasoning=result.analysis,
            missing_tools=result.missing_tools,
            alternative_approaches=result.alternative_approaches,
            prompt_hash=result.prompt_hash,
            current_prompt_used=True,
            smoke=result.smoke,
        ).model_dump()

    async def score(
        self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None, on_phase: PhaseCallback | None = None
    ) -> InvestigationResult:
        model = model or self.resolve_judge_model()

        def parse(text: str) -> StructuredScoreOutput:
            try:
                return StructuredScoreOutput.model_validate(extract_json(text))
            except ValidationError as e:
                raise ModelRetry(
                    f'Your JSON does not match the schema: {short_errors(e)}. Reply with only the corrected JSON.'
                ) from None

        agent: Agent[None, StructuredScoreOutput] = Agent(
            model.request_model,
            output_type=TextOutput(parse),
            instructions=INVESTIGATION_SYSTEM_PROMPT,
            retries={'output': self.output_retries},
            name='judge:investigation_structured',
        )
        prompt = fill(STRUCTURED_SCORE_PROMPT, transcript, structured_output_instructions())
        settings = model.settings_for(bounded_schema(StructuredScoreOutput.model_json_schema()))
        start = time.perf_counter()
        messages: list[ModelMessage] = []
        common = _identity('structured', model, STRUCTURED_PROMPT_HASH, transcript)
        if on_phase is not None:
            on_phase('scoring')
        try:
            async with asyncio.timeout(model.timeout_s):
                with capture_run_messages() as messages:
                    run = await agent.run(prompt, model_settings=settings)
        except (UnexpectedModelBehavior, Exception) as e:
            if isinstance(e, TimeoutError):
                e = TimeoutError(timed_out(model))
            responses = [m for m in messages if isinstance(m, ModelResponse)]
            raw = '\n'.join(p.content for p in responses[-1].parts if isinstance(p, TextPart)) if responses else None
            return InvestigationResult(
                status='error',
                error=describe_error(e),
                raw_output=raw,
                requests=len(responses),
                latency_s=time.perf_counter() - start,
                **common,
            )
        out = run.output
        if on_phase is not None:
            on_phase('missing_tools')  # read from the same answer
        known = {key for key, _ in CATEGORIES}
        breakdown = ScoreBreakdown(
            **{k: v for k, v in out.score_breakdown.items() if k in known and isinstance(v, int) and 0 <= v <= 25}
        )
        raw_text = '\n'.join(
            p.content for m in run.new_messages()[-1:] if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, TextPart)
        )
        return InvestigationResult(
            status='ok',
            total_score=out.total_score,
            breakdown=breakdown,
            missing_tools=out.missing_tools,
            analysis=out.score_reasoning,
            missing_tools_analysis=numbered_tools(out.missing_tools),
            alternative_approaches=out.alternative_approaches,
            raw_output=raw_text[:8000] or None,
            **_usage_fields(run.usage),
            latency_s=time.perf_counter() - start,
            warnings=smoke_warnings(model, out.score_reasoning),
            **common,
        )


# The investigation judge of each scoring variant (the service's `serve --scorer`), by variant.
JUDGE_OF_VARIANT: dict[str, str] = {'freeform': InvestigationJudge.name, 'structured': StructuredInvestigationJudge.name}


# The judges' old names (before issue 43), accepted for one release with a DeprecationWarning.
_OLD_NAMES = {'InvestigationScorer': 'InvestigationJudge', 'StructuredInvestigationScorer': 'StructuredInvestigationJudge'}


def __getattr__(name: str) -> Any:
    if name in _OLD_NAMES:
        new = _OLD_NAMES[name]
        warnings.warn(f'{name} is now {new} (the investigation judge)', DeprecationWarning, stacklevel=2)
        return globals()[new]
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
