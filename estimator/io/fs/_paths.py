"""Paths and the file systems that serve them: a path's parts (``join``, ``basename``,
``dirname``, ``abspath``) in the form it was given, its protocol, :func:`check`, which
refuses a URL no installed package serves before anything is created, and the resolution
of a path into fsspec's file system and the path on it (``url_to_fs``) that every other
module of ``estimator.io.fs`` goes through. The only module that asks whether a path is a
URL."""

from __future__ import annotations

import contextlib
import importlib
import os
import posixpath
import re

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


# ----- paths --------------------------------------------------------------------------------------
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


# ----- protocols ----------------------------------------------------------------------------------
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
