"""A file written whole, so that readers see the old content or the new, never a part:
the **atomic local replace** (:func:`replace_atomically`), and the functions that choose it
for a local path or one upload for a URL (a store shows an object whole or not at all):
:func:`atomic_write`, :func:`write_bytes`, :func:`append_bytes`; copies and moves, within a
storage or across two."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import IO

from estimator.io.fs._files import read_bytes, remove
from estimator.io.fs._paths import _fresh, _local, _remote, _resolve, check


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


# ----- copies and moves ---------------------------------------------------------------------------
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
