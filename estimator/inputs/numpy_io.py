"""``numpy_input_fn``: an ``input_fn`` over in-memory arrays, and the :class:`Batches` it
returns (whose rows the feature columns' host phase maps once, ahead of training)."""

from __future__ import annotations

import collections
import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

__all__ = ["Batches", "apply_to_rows", "batch_views", "numpy_input_fn"]


def _as_ordered_dict(x, what: str) -> collections.OrderedDict:
    if isinstance(x, dict):
        if not x:
            raise ValueError(f"{what} cannot be an empty dict")
        return collections.OrderedDict(sorted((k, np.asarray(v)) for k, v in x.items()))
    if isinstance(x, np.ndarray):
        if x.size == 0:
            raise ValueError(f"{what} cannot be an empty array")
        return collections.OrderedDict({"__direct_np_input__": x})
    raise TypeError(f"{what} must be a dict or array; got {type(x).__name__}")


def _check(shuffle, batch_size) -> None:
    if not isinstance(shuffle, bool):
        raise ValueError(
            "shuffle must be provided and explicitly set as boolean (it is recommended to set "
            f"it as True for training); got {shuffle}"
        )
    if batch_size <= 0:
        raise ValueError(f"batch_size must be > 0, given: {batch_size}")


def _columns(x, y) -> tuple[collections.OrderedDict, list, Any]:
    """All arrays by key (``x``'s, then ``y``'s under their keys or a unique target key),
    the feature keys and the target key(s) (None, a key, or a list of keys)."""
    data = _as_ordered_dict(x, "x")
    feature_keys = list(data)
    if y is None:
        return data, feature_keys, None
    if not isinstance(y, dict):
        target = "__target_key__"
        while target in data:  # TF's _get_unique_target_key
            target += "_n"
        data[target] = np.asarray(y)
        return data, feature_keys, target
    if not y:
        raise ValueError("y cannot be empty dict, use None instead.")
    ordered_y = _as_ordered_dict(y, "y")
    duplicates = set(feature_keys) & set(ordered_y)
    if duplicates:
        raise ValueError(
            f"{len(duplicates)} duplicate keys are found in both x and y: {duplicates}"
        )
    data.update(ordered_y)
    return data, feature_keys, list(ordered_y)


def _length(data, feature_keys, target_keys) -> int:
    lengths = {len(v) for v in data.values()}
    if len(lengths) == 1:
        return lengths.pop()
    shapes_x = {k: data[k].shape for k in feature_keys}
    if target_keys is None:
        shape_y = None
    elif isinstance(target_keys, str):
        shape_y = data[target_keys].shape
    else:
        shape_y = {k: data[k].shape for k in target_keys}
    raise ValueError(
        "Length of tensors in x and y is mismatched. All elements in x and y must have "
        f"the same length.\nShapes in x: {shapes_x}\nShapes in y: {shape_y}\n"
    )


def _rows(x, data, feature_keys, target_keys):
    """``features`` or ``(features, labels)``, as ``model_fn`` takes them."""
    if isinstance(x, np.ndarray):
        features = data["__direct_np_input__"]
    else:
        features = {k: data[k] for k in feature_keys}
    if target_keys is None:
        return features
    if isinstance(target_keys, str):
        return features, data[target_keys]
    return features, {k: data[k] for k in target_keys}


def _in_order(take, n: int, batch_size: int, num_epochs: int | None) -> Iterator:
    """``(rows, 1)``: each batch of consecutive examples, epoch after epoch; within an
    epoch a view (no copy); a batch spanning an epoch boundary gathers, as TF's queue
    does."""
    total = None if num_epochs is None else n * num_epochs
    start = 0
    while total is None or start < total:
        stop = start + batch_size if total is None else min(start + batch_size, total)
        lo = start % n
        if lo + (stop - start) <= n:
            yield take(slice(lo, lo + stop - start)), 1
        else:
            yield take(np.arange(start, stop) % n), 1
        start = stop


