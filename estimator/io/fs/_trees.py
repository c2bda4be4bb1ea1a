"""Trees (directories of files) kept whole on any storage: the **upload with its marker
last** (:func:`upload_tree`), a tree built in a :func:`staging_dir` and published by one
rename or that upload (:func:`publish_tree`), whether a tree is complete, trees downloaded
(:func:`download_tree`, :func:`local_copy`) and a local directory kept in step with a remote
one (:class:`Mirror`)."""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator

from estimator.io.fs._files import isfile, rmtree
from estimator.io.fs._paths import _fresh, _local, _remote, _resolve, as_str, join
from estimator.io.fs._writes import write_bytes


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
        self._uploaded: dict[str, tuple[int, int]] = {}  # name: (size, mtime_ns) uploaded
        if self._remote:
            self.path = tempfile.mkdtemp(prefix="jax-estimator-mirror-")
        else:
            self.path = _local(self.target)
            os.makedirs(self.path, exist_ok=True)

    def sync(self) -> None:
        """Uploads each local file that changed since its last upload over its object
        (nothing on a local disk)."""
        if not self._remote or not os.path.isdir(self.path):
            return
        for name in os.listdir(self.path):
            local = os.path.join(self.path, name)
            info = os.stat(local)
            version = (info.st_size, info.st_mtime_ns)
            if self._uploaded.get(name) == version:
                continue
            with open(local, "rb") as f:
                write_bytes(join(self.target, name), f.read())
            self._uploaded[name] = version

    def discard(self) -> None:
        """Removes the temporary directory of a URL (what :meth:`sync` did not upload is
        lost); nothing on a local disk."""
        if self._remote:
            shutil.rmtree(self.path, ignore_errors=True)

    def close(self) -> None:
        """Syncs, then :meth:`discard`."""
        self.sync()
        self.discard()
