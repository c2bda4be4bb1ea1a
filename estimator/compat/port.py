"""``python -m estimator.compat.port FILE... [--in-place]``: rewrites every TensorFlow import
of a TF 1 program to ``estimator.compat``, and reports what it could not map, as
``tf_upgrade_v2`` does for TF 2.

Every ``import``/``from ... import`` of ``tensorflow`` (``import tensorflow as tf``,
``import tensorflow.compat.v1 as tf``, ``from tensorflow.contrib import layers``), of its
private modules (``from tensorflow.python.data import Dataset``: ``_tf_modules.PRIVATE``)
and of ``tensorflow_estimator`` becomes the import of the same names from
``estimator.compat``::

    import tensorflow as tf                      ->  import estimator.compat as tf
    import tensorflow.compat.v1 as tf            ->  import estimator.compat.v1 as tf
    from tensorflow.python.data import Dataset   ->  from estimator.compat.v1.data import Dataset
    from tensorflow.contrib import layers        ->  from estimator.compat.v1.contrib import layers

The program is read with ``ast`` (statement positions) and only the import statements'
text changes; the rest of the file, comments and layout included, stays as it is. A name
that ``estimator.compat`` does not provide (``from tensorflow.contrib import slim``) keeps
its TensorFlow import and is reported; then the TF symbols the rewritten program uses that
are not covered are reported too (``estimator.compat.check``), each with its replacement.

Without ``--in-place`` the changes are printed as a unified diff; with it the files are
rewritten. The report goes to standard error, one ``FILE:LINE:COL: ERROR: ...`` line per
problem. Exit status: 0 when everything was mapped and is covered, 1 otherwise, 2 for a
file that cannot be read or parsed.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import importlib
import sys
import types
from typing import NamedTuple

from estimator.compat import check
from estimator.compat._tf_modules import compat_path, is_tf_module
from estimator.compat._unsupported import hint_for

__all__ = ["Ported", "Problem", "port_source", "main"]

_NAMESPACE = "estimator.compat.v1"


@dataclasses.dataclass(frozen=True)
class Problem:
    """Something the port could not map: where (1-based line, 0-based column) and why."""

    line: int
    col: int
    message: str


class Ported(NamedTuple):
    """What :func:`port_source` made: the new ``source``, the ``problems`` and the number
    of import statements ``rewritten``."""

    source: str
    problems: list[Problem]
    rewritten: int


def _module_and_rest(path: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """The deepest real module of ``estimator.compat.v1`` on ``path`` and the names after
    it, or None when the path does not resolve (an unsupported name)."""
    covered, _ = check.resolve(path)
    if not covered:
        return None
    module, rest = _NAMESPACE, ()
    for i in range(len(path)):
        candidate = ".".join((_NAMESPACE, *path[: i + 1]))
        try:
            imported = importlib.import_module(candidate)
        except ImportError:
            rest = path[i:]
            break
        if not isinstance(imported, types.ModuleType):
            rest = path[i:]
            break
        module = candidate
    return module, rest


def _import(alias: ast.alias) -> tuple[str | None, str | None]:
    """``(new statement, problem)`` for one name of an ``import`` statement."""
    path = compat_path(alias.name)
    if path is None:
        return None, f"{alias.name} has no counterpart in estimator.compat"
    bound = alias.asname or alias.name.split(".")[0]
    if alias.asname is None:  # `import tensorflow.x.y` binds `tensorflow`: the whole tf
        root = "estimator.compat" if bound == "tensorflow" else f"{_NAMESPACE}.estimator"
        return f"import {root} as {bound}", None
    if not path:
        target = "estimator.compat.v1" if ".compat.v1" in alias.name else "estimator.compat"
        if alias.name == "estimator.compat.v1" or alias.name == "estimator.compat":
            target = alias.name
        return f"import {target} as {bound}", None
    found = _module_and_rest(path)
    if found is None:
        return None, hint_for(".".join(("tf", *path)))
    module, rest = found
    if not rest:
        return f"import {module} as {bound}", None
    if len(rest) == 1:
        return f"from {module} import {rest[0]} as {bound}", None
    return None, f"{alias.name} is not a module of estimator.compat"


def _from_import(node: ast.ImportFrom) -> tuple[list[str], list[str]]:
    """``(new statements, problems)`` for a ``from ... import`` of a TF module: one
    statement per target module; unmapped names keep their TF import."""
    groups: dict[str, list[str]] = {}
    kept: list[str] = []
    problems: list[str] = []
    base = compat_path(node.module)
    for alias in node.names:
        spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
        full = f"{node.module}.{alias.name}"
        path = compat_path(full)
        if path is None and base is not None:
            path = base + (alias.name,)
        found = None if path is None or alias.name == "*" else _module_and_rest(path)
        if found is None:
            kept.append(spelled)
            what = ".".join(("tf", *path)) if path is not None else full
            reason = hint_for(what) if path is not None else "no counterpart in estimator.compat"
            problems.append(f"could not map {full}: {reason}")
            continue
        module, rest = found
        bound = alias.asname or alias.name
        if not rest:  # the name is a module: import it from its package
            module, _, rest = module.rpartition(".")
            rest = (rest,)
        if len(rest) == 1:
            name = rest[0]
            groups.setdefault(module, []).append(name if bound == name else f"{name} as {bound}")
        else:
            kept.append(spelled)
            problems.append(f"could not map {full}: not a module of estimator.compat")
    statements = [f"from {m} import {', '.join(names)}" for m, names in groups.items()]
    if kept:
        statements.append(f"from {node.module} import {', '.join(kept)}")
    return statements, problems


def _rewrite(node: ast.stmt) -> tuple[str | None, list[str]]:
    """The replacement text of an import statement (None: unchanged) and its problems."""
    if isinstance(node, ast.ImportFrom):
        if node.level or not node.module or not is_tf_module(node.module):
            return None, []
        if node.module.startswith("estimator.compat"):
            return None, []
        statements, problems = _from_import(node)
        return "; ".join(statements), problems
    statements, problems, changed = [], [], False
    for alias in node.names:
        spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
        if not is_tf_module(alias.name) or alias.name.startswith("estimator.compat"):
            statements.append(f"import {spelled}")
            continue
        new, problem = _import(alias)
        if new is None:
            statements.append(f"import {spelled}")
            problems.append(f"could not map {alias.name}: {problem}")
        else:
            statements.append(new)
            changed = True
    return ("; ".join(statements) if changed else None), problems


def port_source(source: str) -> Ported:
    """The program with its TensorFlow imports rewritten, and what could not be mapped
    (imports, then the TF symbols the new program uses that are not covered).

    Raises:
      SyntaxError: for source that does not parse.
    """
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []
    problems: list[Problem] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        new, messages = _rewrite(node)
        problems += [Problem(node.lineno, node.col_offset, m) for m in messages]
        if new is not None and new != ast.get_source_segment(source, node):
            edits.append((node, new))
    # Statement positions are UTF-8 byte offsets: edit the encoded lines, last edit first.
    encoded = [line.encode("utf-8") for line in lines]
    for node, new in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        first, last = node.lineno - 1, node.end_lineno - 1
        head = encoded[first][: node.col_offset]
        tail = encoded[last][node.end_col_offset :]
        encoded[first : last + 1] = [head + new.encode("utf-8") + tail]
    ported = b"".join(encoded).decode("utf-8")
    reported = {p.line for p in problems}  # an import kept as TF's is reported once
    for symbol in check.scan_source(ported):
        covered, note = check.resolve(symbol.path, symbol.name)
        if not covered and symbol.lines[0] not in reported:
            problems.append(Problem(symbol.lines[0], 0, f"{symbol.name} is not covered: {note}"))
    problems = sorted(set(problems), key=lambda p: (p.line, p.col, p.message))
    return Ported(ported, problems, len(edits))


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m estimator.compat.port",
        description="Rewrite a TF 1 program's TensorFlow imports to estimator.compat and "
        "report what could not be mapped.",
    )
    parser.add_argument("files", nargs="+", help="Python files to port")
    parser.add_argument(
        "--in-place", action="store_true", help="rewrite the files (default: print a diff)"
    )
    args = parser.parse_args(argv)
    status = 0
    for path in args.files:
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
            ported, problems, rewritten = port_source(source)
        except (OSError, SyntaxError, UnicodeDecodeError) as error:
            print(f"{path}: cannot port: {error}", file=sys.stderr)
            return 2
        if args.in_place:
            if ported != source:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(ported)
        else:
            sys.stdout.writelines(
                difflib.unified_diff(
                    source.splitlines(keepends=True),
                    ported.splitlines(keepends=True),
                    path,
                    f"{path} (ported)",
                )
            )
        for problem in problems:
            print(f"{path}:{problem.line}:{problem.col}: ERROR: {problem.message}", file=sys.stderr)
        print(
            f"{path}: {rewritten} import statement(s) rewritten, {len(problems)} problem(s).",
            file=sys.stderr,
        )
        status = max(status, 1 if problems else 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
