"""The scoring service's settings: one frozen dataclass, filled by the CLI or by tests.

Everything that changes the service's behaviour is here, with the default the CLI uses. Reliability
knobs (retries, breaker, timeout, grace, concurrency, heartbeat) are explicit so tests can shrink them
to milliseconds instead of waiting on production timings.
"""

from __future__ import annotations

import os
import socket
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

from sensei_eval.core.sanitize import MAX_JSON_VALUES
from sensei_eval.core.traces import MAX_REQUEST_ATTRIBUTES, MAX_REQUEST_SPANS, TraceConfig
from sensei_eval.evaluators.registry import DEFAULT_JUDGES, UnknownJudgeError, resolve_names
from sensei_eval.production.alerts import AlertRule
from sensei_eval.production.sampler import SamplerConfig

__all__ = ('DEFAULT_DB_URL', 'ServiceSettings', 'normalise_token')

# The embedded default store: a SQLite file in the working directory.
DEFAULT_DB_URL = 'sqlite:///sensei-eval.db'
# How much larger than the body limit a gzip body may inflate (span JSON compresses about 10:1).
_INFLATE_FACTOR = 20


def normalise_token(raw: str) -> tuple[str, list[str]]:
    """The token as it is compared (surrounding whitespace stripped, Unicode NFC), with a warning for each
    thing that may lock clients out; ValueError for a token no client can send (empty, a control character).

    A header value carries bytes: `Authorization: Bearer <token>` is compared as UTF-8 bytes after the same
    strip and NFC (`guard.identify`), so `tökén` typed on two systems matches. A trailing newline
    (`SENSEI_EVAL_TOKEN=$'secret\\n'`, a file read whole) is stripped with a warning."""
    warnings = []
    token = unicodedata.normalize('NFC', raw.strip())
    if not token:
        raise ValueError('token must not be empty')
    if token != raw:
        if raw.strip() != raw:
            warnings.append('the token had whitespace around it (a trailing newline?): it was stripped')
        if unicodedata.normalize('NFC', raw.strip()) != raw.strip():
            warnings.append('the token was not in Unicode NFC form: it is compared in NFC')
    if any(unicodedata.category(c) in ('Cc', 'Cf', 'Zl', 'Zp') for c in token):
        raise ValueError('the token contains a control or format character, which no HTTP client can send in a header')
    if not token.isascii():
        warnings.append(
            'the token has non-ASCII characters: some HTTP clients cannot send them in a header '
            '(it is compared as UTF-8 bytes); an ASCII token is safer'
        )
    return token, warnings


