"""``tf.keras``: ``utils.get_file`` only (a cached download, as Keras 2.15's).

TF 1 Estimator programs fetch their data with ``tf.keras.utils.get_file(fname, origin)``.
It downloads ``origin`` (``http(s)://``, ``ftp://`` or ``file://``, with Python's
``urllib``, as Keras does) into ``~/.keras/<cache_subdir>`` (``cache_dir`` to change it;
``/tmp/.keras`` when the home is not writable) unless the file is already there, checks
``file_hash`` (sha256 or md5), extracts archives when asked (``extract``, ``untar``), and
returns the local path. Unlike Keras, a download is written to a temporary file and renamed
when complete and verified, so a failed or interrupted one leaves nothing behind.

Keras models and layers are not provided: the rest of ``tf.keras`` is refused with the
replacement named.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import types
import urllib.error
import urllib.request
import zipfile
from urllib.parse import urlsplit

from estimator.compat._unsupported import module_getattr

__all__ = ["utils"]

__getattr__ = module_getattr("tf.keras", __name__)


def _hash(path: str, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _algorithm(file_hash: str, hash_algorithm: str) -> str:
    if hash_algorithm in ("sha256", "md5"):
        return hash_algorithm
    if hash_algorithm != "auto":
        raise ValueError(
            f"hash_algorithm must be 'auto', 'sha256' or 'md5'; got {hash_algorithm!r}."
        )
    return "sha256" if len(file_hash) == 64 else "md5"


def _extract(path: str, target: str, archive_format) -> bool:
    formats = ["tar", "zip"] if archive_format == "auto" else archive_format
    formats = [formats] if isinstance(formats, str) else list(formats or ())
    for kind in formats:
        if kind == "tar" and tarfile.is_tarfile(path):
            with tarfile.open(path) as archive:
                archive.extractall(target, filter="data")
            return True
        if kind == "zip" and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                archive.extractall(target)
            return True
    return False


def get_file(
    fname: str | None = None,
    origin: str | None = None,
    untar: bool = False,
    md5_hash: str | None = None,
    file_hash: str | None = None,
    cache_subdir: str = "datasets",
    hash_algorithm: str = "auto",
    extract: bool = False,
    archive_format="auto",
    cache_dir: str | None = None,
) -> str:
    """``tf.keras.utils.get_file``: the local path of ``origin``, downloaded once.

    Args:
      fname: the file's name in the cache (an absolute path is used as is); default: the
        last part of ``origin``'s path.
      origin: the URL (``http(s)://``, ``ftp://``, ``file://``).
      untar: extract a ``.tar.gz`` and return the extracted directory's path (Keras 2's
        deprecated spelling of ``extract``).
      md5_hash: deprecated: ``file_hash`` with ``hash_algorithm='md5'``.
      file_hash: the expected sha256 or md5 hex digest; a cached file that does not match
        is downloaded again, a download that does not match is refused.
      cache_subdir: the folder under ``cache_dir``.
      hash_algorithm: ``'auto'`` (by the digest's length), ``'sha256'`` or ``'md5'``.
      extract: extract the archive (tar or zip) next to it.
      archive_format: ``'auto'``, ``'tar'``, ``'zip'`` or a list of them.
      cache_dir: default ``~/.keras``.

    Returns:
      The path of the file (with ``untar``: of the extracted directory).

    Raises:
      ValueError: no ``origin``, no file name, or a download whose hash does not match.
      Exception: the download failed (Keras' message: ``URL fetch failure on ...``).
    """
    if origin is None:
        raise ValueError('Please specify the "origin" argument (URL of the file to download).')
    if md5_hash is not None and file_hash is None:
        file_hash, hash_algorithm = md5_hash, "md5"
    datadir = _cache_dir(cache_dir, cache_subdir)
    fname = os.fspath(fname) if fname else os.path.basename(urlsplit(origin).path)
    if not fname:
        raise ValueError(
            f"Can't parse the file name from the origin provided: '{origin}'. Please specify "
            "the `fname` as the input param."
        )
    untar_path = None
    if untar:
        stem = fname[: -len(".tar.gz")] if fname.endswith(".tar.gz") else fname
        untar_path = os.path.join(datadir, stem)
        path = untar_path + ".tar.gz"
    else:
        path = os.path.join(datadir, fname)
    algorithm = None if file_hash is None else _algorithm(file_hash, hash_algorithm)
    cached = os.path.exists(path) and (file_hash is None or _hash(path, algorithm) == file_hash)
    if not cached:
        _download(origin, path, file_hash, algorithm)
    if untar_path is not None:
        if not os.path.exists(untar_path):
            _extract(path, datadir, "tar")
        return untar_path
    if extract:
        _extract(path, datadir, archive_format)
    return path


def _cache_dir(cache_dir: str | None, cache_subdir: str) -> str:
    """``<cache_dir or ~/.keras>/<cache_subdir>``, created (Keras falls back to the temporary
    directory when the cache is not writable)."""
    base = os.path.expanduser(cache_dir or os.path.join("~", ".keras"))
    os.makedirs(base, exist_ok=True)
    if not os.access(base, os.W_OK):
        base = os.path.join(tempfile.gettempdir(), ".keras")
    datadir = os.path.join(base, cache_subdir)
    os.makedirs(datadir, exist_ok=True)
    return datadir


def _download(origin: str, path: str, file_hash: str | None, algorithm: str | None) -> None:
    """Downloads ``origin`` to ``path`` through a temporary file (Keras' messages)."""
    handle, partial = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".download-")
    os.close(handle)
    try:
        try:
            urllib.request.urlretrieve(origin, partial)
        except urllib.error.HTTPError as e:
            raise Exception(f"URL fetch failure on {origin}: {e.code} -- {e.msg}") from e
        except urllib.error.URLError as e:
            raise Exception(f"URL fetch failure on {origin}: {e.errno} -- {e.reason}") from e
        if file_hash is not None and _hash(partial, algorithm) != file_hash:
            raise ValueError(
                f"Incomplete or corrupted file detected. The {algorithm} file hash does not "
                f"match the provided value of {file_hash}."
            )
        shutil.move(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


utils = types.ModuleType("estimator.compat.v1.keras.utils", "tf.keras.utils: get_file.")
utils.get_file = get_file
utils.__all__ = ["get_file"]
utils.__getattr__ = module_getattr("tf.keras.utils", utils.__name__)
