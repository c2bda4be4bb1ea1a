"""Blocks of an in-memory input's batches: prepared a block at a time, and handed to a
fused call as the block itself (internal).

An in-memory input (``numpy_input_fn``'s ``estimator.inputs.Batches``) gathers the rows of
many batches at once (``Batches.blocks``: the rows of ``count`` batches, one after the
other). The host input pipeline (``estimator.engine.input_pipeline.batch_pipeline``)
prepares such a block's rows once, as it would each of its batches (canonical dtypes, the
checks of table ids, the padding masks: all row by row), and cuts it into its batches,
views of the block. A fused call whose batches are consecutive batches of one
:class:`RowBlock`, as many as the call has slots, is passed the block itself, reshaped to
``[slots, batch_size, ...]`` without a copy, and the first batch to run
(``estimator.engine.compiler.StepCompiler.multi``). Hooks, handlers and the steps see the
same batches as batch by batch.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator

import jax

from estimator.inputs.numpy_io import batch_views

__all__ = ["BlockBatches", "RowBlock"]


class RowBlock:
    """``count`` prepared batches of one size, one after the other: batch ``i`` is rows
    ``[i * size, (i + 1) * size)`` of every leaf of ``rows`` (a pytree of host arrays
    ``[count * size, ...]``)."""

    __slots__ = ("_stacked", "count", "rows")

    def __init__(self, rows, count: int) -> None:
        self.rows = rows
        self.count = count
        self._stacked = None

    def stacked(self):
        """``rows`` with the batches first: ``[count, size, ...]`` (views of ``rows``),
        made once."""
        if self._stacked is None:
            count = self.count
            self._stacked = jax.tree.map(
                lambda x: x.reshape(count, len(x) // count, *x.shape[1:]), self.rows
            )
        return self._stacked


class BlockBatches:
    """The prepared batches of an input's blocks (internal): an iterator, preparing a
    block at a time.

    Args:
      blocks: iterator of ``(rows, count, ends)`` (``estimator.inputs.Batches.blocks``).
      checked: ``checked(rows, block=False)``: the row-by-row preparation of one batch's
        rows (the host phase, canonical dtypes, id checks), or of a block's (without the id
        checks): ``(features, labels)`` or ``(features,)``.
      finish: the rest of one batch's preparation (padding, placement).
      place: a batch's placement alone.
      masked: ``masked(features, labels, count)``: a checked block with its batches' padding
        masks (``estimator.model.padding.RowPadding.block``), None where its batches are
        padded one by one; None: no padding.
      checks: the model's ``estimator.model.input_checks.InputChecks``, or None: a block's
        features are checked at once, and each batch counted as prepared as it is handed
        out (and checked then against checks added since).

    A block whose preparation raises (an id out of range, a value that does not fit its
    dtype) is prepared batch by batch instead: the batches before the refused one are
    handed out, then its error is raised with the message batch by batch gives, where
    batch by batch raises it.

    Attributes:
      ends_epoch: whether the batch ``__next__`` returned last ends a pass.
      origin: ``(RowBlock, i)`` when that batch is batch ``i`` of a block, else None.
    """

    def __init__(
        self,
        blocks: Iterator,
        checked: Callable,
        finish: Callable,
        place: Callable,
        masked: Callable | None = None,
        checks=None,
    ) -> None:
        self._blocks = blocks
        self._checked = checked
        self._finish = finish
        self._place = place
        self._masked = masked
        self._checks = checks
        self._ready: collections.deque = collections.deque()
        self._error: Exception | None = None  # raised when the batches before it are read
        self.ends_epoch = False
        self.origin = None

    def __iter__(self) -> BlockBatches:
        return self

    def __next__(self):
        if not self._ready and self._error is None:
            self._prepare(*next(self._blocks))
        if not self._ready:  # the batch that follows is refused
            error, self._error = self._error, None
            raise error
        batch, self.ends_epoch, self.origin, check = self._ready.popleft()
        if check is not None:
            self._checks.handed(*check)
        return batch

    def _prepare(self, rows, count: int, ends: list) -> None:
        if count == 1:  # one batch (an input read in order: every batch)
            self._one_by_one(rows, 1, ends)
            return
        try:
            checked = self._checked(rows, block=True)
            version = None if self._checks is None else self._checks.check_rows(checked[0])
            block = checked if self._masked is None else self._masked(*checked, count)
        except Exception:  # noqa: BLE001 (raised again by __next__, for its batch)
            self._one_by_one(rows, count, ends)
            return
        whole = None if block is None else RowBlock(block, count)
        cut = batch_views(checked if block is None else block, count)
        for i, (batch, end) in enumerate(zip(cut, ends, strict=True)):
            check = None if version is None else (batch[0], version)
            if whole is None:  # padded batch by batch
                self._ready.append((self._finish(batch), end, None, check))
            else:
                self._ready.append((self._place(batch), end, (whole, i), check))

    def _one_by_one(self, rows, count: int, ends: list) -> None:
        """Prepares the batches of ``rows`` one by one; the error of one is raised when
        the batches before it have been read."""
        for batch, end in zip(batch_views(rows, count), ends, strict=True):
            try:
                ready = self._finish(self._checked(batch))
            except Exception as error:  # noqa: BLE001 (raised by __next__)
                self._error = error
                return
            self._ready.append((ready, end, None, None))
