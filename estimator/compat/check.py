"""``python -m estimator.compat.check program.py [...]``: which TF symbols a program uses and
whether ``estimator.compat.v1`` covers them, with the replacement of each it does not.

It reads the program (it never runs it), finds the names TensorFlow is imported as
(``import tensorflow as tf``, ``import tensorflow.compat.v1 as tf``,
``from tensorflow.compat import v1 as tf``, ``from tensorflow import estimator``,
``from tensorflow.python.data import Dataset``, the ``tensorflow_estimator`` package, and
the same with ``estimator.compat``: ``_tf_modules``), collects every attribute chain starting
from them (``tf.data.Dataset.from_tensor_slices``, ``tf.train.AdagradOptimizer``) and
resolves each in the compat namespace.

Symbols reached through objects count too, as far as a static read can follow them: a
variable assigned an instance of a TF class (``est = tf.estimator.Estimator(...)``,
``opt = tf.train.AdamOptimizer(0.1)``, ``with tf.Session() as sess``) makes ``est.train``
``tf.estimator.Estimator.train``; datasets and their iterators are followed through their
methods (``dataset.shuffle(...)``, ``dataset.make_one_shot_iterator().get_next()`` are
``tf.data.Dataset.shuffle``, ``tf.data.Dataset.make_one_shot_iterator`` and
``tf.data.Iterator.get_next``). Variables are followed by name, in any scope. An import of a
TensorFlow module that no namespace here stands for (a private ``tensorflow.python`` module
not in ``_tf_modules.PRIVATE``) is listed as missing.

Output: one line per symbol — ``ok``, or ``MISSING`` with the replacement — then a count.
Exit status 0 when everything is covered, 1 otherwise, 2 for a file that cannot be read or
parsed.

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
import re
import sys

from estimator.compat._tf_modules import compat_path, is_tf_module
from estimator.compat._unsupported import hint_for

__all__ = ["Symbol", "scan_source", "resolve", "main"]


@dataclasses.dataclass
class Symbol:
    """A TF symbol a program uses: ``name`` (``"tf.train.AdamOptimizer"``), its namespace
    ``path`` (None for an import of a TF module no namespace stands for), the lines."""

    name: str
    path: tuple[str, ...] | None
    lines: list[int] = dataclasses.field(default_factory=list)


def _aliases(tree: ast.AST) -> tuple[dict[str, tuple[str, ...]], list[Symbol]]:
    """``{local name: compat path}`` for the names TensorFlow is imported as, and the
    symbols the imports name (the names of ``from ... import``, and imports of TF modules
    that no namespace stands for)."""
    out: dict[str, tuple[str, ...]] = {}
    imported: list[Symbol] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            _import_aliases(node, out, imported)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            _from_aliases(node, out, imported)
    return out, imported


def _import_aliases(node: ast.Import, out: dict, imported: list) -> None:
    for alias in node.names:
        path = compat_path(alias.name)
        if path is not None:
            out[alias.asname or alias.name.split(".")[0]] = path
        elif is_tf_module(alias.name):
            imported.append(Symbol(alias.name, None, [node.lineno]))


def _from_aliases(node: ast.ImportFrom, out: dict, imported: list) -> None:
    base = compat_path(node.module)
    for alias in node.names:
        full = compat_path(f"{node.module}.{alias.name}")
        if full is None and base is not None:
            full = base + (alias.name,)
        if full is not None:
            out[alias.asname or alias.name] = full
            # the imported name itself is a symbol (``from tensorflow.contrib import slim``),
            # reported even when the program never uses it
            imported.append(Symbol(".".join(("tf",) + full), full, [node.lineno]))
        elif is_tf_module(node.module):
            imported.append(Symbol(f"{node.module}.{alias.name}", None, [node.lineno]))


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
_DATASET = ("data", "Dataset")
_ITERATOR = ("data", "Iterator")
_DATASET_SOURCES = {"TextLineDataset", "TFRecordDataset", "FixedLengthRecordDataset"}
_ITERATOR_MAKERS = {"make_one_shot_iterator", "make_initializable_iterator"}
_NOT_DATASETS = _ITERATOR_MAKERS | {"as_numpy_iterator", "get_next", "reduce", "cardinality"}


def _made_by(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The class of what calling the TF symbol ``path`` returns, when a static read knows
    it: a dataset, an iterator, or an instance of a TF class (a capitalised name)."""
    if path[:1] == ("data",) and len(path) >= 2:
        if path[1] in _ITERATOR_MAKERS:
            return _ITERATOR
        if path[1] in _DATASET_SOURCES or (path[1] == "Dataset" and len(path) == 3):
            return _DATASET
    if path and path[-1][:1].isupper():
        return path
    return None


