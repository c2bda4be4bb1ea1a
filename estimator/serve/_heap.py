"""Python's garbage collector in ``python -m estimator.serve``: what the server has loaded
is kept out of its full collections (``gc.freeze``)."""

import gc
import logging
import threading
from collections.abc import Mapping

from estimator.serve._models import ModelWatcher

_LOG = logging.getLogger(__name__)


class FrozenHeap:
    """Freezes the objects of the loaded models and libraries, again after each new version.

    Why: Python's full (oldest-generation) collection walks every object it tracks — JAX's,
    NumPy's, the loaded models' — and holds Python's lock, so the event loop, and every
    request, waits for it; under load the requests' own objects set one off every few
    seconds. Frozen objects (``gc.freeze``: Python's permanent generation, CPython's answer
    for long-lived processes) are not walked, so a full collection only looks at what the
    requests made since: the pauses that set the p99 latency under load shrink, and more
    requests are answered per second (``benchmarks/serving_load.py`` measures both).

    A frozen object is never collected, so a version that is replaced must not stay frozen:
    when a watcher serves a new version, everything is unfrozen (the old version becomes
    collectable once its last request is done), and ``settle_seconds`` later collected and
    frozen again (that one full collection holds the loop once per new version). If a
    request still held the old version then, it stays in memory until the next version.

    Args:
      watchers: ``{model name: ModelWatcher}`` of the server.
      poll_seconds: how often to look for a new version (0: freeze once, never again).
      settle_seconds: the wait between a new version and the collection.
    """

    def __init__(
        self,
        watchers: Mapping[str, ModelWatcher],
        poll_seconds: float = 1.0,
        settle_seconds: float = 5.0,
    ) -> None:
        self._watchers = dict(watchers)
        self._settle = settle_seconds
        self._stop = threading.Event()
        self._served = self._versions()
        self.freezes = 0  # how many times the heap was frozen (tests)
        self._freeze()
        if poll_seconds > 0:
            threading.Thread(
                target=self._poll, args=(poll_seconds,), daemon=True, name="frozen-heap"
            ).start()

    def _versions(self) -> tuple:
        return tuple((name, w.version) for name, w in sorted(self._watchers.items()))

    def _freeze(self) -> None:
        gc.collect()
        gc.freeze()
        self.freezes += 1
        _LOG.debug("froze %d objects", gc.get_freeze_count())

    def _poll(self, seconds: float) -> None:
        while not self._stop.wait(seconds):
            served = self._versions()
            if served == self._served:
                continue
            gc.unfreeze()  # the replaced version can be collected once released
            if self._stop.wait(self._settle):
                return
            self._served = self._versions()  # a version that came during the wait too
            self._freeze()

    def close(self) -> None:
        """Stops watching (what is frozen stays frozen)."""
        self._stop.set()
