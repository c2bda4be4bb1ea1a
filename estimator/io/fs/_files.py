"""Files and directories on any storage: queries (``exists``, ``listdir``, ``glob``,
``stat``, ``walk``, ...), changes (``makedirs``, ``remove``, ``rmtree``, ...), opening and
reading. For a URL, listings are read fresh (another process may have written since)."""

from __future__ import annotations

import contextlib
import errno
import glob as _glob
import os
import posixpath
import shutil
from collections.abc import Iterator
from typing import IO, Any

from estimator.io.fs._paths import _fresh, _local, _remote, _resolve, _url, as_str


# ----- queries ------------------------------------------------------------------------------------
def exists(path) -> bool:
    """Whether a file or directory (for a URL: an object or a key prefix) exists."""
    filesystem, stripped, local = _resolve(path)
    if not local:
        _fresh(filesystem, stripped)
    return filesystem.exists(stripped)


def isdir(path) -> bool:
    """Whether ``path`` is a directory (for a URL: a key prefix with objects under it)."""
    filesystem, stripped, local = _resolve(path)
    if not local:
        _fresh(filesystem, stripped)
    return filesystem.isdir(stripped)


def isfile(path) -> bool:
    """Whether ``path`` is a file (for a URL: an object)."""
    filesystem, stripped, local = _resolve(path)
    if not local:
        _fresh(filesystem, stripped)
    return filesystem.isfile(stripped)


def listdir(path, *, missing_ok: bool = True) -> list[str]:
    """The names directly under ``path`` (files and directories), sorted.

    Raises:
      FileNotFoundError: nothing at ``path``, unless ``missing_ok`` (then ``[]``).
      NotADirectoryError: ``path`` is a local file, unless ``missing_ok``.
    """
    remote = None
    try:
        remote = _remote(path)
        if remote is None:
            return sorted(os.listdir(_local(path)))
        filesystem, stripped = remote
        entries = filesystem.ls(stripped, detail=False)
    except (FileNotFoundError, NotADirectoryError) as err:
        if missing_ok:
            return []
        if remote is None:
            raise  # the operating system's error, naming the path
        raise FileNotFoundError(errno.ENOENT, "No such directory", as_str(path)) from err
    names = {posixpath.basename(e.rstrip("/")) for e in entries}
    names.discard("")
    return sorted(names)


def glob(pattern) -> list[str]:
    """The paths matching ``pattern`` (``*``, ``?``, ``[...]``; ``**`` across directories),
    sorted; local paths in the form the pattern has (relative stays relative), URLs with
    their protocol."""
    remote = _remote(pattern)
    if remote is None:
        return sorted(_glob.glob(_local(pattern)))
    filesystem, stripped = remote
    _fresh(filesystem, stripped.split("*")[0].rsplit("/", 1)[0])
    return sorted(_url(as_str(pattern), p) for p in filesystem.glob(stripped))


def stat(path) -> tuple[int, float, bool]:
    """``(size in bytes, modification time in seconds since the epoch or 0 when the store
    does not say, whether it is a directory)``.

    Raises:
      FileNotFoundError: nothing at ``path``.
    """
    filesystem, stripped, local = _resolve(path)
    if local:
        info = os.stat(stripped)
        return info.st_size, info.st_mtime, os.path.isdir(stripped)
    _fresh(filesystem, stripped)
    info = filesystem.info(stripped)
    mtime = info.get("mtime") or info.get("LastModified") or info.get("updated")
    seconds = getattr(mtime, "timestamp", lambda: mtime)() if mtime is not None else 0
    seconds = 0.0 if isinstance(seconds, str) else float(seconds)
    return int(info.get("size") or 0), seconds, info.get("type") == "directory"


def walk(top, topdown: bool = True) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk`` for local paths and URLs (directories as URLs for a URL)."""
    remote = _remote(top)
    if remote is None:
        yield from os.walk(_local(top), topdown=topdown)
        return
    filesystem, stripped = remote
    for root, dirs, files in filesystem.walk(stripped, topdown=topdown):
        yield _url(as_str(top), root), sorted(dirs), sorted(files)


# ----- changes ------------------------------------------------------------------------------------
def makedirs(path) -> None:
    """Creates a local directory and its parents; for a URL nothing (object stores have
    no directories: a prefix exists once an object is written under it)."""
    if _remote(path) is None:
        os.makedirs(_local(path), exist_ok=True)


def mkdir(path) -> None:
    """Creates one local directory (its parent must exist; an existing directory is no
    error, as TF's); for a URL nothing, as :func:`makedirs`."""
    if _remote(path) is None and not os.path.isdir(_local(path)):
        os.mkdir(_local(path))


def remove(path) -> None:
    """Deletes one file (object).

    Raises:
      FileNotFoundError: nothing at ``path``.
    """
    filesystem, stripped, _ = _resolve(path)
    filesystem.rm_file(stripped)


def rmtree(path, *, first: tuple[str, ...] = (), missing_ok: bool = True) -> None:
    """Deletes a directory (every object under a prefix).

    Args:
      path: the directory or URL prefix.
      first: relative paths deleted before everything else, in that order: the mirror of
        :func:`upload_tree`'s ``last``. An object store deletes a prefix's objects in no
        particular order, so a deletion cut short (SIGKILL) could leave a commit marker or
        manifest over a tree missing files; deleted first, the remains read as incomplete
        and readers skip them.
      missing_ok: a missing ``path`` is no error (else ``FileNotFoundError``).

    Raises:
      OSError: a deletion the file system refused.
    """
    filesystem, stripped, local = _resolve(path)
    if not local:
        _fresh(filesystem, stripped)
    if not missing_ok and not filesystem.exists(stripped):
        raise FileNotFoundError(f"{as_str(path)}: no such directory.")
    for relative in first:
        with contextlib.suppress(FileNotFoundError):
            filesystem.rm_file(posixpath.join(stripped, relative))
    if local:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(stripped)
        return
    with contextlib.suppress(FileNotFoundError):
        filesystem.rm(stripped, recursive=True)


# ----- opening and reading ------------------------------------------------------------------------
def open_file(path, mode: str = "rb") -> IO[Any]:
    """Opens a file (an object) in ``open``'s modes. For a URL a written object appears when
    the file is closed; object stores cannot append.

    Raises:
      FileNotFoundError: for reading, a file that does not exist (the message names it).
      ValueError: appending to a URL.
    """
    remote = _remote(path)
    try:
        if remote is None:
            return open(_local(path), mode)  # noqa: SIM115 (the caller closes it)
        filesystem, stripped = remote
        if "a" in mode:
            raise ValueError(
                f"{as_str(path)}: object stores cannot append to a file. Write a new file (or "
                "read it and write it back whole)."
            )
        if "r" in mode:
            # fsspec's classic read-ahead cache: files here are read front to back (TFRecords,
            # text, JSON). (gcsfs's default background prefetcher stalled when read from a
            # thread.)
            return filesystem.open(stripped, mode, cache_type="readahead")
        return filesystem.open(stripped, mode)
    except FileNotFoundError:
        raise FileNotFoundError(
            errno.ENOENT,
            "No such file or directory (check the path, and the file pattern that produced it)",
            as_str(path),
        ) from None


def read_bytes(path) -> bytes:
    """The whole content of a file (an object)."""
    with open_file(path, "rb") as f:
        return f.read()
