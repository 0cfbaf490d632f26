"""`python -m sensei_eval`: the command-line entry for the service (`serve`).

A thin typer layer: it turns flags into `ServiceSettings`, resolves the judge model with
`sensei_eval.models.resolve_model` (flag, then `SENSEI_EVAL_MODEL`, else the embedded model) and runs
`sensei_eval.service.create_app` under uvicorn. Judging datasets stays `python -m sensei_eval.judge`.
"""

from __future__ import annotations

import logging
import os
from typing import Annotated, Literal

import typer

__all__ = ('app', 'main')

app = typer.Typer(add_completion=False, no_args_is_help=True, help='sensei-eval service commands.')


@app.callback()
def _root() -> None:
    """sensei-eval: judge AI agent runs."""


@app.command()
def serve(
    db: Annotated[str | None, typer.Option(help='Database URL or SQLite path [env: SENSEI_EVAL_DB]')] = None,
    host: Annotated[str, typer.Option(help='Interface to listen on.')] = '127.0.0.1',
    port: Annotated[int, typer.Option(help='Port to listen on.')] = 8000,
    model: Annotated[str | None, typer.Option(help='Judge model (pydantic-ai model string) [env: SENSEI_EVAL_MODEL]')] = None,
    base_url: Annotated[str | None, typer.Option(help='OpenAI-compatible server for --model [env: SENSEI_EVAL_BASE_URL]')] = None,
    behind_proxy: Annotated[
        bool, typer.Option(help='Name users from X-Forwarded-User/-Email, on requests with the token or from a --trusted-proxy.')
    ] = False,
    token: Annotated[
        str | None, typer.Option(help='Bearer token every route but the health check needs [env: SENSEI_EVAL_TOKEN]')
    ] = None,
    public_read: Annotated[
        bool, typer.Option(help='With --token: reads, dashboard and WebSocket open; writes need the token.')
    ] = False,
    trusted_proxy: Annotated[
        list[str] | None, typer.Option(help='Proxy address whose X-Forwarded-User is trusted without the token; repeatable.')
    ] = None,
    allowed_origin: Annotated[
        list[str] | None, typer.Option(help='Another browser origin allowed to use the WebSocket and writes; repeatable.')
    ] = None,
    concurrency: Annotated[int, typer.Option(min=0, help='Scorings running at once here (0: API only).')] = 10,
    scorer: Annotated[str, typer.Option(help='Scoring variant: freeform (seed 000) or structured (seed 003).')] = 'freeform',
    auto_score: Annotated[
        list[str] | None, typer.Option(help="Agent/chain whose completed sessions are auto-scored ('*' = all); repeatable.")
    ] = None,
    timeout: Annotated[float, typer.Option(help='Seconds one scoring may take before it is timed_out.')] = 300.0,
    grace: Annotated[float, typer.Option(help='Seconds in-flight scorings get to finish on shutdown.')] = 30.0,
    max_body: Annotated[int, typer.Option(help='Largest request body in bytes (larger gets 413).')] = 5 * 1024 * 1024,
    log_level: Annotated[str, typer.Option(help='Log level.')] = 'info',
) -> None:
    """Run the scoring service (API, store, background scoring, WebSocket events)."""
    import uvicorn

    from .models import EMBEDDED_NOTICE, resolve_model
    from .service import ServiceSettings, create_app
    from .service.config import DEFAULT_DB_URL

    if scorer not in ('freeform', 'structured'):
        raise typer.BadParameter('use freeform or structured', param_hint='--scorer')
    variant: Literal['freeform', 'structured'] = 'structured' if scorer == 'structured' else 'freeform'
    logging.basicConfig(level=log_level.upper(), format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    try:
        settings = ServiceSettings(
            db_url=db or os.environ.get('SENSEI_EVAL_DB') or DEFAULT_DB_URL,
            behind_proxy=behind_proxy,
            token=token or os.environ.get('SENSEI_EVAL_TOKEN') or None,
            trusted_proxies=frozenset(trusted_proxy or ()),
            public_read=public_read,
            allowed_origins=frozenset(allowed_origin or ()),
            concurrency=concurrency,
            scorer=variant,
            auto_score_agents=frozenset(auto_score or ()),
            scoring_timeout_s=timeout,
            shutdown_grace_s=grace,
            max_body_bytes=max_body,
        )
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    judge_model = resolve_model(model, base_url=base_url)
    if judge_model.embedded:
        typer.echo(EMBEDDED_NOTICE, err=True)
    try:
        uvicorn.run(
            create_app(settings, judge_model),
            host=host,
            port=port,
            log_level=log_level.lower(),
            timeout_graceful_shutdown=int(grace) + 5,
        )
    finally:
        judge_model.close()


def main() -> None:
    app()


if __name__ == '__main__':
    main()
