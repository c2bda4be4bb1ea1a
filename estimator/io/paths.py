"""Where files are opened: the one seam between ``estimator.io``'s readers and writers and
the storage holding the files.

Every file that ``estimator.io`` reads or writes goes through :func:`open_file`,
:func:`glob` and :func:`atomic_write`, so another storage (an object store through fsspec)
plugs in here without touching the readers and writers. Today local paths are served; a
URL (``scheme://...``) is refused with a message naming its protocol, so that a URL never
becomes a local directory named after its scheme.
"""

from __future__ import annotations

import contextlib
import glob as _glob
import os
import re
import uuid
from collections.abc import Iterator
from typing import IO

__all__ = ["atomic_write", "glob", "open_file", "protocol"]

_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def protocol(path: str) -> str | None:
    """The URL scheme of ``path`` (``"gs"`` for ``gs://b/x``), None for a local path."""
    match = _URL.match(path)
    return None if match is None else match.group(1).lower()


def _local(path) -> str:
    path = os.fsdecode(os.fspath(path))
    scheme = protocol(path)
    if scheme is not None and scheme != "file":
        raise ValueError(
            f"{path}: the {scheme}:// protocol is not available to estimator.io (it reads and "
            "writes local files). Copy the files to a local directory (e.g. gsutil cp / aws "
            "s3 cp) and pass that path."
        )
    return path[len("file://") :] if scheme == "file" else path


def open_file(path, mode: str = "rb") -> IO[bytes]:
    """Opens ``path`` in a binary ``mode`` (``"rb"``, ``"wb"``, ``"ab"``).

    Raises:
      ValueError: a URL whose protocol is not available; a text mode.
      FileNotFoundError: for reading, a file that does not exist (the message names it).
    """
    if "b" not in mode:
        raise ValueError(f"open_file opens files in binary modes only; got mode {mode!r}.")
    local = _local(path)
    try:
        return open(local, mode)  # noqa: SIM115 (the caller closes it)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{local}: no such file. Check the path (and the file pattern that produced it)."
        ) from None


def glob(pattern) -> list[str]:
    """The paths matching ``pattern`` (``*``, ``?``, ``[...]``), sorted.

    Raises:
      ValueError: a URL whose protocol is not available.
    """
    return sorted(_glob.glob(_local(pattern)))


@contextlib.contextmanager
def atomic_write(path) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` complete or not at all: written under a
    temporary name beside it, renamed onto ``path`` when the block ends without error,
    removed when it raises.

    Raises:
      ValueError: a URL whose protocol is not available.
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
