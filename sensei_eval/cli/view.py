"""`sensei-eval view RUN [RUN2]`: the command over `judging.view.write_view`.

With two runs, `--gate comparison.json` (what `sensei-eval validate` wrote) puts the gate's own decision on
the page; without it the page says it shows none. `validate` writes its `view.html` with its decision.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sensei_eval.cli.common import make_app, make_console
from sensei_eval.judging.run_folder import RunFolder, RunFolderError
from sensei_eval.judging.view import DEFAULT_NAME, DEFAULT_PAGE_SIZE, write_view

if TYPE_CHECKING:
    from sensei_eval.validate.results import Comparison

__all__ = ('app', 'main', 'not_a_run', 'view')

app = make_app(help='Write a judge run (or two, compared) as one self-contained HTML file.')


@app.command()
def view(
    runs: Annotated[list[Path], typer.Argument(help='A run folder, and optionally a second one to compare with.')],
    out: Annotated[Path | None, typer.Option('--out', help=f'HTML file to write (default RUN/{DEFAULT_NAME}).')] = None,
    page_size: Annotated[
        int,
        typer.Option(
            '--page-size',
            min=0,
            help='Records shown in full per page; the rest go to page files beside it (0: everything on one page).',
        ),
    ] = DEFAULT_PAGE_SIZE,
    gate: Annotated[
        Path | None,
        typer.Option(
            '--gate',
            metavar='FILE',
            help='With two runs: the comparison.json `sensei-eval validate` wrote for them; its decision goes on the page.',
        ),
    ] = None,
) -> None:
    """Write RUN as one HTML file (no network needed to open it); with RUN2, what changed."""
    err, out_console = make_console(stderr=True), make_console()
    if len(runs) > 2:
        raise typer.BadParameter('give one run folder, or two to compare', param_hint='RUN')
    if gate is not None and len(runs) != 2:
        raise typer.BadParameter('a gate decides between two runs: give RUN and RUN2', param_hint='--gate')
    for run in runs:
        problem = not_a_run(run)
        if problem is not None:
            err.print(f'error: {problem}', markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2)
    decision = _read_gate(gate) if gate is not None else None
    try:
        path = write_view(runs, out, page_size=page_size, gate=decision)
    except (FileNotFoundError, RunFolderError) as e:
        err.print(f'error: {e}', markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    out_console.print(str(path), markup=False, highlight=False, soft_wrap=True)


def _read_gate(path: Path) -> Comparison:
    """`validate`'s comparison.json, or a usage error naming the file and what is wrong (imported here:
    `validate` needs the stats extra, which a plain `view` does not)."""
    from pydantic import ValidationError

    from sensei_eval.core.errors import validation_message
    from sensei_eval.validate.results import Comparison

    try:
        return Comparison.model_validate_json(path.read_text(encoding='utf-8'))
    except OSError as e:
        raise typer.BadParameter(f'cannot read {path}: {e.strerror or e}', param_hint='--gate') from None
    except ValidationError as e:
        raise typer.BadParameter(
            f'{path} is not a comparison.json of validate: {validation_message(e)}', param_hint='--gate'
        ) from None


def not_a_run(path: Path, *, shown: int = 5) -> str | None:
    """Why `path`, an existing folder, holds no run (no summary, no reports), naming the runs found
    inside it (`view reports` for `view reports/<run>`); None when it is a run, or not a folder (those
    errors are `write_view`'s)."""
    if not path.is_dir():
        return None
    folder = RunFolder(path)
    if folder.summary_path.is_file() or folder.report_paths():
        return None
    inside = sorted(
        (p for p in path.iterdir() if p.is_dir() and (RunFolder(p).summary_path.is_file() or RunFolder(p).report_paths())),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    if not inside:
        return f'{path} holds no judge run (no summary.json, no reports)'
    names = '\n'.join(f'  sensei-eval view {p}' for p in inside[:shown])
    more = f'\n  … and {len(inside) - shown} more' if len(inside) > shown else ''
    return f'{path} is not a run but holds {len(inside)} run(s); the newest first:\n{names}{more}'


def main() -> None:
    app(prog_name='sensei-eval view')
