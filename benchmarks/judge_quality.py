"""How good are the LLM judges? The exact prompts captured, answered by a capable model, replayed through the product.

    python benchmarks/judge_quality.py capture [--fuse all|none] [--data DIR] [--answers DIR] [--judges mvp]
    python benchmarks/judge_quality.py replay  [--fuse all|none|both] [--data DIR] [--answers DIR]
    python benchmarks/judge_quality.py --quick

No capable model is reachable from a test machine, and a benchmark must not depend on one, so the model's
part is split off:

* **capture** judges every record of `DATA/records.jsonl` with the default judges (`mvp` and the checks,
  under the default profile, as an unknown agent is judged) through the library's own runner
  (`judging.runner.judge_records`), with a model that answers nothing: it writes each prompt it is sent to
  `ANSWERS/<fuse>/prompts/<key>.md`, the system prompt and the user message exactly as sent (`key`: the
  first 16 hex digits of their SHA256). Capturing sends nothing anywhere.
* Whoever plays the capable model reads only those prompt files, never a label, and writes its reply to
  each as `ANSWERS/<fuse>/answers/<key>.txt` (the reply text, as a model would return it).
* **replay** runs the same judging with a model that answers each prompt from its answer file; a prompt
  with no answer is a judge error (counted, never a pass). The verdicts, scores and the overall score are
  the product's own: parsing, inconclusive rules, the verdict model. It prints, against the labels'
  `passed` (`DATA/labels.jsonl`), for the checks alone, each LLM judge, the LLM judges together and the
  report's overall score (checks and LLM judges): AUROC of the risk `1 - score`, passing runs flagged (a
  fail verdict) and failed runs caught, beside the trivial baseline that calls every run a failure; and
  the estimated input tokens per run, so fused (`--fuse all`, one call per run) and separate judging
  (`--fuse none`, one call per judge) can be compared.

A prompt whose text changed since its answer was written has a new key, so its old answer is never
replayed: regenerate the answers whose prompts changed (capture lists them as `unanswered`). `--quick`
replays the stored fused answers for the packaged tau2-airline runs and fails when any prompt has no
answer (a rubric changed without new answers) or when replaying errs. Answers live in the repository
(`benchmarks/judge_quality/<dataset>/`); prompts are re-made by `capture` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.reports import JudgeResult, RecordReport
from sensei_eval.core.transcript import estimate_tokens
from sensei_eval.core.verdicts import judge_status, record_verdict
from sensei_eval.evaluators.registry import DEFAULT_JUDGES, make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.runner import judge_records
from sensei_eval.models.judge_model import resolve_model

_ROOT = Path(__file__).resolve().parents[1]
# ../shared/datasets beside the checkout (or beside the folder of worktrees holding it)
_DATASETS = next(
    (p / 'shared' / 'datasets' for p in Path(__file__).resolve().parents[1:4] if (p / 'shared' / 'datasets').is_dir()),
    _ROOT / '..' / 'shared' / 'datasets',
)
# without ../shared (a checkout on its own), the copy of the 50 tau2-airline runs the package ships
_PACKAGED = _ROOT / 'sensei_eval' / 'data' / 'tau2_airline'
_DEFAULT_DATA = _DATASETS / 'tau2-airline' if (_DATASETS / 'tau2-airline').is_dir() else _PACKAGED
_DEFAULT_ANSWERS = _ROOT / 'benchmarks' / 'judge_quality' / 'tau2-airline'
# The one check that reads the record's reference (its expected calls): left out to see where checks are blind.
_REFERENCE = 'reference_check'
# The judge model's name in the reports: any name but the embedded model's, whose answers are smoke.
_MODEL_NAME = 'replay'


class PromptCaptured(Exception):
    """What the capture model answers with: the prompt is on disk, there is no verdict (a judge error)."""


class NoAnswer(Exception):
    """A prompt with no answer file: the judge's result is an error, never a pass."""


def prompt_key(system: str, user: str) -> str:
    """The file name of a prompt and its answer: the first 16 hex digits of SHA256(system, user)."""
    return hashlib.sha256(f'{system}\x00{user}'.encode()).hexdigest()[:16]


