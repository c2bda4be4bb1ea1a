"""TF's error classes and messages for ``tf.gfile`` (``estimator.compat.v1.gfile``).

The file functions run on ``os``/``shutil`` and ``estimator.io.fs``, which raise Python's
errors; TF's file systems raise ``tf.errors`` classes. :func:`apply` wraps each function of
the ``gfile`` module so that it raises :func:`~estimator.compat.v1.errors.tf_error` of the
native error (``NotFoundError`` that is also a ``FileNotFoundError``, ...), with the
messages TF 2.15 gives where they are not ``path; reason``.
"""

from __future__ import annotations

from typing import Any

from estimator.compat.v1.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    NotFoundError,
    with_tf_errors,
)

__all__ = ["CLASSES", "MESSAGES", "apply"]

#: TF 2.15's classes where they differ from ``errors.NATIVE_CLASSES``.
CLASSES: dict[str, dict[type, type]] = {
    "ListDirectory": {NotADirectoryError: NotFoundError},  # a file: "Could not find directory"
}

#: TF 2.15's messages where they are not ``path; reason`` (``"{0}"``: the first argument).
MESSAGES: dict[str, dict[type, str]] = {
    "ListDirectory": {NotFoundError: "Could not find directory {0}"},
    "DeleteRecursively": {NotFoundError: "{0} not found"},
    "MakeDirs": {FailedPreconditionError: "{0} is not a directory"},
    "Copy": {AlreadyExistsError: "file already exists"},
    "Rename": {AlreadyExistsError: "file already exists"},
}
_ALIASES = {
    "Open": "GFile",
    "FastGFile": "GFile",
    "exists": "Exists",
    "isdir": "IsDirectory",
    "listdir": "ListDirectory",
    "glob": "Glob",
    "makedirs": "MakeDirs",
    "mkdir": "MkDir",
    "remove": "Remove",
    "rmtree": "DeleteRecursively",
    "copy": "Copy",
    "rename": "Rename",
    "walk": "Walk",
}


def apply(namespace: dict[str, Any]) -> None:
    """Wraps the functions of ``namespace``'s ``__all__`` (the ``gfile`` module's globals)."""
    wrapped: dict[str, Any] = {}
    for name in namespace["__all__"]:
        canonical = _ALIASES.get(name, name)
        if canonical not in wrapped:
            wrapped[canonical] = with_tf_errors(
                namespace[canonical],
                messages=MESSAGES.get(canonical),
                classes=CLASSES.get(canonical),
            )
        namespace[name] = wrapped[canonical]
