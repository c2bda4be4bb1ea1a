"""The package's layers: every module of ``estimator`` and ``canned`` is in exactly one
layer of the map in ``docs/architecture.md`` (the one source of truth: this test parses its
table), imports go only to the same or lower layers (deferred imports too), and there are
no import cycles."""

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


def _imports(path: pathlib.Path) -> set[str]:
    """The ``estimator``/``canned`` modules ``path`` imports, at any depth (deferred imports
    too), with the packages whose ``__init__`` such an import runs (not the roots)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import; write it absolute"
            if (node.module or "").split(".")[0] in TOPS:
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
    assert layer_of("estimator.io.new_format") == layer_of("estimator.io") == 1
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


def test_estimator_never_imports_canned():
    # canned builds on estimator; estimator.experimental gets canned's names by registration.
    wrong = set()
    for module, path in MODULES.items():
        if not module.startswith("estimator"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            wrong |= {(module, n) for n in names if n == "canned" or n.startswith("canned.")}
    assert wrong == set()
