"""Local paths and storage URLs through one seam: every file the package reads or writes,
from ``model_dir`` to data files, goes through the functions here, and nothing outside this
module asks whether a path is a URL.

TF's file system layer accepted ``gs://bucket/dir`` wherever a path went; so does this
package: ``model_dir``, export directories, ``warm_start_from``, checkpoint paths, event
files and data files may be ``gs://`` (gcsfs), ``s3://`` (s3fs) or any other protocol that
fsspec implements and whose package is installed (``memory://`` always is). A path is
resolved by ``fsspec.core.url_to_fs`` into a file system and a path on it; a local path
(str, bytes, PathLike, ``file://...``) is served by fsspec's local file system, and keeps
the form it was given in (relative stays relative; ``os.path`` never sees a URL, which it
would turn from ``gs://b/m`` into a local ``gs:/b/m``). Endpoints and credentials come from
the standard environment those clients read (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, ``STORAGE_EMULATOR_HOST``, application default credentials), so
a job points at MinIO or an emulator without code changes. :func:`check` refuses a URL
whose protocol cannot be served, naming the package to install, before anything is
created; every other function raises the same error when it meets one.

Object stores have no directories, no rename and no append: a "directory" is a key prefix.
The two ways a reader is kept from seeing part of a write are named functions:

* :func:`replace_atomically`: a local file written under a temporary name beside its
  target and renamed over it (``os.replace``); :func:`publish_tree` moves a local tree into
  place with one rename;
* :func:`upload_tree`: a tree uploaded file by file with its completion marker last (a
  reader that waits for the marker sees a complete tree); a single object is published by
  one upload (:func:`write_bytes`), which the store shows whole or not at all.

Where the right one depends on the storage, the functions here choose:
:func:`write_bytes`, :func:`atomic_write`, :func:`publish_tree` (with
:func:`staging_dir`), :class:`Mirror` (a local directory kept in step with a remote one,
for writers of local files only), :func:`local_copy`, :func:`complete`, and
:func:`exclusive_lock` (an OS file lock locally, a lease on a store;
``estimator.io.locks``).

Synopsis::

    from estimator.io import fs

    fs.check("s3://bucket/models/ctr", "model_dir")   # gives the package to install, if any
    fs.write_bytes(fs.join("s3://bucket/models/ctr", "hello"), b"hi")
    assert fs.listdir("s3://bucket/models/ctr") == ["hello"]
"""

from __future__ import annotations

import contextlib
import errno
import glob as _glob
import importlib
import os
import posixpath
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import IO, Any

