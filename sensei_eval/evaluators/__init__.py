"""The judges: pydantic-evals evaluators, one LLM judge per failure mode, deterministic checks, the fused judge
and the investigation scorer; `make_judges` builds them by name or group (`registry`).

    from sensei_eval.evaluators import Hallucination, make_judges
"""

from typing import Any

from sensei_eval.evaluators import investigation
from sensei_eval.evaluators.base import FailureModeJudge, Judge, JudgeError, default_judge_model, use_judge_model
from sensei_eval.evaluators.checks import (
    CitationCheck,
    DeterministicCheck,
    DocsToolCheck,
    ErrorRecoveryCheck,
    GreetingCheck,
    IdentifierCheck,
    RepeatedCallCheck,
    VersionCheck,
)
from sensei_eval.evaluators.format import AgentFormat
from sensei_eval.evaluators.fused import FusedJudge, FuseSpecError
from sensei_eval.evaluators.instructions import InstructionFollowing
from sensei_eval.evaluators.investigation import InvestigationJudge, StructuredInvestigationJudge
from sensei_eval.evaluators.methodology import (
    AmbiguityHandling,
    ConfidenceCommunication,
    QueryDecomposition,
    ResearchDepth,
    SolutionEvaluation,
)
from sensei_eval.evaluators.output import CitationQuality, Completeness, Hallucination, ReportingQuality, SynthesisQuality
from sensei_eval.evaluators.reference import ReferenceCheck
from sensei_eval.evaluators.registry import GROUPS, JUDGES, UnknownJudgeError, fuse_judges, make_judges
from sensei_eval.evaluators.rubric import RubricJudge
from sensei_eval.evaluators.sources import SourceQuality, SourceSelection
from sensei_eval.evaluators.tool_usage import ToolParameters, ToolSelection

__all__ = (
    'GROUPS',
    'JUDGES',
    'AgentFormat',
    'AmbiguityHandling',
    'CitationCheck',
    'CitationQuality',
    'Completeness',
    'ConfidenceCommunication',
    'DeterministicCheck',
    'DocsToolCheck',
    'ErrorRecoveryCheck',
    'FailureModeJudge',
    'FuseSpecError',
    'FusedJudge',
    'GreetingCheck',
    'Hallucination',
    'IdentifierCheck',
    'InstructionFollowing',
    'InvestigationJudge',
    'Judge',
    'JudgeError',
    'QueryDecomposition',
    'ReferenceCheck',
    'RepeatedCallCheck',
    'ReportingQuality',
    'ResearchDepth',
    'RubricJudge',
    'SolutionEvaluation',
    'SourceQuality',
    'SourceSelection',
    'StructuredInvestigationJudge',
    'SynthesisQuality',
    'ToolParameters',
    'ToolSelection',
    'UnknownJudgeError',
    'VersionCheck',
    'default_judge_model',
    'fuse_judges',
    'make_judges',
    'use_judge_model',
)


def __getattr__(name: str) -> Any:
    """The investigation judges' old names (`InvestigationScorer`, `StructuredInvestigationScorer`), for one
    release, with a DeprecationWarning."""
    if name in investigation._OLD_NAMES:
        return getattr(investigation, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
