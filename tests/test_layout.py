"""The package's layers: every module of ``estimator`` and ``canned`` is in exactly one
layer of the map in ``docs/architecture.md`` (the one source of truth: this test parses its
table), imports go only to the same or lower layers (deferred imports and
``importlib.import_module``/``__import__`` calls with a literal name too), there are no import
cycles, only ``estimator.compat`` (the top layer) imports ``canned``, and only package faces
(``__init__.py``) re-export names."""

import ast
import functools
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
ROOT = REPO / "estimator"
TOPS = ("estimator", "canned")
MAP_DOC = REPO / "docs" / "architecture.md"


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for top in TOPS:
        for path in (REPO / top).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _dynamic_import(node: ast.AST) -> str | None:
    """The literal module name of an ``importlib.import_module("x")`` or ``__import__("x")``
    call, else None: such a call is an import like any other."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    first = node.args[0]
    if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
        return first.value if isinstance(first.value, str) else None
    return None


def _imported_names(node: ast.AST, path: pathlib.Path) -> list[str]:
    """The dotted names one AST node imports (``from a import b`` gives ``a.b`` and ``a``)."""
    if isinstance(node, ast.ImportFrom):
        assert node.level == 0, f"{path}: relative import; write it absolute"
        if (node.module or "").split(".")[0] in TOPS:
            return [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        return []
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    dynamic = _dynamic_import(node)
    return [dynamic] if dynamic else []


def _imports(path: pathlib.Path) -> set[str]:
    """The ``estimator``/``canned`` modules ``path`` imports, at any depth (deferred imports
    and ``import_module``/``__import__`` calls with a literal name too), with the packages
    whose ``__init__`` such an import runs (not the roots)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = _imported_names(node, path)
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            while name.count("."):  # the module and the packages it runs (not the root)
                found.add(name)
                name = name.rpartition(".")[0]
    return found


@functools.cache
def _graph() -> dict[str, set[str]]:
    """``{module: the modules it imports}`` (parsed once, by the first test that needs it,
    not while every worker collects the suite)."""
    return {
        module: {m for m in _imports(path) if m != module and not module.startswith(m + ".")}
        for module, path in MODULES.items()
    }


def _layer_map() -> tuple[dict[str, int], list[str]]:
    """``docs/architecture.md``'s table: ``{entry: layer number}`` and the layer names."""
    text = MAP_DOC.read_text()
    table = text.split("<!-- layer map: begin")[1].split("<!-- layer map: end -->")[0]
    entries, names = {}, []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].isdigit():
            continue
        number, name, modules = int(cells[0]), cells[1], cells[2]
        assert number == len(names) + 1, f"layer {name!r}: rows must be numbered 1, 2, ..."
        names.append(name)
        for entry in re.findall(r"`([^`]+)`", modules):
            assert entry not in entries, f"{entry} is in two layers of {MAP_DOC}"
            entries[entry] = number
    return entries, names


ENTRIES, LAYER_NAMES = _layer_map()


def layer_of(module: str) -> int | None:
    """The layer of ``module``: its own entry, else the nearest ``pkg.*`` above it."""
    if module in ENTRIES:
        return ENTRIES[module]
    name = module
    while name:
        if name + ".*" in ENTRIES:
            return ENTRIES[name + ".*"]
        name = name.rpartition(".")[0]
    return None


def test_every_module_has_a_layer():
    missing = sorted(m for m in MODULES if m not in TOPS and layer_of(m) is None)
    assert not missing, (
        f"modules without a layer: {missing}. Add each to the table in {MAP_DOC} "
        "(docs/architecture.md, between the 'layer map' markers), in the row of the lowest "
        "layer holding everything it imports."
    )


