"""Local paths and storage URLs through one seam: the file operations the package needs,
served by the operating system for local paths and by fsspec for URLs.

TF's file system layer accepted ``gs://bucket/dir`` wherever a path went; so does this
package: ``model_dir``, export directories, ``warm_start_from``, checkpoint paths, event
files and data files may be ``gs://`` (gcsfs), ``s3://`` (s3fs) or any other protocol that
fsspec implements and whose package is installed (``memory://`` always is). Endpoints and
credentials come from the standard environment that those clients read
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``,
``STORAGE_EMULATOR_HOST``, application default credentials), so a job points at MinIO or
an emulator without code changes.

Every function takes a local path (str, bytes or PathLike; ``file://`` URLs too) or a URL.
A URL is never joined, normalized or made absolute by ``os.path`` (which turns
``gs://b/m`` into a local ``gs:/b/m``); :func:`check` refuses a URL whose protocol cannot be
served, naming the package to install, before anything is created.

Object stores have no directories and no rename: a "directory" is a key prefix, and
:func:`write_bytes` publishes an object with one request (readers see all of it or none);
a tree is published file by file with :func:`put_tree`, its completion marker last.

Synopsis::

    from estimator.io import fs

    fs.check("s3://bucket/models/ctr", "model_dir")   # gives the package to install, if any
    fs.write_bytes(fs.join("s3://bucket/models/ctr", "hello"), b"hi")
    assert fs.listdir("s3://bucket/models/ctr") == ["hello"]
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shutil
import uuid
from typing import IO, Any

__all__ = [
    "ProtocolUnavailableError",
    "check",
    "protocol",
    "is_url",
    "as_str",
    "join",
    "basename",
    "dirname",
    "abspath",
    "exists",
    "isdir",
    "isfile",
    "listdir",
    "makedirs",
    "remove",
    "rmtree",
    "move",
    "open_file",
    "read_bytes",
    "write_bytes",
    "append_bytes",
    "glob",
    "put_file",
    "put_tree",
    "get_tree",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")

# orbax lists and renames gs:// checkpoints through etils.epath, which serves gs:// and s3://
# with TensorFlow's file system whenever TensorFlow is installed (importing it) and with
# fsspec otherwise; epath decides once per process. Library code never imports TensorFlow,
# and gcsfs follows the same emulator and credentials as the rest of this package: fsspec,
# unless the user chose otherwise.
os.environ.setdefault("EPATH_USE_TF", "false")

#: Protocols whose fsspec implementation lives in a package this project names as an
#: extra: ``protocol -> (package, extra)``.
PACKAGES = {
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
}
#: Protocols that fsspec reads but cannot write to.
READ_ONLY = frozenset({"http", "https"})


class ProtocolUnavailableError(ValueError):
    """A URL whose protocol no installed file system serves (a ``ValueError``, as TF's
    ``RunConfig`` raises for a bad ``model_dir``); the message names the package to
    install."""


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


def is_url(path) -> bool:
    """Whether ``path`` is a storage URL (not a local path)."""
    return protocol(path) is not None


def _local(path) -> str:
    text = as_str(path)
    match = _SCHEME.match(text)
    return text[len(match.group(0)) :] if match else text


def _normal(url: str) -> str:
    """``url`` with its scheme lower-cased and without a trailing ``/``."""
    scheme, rest = url.split("://", 1)
    rest = rest.rstrip("/")
    return f"{scheme.lower()}://{rest}"


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
        message names the package and the extra to install), that fsspec does not know,
        or that cannot be written where ``write`` is asked; nothing is created.
    """
    text = as_str(path)
    scheme = protocol(text)
    if scheme is None:
        return _local(text)
    import fsspec

    try:
        fsspec.get_filesystem_class(scheme)
    except ImportError as err:
        package, extra = PACKAGES.get(scheme, (None, None))
        if package:
            hint = (
                f"needs the {package} package, which is not installed. Install it with "
                f"pip install 'jax-estimator[{extra}]' (or pip install {package})"
            )
        else:
            hint = f"needs a package that is not installed: {err}"
        raise ProtocolUnavailableError(
            f"{what} {text!r} is a {scheme}:// URL; reading and writing {scheme}:// {hint}."
        ) from None
    except ValueError:
        raise ProtocolUnavailableError(
            f"{what} {text!r} is a {scheme}:// URL, but no file system implements "
            f"{scheme}://. Use a local path or a URL of a storage fsspec serves (gs://, "
            "s3://, ...), or mount the storage and pass the mounted path."
        ) from None
    if scheme in ("gs", "gcs"):
        _gcs_environment()
    if write and scheme in READ_ONLY:
        raise ProtocolUnavailableError(
            f"{what} {text!r} is a {scheme}:// URL, which can be read but not written. Give a "
            "local path or a writable storage URL (gs://, s3://, ...)."
        )
    return _normal(text)


