"""What the investigation judge's answer holds, and how it is read: the typed result (`InvestigationResult`:
total, points per rubric category, missing tools, analysis, raw output, cost), the rubric's categories defined
once (`CATEGORIES`), the structured variant's output model, the readers of the freeform answer (the score on
its last line only, the breakdown lines, the numbered missing tools), and the JSON schemas a schema-
constraining model (the embedded one) decodes under, rendered back into the freeform text. The phases a
scoring reports and the context variable that hears them are here too (`SCORING_PHASE_CALLBACK`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Literal

from pydantic import BaseModel, Field

from sensei_eval.core.transcript import Truncation
from sensei_eval.models.judge_model import EMBEDDED_NOTICE, JudgeModel

__all__ = (
    'CATEGORIES',
    'CATEGORY_KEYS',
    'CATEGORY_POINTS',
    'RESULT_DETAIL',
    'SCORING_PHASES',
    'SCORING_PHASE_CALLBACK',
    'AlternativeApproach',
    'InvestigationResult',
    'InvestigationScore',
    'MissingTool',
    'PhaseCallback',
    'ScoreBreakdown',
    'ScoringPhase',
    'StructuredInvestigationScore',
    'StructuredScoreOutput',
    'bounded_schema',
    'constrained_missing_tools_schema',
    'constrained_score_schema',
    'extract_score',
    'numbered_tools',
    'parse_breakdown',
    'parse_missing_tools',
    'render_constrained_missing_tools',
    'render_constrained_score',
    'smoke_warnings',
)


# The score line: the last non-empty line, nothing on it but an optionally signed integer. Anchored at
# both ends so "Synthesis Quality: 14/25" is not a score line (an unanchored form would read 25).
_SCORE_LINE = re.compile(r'^\s*([+-]?\d+)\s*$')


class InvestigationScore(BaseModel):
    """The freeform scorer's details (the session score's fields)."""

    total_score: int = Field(ge=0, le=100)
    score_analysis: str
    missing_tools_analysis: str
    prompt_hash: str
    current_prompt_used: bool
    score_attempts: int
    smoke: bool = False


class MissingTool(BaseModel):
    tool_name: str
    rationale: str


# The rubric's categories, defined here once: (key as the structured scorer and the store key it, label as
# the freeform answer writes it), each worth CATEGORY_POINTS. The schemas, the answer parsers, the service's
# `breakdown_*` columns (`service.store.BREAKDOWN_COLUMNS`) and the dashboard (served in the session view)
# follow this tuple; `ScoreBreakdown` spells its fields out for typing, and a test holds them equal. The
# rubric prose in the prompts above names them too: it is hashed into `PROMPT_HASH`, so it stays as written.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ('logical_flow', 'Logical Flow'),
    ('consistency', 'Consistency'),
    ('tool_relevance', 'Tool Relevance'),
    ('synthesis_quality', 'Synthesis Quality'),
)


CATEGORY_KEYS: tuple[str, ...] = tuple(key for key, _ in CATEGORIES)


CATEGORY_POINTS = 25


_LABELS_PATTERN = '|'.join(re.escape(label) for _, label in CATEGORIES)


_KEY_OF_LABEL = {label.lower(): key for key, label in CATEGORIES}


class AlternativeApproach(BaseModel):
    name: str
    description: str
    steps: list[str]


class StructuredScoreOutput(BaseModel):
    """What the structured scorer asks the model for (its JSON output schema, typed)."""

    total_score: int = Field(ge=0, le=100)
    score_breakdown: dict[str, int] = Field(
        description=f'Points per category: {", ".join(CATEGORY_KEYS)} (0-{CATEGORY_POINTS} each).'
    )
    score_reasoning: str
    missing_tools: list[MissingTool]
    alternative_approaches: list[AlternativeApproach]


class StructuredInvestigationScore(StructuredScoreOutput):
    prompt_hash: str
    current_prompt_used: bool
    smoke: bool = False


ScoringPhase = Literal['scoring', 'missing_tools']


# The phases a scoring reports, in order: the scoring turn, then the missing-tools identification.
SCORING_PHASES: tuple[ScoringPhase, ...] = ('scoring', 'missing_tools')


PhaseCallback = Callable[[ScoringPhase], None]


# Who hears the phases of a scoring run as a judge (`judge()`): the service's worker sets it around a job (its
# progress events); the tasks the runner starts inherit it. None: nobody.
SCORING_PHASE_CALLBACK: ContextVar[PhaseCallback | None] = ContextVar('scoring_phase_callback', default=None)


# The `JudgeResult.details` key holding the scoring's typed `InvestigationResult` (JSON): what the service keeps of
# a scoring (its score API's fields) is read from it, never parsed from text again.
RESULT_DETAIL = 'investigation'


class ScoreBreakdown(BaseModel):
    """Points per rubric category (0-25 each); None where the answer did not give that category."""

    logical_flow: int | None = Field(default=None, ge=0, le=25)
    consistency: int | None = Field(default=None, ge=0, le=25)
    tool_relevance: int | None = Field(default=None, ge=0, le=25)
    synthesis_quality: int | None = Field(default=None, ge=0, le=25)

    def as_dict(self) -> dict[str, int]:
        """The categories that have points, keyed as the structured scorer keys them."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    @property
    def empty(self) -> bool:
        return not self.as_dict()