__all__ = [
    "Mirror",
    "ProtocolUnavailableError",
    "abspath",
    "append_bytes",
    "as_str",
    "atomic_write",
    "basename",
    "check",
    "complete",
    "copy",
    "dirname",
    "download_tree",
    "exclusive_lock",
    "exists",
    "glob",
    "isdir",
    "isfile",
    "join",
    "listdir",
    "local_copy",
    "local_path",
    "makedirs",
    "mkdir",
    "move",
    "open_file",
    "protocol",
    "publish_tree",
    "read_bytes",
    "remove",
    "replace_atomically",
    "rmtree",
    "stat",
    "staging_dir",
    "upload_tree",
    "walk",
    "write_bytes",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")

#: Protocols whose fsspec implementation needs a package fsspec does not bring:
#: ``protocol -> (module to import, package to install, this project's extra or None)``.
PACKAGES = {
    "gs": ("gcsfs", "gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcsfs", "gcs"),
    "s3": ("s3fs", "s3fs", "s3"),
    "s3a": ("s3fs", "s3fs", "s3"),
    "hdfs": ("pyarrow", "pyarrow", None),
    "arrow_hdfs": ("pyarrow", "pyarrow", None),
}
#: Protocols that fsspec reads but cannot write to.
READ_ONLY = frozenset({"http", "https"})


class ProtocolUnavailableError(ValueError):
    """A URL whose protocol no installed file system serves (a ``ValueError``, as TF's
    ``RunConfig`` raises for a bad ``model_dir``); the message names the package to
    install."""


# ----- paths ---------------------------------------------------------------------------------
def as_str(path) -> str:
    """``path`` (str, bytes or PathLike) as a ``str``."""
    return os.fsdecode(os.fspath(path))


def protocol(path) -> str | None:
    """The URL scheme of ``path`` (``"gs"`` for ``gs://bucket/x``), or None for a local path
    (``file://`` URLs are local paths). A Windows drive (``C:\\dir``) is not a scheme."""
    match = _SCHEME.match(as_str(path))
    if match is None:
        return None
    scheme = match.group(1).lower()
    return None if scheme in ("file", "local") else scheme


def _is_url(path) -> bool:
    return protocol(path) is not None


def _local(path) -> str:
    """A local path without its ``file://``."""
    text = as_str(path)
    match = _SCHEME.match(text)
    return text[len(match.group(0)) :] if match else text


def _normal(url: str) -> str:
    """``url`` with its scheme lower-cased and without a trailing ``/``."""
    scheme, rest = url.split("://", 1)
    return f"{scheme.lower()}://{rest.rstrip('/')}"


def join(base, *parts) -> str:
    """``base/part/...``: ``os.path.join`` for a local ``base``, ``/`` for a URL."""
    base = as_str(base)
    parts = [as_str(p) for p in parts]
    if _is_url(base):
        return posixpath.join(base.rstrip("/"), *parts)
    return os.path.join(base, *parts)


def basename(path) -> str:
    """The last component of ``path`` (a trailing ``/`` ignored)."""
    path = as_str(path)
    if _is_url(path):
        return posixpath.basename(path.rstrip("/"))
    return os.path.basename(os.path.normpath(path))


def dirname(path) -> str:
    """``path`` without its last component (a trailing ``/`` ignored)."""
    path = as_str(path)
    if _is_url(path):
        return posixpath.dirname(path.rstrip("/"))
    return os.path.dirname(os.path.normpath(path))


def abspath(path) -> str:
    """``os.path.abspath`` for a local path; a URL unchanged (without a trailing ``/``)."""
    path = as_str(path)
    return _normal(path) if _is_url(path) else os.path.abspath(_local(path))


def local_path(path, what: str) -> str:
    """``path`` as a local ``str`` (from str, bytes, PathLike or ``file://``), refused if it
    is a storage URL: for paths written by libraries that write local files only
    (``jax.profiler``'s traces).

    Args:
      path: the path given by the user.
      what: what it is, for the message (``"ProfilerHook output_dir"``, ...).

    Raises:
      ValueError: ``path`` is a URL (``gs://``, ``s3://``, ``hdfs://``, ...); the message
        names it and the ways to use such storage.
    """
    scheme = protocol(path)
    if scheme is not None:
        raise ValueError(
            f"{what} {as_str(path)!r} is a {scheme}:// URL, but it is written by a library "
            "that writes local files only: a URL would become a local directory named "
            f"'{scheme}:' and nothing would reach the storage it names. Use a local "
            "directory (and copy it to the bucket afterwards), or mount the bucket as a file "
            "system (gcsfuse, mountpoint-s3, s3fs-fuse) and pass the mounted path."
        )
    return _local(path)


# ----- protocols -----------------------------------------------------------------------------
def _missing(what: str, text: str, scheme: str, package: str, extra: str | None):
    install = f"pip install 'jax-estimator[{extra}]' (or pip install {package})"
    return ProtocolUnavailableError(
        f"{what} {text!r} is a {scheme}:// URL; reading and writing {scheme}:// needs the "
        f"{package} package, which is not installed. Install it with "
        f"{install if extra else f'pip install {package}'}."
    )


def check(path, what: str, *, write: bool = False) -> str:
    """``path`` as a ``str`` the other functions take, after checking that it can be served.

    Args:
      path: a local path (str, bytes, PathLike, ``file://...``) or a storage URL.
      what: what it is, for the message (``"model_dir"``, ``"export_dir_base"``, ...).
      write: the path will be written to (refuses read-only protocols such as ``https``).

    Returns:
      A local path as given (``file://`` stripped), or the URL without a trailing ``/``.

    Raises:
      ProtocolUnavailableError: a URL whose protocol no installed package serves (the
        message names the package, and the extra to install where this project has one),
        that fsspec does not know, or that cannot be written where ``write`` is asked;
        nothing is created.
    """
    text = as_str(path)
    scheme = protocol(text)
    if scheme is None:
        return _local(text)
    import fsspec

    try:
        fsspec.get_filesystem_class(scheme)
    except ImportError as err:
        if scheme in PACKAGES:
            raise _missing(what, text, scheme, *PACKAGES[scheme][1:]) from None
        raise ProtocolUnavailableError(
            f"{what} {text!r} is a {scheme}:// URL; reading and writing {scheme}:// needs a "
            f"package that is not installed: {err}."
        ) from None
    except ValueError:
        raise ProtocolUnavailableError(
            f"{what} {text!r} is a {scheme}:// URL, but no file system implements "
            f"{scheme}://. Use a local path or a URL of a storage fsspec serves (gs://, "
            "s3://, ...), or mount the storage and pass the mounted path."
        ) from None
    if scheme in PACKAGES:  # an implementation that imports its package only when used
        module, package, extra = PACKAGES[scheme]
        try:
            importlib.import_module(module)
        except ImportError:
            raise _missing(what, text, scheme, package, extra) from None
    if write and scheme in READ_ONLY:
        raise ProtocolUnavailableError(
            f"{what} {text!r} is a {scheme}:// URL, which can be read but not written. Give a "
            "local path or a writable storage URL (gs://, s3://, ...)."
        )
    return _normal(text)


def _resolve(path):
    """``(filesystem, path on it, local)``: fsspec's file system for ``path`` and the path
    as that file system names it (a local path as given, ``file://`` stripped)."""
    text = as_str(path)
    if not _is_url(text):
        from fsspec.implementations.local import LocalFileSystem

        return LocalFileSystem(), _local(text), True
    from fsspec.core import url_to_fs

    try:
        filesystem, stripped = url_to_fs(text)
    except (ImportError, ValueError):
        check(text, "path")  # names the package, or the unknown protocol
        raise
    return filesystem, stripped, False


def _url(like: str, stripped: str) -> str:
    """A path a file system returned, as a URL of ``like``'s protocol."""
    return f"{protocol(like)}://{stripped.split('://', 1)[-1].lstrip('/')}"


def _fresh(filesystem, stripped: str) -> None:
    """Drops cached listings: another process may have written since."""
    with contextlib.suppress(Exception):
        filesystem.invalidate_cache(stripped)


def _remote(path):
    """``(filesystem, path on it)`` of a URL with fresh listings; None for a local path."""
    filesystem, stripped, local = _resolve(path)
    if local:
        return None
    _fresh(filesystem, stripped)
    return filesystem, stripped


# ----- queries -------------------------------------------------------------------------------
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


# ----- changes -------------------------------------------------------------------------------
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


def copy(source, target) -> None:
    """Copies one file, within a storage or across two (local to a URL, a URL to another
    protocol); the target is written whole (:func:`write_bytes`)."""
    source_fs, source_path, source_local = _resolve(source)
    target_fs, target_path, target_local = _resolve(target)
    if source_local and target_local:
        shutil.copyfile(source_path, target_path)
    elif type(source_fs) is type(target_fs):
        source_fs.copy(source_path, target_path)
    else:
        write_bytes(target, read_bytes(source))


def move(source, target) -> None:
    """Renames a file or directory. Locally ``os.replace`` (atomic). Within one object
    store every object is copied, then the originals deleted (object stores have no rename;
    not atomic); across storages a file is copied, then deleted."""
    source_fs, source_path, source_local = _resolve(source)
    target_fs, target_path, target_local = _resolve(target)
    if source_local and target_local:
        os.replace(source_path, target_path)
    elif type(source_fs) is type(target_fs):
        source_fs.mv(source_path, target_path, recursive=True)
    else:
        copy(source, target)
        remove(source)


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


# ----- whole writes: the two semantics ----------------------------------------------------------
@contextlib.contextmanager
def replace_atomically(path) -> Iterator[IO[bytes]]:
    """**Atomic local replace**: a binary file written under a temporary name beside the
    local ``path`` and renamed over it (``os.replace``) when the block ends without error,
    removed when it raises; readers see the old content or the new, never a part.

    Raises:
      FileNotFoundError: the directory does not exist.
    """
    local = _local(path)
    temp = os.path.join(
        os.path.dirname(local) or ".", f".{os.path.basename(local)}.tmp-{uuid.uuid4().hex}"
    )
    try:
        f = open(temp, "wb")  # noqa: SIM115 (closed below)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{local}: the directory {os.path.dirname(local) or '.'!r} does not exist. Create "
            "it first (os.makedirs(..., exist_ok=True))."
        ) from None
    try:
        yield f
        f.close()
        os.replace(temp, local)
    except BaseException:
        f.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp)
        raise


