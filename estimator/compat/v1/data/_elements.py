"""The element executor of ``tf.data``: grain's element-wise pipeline.

Every source becomes a grain ``IterDataset`` (in-memory slices through
``grain.MapDataset.source``; generators and text files through :class:`IterableSource`);
``map``/``filter``/``batch`` are grain's, ``shuffle`` is grain's window shuffle
(``WindowShuffleIterDataset``, window = ``buffer_size``), ``take`` is grain's
``LimitIterDataset``. ``repeat`` builds the pipeline before it again for every pass, so
shuffles draw a new order each pass (TF's ``reshuffle_each_iteration``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grain
import jax
import numpy as np

from estimator.compat.v1.data._pipeline import Op, Source, call_map
from estimator.io import SparseValue

__all__ = ["iterator", "IterableSource"]

_READ = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)


class _IterableIterator(grain.DatasetIterator):
    """A grain iterator over ``make()``; its state is the number of elements read."""

    def __init__(self, make: Callable[[], Iterable]) -> None:
        super().__init__()
        self._make = make
        self._iterator = iter(make())
        self._position = 0

    def __next__(self):
        value = next(self._iterator)
        self._position += 1
        return value

    def get_state(self) -> dict:
        return {"position": self._position}

    def set_state(self, state: dict) -> None:
        self._iterator = itertools.islice(iter(self._make()), state["position"], None)
        self._position = state["position"]


class IterableSource(grain.IterDataset):
    """A grain ``IterDataset`` over a re-iterable Python source: ``make()`` returns a new
    iterator for each pass (a generator function, a file reader)."""

    def __init__(self, make: Callable[[], Iterable]) -> None:
        super().__init__()
        self._make = make

    def __iter__(self) -> _IterableIterator:
        return _IterableIterator(self._make)


class _Slices:
    """Random access to the slices of a tree of arrays (a grain data source)."""

    def __init__(self, tree: Any, n: int) -> None:
        self.tree = tree
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        return jax.tree.map(lambda a: a[i], self.tree)


def _numpy(tree: Any) -> Any:
    return jax.tree.map(np.asarray, tree)


def _stacked(elements: list) -> Any:
    """A batch of elements: arrays stacked (grain's default), and the sparse values of
    ``tf.io.parse_single_example``'s ``VarLenFeature``s joined into one sparse value
    ``[batch, *max(dense_shape)]``, as TF batches ``SparseTensor``s."""
    return jax.tree.map(
        lambda *xs: _join_sparse(xs) if isinstance(xs[0], SparseValue) else np.stack(xs),
        *elements,
        is_leaf=lambda x: isinstance(x, SparseValue),
    )


def _join_sparse(values: tuple) -> SparseValue:
    indices = [
        np.concatenate([np.full((len(v.indices), 1), i, np.int64), v.indices], axis=1)
        for i, v in enumerate(values)
    ]
    shape = np.max(np.stack([v.dense_shape for v in values]), axis=0)
    return SparseValue(
        np.concatenate(indices).astype(np.int64),
        np.concatenate([v.values for v in values]),
        np.concatenate([[len(values)], shape]).astype(np.int64),
    )


def _source(source: Source) -> grain.IterDataset:
    if source.kind == "slices":
        tree, n = source.value
        return grain.MapDataset.source(_Slices(tree, n)).to_iter_dataset(_READ)
    return IterableSource(source.value)


def _seed(base: int, position: int, path: tuple, op_seed, reshuffle: bool) -> int:
    if op_seed is not None and not reshuffle:
        return int(op_seed)
    key = (base if op_seed is None else op_seed, position) + (path if reshuffle else ())
    return hash(key) & 0x7FFFFFFF


def _build(source: Source, ops: tuple[Op, ...], seed: int, path: tuple) -> grain.IterDataset:
    """The grain pipeline of ``source`` then ``ops``, for the pass ``path`` of the
    repeats around it."""
    if not ops:
        return _source(source)
    *head, op = ops
    head = tuple(head)
    position = len(head)
    if op.kind == "repeat":
        count = op.args[0]

        def passes() -> Iterator:
            for k in itertools.count() if count is None else range(count):
                yield from _build(source, head, seed, path + (k,))

        return IterableSource(passes)
    ds = _build(source, head, seed, path)
    if op.kind == "map":
        fn = op.args[0]
        return ds.map(lambda e: _numpy(call_map(fn, e)))
    if op.kind == "filter":
        predicate = op.args[0]
        return ds.filter(lambda e: bool(np.asarray(call_map(predicate, e))))
    if op.kind == "shuffle":
        buffer_size, op_seed, reshuffle = op.args
        return grain.experimental.WindowShuffleIterDataset(
            ds, window_size=buffer_size, seed=_seed(seed, position, path, op_seed, reshuffle)
        )
    if op.kind == "batch":
        batch_size, drop_remainder = op.args
        return ds.batch(batch_size, drop_remainder=drop_remainder, batch_fn=_stacked)
    if op.kind == "take":
        count = op.args[0]
        if count < 0:
            return ds
        if count == 0:
            return IterableSource(lambda: iter(()))
        return grain.experimental.LimitIterDataset(ds, count)
    if op.kind == "skip":
        count = op.args[0]
        if count < 0:
            return IterableSource(lambda: iter(()))
        return IterableSource(lambda: itertools.islice(iter(ds), count, None))
    if op.kind == "shard":
        num, index = op.args
        return IterableSource(lambda: itertools.islice(iter(ds), index, None, num))
    raise ValueError(f"Unknown dataset operation {op.kind!r}.")


def iterator(source: Source, ops: tuple[Op, ...], seed: int) -> Iterator:
    """The elements of the pipeline, as NumPy values."""
    return iter(_build(source, ops, seed, ()))
