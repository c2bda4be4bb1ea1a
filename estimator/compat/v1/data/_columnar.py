"""The columnar executor of ``tf.data``: whole batches gathered from in-memory arrays.

It takes pipelines of the form ``source → [map | shuffle | repeat | take | skip | shard]*
→ batch → [map | repeat | take | skip | shuffle]*`` whose source is in memory and whose
element-wise maps jax can trace. The element stream before ``batch`` is an *index map*: a
function from positions in the stream to rows of the source (shuffles are permutations of
each pass, ``repeat`` concatenates passes, ``take``/``skip``/``shard`` select positions);
element-wise maps commute with these and run once per batch, vectorized with ``jax.vmap``.
Batch ``b`` is then rows ``index_map(b·B … b·B + B - 1)``: a grain ``MapDataset`` over batch
numbers maps each to its batch, and the operations after ``batch`` are grain's.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Iterator
from typing import Any

import grain
import jax
import numpy as np

from estimator.compat.v1.data._pipeline import Op, Source, around_batch, call_map, vectorizing
from estimator.inputs import engine

__all__ = ["plan", "ColumnarPlan"]

_INDEX_OPS = {"map", "shuffle", "repeat", "take", "skip", "shard"}
_BATCH_OPS = {"map", "repeat", "take", "skip", "shuffle"}


# ----- index maps ------------------------------------------------------------------------
class _Rows:
    """Positions are rows of the source."""

    def __init__(self, n: int) -> None:
        self.length = n

    def __call__(self, positions: np.ndarray, path: tuple) -> np.ndarray:
        return positions


#: A batch read in order comes from a gather of up to this many bytes of rows ...
CHUNK_BYTES = 4 << 20
#: ... and of at most this many batches.
CHUNK_BATCHES = 64

#: Passes of a reshuffled dataset are permuted this many rows at a time (a block of passes).
SHUFFLE_BLOCK_ROWS = 1 << 16


class _Shuffled:
    """Each pass over a finite parent in the order of TF's shuffle buffer of
    ``buffer_size`` (``estimator.inputs.engine.buffer_order``), drawn anew per pass.

    Under ``repeat`` a small dataset has a pass every few batches; the orders of a block of
    passes are drawn from one generator, not a seeded generator per pass."""

    def __init__(self, parent, buffer_size: int, seed: int, reshuffle: bool) -> None:
        self.parent = parent
        self.length = parent.length
        self.buffer_size = buffer_size
        self.seed = seed
        self.reshuffle = reshuffle
        self.block = max(1, SHUFFLE_BLOCK_ROWS // max(1, self.length))

    def permutation(self, path: tuple) -> np.ndarray:
        if not (self.reshuffle and path):
            return self._permutations((self.seed,))[0]
        block, row = divmod(path[-1], self.block)
        return self._permutations((self.seed, *path[:-1], block))[row]

    @functools.lru_cache(maxsize=4)  # noqa: B019 (a few live blocks per iterator)
    def _permutations(self, key: tuple) -> list[np.ndarray]:
        rows = self.block if self.reshuffle and len(key) > 1 else 1
        rng = np.random.default_rng(list(key))
        return [engine.buffer_order(self.length, self.buffer_size, rng) for _ in range(rows)]

    def __call__(self, positions, path):
        return self.parent(self.permutation(path)[positions], path)


class _Repeated:
    """Passes of a finite parent, one after the other (``count`` None: forever)."""

    def __init__(self, parent, count: int | None) -> None:
        if parent.length is None:
            raise _NotColumnar("repeat of an infinite stream")
        self.parent = parent
        self.count = count
        self.length = None if count is None else parent.length * count

    def __call__(self, positions, path):
        length = self.parent.length
        if length == 0 or not len(positions):
            return positions
        passes, inner = np.divmod(positions, length)
        first, last = int(passes.min()), int(passes.max())
        if first == last:  # a batch within one pass
            return self.parent(inner, path + (first,))
        out = np.empty_like(positions)
        if np.all(passes[1:] >= passes[:-1]):  # in order (a run of batches): one slice a pass
            bounds = np.searchsorted(passes, np.arange(first, last + 2))
            for p, lo, hi in zip(range(first, last + 1), bounds[:-1], bounds[1:], strict=True):
                out[lo:hi] = self.parent(inner[lo:hi], path + (p,))
            return out
        for p in range(first, last + 1):
            mask = passes == p
            if mask.any():
                out[mask] = self.parent(inner[mask], path + (p,))
        return out


class _Selected:
    """Positions ``start + k·step`` of the parent, at most ``count`` of them."""

    def __init__(self, parent, start: int, step: int, count: int | None) -> None:
        self.parent = parent
        self.start, self.step = start, step
        available = None
        if parent.length is not None:
            available = max(0, -(-(parent.length - start) // step))
        if count is None:
            self.length = available
        else:
            self.length = count if available is None else min(count, available)

    def __call__(self, positions, path):
        return self.parent(self.start + positions * self.step, path)


class _NotColumnar(Exception):
    """The pipeline does not fit the columnar executor (internal)."""


def _index_map(n: int, ops: list[Op], seed: int):
    index = _Rows(n)
    for position, op in enumerate(ops):
        if op.kind == "shuffle":
            buffer_size, op_seed, reshuffle = op.args
            seed_value = hash((seed, position)) & 0x7FFFFFFF if op_seed is None else op_seed
            if isinstance(index, _Repeated):  # shuffle after repeat: within each pass
                shuffled = _Shuffled(index.parent, buffer_size, seed_value, reshuffle)
                index = _Repeated(shuffled, index.count)
            elif index.length is None:
                raise _NotColumnar("shuffle of an infinite stream")
            else:
                index = _Shuffled(index, buffer_size, seed_value, reshuffle)
        elif op.kind == "repeat":
            index = _Repeated(index, op.args[0])
        elif op.kind == "take":
            count = op.args[0]
            index = index if count < 0 else _Selected(index, 0, 1, count)
        elif op.kind == "skip":
            count = op.args[0]
            index = _Selected(index, 0, 1, 0) if count < 0 else _Selected(index, count, 1, None)
        elif op.kind == "shard":
            num, i = op.args
            index = _Selected(index, i, num, None)
    return index


# ----- vectorized element maps ---------------------------------------------------------------
def _is_numeric(tree: Any) -> bool:
    return all(np.asarray(x).dtype.kind in "biufc" for x in jax.tree.leaves(tree))


def _vectorize(fn: Callable, example: Any) -> Callable | None:
    """``jit(vmap(fn))`` over a batch, or None when ``fn`` cannot be traced."""
    if not _is_numeric(example):
        return None

    def one(element):
        return call_map(fn, element)

    batched = jax.jit(jax.vmap(one))
    try:
        with vectorizing():
            out = jax.eval_shape(batched, example)
    except Exception:  # noqa: BLE001 (anything jax cannot trace goes element by element)
        return None
    if not all(np.dtype(x.dtype).kind in "biufc" for x in jax.tree.leaves(out)):
        return None
    return batched


class ColumnarPlan:
    """A pipeline the columnar executor runs (see the module docstring)."""

    def __init__(self, tree, index, maps, batch_size, drop_remainder, after, seed) -> None:
        self.tree = tree  # (its leaves and structure: see the property)
        self.index = index
        self.maps = maps
        self.batch_size = batch_size
        self.drop_remainder = drop_remainder
        self.after = after
        self.seed = seed
        self._chunk: tuple | None = None  # ((pass, chunk number), gathered leaves)

    @property
    def tree(self):
        """The source's columns (a pytree of arrays with the rows first)."""
        return self._treedef.unflatten(self._leaves)

    @tree.setter
    def tree(self, tree) -> None:
        self._leaves, self._treedef = jax.tree.flatten(tree)
        self._chunk = None

    def _per_pass(self) -> int | None:
        length = self.index.length
        if length is None:
            return None
        if self.drop_remainder:
            return length // self.batch_size
        return -(-length // self.batch_size)

    def _repeats_passes(self) -> bool:
        # A repeat right after batch repeats whole passes, each with new shuffles (TF's
        # reshuffle_each_iteration): it is run here, in the index space.
        return bool(self.after) and self.after[0].kind == "repeat" and self.index.length is not None

    def _rows(self, p: int, start: int, stop: int, repeated: bool):
        """The source's rows at stream positions ``start:stop`` of pass ``p``, gathered."""
        if self.index.length is not None:
            stop = min(stop, self.index.length)
        rows = self.index(np.arange(start, stop), (p,) if repeated else ())
        return [a[rows] for a in self._leaves]

    def _batch(self, g: int, per_pass: int | None, repeated: bool, chunk: int = 1):
        """Batch ``g``. With ``chunk`` > 1 the rows of ``chunk`` batches in a row are
        gathered at once (one index computation and one gather per leaf) and kept until
        the next chunk is asked for: a sequential read costs a slice per batch."""
        p, b = (0, g) if per_pass is None or per_pass == 0 else divmod(g, per_pass)
        size = self.batch_size
        if chunk == 1:
            leaves = self._rows(p, b * size, b * size + size, repeated)
        else:
            c, k = divmod(b, chunk)
            if self._chunk is None or self._chunk[0] != (p, c):
                rows = self._rows(p, c * chunk * size, (c + 1) * chunk * size, repeated)
                self._chunk = ((p, c), rows)
            leaves = [a[k * size : k * size + size] for a in self._chunk[1]]
        element = self._treedef.unflatten(leaves)
        for fn in self.maps:
            element = jax.tree.map(np.asarray, fn(element))
        return element

    def _chunk_batches(self) -> int:
        """How many batches :meth:`_batch` gathers at once: up to ``CHUNK_BYTES`` of rows
        and ``CHUNK_BATCHES`` batches when batches are read in order (no shuffle after
        ``batch``), else 1."""
        if any(op.kind == "shuffle" for op in self.after):
            return 1
        row_bytes = sum(a.itemsize * math.prod(a.shape[1:]) for a in self._leaves)
        rows = CHUNK_BYTES // max(1, row_bytes)
        return int(np.clip(rows // self.batch_size, 1, CHUNK_BATCHES))

    def last_batch_size(self) -> int | None:
        """The last batch's size when shorter than ``batch_size`` and nothing after
        ``batch`` reorders or repeats batches, else None."""
        length = self.index.length
        if length is None or self.drop_remainder or self.after:
            return None
        return (length % self.batch_size) or None

    def batch_count(self) -> int | None:
        """The number of batches when known (nothing after ``batch``), else None."""
        return None if self.after else self._per_pass()

    def dataset(self) -> grain.MapDataset:
        per_pass = self._per_pass()
        repeated = self._repeats_passes()
        passes = self.after[0].args[0] if repeated else 1
        after = self.after[1:] if repeated else self.after
        if per_pass is None or passes is None:
            total = sys.maxsize
        else:
            total = per_pass * passes
        batch = functools.partial(
            self._batch, per_pass=per_pass, repeated=repeated, chunk=self._chunk_batches()
        )
        ds = grain.MapDataset.range(total).map(batch)
        for position, op in enumerate(after):
            if op.kind == "map":
                fn = op.args[0]
                ds = ds.map(lambda e, fn=fn: jax.tree.map(np.asarray, call_map(fn, e)))
            elif op.kind == "repeat":
                if len(ds) != sys.maxsize:
                    ds = ds.repeat(op.args[0])
            elif op.kind == "take":
                ds = ds if op.args[0] < 0 else ds.slice(slice(0, op.args[0]))
            elif op.kind == "skip":
                ds = ds.slice(slice(len(ds) if op.args[0] < 0 else op.args[0], None))
            elif op.kind == "shuffle":
                buffer_size, op_seed, _ = op.args
                seed = hash((self.seed, "after", position)) & 0x7FFFFFFF
                rng = np.random.default_rng(seed if op_seed is None else op_seed)
                order = engine.buffer_order(len(ds), buffer_size, rng)
                ds = grain.MapDataset.range(len(order)).map(
                    lambda i, ds=ds, order=order: ds[int(order[i])]
                )
        return ds

    def iterator(self) -> Iterator:
        # The batches by index: grain's MapDataset is random access, and the Estimator reads
        # ahead itself (no per-element iterator machinery on the per-step path).
        return _Batches(self.dataset(), self.epoch_ends())

    def epoch_ends(self) -> Callable[[int], bool] | None:
        """``ends(g)``: whether batch ``g`` holds the last row of a pass over the source
        (the epoch protocol of ``estimator.handlers``), for a ``repeat`` before ``batch``
        (a batch spanning two passes ends the first) or right after it; None when nothing
        but maps may follow (other operations mix or cut the passes: then only the end of
        the input ends an epoch)."""
        repeated = self._repeats_passes()
        if any(op.kind != "map" for op in (self.after[1:] if repeated else self.after)):
            return None
        if repeated:
            per_pass = self._per_pass()
            return (lambda g: (g + 1) % per_pass == 0) if per_pass else None
        if not isinstance(self.index, _Repeated) or not self.index.parent.length:
            return None
        n, size, total = self.index.parent.length, self.batch_size, self.index.length

        def ends(g: int) -> bool:
            start = g * size
            stop = start + size if total is None else min(start + size, total)
            return stop // n > start // n

        return ends


class _Batches:
    """A dataset's batches by index, marking those that end a pass (``ends_epoch``)."""

    def __init__(self, dataset, ends: Callable[[int], bool] | None) -> None:
        self._dataset = dataset
        self._ends = ends
        self._next = 0
        self.ends_epoch = False

    def __iter__(self) -> _Batches:
        return self

    def __next__(self):
        index = self._next
        if index >= len(self._dataset):
            raise StopIteration
        self._next += 1
        self.ends_epoch = self._ends is not None and self._ends(index)
        return self._dataset[index]


def _fits(before: list[Op], after: list[Op]) -> bool:
    """Whether the operations around ``batch`` are the columnar executor's."""
    if any(op.kind not in _INDEX_OPS for op in before):
        return False
    if any(op.kind not in _BATCH_OPS for op in after):
        return False
    endless = [i for i, op in enumerate(after) if op.kind == "repeat" and op.args[0] is None]
    # TF's buffer over endless batches is a stream: the element executor's.
    return not (endless and any(op.kind == "shuffle" for op in after[endless[0] :]))


def plan(source: Source, ops: tuple[Op, ...], seed: int) -> ColumnarPlan | None:
    """The columnar plan of a pipeline, or None when it needs the element executor."""
    if source.kind != "slices":
        return None
    parts = around_batch(ops)
    if parts is None:
        return None
    before, batch, after = parts
    if not _fits(before, after):
        return None
    tree, n = source.value
    try:
        index = _index_map(n, [op for op in before if op.kind != "map"], seed)
    except _NotColumnar:
        return None
    if index.length is None and any(op.kind == "shuffle" for op in after):
        return None  # TF's buffer over endless batches: the element executor's stream
    maps = []
    example = jax.tree.map(lambda a: a[:1], tree)
    for op in before:
        if op.kind != "map":
            continue
        vectorized = _vectorize(op.args[0], example)
        if vectorized is None:
            return None
        example = jax.eval_shape(vectorized, example)
        example = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), example)
        maps.append(vectorized)
    batch_size, drop_remainder = batch.args
    return ColumnarPlan(tree, index, maps, batch_size, drop_remainder, after, seed)
