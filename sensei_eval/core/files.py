"""Writing files so that a reader never sees half of one.

Reports, summaries, optimizer state, comparison tables and patched prompts are all read by other processes
(the service, a dashboard, the next run) while a run writes them; each goes through `write_text_atomic`.
Kept in core, apart from any one kind of file, because every layer above writes something.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ('write_text_atomic',)


def write_text_atomic(path: Path, data: str, *, durable: bool = True) -> None:
    """Write `data` (UTF-8) via a temp file beside `path` and a rename, so a reader never sees half a file.

    `durable` also flushes the file to disk before the rename (it then survives a power cut, not just
    a crash of the process); that costs milliseconds a file, which a run's per-record reports skip."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f'.{path.name}.', suffix='.tmp')
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
