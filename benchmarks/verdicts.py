"""Verdicts on real runs nobody here wrote: the deterministic checks against tau2-bench's own labels.

    python benchmarks/verdicts.py [--quick] [--data ../shared/datasets/tau2-airline]

Reads `records.jsonl` (50 published runs of a customer-service agent, Claude Sonnet 4.5 on tau2-bench's
airline domain; MIT, sierra-research/tau2-bench) and `labels.jsonl` (the benchmark's reward and, per
expected action, whether it found a matching call), judges every run with the checks (no model) under
an agent profile, and prints:

* reference-check agreement with the labels' per-action `matched`, and how many passed runs fail the
  reference check although the labels matched every expected action (extra or repeated calls);
* AUROC of `overall_score` for predicting a failed run (reward < 1), and of the reference check alone;
* the share of runs flagged by any check, passed and failed runs apart;
* the same figures for the trivial baseline that calls every run (and every action) a failure, and the
  AUROC of trivial risk scores: transcript length (steps) and the number of tool errors;
* how many calls the reference check classified state-changing, and by which evidence (annotation,
  description, profile, name).

Run under the `default` profile (what an unknown agent gets) and under `docs-agent` (another agent's
conventions forced on this one), to show what profiles are for. A run is *flagged* when a check's
verdict fails it; minor findings (an advisory lookup not made, free text in other words) are counted
apart. Under the default profile it also prints:

* the distinct values of `overall_score` (how finely it ranks runs);
* the verdicts after giving every tool call a unique id, after sending every number argument as a
  string, and after writing every call's arguments as another API client might (lists of scalars
  reversed, a key the reference does not name added to every nested object): how many runs changed any
  check's verdict or score (all must be 0);
* reference-free figures: the same runs with their expected calls removed, as for an agent nobody
  wrote a reference for (what the checks alone can tell; judges are the reference-free verdicts);
* with `--who-and-when DIR` (default ../shared/datasets/who-and-when-algo, 126 failed multi-agent
  runs with the agent and step at fault): how many runs load with every speaker, and decisive
  agent/step accuracy of the checks against the trivial baselines (first agent that is not the user,
  last step). The checks read only tool calls, and these logs have none: whatever they score there
  is what checks alone can do, and blame needs an LLM judge (`sensei-eval calibrate`). Also: runs
  flagged (every run there failed, so this is the share of failures caught), beside the trivial
  baselines (transcript length, tool errors, first agent, last step), and how many runs come out "not
  judged" (no check had anything to inspect: no tool call).

`--quick` runs the default profile only, without the spelling-invariance and reference-free reruns
(seconds); the full run adds them.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

from sensei_eval.core.datasets import load_dataset
from sensei_eval.core.records import QueryRecord
from sensei_eval.core.reports import RecordReport
from sensei_eval.core.transcript import render_transcript
from sensei_eval.evaluators.registry import make_judges
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.judging.profiles import BUILTIN_PROFILES
from sensei_eval.judging.runner import judge_records

# ../shared/datasets beside the checkout (or beside the folder of worktrees holding it)
_DATASETS = next(
    (p / 'shared' / 'datasets' for p in Path(__file__).resolve().parents[1:4] if (p / 'shared' / 'datasets').is_dir()),
    Path(__file__).resolve().parents[1] / '..' / 'shared' / 'datasets',
)
# without ../shared (a checkout on its own), the copy of the 50 tau2-airline runs the package ships
_PACKAGED = Path(__file__).resolve().parents[1] / 'sensei_eval' / 'data' / 'tau2_airline'
_DEFAULT_DATA = _DATASETS / 'tau2-airline' if (_DATASETS / 'tau2-airline').is_dir() else _PACKAGED
_DEFAULT_WHO = _DATASETS / 'who-and-when-algo'


def _auroc(failed: list[bool], risk: list[float]) -> float | None:
    """P(a failed run's risk > a passed run's), ties counted half (Mann-Whitney); None with one class."""
    bad = [r for r, f in zip(risk, failed, strict=True) if f]
    good = [r for r, f in zip(risk, failed, strict=True) if not f]
    if not bad or not good:
        return None
    wins = sum((b > g) + 0.5 * (b == g) for b in bad for g in good)
    return wins / (len(bad) * len(good))


def _fmt(value: float | None) -> str:
    return 'n/a' if value is None else f'{value:.3f}'


def _tool_errors(record: QueryRecord) -> int:
    return sum(c.failed for c in record.tool_calls())


def _steps(record: QueryRecord) -> int:
    return len(render_transcript(record).steps)


def _flagged(report: RecordReport) -> bool:
    """A check failed the run (minor findings alone do not flag it)."""
    return any(r.status == 'ok' and r.passed is False for r in report.judges.values())


def _minor_only(report: RecordReport) -> bool:
    return not _flagged(report) and any(r.status == 'ok' and r.issues for r in report.judges.values())


def _verdicts(report: RecordReport) -> dict[str, Any]:
    """What must not change when only the log's spelling changes: every check's verdict and score."""
    return {
        'overall': report.overall_score,
        **{n: (r.status, r.passed, r.score, r.mode_scores) for n, r in sorted(report.judges.items())},
    }


def _unique_ids(record: QueryRecord) -> QueryRecord:
    """The record with every tool call given its own id (results follow their call, first come first served)."""
    data = record.model_dump(mode='json')
    waiting: list[tuple[str, str]] = []
    k = 0
    for msg in data['messages']:
        for call in msg.get('tool_calls') or []:
            k += 1
            waiting.append((call.get('id'), f'unique_{k}'))
            call['id'] = f'unique_{k}'
        if msg.get('role') == 'tool':
            at = next(i for i, (old, _) in enumerate(waiting) if old == msg['tool_call_id'])
            msg['tool_call_id'] = waiting.pop(at)[1]
    return QueryRecord.model_validate(data)


def _stringify(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        return {k: _stringify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify(v) for v in value]
    return value


def _numbers_as_strings(record: QueryRecord) -> QueryRecord:
    """The record with every number in the agent's call arguments sent as a string ("100" for 100)."""
    data = record.model_dump(mode='json')
    for msg in data['messages']:
        for call in msg.get('tool_calls') or []:
            args = call['function'].get('arguments')
            parsed = json.loads(args or '{}') if isinstance(args, str) else args
            call['function']['arguments'] = json.dumps(_stringify(parsed))
    return QueryRecord.model_validate(data)


