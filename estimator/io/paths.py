"""Which paths the package reads and writes: local ones only, for now.

TF's file system layer accepted ``gs://bucket/dir`` wherever a path went. Here every path is
opened by Python's and orbax's local file APIs, and ``os.path.join("gs://b", "m")`` makes the
relative path ``gs:/b/m``: ``Estimator(model_fn, model_dir="gs://b/m")`` used to create a
local directory ``gs:`` with its lock file, so a user believed the checkpoints were in the
bucket when they were on the local disk. :func:`local_path` refuses URLs where a path enters
(``RunConfig``, ``Estimator``, ``WarmStartSettings``, exports, checkpoints, loading an
export), before anything is created.

Every file that ``estimator.io``'s TFRecord reader and writer open goes through
:func:`open_file`, :func:`glob` and :func:`atomic_write`: the one seam where another storage
(an object store through fsspec) plugs in without touching the readers and writers.
"""

from __future__ import annotations

import contextlib
import glob as _glob
import os
import re
import uuid
from collections.abc import Iterator
from typing import IO

__all__ = ["atomic_write", "glob", "local_path", "open_file", "url_scheme"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def url_scheme(path) -> str | None:
    """The URL scheme of ``path`` (``"gs"`` for ``gs://bucket/x``), or None for a local path.

    A Windows drive (``C:\\dir``) is not a scheme: a scheme is followed by ``://``.
    """
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        path = os.fspath(path)
    match = _SCHEME.match(path)
    return match.group(1).lower() if match else None


def local_path(path, what: str) -> str:
    """``path`` as a ``str`` (from str, bytes or PathLike), refused if it is a URL.

    Args:
      path: the path given by the user.
      what: what it is, for the message (``"model_dir"``, ``"export_dir_base"``, ...).

    Returns:
      ``os.fsdecode(os.fspath(path))``.

    Raises:
      ValueError: ``path`` is a URL (``gs://``, ``s3://``, ``hdfs://``, ``file://``, ...);
        the message names it and the ways to use such storage.
    """
    text = os.fsdecode(os.fspath(path))
    scheme = url_scheme(text)
    if scheme is not None:
        raise ValueError(
            f"{what} {text!r} is a {scheme}:// URL, but this jax-estimator reads and writes "
            "local paths only: a URL would become a local directory named "
            f"'{scheme}:' and nothing would reach the storage it names. Use a local "
            "directory, or mount the bucket as a file system (gcsfuse, mountpoint-s3, "
            "s3fs-fuse) and pass the mounted path."
        )
    return text


def open_file(path, mode: str = "rb") -> IO[bytes]:
    """Opens ``path`` in a binary ``mode`` (``"rb"``, ``"wb"``, ``"ab"``).

    Raises:
      ValueError: a URL (see :func:`local_path`); a text mode.
      FileNotFoundError: for reading, a file that does not exist (the message names it).
    """
    if "b" not in mode:
        raise ValueError(f"open_file opens files in binary modes only; got mode {mode!r}.")
    local = local_path(path, "file")
    try:
        return open(local, mode)  # noqa: SIM115 (the caller closes it)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{local}: no such file. Check the path (and the file pattern that produced it)."
        ) from None


def glob(pattern) -> list[str]:
    """The paths matching ``pattern`` (``*``, ``?``, ``[...]``), sorted.

    Raises:
      ValueError: a URL (see :func:`local_path`).
    """
    return sorted(_glob.glob(local_path(pattern, "file pattern")))


@contextlib.contextmanager
def atomic_write(path) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` complete or not at all: written under a
    temporary name beside it, renamed onto ``path`` when the block ends without error,
    removed when it raises.

    Raises:
      ValueError: a URL (see :func:`local_path`).
      FileNotFoundError: the directory does not exist.
    """
    local = local_path(path, "file")
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
