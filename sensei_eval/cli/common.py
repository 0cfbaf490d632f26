"""What the commands of `sensei-eval` share: one name, type and help text per common option, the typer
app settings that keep help readable at 80 columns, the judge-model set-up every judging command does,
and the silencing of third-party banners and warnings in our output.

The root app (`sensei-eval judge|optimize|validate|calibrate|serve`) is `sensei_eval.cli.app.app`; each
command module keeps its own app too, so `python -m sensei_eval.judge` and friends still work.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from sensei_eval.cli.base import make_app, make_console, print_table, quiet_third_party, shown
from sensei_eval.models.judge_model import (
    JudgeModel,
    ModelChoice,
    ModelSetupError,
    NoJudgeModelError,
    open_judge_model,
    preflight,
    resolve_model,
)

__all__ = (
    'NO_MODEL_HELP',
    'BaseUrlOption',
    'EmbeddedThreadsOption',
    'JudgesOption',
    'ModelFlags',
    'ModelOption',
    'NoCacheOption',
    'OutOption',
    'TimeoutOption',
    'make_app',
    'make_console',
    'print_table',
    'quiet_third_party',
    'setup_judge_model',
    'setup_telemetry',
    'shown',
    'split_names',
)


# ---------------------------------------------------------------------------------------------------
# Shared options: one name, one type, one help text each

JUDGES_HELP = 'Judge names or groups (core, checks, all); comma-separated or repeated. Default: core,checks.'
JudgesOption = Annotated[list[str] | None, typer.Option('--judges', metavar='NAMES', help=JUDGES_HELP, show_default=False)]
ModelOption = Annotated[
    str | None,
    typer.Option(
        '--model',
        metavar='MODEL',
        help='Judge model: any pydantic-ai model string (openai:gpt-5.2), or embedded (the offline smoke model of the '
        '"embedded" extra: it checks the pipeline, it cannot judge). Default: $SENSEI_EVAL_MODEL.',
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        '--base-url', metavar='URL', help='OpenAI-compatible server (Ollama, vLLM, llama.cpp); --model names the model there.'
    ),
]
OutOption = Annotated[Path, typer.Option('--out', metavar='DIR', help='Where run folders go.')]
EmbeddedThreadsOption = Annotated[
    int | None,
    typer.Option(
        '--embedded-threads',
        metavar='N',
        min=1,
        help='Threads of the embedded model server, if this command starts it '
        '[env: SENSEI_EMBEDDED_THREADS; default: idle cores].',
        show_default=False,
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        '--timeout',
        metavar='SECONDS',
        envvar='SENSEI_EVAL_TIMEOUT',
        min=1.0,
        help='Deadline of one judge call in seconds, every retry included; a call past it is an error '
        '[env: SENSEI_EVAL_TIMEOUT; default: 120, 1800 for the embedded model].',
        show_default=False,
        show_envvar=False,
    ),
]
NoCacheOption = Annotated[bool, typer.Option('--no-cache', help='Neither read nor write the on-disk judge cache.')]

# What a command that needs a judge model says when none is named (exit 2): how to name one, and that the
# embedded model is there when asked for.
NO_MODEL_HELP = (
    'no judge model: name one with --model (e.g. --model openai:gpt-5.2, or --base-url URL --model NAME for '
    'Ollama or vLLM) or SENSEI_EVAL_MODEL; --model embedded runs the offline smoke model (the "embedded" extra), '
    'which checks the pipeline and never judges'
)


def split_names(values: list[str] | None) -> list[str]:
    """`--judges a,b --judges c` → `['a', 'b', 'c']`; nothing given → the default judges."""
    from sensei_eval.evaluators.registry import DEFAULT_JUDGES  # the library's default, as the service's

    names = [n.strip() for v in values or () for n in v.split(',') if n.strip()]
    return names or list(DEFAULT_JUDGES)


# ---------------------------------------------------------------------------------------------------
# The judge model


# The judge model as a command's flags ask for it: `--model`, `--base-url`, `--max-transcript-tokens`,
# `--embedded-threads` and `--timeout` (the library's `ModelChoice`, under the name the commands used).
ModelFlags = ModelChoice


def setup_judge_model(
    flags: ModelChoice,
    *,
    err: Console,
    note: str = '',
    fail_code: int | None = None,
    unreachable_ok: bool = False,
    resolve: Callable[..., JudgeModel] = resolve_model,
    check: Callable[[JudgeModel], Coroutine[Any, Any, None]] = preflight,
) -> JudgeModel:
    """The judge model a command needs (`models.judge_model.open_judge_model`: resolved from the flag, then
    `$SENSEI_EVAL_MODEL`, and checked with one request), the embedded-model notice printed. A problem is
    printed once and ends the command: exit `fail_code` when given, else the error's code (2 usage, 1
    unreachable), 1 otherwise; none named is a usage error saying how to name one.

    With `unreachable_ok` (the service), a server that cannot be reached is a warning naming it, not an exit.
    `resolve` and `check` are the caller's own names for `resolve_model` and `preflight`, so tests can
    replace them per command."""

    def notice(kind: str, text: str) -> None:
        if kind == 'smoke':
            err.print(f'[yellow]smoke:[/] {text}', highlight=False)
            if note:
                err.print(f'[yellow]note:[/] {note}', highlight=False)
        elif kind == 'unreachable':
            err.print(f'[yellow]warning:[/] {escape(text)} (starting anyway: scorings fail until it answers)', highlight=False)

    try:
        judge_model = open_judge_model(flags, unreachable_ok=unreachable_ok, on_notice=notice, resolve=resolve, check=check)
    except NoJudgeModelError as e:
        err.print(f'[red]error:[/] {escape(NO_MODEL_HELP)}', highlight=False)
        raise typer.Exit(fail_code or e.exit_code) from None
    except ModelSetupError as e:
        err.print(f'[red]error:[/] {escape(str(e))}', highlight=False)
        raise typer.Exit(fail_code or e.exit_code) from None
    assert judge_model is not None  # none_ok is not given: no model named raised above
    return judge_model


def setup_telemetry(err: Console) -> None:
    """Export spans where the standard OpenTelemetry environment says (`telemetry.configure_from_env`),
    and say so on the console."""
    from sensei_eval.judging.telemetry import configure_from_env

    done = configure_from_env()
    if done:
        err.print(f'telemetry: {done}', highlight=False)


# ---------------------------------------------------------------------------------------------------
# Third-party output
