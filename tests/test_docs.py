"""The documentation site builds with warnings as errors, and its API reference has a page
for every public name."""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import subprocess
import sys
import zlib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")


def _conf():
    spec = importlib.util.spec_from_file_location("docs_conf", os.path.join(DOCS, "conf.py"))
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


def _inventory(path: str) -> set[str]:
    """The object names of a Sphinx ``objects.inv`` (four header lines, then zlib)."""
    with open(path, "rb") as f:
        for _ in range(4):
            f.readline()
        lines = zlib.decompress(f.read()).decode().splitlines()
    return {line.split(" ", 1)[0] for line in lines}


@pytest.mark.slow
def test_docs_build_with_warnings_as_errors_and_document_every_public_name(tmp_path):
    """``python -m sphinx -W --keep-going -b html docs <out>`` (the README's command)
    succeeds with no warning (broken references, links, docstring markup), and every name
    reached from the public faces through ``__all__`` is a documented object, or another
    name of one."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", DOCS,
         str(tmp_path / "html")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-6000:]
    assert "WARNING" not in build.stderr
    documented = _inventory(str(tmp_path / "html" / "objects.inv"))
    names, aliases = _conf().public_names()
    assert len(names) > 300
    assert not [n for n in names if n not in documented]
    assert set(aliases.values()) <= documented
    for page in ("getting_started", "serving", "porting", "performance", "api/index"):
        assert (tmp_path / "html" / f"{page}.html").is_file()
    assert (tmp_path / "html" / "api" / "_generated" / "estimator.compat.v1.html").is_file()


def test_public_names_follow_all_once_per_object():
    """The reference's list of names: breadth first through ``__all__`` from the faces, each
    object once under its first name, its other names as aliases of that one."""
    import estimator

    names, aliases = _conf().public_names()
    assert "estimator.Estimator" in names and "canned.LinearClassifier" in names
    assert "estimator.numpy_input_fn" not in names  # not in estimator.__all__
    assert "estimator.inputs.numpy_input_fn" in names
    # estimator.hooks re-exports the hooks estimator exports: the top-level name comes first.
    assert aliases["estimator.hooks.LoggingTensorHook"] == "estimator.LoggingTensorHook"
    assert estimator.hooks.LoggingTensorHook is estimator.LoggingTensorHook
    assert not set(names) & set(aliases)
    assert len(names) == len(set(names))


def test_paths_named_in_the_guides_exist():
    """Every repository path the README and the guides name in code spans (``tests/...``,
    ``estimator/...``, ``benchmarks/...``) is there: files move, and the guides follow."""
    pattern = re.compile(
        r"`((?:estimator|canned|tests|benchmarks|examples|notebooks|tools|data|docs)/[\w./-]*)`"
    )
    pages = [os.path.join(ROOT, "README.md"), *glob.glob(os.path.join(DOCS, "*.md"))]
    named = {
        (os.path.relpath(page, ROOT), path)
        for page in pages
        for path in pattern.findall(open(page, encoding="utf-8").read())
    }
    assert len(named) > 20
    missing = sorted(
        (page, path) for page, path in named if not os.path.exists(os.path.join(ROOT, path))
    )
    assert not missing
