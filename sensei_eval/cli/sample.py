"""`sensei-eval sample`: run the production sampler over trace files (or JSONL datasets) offline.

It answers "which of these runs would the service judge, and why": every run gets a decision (sampled
for a negative signal, sampled by rate, not sampled, or refused by the budget), the sampled runs are
written as a JSONL dataset (`--out`, each with its agent's profile in `metadata.profile` and the
decision in `metadata.sampling`) that `sensei-eval judge --dataset` reads, and every decision is
written to `--decisions` when asked. Runs are taken in the order they ended, and the budget's window
slides over their end times, so a replay of a day of traces spends the budget as the service would have.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from sensei_eval.cli.base import make_console
from sensei_eval.core.datasets import load_datasets
from sensei_eval.production.sampler import Sampler, SamplerConfig, SamplerConfigError, load_sampler_config

__all__ = ('sample',)


def sample(
    dataset: Annotated[list[Path], typer.Option('--dataset', help='Trace file (*.otlp.jsonl) or JSONL dataset; repeatable.')],
    config: Annotated[Path | None, typer.Option(help='Sampler configuration (YAML, TOML or JSON).')] = None,
    rate: Annotated[float | None, typer.Option(min=0, max=1, help='Share of runs sampled (overrides the file).')] = None,
    negative_rating: Annotated[int | None, typer.Option(min=0, max=5, help='Ratings at most this are always sampled.')] = None,
    budget: Annotated[int | None, typer.Option(min=0, help='Most model-judge calls in any sliding hour.')] = None,
    out: Annotated[Path, typer.Option('--out', help='Where the sampled runs go (JSONL).')] = Path('sampled.jsonl'),
    decisions: Annotated[Path | None, typer.Option(help='Also write every decision here (JSONL).')] = None,
) -> None:
    """Decide which runs get judged, write the sampled ones as a dataset."""
    try:
        base = load_sampler_config(config) if config is not None else SamplerConfig()
    except SamplerConfigError as e:
        raise typer.BadParameter(str(e), param_hint='--config') from None
    overrides = {'rate': rate, 'negative_rating': negative_rating, 'budget_per_hour': budget}
    settings = base.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    sampler = Sampler(settings)
    loaded = load_datasets(dataset)
    records, errors = loaded.records, loaded.errors
    err = make_console(stderr=True)  # a bad line's text is the input's: printed as text, controls made visible
    for error in errors:
        err.print(f'warning: {error}', markup=False, highlight=False)
    records.sort(key=lambda r: float(r.metadata.get('ended_at') or 0.0))
    counts: Counter[str] = Counter()
    calls = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open('w', encoding='utf-8') as sampled_file:
        decision_file = decisions.open('w', encoding='utf-8') if decisions is not None else None
        try:
            for record in records:
                ended = record.metadata.get('ended_at')
                decision = sampler.decide(record, at=float(ended) if isinstance(ended, int | float) else None)
                counts[decision.reason] += 1
                if decision_file is not None:
                    decision_file.write(json.dumps({'query_id': record.query_id, **decision.to_json()}) + '\n')
                if not decision.sampled:
                    continue
                calls += decision.judge_calls
                data = record.model_dump(mode='json', exclude_none=True)
                data['metadata'] = {**data.get('metadata', {}), 'profile': decision.profile, 'sampling': decision.to_json()}
                sampled_file.write(json.dumps(data) + '\n')
        finally:
            if decision_file is not None:
                decision_file.close()
    picked = counts['negative'] + counts['rate']
    typer.echo(
        f'{len(records)} run(s): {picked} sampled ({counts["negative"]} for a negative signal, {counts["rate"]} by rate), '
        f'{counts["not_sampled"]} not sampled, {counts["budget"]} over budget; {calls} model-judge call(s) to make.'
    )
    if errors:
        typer.echo(f'{len(errors)} problem(s) in the input, listed above.', err=True)
    if picked:
        judges = ','.join(settings.judges)
        typer.echo(f'Judge them with: sensei-eval judge --dataset {out} --judges {judges}')
