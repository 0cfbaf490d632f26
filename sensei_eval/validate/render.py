"""Show a comparison: Markdown for a pull-request comment, and a rich table for the console.

Both show, per metric (failure modes in the standard order, then other judges, then `overall`): before
and after means over the paired queries, Δ with an arrow (▲ up, ▼ down, = none), the bootstrap CI of Δ,
the flips (pass → fail) and fixes (fail → pass), the one-sided p in the direction the metric moved of its
test that went furthest (flips or scores) and its Tarone–Holm adjusted value (or "dropped"), Cohen's d_z,
pass rates, and the verdict (`no change` only when nothing moved).
Then the multiple-testing family: which metrics counted and which were dropped, and why. Noise, errors,
queries on one side only and the thresholds follow, so a reader can tell "no change" from "could not tell".
"""

from __future__ import annotations

import contextlib

from rich import box
from rich.console import Console
from rich.table import Table

from sensei_eval.validate.results import Comparison, MetricComparison, NoiseSummary

__all__ = ('print_comparison', 'to_markdown')

_VERDICT_MD = {
    'improved': '🟢 improved',
    'regressed': '🔴 **regressed**',
    'no_change': '⚪ no change',
    'not_significant': '⚪ moved, not significant',
    'insufficient_data': '⚠️ insufficient data',
}
_VERDICT_RICH = {
    'improved': '[green]improved[/]',
    'regressed': '[bold red]regressed[/]',
    'no_change': '[dim]no change[/]',
    'not_significant': '[dim]not signif.[/]',
    'insufficient_data': '[yellow]no data[/]',
}
_MD_HEADER = (
    '| metric | before | after | Δ | 95% CI of Δ | flips / fixes | pass before → after | p one-sided | p Tarone–Holm '
    '| effect d_z | verdict |'
)
# Console widths from which the table shows every column, or the before/after means too.
_WIDE = 120
_MEDIUM = 100
# Errors and one-sided queries listed in full up to this many; then "… and N more".
_MAX_LISTED = 20


def to_markdown(c: Comparison) -> str:
    """The comparison as GitHub-flavoured Markdown: headline, table, noise, errors, settings."""
    head = '✅ no regression' if c.gate.passed else '❌ regression'
    lines = [f'## Prompt validation: {head}', '']
    lines.append(_sides_line(c))
    lines.append('')
    lines.append(_MD_HEADER)
    lines.append('|---|---:|---:|---:|---|---:|---|---:|---:|---:|---|')
    for m in c.metrics:
        name = f'**{m.metric}**' if m.kind == 'overall' else f'`{m.metric}`'
        lines.append(
            '| '
            + ' | '.join(
                [
                    name,
                    _num(m.old_mean),
                    _num(m.new_mean),
                    _delta(m),
                    _ci(m),
                    _flips(m),
                    _pass(m),
                    _p(_direction(m)[0]),
                    _adjusted(m),
                    _effect(m),
                    _VERDICT_MD[m.verdict] + (' (within noise)' if m.within_noise and m.verdict == 'not_significant' else ''),
                ]
            )
            + ' |'
        )
    lines.append('')
    lines.extend(_family_md(c))
    if c.gate.reasons:
        lines.append('**Why the gate failed:**')
        lines.extend(f'- {r}' for r in c.gate.reasons)
        lines.append('')
    if c.warnings:
        lines.extend(f'> ⚠️ {w}' for w in c.warnings)
        lines.append('')
    lines.extend(_noise_md(c))
    lines.extend(_errors_md(c))
    th = c.thresholds
    lines.append(
        f'<sub>alpha {th.alpha:g} (Tarone–Holm over a family of {len(c.gate.family)} test(s) of {len(c.metrics)} metrics) · '
        f'--max-drop {th.max_drop:g} · --min-effect {th.min_effect:g} · --max-error-rate {th.max_error_rate:g} · '
        f'pass/fail metrics: one-sided exact McNemar on flips vs fixes and one-sided paired sign-flip test of their scores · '
        f'score-only metrics: the sign-flip test ({c.permutation_resamples} resamples) · '
        f'percentile bootstrap ({c.bootstrap_resamples}) · '
        f'seed {c.seed} · exit code {c.gate.exit_code}</sub>'
    )
    return '\n'.join(lines) + '\n'


