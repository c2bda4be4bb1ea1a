"""Versioned model directory watcher: serves the newest version, reloads when one appears.

The base path may be a storage URL (``gs://``, ``s3://``, ...; ``estimator.io.fs``), as TF
Serving's ``--model_base_path`` may: it is listed at every poll, and a version counts once
its ``manifest.json`` is there (an export to storage uploads it last).
"""

import logging
import threading

from estimator import export
from estimator.io import fs

_LOG = logging.getLogger(__name__)


def _versions(base_path: str) -> list[int]:
    """Version directories under ``base_path`` (numeric names, complete exports only)."""
    names = fs.listdir(base_path)
    return sorted(
        int(n) for n in names if n.isdigit() and fs.isfile(fs.join(base_path, n, "manifest.json"))
    )


class ModelWatcher:
    """Keeps the newest version of one model loaded (TF Serving's ``Latest`` policy).

    A new version is loaded in a background thread and swapped in with one reference
    assignment, so requests already holding the old ``LoadedModel`` finish on it; the old
    one is then dropped when the last request releases it.

    Args:
      name: the model name used in URLs.
      base_path: directory holding one subdirectory per version (``<base>/<int>/``), or a
        storage URL.
      poll_seconds: how often to look for a new version (TF Serving's
        ``--file_system_poll_wait_seconds``); 0 disables polling.
      version_labels: ``{label: version}`` for requests that name a version by label
        (``version_labels`` of TF Serving's model config); a label of a version that is not
        the served one finds nothing.

    Raises:
      ValueError: a URL whose protocol is not available (names the package to install).
    """

    def __init__(
        self,
        name: str,
        base_path: str,
        poll_seconds: float = 1.0,
        version_labels: dict[str, int] | None = None,
    ) -> None:
        self.name = name
        self.base_path = fs.check(base_path, "model_base_path")
        self.version_labels = dict(version_labels or {})
        # (version, model), replaced as one reference: a reader never pairs one version's
        # number with another's model.
        self._current: tuple[int | None, export.LoadedModel | None] = (None, None)
        self._stop = threading.Event()
        self._failed: set[int] = set()  # versions whose failed load was logged
        self.refresh()
        self._thread = None
        if poll_seconds > 0:
            self._thread = threading.Thread(
                target=self._poll, args=(poll_seconds,), daemon=True, name="model-poll"
            )
            self._thread.start()

    @property
    def version(self) -> int | None:
        """The served version (None before one loaded)."""
        return self._current[0]

    @property
    def model(self) -> export.LoadedModel | None:
        """The served ``LoadedModel`` (None before one loaded)."""
        return self._current[1]

    def current(self) -> tuple[int | None, export.LoadedModel | None]:
        """``(version, model)`` of one and the same version."""
        return self._current

    def refresh(self) -> None:
        """Loads the newest complete version if it is newer than the served one.

        Logs as TF Serving's ``loader_harness.cc`` does: ``Successfully loaded servable
        version {name: census version: 2}`` (INFO), then ``Unloading servable version {name:
        census version: 1}`` for the version it replaces; a failed load, once per version,
        ``Loading servable: {name: census version: 2} failed: <error>`` (ERROR; the
        traceback at DEBUG). A failed version is tried again at every poll (its files may
        still be arriving), quietly, and the served one stays.
        """
        versions = _versions(self.base_path)
        if not versions or versions[-1] == self.version:
            return
        newest = versions[-1]
        servable = f"{{name: {self.name} version: {newest}}}"
        try:
            model = export.load(fs.join(self.base_path, str(newest)))
            if any(s.accepts_examples for s in model.signatures.values()):
                # The tf.Example parser's compiled loops, slow to load: not on a request.
                from estimator.io import _kernels

                _kernels.warm()
        except Exception as err:  # a broken version must not take the served one down
            if newest not in self._failed:
                self._failed.add(newest)
                _LOG.error("Loading servable: %s failed: %s: %s", servable, type(err).__name__, err)
            _LOG.debug("Loading servable: %s failed", servable, exc_info=True)
            return
        previous = self.version
        self._current = (newest, model)
        self._failed.discard(newest)
        _LOG.info("Successfully loaded servable version %s", servable)
        if previous is not None:
            _LOG.info(
                "Unloading servable version {name: %s version: %s} (requests that hold it "
                "finish on it)",
                self.name,
                previous,
            )

    def _poll(self, seconds: float) -> None:
        while not self._stop.wait(seconds):
            self.refresh()

    def close(self) -> None:
        self._stop.set()