def _as_another_client(value: Any, depth: int = 0) -> Any:
    """An argument value as another API client might send it: lists of scalars in reverse order, and every
    object below the top level with one more key (`client_note`) that no reference names."""
    if isinstance(value, dict):
        out = {k: _as_another_client(v, depth + 1) for k, v in value.items()}
        return {**out, 'client_note': 'x'} if depth > 0 else out
    if isinstance(value, list):
        items = [_as_another_client(v, depth + 1) for v in value]
        return items[::-1] if all(not isinstance(v, dict | list) for v in items) else items
    return value


def _reordered_args(record: QueryRecord) -> QueryRecord:
    """The record with every call's arguments written as another client would (`_as_another_client`)."""
    data = record.model_dump(mode='json')
    for msg in data['messages']:
        for call in msg.get('tool_calls') or []:
            args = call['function'].get('arguments')
            parsed = json.loads(args or '{}') if isinstance(args, str) else args
            call['function']['arguments'] = json.dumps(_as_another_client(parsed))
    return QueryRecord.model_validate(data)


def _camel(name: str) -> str:
    head, *rest = name.split('_')
    return 'ns.' + head + ''.join(w.capitalize() for w in rest)


def _renamed_tools(record: QueryRecord) -> QueryRecord:
    """The record with every tool name written another way (`cancel_reservation` -> `ns.cancelReservation`),
    in its calls and its expected calls: the verdicts must not rest on one naming style."""
    data = record.model_dump(mode='json')
    for msg in data['messages']:
        for call in msg.get('tool_calls') or []:
            call['function']['name'] = _camel(call['function']['name'])
        if msg.get('role') == 'tool' and isinstance(msg.get('name'), str):
            msg['name'] = _camel(msg['name'])
    for expected in data.get('expected_tool_calls') or []:
        expected['tool_name'] = _camel(expected['tool_name'])
    return QueryRecord.model_validate(data)


