"""The variant generator: rewrites one prompt component from the failure examples routed to it.

Input: the component's name and current text, the rest of the prompt (so a variant doesn't repeat or
contradict the frozen sections), and failure examples — issues the judges found in the current
prompt's runs that the routing sent to this component; the loop sends them grouped by what went wrong
(one entry per kind: its count and a few examples) — plus, optionally, a few runs that passed every
judge (`successful_runs`), so a rewrite keeps what already works. Output: up to N distinct rewrites.

It asks for **one variant per call**, as JSON constrained by a schema (`{"variant": "<text>"}`), with a
small output limit and a per-call time limit: a task shaped for a 135M local model, which, asked for a
list of rewrites in DSPy's chat format it answered with Python code, round after round, each round
taking minutes. The schema goes out as OpenAI's `response_format` `json_schema`; a server that rejects
it (llama-cpp-python's wants `{"type": "json_object", "schema": …}`) is asked that way next, and one
that rejects both gets a plain request whose answer is parsed leniently. An answer is used only if it
is a usable variant: not empty, not the current text or an earlier variant, not code, not far longer
than the component. After a timeout, or two unusable answers in a row, the component ends at once with
the reasons recorded: a model that cannot do the task is not asked again and again. After
`max_timeouts` calls over the run missed the limit, it is not asked at all (a local server still busy with
an abandoned request would make every later call miss it too).

It calls whatever DSPy LM it is given (`dspy.LM` for a hosted model or an OpenAI-compatible server, the
embedded model, or a scripted LM in tests) directly, with chat messages; `lm_calls` counts its requests.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import dspy

from sensei_eval.core.errors import ConfigError, describe_error

__all__ = ('VARIANT_SCHEMA', 'CallLimits', 'VariantGenerator', 'answer_tokens', 'make_dspy_lm', 'unusable_reason')

ResponseFormat = Literal['auto', 'json_schema', 'json_object', 'none']

VARIANT_SCHEMA: dict[str, Any] = {
    'type': 'object',
    # no length bounds: a local server compiles them into the grammar (slow); `max_tokens` bounds the answer
    'properties': {'variant': {'type': 'string'}},
    'required': ['variant'],
    'additionalProperties': False,
}

INSTRUCTIONS = """You improve one section of an AI agent's system prompt.
The failure examples are problems judges found in the agent's runs, routed to this section.
Rewrite the section so the agent avoids those problems: keep its purpose, write plain instructions
(no code, no markdown headers), stay short, and do not repeat the other sections.
Answer with JSON only: {"variant": "<the complete rewritten section>"}"""

# What the generator is shown, clipped: a local model has a small context and reads slowly. The loop
# sends failures grouped by what went wrong (one entry per group: its count and a few examples), so
# these bound groups, not single examples.
MAX_EXAMPLES = 8
MAX_EXAMPLE_CHARS = 1200
MAX_SUCCESSES = 3
MAX_REST_CHARS = 1200


@dataclass(frozen=True)
class CallLimits:
    """One round's limits on each generator call: seconds to answer, tokens in the answer (None: the generator's own)."""

    timeout_s: float | None = None
    max_tokens: int | None = None


class VariantGenerator(dspy.Module):  # type: ignore[misc]
    """Up to N distinct rewrites of one component, one schema-constrained call each; see the module docstring."""

    def __init__(
        self,
        lm: Any = None,
        retries: int = 1,
        adapter: Any = None,
        *,
        timeout_s: float = 60.0,
        max_tokens: int = 1024,
        response_format: ResponseFormat = 'auto',
        max_timeouts: int = 2,
    ) -> None:
        super().__init__()
        self.lm = lm  # None: whatever dspy.configure / dspy.context set
        # Not used for the calls (they are plain chat messages with a JSON schema); kept so callers that pass
        # DSPy's adapter for a model still work.
        self.adapter = adapter
        self.retries = retries
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.response_format: ResponseFormat = response_format
        # the format the calls use now: auto starts with json_schema and steps down when the server rejects one
        self.format_in_use: ResponseFormat = 'json_schema' if response_format == 'auto' else response_format
        self.lm_calls = 0
        # calls that missed the time limit, over the run; at `max_timeouts` the generator is not asked again
        self.timeouts = 0
        self.max_timeouts = max_timeouts

    def max_calls(self, num_variants: int) -> int:
        """The most calls one component can cost: one per variant plus the retries."""
        return num_variants + self.retries

    def forward(
        self,
        component_name: str,
        current_text: str,
        rest_of_prompt: str,
        failure_examples: Sequence[str],
        num_variants: int,
        seed: int = 0,
        limits: CallLimits | None = None,
        successful_runs: Sequence[str] = (),
    ) -> dspy.Prediction:
        """Up to `num_variants` rewrites of `component_name`. `limits` overrides the generator's own time and
        token limits for these calls. (DSPy does not fix this signature: `Module.__call__` passes its
        arguments through, by keyword here.)"""
        timeout_s, max_tokens = (limits.timeout_s, limits.max_tokens) if limits is not None else (None, None)
        if self.timeouts >= self.max_timeouts:
            # a model that missed the time limit this often in the run is too slow for it: don't wait again
            return dspy.Prediction(
                variants=[], errors=[f'not asked: the generator missed the {self.timeout_s:g} s limit {self.timeouts} times']
            )
        lm = self.lm or dspy.settings.lm
        if lm is None:
            raise ConfigError('the variant generator has no LM: pass one or dspy.configure(lm=...)')
        if hasattr(lm, 'num_retries'):
            lm = lm.copy(num_retries=0)  # the time limit is per call: no silent retries inside it
        limit = timeout_s or self.timeout_s
        found: list[str] = []
        errors: list[str] = []
        failed_in_a_row = 0
        for call in range(self.max_calls(num_variants)):
            if len(found) >= num_variants:
                break
            messages = _messages(component_name, current_text, rest_of_prompt, failure_examples, found, successful_runs)
            self.lm_calls += 1
            try:
                budget = answer_tokens(current_text, max_tokens or self.max_tokens)
                text = self._ask(lm, messages, limit, budget, rollout=seed * 1000 + call)
            except TimeoutError:
                self.timeouts += 1
                errors.append(f'call {call + 1}: no answer within {limit:g} s; the component ends here')
                break
            except Exception as e:  # a failed call costs a call, not the run
                text = None
                errors.append(f'call {call + 1}: {describe_error(e, limit=300)}')
            reason = unusable_reason(text, current_text, found) if text is not None else 'the call failed'
            if reason is None and text is not None:
                found.append(text.strip())
                failed_in_a_row = 0
                continue
            if text is not None:
                errors.append(f'call {call + 1}: unusable answer ({reason}): {text[:160]!r}')
            failed_in_a_row += 1
            if failed_in_a_row >= 2:
                errors.append('two unusable answers in a row; the component ends here')
                break
        return dspy.Prediction(variants=found[:num_variants], errors=errors)

    def _ask(self, lm: Any, messages: list[dict[str, str]], timeout_s: float, max_tokens: int, rollout: int) -> str | None:
        """One call under the time limit; in auto mode a server that rejects the format is asked the next way."""
        while True:
            fmt = self.format_in_use
            kwargs: dict[str, Any] = {'max_tokens': max_tokens, 'temperature': 1.0, 'rollout_id': rollout}
            if self._pass_timeout:
                kwargs['timeout'] = timeout_s  # the HTTP client gives up too, so a slow server is not left waiting
            if fmt == 'json_schema':
                kwargs['response_format'] = {
                    'type': 'json_schema',
                    'json_schema': {'name': 'variant', 'schema': VARIANT_SCHEMA, 'strict': True},
                }
            elif fmt == 'json_object':
                kwargs['response_format'] = {'type': 'json_object', 'schema': VARIANT_SCHEMA}
            endpoint = _openai_endpoint(lm)
            try:
                if endpoint is not None:
                    outputs = _with_time_limit(lambda kw=kwargs, ep=endpoint: _call_endpoint(ep, messages, kw), timeout_s)
                else:
                    outputs = _with_time_limit(lambda kw=kwargs: lm(messages=messages, **kw), timeout_s)
            except TimeoutError:
                raise
            except Exception as e:
                if self._pass_timeout and isinstance(e, ValueError) and 'custom engine' in str(e):
                    self._pass_timeout = False  # a DSPy LM with its own engine (scripted): no client settings
                    continue
                following = _NEXT_FORMAT.get(fmt) if self.response_format == 'auto' else None
                if following is not None and _rejects_format(e):
                    self.format_in_use = following
                    continue
                raise
            return _parse(_first_text(outputs))

    _pass_timeout = True


_NEXT_FORMAT: dict[str, ResponseFormat] = {'json_schema': 'json_object', 'json_object': 'none'}


def answer_tokens(current_text: str, cap: int) -> int:
    """The output limit of one call: room for the section plus a few sentences (about 4 characters a token), at
    most `cap` — a small model that rambles is cut off early instead of filling a large limit."""
    return max(64, min(cap, len(current_text) // 3 + 160))


def unusable_reason(text: str | None, current_text: str, earlier: Sequence[str]) -> str | None:
    """Why an answer is not a usable variant (None: it is)."""
    if text is None or not text.strip():
        return 'empty'
    key = _norm(text)
    if key == _norm(current_text):
        return 'the same as the current text'
    if key in {_norm(e) for e in earlier}:
        return 'the same as an earlier variant'
    if _looks_like_code(text):
        return 'code, not prompt text'
    limit = 3 * len(current_text) + 600
    if len(text) > limit:
        return f'too long ({len(text)} characters; at most {limit} for this section)'
    return None


def make_dspy_lm(model: str | None, base_url: str | None = None, api_key: str | None = None) -> Any:
    """A `dspy.LM` for a pydantic-ai style model string (`openai:gpt-5.2`) or an OpenAI-compatible URL."""
    if base_url is not None:
        return dspy.LM(f'openai/{model or "default"}', api_base=base_url, api_key=api_key or 'sk-no-key', cache=False)
    if model is None:
        raise ConfigError('a model is needed for the variant generator')
    provider, _, name = model.partition(':')
    provider = _LITELLM_PROVIDERS.get(provider, provider)
    return dspy.LM(f'{provider}/{name}' if name else model, cache=False)


# pydantic-ai provider prefixes whose LiteLLM (DSPy) name differs
_LITELLM_PROVIDERS = {'google-gla': 'gemini', 'google-vertex': 'vertex_ai', 'bedrock': 'bedrock', 'groq': 'groq'}


# ---------------------------------------------------------------------------------------------------
# Helpers


def _messages(
    name: str, current: str, rest: str, examples: Sequence[str], earlier: Sequence[str], successes: Sequence[str] = ()
) -> list[dict[str, str]]:
    # an entry may span lines (a group: its count, then its examples); each is clipped line by line
    shown = ['\n'.join(_clip(line, MAX_EXAMPLE_CHARS) for line in e.splitlines()) for e in list(examples)[:MAX_EXAMPLES]]
    parts = [
        f'Section to rewrite: {name}',
        f'Current text:\n{current}',
        'Failure examples:\n' + ('\n'.join(f'- {e}' for e in shown) or '- (none)'),
    ]
    if successes:
        kept = [_clip(x, 300) for x in list(successes)[:MAX_SUCCESSES]]
        parts.append('Runs that passed every judge (keep what works for them):\n' + '\n'.join(f'- {x}' for x in kept))
    if rest.strip():
        parts.append(f'Other sections (context only, do not repeat):\n{_clip(rest, MAX_REST_CHARS)}')
    if earlier:
        parts.append('Already proposed (write a different one):\n' + '\n'.join(f'- {_tail(e, 400)}' for e in earlier))
    parts.append('Answer with JSON only: {"variant": "..."}')
    return [{'role': 'system', 'content': INSTRUCTIONS}, {'role': 'user', 'content': '\n\n'.join(parts)}]


def _with_time_limit(fn: Any, timeout_s: float) -> Any:
    """`fn()` on a daemon thread, waited for at most `timeout_s` (a stuck HTTP call is abandoned, not joined)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box['value'] = fn()
        except BaseException as e:
            box['error'] = e

    thread = threading.Thread(target=work, name='sensei-eval-variant', daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f'no answer within {timeout_s:g} s')
    if 'error' in box:
        raise box['error']
    return box.get('value')


