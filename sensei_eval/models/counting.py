"""Token counts for the judge model, and the budgets they give: how much of a request the transcript may take.

A budget is only a guard if it is counted the way the model counts. `counter_for(model)` picks:

* the embedded model: its own tokenizer, read from the GGUF file with llama.cpp's `vocab_only=True`
  (the vocabulary alone, no weights: loaded once per process in well under a second, no server);
* an OpenAI model: `tiktoken`'s encoding for that model name, when the encoding file is already on disk
  (tiktoken downloads encodings on first use; we never do unless `SENSEI_EVAL_TIKTOKEN_DOWNLOAD=1`);
* anything else, or when the above cannot load: a conservative estimate, UTF-8 bytes / 2.5.

Why bytes / 2.5: over the 50 published tau2-airline runs the SmolLM2 tokenizer (a small, 49k vocabulary,
so more tokens per text than most) gives 2.55 to 4.30 characters per token (mean 3.26), and 2.56 bytes
per token at the least; on the sample dataset 2.56 to 3.95. The old characters / 3.2 undercounted the
densest runs by up to 1.29x; bytes / 2.5 counts every one of those runs high. Text it still undercounts
exists (long digit strings are one token per digit, emoji and CJK run 1.3 to 1.8 bytes per token), which
is why an exact counter is used whenever there is one, and why `SAFETY_MARGIN` stays.

The budget is computed on the assembled request: system prompt, fenced transcript, the judge's task
(question, rubric, schema) and the chat template's own tokens must leave `output_reserve` free in the
context (`prompt_limit`, `transcript_budget`). Re-cutting a transcript that does not fit is
`models.fitting`'s.
"""

from __future__ import annotations

import atexit
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sensei_eval.core.transcript import estimate_tokens

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings


class SizedModel(Protocol):
    """What counting reads of a judge model (`models.judge_model.SizedModel`, which imports this module)."""

    @property
    def model(self) -> Model | str: ...
    @property
    def embedded(self) -> bool: ...
    @property
    def settings(self) -> ModelSettings: ...
    @property
    def transcript_budget(self) -> int: ...


__all__ = (
    'DEFAULT_OUTPUT_RESERVE',
    'ESTIMATE_BYTES_PER_TOKEN',
    'MIN_TRANSCRIPT_TOKENS',
    'SAFETY_MARGIN',
    'SizedModel',
    'TokenCounter',
    'context_tokens',
    'counter_for',
    'estimate_counter',
    'llama_counter',
    'output_reserve',
    'prompt_limit',
    'tiktoken_counter',
    'transcript_budget',
)

ESTIMATE_BYTES_PER_TOKEN = 2.5
# Tokens kept free besides the output reserve: the transcript and the task are counted apart and added
# (a token may merge across the seam), and a server's chat template may differ slightly from ours.
SAFETY_MARGIN = 64
# The answer's room when the model's settings do not cap it (`max_tokens`).
DEFAULT_OUTPUT_RESERVE = 1024
# A transcript budget never goes below this: a prompt that leaves less is reported, not sent empty.
MIN_TRANSCRIPT_TOKENS = 200


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens of text, and of a two-message chat request (system + user) with its template."""

    name: str
    exact: bool
    _count: Callable[[str], int]
    message_overhead: int = 8  # template tokens around one message
    reply_overhead: int = 4  # template tokens that open the model's reply (and a BOS token)

    def count(self, text: str) -> int:
        return self._count(text) if text else 0

    def __call__(self, text: str) -> int:
        """A counter is also the `count_tokens` callable `render_transcript` takes."""
        return self.count(text)

    def chat(self, system: str, user: str) -> int:
        return self.count(system) + self.count(user) + 2 * self.message_overhead + self.reply_overhead


def estimate_counter(bytes_per_token: float = ESTIMATE_BYTES_PER_TOKEN) -> TokenCounter:
    """The conservative estimate (see the module docstring for the measurements behind 2.5); by default
    the same rule the transcript renderer counts with (`transcript.estimate_tokens`)."""
    name = f'estimate (UTF-8 bytes / {bytes_per_token:g})'
    if bytes_per_token == ESTIMATE_BYTES_PER_TOKEN:
        return TokenCounter(name, False, estimate_tokens)
    return TokenCounter(name, False, lambda text: math.ceil(len(text.encode('utf-8', 'replace')) / bytes_per_token))


@cache
def llama_counter(gguf: str) -> TokenCounter:
    """A GGUF model's own tokenizer; `vocab_only` loads the vocabulary without the weights."""
    from llama_cpp import Llama
    from llama_cpp._utils import suppress_stdout_stderr

    with suppress_stdout_stderr(disable=False):  # llama.cpp writes its loader log to fd 2 even when not verbose
        llm = Llama(model_path=gguf, vocab_only=True, verbose=False)
    # freed while the interpreter still runs: left to the garbage collector at exit, llama.cpp's finaliser
    # finds its C library already unloaded and prints a traceback after every command
    atexit.register(llm.close)
    lock = threading.Lock()  # the llama.cpp vocabulary is not documented as thread-safe

    def tokens(text: str, special: bool = False) -> int:
        with lock:
            return len(llm.tokenize(text.encode('utf-8', 'replace'), add_bos=False, special=special))

    # ChatML, as in SmolLM2's template: `<|im_start|>role\n...<|im_end|>\n` per message, then
    # `<|im_start|>assistant\n`; one more for a BOS token
    message = tokens('<|im_start|>user\n<|im_end|>\n', special=True)
    reply = tokens('<|im_start|>assistant\n', special=True) + 1
    return TokenCounter(f'llama.cpp tokenizer of {Path(gguf).name}', True, tokens, message, reply)


