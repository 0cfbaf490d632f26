"""The TARSy investigation scorer (EP-0028): a 0-100 score for an SRE investigation, then missing tools.

Two variants, both applying only to records that carry an alert (`alert_data`):

* `investigation_score` (seed 000, freeform): turn 1 sends the scoring rubric — four categories of 25
  points (logical flow, consistency, tool relevance, synthesis quality), a critical stance and
  calibration rules — with the session conversation and the alert where the seed places them, and asks
  for the total alone on the last line. The score is read from the last non-empty line only when that
  line is nothing but an integer (`_SCORE_LINE`; the seed's unanchored `(\\d+)\\s*$` would read
  `Synthesis Quality: 14/25` as 25). A missing or out-of-range score gets a reminder in the same
  conversation, up to `max_score_attempts` tries in all, keeping the best analysis seen; after that the
  result is an error that keeps the raw response. Turn 2, in the same conversation, asks which tools
  were missing (freeform). `prompt_hash` is the SHA256 of both prompt texts concatenated.
* `investigation_score_structured` (seed 003): one turn whose answer is typed JSON —
  `score_breakdown`, `score_reasoning`, `missing_tools` `[{tool_name, rationale}]`,
  `alternative_approaches` `[{name, description, steps}]` — validated and retried like every judge.

Neither is a seed-004 failure mode: the result's `score` is `total_score / 100`, `passed` is None, and
the details (analysis, missing tools, hash) are in `JudgeResult.details`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, Field, ValidationError
from pydantic_ai import Agent, ModelRetry, TextOutput, capture_run_messages
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import Model

from ..models import JudgeModel, resolve_model
from ..records import QueryRecord
from ..reports import JudgeResult
from ..transcript import Transcript
from .base import Judge, describe_error, extract_json, get_default_judge_model, short_errors

__all__ = (
    'FOLLOWUP_MISSING_TOOLS_PROMPT',
    'PROMPT_HASH',
    'SCORE_PROMPT',
    'STRUCTURED_PROMPT_HASH',
    'AlternativeApproach',
    'InvestigationScore',
    'MissingTool',
    'StructuredInvestigationScore',
    'StructuredScoreOutput',
    'extract_score',
    'is_current_prompt',
)

# ---------------------------------------------------------------------------------------------------
# Prompts (our wording of seed 000's criteria; placeholders as the seed names them)

_RUBRIC = """\
You are a security-minded SRE reviewer with deep Kubernetes and DevOps operations experience. Your job is \
to grade how an automated agent INVESTIGATED an alert, and to grade it hard. You care about the path as \
much as the destination: a right conclusion reached by shortcuts, guesses or half-gathered evidence \
still loses points, and you are expected to say what SHOULD have been done, not only what was done.

## STANCE

Lean towards criticism. Before you accept any conclusion, ask in turn:
1. Was all the evidence that the tools could reach actually gathered?
2. Were all the tools that could help actually tried?
3. Is the stated confidence earned by the quality of that evidence?

## THE FOUR CATEGORIES (25 points each, 100 in total)

