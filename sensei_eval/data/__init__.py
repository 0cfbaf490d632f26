"""Data shipped in the package: the sample dataset, the judge CLI's default wherever it runs.

`sample.jsonl` here is a copy of the repo's `datasets/sample.jsonl`; `scripts/make_sample.py` writes both
and `tests/test_extras.py` checks they are identical. `tau2_airline/` holds 50 published tau2-bench runs
with the benchmark's labels (MIT, attribution in its README), for `sensei-eval calibrate --benchmark`.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

__all__ = ('BENCHMARKS', 'SAMPLE_DATASET')

# a wheel installs as files, so the resource is a real path (no zip import to extract from)
SAMPLE_DATASET = Path(str(importlib.resources.files(__name__).joinpath('sample.jsonl')))
# labelled runs shipped for `calibrate --benchmark NAME`: name -> folder with records.jsonl and labels.jsonl
BENCHMARKS = {'tau2-airline': Path(str(importlib.resources.files(__name__).joinpath('tau2_airline')))}