class InvestigationResult(BaseModel):
    """What an investigation scoring produced, typed: the service stores it as columns and rows."""

    variant: Literal['freeform', 'structured']
    status: Literal['ok', 'error']
    error: str | None = None
    model: str
    prompt_hash: str
    total_score: int | None = Field(default=None, ge=0, le=100)
    breakdown: ScoreBreakdown = Field(default_factory=ScoreBreakdown)
    missing_tools: list[MissingTool] = Field(default_factory=list)
    analysis: str = ''
    missing_tools_analysis: str = ''
    alternative_approaches: list[AlternativeApproach] = Field(default_factory=list)
    raw_output: str | None = None
    smoke: bool = False
    score_attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    latency_s: float = 0.0
    truncation: Truncation | None = None
    warnings: list[str] = Field(default_factory=list)


# A breakdown line of the freeform answer ("Logical Flow: 12/25", markdown decoration allowed).
_BREAKDOWN_POINTS = re.compile(rf'^\W*({_LABELS_PATTERN})\W*:?\s*(\d{{1,3}})\s*/\s*{CATEGORY_POINTS}', re.I | re.M)


# A numbered or bulleted list item naming a tool before a colon or dash: "1. read-file: why".
_MISSING_TOOL_ITEM = re.compile(
    r'^\s*(?:\d+[.)]|[-*\u2022])\s*\**`?([A-Za-z0-9_.:/-]+?)`?\**\s*(?::|\u2014|\u2013| - )[ \t]*(.*)$', re.M
)


def parse_breakdown(text: str) -> ScoreBreakdown:
    """The category points a freeform analysis lists (first mention of each; out-of-range points dropped)."""
    found: dict[str, int] = {}
    for label, points in _BREAKDOWN_POINTS.findall(text or ''):
        key = _KEY_OF_LABEL[label.lower()]
        if key not in found and 0 <= int(points) <= CATEGORY_POINTS:
            found[key] = int(points)
    return ScoreBreakdown(**found)


def parse_missing_tools(text: str) -> list[MissingTool]:
    """The tools a freeform missing-tools answer lists, in order, without repeats."""
    tools: dict[str, MissingTool] = {}
    for name, rationale in _MISSING_TOOL_ITEM.findall(text or ''):
        tools.setdefault(name, MissingTool(tool_name=name, rationale=rationale.strip()))
    return list(tools.values())


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


# Bounds written into the schema a constrained decoder follows, so a tiny model cannot loop on one
# string until it runs out of tokens. llama-cpp-python writes maxLength N as N nested optional groups,
# and its grammar parser fails well below 1,200 ("failed to parse grammar", the server dies): 400 is
# what the failure-mode judges use.
_CONSTRAINED_MAX_ANALYSIS = 400


_CONSTRAINED_MAX_TOOLS = 4


_CONSTRAINED_MAX_STRING = 300


