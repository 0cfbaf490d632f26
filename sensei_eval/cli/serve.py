"""`sensei-eval serve`: flags into `ServiceSettings`, the judge model resolved and checked as `judge` does it
(flag, then `SENSEI_EVAL_MODEL`; none named is a usage error), and `sensei_eval.service.create_app` under uvicorn.

The address is checked first: a port in use (or an address that is not this machine's) is a usage error,
exit 2 with a `--port` / `--host` hint, before the database is opened or migrated and before the model is
checked. The check binds as uvicorn binds (`SO_REUSEADDR`), so it fails exactly when uvicorn would.

A token given but empty (`SENSEI_EVAL_TOKEN=''`, `--token ''`, or only whitespace) is not "no token": on an
address other than loopback it is a usage error (exit 2) unless `--public-read` says the service is meant to
run without one (reads open, writes refused); on loopback the service starts without authentication, with a
warning. With no token at all on another address, a warning says that anyone who can reach it may write.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

import typer

from sensei_eval.cli.common import BaseUrlOption, EmbeddedThreadsOption, ModelOption
from sensei_eval.core.extras import requires_extra

__all__ = ('serve',)

# `--max-body`'s default: 5 MiB (`ServiceSettings.max_body_bytes`).
_MAX_BODY_DEFAULT = 5 * 1024 * 1024
# The levels `--log-level` takes (Python's logging levels; anything else is a usage error listing these).
LogLevel = Literal['critical', 'error', 'warning', 'info', 'debug']


def _finite(minimum: float, name: str) -> Callable[[float], float]:
    """A typer callback refusing NaN, ±inf and values under `minimum` (click's ranges let NaN through)."""

    def check(value: float) -> float:
        if not math.isfinite(value) or value < minimum:
            raise typer.BadParameter(f'{value!r} is not a finite number of seconds of at least {minimum:g}', param_hint=name)
        return value

    return check


def serve(
    db: Annotated[str | None, typer.Option(help='Database URL or SQLite path [env: SENSEI_EVAL_DB]')] = None,
    host: Annotated[str, typer.Option(help='Interface to listen on.')] = '127.0.0.1',
    port: Annotated[int, typer.Option(min=1, max=65535, help='Port to listen on.')] = 8000,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    behind_proxy: Annotated[
        bool, typer.Option(help='Name users from X-Forwarded-User/-Email, on requests with the token or from a --trusted-proxy.')
    ] = False,
    token: Annotated[
        str | None, typer.Option(help='Bearer token every route but the health check needs [env: SENSEI_EVAL_TOKEN]')
    ] = None,
    public_read: Annotated[
        bool,
        typer.Option(
            help='Reads, dashboard and WebSocket open to anyone; writes need the token (without one, writes are refused).'
        ),
    ] = False,
    trusted_proxy: Annotated[
        list[str] | None, typer.Option(help='Proxy address whose X-Forwarded-User is trusted without the token; repeatable.')
    ] = None,
    allowed_origin: Annotated[
        list[str] | None, typer.Option(help='Another browser origin allowed to use the WebSocket and writes; repeatable.')
    ] = None,
    allowed_hosts: Annotated[
        list[str] | None,
        typer.Option(
            '--allowed-hosts',
            help='Host name clients may address the service by (DNS rebinding defence); repeatable or '
            "comma-separated, *.example.com for subdomains, '*' for any. Default: --host and localhost.",
        ),
    ] = None,
    judge_names: Annotated[
        list[str] | None,
        typer.Option(
            '--judges',
            help='Judges a run is evaluated with when the request names none (the dashboard\'s "Judge run", and '
            'sampled traces unless --sampling names its own): names or groups, comma-separated or repeated. '
            'Default: core,checks, as `judge`.',
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=0, help='Jobs (evaluations and scorings) running at once here (0: API only).')
    ] = 10,
    scorer: Annotated[
        str, typer.Option(help='Scoring variant: freeform (the score on its last line) or structured (typed output).')
    ] = 'freeform',
    auto_score: Annotated[
        list[str] | None, typer.Option(help="Agent/chain whose completed sessions are auto-scored ('*' = all); repeatable.")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            callback=_finite(0.001, '--timeout'),
            help='Seconds one job (an evaluation or a scoring) may take before it is timed_out.',
        ),
    ] = 300.0,
    grace: Annotated[
        float, typer.Option(callback=_finite(0, '--grace'), help='Seconds in-flight jobs get to finish on shutdown.')
    ] = 30.0,
    max_body: Annotated[
        int, typer.Option(min=1, max=2**31 - 1, help='Largest request body in bytes (larger gets 413).')
    ] = _MAX_BODY_DEFAULT,
    header_timeout: Annotated[
        float,
        typer.Option(
            callback=_finite(0.1, '--header-timeout'),
            help='Seconds a connection may take to send a request line and headers (then it is closed).',
        ),
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(
            callback=_finite(0.1, '--body-timeout'), help='Seconds a request may take to send its whole body (then it is closed).'
        ),
    ] = 60.0,
    sampling: Annotated[
        Path | None, typer.Option(help='Sampler configuration for traced runs on /v1/traces (YAML, TOML or JSON).')
    ] = None,
    alert_webhook: Annotated[
        str | None, typer.Option(help='URL degradation alerts are POSTed to (retried) [env: SENSEI_EVAL_ALERT_WEBHOOK]')
    ] = None,
    embedded_threads: EmbeddedThreadsOption = None,
    log_level: Annotated[LogLevel, typer.Option(case_sensitive=False, help='Log level.')] = 'info',
) -> None:
    """Run the scoring service (API, store, background scoring, WebSocket events)."""
    from sensei_eval.cli.common import ModelFlags, make_console, setup_judge_model, setup_telemetry

    with requires_extra('service', 'the scoring service'):
        from sensei_eval.service import ServiceSettings, create_app
        from sensei_eval.service.config import DEFAULT_DB_URL
        from sensei_eval.service.server import run_server

    problem = _address_problem(host, port)
    if problem is not None:
        typer.echo(f'error: {problem}', err=True)
        raise typer.Exit(2)
    if scorer not in ('freeform', 'structured'):
        raise typer.BadParameter('use freeform or structured', param_hint='--scorer')
    variant: Literal['freeform', 'structured'] = 'structured' if scorer == 'structured' else 'freeform'
    from sensei_eval.cli.common import split_names
    from sensei_eval.evaluators.registry import UnknownJudgeError, resolve_names
    from sensei_eval.production.sampler import SamplerConfig, SamplerConfigError, load_sampler_config

    judges = tuple(split_names(judge_names))
    try:
        resolve_names(judges)
    except UnknownJudgeError as e:
        raise typer.BadParameter(str(e), param_hint='--judges') from None
    try:
        sampler = load_sampler_config(sampling) if sampling is not None else SamplerConfig()
    except SamplerConfigError as e:
        raise typer.BadParameter(str(e), param_hint='--sampling') from None
    if 'judges' not in sampler.model_fields_set:  # a sampling file that names no judges uses the service's
        sampler = sampler.model_copy(update={'judges': judges})
    from sensei_eval.core import logsafe
    from sensei_eval.service.config import normalise_token

    # every log line of this process (httpx, uvicorn included): credentials redacted, control characters escaped
    logsafe.install()
    logging.basicConfig(level=log_level.upper(), format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    raw_token = _given_token(token, host, public_read)
    if raw_token is not None:
        try:
            raw_token, token_warnings = normalise_token(raw_token)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint='--token / SENSEI_EVAL_TOKEN') from None
        for warning in token_warnings:
            logging.getLogger('sensei_eval.service').warning('--token: %s', warning)
        logsafe.register_secret(raw_token)
    for name in ('SENSEI_EVAL_API_KEY', 'OPENAI_API_KEY'):
        logsafe.register_secret(os.environ.get(name))
    try:
        settings = ServiceSettings(
            db_url=db or os.environ.get('SENSEI_EVAL_DB') or DEFAULT_DB_URL,
            behind_proxy=behind_proxy,
            token=raw_token,
            trusted_proxies=frozenset(trusted_proxy or ()),
            public_read=public_read,
            allowed_origins=frozenset(allowed_origin or ()),
            allowed_hosts=_allowed_hosts(allowed_hosts, host),
            concurrency=concurrency,
            scorer=variant,
            judges=judges,
            auto_score_agents=frozenset(auto_score or ()),
            scoring_timeout_s=timeout,
            shutdown_grace_s=grace,
            max_body_bytes=max_body,
            header_timeout_s=header_timeout,
            body_timeout_s=body_timeout,
            sampler=sampler,
            alert_webhook_url=alert_webhook or os.environ.get('SENSEI_EVAL_ALERT_WEBHOOK') or None,
        )
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    # checked as `judge` checks it: a bad model string or key is one line and exit 2; an unreachable
    # server is a warning naming it (the service starts; its scorings fail until the server answers)
    console = make_console(stderr=True)
    setup_telemetry(console)  # the service's own judging spans go where OTEL_* says
    flags = ModelFlags(model, base_url, embedded_threads=embedded_threads)
    judge_model = setup_judge_model(flags, err=console, unreachable_ok=True)
    try:
        run_server(create_app(settings, judge_model), settings, host=host, port=port, log_level=log_level.lower())
    finally:
        judge_model.close()