def _request_texts(messages: Sequence[ModelMessage]) -> tuple[str, str]:
    """The system prompt (the agent's instructions) and the user message of a judge's first request."""
    first = messages[0]
    assert isinstance(first, ModelRequest)
    user = '\n'.join(p.content for p in first.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str))
    return first.instructions or '', user


def _first_request_only(messages: Sequence[ModelMessage]) -> None:
    if len(messages) != 1:  # a retry (the reply did not parse): the replayed answer is final
        raise NoAnswer('the replayed answer did not parse; no second answer exists')


def capture_model(prompts: Path) -> FunctionModel:
    """A model that writes each prompt to `prompts/<key>.md` and answers with an error."""
    prompts.mkdir(parents=True, exist_ok=True)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        _first_request_only(messages)
        system, user = _request_texts(messages)
        key = prompt_key(system, user)
        (prompts / f'{key}.md').write_text(f'# System prompt\n\n{system}\n\n# User message\n\n{user}\n', encoding='utf-8')
        raise PromptCaptured(key)

    return FunctionModel(answer, model_name=_MODEL_NAME)


def replay_model(answers: Path, asked: set[str] | None = None) -> FunctionModel:
    """A model that answers each prompt with the text in `answers/<key>.txt` (each key it is asked for goes
    into `asked`)."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        _first_request_only(messages)
        key = prompt_key(*_request_texts(messages))
        if asked is not None:
            asked.add(key)
        path = answers / f'{key}.txt'
        if not path.is_file():
            raise NoAnswer(f'no answer for prompt {key}')
        return ModelResponse(parts=[TextPart(path.read_text(encoding='utf-8'))], model_name=_MODEL_NAME)

    return FunctionModel(answer, model_name=_MODEL_NAME)


def _judge(data: Path, model: FunctionModel, fuse: str, judges: Sequence[str]) -> list[RecordReport]:
    records = load_dataset(data / 'records.jsonl').records
    judge_model = resolve_model(model)
    judge_model.name = _MODEL_NAME
    judge_model.call_timeout_s = 60.0
    # `fuse` as the run's rule says it (`('none',)`: each failure mode in a call of its own), not the default
    options = JudgeRunOptions(judges=make_judges(judges), model=judge_model, concurrency=4, fuse=(fuse,))
    return asyncio.run(judge_records(records, options, run_id=f'judge-quality-{fuse}'))


# ---------------------------------------------------------------------------------------------------
# Figures


def _auroc(failed: Sequence[bool], risk: Sequence[float]) -> float | None:
    """P(a failed run's risk > a passed run's), ties counted half (Mann-Whitney); None with one class."""
    bad = [r for r, f in zip(risk, failed, strict=True) if f]
    good = [r for r, f in zip(risk, failed, strict=True) if not f]
    if not bad or not good:
        return None
    return sum((b > g) + 0.5 * (b == g) for b in bad for g in good) / (len(bad) * len(good))


@dataclass
class Row:
    """One line of the table: a way of judging, its risk per run and whether it flagged each run."""

    name: str
    risk: list[float]
    flagged: list[bool]
    judged: int
    inconclusive: int = 0
    errors: int = 0


def _row(name: str, reports: Sequence[RecordReport], pick: Callable[[JudgeResult], bool]) -> Row:
    """The row of the judge results `pick` selects, each record's verdict computed by the verdict model."""
    risk, flagged = [], []
    judged = inconclusive = errors = 0
    for report in reports:
        results = [r for r in report.judges.values() if pick(r)]
        verdict = record_verdict(results)
        statuses = [judge_status(r) for r in results]
        inconclusive += statuses.count('inconclusive')
        errors += statuses.count('error')
        judged += verdict.judged
        risk.append(1.0 - verdict.overall_score if verdict.overall_score is not None else 0.0)
        flagged.append(bool(verdict.failure_modes) or any(v.status == 'fail' for v in verdict.verdicts))
    return Row(name, risk, flagged, judged, inconclusive, errors)