def _openai_endpoint(lm: Any) -> tuple[str, str, str] | None:
    """(model, base URL, key) of a `dspy.LM` for an OpenAI-compatible server (`openai/<model>` with an
    `api_base`): called directly, because DSPy sends OpenAI's `max_completion_tokens`, which such servers
    (llama-cpp-python's) ignore — the answer then runs to the end of the context."""
    model, kwargs = getattr(lm, 'model', None), getattr(lm, 'kwargs', None)
    if not isinstance(model, str) or not model.startswith('openai/') or not isinstance(kwargs, dict):
        return None
    base = kwargs.get('api_base') or kwargs.get('base_url')
    if not base:
        return None
    return model.split('/', 1)[1], str(base), str(kwargs.get('api_key') or 'sk-no-key')


def _call_endpoint(endpoint: tuple[str, str, str], messages: list[dict[str, str]], kwargs: dict[str, Any]) -> list[str]:
    """One chat completion from an OpenAI-compatible server, with `max_tokens` and the response format as given."""
    from openai import OpenAI

    model, base_url, api_key = endpoint
    client = OpenAI(base_url=base_url, api_key=api_key, timeout=kwargs.get('timeout'), max_retries=0)
    try:
        extra = {'response_format': kwargs['response_format']} if 'response_format' in kwargs else {}
        response = client.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            max_tokens=kwargs['max_tokens'],
            temperature=kwargs['temperature'],
            **extra,
        )
    finally:
        client.close()
    return [choice.message.content or '' for choice in response.choices]


