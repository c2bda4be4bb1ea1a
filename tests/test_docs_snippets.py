"""The Python blocks of the README and of the guides in docs/ run, as a reader would run them.

Each page's blocks run in order (Sybil parses them) in a scratch directory that sees the
repository's ``data/`` and ``examples/``. A block fenced ```` ```python ```` starts afresh;
one fenced ```` ```python continued ```` continues the block before it, with its names. A
failing block fails its page's test with the page's own file name and line numbers in the
traceback. What a page changes in the process (logger levels and handlers, environment
variables, ``memory://`` files) is undone after it.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
import pathlib
import re
import sys

import pytest
from sybil import Sybil
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.markdown import CodeBlockParser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))
)
# Pages whose blocks take more than a few seconds of CPU (several models compiled, the
# module libraries imported, a model server started): run by CI, left out while developing.
SLOW = {"docs/canned.md", "docs/modules.md", "docs/serving.md"}
LOGGERS = ("", "estimator", "tensorflow", "absl", "jax", "jaxlib", "orbax")


class _Block:
    """Runs a block in the page's namespace, emptied first unless the block continues."""

    def __init__(self, continues: bool) -> None:
        self.continues = continues
        self.run = PythonEvaluator()

    def __call__(self, example):
        if not self.continues:
            example.namespace.clear()
        return self.run(example)


SYBIL = Sybil(
    parsers=[
        CodeBlockParser(language="python", evaluator=_Block(continues=False)),
        CodeBlockParser(language="python continued", evaluator=_Block(continues=True)),
    ]
)


def _fences(text: str) -> list[tuple[int, str]]:
    """``(line, info string)`` of every fenced code block of a Markdown text."""
    fences, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r"^\s*```(.*)$", line)
        if match:
            if not inside:
                fences.append((number, match.group(1).strip()))
            inside = not inside
    return fences


def _run_main_job() -> None:
    """``python examples/census.py --epochs 1``, in process: the serving guide serves the
    export it leaves in runs/census/export."""
    spec = importlib.util.spec_from_file_location("census", os.path.join("examples", "census.py"))
    census = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(census)
    census.main(["--epochs", "1"])


SETUP = {"docs/serving.md": _run_main_job}


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A scratch working directory with data/ and examples/, and the process's logging,
    environment and memory:// store restored after the page."""
    for name in ("data", "examples"):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    monkeypatch.chdir(tmp_path)
    environ = dict(os.environ)
    loggers = {n: logging.getLogger(n) for n in LOGGERS}
    saved = {n: (lg.level, list(lg.handlers), lg.propagate) for n, lg in loggers.items()}
    yield tmp_path
    os.environ.clear()
    os.environ.update(environ)
    for name, (level, handlers, propagate) in saved.items():
        loggers[name].setLevel(level)
        loggers[name].handlers[:] = handlers
        loggers[name].propagate = propagate
    if "fsspec" in sys.modules:
        import fsspec

        memory = fsspec.filesystem("memory")
        if memory.exists("/docs"):
            memory.rm("/docs", recursive=True)


@pytest.mark.parametrize(
    "page", [pytest.param(p, marks=[pytest.mark.slow] if p in SLOW else []) for p in PAGES]
)
def test_page_code_runs(page, scratch):
    """Every Python block of the page runs without an error, in the page's order."""
    document = SYBIL.parse(pathlib.Path(ROOT, page))
    examples = list(document.examples())
    python = [info for _, info in _fences(document.text) if info.split()[:1] == ["python"]]
    assert len(examples) == len(python)  # every Python block is one of Sybil's examples
    if page in SETUP:
        SETUP[page]()
    for example in examples:
        example.evaluate()


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_are_run_or_continued(page):
    """A Python block is fenced ``python`` (run afresh) or ``python continued`` (after
    another Python block of the page); no other spelling, so that none is skipped."""
    with open(os.path.join(ROOT, page)) as f:
        fences = _fences(f.read())
    previous_python = False
    for line, info in fences:
        words = info.split()
        if words[:1] and words[0].lower() in ("python", "py", "python3", "pycon", "ipython"):
            assert info in ("python", "python continued"), f"{page}:{line}: ```{info}"
            assert info == "python" or previous_python, f"{page}:{line}: nothing to continue"
            previous_python = True
        assert info != "", f"{page}:{line}: a code block without a language"