def figures(reports: Sequence[RecordReport], labels: dict[str, bool]) -> tuple[list[bool], list[Row]]:
    """The table's rows over the records that have a label (failed = the label says the run did not pass)."""
    reports = [r for r in reports if r.query_id in labels]
    failed = [not labels[r.query_id] for r in reports]
    llm_names = sorted({n for r in reports for n, j in r.judges.items() if j.model is not None})
    rows = [
        Row('always fail (baseline)', [1.0] * len(reports), [True] * len(reports), len(reports)),
        _row('checks only', reports, lambda r: r.model is None),
        *(_row(f'  {name}', reports, lambda r, n=name: r.judge == n) for name in llm_names),
        _row('LLM judges only', reports, lambda r: r.model is not None),
    ]
    # where the checks are blind: the same runs without their reference (the only check that reads it)
    blind = _row('checks without the reference', reports, lambda r: r.model is None and r.judge != _REFERENCE)
    blind_llm = _row('  + LLM judges (no reference)', reports, lambda r: r.judge != _REFERENCE)
    rows += [blind, blind_llm]
    overall = [1.0 - r.overall_score if r.overall_score is not None else 0.0 for r in reports]
    rows.append(
        Row(
            'checks + LLM judges (overall)',
            overall,
            [r.overall_score is not None and r.overall_score < 0.5 for r in reports],
            len(reports),
        )
    )
    return failed, rows


def print_table(title: str, failed: list[bool], rows: Sequence[Row], tokens: float | None) -> None:
    n_fail, n_pass = sum(failed), len(failed) - sum(failed)
    print(f'\n{title}: {len(failed)} runs ({n_pass} passed, {n_fail} failed by the labels)')
    print(f'{"":34} {"AUROC":>6} {"passing flagged":>16} {"failed caught":>14} {"inconcl.":>9} {"errors":>7}')
    for row in rows:
        auroc = _auroc(failed, row.risk)
        passing = sum(f for f, bad in zip(row.flagged, failed, strict=True) if not bad)
        caught = sum(f for f, bad in zip(row.flagged, failed, strict=True) if bad)
        print(
            f'{row.name:34} {("n/a" if auroc is None else f"{auroc:.3f}"):>6} '
            f'{f"{passing}/{n_pass} ({passing / max(1, n_pass):.0%})":>16} {f"{caught}/{n_fail}":>14} '
            f'{row.inconclusive:>9} {row.errors:>7}'
        )
    if tokens is not None:
        print(f'estimated input tokens per run (UTF-8 bytes / 2.5): {tokens:,.0f}')


def _labels(data: Path) -> dict[str, bool]:
    labels = {}
    for line in (data / 'labels.jsonl').read_text(encoding='utf-8').splitlines():
        if line.strip():
            row = json.loads(line)
            labels[row['query_id']] = bool(row['passed'])
    return labels


def _tokens_per_run(prompts: Path, keys: set[str], runs: int) -> float | None:
    texts = [(prompts / f'{k}.md').read_text(encoding='utf-8') for k in keys if (prompts / f'{k}.md').is_file()]
    return sum(estimate_tokens(t) for t in texts) / runs if texts and runs else None


# ---------------------------------------------------------------------------------------------------
# Commands


def capture(data: Path, answers: Path, fuse: str, judges: Sequence[str]) -> int:
    folder = answers / fuse
    prompts = folder / 'prompts'
    if prompts.is_dir():
        for old in prompts.glob('*.md'):
            old.unlink()
    _judge(data, capture_model(prompts), fuse, judges)
    keys = {p.stem for p in prompts.glob('*.md')}
    answered = {p.stem for p in (folder / 'answers').glob('*.txt')} if (folder / 'answers').is_dir() else set()
    stale = answered - keys
    print(f'{len(keys)} prompt(s) in {prompts}; {len(keys & answered)} answered, {len(keys - answered)} unanswered')
    if stale:
        print(f'{len(stale)} answer(s) belong to no current prompt (their prompts changed): {", ".join(sorted(stale)[:8])} ...')
    for key in sorted(keys - answered):
        print(f'  unanswered: {prompts / (key + ".md")}')
    return 0


