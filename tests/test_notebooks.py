"""Every notebook in notebooks/ runs top to bottom (so the tutorials cannot rot)."""

from __future__ import annotations

import glob
import os

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("NOTEBOOK_WORK_DIR", str(tmp_path))
    notebook = nbformat.read(path, as_version=4)
    # As in conftest.py: TensorBoard's event reader takes its own TF stub rather than
    # importing TensorFlow (installed for other tests) in every kernel that reads events.
    notf = "import sys, types\nsys.modules['tensorboard.compat.notf'] = types.ModuleType('notf')"
    notebook.cells.insert(0, nbformat.v4.new_code_cell(notf))
    # Run from the repository root, where the notebooks find data/adult and examples/.
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": ROOT}}
    ).execute()
    errors = [
        o
        for cell in notebook.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
