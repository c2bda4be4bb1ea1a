"""Epochs: where the input knows a pass over its data ended, surfaced to the loop.

An input marks the last batch of each pass by setting ``ends_epoch = True`` on its iterator
right before ``__next__`` returns that batch (``numpy_input_fn``'s batches,
``estimator.compat.v1.data`` pipelines with ``repeat``); the ``Prefetcher`` records the mark
with each batch it reads and answers ``epoch_ended()`` for the batch the loop popped last,
which is also true when no batch follows it (the end of any input ends an epoch).

:class:`Passes` reads the input again when it ends while an event handler still wants
epochs (its ``wants_another_pass()``: ``estimator.handlers.StoppingHandler(max_epoch=...)``
before its last epoch): ``input_fn`` is called anew, as Gluon iterates its one-pass
``DataLoader`` once per epoch. Without such a handler the end of the input ends training,
as in TF.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Passes"]


class Passes:
    """A prefetcher over passes of an input: the current pass's prefetcher, and a new one
    (``make()``) when it ends and ``more()`` says another pass is wanted.

    Args:
      first: the first pass's prefetcher (``input_pipeline.Prefetcher`` or a wrapper with
        ``fill``/``warm``/``peek``/``pop``/``epoch_ended``).
      make: ``() -> prefetcher`` of the next pass (calls ``input_fn`` again).
      more: ``() -> bool``: whether to read another pass, asked when a pass ends and the
        loop wants a batch.

    Attributes:
      passes: the passes started so far.
    """

    def __init__(self, first, make: Callable[[], object], more: Callable[[], bool]) -> None:
        self._current = first
        self._make = make
        self._more = more
        self.passes = 1

    def fill(self) -> None:
        self._current.fill()

    def warm(self) -> None:
        self._current.warm()

    def epoch_ended(self) -> bool:
        return self._current.epoch_ended()

    def peek(self):
        return self._read("peek")

    def pop(self):
        return self._read("pop")

    def _read(self, how: str):
        try:
            return getattr(self._current, how)()
        except StopIteration:
            if not self._more():
                raise
        # A pass with no batch at all raises StopIteration here: training ends.
        previous, self._current = self._current, self._make()
        self._current.continue_from(previous)  # its batches keep the first pass's shapes
        self.passes += 1
        return getattr(self._current, how)()

    def __getattr__(self, name: str):  # last_batch_size, batch_count, padding
        return getattr(self._current, name)
