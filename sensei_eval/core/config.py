"""Where sensei-eval keeps its files, and the one reader of the config files a user writes.

The cache directory is shared by the judge cache (`judging.cache`) and the embedded model's server files
(`models.embedded`), which sit in different layers; it is decided here, once.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ('default_cache_dir',)


def default_cache_dir() -> Path:
    env = os.environ.get('SENSEI_EVAL_CACHE')
    if env:
        return Path(env)
    return Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'sensei-eval'
