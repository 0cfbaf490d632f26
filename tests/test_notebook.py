"""`notebooks/optimize.ipynb` runs top to bottom (offline: simulated agent, checks, the example's blind proposer)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def test_optimize_notebook_executes() -> None:
    notebook = nbformat.read(ROOT / 'notebooks' / 'optimize.ipynb', as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name='python3', resources={'metadata': {'path': str(ROOT)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == 'code' for o in cell.get('outputs', [])]
    assert not [o for o in outputs if o.get('output_type') == 'error']
    text = ''.join(o.get('text', '') for o in outputs if o.get('output_type') == 'stream')
    assert 'froze variant' in text and '## ' in text  # something was frozen and a suggestion printed
    assert 'held-out validation queries' in text  # the suggestion reports its validation gain
    assert 'routing: profile map' in text