def print_comparison(c: Comparison, console: Console | None = None) -> None:
    """The comparison as a rich table, then the gate's reasons. A narrow terminal gets fewer columns — Δ,
    CI, p and verdict always; `comparison.md` / `.json` have every number. Without a terminal (a CI log)
    the command line's console gives the table its whole width (`table_width`, printed inside its `wide()`):
    every column, names uncut."""
    console = console or Console()
    width = int(getattr(console, 'table_width', console.width))
    wide_layout = getattr(console, 'wide', contextlib.nullcontext)
    wide = width >= _WIDE
    means_too = width >= _MEDIUM
    table = Table(title='before → after (paired by query)', title_justify='left', box=box.SIMPLE_HEAD, pad_edge=False)
    # a metric is a judge's mode (`tool_parameters/reference_check`): whole on a wide console, cut on a
    # narrow one so the numbers keep their room
    # (a log, printed wider than the console, cuts nothing)
    cap = None if width > console.width else max(16, width * 2 // 7)
    table.add_column('metric', no_wrap=True, max_width=cap, overflow='ellipsis')
    if wide:
        table.add_column('n', justify='right')
    if means_too:
        table.add_column('before → after', no_wrap=True)
    table.add_column('Δ', justify='right', no_wrap=True)
    table.add_column('95% CI', no_wrap=True)
    table.add_column('flip/fix', justify='right', no_wrap=True)
    table.add_column('p adj.', justify='right', no_wrap=True)
    if wide:
        table.add_column('d_z', justify='right')
        table.add_column('pass', no_wrap=True)
        table.add_column('noise ±', justify='right')
    table.add_column('verdict', no_wrap=True)
    for m in c.metrics:
        digits = 3 if wide else 2
        means = '–' if m.old_mean is None or m.new_mean is None else f'{m.old_mean:.{digits}f} → {m.new_mean:.{digits}f}'
        ci = '–' if m.ci_low is None or m.ci_high is None else f'{m.ci_low:+.{digits}f}…{m.ci_high:+.{digits}f}'
        verdict = _VERDICT_RICH[m.verdict] + (' ≈noise' if m.within_noise and m.verdict == 'not_significant' else '')
        row = [f'[bold]{m.metric}[/]' if m.kind == 'overall' else m.metric]
        if wide:
            row.append(str(m.n_pairs))
        row += [means] if means_too else []
        row += [_delta(m, rich=True), ci, _flips(m, short=True), _adjusted(m)]
        if wide:
            row += ['–' if m.effect_size_dz is None else f'{m.effect_size_dz:+.2f}', _pass(m), _num(m.noise_floor)]
        row.append(verdict)
        table.add_row(*row)
    console.print(_sides_line(c).replace('`', ''), highlight=False)
    with wide_layout():
        console.print(table)
    console.print(_family_line(c), highlight=False)
    for name, why in c.gate.dropped.items():
        console.print(f'  dropped {name}: {why}', highlight=False)
    for w in c.warnings:
        console.print(f'[yellow]warning:[/] {w}', highlight=False)
    errors = [*c.old.run_errors, *c.new.run_errors]
    if errors or c.old.judge_errors or c.new.judge_errors:
        console.print(
            f'errors: agent runs old {len(c.old.run_errors)}, new {len(c.new.run_errors)}; '
            f'judge calls old {c.old.judge_errors}, new {c.new.judge_errors} (excluded from the statistics)',
            highlight=False,
        )
    if c.only_old or c.only_new:
        one_side = f'queries on one side only: old {_list(c.only_old)}; new {_list(c.only_new)}'
        console.print(one_side.replace('`', ''), highlight=False)
    if c.gate.passed:
        console.print('[green]gate: passed[/] (exit 0)')
    else:
        console.print(f'[red]gate: failed[/] (exit {c.gate.exit_code})')
        for r in c.gate.reasons:
            console.print(f'  - {r}', highlight=False)


# ---------------------------------------------------------------------------------------------------
# Cells


def _num(x: float | None) -> str:
    return '–' if x is None else f'{x:.3f}'


def _p(x: float | None) -> str:
    if x is None:
        return '–'
    return '<0.001' if x < 0.001 else f'{x:.3f}'


def _delta(m: MetricComparison, rich: bool = False) -> str:
    if m.delta is None:
        return '–'
    arrow = '▲' if m.delta > 0 else '▼' if m.delta < 0 else '='
    text = f'{arrow} {m.delta:+.3f}'
    if rich and m.verdict in ('improved', 'regressed'):
        return f'[{"green" if m.verdict == "improved" else "red"}]{text}[/]'
    return text


def _direction(m: MetricComparison) -> tuple[float | None, float | None]:
    """(one-sided p, adjusted p) in the direction the metric moved (the other direction's p is near 1), of
    the metric's test that went furthest: the smallest adjusted p, else the smallest one-sided p."""
    tests = [(m.p_regression, m.p_improvement, m.p_adjusted, m.p_adjusted_improvement)]
    if (t := m.scores) is not None:
        tests.append((t.p_regression, t.p_improvement, t.p_adjusted, t.p_adjusted_improvement))
    moved = [((w, aw) if w <= b else (b, ab)) for w, b, aw, ab in tests if w is not None and b is not None]
    if not moved:
        return None, None
    return min(moved, key=lambda pa: (pa[1] is None, pa[1] if pa[1] is not None else pa[0]))


def _adjusted(m: MetricComparison) -> str:
    adjusted = _direction(m)[1]
    if adjusted is None and m.dropped_reason is not None and (m.scores is None or m.scores.dropped_reason is not None):
        return 'dropped'
    return _p(adjusted)


def _flips(m: MetricComparison, short: bool = False) -> str:
    if m.rule != 'flips' or m.mcnemar_b is None or m.mcnemar_c is None:
        return '–' if short or m.rule is None else 'scores only'
    return f'{m.mcnemar_b}/{m.mcnemar_c}' if short else f'{m.mcnemar_b} / {m.mcnemar_c}'


def _family_md(c: Comparison) -> list[str]:
    rules = {m.metric: m.rule for m in c.metrics}
    if not c.gate.family and not c.gate.dropped:
        return []
    names = ', '.join(f'`{t}`' + (f' ({rules[t]})' if t in rules else '') for t in c.gate.family) or 'none'
    out = [
        f'**Multiple testing (Tarone–Holm, alpha {c.thresholds.alpha:g}):** {len(c.gate.family)} test(s) of '
        f'{len(c.metrics)} metrics in the family — {names}.'
    ]
    if c.gate.dropped:
        out.append('')
        out.append('Dropped from the family (their test could not reach significance, so they cannot dilute it):')
        out.extend(f'- `{name}`: {why}' for name, why in c.gate.dropped.items())
    out.append('')
    return out


def _family_line(c: Comparison) -> str:
    names = ', '.join(c.gate.family) or 'none'
    return (
        f'family (Tarone–Holm, alpha {c.thresholds.alpha:g}): {names}; '
        f'{len(c.gate.dropped)} test(s) dropped (cannot reach significance)'
    )


def _ci(m: MetricComparison) -> str:
    if m.ci_low is None or m.ci_high is None:
        return '–'
    return f'[{m.ci_low:+.3f}, {m.ci_high:+.3f}]'


def _effect(m: MetricComparison) -> str:
    if m.effect_size_dz is None:
        return '–'
    return f'{m.effect_size_dz:+.2f} ({m.effect_label})'


def _pass(m: MetricComparison) -> str:
    if m.old_pass_rate is None or m.new_pass_rate is None:
        return '–'
    return f'{m.old_pass_rate:.0%} → {m.new_pass_rate:.0%}'


def _sides_line(c: Comparison) -> str:
    def side(s_label: str, source: str | None, versions: list[str]) -> str:
        what = f'`{source}`' if source else 'reports'
        ver = f' ({", ".join(versions[:2])}{"…" if len(versions) > 2 else ""})' if versions else ''
        return f'{s_label}: {what}{ver}'

    n = max(c.old.queries, c.new.queries)
    return (
        f'{side("old", c.old.source, c.old.prompt_versions)} · {side("new", c.new.source, c.new.prompt_versions)} · '
        f'{n} queries × {max(c.old.runs, c.new.runs)} run(s) × {max(c.old.repeats, c.new.repeats)} judging(s)'
    )


def _sd(v: float | None) -> str:
    return '–' if v is None else f'{v**0.5:.3f}'


def _noise_row(n: NoiseSummary | None) -> tuple[str, str]:
    if n is None:
        return '–', '–'
    return _sd(n.agent_var), _sd(n.judge_var)


def _noise_md(c: Comparison) -> list[str]:
    rows = [m for m in c.metrics if m.noise_floor is not None]
    if not rows:
        return [
            '_Noise not measured: with `--runs 1 --judge-repeats 1` a change cannot be told apart from agent or judge noise. '
            'Use `--runs` and/or `--judge-repeats` ≥ 2._',
            '',
        ]
    out = [
        '<details><summary>Noise (standard deviations of the 0-1 score)</summary>',
        '',
        '| metric | agent SD old / new | judge SD old / new | noise floor of Δ (±) |',
        '|---|---|---|---:|',
    ]
    for m in rows:
        ao, jo = _noise_row(m.noise_old)
        an, jn = _noise_row(m.noise_new)
        out.append(f'| `{m.metric}` | {ao} / {an} | {jo} / {jn} | {_num(m.noise_floor)} |')
    out += ['', '</details>', '']
    return out


def _errors_md(c: Comparison) -> list[str]:
    out: list[str] = []
    for side in (c.old, c.new):
        if side.run_errors:
            out.append(f'**{side.label}: {len(side.run_errors)} agent run(s) failed** (not judged, counted as errors):')
            out.extend(f'- `{e.query_id}` run {e.run}: {e.message}' for e in side.run_errors[:_MAX_LISTED])
            if len(side.run_errors) > _MAX_LISTED:
                out.append(f'- … and {len(side.run_errors) - _MAX_LISTED} more')
            out.append('')
        if side.judge_errors:
            out.append(f'**{side.label}: {side.judge_errors} judge error(s)** (excluded from the statistics, never scored 0):')
            out.extend(f'- {e}' for e in side.judge_error_messages[:_MAX_LISTED])
            if len(side.judge_error_messages) > _MAX_LISTED:
                out.append(f'- … and {len(side.judge_error_messages) - _MAX_LISTED} more')
            out.append('')
    if c.only_old or c.only_new:
        out.append(f'Queries on one side only — old: {_list(c.only_old)}; new: {_list(c.only_new)}')
        out.append('')
    return out


def _list(items: list[str]) -> str:
    if not items:
        return 'none'
    shown = ', '.join(f'`{i}`' for i in items[:_MAX_LISTED])
    return shown + (f' … and {len(items) - _MAX_LISTED} more' if len(items) > _MAX_LISTED else '')
