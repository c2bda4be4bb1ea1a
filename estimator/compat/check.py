"""``python -m estimator.compat.check program.py [...]``: which TF symbols a program uses and
whether ``estimator.compat.v1`` covers them.

It reads the program (it never runs it), finds the names TensorFlow is imported as
(``import tensorflow as tf``, ``import tensorflow.compat.v1 as tf``,
``from tensorflow.compat import v1 as tf``, ``from tensorflow import estimator``, and the
same with ``estimator.compat``), collects every attribute chain starting from them
(``tf.data.Dataset.from_tensor_slices``, ``tf.train.AdagradOptimizer``) and resolves each in
the compat namespace. Methods called on datasets and their iterators count too
(``dataset.shuffle(...)``, ``dataset.make_one_shot_iterator().get_next()`` are
``tf.data.Dataset.shuffle``, ``tf.data.Dataset.make_one_shot_iterator`` and
``tf.data.Iterator.get_next``): a value is a dataset when it comes from a ``tf.data``
constructor, from a dataset method, or from a variable assigned one (followed by name, in
any scope). Output: one line per symbol — ``ok``, or ``MISSING`` with the
replacement — then a count. Exit status 0 when everything is covered, 1 otherwise, 2 for a
file that cannot be read or parsed.

Example::

    $ python -m estimator.compat.check iris.py
    ok       tf.argmax                                  (1 use)
    ok       tf.data.Dataset.from_tensor_slices         (2 uses)
    ...
    24 TF symbols, 24 covered.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import sys
from collections.abc import Iterable

from estimator.compat._unsupported import hint_for

__all__ = ["Symbol", "scan_source", "resolve", "main"]

# Module paths that stand for TF namespaces, and the compat namespace path each becomes.
_ROOTS = {
    "tensorflow": "",
    "tensorflow.compat.v1": "",
    "estimator.compat": "",
    "estimator.compat.v1": "",
}


@dataclasses.dataclass
class Symbol:
    """A TF symbol a program uses: ``name`` (``"tf.train.AdamOptimizer"``), the lines."""

    name: str
    path: tuple[str, ...]
    lines: list[int] = dataclasses.field(default_factory=list)


def _aliases(tree: ast.AST) -> dict[str, tuple[str, ...]]:
    """``{local name: compat path}`` for the names TensorFlow is imported as."""
    out: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                path = _compat_path(alias.name)
                if path is not None:
                    out[alias.asname or alias.name.split(".")[0]] = path
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = _compat_path(node.module)
            for alias in node.names:
                full = _compat_path(f"{node.module}.{alias.name}")
                if full is not None:
                    out[alias.asname or alias.name] = full
                elif base is not None:
                    out[alias.asname or alias.name] = base + (alias.name,)
    return out


def _compat_path(module: str) -> tuple[str, ...] | None:
    for root in sorted(_ROOTS, key=len, reverse=True):
        if module == root:
            return ()
        if module.startswith(root + ".") and root in ("tensorflow", "estimator.compat"):
            rest = module[len(root) + 1 :]
            if rest == "compat.v1" or rest == "v1":
                return ()
            if rest.startswith("compat.v1."):
                rest = rest[len("compat.v1.") :]
            elif rest.startswith("v1."):
                rest = rest[len("v1.") :]
            return tuple(rest.split("."))
    return None


def _chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


# tf.data calls that make a dataset or an iterator, and the dataset methods that do not
# return a dataset.
_DATASET_SOURCES = {"TextLineDataset", "TFRecordDataset", "FixedLengthRecordDataset"}
_ITERATOR_MAKERS = {"make_one_shot_iterator", "make_initializable_iterator"}
_NOT_DATASETS = _ITERATOR_MAKERS | {"as_numpy_iterator", "get_next", "reduce", "cardinality"}


def _value_kind(node: ast.AST, aliases: dict, names: dict[str, str]) -> str | None:
    """``"Dataset"`` or ``"Iterator"`` for an expression that makes one, else None."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    method = node.func.attr
    parts = _chain(node.func)
    if parts and parts[0] in aliases:
        path = aliases[parts[0]] + tuple(parts[1:])
        if path[:1] == ("data",) and len(path) >= 2:
            if path[1] in _ITERATOR_MAKERS:
                return "Iterator"
            if path[1] in _DATASET_SOURCES or (path[1] == "Dataset" and len(path) == 3):
                return "Dataset"
        return None
    owner = _value_kind(node.func.value, aliases, names)
    if owner == "Dataset":
        if method in _ITERATOR_MAKERS:
            return "Iterator"
        return None if method in _NOT_DATASETS else "Dataset"
    return None