def _gcs_environment() -> None:
    """Points every gs:// client of the process at one place. orbax writes checkpoints
    through TensorStore (which reads ``TENSORSTORE_GCS_HTTP_URL``) and lists them through
    ``etils.epath`` (which uses TensorFlow's file system when TF is installed), the rest goes
    through gcsfs (which reads ``STORAGE_EMULATOR_HOST``). Unless set already, TensorStore
    follows ``STORAGE_EMULATOR_HOST`` too: one emulator for all, never the emulator for
    some files and Google's servers for others."""
    emulator = os.environ.get("STORAGE_EMULATOR_HOST", "")
    if emulator and emulator != "default":
        if not emulator.startswith(("http://", "https://")):
            emulator = "http://" + emulator
        os.environ.setdefault("TENSORSTORE_GCS_HTTP_URL", emulator)


def _fs(path):
    """``(filesystem, path as the filesystem names it)`` of a URL."""
    import fsspec

    url = as_str(path)
    filesystem = fsspec.filesystem(protocol(url))
    return filesystem, filesystem._strip_protocol(url)


def _url(filesystem, stripped: str, like: str) -> str:
    """A path a filesystem returned, as a URL of ``like``'s protocol."""
    return f"{protocol(like)}://{stripped.split('://', 1)[-1].lstrip('/')}"


def join(base, *parts) -> str:
    """``base/part/...``: ``os.path.join`` for a local ``base``, ``/`` for a URL."""
    base = as_str(base)
    if is_url(base):
        return posixpath.join(base.rstrip("/"), *[as_str(p) for p in parts])
    return os.path.join(base, *[as_str(p) for p in parts])


def basename(path) -> str:
    """The last component of ``path`` (a trailing ``/`` ignored)."""
    path = as_str(path)
    if is_url(path):
        return posixpath.basename(path.rstrip("/"))
    return os.path.basename(os.path.normpath(path))


def dirname(path) -> str:
    """``path`` without its last component (a trailing ``/`` ignored)."""
    path = as_str(path)
    if is_url(path):
        return posixpath.dirname(path.rstrip("/"))
    return os.path.dirname(os.path.normpath(path))


def abspath(path) -> str:
    """``os.path.abspath`` for a local path; a URL unchanged (without a trailing ``/``)."""
    path = as_str(path)
    return _normal(path) if is_url(path) else os.path.abspath(_local(path))


def _fresh(filesystem, stripped: str) -> None:
    """Drops cached listings: another process may have written since."""
    with contextlib.suppress(Exception):
        filesystem.invalidate_cache(stripped)


def exists(path) -> bool:
    """Whether a file or directory (for a URL: an object or a key prefix) exists."""
    if not is_url(path):
        return os.path.exists(_local(path))
    filesystem, stripped = _fs(path)
    _fresh(filesystem, stripped)
    return filesystem.exists(stripped)


def isdir(path) -> bool:
    """Whether ``path`` is a directory (for a URL: a key prefix with objects under it)."""
    if not is_url(path):
        return os.path.isdir(_local(path))
    filesystem, stripped = _fs(path)
    _fresh(filesystem, stripped)
    return filesystem.isdir(stripped)


def isfile(path) -> bool:
    """Whether ``path`` is a file (for a URL: an object)."""
    if not is_url(path):
        return os.path.isfile(_local(path))
    filesystem, stripped = _fs(path)
    _fresh(filesystem, stripped)
    return filesystem.isfile(stripped)