def constrained_score_schema() -> dict[str, Any]:
    """The schema turn 1 is decoded under on a schema-constrained server: analysis and four category scores."""
    properties: dict[str, Any] = {'analysis': {'type': 'string', 'maxLength': _CONSTRAINED_MAX_ANALYSIS}}
    for key, _ in CATEGORIES:
        # the enum is what bounds a llama.cpp grammar (its converter ignores minimum/maximum)
        properties[key] = {'type': 'integer', 'minimum': 0, 'maximum': CATEGORY_POINTS, 'enum': list(range(CATEGORY_POINTS + 1))}
    return {'type': 'object', 'properties': properties, 'required': list(properties), 'additionalProperties': False}


def constrained_missing_tools_schema() -> dict[str, Any]:
    tool = {
        'type': 'object',
        'properties': {
            'tool_name': {'type': 'string', 'maxLength': 80},
            'rationale': {'type': 'string', 'maxLength': _CONSTRAINED_MAX_STRING},
        },
        'required': ['tool_name', 'rationale'],
    }
    return {
        'type': 'object',
        'properties': {'missing_tools': {'type': 'array', 'items': tool, 'maxItems': _CONSTRAINED_MAX_TOOLS}},
        'required': ['missing_tools'],
    }


def render_constrained_score(text: str) -> tuple[str, str | None]:
    """A constrained turn-1 answer as the freeform scorer's text — analysis, breakdown, the total alone
    on the last line — to go through `extract_score` like any answer; or (text, problem) when the JSON
    is not what the schema asks (the grammar may not enforce every bound: nothing is clamped)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return text, f'Your answer is not valid JSON ({e.msg}).'
    if not isinstance(data, dict):
        return text, 'Your answer is not a JSON object.'
    analysis = data.get('analysis')
    if not isinstance(analysis, str):
        return text, 'Your answer has no "analysis" text.'
    scores: list[int] = []
    for key, _ in CATEGORIES:
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= CATEGORY_POINTS:
            return text, f'"{key}" must be an integer from 0 to {CATEGORY_POINTS}, got {json.dumps(value)}.'
        scores.append(value)
    breakdown = [f'{label}: {value}/{CATEGORY_POINTS}' for (_, label), value in zip(CATEGORIES, scores, strict=True)]
    return '\n'.join([analysis.strip(), '', *breakdown, str(sum(scores))]), None


def render_constrained_missing_tools(text: str) -> tuple[str, list[MissingTool]]:
    """A constrained turn-2 answer as (the freeform scorer's numbered text, the tools typed)."""
    try:
        data = json.loads(text)
        tools = [MissingTool(tool_name=str(t['tool_name']), rationale=str(t['rationale'])) for t in data['missing_tools']]
    except (json.JSONDecodeError, TypeError, KeyError):
        return text, parse_missing_tools(text)
    return numbered_tools(tools), tools


def numbered_tools(tools: list[MissingTool]) -> str:
    if not tools:
        return 'No critical missing tools identified.'
    return '\n'.join(f'{k}. {t.tool_name}: {t.rationale}' for k, t in enumerate(tools, start=1))


def bounded_schema(schema: Any) -> Any:
    """A copy of a JSON schema with every free string and list bounded, for a constrained decoder."""
    if isinstance(schema, dict):
        out = {k: bounded_schema(v) for k, v in schema.items()}
        if out.get('type') == 'string' and 'enum' not in out:
            out.setdefault('maxLength', _CONSTRAINED_MAX_STRING)
        if out.get('type') == 'array':
            out.setdefault('maxItems', _CONSTRAINED_MAX_TOOLS)
        return out
    if isinstance(schema, list):
        return [bounded_schema(v) for v in schema]
    return schema


_BREAKDOWN_LINE = re.compile(rf'^\s*({_LABELS_PATTERN})\s*:\s*\d+\s*/\s*{CATEGORY_POINTS}\s*$', re.MULTILINE)


def smoke_warnings(model: JudgeModel, analysis: str) -> list[str]:
    """Why a score from the embedded model must not be read as a judgement (empty for any other model)."""
    if not model.embedded:
        return []
    warnings = [f'smoke score: {EMBEDDED_NOTICE}']
    words = len(_BREAKDOWN_LINE.sub('', analysis).split())
    if words < 30:
        warnings.append(f'the analysis is {words} word(s): the score rests on next to no reasoning')
    return warnings
