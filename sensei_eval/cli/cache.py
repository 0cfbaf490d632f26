"""`sensei-eval cache stats|clear|prune`: look at and trim the on-disk judge cache (`sensei_eval.judging.cache`).

The cache lives in `$SENSEI_EVAL_CACHE` (else `~/.cache/sensei-eval`), or `--dir`. `prune --older-than
30d` deletes entries written more than that long ago (units s, m, h, d, w); SQLite reuses the freed
space for new entries. `clear` deletes every entry and gives the space back (also removing the former
journal and one-file-per-entry layouts); a cache database that cannot be read is not an empty cache: `stats`
says so and exits 1, and `clear` removes the file so runs stop warning about it. What `clear` cannot fix is an
error naming the path and what to do, exit 1, never "entries: 0" or a fresh start: a file where the cache's
folder goes, a folder where its database goes (nothing there is the cache's to delete). Entries stored as
binary (not written by sensei-eval, never read) make `stats` exit 1 after its figures.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from sensei_eval.cli.common import make_app
from sensei_eval.judging.cache import CacheUnreadableError, JudgeCache

__all__ = ('app', 'parse_duration')

app = make_app(help='Look at and trim the on-disk judge cache.', no_args_is_help=True)

# Seconds per unit a duration may be written in.
_UNITS = {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400}
_DURATION = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$')

DirOption = Annotated[
    Path | None, typer.Option('--dir', help='Cache directory. Default: $SENSEI_EVAL_CACHE, else ~/.cache/sensei-eval.')
]


def parse_duration(text: str) -> float:
    """Seconds in `30d`, `12h`, `90m`, `45s`, `2w`; ValueError otherwise."""
    m = _DURATION.match(text.lower())
    if not m:
        raise ValueError(f'{text!r} is not a duration like 30d, 12h, 90m, 45s or 2w')
    return float(m.group(1)) * _UNITS[m.group(2)]


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime('%Y-%m-%d %H:%M UTC') if ts is not None else '-'


@app.command()
def stats(directory: DirOption = None) -> None:
    """Entries, size on disk, oldest and newest entry."""
    with JudgeCache(directory) as cache:
        try:
            s = cache.stats()
        except CacheUnreadableError as e:
            typer.echo(f'error: {e}', err=True)
            raise typer.Exit(1) from None
    typer.echo(f'cache:    {s.path}')
    statuses = ', '.join(f'{n:,} {status}' for status, n in sorted(s.by_status.items()))
    typer.echo(f'entries:  {s.entries:,}' + (f' ({statuses})' if statuses else ''))
    typer.echo(f'on disk:  {s.bytes_on_disk / 2**20:,.1f} MiB')
    typer.echo(f'oldest:   {_when(s.oldest)}')
    typer.echo(f'newest:   {_when(s.newest)}')
    if s.binary:
        typer.echo(
            f'error: {s.binary:,} entries in {s.path} are stored as binary, not text (not written by sensei-eval): they '
            'are never read, and those judge calls are made again on every run until a fresh result replaces each; '
            '`sensei-eval cache clear` removes them',
            err=True,
        )
        raise typer.Exit(1)


@app.command()
def clear(directory: DirOption = None) -> None:
    """Delete every cached verdict: the next run judges everything again."""
    with JudgeCache(directory) as cache:
        problem = cache.layout_problem()
        if problem is not None:
            typer.echo(f'error: judge cache cannot be cleared: {problem}', err=True)
            raise typer.Exit(1)
        reason = cache.unreadable()
        if reason is not None:
            removed = cache.remove_unreadable()
            if not removed or cache.unreadable() is not None:
                typer.echo(f'error: {cache.db_path} cannot be read ({reason}) and could not be removed', err=True)
                raise typer.Exit(1)
            typer.echo(
                f'{cache.db_path} could not be read ({reason}): removed {len(removed)} file(s); the next run starts a new cache.'
            )
            return
        n = cache.clear()
    typer.echo(f'{n:,} entries deleted.')


@app.command()
def prune(
    older_than: Annotated[str, typer.Option('--older-than', help='Delete entries written longer ago than this: 30d, 12h, 2w.')],
    directory: DirOption = None,
) -> None:
    """Delete entries written longer ago than --older-than."""
    try:
        seconds = parse_duration(older_than)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint='--older-than') from None
    with JudgeCache(directory) as cache:
        try:
            n = cache.prune(seconds)
        except CacheUnreadableError as e:
            typer.echo(f'error: {e}', err=True)
            raise typer.Exit(1) from None
    typer.echo(f'{n:,} entries older than {older_than} deleted.')


if __name__ == '__main__':
    app()