### 1. Logical flow (0-25)
Look at: whether each step followed sensibly from the last; whether steps were ordered efficiently or \
wasted on trial and error; whether the agent changed course at the right moment rather than giving up \
early or repeating a dead end; whether reasoning jumped over steps that would have produced evidence.
Take points off for: concluding before the obvious lines of inquiry were exhausted; retrying a failed \
call unchanged; abandoning the investigation while other approaches remained; ignoring information \
already in hand (such as the alert's timestamp); guessing instead of discovering values.
Usual range 10-22; 23 or more only for a nearly faultless sequence.

### 2. Consistency (0-25)
Look at: whether the observations support the conclusion; whether the confidence matches the evidence; \
whether stated limitations contradict the certainty claimed; whether the severity or classification \
matches what was found.
Take points off for: HIGH confidence on partial evidence; calling something malicious because a file \
exists, without showing it ran; contradictions such as "the pod is gone and nothing was found" followed \
by a confident verdict; reading too much into weak signals, or waving away strong ones such as repeated \
failures.
Usual range 15-22; 23 or more only when the logic is airtight.

### 3. Tool relevance (0-25)
Look at: whether the best tool was chosen at each stage; whether a failing tool led to trying another \
rather than stopping; whether tools were called with the right parameters in a sensible order.
Take points off for: never trying to read logs, files, processes or other direct evidence that the \
available tools could reach; guessing parameters instead of looking them up first; not consulting \
history (previous pod logs, events) when the live resource was gone.
Usual range 10-22; 23 or more only when tool use was both right and thorough.

### 4. Synthesis quality (0-25)
Look at: whether the final analysis rests on direct evidence rather than inference; whether gaps and \
limitations are admitted; whether recommendations are proportionate to the evidence; whether all the \
gathered data is used, not a convenient subset.
Take points off for: circumstantial conclusions where direct evidence was reachable; drastic \
recommendations (ban, "malicious") without proof of execution or harm; unmentioned critical gaps; no \
benign explanation considered; contradicting evidence ignored.
Usual range 8-20; 21 or more only for a rich, careful synthesis.

## CHECKLIST TO WORK THROUGH

Evidence: direct evidence (logs, files, processes) or only metrics? Files read, or only seen by name? \
Processes inspected, or inferred from resource use? Execution confirmed, or assumed?
Tools: forensic tools used (listing, reading, searching files)? Historical sources tried (logs of \
terminated pods, events)? Data sources cross-checked against each other (network vs CPU)?
Rigor: did each step build on the previous one? Were failures analysed before the next step? Was the \
investigation dropped while options remained? Were time windows set from the alert's timestamp?
Confidence: HIGH backed by thorough verification? MEDIUM naming its gaps? Limitations stated when \
evidence is incomplete?

## HOW TO WRITE IT

Write critically and concretely: name the step where a shortcut happened and what a rigorous \
investigator would have done instead ("the agent never attempted to...", "after finding X it should \
have..."), point out contradictions between what was observed and what was concluded, and keep praise \
sparse and qualified (prefer "reasonable" or "adequate" to "excellent").

## MISSING TOOLS

While reviewing, note the tools that should have been used and were not: only tools that would have \
given direct evidence instead of inference, verified an assumption left unverified, revealed something \
that was guessed, made the investigation markedly more systematic, or removed an ambiguity. Leave out \
nice-to-haves, tools redundant with what was done, and tools for facts already settled another way. For \
each, give the tool's name (for example read-file, kubectl-logs, list-processes) and the evidence gap it \
would have filled.

## THE SESSION

Below is the whole conversation of the alert investigation, with every tool call and result.

{{SESSION_CONVERSATION}}

Original alert:
{{ALERT_DATA}}

## NOW GRADE IT

You have seen the whole investigation. Grade it with the framework above. Before settling on numbers:
- Evidence: was direct evidence gathered, or only metrics and the alert itself?
- Tools: which tools could have been used and were not? Each one costs points.
- Shortcuts: where did the agent conclude without verifying, stop while options remained, repeat a \
failed call without changing approach, or guess instead of discovering?
- Confidence: does the confidence level (HIGH / MEDIUM / LOW) match the evidence actually gathered? If \
HIGH despite gaps, take points off heavily.
- Efficiency: could better tool choice or ordering have reached the conclusion sooner?

Calibration:
- A total above 70 means you are probably too lenient: look again for missed opportunities.
- Investigation paths not exhausted: total at most 60.
- Logical leaps without evidence: total at most 55.
- Incomplete tool use: 5-10 points off tool relevance.
- Confidence not matching evidence: 5-10 points off consistency.
- Scores should average 55-75. 90-100 near-perfect and rare; 75-89 good with minor issues; 60-74 \
adequate with notable gaps; 45-59 weak, with major methodology problems; 0-44 failed or truly incomplete.
If you are tempted to score high, ask whether any evidence is missing, whether a more efficient path \
existed, whether the confidence is fully justified, and whether it could have been more thorough; any \
"yes" means more points off.

Remember: process over outcome; direct over circumstantial evidence; exploring over concluding early; \
evidence before confidence.

Your evaluation must be at least 200 words, use critical language, explain the deductions in each \
category, and include the breakdown:
  Logical Flow: X/25
  Consistency: Y/25
  Tool Relevance: Z/25
  Synthesis Quality: W/25

{{OUTPUT_SCHEMA}}"""

_FREEFORM_OUTPUT = 'You MUST end your response with a single line containing ONLY the total score as an integer (0-100).'

SCORE_PROMPT = _RUBRIC

FOLLOWUP_MISSING_TOOLS_PROMPT = """\
Building on the analysis you just wrote, list the MCP tools that should have been used in this \
investigation and were not.

Count a tool as missing only if it would have given direct evidence where the agent relied on \
inference, checked an assumption the agent left unchecked, revealed something the agent guessed, made \
the investigation clearly more efficient or systematic, or removed an ambiguity in the findings. Do not \
list nice-to-have tools that would not change the analysis, tools that repeat what was already done, or \
tools for facts already established another way.

For each missing tool give its specific name (for example read-file, kubectl-logs, list-processes) and \
the rationale: which evidence it would have produced and which gap in this investigation it would have \
filled.

Answer in free text, numbering each missing tool. If no important tool is missing, say exactly: \
"No critical missing tools identified.\""""

_STRUCTURED_EXTRA = """

## ALTERNATIVE APPROACHES

Also describe up to three alternative investigation paths that would have been clearly more efficient \
(fewer steps to an equal or better conclusion) or more rigorous (more direct evidence) than what was \
done. Each must address gaps you criticised and use only tools visible in the session. Give each a short \
name, a one- or two-sentence description of the strategy and why it beats what happened, and ordered, \
concrete steps naming tools and what each step should establish, moving from discovery to verification \
to conclusion. Offer alternatives only when they are genuinely better; a near-optimal investigation \
gets fewer or none, and each alternative should fix a different weakness (one for speed, one for rigor)."""

STRUCTURED_SCORE_PROMPT = _RUBRIC.replace('\n\n## THE SESSION', _STRUCTURED_EXTRA + '\n\n## THE SESSION')

# The score line: the last non-empty line, nothing on it but an optionally signed integer. Anchored at
# both ends so "Synthesis Quality: 14/25" is not a score line (the seed's unanchored form reads 25).
_SCORE_LINE = re.compile(r'^\s*([+-]?\d+)\s*$')

PROMPT_HASH = hashlib.sha256((SCORE_PROMPT + FOLLOWUP_MISSING_TOOLS_PROMPT).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------------
# Output models


class InvestigationScore(BaseModel):
    """The freeform scorer's result (seed 000's session score fields)."""

    total_score: int = Field(ge=0, le=100)
    score_analysis: str
    missing_tools_analysis: str
    prompt_hash: str
    current_prompt_used: bool
    score_attempts: int


class MissingTool(BaseModel):
    tool_name: str
    rationale: str


class AlternativeApproach(BaseModel):
    name: str
    description: str
    steps: list[str]


class StructuredScoreOutput(BaseModel):
    """What the structured scorer asks the model for (seed 003's JudgeOutputSchema, typed)."""

    total_score: int = Field(ge=0, le=100)
    score_breakdown: dict[str, int] = Field(
        description='Points per category: logical_flow, consistency, tool_relevance, synthesis_quality (0-25 each).'
    )
    score_reasoning: str
    missing_tools: list[MissingTool]
    alternative_approaches: list[AlternativeApproach]


class StructuredInvestigationScore(StructuredScoreOutput):
    prompt_hash: str
    current_prompt_used: bool


def _structured_output_instructions() -> str:
    schema = StructuredScoreOutput.model_json_schema()
    return 'Reply with one JSON object matching this JSON schema, and nothing else:\n' + json.dumps(schema, separators=(',', ':'))


STRUCTURED_PROMPT_HASH = hashlib.sha256((STRUCTURED_SCORE_PROMPT + _structured_output_instructions()).encode()).hexdigest()


def is_current_prompt(prompt_hash: str) -> bool:
    """Whether a stored score was produced by today's criteria (either variant)."""
    return prompt_hash in (PROMPT_HASH, STRUCTURED_PROMPT_HASH)


def extract_score(text: str) -> tuple[int | None, str]:
    """(score, analysis): the score from the last non-empty line when it is only an integer.

    The score may be out of range; the caller decides. Without a score line the analysis is the whole text.
    """
    lines = text.rstrip().splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return None, ''
    m = _SCORE_LINE.match(lines[-1])
    if m is None:
        return None, text.strip()
    return int(m.group(1)), '\n'.join(lines[:-1]).strip()


def fill(template: str, record: QueryRecord, transcript: Transcript, output_schema: str) -> str:
    alert = record.alert_data
    alert_text = json.dumps(alert, indent=2, sort_keys=True) if isinstance(alert, dict) else str(alert)
    return (
        template.replace('{{SESSION_CONVERSATION}}', transcript.fenced())
        .replace('{{ALERT_DATA}}', alert_text)
        .replace('{{OUTPUT_SCHEMA}}', output_schema)
    )


# ---------------------------------------------------------------------------------------------------
# Judges


@dataclass(repr=False)
class _InvestigationJudge(Judge):
    category: ClassVar[str | None] = None
    failure_mode: ClassVar[str | None] = None

    model: Model | str | None = None

    def applies_to(self, record: QueryRecord) -> str | None:
        if record.alert_data is None:
            return 'not an alert investigation (no alert_data)'
        return None

    def resolve_judge_model(self) -> JudgeModel:
        return resolve_model(self.model) if self.model is not None else get_default_judge_model()


@dataclass(repr=False)
class InvestigationScorer(_InvestigationJudge):
    """Seed 000's two-turn freeform scorer."""

    name: ClassVar[str] = 'investigation_score'
    max_score_attempts: int = 3

    def criteria_hash(self) -> str:
        return PROMPT_HASH

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        model = model or self.resolve_judge_model()
        agent: Agent[None, str] = Agent(model.model, output_type=str, name='judge:investigation_score')
        settings = model.settings_for(None)
        prompt: str | None = fill(SCORE_PROMPT, record, transcript, _FREEFORM_OUTPUT)
        start = time.perf_counter()
        history: list[ModelMessage] = []
        best: tuple[int, str] | None = None
        best_raw = ''
        attempts = 0
        usage_in = usage_out = requests = 0
        try:
            while attempts < self.max_score_attempts:
                attempts += 1
                run = await agent.run(prompt, message_history=history or None, model_settings=settings)
                history = run.all_messages()
                usage_in += run.usage.input_tokens
                usage_out += run.usage.output_tokens
                requests += run.usage.requests
                score, analysis = extract_score(run.output)
                if len(run.output) > len(best_raw):
                    best_raw = run.output
                if score is not None and 0 <= score <= 100:
                    best = (score, analysis)
                    break
                prompt = _reminder(score)
            if best is None:
                return self._result(
                    model=model.name, status='error',
                    error=f'no valid total score on the last line after {attempts} attempt(s)',
                    raw_output=best_raw[:8000], input_tokens=usage_in, output_tokens=usage_out, requests=requests,
                    latency_s=time.perf_counter() - start, truncation=transcript.truncation,
                )  # fmt: skip
            followup = await agent.run(FOLLOWUP_MISSING_TOOLS_PROMPT, message_history=history, model_settings=settings)
            usage_in += followup.usage.input_tokens
            usage_out += followup.usage.output_tokens
            requests += followup.usage.requests
        except Exception as e:
            return self._result(
                model=model.name, status='error', error=describe_error(e), raw_output=best_raw[:8000] or None,
                input_tokens=usage_in, output_tokens=usage_out, requests=requests,
                latency_s=time.perf_counter() - start, truncation=transcript.truncation,
            )  # fmt: skip
        score_value, analysis = best
        details = InvestigationScore(
            total_score=score_value,
            score_analysis=analysis,
            missing_tools_analysis=followup.output.strip(),
            prompt_hash=PROMPT_HASH,
            current_prompt_used=True,
            score_attempts=attempts,
        )
        return self._result(
            model=model.name, status='ok', reasoning=analysis[:2000], score=score_value / 100, passed=None,
            input_tokens=usage_in, output_tokens=usage_out, requests=requests,
            latency_s=time.perf_counter() - start, truncation=transcript.truncation, details=details.model_dump(),
        )  # fmt: skip


def _reminder(score: int | None) -> str:
    if score is None:
        problem = 'Your answer did not end with a line containing only the total score.'
    else:
        problem = f'The total score on your last line ({score}) is outside 0-100.'
    return f'{problem} Write your evaluation again. {_FREEFORM_OUTPUT}'


@dataclass(repr=False)
class StructuredInvestigationScorer(_InvestigationJudge):
    """Seed 003's variant: one turn, typed JSON output."""

    name: ClassVar[str] = 'investigation_score_structured'
    output_retries: int = 2

    def criteria_hash(self) -> str:
        return STRUCTURED_PROMPT_HASH

    async def judge(self, record: QueryRecord, transcript: Transcript, model: JudgeModel | None) -> JudgeResult:
        model = model or self.resolve_judge_model()

        def parse(text: str) -> StructuredScoreOutput:
            try:
                return StructuredScoreOutput.model_validate(extract_json(text))
            except ValidationError as e:
                raise ModelRetry(
                    f'Your JSON does not match the schema: {short_errors(e)}. Reply with only the corrected JSON.'
                ) from None

        agent: Agent[None, StructuredScoreOutput] = Agent(
            model.model,
            output_type=TextOutput(parse),
            retries={'output': self.output_retries},
            name='judge:investigation_structured',
        )
        prompt = fill(STRUCTURED_SCORE_PROMPT, record, transcript, _structured_output_instructions())
        settings = model.settings_for(StructuredScoreOutput.model_json_schema())
        start = time.perf_counter()
        messages: list[ModelMessage] = []
        try:
            with capture_run_messages() as messages:
                run = await agent.run(prompt, model_settings=settings)
        except (UnexpectedModelBehavior, Exception) as e:
            responses = [m for m in messages if isinstance(m, ModelResponse)]
            raw = '\n'.join(p.content for p in responses[-1].parts if isinstance(p, TextPart)) if responses else None
            return self._result(
                model=model.name, status='error', error=describe_error(e), raw_output=raw,
                requests=len(responses), latency_s=time.perf_counter() - start, truncation=transcript.truncation,
            )  # fmt: skip
        out = run.output
        details = StructuredInvestigationScore(**out.model_dump(), prompt_hash=STRUCTURED_PROMPT_HASH, current_prompt_used=True)
        return self._result(
            model=model.name, status='ok', reasoning=out.score_reasoning[:2000], score=out.total_score / 100, passed=None,
            input_tokens=run.usage.input_tokens, output_tokens=run.usage.output_tokens, requests=run.usage.requests,
            latency_s=time.perf_counter() - start, truncation=transcript.truncation, details=details.model_dump(),
        )  # fmt: skip
