"""On-disk cache of judge results, so a re-run with nothing changed makes zero model calls.

The key is everything that can change a verdict: the judge's criteria hash, the model's name and
settings, the transcript's SHA256 (the transcript, not the raw record: a change the judge can't see
doesn't invalidate), and the repeat index (so `--repeat 3` really asks three times). Only successful
results are stored: an error is retried on the next run, never replayed.

Default location: `$SENSEI_EVAL_CACHE`, else `~/.cache/sensei-eval`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .reports import JudgeResult, write_json_atomic

__all__ = ('JudgeCache', 'default_cache_dir')


def default_cache_dir() -> Path:
    env = os.environ.get('SENSEI_EVAL_CACHE')
    if env:
        return Path(env)
    return Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'sensei-eval'


class JudgeCache:
    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(criteria_hash: str, model: str, settings: dict[str, Any], transcript_sha256: str, repeat: int) -> str:
        material = json.dumps([criteria_hash, model, settings, transcript_sha256, repeat], sort_keys=True, default=str)
        return hashlib.sha256(material.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / 'judge' / key[:2] / f'{key}.json'

    def get(self, key: str) -> JudgeResult | None:
        path = self._path(key)
        try:
            result = JudgeResult.model_validate_json(path.read_text(encoding='utf-8'))
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return result.model_copy(update={'cached': True})

    def put(self, key: str, result: JudgeResult) -> None:
        if result.status != 'ok':
            return
        write_json_atomic(self._path(key), result.model_dump_json())
