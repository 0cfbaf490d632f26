"""`python -m sensei_eval.optimize`: improve an agent's prompt components with the judges' help.

A thin layer over `sensei_eval.optimize`: read the components (`--prompts`), import the agent
(`--agent`), take the training queries (`--dataset`, `--num-examples`), pick judges and models, then
run the sequential loop (or `--strategy gepa`) with progress per component and a before/after table.
Nothing is applied to the agent: the run folder holds `suggestions.json`, `prompts.yaml` and
`prompts.diff` for a human to review.

Exit codes: 0 the run finished or stopped at its budget; 1 bad dataset lines or agent/judge errors
during the run (everything else still ran and was saved); 2 usage errors.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.table import Table

from ..cache import JudgeCache
from ..cli import BaseUrlOption, JudgesOption, ModelOption, OutOption, make_app, quiet_third_party, setup_judge_model, split_names
from ..evaluators.registry import UnknownJudgeError, make_judges
from ..models import JudgeModel, preflight, resolve_model
from .agent import load_queries, load_runner
from .components import ComponentsError, load_components
from .loop import OptimizeConfig, OptimizeState, SequentialOptimizer
from .variants import VariantGenerator

__all__ = ('app', 'main')

app = make_app(help=__doc__.split('\n\n')[0] if __doc__ else None)
err = Console(stderr=True)
out = Console()


@app.command()
def optimize(
    prompts: Annotated[str, typer.Option(help='Prompt components: a prompts module (dotted or .py path) or YAML.')],
    agent: Annotated[str, typer.Option(help='MODULE:FACTORY returning a pydantic-ai Agent (or an AgentRunner).')],
    dataset: Annotated[Path, typer.Option(help='JSONL of training queries ({query_id, query}) or QueryRecords.')],
    num_examples: Annotated[int, typer.Option(min=1, help='Use the first N queries of the dataset.')] = 20,
    variants: Annotated[int, typer.Option(min=1, help='Variants generated per component.')] = 3,
    judges: JudgesOption = None,
    budget: Annotated[int | None, typer.Option(min=1, help='Stop before spending more model calls than this.')] = 500,
    max_metric_calls: Annotated[
        int | None, typer.Option(min=1, help='Stop before judging more agent runs than this (GEPA default: 10 per query).')
    ] = None,
    max_components: Annotated[int | None, typer.Option(min=1, help='Visit at most this many components.')] = None,
    margin: Annotated[float, typer.Option(min=0.0, help='A variant is kept only if it beats the current text by this.')] = 0.01,
    all_components: Annotated[bool, typer.Option(help='Also visit components whose judges found nothing.')] = False,
    strategy: Annotated[
        Literal['sequential', 'gepa'], typer.Option(help='sequential (one component at a time) or the dspy.GEPA baseline.')
    ] = 'sequential',
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    generator_model: Annotated[
        str | None, typer.Option(help='Model for the variant generator (default: the judge model).')
    ] = None,
    seed: Annotated[int, typer.Option(help='Seed for sampling failure examples and for DSPy rollouts.')] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help='Agent runs and judge calls in flight.')] = 4,
    out_dir: OutOption = Path('reports'),
    resume: Annotated[Path | None, typer.Option(help='Continue the run in this folder where it stopped.')] = None,
    no_cache: Annotated[bool, typer.Option('--no-cache', help='Do not read or write the judge cache.')] = False,
) -> None:
    """Optimize prompt components one at a time (the sequential loop); suggestions for review."""
    quiet_third_party()
    os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')
    # DSPy and GEPA log every unparseable answer with its traceback at INFO; the run records them itself
    for name in ('dspy', 'gepa'):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        components = load_components(prompts)
        judge_list = make_judges(split_names(judges))
        runner = load_runner(agent)
    except (ComponentsError, UnknownJudgeError, ValueError) as e:
        err.print(f'[red]error:[/] {e}', highlight=False)
        raise typer.Exit(2) from None
    if not dataset.is_file():
        err.print(f'[red]error:[/] no such dataset: {dataset}')
        raise typer.Exit(2)
    queries, load_errors = load_queries(dataset)
    for bad in load_errors:
        err.print(f'[red]bad line:[/] {bad}', highlight=False)
    queries = queries[:num_examples]
    if not queries:
        err.print(f'[red]error:[/] no usable query in {dataset}')
        raise typer.Exit(2)
    if resume is not None and not (resume / 'state.json').is_file():
        err.print(f'[red]error:[/] {resume} holds no optimizer run (no state.json)')
        raise typer.Exit(2)
    run_dir = resume or out_dir / f'optimize-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}'

    # the judge model, then the generator's (the same one unless --generator-model); this module's
    # `resolve_model` and `preflight`, so tests can replace them here
    note = 'The embedded model also writes the variants, so expect few usable ones.'
    judge_model: JudgeModel | None = None
    if any(j.needs_model for j in judge_list):
        judge_model = setup_judge_model(model, base_url, err=err, note=note, resolve=resolve_model, check=preflight)
    if generator_model is None and judge_model is not None:
        gen_model: JudgeModel = judge_model
    else:
        try:
            gen_model = setup_judge_model(
                generator_model or model, base_url, err=err, note=note, resolve=resolve_model, check=preflight
            )
        except BaseException:
            if judge_model is not None:
                judge_model.close()
            raise
    lm = dspy_lm(gen_model)
    cache = None if no_cache else JudgeCache()
    err.print(
        f'optimizing {len(components.names)} component(s) of {prompts} on {len(queries)} queries -> {run_dir}/', highlight=False
    )
    try:
        if strategy == 'gepa':
            calls = max_metric_calls or 10 * len(queries)
            exit_code = _gepa(
                components, runner, queries, judge_list, judge_model, lm, calls, run_dir, seed, cache, _adapter(gen_model)
            )
        else:
            config = OptimizeConfig(
                variants=variants, margin=margin, budget_calls=budget, max_metric_calls=max_metric_calls,
                max_components=max_components, all_components=all_components, seed=seed, concurrency=concurrency,
            )  # fmt: skip
            optimizer = SequentialOptimizer(
                components, runner, queries, judge_list, judge_model, VariantGenerator(lm, adapter=_adapter(gen_model)), run_dir,
                config, cache,
                on_event=lambda m: err.print(f'  {m}', highlight=False),
            )  # fmt: skip
            try:
                state = asyncio.run(optimizer.run())
            except ValueError as e:  # a resumed folder that doesn't match
                err.print(f'[red]error:[/] {e}', highlight=False)
                raise typer.Exit(2) from None
            except KeyboardInterrupt:
                err.print(f'interrupted; every finished candidate is saved: resume with --resume {run_dir}', highlight=False)
                raise typer.Exit(130) from None
            _print_table(state)
            exit_code = 1 if (load_errors or _had_errors(run_dir)) else 0
    finally:
        for m in {id(x): x for x in (judge_model, gen_model) if x is not None}.values():
            m.close()
    first = f'result: {run_dir}/gepa_result.json' if strategy == 'gepa' else f'suggestions: {run_dir}/suggestions.json'
    err.print(f'{first} · optimized components: {run_dir}/prompts.yaml (+ .diff)', highlight=False)
    raise typer.Exit(1 if load_errors else exit_code)


def dspy_lm(model: JudgeModel | None) -> Any:
    """The DSPy LM that writes variants, talking to the same endpoint the judge model does."""
    import dspy

    from .variants import make_dspy_lm

    if model is None:
        raise ValueError('the variant generator needs a model')
    if (endpoint := model.openai_endpoint) is not None:
        # the same endpoint and key the judge model was resolved with (`models.resolve_model`)
        name, base_url, api_key = endpoint
        extra: dict[str, Any] = {'max_tokens': 600, 'timeout': 300} if model.embedded else {}
        return dspy.LM(f'openai/{name}', api_base=base_url, api_key=api_key, cache=False, **extra)
    spec = model.model if isinstance(model.model, str) else model.spec  # `resolve_model` keeps the string it built from
    if spec is not None:
        return make_dspy_lm(spec)
    raise ValueError(f'no DSPy LM for model {model.name}; pass --generator-model')


def _adapter(model: JudgeModel | None) -> Any:
    """The embedded model gets DSPy's chat format only: its JSON fallback asks llama.cpp for grammar-constrained
    decoding, which takes minutes per call on a 135M model for no better answer."""
    import dspy

    return dspy.ChatAdapter(use_json_adapter_fallback=False) if model is not None and model.embedded else None


def _gepa(
    components: Any, runner: Any, queries: Any, judges: Any, judge_model: Any, lm: Any, metric_calls: int,
    run_dir: Path, seed: int, cache: JudgeCache | None, adapter: Any,
) -> int:  # fmt: skip
    from .gepa import run_gepa

    result = run_gepa(
        components, runner, queries, judges, judge_model, reflection_lm=lm, max_metric_calls=metric_calls, run_dir=run_dir,
        seed=seed, cache=cache, adapter=adapter,
    )  # fmt: skip
    table = Table(title='GEPA (round-robin over components)')
    for col in ('baseline', 'best', 'candidates', 'metric calls', 'model calls', 'errors'):
        table.add_column(col)
    table.add_row(_f(result.baseline_score), _f(result.best_score), str(result.candidates), str(result.metric_calls),
                  str(result.model_calls), str(len(result.errors)))  # fmt: skip
    out.print(table)
    return 1 if result.errors else 0


def _print_table(state: OptimizeState) -> None:
    table = Table(title=f'sequential optimization: {state.stopped}')
    table.add_column('component', no_wrap=True)
    for col in ('issues', 'status', 'before', 'after', 'variants', 'kept'):
        table.add_column(col, no_wrap=True)
    notes = []
    for name, cs in state.components.items():
        kept = '-' if cs.frozen_index is None else f'variant {cs.frozen_index + 1}'
        n_var = '-' if cs.variants is None else f'{len(cs.candidates)}/{len(cs.variants)}'
        table.add_row(name, str(cs.failures), cs.status, _f(cs.score_before), _f(cs.score_after), n_var, kept)
        if cs.reason and cs.status != 'skipped':
            notes.append(f'{name}: {cs.reason}')
    out.print(table)
    skipped = [n for n, cs in state.components.items() if cs.status == 'skipped']
    if skipped:
        notes.append(f'skipped (no issue in the failure modes mapped to them): {", ".join(skipped)}')
    for note in notes:
        out.print(f'  {note}', highlight=False)
    out.print(
        f'score {_f(state.baseline_score)} -> {_f(state.current_score)} · {state.model_calls} model calls '
        f'(agent {state.agent_calls}, judges {state.judge_calls}, generator {state.generator_calls}) · '
        f'{state.metric_calls} judged runs',
        highlight=False,
    )


def _had_errors(run_dir: Path) -> bool:
    import json

    for path in (run_dir / 'candidates').rglob('*.json'):
        evaluation = json.loads(path.read_text()).get('evaluation', {})
        if evaluation.get('agent_errors') or evaluation.get('judge_errors'):
            return True
    return False


def _f(x: float | None) -> str:
    return '-' if x is None else f'{x:.3f}'


def main() -> None:
    app(prog_name='python -m sensei_eval.optimize')


if __name__ == '__main__':
    main()
