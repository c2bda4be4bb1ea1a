"""``tf.gfile`` (TF 1.15's ``tf.compat.v1.gfile``) and the ``tf.io.gfile`` spellings: local
paths and storage URLs (``gs://``, ``s3://``, any fsspec protocol whose package is
installed) through ``estimator.io.fs``, as TF's file systems served them. On object
storage ``Rename`` copies and deletes (no atomic rename), ``MkDir``/``MakeDirs`` create
nothing (a prefix exists once a file is written under it); ``Stat`` gives TF's
``FileStatistics`` fields (``length``, ``mtime_nsec``, ``is_directory``).
"""

from __future__ import annotations

import types

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import _gfile_errors
from estimator.io import fs

__all__ = [
    "GFile",
    "Open",
    "FastGFile",
    "Exists",
    "IsDirectory",
    "ListDirectory",
    "Glob",
    "MakeDirs",
    "MkDir",
    "Remove",
    "DeleteRecursively",
    "Copy",
    "Rename",
    "Stat",
    "Walk",
    "exists",
    "isdir",
    "listdir",
    "glob",
    "makedirs",
    "mkdir",
    "remove",
    "rmtree",
    "copy",
    "rename",
    "walk",
]

__getattr__ = module_getattr("tf.gfile", __name__)


def _path(path) -> str:
    """A local path, or a URL whose protocol is available (else the ValueError naming the
    package to install)."""
    return fs.check(path, "gfile path")


def GFile(name, mode="r"):  # noqa: N802 (TF's names)
    """``tf.gfile.GFile``: ``open(name, mode)`` (a URL's written file appears on close)."""
    return fs.open_file(_path(name), mode)


Open = GFile
FastGFile = GFile


def Exists(filename) -> bool:  # noqa: N802
    return fs.exists(_path(filename))


def IsDirectory(dirname) -> bool:  # noqa: N802
    return fs.isdir(_path(dirname))


def ListDirectory(dirname) -> list[str]:  # noqa: N802
    return fs.listdir(_path(dirname), missing_ok=False)


def Glob(filename) -> list[str]:  # noqa: N802
    return fs.glob(_path(filename))


def MakeDirs(dirname) -> None:  # noqa: N802
    fs.makedirs(_path(dirname))


def MkDir(dirname) -> None:  # noqa: N802
    fs.mkdir(_path(dirname))


def Remove(filename) -> None:  # noqa: N802
    fs.remove(_path(filename))


def DeleteRecursively(dirname) -> None:  # noqa: N802
    fs.rmtree(_path(dirname), missing_ok=False)


def Copy(oldpath, newpath, overwrite=False) -> None:  # noqa: N802
    source, target = _path(oldpath), _path(newpath)
    if not overwrite and fs.exists(target):
        raise FileExistsError(f"{newpath} exists (pass overwrite=True)")
    fs.copy(source, target)


def Rename(oldname, newname, overwrite=False) -> None:  # noqa: N802
    source, target = _path(oldname), _path(newname)
    if not overwrite and fs.exists(target):
        raise FileExistsError(f"{newname} exists (pass overwrite=True)")
    fs.move(source, target)


def Stat(filename):  # noqa: N802
    """TF's ``FileStatistics``: ``length`` (bytes), ``mtime_nsec``, ``is_directory``."""
    length, mtime, is_directory = fs.stat(_path(filename))
    return types.SimpleNamespace(
        length=length, mtime_nsec=int(mtime * 1e9), is_directory=is_directory
    )


def Walk(top, in_order=True):  # noqa: N802
    yield from fs.walk(_path(top), topdown=in_order)


exists = Exists
isdir = IsDirectory
listdir = ListDirectory
glob = Glob
makedirs = MakeDirs
mkdir = MkDir
remove = Remove
rmtree = DeleteRecursively
copy = Copy
rename = Rename
walk = Walk

# TF's error classes (tf.errors.NotFoundError, ...) for what the functions above raise.
_gfile_errors.apply(globals())