def replay(data: Path, answers: Path, fuse: str, judges: Sequence[str], *, strict: bool = False) -> int:
    """Print the figures of the answers for `fuse` (`all`, `none`); `both` adds fused against separate on
    the runs both answered. Runs a judge call of which has no answer are left out of the figures and
    counted (an answer set may cover part of a dataset); with `strict`, any such run fails."""
    modes = ('all', 'none') if fuse == 'both' else (fuse,)
    labels = _labels(data)
    kept: dict[str, list[RecordReport]] = {}
    for mode in modes:
        folder = answers / mode
        if not (folder / 'answers').is_dir():
            print(f'no answers in {folder / "answers"}: run capture, then write the answers', file=sys.stderr)
            return 2
        reports = _judge(data, replay_model(folder / 'answers'), mode, judges)
        answered = [r for r in reports if not _unanswered(r)]
        left_out = len(reports) - len(answered)
        failed, rows = figures(answered, labels)
        prompts = folder / 'prompts'
        keys = {p.stem for p in prompts.glob('*.md')} if prompts.is_dir() else set()
        title = f'{data.name}, {"fused" if mode == "all" else "separate"} judging ({mode}), replayed answers'
        print_table(title, failed, rows, _tokens_per_run(prompts, keys, len(reports)))
        if left_out:
            print(f'{left_out} run(s) left out: a judge call of theirs has no answer (capture, then answer them)')
            if strict:
                return 1
        if strict and any(row.errors for row in rows):
            return 1
        kept[mode] = answered
    if len(kept) == 2:
        common = {r.query_id for r in kept['all']} & {r.query_id for r in kept['none']}
        for mode, name in (('all', 'fused'), ('none', 'separate')):
            failed, rows = figures([r for r in kept[mode] if r.query_id in common], labels)
            print_table(f'{name} judging on the {len(common)} runs both answered', failed, rows, None)
    return 0


def separate_answers_asked(answers: Path, judges: Sequence[str]) -> int:
    """1 when a stored separate answer (`none/`, which covers part of the runs) is no longer asked for: its
    prompt changed, or the runs are no longer judged one mode a call. The fused replay cannot see that."""
    stored = {p.stem for p in (answers / 'none' / 'answers').glob('*.txt')}
    asked: set[str] = set()
    _judge(_PACKAGED, replay_model(answers / 'none' / 'answers', asked), 'none', judges)
    stale = sorted(stored - asked)
    print(f'separate judging: {len(stored) - len(stale)} of {len(stored)} stored answers asked for')
    if stale:
        print(f'not asked for: {", ".join(stale[:5])}{" ..." if len(stale) > 5 else ""} (capture --fuse none, then answer)')
    return 1 if stale else 0


def _unanswered(report: RecordReport) -> bool:
    return any('no answer for prompt' in (r.error or '') for r in report.judges.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('command', nargs='?', choices=('capture', 'replay'), default='replay')
    parser.add_argument('--data', type=Path, default=_DEFAULT_DATA, help='a folder with records.jsonl and labels.jsonl')
    parser.add_argument('--answers', type=Path, default=_DEFAULT_ANSWERS, help='where prompts and answers live')
    parser.add_argument('--fuse', choices=('all', 'none', 'both'), default='both')
    parser.add_argument('--judges', default=','.join(DEFAULT_JUDGES))
    parser.add_argument(
        '--quick',
        action='store_true',
        help='replay the stored fused answers (fail on a missing one); every stored separate answer must be asked for',
    )
    args = parser.parse_args(argv)
    judges = [args.judges]
    if args.quick:
        return replay(_PACKAGED, args.answers, 'all', judges, strict=True) or separate_answers_asked(args.answers, judges)
    if args.command == 'replay':
        return replay(args.data, args.answers, args.fuse, judges)
    modes = ('all', 'none') if args.fuse == 'both' else (args.fuse,)
    return max(capture(args.data, args.answers, fuse, judges) for fuse in modes)


if __name__ == '__main__':
    sys.exit(main())
