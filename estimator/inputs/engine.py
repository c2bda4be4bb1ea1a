"""The input engine: the streaming pipelines of ``tfrecord_input_fn`` and of
``estimator.compat``'s ``tf.data`` (file sources, generators), as grain ``IterDataset``
stages.

A stream carries **chunks**: a TFRecord reader's :class:`~estimator.io._records.Records`
(records in one buffer), or a list of elements (text lines, generator elements). The
stages:

* :class:`Source`: the chunks of a re-iterable producer (files, passes over them);
* :class:`Shuffle`: TF's shuffle buffer (``Dataset.shuffle(buffer_size)``) over the
  elements of the chunks (:func:`buffer_order` gives the same order over indices);
* :class:`Blocks`: cuts the stream into batches of ``batch_size`` and groups whole batches
  into blocks of about ``rows`` elements, so that a map runs on many rows at once;
* :class:`ParallelMap`: a function of a block (parsing, a vectorized ``Dataset.map``, the
  feature columns' host phase) in a pool of threads, results in order, running ahead;
* :class:`Unblock`: a block's result cut back into its batches (:func:`rows`);
* grain's ``ThreadPrefetchIterDataset`` moves the reading (decompression, framing, the
  shuffle buffer) to a background thread (:func:`prefetch`).

:class:`Batches` runs a pipeline built by a function, and offers what the Estimator asks of
an input (``map_rows``: the host phase fused into the block map; ``close``).

**Shuffle, in one sentence per API (the same words mean the same thing everywhere):**
``numpy_input_fn(shuffle=True)``: a new random order each epoch. ``Dataset.shuffle(n)`` and
``tfrecord_input_fn(shuffle=True, shuffle_buffer_size=n)``: a shuffle buffer of ``n``
elements (TF's: the buffer fills with the first ``n``; each element out is drawn uniformly
from it and replaced by the next one in; at the end it drains in random order; with ``n`` at
least the data's size, a uniformly random order). ``tfrecord_input_fn`` also reads the
files in a new random order each epoch.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grain
import numpy as np

from estimator.io import RaggedValue, SparseValue
from estimator.io._records import Records

__all__ = [
    "Batches",
    "Block",
    "Blocks",
    "Chunk",
    "Cut",
    "Flatten",
    "ParallelMap",
    "Repeat",
    "Select",
    "Shuffle",
    "Source",
    "Unblock",
    "buffer_order",
    "prefetch",
    "rows",
    "shuffle_elements",
]

#: Rows a block holds, about (whole batches; at least one).
BLOCK_ROWS = 4096
#: Chunks a shuffle buffer keeps at most before it copies its elements into one.
POOL_CHUNKS = 16


class _Iterator(grain.DatasetIterator):
    """A grain iterator over a Python iterator (the engine's stages are streams: no
    checkpointable state; ``get_state`` gives the number of elements produced).
    :meth:`close` closes it and the iterator of the stage before."""

    def __init__(self, iterator: Iterator, parent=None) -> None:
        super().__init__()
        self._iterator = iterator
        self._parent_iterator = parent
        self._produced = 0

    def close(self) -> None:
        for closing in (self._iterator, self._parent_iterator):
            close = getattr(closing, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 (at interpreter exit grain's modules are gone)
                    if sys.is_finalizing():
                        return
                    raise

    def __next__(self):
        value = next(self._iterator)
        self._produced += 1
        return value

    def get_state(self) -> dict:
        return {"produced": self._produced}

    def set_state(self, state: dict) -> None:
        raise NotImplementedError("The input engine's streams cannot be restored to a state.")


class _Stage(grain.IterDataset):
    """An ``IterDataset`` whose iterator is ``self._run(iter(parent))``."""

    def __init__(self, parent: grain.IterDataset | None = None) -> None:
        super().__init__(parent) if parent is not None else super().__init__()
        self._parent_dataset = parent

    def _run(self, parent: Iterator) -> Iterator:
        raise NotImplementedError

    def __iter__(self) -> grain.DatasetIterator:
        parent = None if self._parent_dataset is None else iter(self._parent_dataset)
        return _Iterator(self._run(parent), parent)


class Source(_Stage):
    """The chunks ``make()`` yields (a new iterator for each iteration of the dataset)."""

    def __init__(self, make: Callable[[], Iterable]) -> None:
        super().__init__()
        self._make = make

    def _run(self, parent) -> Iterator:
        return iter(self._make())


# ----- chunks ------------------------------------------------------------------------------
def _length(chunk) -> int:
    return len(chunk)


def _concat(parts: list) -> Any:
    """Chunks of one kind joined in order."""
    if parts and isinstance(parts[0], Records):
        return Records.concat(parts)
    return [e for part in parts for e in part]


def _take(chunk, index: np.ndarray | slice):
    """The elements of ``chunk`` at ``index``."""
    if isinstance(chunk, Records):
        return chunk.take(index)
    if isinstance(index, slice):
        return chunk[index]
    return [chunk[i] for i in index.tolist()]


# ----- the shuffle buffer ------------------------------------------------------------------
def buffer_order(n: int, buffer_size: int, rng: np.random.Generator) -> np.ndarray:
    """The order in which TF's shuffle buffer of ``buffer_size`` emits elements ``0 .. n-1``
    (see the module docstring): int64 [n]."""
    from estimator.io import _kernels

    size = min(buffer_size, n)
    slots = np.arange(size, dtype=np.int64)
    out = _kernels.shuffle_draws(slots, size, rng.integers(0, max(size, 1), n - size))
    return np.concatenate([out, rng.permutation(slots)])


class _Pool:
    """The elements in a shuffle buffer, by id: ``chunk number << 32 | index``; the chunks
    are kept while an element of theirs is in the buffer."""

    def __init__(self) -> None:
        self.chunks: dict[int, Any] = {}
        self._next = 0

    def add(self, chunk) -> np.ndarray:
        number = self._next
        self._next += 1
        self.chunks[number] = chunk
        return (np.int64(number) << 32) + np.arange(_length(chunk), dtype=np.int64)

    def gather(self, ids: np.ndarray):
        """The elements ``ids``, in that order, as one chunk."""
        numbers, index = ids >> 32, ids & 0xFFFFFFFF
        order = np.argsort(numbers, kind="stable")
        parts = []
        for number in np.unique(numbers).tolist():
            where = order[numbers[order] == number]
            parts.append(_take(self.chunks[number], index[where]))
        grouped = _concat(parts)
        # ``grouped`` holds the elements by chunk; put them back in the order drawn.
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return _take(grouped, inverse)

    def forget_except(self, live: np.ndarray) -> np.ndarray:
        """Forgets the chunks no id of ``live`` is from; returns ``live``, renumbered into
        one new chunk when more than :data:`POOL_CHUNKS` chunks remain (a buffer holds on
        to an old chunk while one element of it is left)."""
        keep = set(np.unique(live >> 32).tolist())
        for number in [k for k in self.chunks if k not in keep]:
            del self.chunks[number]
        if len(self.chunks) <= POOL_CHUNKS:
            return live
        compact = self.gather(live)
        self.chunks.clear()
        return self.add(compact)


class Shuffle(_Stage):
    """TF's shuffle buffer of ``buffer_size`` elements over the parent's chunks (see the
    module docstring); chunks out as they come (none while the buffer fills).

    Args:
      parent: a stream of chunks.
      buffer_size: elements in the buffer.
      rng: a ``() -> np.random.Generator``, called at each iteration (a seeded order per
        pass when the caller wants one).
      emit: elements per chunk out (the last one smaller), e.g. a :class:`Blocks`' block:
        the elements drawn are gathered once, into chunks that need no further copy.
    """

    def __init__(
        self,
        parent,
        buffer_size: int,
        rng: Callable[[], np.random.Generator],
        emit: int = BLOCK_ROWS,
    ):
        super().__init__(parent)
        self._size = int(buffer_size)
        self._rng = rng
        self._emit = max(1, int(emit))

    def _run(self, parent: Iterator) -> Iterator:
        from estimator.io import _kernels

        rng, size, pool = self._rng(), self._size, _Pool()
        slots = np.zeros(0, np.int64)  # the ids in the buffer
        drawn = np.zeros(0, np.int64)  # the ids drawn, not yet gathered
        for chunk in parent:
            ids = pool.add(chunk)
            room = size - len(slots)
            if room > 0:
                slots = np.concatenate([slots, ids[:room]])
                ids = ids[room:]
                if not len(ids):
                    continue
            # Over labels: label j < size is the element in slot j before this chunk,
            # size + i the i-th incoming one; the labels array becomes the buffer after it.
            labels = np.arange(size, dtype=np.int64)
            out = _kernels.shuffle_draws(labels, size, rng.integers(0, size, len(ids)))
            every = np.concatenate([slots, ids])
            slots = every[labels]
            drawn = np.concatenate([drawn, every[out]])
            whole = len(drawn) - len(drawn) % self._emit
            if whole:
                yield pool.gather(drawn[:whole])
                drawn = drawn[whole:]
                live = pool.forget_except(np.concatenate([slots, drawn]))
                slots, drawn = live[: len(slots)], live[len(slots) :]
        drawn = np.concatenate([drawn, slots[rng.permutation(len(slots))]])
        if len(drawn):
            yield pool.gather(drawn)


def shuffle_elements(parent: grain.IterDataset, buffer_size: int, seed: int):
    """An element stream through TF's shuffle buffer: the elements gathered into chunks of
    up to 256 (output order unchanged), shuffled, and flattened again."""
    return Flatten(Shuffle(Chunk(parent, 256), buffer_size, lambda: np.random.default_rng(seed)))


# ----- stream operations on chunks --------------------------------------------------------------
class Chunk(_Stage):
    """The parent's elements in lists of ``size``."""

    def __init__(self, parent, size: int) -> None:
        super().__init__(parent)
        self._size = int(size)

    def _run(self, parent: Iterator) -> Iterator[list]:
        chunk = []
        for element in parent:
            chunk.append(element)
            if len(chunk) == self._size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