def tiktoken_counter(model_name: str, *, allow_download: bool | None = None) -> TokenCounter | None:
    """tiktoken's encoding for an OpenAI model name, or None when it is unknown or not on disk.

    tiktoken fetches an encoding file the first time it is used; we look for the cached file first and
    only let it download with `allow_download` (default: the `SENSEI_EVAL_TIKTOKEN_DOWNLOAD=1` setting)."""
    try:
        import tiktoken
        from tiktoken.model import encoding_name_for_model
    except ImportError:
        return None
    try:
        encoding_name = encoding_name_for_model(model_name)
    except KeyError:
        return None
    if allow_download is None:
        allow_download = os.environ.get('SENSEI_EVAL_TIKTOKEN_DOWNLOAD') == '1'
    if not allow_download and not _tiktoken_cached(encoding_name):
        return None
    try:
        encoding = tiktoken.get_encoding(encoding_name)
    except Exception:  # no network, a corrupt cache: the estimate instead, never a crash
        return None

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    # OpenAI's chat format: ~3 tokens around each message, 3 to open the reply
    return TokenCounter(f'tiktoken {encoding_name}', True, count, 3, 3)


def _tiktoken_cached(encoding_name: str) -> bool:
    """Whether tiktoken would read `encoding_name` from its cache (its own cache-path rule) rather than fetch it."""
    import hashlib
    import tempfile

    cache_dir = os.environ.get('TIKTOKEN_CACHE_DIR') or os.environ.get('DATA_GYM_CACHE_DIR')
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), 'data-gym-cache')
    if not cache_dir:
        return False
    url = f'https://openaipublic.blob.core.windows.net/encodings/{encoding_name}.tiktoken'
    return os.path.isfile(os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest()))


def counter_for(model: SizedModel) -> TokenCounter:
    """The most exact counter available for the judge model (see the module docstring)."""
    if model.embedded:
        return _embedded_counter()
    name = _openai_model_name(model)
    if name is not None and (counter := tiktoken_counter(name)) is not None:
        return counter
    return estimate_counter()


@cache
def _embedded_counter() -> TokenCounter:
    try:
        from sensei_eval.models.embedded import gguf_path

        return llama_counter(str(gguf_path()))
    except Exception:  # the embedded extra missing, the file unreadable: count conservatively
        return estimate_counter()


def _openai_model_name(model: SizedModel) -> str | None:
    if isinstance(model.model, str):
        provider, _, name = model.model.partition(':')
        return name if provider == 'openai' and name else None
    if getattr(model.model, 'system', None) == 'openai':
        model_name = getattr(model.model, 'model_name', None)
        return model_name if isinstance(model_name, str) else None
    return None


def context_tokens(model: SizedModel) -> int | None:
    """The model's context window in tokens, when we know it (the embedded model's); None otherwise."""
    if model.embedded:
        from sensei_eval.models.embedded import N_CTX

        return N_CTX
    return None


def output_reserve(model: SizedModel) -> int:
    """Tokens kept free for the answer: the model's `max_tokens`, else `DEFAULT_OUTPUT_RESERVE`."""
    max_tokens: Any = model.settings.get('max_tokens')
    return max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else DEFAULT_OUTPUT_RESERVE


def prompt_limit(model: SizedModel) -> int | None:
    """The most input tokens one request may carry: context - output reserve - margin (None: unknown context)."""
    context = context_tokens(model)
    if context is None:
        return None
    return context - output_reserve(model) - SAFETY_MARGIN


def transcript_budget(model: SizedModel, fixed_tokens: int) -> int:
    """Transcript tokens that fit beside `fixed_tokens` of prompt (system, task, template).

    With a known context: what the context leaves, capped by the model's configured budget. Without:
    the configured budget."""
    limit = prompt_limit(model)
    if limit is None:
        return model.transcript_budget
    return max(MIN_TRANSCRIPT_TOKENS, min(model.transcript_budget, limit - fixed_tokens))
