"""``tf.gfile`` (TF 1.15's ``tf.compat.v1.gfile``) and the ``tf.io.gfile`` spellings: local
paths through ``os``, ``shutil`` and ``glob``; storage URLs (``gs://``, ``s3://``, any
fsspec protocol whose package is installed) through ``estimator.io.fs``, as TF's file
systems served them. On object storage ``Rename`` copies and deletes (no atomic rename),
``MkDir``/``MakeDirs`` create nothing (a prefix exists once a file is written under it), and
``Stat`` gives TF's ``FileStatistics`` fields (``length``, ``mtime_nsec``,
``is_directory``).
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
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
    path = _path(dirname)
    if not fs.is_url(path):
        return os.listdir(path)
    if not fs.isdir(path):
        raise FileNotFoundError(f"{path}: no such directory.")
    return fs.listdir(path)


def Glob(filename) -> list[str]:  # noqa: N802
    path = _path(filename)
    return fs.glob(path) if fs.is_url(path) else sorted(_glob.glob(path))


def MakeDirs(dirname) -> None:  # noqa: N802
    fs.makedirs(_path(dirname))


def MkDir(dirname) -> None:  # noqa: N802
    path = _path(dirname)
    if not fs.is_url(path) and not os.path.isdir(path):  # an existing one is fine (TF's)
        os.mkdir(path)


def Remove(filename) -> None:  # noqa: N802
    fs.remove(_path(filename))


def DeleteRecursively(dirname) -> None:  # noqa: N802
    path = _path(dirname)
    if fs.is_url(path):
        fs.rmtree(path)
    else:
        shutil.rmtree(path)


def Copy(oldpath, newpath, overwrite=False) -> None:  # noqa: N802
    source, target = _path(oldpath), _path(newpath)
    if not overwrite and fs.exists(target):
        raise FileExistsError(f"{newpath} exists (pass overwrite=True)")
    if fs.is_url(source) or fs.is_url(target):
        fs.write_bytes(target, fs.read_bytes(source))
    else:
        shutil.copyfile(source, target)


def Rename(oldname, newname, overwrite=False) -> None:  # noqa: N802
    source, target = _path(oldname), _path(newname)
    if not overwrite and fs.exists(target):
        raise FileExistsError(f"{newname} exists (pass overwrite=True)")
    if fs.is_url(source) != fs.is_url(target) or (
        fs.is_url(source) and fs.protocol(source) != fs.protocol(target)
    ):
        Copy(source, target, overwrite=True)
        fs.remove(source)
    elif fs.is_url(source):
        fs.move(source, target)
    else:
        os.replace(source, target)


def Stat(filename):  # noqa: N802
    path = _path(filename)
    if not fs.is_url(path):
        return os.stat(path)
    filesystem, stripped = fs._fs(path)
    info = filesystem.info(stripped)
    mtime = info.get("mtime") or info.get("LastModified") or info.get("updated")
    seconds = getattr(mtime, "timestamp", lambda: mtime)() if mtime is not None else 0
    if isinstance(seconds, str):
        seconds = 0
    return types.SimpleNamespace(
        length=int(info.get("size") or 0),
        mtime_nsec=int(float(seconds) * 1e9),
        is_directory=info.get("type") == "directory",
    )


def Walk(top, in_order=True):  # noqa: N802
    path = _path(top)
    if not fs.is_url(path):
        yield from os.walk(path, topdown=in_order)
        return
    filesystem, stripped = fs._fs(path)
    scheme = fs.protocol(path)
    for root, dirs, files in filesystem.walk(stripped, topdown=in_order):
        yield f"{scheme}://{root.lstrip('/')}", sorted(dirs), sorted(files)


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