def _changed(before: list[RecordReport], after: list[RecordReport]) -> int:
    by_id = {r.query_id: _verdicts(r) for r in after}
    return sum(_verdicts(r) != by_id.get(r.query_id) for r in before)


def _figures(reports: list[RecordReport], labels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    agree = total = unmatched_labels = 0
    false_fail_on_full_match = 0
    ref_failed: list[bool] = []
    ref_risk: list[float] = []
    for report in reports:
        label = labels[report.query_id]
        ref = report.judges.get('reference_check')
        if ref is None or ref.status != 'ok':
            continue
        ours = ref.details['expected']
        theirs = label['action_checks']
        for mine, truth in zip(ours, theirs, strict=True):
            assert mine['tool_name'] == truth['tool_name'], (report.query_id, mine, truth)
            total += 1
            agree += mine['matched'] == truth['matched']
            unmatched_labels += not truth['matched']
        if label['passed'] and all(t['matched'] for t in theirs) and not ref.passed:
            false_fail_on_full_match += 1
        ref_failed.append(not label['passed'])
        ref_risk.append(1.0 - (ref.score or 0.0))
    failed = [not labels[r.query_id]['passed'] for r in reports]
    risk = [1.0 - (r.overall_score if r.overall_score is not None else 1.0) for r in reports]
    passed_reports = [r for r in reports if labels[r.query_id]['passed']]
    failed_reports = [r for r in reports if not labels[r.query_id]['passed']]
    return {
        'actions': total,
        'agreement': agree / total if total else None,
        'baseline_agreement': unmatched_labels / total if total else None,
        'passed_runs_failing_on_full_match': false_fail_on_full_match,
        'auroc_overall': _auroc(failed, risk),
        'auroc_reference': _auroc(ref_failed, ref_risk),
        'flagged_passed': sum(map(_flagged, passed_reports)) / len(passed_reports),
        'minor_passed': sum(map(_minor_only, passed_reports)),
        'flagged_failed': sum(map(_flagged, failed_reports)) / len(failed_reports),
        'n_passed': len(passed_reports),
        'n_failed': len(failed_reports),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--data', type=Path, default=_DEFAULT_DATA, help='folder with records.jsonl and labels.jsonl')
    parser.add_argument('--who-and-when', type=Path, default=_DEFAULT_WHO, help='Who&When records and labels')
    parser.add_argument('--judge-run', type=Path, help='a run folder of LLM judges: count ok and inconclusive verdicts')
    parser.add_argument('--quick', action='store_true', help='default profile only, no reruns (seconds)')
    args = parser.parse_args()
    if args.judge_run is not None:
        return _judge_run(args.judge_run)
    records_file, labels_file = args.data / 'records.jsonl', args.data / 'labels.jsonl'
    if not records_file.is_file() or not labels_file.is_file():
        print(f'no tau2 data at {args.data} (records.jsonl and labels.jsonl)', file=sys.stderr)
        return 2
    loaded = load_dataset(records_file)
    for error in loaded.errors:
        print(f'bad record: {error}', file=sys.stderr)
    labels = {row['query_id']: row for row in map(json.loads, labels_file.read_text(encoding='utf-8').splitlines())}
    judges = make_judges(['checks'])
    n_passed = sum(lb['passed'] for lb in labels.values())
    print(f'{len(loaded.records)} tau2-airline runs ({n_passed} passed), checks only, no model')
    for name in ('default',) if args.quick else ('default', 'docs-agent'):
        start = time.perf_counter()
        reports = asyncio.run(
            judge_records(loaded.records, JudgeRunOptions(judges, profile=BUILTIN_PROFILES[name]), run_id='bench')
        )
        elapsed = time.perf_counter() - start
        f = _figures(reports, labels)
        print(f'\nprofile {name} ({elapsed:.1f} s)')
        print(
            f'  reference vs labels: {f["agreement"]:.1%} of {f["actions"]} expected actions agree '
            f'(always-fail baseline {f["baseline_agreement"]:.1%}); '
            f'passed runs failed despite every action matched: {f["passed_runs_failing_on_full_match"]}'
        )
        auroc_ref = 'n/a' if f['auroc_reference'] is None else f'{f["auroc_reference"]:.3f}'
        auroc_all = 'n/a' if f['auroc_overall'] is None else f'{f["auroc_overall"]:.3f}'
        print(f'  AUROC for a failed run: overall_score {auroc_all}, reference check alone {auroc_ref} (baseline 0.500)')
        print(
            f'  failed by any check: {f["flagged_passed"]:.1%} of {f["n_passed"]} passed runs, '
            f'{f["flagged_failed"]:.1%} of {f["n_failed"]} failed runs (baseline 100% / 100%); '
            f'{f["minor_passed"]} passed run(s) with minor findings only'
        )
        if name != 'default':
            continue
        by_id = {r.query_id: r for r in loaded.records}
        failed = [not labels[r.query_id]['passed'] for r in reports]
        length = _auroc(failed, [float(_steps(by_id[r.query_id])) for r in reports])
        errors = _auroc(failed, [float(_tool_errors(by_id[r.query_id])) for r in reports])
        print(f'  trivial baselines, AUROC: transcript length {_fmt(length)}, tool-error count {_fmt(errors)}')
        evidence: dict[str, int] = {}
        writes = 0
        for r in reports:
            ref = r.judges.get('reference_check')
            for call in ref.details.get('calls', []) if ref is not None and ref.status == 'ok' else []:
                evidence[call['evidence']] = evidence.get(call['evidence'], 0) + 1
                writes += call['state_changing']
        print(f'  calls classified: {sum(evidence.values())} ({writes} state-changing), by evidence {evidence}')
        if args.quick:
            continue
        print(f'  overall_score: {len({r.overall_score for r in reports})} distinct values on {len(reports)} runs')
        judge = functools.partial(judge_records, options=JudgeRunOptions(judges, profile=BUILTIN_PROFILES[name]), run_id='bench')
        unique = asyncio.run(judge([_unique_ids(r) for r in loaded.records]))
        strings = asyncio.run(judge([_numbers_as_strings(r) for r in loaded.records]))
        renamed = asyncio.run(judge([_renamed_tools(r) for r in loaded.records]))
        reordered = asyncio.run(judge([_reordered_args(r) for r in loaded.records]))
        print(
            f'  runs whose verdicts change: every call a unique id {_changed(reports, unique)}, '
            f'numbers sent as strings {_changed(reports, strings)}, tool names written as '
            f'`ns.camelCase` {_changed(reports, renamed)}, lists of scalars reversed and unnamed nested keys '
            f'added {_changed(reports, reordered)} (of {len(reports)})'
        )
        bare = [r.model_copy(update={'expected_tool_calls': None}) for r in loaded.records]
        free = _figures(asyncio.run(judge(bare)), labels)
        auroc_free = 'n/a' if free['auroc_overall'] is None else f'{free["auroc_overall"]:.3f}'
        print(
            f'  reference-free (expected calls removed): AUROC {auroc_free}, failed by any check '
            f'{free["flagged_passed"]:.1%} passed / {free["flagged_failed"]:.1%} failed runs; '
            'without a reference only LLM judges can tell'
        )
    if args.who_and_when and (args.who_and_when / 'records.jsonl').is_file():
        _who_and_when(args.who_and_when, judges)
    else:
        print(f'\nno Who&When data at {args.who_and_when}', file=sys.stderr)
    return 0


def _judge_run(run_dir: Path) -> int:
    """An LLM judge run (e.g. the embedded model's main job): its verdicts by status, and every ok
    verdict's reasoning printed so a reader can confirm none is paraphrased or empty (a false pass)."""
    from collections import Counter

    from sensei_eval.judging.run_folder import load_reports

    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    ok: list[tuple[str, str, str]] = []
    for report in load_reports(run_dir):
        for result in report.judges.values():
            if result.model is None:
                continue
            statuses[result.status] += 1
            if result.status == 'inconclusive':
                reasons[(result.error or '').split(' (')[0]] += 1
            elif result.status == 'ok':
                ok.append((report.query_id, result.judge, result.reasoning or ''))
    print(f'{run_dir}: LLM verdicts {dict(statuses)}')
    for reason, n in reasons.most_common():
        print(f'  inconclusive x{n}: {reason}')
    for query_id, judge, reasoning in ok:
        print(f'  ok {query_id} {judge}: {reasoning[:200]!r}')
    return 0


def _who_and_when(folder: Path, judges: Any) -> None:
    """Speakers load; checks-only blame against the trivial baselines (see the module docstring)."""
    loaded = load_dataset(folder / 'records.jsonl')
    raw = {row['query_id']: row for row in map(json.loads, (folder / 'records.jsonl').read_text(encoding='utf-8').splitlines())}
    labels = {row['query_id']: row for row in map(json.loads, (folder / 'labels.jsonl').read_text(encoding='utf-8').splitlines())}
    with_speakers = 0
    for record in loaded.records:
        names = [m.get('name') for m in raw[record.query_id]['messages']]
        with_speakers += [s.speaker for s in render_transcript(record).steps] == names
    n = len(raw)
    print(f'\nwho-and-when-algo: {len(loaded.records)} of {n} runs load, {with_speakers} with every speaker on its step')
    for error in loaded.errors:
        print(f'  bad record: {error}')
    reports = asyncio.run(
        judge_records(loaded.records, JudgeRunOptions(judges, profile=BUILTIN_PROFILES['default']), run_id='bench')
    )
    agent_hits = step_hits = first_hits = last_hits = 0
    for report, record in zip(reports, loaded.records, strict=True):
        label = labels[record.query_id]
        steps = render_transcript(record).steps
        truth_step = int(label['mistake_step']) + 1  # 0-based message index; one step per message in these logs
        truth_agent = str(label['mistake_agent']).strip().casefold()
        agent_hits += (report.decisive_agent or '').strip().casefold() == truth_agent
        step_hits += report.decisive_step == truth_step
        first = next((s.speaker for s in steps if s.speaker and s.kind not in ('user', 'system')), '')
        first_hits += (first or '').casefold() == truth_agent
        last_hits += len(steps) == truth_step
    named = sum(r.decisive_agent is not None for r in reports)
    k = len(reports)
    not_judged = sum(r.overall_score is None for r in reports)
    na = sum(r.coverage.not_applicable for r in reports if r.coverage is not None)
    print(
        f'  not judged: {not_judged} of {k} runs (the checks had nothing to inspect: {na} not applicable '
        'results, "no tool calls in this run"; none reads as a pass)'
    )
    caught = sum(map(_flagged, reports))
    print(
        f'  failed runs caught (flagged by a check): {caught} of {k} ({caught / k:.1%}); every run here failed, '
        f'so AUROC is undefined; a run with tool errors {sum(_tool_errors(r) > 0 for r in loaded.records)} of {k}'
    )
    print(
        f'  checks only: a decisive agent named in {named} of {k} reports; agent accuracy {agent_hits / k:.1%}, '
        f'step accuracy {step_hits / k:.1%}'
    )
    print(
        f'  trivial baselines: first non-user agent {first_hits / k:.1%}, last step {last_hits / k:.1%} '
        '(the checks read tool calls; these logs have none, so blame needs an LLM judge)'
    )


if __name__ == '__main__':
    raise SystemExit(main())