def _dataset_names(tree: ast.AST, aliases: dict) -> dict[str, str]:
    """``{variable: "Dataset" | "Iterator"}`` for names assigned a dataset or iterator."""
    names: dict[str, str] = {}
    for _ in range(8):  # to a fixed point: `ds = ds.map(...)` after `ds = tf.data...`
        before = dict(names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                kind = _value_kind(node.value, aliases, names)
                if isinstance(target, ast.Name) and kind is not None:
                    names[target.id] = kind
        if names == before:
            break
    return names


def scan_source(source: str) -> list[Symbol]:
    """The TF symbols used in ``source``, sorted by name (dataset and iterator methods
    included, see the module docstring).

    Raises:
      SyntaxError: for source that does not parse.
    """
    tree = ast.parse(source)
    aliases = _aliases(tree)
    names = _dataset_names(tree, aliases)
    found: dict[str, Symbol] = {}
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        kind = _value_kind(node.value, aliases, names)
        if kind is not None:  # a method of a dataset or iterator value
            path: tuple[str, ...] = ("data", kind, node.attr)
        elif id(node) in inner:
            continue
        else:
            parts = _chain(node)
            if not parts or parts[0] not in aliases:
                continue
            path = aliases[parts[0]] + tuple(parts[1:])
        name = ".".join(("tf",) + path)
        symbol = found.setdefault(name, Symbol(name, path))
        symbol.lines.append(node.lineno)
    return sorted(found.values(), key=lambda s: s.name)


def resolve(path: Iterable[str]) -> tuple[bool, str]:
    """``(covered, note)`` for a compat path: walks the namespace attribute by attribute
    and stops at the first object that is not a module or class (what follows are
    attributes of values, such as methods of a result)."""
    import inspect

    import estimator.compat.v1 as namespace

    obj: object = namespace
    walked = ["tf"]
    for part in path:
        if walked and not (inspect.ismodule(obj) or inspect.isclass(obj)):
            break
        walked.append(part)
        try:
            obj = getattr(obj, part)
        except AttributeError:  # UnsupportedSymbolError included
            return False, hint_for(".".join(["tf", *path]))
        if getattr(obj, "unsupported_symbol", None):  # a method that only refuses
            return False, hint_for(obj.unsupported_symbol)
    return True, ""


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m estimator.compat.check",
        description="List the TF symbols a program uses and whether estimator.compat.v1 "
        "covers them.",
    )
    parser.add_argument("programs", nargs="+", help="Python files to check")
    args = parser.parse_args(argv)
    missing = 0
    total = 0
    for program in args.programs:
        try:
            with open(program, encoding="utf-8") as f:
                symbols = scan_source(f.read())
        except (OSError, SyntaxError, UnicodeDecodeError) as error:
            print(f"{program}: cannot check: {error}", file=sys.stderr)
            return 2
        if len(args.programs) > 1:
            print(f"== {program}")
        width = max((len(s.name) for s in symbols), default=0)
        for symbol in symbols:
            covered, note = resolve(symbol.path)
            uses = len(symbol.lines)
            count = f"({uses} use{'s' if uses != 1 else ''}, line {symbol.lines[0]})"
            if covered:
                print(f"ok       {symbol.name:<{width}}  {count}")
            else:
                missing += 1
                print(f"MISSING  {symbol.name:<{width}}  {count}  {note}")
        total += len(symbols)
    print(
        f"{total} TF symbols, {total - missing} covered"
        + (f", {missing} missing." if missing else ".")
    )
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