def _address_problem(host: str, port: int) -> str | None:
    """Why uvicorn could not listen on `host:port` (the port in use, not permitted, not this machine's
    address), with the flag that fixes it; None when it can. Binds a socket as uvicorn does and closes it."""
    import errno
    import socket

    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    with socket.socket(family=family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip('[]'), port))
        except socket.gaierror as e:
            return f'--host {host}: not an address this machine can listen on ({e.strerror})'
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return f'port {port} on {host} is in use (another service is listening there): pick another with --port'
            if e.errno == errno.EACCES:
                return f'port {port} needs privileges this process lacks: pick one above 1023 with --port'
            if e.errno == errno.EADDRNOTAVAIL:
                return f'--host {host} is not an address of this machine: use 127.0.0.1, or 0.0.0.0 for every interface'
            return f'cannot listen on {host}:{port}: {e.strerror or e}'
    return None


def _given_token(flag: str | None, host: str, public_read: bool) -> str | None:
    """The token `--token` (else `SENSEI_EVAL_TOKEN`) gives, None when there is none; a given but empty one is
    refused on a non-loopback `host` unless `public_read` (see the module docstring)."""
    given = flag if flag is not None else os.environ.get('SENSEI_EVAL_TOKEN')
    where = '--token' if flag is not None else 'SENSEI_EVAL_TOKEN'
    log = logging.getLogger('sensei_eval.service')
    if given is not None and not given.strip():
        if not _loopback(host) and not public_read:
            raise typer.BadParameter(
                f'{where} is set but empty: on {host} that would leave every route open to anyone who can reach it. '
                'Give a token, or choose --public-read (reads open to all, writes refused)',
                param_hint=where,
            )
        if not public_read:
            log.warning('%s is set but empty: no authentication (the service answers on loopback only)', where)
        return None
    if given is None and not _loopback(host) and not public_read:
        log.warning(
            'no --token / SENSEI_EVAL_TOKEN on %s: anyone who can reach the service may read and write '
            '(give a token, or --public-read for reads only)',
            host,
        )
    return given


def _loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`): only this machine can connect."""
    name = host.strip().strip('[]').lower()
    if name == 'localhost':
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # another name: it may resolve to any interface


def _allowed_hosts(given: list[str] | None, bound: str) -> frozenset[str]:
    """`--allowed-hosts` (comma-separated or repeated), else the bound address and localhost; bound to
    every interface, also this machine's names (other names need --allowed-hosts)."""
    names = {n.strip() for item in given or () for n in item.split(',') if n.strip()}
    if names:
        return frozenset(names)
    names = {bound.strip('[]'), 'localhost', '127.0.0.1', '::1'}
    if bound in ('0.0.0.0', '::', ''):
        import socket

        names |= {socket.gethostname(), socket.getfqdn()}
    return frozenset(names)