#: A shuffled input gathers the rows of up to this many batches at once (or of a fused
#: call's, ``RunConfig.steps_per_execution``, when it fuses steps), within ``GATHER_BYTES``
#: of rows: one indexing of each array per block, rather than per batch; its batches are
#: views of it, and a fused call of as many steps is handed the block itself
#: (``estimator.engine.row_blocks``).
GATHER_BATCHES = 32
GATHER_BYTES = 4 << 20


def _gather_block(batch, batch_size: int, most: int) -> int:
    """How many batches like ``batch`` (a pytree of arrays of ``batch_size`` rows, as the
    input hands them out: after a host phase that maps rows) a shuffled input gathers at
    once: at most ``most``, and their rows at most ``GATHER_BYTES`` (at least 1)."""
    nbytes = sum(np.asarray(v).nbytes for v in jax.tree.leaves(batch))
    return max(1, min(most, GATHER_BYTES // max(nbytes, 1)))


def _shuffled(
    take, n: int, batch_size: int, num_epochs: int | None, rng, most: int = GATHER_BATCHES
):
    """``(rows, count)``: the examples in a new random order each epoch, epoch after epoch,
    ``count`` batches' rows at a time. After the first batch (taken alone: ``Batches`` maps
    it on its own rows), the rows of several batches (:func:`_gather_block`, from the first
    batch's size) are taken at once; the batches are the same."""
    pending = np.empty((0,), np.int64)
    count, block = 1, None
    for _ in itertools.count() if num_epochs is None else range(num_epochs):
        pending = np.concatenate([pending, rng.permutation(n)])
        while len(pending) >= batch_size:
            count = min(count, len(pending) // batch_size)
            rows = take(pending[: count * batch_size])
            pending = pending[count * batch_size :]
            if block is None:  # the first batch
                block = _gather_block(rows, batch_size, most)
            yield rows, count
            count = block
    if len(pending):
        yield take(pending), 1


def _rows_at(array: np.ndarray, index) -> np.ndarray:
    """``array[index]`` along axis 0: a view for a slice; for an index array, a gather with
    ``take`` (a third of the time of NumPy's fancy indexing on ``[n, 1]`` arrays)."""
    return array[index] if isinstance(index, slice) else array.take(index, axis=0)


def batch_views(rows, count: int) -> list:
    """The ``count`` consecutive batches of equal size in ``rows`` (a pytree of arrays
    ``[count * batch_size, ...]``), as views."""
    if count == 1:
        return [rows]
    leaves, treedef = jax.tree.flatten(rows)
    size = len(leaves[0]) // count
    return [
        treedef.unflatten([v[start : start + size] for v in leaves])
        for start in range(0, count * size, size)
    ]


def _block_batches(config) -> int:
    """The batches a shuffled input gathers at once, at most: a fused call's (the
    config's ``steps_per_execution``), else ``GATHER_BATCHES``."""
    fused = getattr(config, "steps_per_execution", None)
    return fused if isinstance(fused, int) and fused > 1 else GATHER_BATCHES


def numpy_input_fn(
    x,
    y=None,
    batch_size: int = 128,
    num_epochs: int | None = 1,
    shuffle: bool | None = None,
    queue_capacity: int = 1000,
    num_threads: int = 1,
) -> Callable[[], Iterator]:
    """An ``input_fn`` feeding NumPy arrays in batches (``tf.compat.v1.estimator.inputs``).

    Examples are read in order, or with ``shuffle`` in a new random order each epoch,
    epoch after epoch, and cut into batches of ``batch_size``; a batch may span an epoch
    boundary, as TF's queue does. With a finite ``num_epochs`` the last batch holds the
    remaining examples (it may be smaller); with ``num_epochs=None`` every batch is full
    and the input never ends.

    Args:
      x: an array ``[n, ...]`` (one feature, passed to ``model_fn`` as the array) or a dict
        of such arrays.
      y: labels: an array ``[n, ...]``, a dict of arrays, or None.
      batch_size: examples per batch.
      num_epochs: passes over the data; None repeats forever.
      shuffle: required, as in TF: True for a new random order each epoch (training),
        False to keep the order.
      queue_capacity, num_threads: accepted for TF compatibility; batches are cut from the
        arrays directly.

    Returns:
      ``input_fn(config=None)`` returning a generator of ``features`` or
      ``(features, labels)``. With shuffling, the order is drawn from
      ``config.random_seed`` when the Estimator passes a seeded config.

    Raises:
      ValueError: TF's messages: shuffle not a bool, empty x/y, duplicate keys in x and y,
        arrays of different lengths.
      TypeError: x not a dict or array.
    """
    del queue_capacity, num_threads
    _check(shuffle, batch_size)
    calls = itertools.count()

    def input_fn(config=None):
        data, feature_keys, target_keys = _columns(x, y)
        n = _length(data, feature_keys, target_keys)
        seed = getattr(config, "random_seed", None)
        rng = np.random.default_rng(None if seed is None else [seed, next(calls)])

        def cut(take) -> Iterator:
            if shuffle:
                return _shuffled(take, n, batch_size, num_epochs, rng, _block_batches(config))
            return _in_order(take, n, batch_size, num_epochs)

        tail = None if num_epochs is None else (n * num_epochs) % batch_size
        return Batches(
            cut,
            _rows(x, data, feature_keys, target_keys),
            last_batch_size=tail or None,
            batch_count=None if num_epochs is None else -(-n * num_epochs // batch_size),
            epochs=(n, batch_size, num_epochs),
        )

    return input_fn


class Batches:
    """The batches of in-memory rows, with what is known of them in advance (internal).

    What ``numpy_input_fn``'s ``input_fn`` returns: an iterator of batches, cut from the
    blocks of rows that ``cut(take)`` yields (``(take(index), count)``: the rows of
    ``count`` batches, ``take(index)`` of ``rows`` for the indices, a slice or an index
    array along axis 0). It also tells the Estimator

    * the size of its last batch before it is read (:attr:`last_batch_size`): the program
      for that shorter batch compiles in the background while the others run;
    * how many batches there are (:attr:`batch_count`): an evaluation or prediction over a
      few batches compiles for compile speed;
    * that its batches are rows of fixed arrays (:meth:`map_rows`): a host phase that works
      row by row (feature columns, label vocabularies) runs once over all rows instead of
      once per batch and epoch, and (:meth:`warm`) at a time of the Estimator's choosing,
      while the first batch's program compiles;
    * the blocks themselves (:meth:`blocks`): the Estimator prepares a block's rows at once
      and hands a fused call the block itself (``estimator.engine.row_blocks``);
    * which batch ends each pass over the data (:attr:`ends_epoch`, the epoch protocol of
      ``estimator.handlers``): the one holding the pass's last example (a batch spanning
      two passes ends the first).

    Args:
      cut: ``cut(take) -> iterator of (take(index), count)``, ``index`` the rows of
        ``count`` batches of the batch size (of one, possibly shorter, when ``count`` is 1).
      rows: a pytree of arrays ``[n, ...]``: the input's whole data.
      last_batch_size: the number of examples of the last batch when it is shorter than the
        others, else None.
      batch_count: the number of batches, None when unknown or endless.
      fn: a row-by-row function the batches are mapped through (see :meth:`map_rows`).
      epochs: ``(examples per pass, batch size, passes or None)``: the batches are
        consecutive runs of the passes' examples.

    Attributes:
      ends_epoch: whether the batch ``__next__`` returned last ends a pass.
    """

    #: Rows per call of a :meth:`map_rows` function (bounds its temporary memory).
    CHUNK = 1 << 16

    def __init__(
        self,
        cut: Callable,
        rows,
        *,
        last_batch_size: int | None = None,
        batch_count: int | None = None,
        fn: Callable | None = None,
        epochs: tuple,
    ) -> None:
        self._cut = cut
        self._rows = rows
        self._fn = fn
        self._epochs = epochs
        self._count = 0  # batches cut so far
        self.ends_epoch = False
        self._mapped = None  # fn(rows), once computed
        self._first = True  # the next batch taken is the first: fn of its own rows
        self._blocks: Iterator | None = None
        self._ready: collections.deque = collections.deque()  # (batch, ends) not yet read
        self.last_batch_size = last_batch_size
        self.batch_count = batch_count

    def map_rows(self, fn: Callable) -> Batches:
        """The same batches of ``fn(rows)``. ``fn`` runs once on all rows (in chunks, see
        :func:`apply_to_rows`) at :meth:`warm` or at the second batch, whichever comes
        first, and on the first batch's rows alone before that: the first batch is ready
        at once. ``fn`` must work row by row: each output row depends on the same input
        row only, so both give the same batches.

        Raises:
          RuntimeError: batches were read already, or they are mapped already.
        """
        if self._blocks is not None or self._fn is not None:
            raise RuntimeError(
                "map_rows() after reading batches or mapping them: call it once, first."
            )
        return Batches(
            self._cut,
            self._rows,
            last_batch_size=self.last_batch_size,
            batch_count=self.batch_count,
            fn=fn,
            epochs=self._epochs,
        )

    def warm(self) -> None:
        """Maps all rows now (see :meth:`map_rows`); nothing when done or not mapped."""
        if self._fn is not None and self._mapped is None:
            self._mapped = apply_to_rows(self._fn, self._rows, self.CHUNK)

    def _take(self, index):
        if self._fn is None:
            return jax.tree.map(functools.partial(_rows_at, index=index), self._rows)
        if self._mapped is None and self._first:
            self._first = False  # the first batch: its own rows mapped, the rest not yet
            return self._fn(jax.tree.map(functools.partial(_rows_at, index=index), self._rows))
        self.warm()
        return jax.tree.map(functools.partial(_rows_at, index=index), self._mapped)

    def blocks(self) -> Iterator[tuple[Any, int, list[bool]]]:
        """The input as blocks, instead of batch by batch (one or the other):
        ``(rows, count, ends)``, ``rows`` the rows of ``count`` consecutive batches one
        after the other (a pytree of arrays ``[count * batch_size, ...]``; when ``count``
        is 1, one batch, the last one possibly shorter), ``ends[i]`` whether batch ``i``
        ends a pass (see :attr:`ends_epoch`)."""
        if self._blocks is None:
            self._blocks = self._cut_blocks()
        return self._blocks

    def _cut_blocks(self) -> Iterator[tuple[Any, int, list[bool]]]:
        n, size, passes = self._epochs
        total = None if passes is None else n * passes
        for rows, count in self._cut(self._take):
            # Batch g holds stream positions [g*b, min((g+1)*b, total)); it ends a pass
            # when more passes are complete after it than before it.
            ends = []
            for g in range(self._count, self._count + count):
                start = g * size
                stop = start + size if total is None else min(start + size, total)
                ends.append(stop // n > start // n)
            self._count += count
            yield rows, count, ends

    def __iter__(self) -> Batches:
        return self

    def __next__(self):
        if not self._ready:
            rows, count, ends = next(self.blocks())
            self._ready.extend(zip(batch_views(rows, count), ends, strict=True))
        batch, self.ends_epoch = self._ready.popleft()
        return batch


def apply_to_rows(fn: Callable, rows, chunk: int = Batches.CHUNK):
    """``fn`` over all of ``rows`` (a pytree of arrays ``[n, ...]``), ``chunk`` rows a call,
    the results concatenated: a row-by-row host phase run once over an in-memory dataset,
    with its temporary memory bounded by the chunk."""
    n = len(jax.tree.leaves(rows)[0])
    parts = [
        fn(jax.tree.map(lambda v, lo=lo: v[lo : lo + chunk], rows))
        for lo in range(0, max(n, 1), chunk)
    ]
    return parts[0] if len(parts) == 1 else jax.tree.map(lambda *p: np.concatenate(p), *parts)
