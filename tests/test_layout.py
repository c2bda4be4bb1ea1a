"""The package's layers: no import cycles, and each layer imports only those below it
(``hooks`` < ``model`` < ``engine`` < ``Estimator`` < ``training``)."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "estimator"


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _imports(path: pathlib.Path) -> set[str]:
    """The ``estimator`` modules ``path`` imports, at any depth (deferred imports too),
    with the packages whose ``__init__`` such an import runs."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("estimator"):
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            while name.count("."):  # the module and the packages it runs (not the root)
                found.add(name)
                name = name.rpartition(".")[0]
    return found


GRAPH = {
    module: {m for m in _imports(path) if m != module and not module.startswith(m + ".")}
    for module, path in MODULES.items()
}


def test_regular_packages():
    for directory in ("model", "engine", "hooks", "training"):
        assert (ROOT / directory / "__init__.py").exists(), directory


def test_no_import_cycles():
    def reaches(start, goal, seen):
        for nxt in GRAPH[start]:
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                if reaches(nxt, goal, seen):
                    return True
        return False

    cycles = [m for m in GRAPH if reaches(m, m, set())]
    assert cycles == []


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("estimator.hooks", ("estimator.model", "estimator.engine", "estimator.training")),
        ("estimator.model", ("estimator.engine", "estimator.training", "estimator.estimator")),
        ("estimator.engine", ("estimator.training", "estimator.estimator")),
        (
            "estimator.io",  # the bottom layer: files, protos, parsing
            (
                "estimator.hooks",
                "estimator.model",
                "estimator.engine",
                "estimator.training",
                "estimator.estimator",
                "estimator.inputs",
                "estimator.preprocessing",
                "estimator.export",
                "estimator.serve",
                "estimator.compat",
                "estimator.metrics",
                "estimator.distribute",
            ),
        ),  # fmt: skip
        (
            "estimator.distribute",
            ("estimator.model", "estimator.engine", "estimator.training", "estimator.estimator"),
        ),
    ],
)
def test_layers_import_only_downwards(layer, forbidden):
    wrong = {
        (module, imported)
        for module, imported_set in GRAPH.items()
        if module == layer or module.startswith(layer + ".")
        for imported in imported_set
        if imported.startswith(forbidden)
    }
    assert wrong == set()


def test_estimator_never_imports_canned():
    # canned builds on estimator; estimator.experimental gets canned's names by registration.
    wrong = set()
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            wrong |= {(module, n) for n in names if n == "canned" or n.startswith("canned.")}
    assert wrong == set()