class Flatten(_Stage):
    """The elements of the parent's chunks, one by one."""

    def _run(self, parent: Iterator) -> Iterator:
        for chunk in parent:
            yield from chunk


class Repeat(_Stage):
    """The parent's stream ``count`` times (None: forever), each pass a new iteration of it
    (a shuffle before draws a new order, reading the files again)."""

    def __init__(self, parent, count: int | None) -> None:
        super().__init__(parent)
        self._count = count

    def __iter__(self) -> grain.DatasetIterator:
        return _Iterator(self._passes())

    def _passes(self) -> Iterator:
        passes = itertools.count() if self._count is None else range(self._count)
        for _ in passes:
            empty = True
            for chunk in self._parent_dataset:  # a new iteration: a new pass
                empty = empty and not _length(chunk)
                yield chunk
            if empty:
                return  # repeating nothing forever gives nothing (TF's)


class Select(_Stage):
    """Elements ``start, start + step, ...`` of the parent's stream, at most ``count``
    (None: all): ``take``, ``skip`` and ``shard`` over chunks."""

    def __init__(self, parent, start: int, step: int = 1, count: int | None = None) -> None:
        super().__init__(parent)
        self._start, self._step, self._count = int(start), int(step), count

    def _run(self, parent: Iterator) -> Iterator:
        position, left = 0, self._count  # stream position of the chunk's first element
        for chunk in parent:
            if left is not None and left <= 0:
                return
            n = _length(chunk)
            first = max(0, self._start - position)
            first += (-(position + first - self._start)) % self._step
            position += n
            if first >= n:
                continue
            part = _take(chunk, slice(first, None, self._step))
            if left is not None:
                part = _take(part, slice(0, left))
                left -= _length(part)
            if _length(part):
                yield part


