"""Trees of files that orbax reads and writes on a local disk, for storage it cannot reach.

orbax-checkpoint writes local directories and ``gs://`` (through TensorStore's GCS driver)
itself; it has no ``s3://`` or other fsspec protocols (it refuses a path that is not
absolute). For those, a checkpoint is written to a local staging directory and published
to the URL when it is complete (:class:`Publisher`), and read from a local copy
(:func:`readable`). The same two pieces publish exports, whose files are written locally.

Publishing uploads a tree file by file and its completion marker last: on an object store
(no rename) a reader that requires the marker never sees a partial tree, and a publisher
killed mid-upload leaves a prefix without a marker, which readers ignore.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from estimator.io import fs

__all__ = ["COMMIT_MARKER", "NATIVE", "Publisher", "native", "readable"]

logger = logging.getLogger("estimator")

#: The object whose presence says a published tree is complete (orbax's own marker name
#: for checkpoints on GCS, where it cannot rename either).
COMMIT_MARKER = "commit_success.txt"
#: URL protocols orbax reads and writes itself.
NATIVE = frozenset({"gs"})


def native(path) -> bool:
    """Whether orbax reads and writes ``path`` itself: a local path or a ``gs://`` URL."""
    scheme = fs.protocol(path)
    return scheme is None or scheme in NATIVE


@contextlib.contextmanager
def readable(path, items: Sequence[str] = ()) -> Iterator[str]:
    """A path orbax can read holding the tree at ``path``: ``path`` itself (absolute) where
    orbax reaches it, else a local copy of it (of its subtrees ``items`` only, when given;
    those absent are skipped), removed when the block ends."""
    if native(path):
        yield fs.abspath(path)
        return
    local = tempfile.mkdtemp(prefix="jax-estimator-copy-")
    try:
        for item in items or ("",):
            source = fs.join(path, item) if item else path
            with contextlib.suppress(FileNotFoundError):
                fs.download_tree(source, os.path.join(local, item) if item else local)
        yield local
    finally:
        shutil.rmtree(local, ignore_errors=True)


class Publisher:
    """Uploads the directories written under a local ``staging`` directory to ``url``, in
    a background thread, one at a time in the order submitted, each with
    :data:`COMMIT_MARKER` last.

    Args:
      staging: the local directory.
      url: where its subdirectories go (``<url>/<name>/...``).
      after_publish: called in the background thread after each publication with the
        published name (e.g. to delete what retention no longer keeps).
    """

    def __init__(
        self, staging: str, url: str, after_publish: Callable[[str], None] | None = None
    ) -> None:
        self.staging = staging
        self.url = url
        self._after = after_publish
        self._queue: list[tuple[str, Callable[[], bool]]] = []
        self._cond = threading.Condition()
        self._busy = False
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="publisher", daemon=True)
        self._thread.start()

    def submit(self, name: str, pending: Callable[[], bool] = lambda: False) -> None:
        """Publishes ``<staging>/<name>`` once it exists; ``pending()`` says whether it may
        still appear (a save in progress); a directory that never appears is skipped."""
        with self._cond:
            self._queue.append((name, pending))
            self._cond.notify_all()

    def unpublished(self) -> set[str]:
        """The names submitted and not yet published (or skipped): their local trees are
        still needed."""
        with self._cond:
            return {name for name, _ in self._queue}

    def publish(self, name: str) -> None:
        """Uploads ``<staging>/<name>`` to ``<url>/<name>`` now, marker last; a failed upload
        removes what it wrote."""
        target = fs.join(self.url, name)
        local = os.path.join(self.staging, name)
        marker = os.path.join(local, COMMIT_MARKER)
        if not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(f"published {time.time()}\n")
        fs.publish_tree(local, target, last=(COMMIT_MARKER,))
        logger.info("Published %s", target)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                name, pending = self._queue[0]
                self._busy = True
            try:
                local = os.path.join(self.staging, name)
                while not os.path.isdir(local) and pending():
                    time.sleep(0.02)
                if os.path.isdir(local):
                    self.publish(name)
                    if self._after is not None:
                        self._after(name)
            except BaseException as err:  # reported by wait()
                logger.error("Could not publish %s to %s: %s", name, self.url, err)
                with self._cond:
                    self._error = err
            finally:
                with self._cond:
                    self._queue.pop(0)
                    self._busy = False
                    self._cond.notify_all()

    def wait(self) -> None:
        """Blocks until everything submitted is published.

        Raises:
          The first error an upload raised since the last ``wait``.
        """
        with self._cond:
            while self._queue or self._busy:
                self._cond.wait()
            error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> None:
        """Publishes what is pending, then stops the thread."""
        try:
            self.wait()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._thread.join()
