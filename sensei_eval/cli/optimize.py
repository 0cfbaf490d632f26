"""`python -m sensei_eval.optimize`: improve an agent's prompt components with the judges' help.

A thin layer over `sensei_eval.optimize`: read the components (`--prompts`), import the agent
(`--agent`), take the queries (`--dataset`, `--num-examples`), pick judges and models, then run the
sequential loop (or `--strategy gepa`) with progress per component and a before/after table.
Nothing is applied to the agent: the run folder holds `suggestions.json`, the optimized prompt in the
input's own format (`prompts.py`, `prompts.yaml` or `prompts.txt`) and `prompts.diff` for a human to
review.

`--map MODE=COMPONENT[,COMPONENT...]` (repeatable) says which prompt components a failure mode's issues
are about; `--config run.yaml|run.toml` holds any of the options under their own names (`num_examples`
or `num-examples`) plus a `components:` section mapping failure modes to component names. Options given
on the command line win over the file; `--map` replaces the file's `components:` as a whole.

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
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from sensei_eval.agents.components import ComponentsError, PromptComponents, load_components, saved_prompt_path
from sensei_eval.agents.runner import AgentRunner, Query, load_queries, load_runner
from sensei_eval.cli.common import (
    BaseUrlOption,
    JudgesOption,
    ModelFlags,
    ModelOption,
    NoCacheOption,
    OutOption,
    TimeoutOption,
    make_app,
    make_console,
    print_table,
    quiet_third_party,
    setup_judge_model,
    setup_telemetry,
    split_names,
)
from sensei_eval.core.config import CONFIG_SUFFIXES, load_config_file
from sensei_eval.core.errors import ConfigError, LoadError
from sensei_eval.evaluators.base import Judge
from sensei_eval.evaluators.registry import UnknownJudgeError, make_judges
from sensei_eval.judging.cache import JudgeCache
from sensei_eval.judging.options import JudgeRunOptions
from sensei_eval.models.judge_model import JudgeModel, preflight, resolve_model
from sensei_eval.optimize.config import MapEntry, RunConfigError, check_component_map, dspy_lm, lm_adapter, parse_map
from sensei_eval.optimize.loop import SequentialOptimizer
from sensei_eval.optimize.state import OptimizeConfig, OptimizeState
from sensei_eval.optimize.variants import VariantGenerator

if TYPE_CHECKING:
    from sensei_eval.optimize.gepa import GepaSettings

__all__ = ('app', 'load_run_config', 'main')

app = make_app(help=__doc__.split('\n\n')[0] if __doc__ else None)
err = make_console(stderr=True)
out = make_console()

# options a run config may not set: the config itself, and resuming (a run folder, not a setting)
_NOT_IN_CONFIG = ('config', 'resume')


@app.command()
def optimize(
    ctx: typer.Context,
    prompts: Annotated[
        str | None, typer.Option(help='Prompt components: a prompts module (dotted or .py path), YAML or a text file.')
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(help='MODULE:FACTORY returning a pydantic-ai Agent or an AgentRunner, or taking the prompt.'),
    ] = None,
    dataset: Annotated[Path | None, typer.Option(help='JSONL of queries ({query_id, query}) or QueryRecords.')] = None,
    config: Annotated[
        Path | None,
        typer.Option('--config', help='Run config (YAML, TOML or JSON): the options by name, and a components: map.'),
    ] = None,
    map_: Annotated[
        list[str] | None,
        typer.Option(
            '--map',
            help="FAILURE_MODE=COMPONENT[,COMPONENT...]: route that mode's issues to these components (repeatable).",
            show_default=False,
        ),
    ] = None,
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
    validation_fraction: Annotated[
        float | None,
        typer.Option(min=0.0, max=1.0, help="Share of the queries held out to accept changes on [default: the loop's]."),
    ] = None,
    validation_queries: Annotated[
        list[str] | None,
        typer.Option(help='Query ids held out for acceptance (comma-separated, repeatable); overrides the fraction.'),
    ] = None,
    runs: Annotated[int | None, typer.Option(min=1, help="Agent runs per validation query [default: the loop's].")] = None,
    alpha: Annotated[
        float | None, typer.Option(min=0.0, max=1.0, help="Significance level of the validation test [default: the loop's].")
    ] = None,
    top_k: Annotated[
        int | None, typer.Option('--top-k', min=1, help="Candidates per round tested on held-out queries [default: the loop's].")
    ] = None,
    rounds: Annotated[
        int | None, typer.Option(min=1, help="Most rounds per component, while they are accepted [default: the loop's].")
    ] = None,
    profile: Annotated[str | None, typer.Option(help='Agent profile whose component map applies when no map is given.')] = None,
    generator_timeout: Annotated[
        float | None, typer.Option(min=0.0, help="Seconds one variant-generator call may take [default: the loop's].")
    ] = None,
    generator_max_tokens: Annotated[
        int | None, typer.Option(min=16, help="Output token limit of one variant-generator call [default: the loop's].")
    ] = None,
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
    no_cache: NoCacheOption = False,
    timeout: TimeoutOption = None,
) -> None:
    """Optimize prompt components one at a time (the sequential loop); suggestions for review."""
    quiet_third_party()
    os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True')
    # DSPy and GEPA log every unparseable answer with its traceback at INFO; the run records them itself
    for name in ('dspy', 'gepa'):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        opts, map_entries = _merged_options(ctx, config, map_)
    except RunConfigError as e:
        err.print(f'[red]error:[/] {escape(str(e))}', highlight=False)
        raise typer.Exit(2) from None
    _optimize(opts, map_entries)


def _merged_options(ctx: typer.Context, config: Path | None, map_: list[str] | None) -> tuple[dict[str, Any], list[MapEntry]]:
    """The command line's options, with the run config's (`--config`) where the command line left the
    default, and the component map (`--map` over the config's)."""
    opts = dict(ctx.params)
    map_entries: list[MapEntry] = []
    if config is not None:
        file_opts, map_entries = load_run_config(config, ctx)
        for key, value in file_opts.items():
            source = ctx.get_parameter_source(key)
            if source is None or source.name in ('DEFAULT', 'DEFAULT_MAP'):  # not given on the command line
                opts[key] = value
    if map_:
        map_entries = parse_map(map_)
    missing = [f'--{k}' for k in ('prompts', 'agent', 'dataset') if opts[k] is None]
    if missing:
        raise RunConfigError(f'missing {", ".join(missing)} (give it on the command line or in --config)')
    return opts, map_entries


class _Inputs(NamedTuple):
    """What a run optimizes, checked before any model is called."""

    components: PromptComponents
    runner: AgentRunner
    queries: list[Query]
    load_errors: list[LoadError]
    judges: list[Judge]
    config: OptimizeConfig
    run_dir: Path


def _optimize(opts: dict[str, Any], map_entries: list[MapEntry]) -> None:
    inputs = _inputs(opts, map_entries)
    strategy, run_dir = opts['strategy'], inputs.run_dir
    judge_model, gen_model = _models(inputs.judges, opts)
    err.print(
        f'optimizing {len(inputs.components.names)} component(s) of {opts["prompts"]} on {len(inputs.queries)} queries '
        f'-> {run_dir}/',
        highlight=False,
    )
    try:
        cache = None if opts['no_cache'] else JudgeCache()
        if strategy == 'gepa':
            exit_code = _run_gepa(inputs, judge_model, gen_model, cache, opts['max_metric_calls'])
        else:
            exit_code = _run_sequential(inputs, judge_model, VariantGenerator(dspy_lm(gen_model)), cache)
    finally:
        for m in {id(x): x for x in (judge_model, gen_model) if x is not None}.values():
            m.close()
    first = f'result: {run_dir}/gepa_result.json' if strategy == 'gepa' else f'suggestions: {run_dir}/suggestions.json'
    saved = saved_prompt_path(run_dir)
    err.print(f'{first} · optimized prompt: {saved or run_dir / "prompts.*"} (+ prompts.diff)', highlight=False)
    raise typer.Exit(1 if inputs.load_errors else exit_code)


def _fail(message: str) -> NoReturn:
    """An input problem: printed, exit 2."""
    err.print(f'[red]error:[/] {message}', highlight=False)
    raise typer.Exit(2)


def _inputs(opts: dict[str, Any], map_entries: list[MapEntry]) -> _Inputs:
    """The components, the component map, the judges, the agent, the queries and the loop's config;
    any problem is printed and exits 2."""
    prompts, dataset = str(opts['prompts']), Path(opts['dataset'])
    try:
        components = load_components(prompts)
        component_map = check_component_map(map_entries, components) if map_entries else None
        judge_list = make_judges(split_names(opts['judges']))
        runner = load_runner(str(opts['agent']))
    except (ComponentsError, RunConfigError, UnknownJudgeError, ValueError) as e:
        _fail(escape(str(e)))
    if not dataset.is_file():
        _fail(f'no such dataset: {dataset}')
    queries, load_errors = load_queries(dataset)
    for bad in load_errors:
        err.print(f'[red]bad line:[/] {escape(str(bad))}', highlight=False)
    queries = queries[: opts['num_examples']]
    if not queries:
        _fail(f'no usable query in {dataset}')
    resume: Path | None = opts['resume']
    if resume is not None and not (resume / 'state.json').is_file():
        _fail(f'{resume} holds no optimizer run (no state.json)')
    try:
        config = _loop_config(opts, component_map)
    except ValueError as e:  # pydantic's own message names the field
        _fail(escape(str(e)))
    run_dir = resume or Path(opts['out_dir']) / f'optimize-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}'
    return _Inputs(components, runner, queries, load_errors, judge_list, config, run_dir)


def _models(judges: list[Judge], opts: dict[str, Any]) -> tuple[JudgeModel | None, JudgeModel]:
    """The judge model (None when every judge is a check), then the generator's (the same one unless
    --generator-model); this module's `resolve_model` and `preflight`, so tests can replace them here."""
    note = 'The embedded model also writes the variants, so expect few usable ones.'
    model, base_url, generator_model = opts['model'], opts['base_url'], opts['generator_model']
    setup_telemetry(err)
    judge_model: JudgeModel | None = None
    if any(j.needs_model for j in judges):
        flags = ModelFlags(model, base_url, timeout=opts.get('timeout'))
        judge_model = setup_judge_model(flags, err=err, note=note, resolve=resolve_model, check=preflight)
    if generator_model is None and judge_model is not None:
        return judge_model, judge_model
    try:
        flags = ModelFlags(generator_model or model, base_url, timeout=opts.get('timeout'))
        return judge_model, setup_judge_model(flags, err=err, note=note, resolve=resolve_model, check=preflight)
    except BaseException:
        if judge_model is not None:
            judge_model.close()
        raise


def _run_gepa(
    inputs: _Inputs, judge_model: JudgeModel | None, gen_model: JudgeModel, cache: JudgeCache | None, max_calls: int | None
) -> int:
    """The dspy.GEPA baseline; its exit code."""
    from sensei_eval.optimize.gepa import GepaSettings

    calls = max_calls or 10 * len(inputs.queries)
    try:
        options = JudgeRunOptions(inputs.judges, judge_model, cache=cache)
        gepa = GepaSettings(dspy_lm(gen_model), calls, adapter=lm_adapter(gen_model))
        return _gepa(inputs.components, inputs.runner, inputs.queries, options, gepa, inputs.run_dir, inputs.config)
    except ValueError as e:  # too few queries to split, a map naming components the prompt lacks
        _fail(escape(str(e)))


def _run_sequential(
    inputs: _Inputs, judge_model: JudgeModel | None, generator: VariantGenerator, cache: JudgeCache | None
) -> int:
    """The sequential loop, its table printed; its exit code (1 when an agent run or judge call failed)."""
    run_dir = inputs.run_dir
    try:
        optimizer = SequentialOptimizer(
            inputs.components,
            inputs.runner,
            inputs.queries,
            inputs.judges,
            judge_model,
            generator,
            run_dir,
            inputs.config,
            cache,
            on_event=lambda m: err.print(f'  {m}', highlight=False),
        )
        state = asyncio.run(optimizer.run())
    except ValueError as e:  # too few queries to split, a resumed folder that doesn't match, a map the loop refuses
        _fail(escape(str(e)))
    except KeyboardInterrupt:
        err.print(f'interrupted; every finished candidate is saved: resume with --resume {run_dir}', highlight=False)
        raise typer.Exit(130) from None
    _print_table(state)
    return 1 if (inputs.load_errors or _had_errors(run_dir)) else 0


_CONFIG_OPTIONS = {
    'variants': 'variants',
    'margin': 'margin',
    'budget_calls': 'budget',
    'max_metric_calls': 'max_metric_calls',
    'max_components': 'max_components',
    'all_components': 'all_components',
    'seed': 'seed',
    'concurrency': 'concurrency',
    'validation_fraction': 'validation_fraction',
    'runs': 'runs',
    'alpha': 'alpha',
    'profile': 'profile',
    'generator_timeout_s': 'generator_timeout',
    'generator_max_tokens': 'generator_max_tokens',
    'top_k': 'top_k',
    'rounds': 'rounds',
}
"""The loop's settings (`OptimizeConfig`) taken from the command's options: setting -> option."""

_OPTIONAL_SETTINGS = (
    *('component_map', 'validation_fraction', 'validation_queries', 'runs', 'alpha', 'profile'),
    *('generator_timeout_s', 'generator_max_tokens', 'top_k', 'rounds'),
)
"""Settings left out of the config when unset: the loop keeps its own default."""


def _loop_config(opts: dict[str, Any], component_map: dict[str, list[str]] | None) -> OptimizeConfig:
    """The loop's config from the options; options the loop does not know (yet) are left out, and
    options left unset keep the loop's own defaults."""
    values: dict[str, Any] = {key: opts.get(option) for key, option in _CONFIG_OPTIONS.items()}
    values['component_map'] = component_map
    values['validation_queries'] = _ids(opts['validation_queries'])
    known = OptimizeConfig.model_fields
    for key in _OPTIONAL_SETTINGS:
        if values[key] is None:
            del values[key]
        elif key not in known:
            raise ConfigError(f'this version of the optimizer has no {key!r} setting')
    return OptimizeConfig(**values)


def _ids(values: list[str] | None) -> list[str] | None:
    """`--validation-queries a,b --validation-queries c` → `['a', 'b', 'c']`; None when not given."""
    ids = [i.strip() for v in values or () for i in v.split(',') if i.strip()]
    return ids or None


# ---------------------------------------------------------------------------------------------------
# Component map and run config


def load_run_config(path: Path, ctx: typer.Context) -> tuple[dict[str, Any], list[MapEntry]]:
    """A run config's options (converted and checked as the command line would) and its component map.

    Keys are the command's option names (`num_examples` or `num-examples`); `components` maps failure
    modes to a component name or a list of them. Errors name the file, the line (YAML) and the key."""
    if path.suffix.lower() not in CONFIG_SUFFIXES and path.is_file():
        raise RunConfigError('a run config is .yaml, .yml, .toml or .json', file=str(path))
    data, lines = load_config_file(path, what='run config', error=RunConfigError)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RunConfigError(f'expected a mapping of option names to values, got {type(data).__name__}', file=str(path))
    # a key is an option's name as typed (`out` for --out, `no_cache` or `no-cache`), without the dashes
    params: dict[str, Any] = {}
    for p in ctx.command.params:
        if p.name is None or p.name in _NOT_IN_CONFIG or p.name == 'map_':
            continue
        for opt in getattr(p, 'opts', ()):
            params[opt.lstrip('-').replace('-', '_')] = p
    options: dict[str, Any] = {}
    entries: list[MapEntry] = []
    for raw_key, value in data.items():
        key = str(raw_key).replace('-', '_')
        where = f'{path}{_line(lines, (str(raw_key),))}: {raw_key}'
        if key in ('components', 'map'):
            entries += _config_map(path, lines, str(raw_key), value)
            continue
        param: Any = params.get(key)
        if param is None:
            raise RunConfigError(f'{where}: unknown key; keys: components, {", ".join(sorted(params))}')
        if param.multiple and isinstance(value, str):
            value = [value]
        try:
            options[param.name] = param.process_value(ctx, value)  # the command line's own conversion and range checks
        except Exception as e:
            message = e.format_message() if isinstance(e, typer.BadParameter) else str(e)
            raise RunConfigError(f'{where}: bad value {value!r}: {message}') from None
    return options, entries


def _config_map(path: Path, lines: dict[tuple[str, ...], int], key: str, value: Any) -> list[MapEntry]:
    if not isinstance(value, dict):
        raise RunConfigError(f'{path}{_line(lines, (key,))}: {key}: expected a mapping of failure mode to component name(s)')
    entries = []
    for mode, targets in value.items():
        where = f'{path}{_line(lines, (key, str(mode)))}: {key}.{mode}'
        names = [targets] if isinstance(targets, str) else targets
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
            raise RunConfigError(f'{where}: bad value {targets!r}: expected a component name or a list of them')
        entries.append(MapEntry(str(mode), tuple(n.strip() for n in names), where))
    return entries


def _line(lines: dict[tuple[str, ...], int], key: tuple[str, ...]) -> str:
    return f':{lines[key]}' if key in lines else ''


def _gepa(
    components: Any,
    runner: Any,
    queries: Any,
    options: JudgeRunOptions,
    gepa: GepaSettings,
    run_dir: Path,
    config: OptimizeConfig,
) -> int:
    """dspy.GEPA with the sequential loop's split, routing and acceptance test (`config`)."""
    from sensei_eval.optimize.gepa import run_gepa

    result = run_gepa(components, runner, queries, options, gepa, run_dir=run_dir, config=config)
    if result.routing:
        out.print(f'routing: {result.routing}', highlight=False)
    table = Table(title='GEPA (round-robin over components), scores on the validation queries')
    for col in ('baseline', 'best', 'accepted', 'candidates', 'metric calls', 'model calls', 'errors'):
        table.add_column(col)
    scores = (_f(result.baseline_score), _f(result.best_score), 'yes' if result.accepted else 'no')
    counts = (result.candidates, result.metric_calls, result.model_calls, len(result.errors))
    table.add_row(*scores, *(str(n) for n in counts))
    print_table(out, table)
    if result.validation is not None and not result.accepted:
        out.print(f'best candidate not accepted: {result.validation.reason}', highlight=False)
    return 1 if result.errors else 0


def _print_table(state: OptimizeState) -> None:
    routing = getattr(state, 'routing_detail', None) or getattr(state, 'routing', None)
    if routing:
        out.print(f'routing: {routing}', highlight=False)
    # no box and short headings: eight components' rows fit an 80-column terminal
    table = Table(title=f'sequential optimization: {state.stopped}', box=None, pad_edge=False, title_justify='left')
    table.add_column('component', no_wrap=True)
    for col in ('issues', 'status', 'train', 'validation', 'tried', 'kept'):
        table.add_column(col, no_wrap=True)
    notes = []
    for name, cs in state.components.items():
        kept = '-' if cs.frozen_index is None else f'#{cs.frozen_index + 1}'
        n_var = '-' if cs.variants is None else f'{len(cs.candidates)}/{len(cs.variants)}'
        train, val = f'{_f(cs.score_before)}→{_f(cs.score_after)}', f'{_f(cs.validation_before)}→{_f(cs.validation_after)}'
        table.add_row(name, str(cs.failures), cs.status, train, val, n_var, kept)
        if cs.reason and cs.status != 'skipped':
            notes.append(f'{name}: {cs.reason}')
    print_table(out, table)
    skipped = [n for n, cs in state.components.items() if cs.status == 'skipped']
    if skipped:
        notes.append(f'skipped (no failure routed to them): {", ".join(skipped)}')
    for note in notes:
        out.print(f'  {note}', highlight=False)
    out.print(
        f'overall score: train {_f(state.baseline_score)} -> {_f(state.current_score)} on '
        f'{len(state.split.train) if state.split else "?"} '
        f'queries · validation {_f(state.baseline_validation_score)} -> {_f(state.current_validation_score)} on '
        f'{len(state.split.validation) if state.split else "?"} held-out queries · {state.model_calls} model calls '
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
