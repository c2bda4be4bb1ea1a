"""``estimator.serve._heap.FrozenHeap``: the server's loaded objects out of Python's full
collections (``gc.freeze``), unfrozen when a version is replaced so that the old one is
collected, and frozen again once it settles."""

from __future__ import annotations

import gc
import time
import weakref

import pytest

from estimator.serve._heap import FrozenHeap


class _Watcher:
    """Stands in for a ModelWatcher: a served version and its model."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.model = _cyclic()


def _cyclic():
    """A model-like object in a reference cycle: only the cyclic collector frees it."""
    model = type("Model", (), {})()
    model.self = model
    return model


def _until(predicate, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def heaps():
    made = []
    yield made
    for heap in made:
        heap.close()
    gc.unfreeze()  # the rest of the suite runs with a normal collector


def test_the_heap_is_frozen_at_start(heaps):
    watcher = _Watcher(1)
    heaps.append(FrozenHeap({"m": watcher}, poll_seconds=0))
    assert heaps[0].freezes == 1
    assert gc.get_freeze_count() > 0
    model = weakref.ref(watcher.model)
    gc.collect()
    assert model() is not None  # frozen and still referenced


def test_a_replaced_version_is_collected_then_the_heap_frozen_again(heaps):
    watcher = _Watcher(1)
    heaps.append(FrozenHeap({"m": watcher}, poll_seconds=0.01, settle_seconds=0.2))
    old = weakref.ref(watcher.model)
    watcher.model, watcher.version = _cyclic(), 2  # the watcher swaps in version 2
    _until(lambda: gc.get_freeze_count() == 0)  # unfrozen: the old version is collectable
    _until(lambda: heaps[0].freezes == 2)
    assert old() is None  # collected (a frozen object never is)
    assert gc.get_freeze_count() > 0


def test_a_version_that_comes_while_settling_is_not_frozen_twice(heaps):
    watchers = {"a": _Watcher(1), "b": _Watcher(1)}
    heaps.append(FrozenHeap(watchers, poll_seconds=0.01, settle_seconds=0.3))
    watchers["a"].version = 2
    _until(lambda: gc.get_freeze_count() == 0)
    watchers["b"].version = 2  # during the settle wait: the same collection covers it
    _until(lambda: heaps[0].freezes == 2)
    time.sleep(0.5)  # more than a poll and a settle: no further unfreeze and freeze
    assert heaps[0].freezes == 2 and gc.get_freeze_count() > 0


def test_close_stops_watching(heaps):
    watcher = _Watcher(1)
    heaps.append(FrozenHeap({"m": watcher}, poll_seconds=0.01, settle_seconds=0.01))
    heaps[0].close()
    time.sleep(0.05)
    watcher.version = 2
    time.sleep(0.2)
    assert heaps[0].freezes == 1 and gc.get_freeze_count() > 0
