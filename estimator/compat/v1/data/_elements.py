"""The element executor of ``tf.data``: grain's element-wise pipeline.

Every source becomes a grain ``IterDataset`` (in-memory slices through
``grain.MapDataset.source``; generators and text files through :class:`IterableSource`);
``map``/``filter``/``batch`` are grain's, ``shuffle`` is TF's shuffle buffer of
``buffer_size`` elements (``estimator.inputs.engine``), ``take`` is grain's
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
from estimator.inputs import engine
from estimator.io import SparseValue

__all__ = ["iterator", "IterableSource", "padded_stack"]

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


def _array(x: Any) -> np.ndarray:
    """A value as the pipeline holds it: strings as ``bytes`` in ``object`` arrays (NumPy's
    ``"S"`` dtype would drop trailing NUL bytes of a record)."""
    if isinstance(x, bytes | str):
        out = np.empty((), dtype=object)
        out[()] = x
        return out
    return np.asarray(x)


def _numpy(tree: Any) -> Any:
    return jax.tree.map(_array, tree)


def _stack(xs: tuple) -> np.ndarray:
    if isinstance(xs[0], bytes | str) or (isinstance(xs[0], np.ndarray) and xs[0].dtype == object):
        out = np.empty((len(xs), *np.shape(xs[0])), dtype=object)
        for i, x in enumerate(xs):
            out[i, ...] = x
        return out
    return np.stack(xs)


def _stacked(elements: list) -> Any:
    """A batch of elements: arrays stacked (grain's default), and the sparse values of
    ``tf.io.parse_single_example``'s ``VarLenFeature``s joined into one sparse value
    ``[batch, *max(dense_shape)]``, as TF batches ``SparseTensor``s."""
    return jax.tree.map(
        lambda *xs: _join_sparse(xs) if isinstance(xs[0], SparseValue) else _stack(xs),
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


def _padding(value: Any, dtype: np.dtype) -> Any:
    if value is None:
        return b"" if dtype.kind in "OSU" else 0
    return np.asarray(value).item() if isinstance(value, np.ndarray) else value


def _pad_one(arrays: list[np.ndarray], shape: Any, value: Any) -> np.ndarray:
    """One component of a padded batch: ``arrays`` padded at the end to ``shape`` (None /
    -1 dims: the batch's longest) and stacked."""
    rank = arrays[0].ndim
    longest = [max(a.shape[d] for a in arrays) for d in range(rank)]
    if shape is None:
        target = longest
    else:
        shape = [None if d is None or int(d) < 0 else int(d) for d in np.ravel(shape).tolist()]
        if len(shape) != rank:
            raise ValueError(
                f"The padded shape {tuple(shape)} is not compatible with the rank {rank} of "
                "the corresponding input component; give one dimension per axis."
            )
        target = [n if d is None else d for d, n in zip(shape, longest, strict=True)]
    for a in arrays:
        if any(n > t for n, t in zip(a.shape, target, strict=True)):
            raise ValueError(
                "Attempted to pad to a smaller size than the input element. (An element of "
                f"shape {list(a.shape)} does not fit the padded shape {target}: leave the "
                "dimension None to pad to the longest element.)"
            )
    dtype = arrays[0].dtype
    out = np.full((len(arrays), *target), _padding(value, dtype), dtype=dtype)
    for i, a in enumerate(arrays):
        out[(i, *(slice(0, n) for n in a.shape))] = a
    return out


def padded_stack(elements: list, padded_shapes: Any, padding_values: Any) -> Any:
    """A batch of ``Dataset.padded_batch``: each component of the elements padded to its
    padded shape and stacked (see ``Dataset.padded_batch``)."""
    structure = jax.tree.structure(elements[0])
    columns = [list(c) for c in zip(*(jax.tree.leaves(e) for e in elements), strict=True)]
    columns = [[np.asarray(a) for a in c] for c in columns]
    n = len(columns)
    shapes = [None] * n if padded_shapes is None else _per_component(padded_shapes, structure)
    if not isinstance(padding_values, tuple | list | dict):
        values = [padding_values] * n  # one scalar (or None) for every component
    else:
        values = jax.tree.leaves(padding_values, is_leaf=lambda x: x is None)
    return jax.tree.unflatten(
        structure, [_pad_one(c, s, v) for c, s, v in zip(columns, shapes, values, strict=True)]
    )


def _per_component(padded_shapes: Any, structure) -> list:
    """The padded shape of each component: a shape is a list/tuple of dims (or None), so
    the element's structure is cut off at the shapes."""
    if structure == jax.tree.structure(0):
        return [padded_shapes]
    return jax.tree.leaves(padded_shapes, is_leaf=_is_shape)


def _is_shape(x: Any) -> bool:
    if x is None or isinstance(x, np.ndarray):
        return True
    return isinstance(x, list | tuple) and all(d is None or isinstance(d, int) for d in x)


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


def _map(ds: grain.IterDataset, fn) -> grain.IterDataset:
    return ds.map(lambda e: _numpy(call_map(fn, e)))


def _filter(ds: grain.IterDataset, predicate) -> grain.IterDataset:
    return ds.filter(lambda e: bool(np.asarray(call_map(predicate, e))))


def _batch(ds: grain.IterDataset, batch_size, drop_remainder) -> grain.IterDataset:
    return ds.batch(batch_size, drop_remainder=drop_remainder, batch_fn=_stacked)


def _padded_batch(ds, batch_size, padded_shapes, padding_values, drop_remainder):
    def batch_fn(elements: list) -> Any:
        return padded_stack(elements, padded_shapes, padding_values)

    return ds.batch(batch_size, drop_remainder=drop_remainder, batch_fn=batch_fn)


def _take(ds: grain.IterDataset, count) -> grain.IterDataset:
    if count < 0:
        return ds
    if count == 0:
        return IterableSource(lambda: iter(()))
    return grain.experimental.LimitIterDataset(ds, count)


def _skip(ds: grain.IterDataset, count) -> grain.IterDataset:
    if count < 0:
        return IterableSource(lambda: iter(()))
    return IterableSource(lambda: itertools.islice(iter(ds), count, None))


def _shard(ds: grain.IterDataset, num, index) -> grain.IterDataset:
    return IterableSource(lambda: itertools.islice(iter(ds), index, None, num))


#: The element-wise operations: ``kind -> f(dataset, *op.args)`` (``shuffle`` and
#: ``repeat`` need the pipeline's position and pass: :func:`_build` runs them).
_OPS: dict[str, Callable] = {
    "map": _map,
    "filter": _filter,
    "batch": _batch,
    "padded_batch": _padded_batch,
    "take": _take,
    "skip": _skip,
    "shard": _shard,
}


def _build(source: Source, ops: tuple[Op, ...], seed: int, path: tuple) -> grain.IterDataset:
    """The grain pipeline of ``source`` then ``ops``, for the pass ``path`` of the
    repeats around it."""
    if not ops:
        return _source(source)
    *head, op = ops
    head = tuple(head)
    if op.kind == "repeat":
        count = op.args[0]

        def passes() -> Iterator:
            for k in itertools.count() if count is None else range(count):
                yield from _build(source, head, seed, path + (k,))

        return IterableSource(passes)
    ds = _build(source, head, seed, path)
    if op.kind == "shuffle":
        buffer_size, op_seed, reshuffle = op.args
        return engine.shuffle_elements(
            ds, buffer_size, _seed(seed, len(head), path, op_seed, reshuffle)
        )
    if op.kind not in _OPS:
        raise ValueError(f"Unknown dataset operation {op.kind!r}.")
    return _OPS[op.kind](ds, *op.args)


def iterator(source: Source, ops: tuple[Op, ...], seed: int) -> Iterator:
    """The elements of the pipeline, as NumPy values."""
    return iter(_build(source, ops, seed, ()))