@dataclass(frozen=True)
class ServiceSettings:
    """How one service process runs."""

    db_url: str = DEFAULT_DB_URL
    # Take the user's name from X-Forwarded-User / X-Forwarded-Email (set by an authenticating proxy such
    # as oauth2-proxy) -- only on requests that also carry the token, or that come from a trusted proxy
    # address: anyone can send the header, so on its own it proves nothing.
    behind_proxy: bool = False
    # A bearer token every route except the health check requires (None: no token). See `auth_required`.
    token: str | None = None
    # Client addresses (the proxy's, as the service sees them) whose X-Forwarded-User is trusted without
    # the token. Only with `behind_proxy`.
    trusted_proxies: frozenset[str] = frozenset()
    # Reads (GET/HEAD), the dashboard, /docs and the WebSocket are open to anyone; writes still need the token
    # (or a trusted proxy's user). Without either, writes are refused (`read_only`): the choice `serve` asks for
    # before it runs on a non-loopback address without a token.
    public_read: bool = False
    # Browser origins (scheme://host[:port]) besides the service's own that may open the WebSocket and
    # send writes; requests without an Origin header (non-browser clients) are not affected.
    allowed_origins: frozenset[str] = frozenset()
    # Host names requests may address the service by (the `Host` header without its port): the defence
    # against DNS rebinding, where another site's name resolves to this address. `*.example.com` matches
    # subdomains, '*' turns the check off. `serve` defaults to the bound address and localhost.
    allowed_hosts: frozenset[str] = frozenset({'127.0.0.1', 'localhost', '::1'})
    # Request bodies larger than this get 413 (a QueryRecord with long tool results fits easily).
    max_body_bytes: int = 5 * 1024 * 1024
    # Slow clients (`server.DeadlineProtocol`): seconds a connection may take to send a request's head, and
    # then its whole body, before it is closed.
    # Most JSON values one request body may hold (`sanitize.json_value_bound`; 413 past it), counted before
    # it is parsed: memory, not bytes, is what a body of a million `{}` costs. OTLP requests get
    # `otlp_max_values`, derived from the span and attribute caps.
    max_json_values: int = MAX_JSON_VALUES
    # The most a gzip body may inflate to, measured as it inflates (`inflated_limit`: also at most 20 times
    # `max_body_bytes`, as span JSON compresses about 10:1, and never less than it); an OTLP exporter's batch
    # of a few hundred spans is a few MiB of JSON.
    max_inflated_bytes: int = 32 * 1024 * 1024
    # CPU seconds measuring and parsing one request body may take (`body_budget`; 413 past it): a backstop,
    # as the other limits already bound it (a 32 MiB body of the densest JSON takes about a second).
    parse_cpu_s: float = 10.0
    # Bodies larger than `body_budget.INLINE_BYTES` parsed at once, each in a worker thread (the rest wait):
    # what memory holds at most, while the event loop keeps answering.
    parse_concurrency: int = 2
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    # Scorings and evaluations running at once in this process; the rest wait, pending, in the store.
    # 0 makes an API-only process: it queues work for its peers (PostgreSQL) and runs none itself.
    concurrency: int = 10
    # The scoring variant new scorings use: the freeform two-turn scorer or the structured one.
    scorer: Literal['freeform', 'structured'] = 'freeform'
    # The judges (names or groups) `POST /sessions/{id}/evaluate` runs when the body names none: by default
    # the CLI's (`registry.DEFAULT_JUDGES`, the core LLM judges and the checks), so a run scores the same on both.
    judges: tuple[str, ...] = DEFAULT_JUDGES
    # Agents/chains whose completed sessions are scored on ingestion; '*' means every agent.
    auto_score_agents: frozenset[str] = frozenset()
    # Model requests: attempts per request and the first backoff bound (the one retry policy, `sensei_eval.models.retry`).
    model_attempts: int = 3
    retry_backoff_s: float = 1.0
    # Circuit breaker: consecutive failed calls that open it, and how long it stays open before one trial call.
    breaker_threshold: int = 5
    breaker_reset_s: float = 30.0
    # Wall-clock limit of one scoring (all its model calls); past it the scoring is `timed_out`.
    scoring_timeout_s: float = 300.0
    # On shutdown, how long in-flight scorings may take to finish before they are cancelled.
    shutdown_grace_s: float = 30.0
    # How often a process proves it is alive, how old a heartbeat may be before its rows are orphans,
    # and how often it looks for pending work other processes queued.
    heartbeat_s: float = 5.0
    stale_after_s: float = 30.0
    poll_s: float = 1.0
    # Agent traces on `POST /v1/traces`: which attributes carry query id, rating, feedback, agent and
    # prompt version, and how long a trace waits for its root span (`traces.TraceConfig`).
    traces: TraceConfig = field(default_factory=TraceConfig)
    # Which finished traced runs are judged, with which judges per agent, within what budget of judge
    # calls per hour (`sampler.SamplerConfig`); sampled runs are queued as evaluations.
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    # Spans and attributes one `POST /v1/traces` may carry (413 naming the cap past either; see
    # `traces.MAX_REQUEST_SPANS` for why these numbers).
    otlp_max_spans: int = MAX_REQUEST_SPANS
    otlp_max_attributes: int = MAX_REQUEST_ATTRIBUTES
    # How often pending traces are checked against the root-span timeout.
    trace_sweep_s: float = 5.0
    # Degradation alerts (`alerts.AlertRule`: windows, minimum counts, alpha, hysteresis); how often the watcher
    # reads finished evaluations and how old one must be (a row committed late is not skipped); the webhook
    # alerts are POSTed to, with its attempts, first backoff (doubling) and per-attempt timeout.
    alert_rule: AlertRule = field(default_factory=AlertRule)
    alert_poll_s: float = 2.0
    alert_lag_s: float = 2.0
    alert_webhook_url: str | None = None
    alert_webhook_attempts: int = 5
    alert_webhook_backoff_s: float = 1.0
    alert_webhook_timeout_s: float = 10.0
    worker_id: str = field(default_factory=lambda: f'{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}')

    def __post_init__(self) -> None:
        if self.behind_proxy and not self.token and not self.trusted_proxies:
            raise ValueError(
                'behind_proxy needs a token (which the proxy sends along) or trusted proxy addresses: '
                'X-Forwarded-User alone can be sent by anyone'
            )
        if self.trusted_proxies and not self.behind_proxy:
            raise ValueError('trusted_proxies only means something with behind_proxy')
        if self.token is not None:
            object.__setattr__(self, 'token', normalise_token(self.token)[0])
        if self.max_body_bytes < 1:
            raise ValueError('max_body_bytes must be at least 1')
        if self.parse_concurrency < 1 or not self.parse_cpu_s > 0:
            raise ValueError('parse_concurrency must be at least 1 and parse_cpu_s above 0')
        if not self.judges:
            raise ValueError('judges must name at least one judge or group')
        try:
            resolve_names(self.judges)
        except UnknownJudgeError as e:
            raise ValueError(str(e)) from None

    @property
    def otlp_max_values(self) -> int:
        """The JSON value cap of one `POST /v1/traces` (after decompression): room for `otlp_max_spans` spans
        of about 40 values and `otlp_max_attributes` attributes of about 8, as OTLP/JSON writes them."""
        return max(self.max_json_values, 40 * self.otlp_max_spans + 8 * self.otlp_max_attributes)

    @property
    def inflated_limit(self) -> int:
        """The most bytes a gzip body may inflate to: `max_inflated_bytes`, at most 20 times the body limit and
        never less than it."""
        return max(min(self.max_inflated_bytes, _INFLATE_FACTOR * self.max_body_bytes), self.max_body_bytes)

    @property
    def auth_required(self) -> bool:
        """Whether requests must prove who they are (a token, or a trusted proxy's user header)."""
        return bool(self.token) or bool(self.behind_proxy and self.trusted_proxies)

    @property
    def read_only(self) -> bool:
        """Whether every write is refused: reads are public and nothing could authenticate a write."""
        return self.public_read and not self.auth_required

    def auto_scores(self, agent: str | None) -> bool:
        return '*' in self.auto_score_agents or (agent is not None and agent in self.auto_score_agents)