def listdir(path) -> list[str]:
    """The names directly under ``path`` (files and directories), sorted; ``[]`` when it
    does not exist."""
    if not is_url(path):
        try:
            return sorted(os.listdir(_local(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []
    filesystem, stripped = _fs(path)
    _fresh(filesystem, stripped)
    try:
        entries = filesystem.ls(stripped, detail=False)
    except FileNotFoundError:
        return []
    names = {posixpath.basename(e.rstrip("/")) for e in entries}
    names.discard("")
    return sorted(names)


def makedirs(path) -> None:
    """Creates a local directory and its parents; for a URL nothing (object stores have
    no directories: a prefix exists once an object is written under it)."""
    if not is_url(path):
        os.makedirs(_local(path), exist_ok=True)


def remove(path) -> None:
    """Deletes one file (object)."""
    if not is_url(path):
        os.remove(_local(path))
        return
    filesystem, stripped = _fs(path)
    filesystem.rm_file(stripped)


def rmtree(path, *, first: tuple[str, ...] = ()) -> None:
    """Deletes a directory (every object under a prefix); a missing one is no error.

    Args:
      path: the directory or URL prefix.
      first: relative paths deleted before everything else, in that order: the mirror of
        :func:`put_tree`'s ``last``. An object store deletes a prefix's objects in no
        particular order, so a deletion cut short (SIGKILL) could leave a commit marker or
        manifest over a tree missing files; deleted first, the remains read as incomplete
        and readers skip them.
    """
    if not is_url(path):
        shutil.rmtree(_local(path), ignore_errors=True)
        return
    filesystem, stripped = _fs(path)
    _fresh(filesystem, stripped)
    for relative in first:
        with contextlib.suppress(FileNotFoundError):
            filesystem.rm_file(f"{stripped}/{relative}")
    with contextlib.suppress(FileNotFoundError):
        filesystem.rm(stripped, recursive=True)


def move(source, target) -> None:
    """Renames a file or directory. Local: ``os.rename`` (atomic). URL: every object is
    copied, then the originals deleted (object stores have no rename; not atomic)."""
    if not is_url(source):
        os.rename(_local(source), _local(target))
        return
    filesystem, stripped = _fs(source)
    _, destination = _fs(target)
    filesystem.mv(stripped, destination, recursive=True)


def open_file(path, mode: str = "rb") -> IO[Any]:
    """Opens a file (an object) for reading or writing (``open``'s modes; for a URL, a
    written object appears when the file is closed).

    Raises:
      FileNotFoundError: for reading, a file that does not exist.
    """
    if not is_url(path):
        return open(_local(path), mode)  # noqa: SIM115 (the caller closes it)
    filesystem, stripped = _fs(path)
    if "r" in mode:
        _fresh(filesystem, stripped)
        # fsspec's classic read-ahead cache: files here are read front to back (TFRecords,
        # JSON). (gcsfs's default background prefetcher stalled when read from a thread.)
        return filesystem.open(stripped, mode, cache_type="readahead")
    return filesystem.open(stripped, mode)


def read_bytes(path) -> bytes:
    """The whole content of a file (an object)."""
    with open_file(path, "rb") as f:
        return f.read()


def write_bytes(path, data: bytes) -> None:
    """Writes a whole file so that readers see the old content or the new, never a part:
    locally under a temporary name renamed over ``path``; for a URL one upload (an object
    store publishes an object only when its upload completes)."""
    if is_url(path):
        filesystem, stripped = _fs(path)
        filesystem.pipe_file(stripped, bytes(data))
        return
    local = _local(path)
    temp = os.path.join(os.path.dirname(local) or ".", f".{os.path.basename(local)}.tmp-")
    temp += uuid.uuid4().hex
    try:
        with open(temp, "wb") as f:
            f.write(data)
        os.replace(temp, local)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp)
        raise


def append_bytes(path, data: bytes) -> None:
    """Appends to a file. For a URL the object is read and written back whole (object
    stores cannot append): one writer at a time."""
    if not is_url(path):
        with open(_local(path), "ab") as f:
            f.write(data)
        return
    try:
        old = read_bytes(path)
    except FileNotFoundError:
        old = b""
    write_bytes(path, old + data)


def glob(pattern) -> list[str]:
    """The paths matching ``pattern`` (``*``, ``?``, ``[...]``; ``**`` across directories),
    sorted; URLs keep their protocol."""
    import glob as _glob

    if not is_url(pattern):
        return sorted(_glob.glob(_local(pattern)))
    filesystem, stripped = _fs(pattern)
    _fresh(filesystem, stripped.split("*")[0].rsplit("/", 1)[0])
    return sorted(_url(filesystem, p, as_str(pattern)) for p in filesystem.glob(stripped))


def put_file(local, url) -> None:
    """Uploads the local file ``local`` to ``url`` in one upload (the object appears when
    it completes)."""
    filesystem, stripped = _fs(url)
    filesystem.put_file(_local(local), stripped)
    _fresh(filesystem, stripped)


def put_tree(local_dir, url: str, *, last: tuple[str, ...] = ()) -> None:
    """Uploads every file under ``local_dir`` to ``url`` (same relative paths), the
    relative paths in ``last`` after all the others, in that order: a reader that waits
    for the last one (a manifest, a commit marker) sees a complete tree."""
    local_dir = _local(local_dir)
    filesystem, stripped = _fs(url)
    files = []
    for directory, _, names in os.walk(local_dir):
        for name in names:
            files.append(os.path.relpath(os.path.join(directory, name), local_dir))
    files = [f.replace(os.sep, "/") for f in sorted(files)]
    ordered = [f for f in files if f not in last] + [f for f in last if f in files]
    for relative in ordered:
        filesystem.put_file(os.path.join(local_dir, *relative.split("/")), f"{stripped}/{relative}")
    _fresh(filesystem, stripped)


def get_tree(url, local_dir) -> None:
    """Downloads every object under ``url`` into ``local_dir`` (created), keeping their
    relative paths.

    Raises:
      FileNotFoundError: nothing is stored under ``url``.
    """
    filesystem, stripped = _fs(url)
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