def test_the_map_covers_packages_by_prefix_and_flat_modules_one_by_one():
    # A module in a mapped package is in that package's layer; a new flat module is in
    # none until it gets its own entry (test_every_module_has_a_layer then names it).
    assert layer_of("estimator.io.new_format") == layer_of("estimator.io") == 2
    assert layer_of("canned.sdca._ops") < layer_of("canned.sdca._linear")
    assert layer_of("estimator.new_flat_module") is None


def test_every_map_entry_names_modules_that_exist():
    stale = sorted(e for e in ENTRIES if (e[:-2] if e.endswith(".*") else e) not in MODULES)
    assert not stale, f"entries of {MAP_DOC} naming no module: {stale}"


def test_imports_go_only_to_the_same_or_lower_layers():
    upward = sorted(
        f"{module} ({LAYER_NAMES[layer_of(module) - 1]}) imports {imported} "
        f"({LAYER_NAMES[layer_of(imported) - 1]})"
        for module, imported_set in _graph().items()
        if module not in TOPS
        for imported in imported_set
        if imported not in TOPS and layer_of(imported) > layer_of(module)
    )
    assert not upward, "imports up the layers of docs/architecture.md:\n" + "\n".join(upward)


def test_regular_packages():
    for directory in ("model", "engine", "hooks", "handlers", "training", "layers"):
        assert (ROOT / directory / "__init__.py").exists(), directory


# TF's own public module names (``tf.estimator``'s files) stay flat; everything else of the
# core lives in a package that maps to one row of the layer table.
FLAT = {
    "early_stopping",
    "estimator",
    "experimental",
    "extenders",
    "fn_args",
    "initializers",
    "keys",
    "mode_keys",
    "summary",
    "warm_starting",
}


def test_flat_modules_are_tfs_public_module_names():
    flat = {p.stem for p in ROOT.glob("*.py") if p.name != "__init__.py"}
    assert flat == FLAT


def test_no_import_cycles():
    def reaches(start, goal, seen):
        for nxt in _graph()[start]:
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                if reaches(nxt, goal, seen):
                    return True
        return False

    cycles = [m for m in _graph() if reaches(m, m, set())]
    assert cycles == []


def _imports_canned(module: str) -> bool:
    path = MODULES[module]
    for node in ast.walk(ast.parse(path.read_text())):
        if any(n.split(".")[0] == "canned" for n in _imported_names(node, path)):
            return True
    return False


def test_only_compat_imports_canned():
    # canned builds on estimator; estimator.experimental gets canned's names by registration;
    # estimator.compat (TF's namespace, which holds canned estimators) is the top layer.
    wrong = sorted(
        m
        for m in MODULES
        if m.startswith("estimator") and not m.startswith("estimator.compat") and _imports_canned(m)
    )
    assert wrong == []
    assert _imports_canned("estimator.compat.v1._canned")  # the check sees what it must
    assert max(layer_of(m) for m in MODULES if m.startswith("canned.")) < layer_of(
        "estimator.compat.v1"
    )


def test_a_literal_import_module_call_is_an_import(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import importlib\n"
        "def f():\n"
        "    importlib.import_module('canned.linear')\n"
        "    __import__('estimator.io')\n"
    )
    assert {"canned.linear", "estimator.io"} <= _imports(source)


def _reexports(path: pathlib.Path) -> list[str]:
    """Names ``path`` imports from another module of the package under their own name
    (``from a import b as b``: the explicit re-export idiom)."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in TOPS:
            names += [a.name for a in node.names if a.asname == a.name]
    return names


def test_only_package_faces_and_tf_namespaces_reexport():
    # One address per name: a module that is not a package's __init__ defines what it
    # exports. TF's namespaces (estimator.compat's modules, estimator.experimental,
    # canned.experimental) are faces by nature: they gather names defined elsewhere.
    namespaces = ("estimator.compat.", "estimator.experimental", "canned.experimental")
    wrong = {
        module: _reexports(path)
        for module, path in MODULES.items()
        if path.name != "__init__.py" and not module.startswith(namespaces)
    }
    assert {m: names for m, names in wrong.items() if names} == {}
