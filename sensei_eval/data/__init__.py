"""Data shipped in the package: the sample dataset, the judge CLI's default wherever it runs.

`sample.jsonl` here is a copy of the repo's `datasets/sample.jsonl`; `scripts/make_sample.py` writes both
and `tests/test_extras.py` checks they are identical.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

__all__ = ('SAMPLE_DATASET',)

# a wheel installs as files, so the resource is a real path (no zip import to extract from)
SAMPLE_DATASET = Path(str(importlib.resources.files(__name__).joinpath('sample.jsonl')))