def upload_tree(local_dir, url, *, last: tuple[str, ...] = ()) -> None:
    """**Upload with a marker last**: every file under ``local_dir`` uploaded to ``url``
    (same relative paths), the relative paths in ``last`` after all the others, in that
    order: a reader that waits for the last one (a manifest, a commit marker) sees a
    complete tree."""
    local_dir = _local(local_dir)
    filesystem, stripped, _ = _resolve(url)
    files = []
    for directory, _, names in os.walk(local_dir):
        for name in names:
            files.append(os.path.relpath(os.path.join(directory, name), local_dir))
    files = [f.replace(os.sep, "/") for f in sorted(files)]
    ordered = [f for f in files if f not in last] + [f for f in last if f in files]
    for relative in ordered:
        filesystem.put_file(os.path.join(local_dir, *relative.split("/")), f"{stripped}/{relative}")
    _fresh(filesystem, stripped)


@contextlib.contextmanager
def atomic_write(path) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` complete or not at all: locally by
    :func:`replace_atomically`; for a URL written to a local file and uploaded in one
    request when the block ends (a store publishes an object only when its upload
    completes); nothing is published when the block raises.

    Raises:
      ProtocolUnavailableError: a URL whose protocol is not available.
      FileNotFoundError: the (local) directory does not exist.
    """
    path = check(path, "file", write=True)
    remote = _remote(path)
    if remote is None:
        with replace_atomically(path) as f:
            yield f
        return
    filesystem, stripped = remote
    with tempfile.TemporaryDirectory(prefix="jax-estimator-upload-") as scratch:
        local = os.path.join(scratch, "file")
        with open(local, "wb") as f:
            yield f
        filesystem.put_file(local, stripped)
        _fresh(filesystem, stripped)


def write_bytes(path, data: bytes) -> None:
    """Writes a whole file so that readers see the old content or the new, never a part
    (:func:`atomic_write`; for a URL one upload)."""
    remote = _remote(path)
    if remote is not None:
        filesystem, stripped = remote
        filesystem.pipe_file(stripped, bytes(data))
        return
    with replace_atomically(path) as f:
        f.write(data)


def append_bytes(path, data: bytes) -> None:
    """Appends to a file. For a URL the object is read and written back whole (object
    stores cannot append): one writer at a time."""
    if _remote(path) is None:
        with open(_local(path), "ab") as f:
            f.write(data)
        return
    try:
        old = read_bytes(path)
    except FileNotFoundError:
        old = b""
    write_bytes(path, old + data)


# ----- trees ---------------------------------------------------------------------------------
def download_tree(url, local_dir) -> None:
    """Downloads every object under ``url`` into ``local_dir`` (created), keeping their
    relative paths.

    Raises:
      FileNotFoundError: nothing is stored under ``url``.
    """
    filesystem, stripped, _ = _resolve(url)
    _fresh(filesystem, stripped)
    found = filesystem.find(stripped)
    if not found:
        raise FileNotFoundError(f"{as_str(url)}: nothing is stored under this URL.")
    local_dir = _local(local_dir)
    prefix = stripped.rstrip("/") + "/"
    for key in found:
        relative = key[len(prefix) :] if key.startswith(prefix) else posixpath.basename(key)
        target = os.path.join(local_dir, *relative.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        filesystem.get_file(key, target)


@contextlib.contextmanager
def staging_dir(parent) -> Iterator[str]:
    """A new empty local directory in which to build a tree that :func:`publish_tree` then
    puts under ``parent`` (the directory itself, or a tree built inside it): inside
    ``parent`` for a local one (the same file system, so the rename is atomic; named
    ``temp-...``, which readers skip), a temporary directory for a URL. Removed, with
    whatever is left in it, when the block ends."""
    if _remote(parent) is None:
        local = _local(parent)
        os.makedirs(local, exist_ok=True)
        scratch = os.path.join(local, f"temp-{uuid.uuid4().hex[:12]}")
        os.mkdir(scratch)
    else:
        scratch = tempfile.mkdtemp(prefix="jax-estimator-staging-")
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def publish_tree(local_dir, target, *, last: tuple[str, ...] = ()) -> None:
    """Makes the complete tree ``local_dir`` (built in a :func:`staging_dir`) appear at
    ``target`` so that no reader sees part of it: locally by one rename (``local_dir`` is
    moved); on a store by :func:`upload_tree` with ``last`` last, and a failed upload
    deletes what it wrote.

    Raises:
      FileExistsError: (local) ``target`` exists already.
    """
    remote = _remote(target)
    if remote is None:
        local = _local(target)
        if os.path.exists(local):
            raise FileExistsError(f"{local} exists already.")
        try:
            os.rename(_local(local_dir), local)
        except OSError:
            if os.path.exists(local):  # taken meanwhile (a non-empty directory)
                raise FileExistsError(f"{local} exists already.") from None
            raise
        return
    try:
        upload_tree(local_dir, target, last=last)
    except BaseException:
        rmtree(target)  # nothing partial stays behind (where the store still answers)
        raise


def complete(path, *, marker: str, local_check: str) -> bool:
    """Whether the tree at ``path`` is complete: on a store it has the ``marker`` that
    :func:`upload_tree` (or orbax on ``gs://``) writes last; locally, where trees appear by
    a rename, it has ``local_check`` (a relative path written before the rename)."""
    remote = _remote(path)
    if remote is None:
        return os.path.isfile(os.path.join(_local(path), *local_check.split("/")))
    return isfile(join(path, marker))


def local_copy(path) -> tuple[str, Callable[[], None]]:
    """A local directory holding the tree at ``path``, and what removes it when it is no
    longer needed: ``path`` itself on a local disk (removing nothing), else a downloaded
    copy.

    Raises:
      FileNotFoundError: nothing is stored under a URL ``path``.
    """
    if _remote(path) is None:
        return _local(path), lambda: None
    local = tempfile.mkdtemp(prefix="jax-estimator-copy-")
    try:
        download_tree(path, local)
    except BaseException:
        shutil.rmtree(local, ignore_errors=True)
        raise
    return local, lambda: shutil.rmtree(local, ignore_errors=True)


class Mirror:
    """A local directory that stands for ``target``, for writers of local files only
    (tensorboardX's event files): ``target`` itself on a local disk; for a URL a temporary
    directory whose files :meth:`sync` uploads over their objects (each whole, one request).

    Attributes:
      path: the local directory to write in (created).
    """

    def __init__(self, target) -> None:
        self.target = as_str(target)
        self._remote = _remote(self.target) is not None
        if self._remote:
            self.path = tempfile.mkdtemp(prefix="jax-estimator-mirror-")
        else:
            self.path = _local(self.target)
            os.makedirs(self.path, exist_ok=True)

    def sync(self) -> None:
        """Uploads every local file over its object (nothing on a local disk)."""
        if not self._remote or not os.path.isdir(self.path):
            return
        for name in os.listdir(self.path):
            with open(os.path.join(self.path, name), "rb") as f:
                write_bytes(join(self.target, name), f.read())

    def discard(self) -> None:
        """Removes the temporary directory of a URL (what :meth:`sync` did not upload is
        lost); nothing on a local disk."""
        if self._remote:
            shutil.rmtree(self.path, ignore_errors=True)

    def close(self) -> None:
        """Syncs, then :meth:`discard`."""
        self.sync()
        self.discard()


def exclusive_lock(path, holder: dict):
    """An exclusive, non-blocking lock on ``path``, held while a ``with`` block runs:
    ``filelock``'s OS file lock on a local disk (the operating system drops it when its
    process ends), a renewed lease object on a store (``estimator.io.locks``). ``holder``
    (JSON-serializable: pid, host, ...) is written into the lock for whoever finds it held.

    Raises:
      estimator.io.locks.LockHeld: on entering, when another holder has it.
    """
    from estimator.io import locks

    if _remote(path) is None:
        return locks.LocalLock(_local(path), holder)
    return locks.Lease(check(path, "lock"), (read_bytes, write_bytes, remove), holder)
