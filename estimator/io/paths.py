"""Where data files are opened, and the paths only a local file system can take.

Every file that ``estimator.io``'s TFRecord reader and writer open goes through
:func:`open_file`, :func:`glob` and :func:`atomic_write`; they serve local paths and storage
URLs (``gs://``, ``s3://``, any fsspec protocol whose package is installed) through
``estimator.io.fs``, so ``tfrecord_input_fn("gs://bucket/train-*.tfrecord.gz", ...)`` reads
from the bucket and ``TFRecordWriter("s3://bucket/part-0.tfrecord")`` writes there.

A few writers are other libraries' that write local files only (``jax.profiler``'s traces):
given a URL, ``os.path.join("gs://b", "m")`` would make the relative path ``gs:/b/m``, a
local directory named after the scheme. :func:`local_path` refuses a URL there, before
anything is created.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import uuid
from collections.abc import Iterator
from typing import IO

from estimator.io import fs

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
    """``path`` as a ``str`` (from str, bytes or PathLike), refused if it is a URL: for
    paths written by libraries that write local files only.

    Args:
      path: the path given by the user.
      what: what it is, for the message (``"ProfilerHook output_dir"``, ...).

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
            f"{what} {text!r} is a {scheme}:// URL, but it is written by a library that "
            "writes local files only: a URL would become a local directory named "
            f"'{scheme}:' and nothing would reach the storage it names. Use a local "
            "directory (and copy it to the bucket afterwards), or mount the bucket as a file "
            "system (gcsfuse, mountpoint-s3, s3fs-fuse) and pass the mounted path."
        )
    return text


def open_file(path, mode: str = "rb") -> IO[bytes]:
    """Opens ``path`` (a local path or a storage URL) in a binary ``mode`` (``"rb"``,
    ``"wb"``, ``"ab"``; object stores cannot append: ``"ab"`` is local only).

    Raises:
      ValueError: a URL whose protocol is not available (names the package to install);
        a text mode; appending to a URL.
      FileNotFoundError: for reading, a file that does not exist (the message names it).
    """
    if "b" not in mode:
        raise ValueError(f"open_file opens files in binary modes only; got mode {mode!r}.")
    path = fs.check(path, "file", write="r" not in mode)
    if fs.is_url(path) and "a" in mode:
        raise ValueError(
            f"{path}: object stores cannot append to a file. Write a new file (or read it "
            "and write it back whole)."
        )
    try:
        return fs.open_file(path, mode)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no such file. Check the path (and the file pattern that produced it)."
        ) from None


def glob(pattern) -> list[str]:
    """The paths matching ``pattern`` (``*``, ``?``, ``[...]``), sorted; for a URL pattern,
    URLs.

    Raises:
      ValueError: a URL whose protocol is not available (names the package to install).
    """
    return fs.glob(fs.check(pattern, "file pattern"))


@contextlib.contextmanager
def atomic_write(path) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` complete or not at all: written under a
    temporary name beside it, renamed onto ``path`` when the block ends without error,
    removed when it raises. For a URL the file is written locally and uploaded in one
    request when the block ends (an object store publishes an object only when its upload
    completes); nothing is uploaded when the block raises.

    Raises:
      ValueError: a URL whose protocol is not available (names the package to install).
      FileNotFoundError: the (local) directory does not exist.
    """
    path = fs.check(path, "file", write=True)
    if fs.is_url(path):
        with tempfile.TemporaryDirectory(prefix="jax-estimator-upload-") as scratch:
            local = os.path.join(scratch, "file")
            with open(local, "wb") as f:
                yield f
            fs.put_file(local, path)
        return
    local = path
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