def _rejects_format(error: BaseException) -> bool:
    """A server error that says the request (its response_format, most likely) is not acceptable: 400/422."""
    if getattr(error, 'status_code', None) in (400, 422):
        return True
    text = f'{type(error).__name__} {error}'.lower()
    keys = ('response_format', 'json_schema', 'badrequest', 'invalidrequest', 'unprocessable', ' 400', ' 422')
    return any(s in text for s in keys)


def _first_text(outputs: Any) -> str:
    if isinstance(outputs, list) and outputs:
        first = outputs[0]
        if isinstance(first, dict):
            return str(first.get('text') or '')
        return str(first)
    return '' if outputs is None else str(outputs)


def _parse(text: str) -> str | None:
    """The variant from a JSON answer; a non-JSON answer is taken as the text itself (checked for use later)."""
    stripped = text.strip()
    if stripped.startswith('```'):
        stripped = re.sub(r'^```\w*\n?|```$', '', stripped).strip()
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        m = re.search(r'"variant"\s*:\s*"((?:[^"\\]|\\.)*)"', stripped, re.DOTALL)
        if m:
            return str(json.loads(f'"{m.group(1)}"'))
        return text
    if isinstance(data, dict):
        value = data.get('variant')
        return value if isinstance(value, str) else None
    return data if isinstance(data, str) else None


_CODE_LINE = re.compile(
    r'^\s*(def |class |import |from \S+ import |return\b|print\(|for \w+ in |while |if .*:\s*$'
    r'|\w+\s*=\s*[\w\[({"\']|#include|\}|function )'
)


def _looks_like_code(text: str) -> bool:
    if '```' in text:
        return True
    lines = [ln for ln in text.splitlines() if ln.strip()]
    code_lines = sum(1 for ln in lines if _CODE_LINE.match(ln))
    if code_lines >= 2 or (lines and code_lines / len(lines) > 0.5):
        return True
    symbols = sum(text.count(c) for c in '{}();=[]')
    return len(text) > 40 and symbols / len(text) > 0.08


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + '…'


def _tail(text: str, n: int) -> str:
    """One line, and its end when long: a rewrite differs from the current text mostly at the end."""
    line = ' '.join(text.split())
    return line if len(line) <= n else '…' + line[-(n - 1) :]


def _norm(text: str) -> str:
    return ' '.join(text.split()).lower()
