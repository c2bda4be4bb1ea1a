"""The README stays a short front door whose commands, links and examples are true.

Its Python blocks run in tests/test_docs_snippets.py, with the guides'.
"""

from __future__ import annotations

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_ci_runs_the_readme_test_command():
    """The README's first command runs the main job with no data directory (the data is in
    the repository); its second is .ci/run's test command, byte for byte."""
    main_job, tests = _bash_blocks(_readme())[:2]
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        ci = f.read()
    assert tests in ci.splitlines()
    assert main_job.endswith("examples/census.py")
    assert os.path.isfile(os.path.join(ROOT, "data", "adult", "adult.data.gz"))


def test_readme_is_short_and_has_no_dated_figures():
    """At most 250 lines; no dates, issue numbers or machine descriptions (figures live on
    the performance page); the custom model_fn fits in 20 lines and a few of setup."""
    text = _readme()
    assert len(text.splitlines()) <= 250
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not re.search(r"\bissue \d+", text, re.I)
    assert not re.search(r"\b\d+-core\b|\bVM\b|\bGiB\b", text)
    model_fn = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    assert "def model_fn" in model_fn and len(model_fn.strip().splitlines()) <= 22


def test_readme_links_resolve():
    """Every relative link of the README names a file or folder of the repository."""
    prose = re.sub(r"```.*?```|`[^`]*`", "", _readme(), flags=re.S)  # links are in prose
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", prose)
    relative = [link for link in links if "://" not in link]
    assert relative
    missing = [link for link in relative if not os.path.exists(os.path.join(ROOT, link))]
    assert not missing


def test_nothing_points_outside_the_repository():
    """The README, the docs, the notebooks and the examples name no path outside the
    repository (a clone has no sibling folders)."""
    files = [os.path.join(ROOT, "README.md")]
    for pattern in ("docs/**/*.md", "docs/*.py", "notebooks/*.ipynb", "examples/*.py"):
        files += glob.glob(os.path.join(ROOT, pattern), recursive=True)
    files = [f for f in files if "_generated" not in f]
    assert len(files) > 10
    outside = re.compile(r"\.\./shared|shared/data|/work/|\.\./\.\./|/root/|/tmp/")
    found = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if outside.search(line):
                    found.append(f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()[:80]}")
    assert not found
