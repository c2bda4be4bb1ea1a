"""Paths that only a local file system can take.

Storage URLs are served where the package writes and reads (``estimator.io.fs``). A few
writers are other libraries' that write local files only (``jax.profiler``'s traces): given
a URL, ``os.path.join("gs://b", "m")`` would make the relative path ``gs:/b/m``, a local
directory named after the scheme. :func:`local_path` refuses a URL there, before anything is
created.
"""

from __future__ import annotations

import os
import re

__all__ = ["local_path", "url_scheme"]

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
            f"{what} {text!r} is a {scheme}:// URL, but it is written by a library that "
            "writes local files only: a URL would become a local directory named "
            f"'{scheme}:' and nothing would reach the storage it names. Use a local "
            "directory (and copy it to the bucket afterwards), or mount the bucket as a file "
            "system (gcsfuse, mountpoint-s3, s3fs-fuse) and pass the mounted path."
        )
    return text