# ----- blocks of batches -------------------------------------------------------------------
class Block:
    """Whole batches of a stream: ``items`` (one chunk) and the batch sizes, in order."""

    __slots__ = ("items", "sizes")

    def __init__(self, items, sizes: list[int]) -> None:
        self.items = items
        self.sizes = sizes


class Blocks(_Stage):
    """The parent's elements cut into batches of ``batch_size`` (the last one smaller unless
    ``drop_remainder``), whole batches grouped into blocks of about ``rows`` elements. The
    first block is one batch and each next one twice the last, up to ``rows``: the first
    step waits for one batch's elements, as TF's ``batch`` does, and the first steps for
    few more, not for whole blocks (a small dataset repeated from remote storage would be
    read ``rows / its size`` times over for each)."""

    def __init__(self, parent, batch_size: int, *, drop_remainder: bool = False, rows=BLOCK_ROWS):
        super().__init__(parent)
        self._batch = int(batch_size)
        self._per_block = max(1, int(rows) // self._batch) * self._batch
        self._drop = drop_remainder

    def _run(self, parent: Iterator) -> Iterator[Block]:
        pending, count = [], 0
        size = self._batch  # the first block's; then self._per_block
        for chunk in parent:
            pending.append(chunk)
            count += _length(chunk)
            if count >= size:
                items = _concat(pending)
                whole = count - count % size
                for lo in range(0, whole, size):
                    block = _take(items, slice(lo, lo + size))
                    yield Block(block, [self._batch] * (size // self._batch))
                pending = [_take(items, slice(whole, None))]
                count -= whole
                size = min(2 * size, self._per_block)
        if count:
            items = _concat(pending)
            sizes = [self._batch] * (count // self._batch)
            if count % self._batch and not self._drop:
                sizes.append(count % self._batch)
            if sizes:
                yield Block(_take(items, slice(0, sum(sizes))), sizes)


class Cut(list):
    """A block's result already cut into its batches (a map that ran batch by batch)."""


class ParallelMap(_Stage):
    """``fn(block)`` for each :class:`Block` in a pool of ``workers`` threads, in order, up
    to ``depth`` blocks ahead of the consumer; yields ``Block(result, sizes)``. A result is
    the block's rows (cut by :class:`Unblock`) or a :class:`Cut`. The first block is
    yielded as soon as it is mapped, without waiting for ``depth`` blocks to be read (with
    :class:`Blocks`' growing blocks, the next ones follow soon)."""

    def __init__(self, parent, fn: Callable, *, workers: int = 2, depth: int = 4) -> None:
        super().__init__(parent)
        self._fn = fn
        self._workers = max(1, int(workers))
        self._depth = max(1, int(depth))

    def _run(self, parent: Iterator) -> Iterator[Block]:
        fn = self._fn
        pool = concurrent.futures.ThreadPoolExecutor(self._workers, "input_map")
        pending: collections.deque = collections.deque()
        try:
            first = True
            for block in parent:
                pending.append((pool.submit(fn, block), block.sizes))
                if first or len(pending) >= self._depth:
                    future, sizes = pending.popleft()
                    first = False
                    yield Block(future.result(), sizes)
            while pending:
                future, sizes = pending.popleft()
                yield Block(future.result(), sizes)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


class Unblock(_Stage):
    """Each block's result cut back into its batches (:func:`rows`); ``varlen`` names the
    ``VarLenFeature`` keys whose dense width is the batch's own."""

    def __init__(self, parent, varlen: frozenset = frozenset()) -> None:
        super().__init__(parent)
        self._varlen = varlen

    def _run(self, parent: Iterator) -> Iterator:
        for block in parent:
            if isinstance(block.items, Cut):
                yield from block.items
                continue
            if len(block.sizes) == 1:
                yield block.items
                continue
            lo = 0
            for size in block.sizes:
                yield rows(block.items, lo, lo + size, self._varlen)
                lo += size


def prefetch(parent: grain.IterDataset, depth: int) -> grain.IterDataset:
    """``parent`` run in a background thread, ``depth`` elements ahead (grain's
    ``ThreadPrefetchIterDataset``)."""
    return grain.experimental.ThreadPrefetchIterDataset(parent, prefetch_buffer_size=depth)


def rows(value: Any, lo: int, hi: int, varlen: frozenset = frozenset(), key=None) -> Any:
    """Rows ``[lo, hi)`` of a batched value: arrays, :class:`SparseValue`,
    :class:`RaggedValue`, and dicts/tuples of them (a list is rows: elements). The dense
    width of a
    ``VarLenFeature``'s sparse value (its key in ``varlen``) is the longest row of the
    slice, as ``parse_example`` gives for those rows alone."""
    if isinstance(value, dict):
        return {k: rows(v, lo, hi, varlen, k) for k, v in value.items()}
    if isinstance(value, tuple) and not isinstance(value, SparseValue | RaggedValue):
        return type(value)(rows(v, lo, hi, varlen, key) for v in value)
    if isinstance(value, SparseValue):  # indices in row-major order, as parsing gives
        first, last = np.searchsorted(value.indices[:, 0], [lo, hi])
        indices = value.indices[first:last].copy()
        indices[:, 0] -= lo
        shape = value.dense_shape.copy()
        shape[0] = hi - lo
        if key in varlen:
            shape[1] = int(indices[:, 1].max()) + 1 if len(indices) else 0
        return SparseValue(indices, value.values[first:last], shape)
    if isinstance(value, RaggedValue):
        splits = list(value.nested_row_splits)
        outer = splits[0][lo : hi + 1]
        first, last = int(outer[0]), int(outer[-1])
        new = [outer - first]
        for inner in splits[1:]:
            part = inner[first : last + 1]
            new.append(part - part[0])
            first, last = int(part[0]), int(part[-1])
        return RaggedValue(value.values[first:last], tuple(new))
    if value is None:
        return None
    return value[lo:hi]


# ----- what the Estimator reads ----------------------------------------------------------------
class Batches:
    """The batches of a pipeline that ``build(fn)`` makes, ``fn`` being a row-by-row
    function to fuse into its block map (None: none). Started at the first batch taken,
    stopped by :meth:`close`, at the end of the input, or when dropped.

    Args:
      build: ``build(fn) -> grain.IterDataset`` of batches.
      stats: what the caller wants to show as ``stats`` (``tfrecord_input_fn``'s
        :class:`~estimator.io.tfrecord.ReadStats`).
    """

    def __init__(self, build: Callable[[Callable | None], grain.IterDataset], stats=None):
        self._build = build
        self._fn: Callable | None = None
        self._iterator = None
        self._done = False
        self.stats = stats

    def map_rows(self, fn: Callable) -> Batches:
        """The same batches of ``fn(batch)``, with ``fn`` (the Estimator's row-by-row host
        phase: feature columns) run in the map's threads on whole blocks
        (``estimator.engine.input_pipeline.batch_pipeline``).

        Raises:
          RuntimeError: batches were taken already, or they are mapped already.
        """
        if self._iterator is not None or self._fn is not None:
            raise RuntimeError("map_rows() after reading batches or mapping them.")
        self._fn = fn
        return self

    def __iter__(self) -> Batches:
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        if self._iterator is None:
            self._iterator = iter(self._build(self._fn))
            weakref.finalize(self, _close, self._iterator)
        try:
            return next(self._iterator)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stops the background threads (also done at the end of the input)."""
        self._done = True
        if self._iterator is not None:
            _close(self._iterator)


def _close(iterator) -> None:
    closer = getattr(iterator, "close", None)
    if closer is not None:
        threading.Thread(target=closer, daemon=True).start()  # never blocks the caller