def _value_kind(node: ast.AST, aliases: dict, names: dict) -> tuple[str, ...] | None:
    """The TF class (its namespace path) of the value of an expression, or None."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if not isinstance(node, ast.Call):
        return None
    parts = _chain(node.func)
    if parts and parts[0] in aliases:
        return _made_by(aliases[parts[0]] + tuple(parts[1:]))
    if not isinstance(node.func, ast.Attribute):
        return None
    owner = _value_kind(node.func.value, aliases, names)
    if owner == _DATASET:
        method = node.func.attr
        if method in _ITERATOR_MAKERS:
            return _ITERATOR
        return None if method in _NOT_DATASETS else _DATASET
    return None


def _bindings(node: ast.AST):
    """``(target, value)`` of the assignments and ``with ... as`` of ``node``."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        yield node.targets[0], node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        yield node.target, node.value
    elif isinstance(node, ast.With | ast.AsyncWith):
        for item in node.items:
            if item.optional_vars is not None:
                yield item.optional_vars, item.context_expr


def _value_names(tree: ast.AST, aliases: dict) -> dict[str, tuple[str, ...]]:
    """``{variable: TF class path}`` for names assigned a value :func:`_value_kind` knows."""
    names: dict[str, tuple[str, ...]] = {}
    for _ in range(8):  # to a fixed point: `ds = ds.map(...)` after `ds = tf.data...`
        before = dict(names)
        for node in ast.walk(tree):
            for target, value in _bindings(node):
                kind = _value_kind(value, aliases, names)
                if isinstance(target, ast.Name) and kind is not None:
                    names[target.id] = kind
        if names == before:
            break
    return names


def scan_source(source: str) -> list[Symbol]:
    """The TF symbols used in ``source``, sorted by name (methods of TF objects and
    unmapped TF imports included, see the module docstring).

    Raises:
      SyntaxError: for source that does not parse.
    """
    tree = ast.parse(source)
    aliases, imported = _aliases(tree)
    names = _value_names(tree, aliases)
    found: dict[str, Symbol] = {}
    for symbol in imported:
        found.setdefault(symbol.name, Symbol(symbol.name, symbol.path)).lines += symbol.lines
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        kind = _value_kind(node.value, aliases, names)
        if kind is not None:  # a method or attribute of a TF object
            path: tuple[str, ...] = kind + (node.attr,)
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


def _instance_attribute(cls: type, name: str) -> bool:
    """Whether instances of ``cls`` have the attribute ``name`` though the class has not:
    annotated, a field of a message class (``_FIELDS``/``_MESSAGES``), or assigned to
    ``self.<name>`` in the class's source."""
    import inspect

    pattern = re.compile(rf"self\.{re.escape(name)}\s*[:=]")
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return True
        if name in getattr(klass, "_FIELDS", {}) or name in getattr(klass, "_MESSAGES", {}):
            return True
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if pattern.search(source):
            return True
    return False


def _private_hint(module: str) -> str:
    return (
        f"{module} is TensorFlow's private module, which estimator.compat does not mirror: "
        "import its names from the public namespace (tf.<module>.<name>, e.g. "
        "tf.data.Dataset, tf.gfile.GFile)."
    )


def resolve(path: tuple[str, ...] | None, name: str = "") -> tuple[bool, str]:
    """``(covered, note)`` for a compat path: walks the namespace attribute by attribute
    and stops at the first object that is not a module or class (what follows are
    attributes of values, such as methods of a result). A ``None`` path (an import of a TF
    module no namespace stands for, ``name``) is not covered."""
    import inspect

    import estimator.compat.v1 as namespace

    if path is None:
        return False, _private_hint(name)

    obj: object = namespace
    walked = ["tf"]
    for part in path:
        if walked and not (inspect.ismodule(obj) or inspect.isclass(obj)):
            break
        walked.append(part)
        try:
            obj = getattr(obj, part)
        except AttributeError:  # UnsupportedSymbolError included
            if inspect.isclass(obj) and _instance_attribute(obj, part):
                return True, ""  # set on instances (``config.gpu_options``): a value's
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
            covered, note = resolve(symbol.path, symbol.name)
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
