"""``tf.gfile`` (TF 1.15's ``tf.compat.v1.gfile``) on the local file system (``os``,
``shutil``, ``glob``); the ``tf.io.gfile`` spellings too.

Remote file systems (``gs://``, ``hdfs://``) are not supported: their paths are refused
with a ``ValueError`` naming the fix (mount them, or copy the data locally).
"""

from __future__ import annotations

import glob as _glob
import os
import shutil

from estimator.compat._unsupported import module_getattr

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


def _local(path) -> str:
    path = os.fsdecode(path)
    if "://" in path:
        raise ValueError(
            f"{path}: only local paths are supported by tf.gfile here. Mount the file system "
            "(e.g. gcsfuse) or copy the files to a local directory."
        )
    return path


def GFile(name, mode="r"):  # noqa: N802 (TF's names)
    """``tf.gfile.GFile``: ``open(name, mode)``."""
    return open(_local(name), mode)  # noqa: SIM115 (returned to the caller)


Open = GFile
FastGFile = GFile


def Exists(filename) -> bool:  # noqa: N802
    return os.path.exists(_local(filename))


def IsDirectory(dirname) -> bool:  # noqa: N802
    return os.path.isdir(_local(dirname))


def ListDirectory(dirname) -> list[str]:  # noqa: N802
    return os.listdir(_local(dirname))


def Glob(filename) -> list[str]:  # noqa: N802
    return sorted(_glob.glob(_local(filename)))


def MakeDirs(dirname) -> None:  # noqa: N802
    os.makedirs(_local(dirname), exist_ok=True)


def MkDir(dirname) -> None:  # noqa: N802
    os.mkdir(_local(dirname))


def Remove(filename) -> None:  # noqa: N802
    os.remove(_local(filename))


def DeleteRecursively(dirname) -> None:  # noqa: N802
    shutil.rmtree(_local(dirname))


def Copy(oldpath, newpath, overwrite=False) -> None:  # noqa: N802
    if not overwrite and os.path.exists(_local(newpath)):
        raise FileExistsError(f"{newpath} exists (pass overwrite=True)")
    shutil.copyfile(_local(oldpath), _local(newpath))


def Rename(oldname, newname, overwrite=False) -> None:  # noqa: N802
    if not overwrite and os.path.exists(_local(newname)):
        raise FileExistsError(f"{newname} exists (pass overwrite=True)")
    os.replace(_local(oldname), _local(newname))


def Stat(filename):  # noqa: N802
    return os.stat(_local(filename))


def Walk(top, in_order=True):  # noqa: N802
    return os.walk(_local(top), topdown=in_order)


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
