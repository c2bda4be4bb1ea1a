"""The streaming executor of ``tf.data``: pipelines over files (``TextLineDataset``,
``TFRecordDataset``) on the input engine (``estimator.inputs.engine``), the same engine
``tfrecord_input_fn`` runs on.

It takes pipelines of the form ``files → [map | shuffle | repeat | take | skip | shard]* →
batch → [map | repeat]*``. The files are read in chunks in a background thread (lines split
a megabyte at a time; TFRecords kept in the reader's buffers), through
``estimator.io.fs``: local paths and storage URLs alike. The operations that choose
elements run over the chunks; ``map`` and ``batch`` are fused (TF's ``map_and_batch``
fusion): the elements are cut into batches, whole batches grouped into blocks of about
4,096 elements, and the maps run once per block, in a pool of threads:

* the maps before ``batch``, composed, are called on the block's elements as one array
  (a vectorized call: ``tf.decode_csv`` on an array of lines parses them all at once) when
  that gives, row for row, what calling them on each element gives (checked on the first
  and last element of the first block); else element by element, then stacked;
* the maps after ``batch``, composed, are called on the whole block when that gives, on
  its first batch's rows, what calling them on the first batch gives (a map that works row
  by row); else batch by batch.

A map is expected to be a function of its element (TF runs it in a graph without side
effects); one that draws random numbers refuses to be vectorized (``_pipeline``) and runs
element by element. Errors raised by a map surface at the first batch of the block they
happen in.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from estimator.compat.v1.data._pipeline import Op, Source, around_batch, call_map, vectorizing
from estimator.inputs import engine
from estimator.io import SparseValue, fs
from estimator.io._records import Records
from estimator.io.tfrecord import read_record_chunks
from estimator.io.tfrecord.reader import _CHUNK, _open_read

__all__ = ["Files", "plan"]

_BEFORE = {"map", "shuffle", "repeat", "take", "skip", "shard"}
_AFTER = {"map", "repeat"}
_WORKERS = 2


class Files:
    """The elements of files, as bytes scalars: their lines (``kind="lines"``) or their
    TFRecords (``kind="records"``). Called, it iterates the elements (the element
    executor's source); :meth:`chunks` gives them in chunks (the streaming executor's).

    Args:
      kind: ``"lines"`` or ``"records"``.
      names: the files (local paths or storage URLs).
      compression: ``""``, ``"GZIP"`` or ``"ZLIB"``; None for lines: GZIP for ``.gz``
        names.
      cycle: files read at once, one element from each in turn (records only).
    """

    def __init__(self, kind: str, names: list[str], compression: str | None, cycle: int = 1):
        self.kind = kind
        self.names = names
        self.compression = compression
        self.cycle = cycle

    def chunks(self) -> Iterator:
        if self.kind == "records":
            _check_named_files(self.names)
            return read_record_chunks(self.names, self.compression, cycle_length=self.cycle)
        return (chunk for name in self.names for chunk in self._lines(name))

    def _lines(self, path: str) -> Iterator[list[bytes]]:
        """The lines of one file without their line break (``\\n``, or ``\\r\\n``)."""
        compression = self.compression
        if compression is None:
            compression = "GZIP" if path.endswith(".gz") else ""
        with _open_read(path, compression) as f:
            rest = b""
            while True:
                block = f.read(_CHUNK)
                if not block:
                    break
                lines = (rest + block).split(b"\n")
                rest = lines.pop()
                if lines:
                    yield _without_cr(lines, block)
            if rest:
                yield _without_cr([rest], rest)

    def __call__(self) -> Iterator[np.ndarray]:
        for chunk in self.chunks():
            for element in chunk:
                yield np.asarray(element, dtype=object)


_GLOB = re.compile(r"[*?[]")  # glob's special characters


def _check_named_files(names: list[str]) -> None:
    """TF reads ``TFRecordDataset``'s names as files, not patterns: a missing one is
    ``FileNotFoundError`` (``tf.errors.NotFoundError`` under compat, TF's "<name>; No such
    file or directory"). A name with glob characters that is not a file is still expanded
    (``estimator.io.tfrecord.list_files``), where TF would refuse it."""
    for name in names:
        if not _GLOB.search(name) and not fs.exists(name):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def _without_cr(lines: list[bytes], block: bytes) -> list[bytes]:
    if b"\r" not in block:
        return lines
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


# ----- the maps --------------------------------------------------------------------------------
def _tf_value(tree: Any) -> Any:
    """A map's result as the element TF makes of it: a list is a tuple, leaves NumPy."""
    if isinstance(tree, list):
        tree = tuple(tree)
    return jax.tree.map(np.asarray, tree)


def _composed(fns: list[Callable]) -> Callable | None:
    if not fns:
        return None

    def run(element):
        for fn in fns:
            element = _tf_value(call_map(fn, element))
        return element

    return run


def _has_sparse(tree: Any) -> bool:
    """Whether ``tree`` holds a sparse value, whose dense shape is its batch's (so it
    cannot be cut out of a bigger block)."""
    leaves = jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, SparseValue))
    return any(isinstance(x, SparseValue) for x in leaves)


def _same(a: Any, b: Any) -> bool:
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    if tree_a != tree_b:
        return False
    for x, y in zip(leaves_a, leaves_b, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        numeric = x.dtype.kind in "fc"
        if not np.array_equal(x, y, equal_nan=numeric):
            return False
    return True


class _Maps:
    """The maps before and after ``batch``, and how they run: decided on a sample of the
    files' first elements (see the module docstring)."""

    def __init__(self, before: list[Callable], after: list[Callable], stack: Callable) -> None:
        self._before = _composed(before)
        self._after = _composed(after)
        self._stack = stack
        self.before_vectorized = True
        self.after_row_wise = True
        self.has_after = self._after is not None

    def decide(self, sample: np.ndarray, batch_size: int) -> None:
        """Chooses how the maps run, from ``sample`` (elements, as a 1-D array)."""
        value = sample
        if self._before is not None and len(sample):
            value = self._vectorized(sample)
            self.before_vectorized = value is not None
            if value is None:
                try:
                    value = self._stack([self._before(e) for e in sample])
                except Exception:  # noqa: BLE001 (raised again where TF raises it: when read)
                    self.after_row_wise = False
                    return
        if self._after is not None:
            whole = len(sample) >= 2 * batch_size
            self.after_row_wise = whole and self._row_wise(value, batch_size)

    def _vectorized(self, sample: np.ndarray) -> Any:
        """The maps before ``batch`` on all of ``sample`` at once, or None when that does not
        give, for the first and last element, what calling them on that element gives."""
        try:
            with vectorizing():
                block = self._before(sample)
            if _has_sparse(block):
                return None
            for i in (0, len(sample) - 1):
                alone = self._stack([self._before(sample[i])])
                if not _same(engine.rows(block, i, i + 1), alone):
                    return None
        except Exception:  # noqa: BLE001 (anything else runs element by element)
            return None
        return block

    def _row_wise(self, value, first: int) -> bool:
        try:
            mapped = self._after(value)
            if _has_sparse(mapped) or _has_sparse(value):
                return False
            whole = engine.rows(mapped, 0, first)
            return _same(whole, self._after(engine.rows(value, 0, first)))
        except Exception:  # noqa: BLE001 (it then runs batch by batch)
            return False

    def block(self, block: engine.Block) -> Any:
        """A block's elements through the maps that run on whole blocks: its rows, or its
        batches (an ``engine.Cut``) when the maps before ``batch`` ran element by element."""
        value = _as_array(block.items)
        if self._before is None or self.before_vectorized:
            if self._before is not None:
                with vectorizing():
                    value = self._before(value)
            if self._after is not None and self.after_row_wise:
                value = self._after(value)
            return value
        elements = [self._before(e) for e in value]
        bounds = np.cumsum([0, *block.sizes]).tolist()
        batches = (self._stack(elements[lo:hi]) for lo, hi in itertools.pairwise(bounds))
        if self._after is not None and self.after_row_wise:
            batches = (self._after(batch) for batch in batches)
        return engine.Cut(batches)

    def batch(self, value) -> Any:
        """A batch through the maps that run batch by batch."""
        return value if self.after_row_wise else self._after(value)


def _as_array(items) -> np.ndarray:
    """A chunk's elements as a 1-D object array of ``bytes``."""
    if isinstance(items, Records):
        items = items.tolist()
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


# ----- the plan --------------------------------------------------------------------------------
class StreamingPlan:
    """A file pipeline the streaming executor runs (see the module docstring)."""

    def __init__(self, files: Files, before, batch: Op, after, seed: int, stack: Callable):
        self.files = files
        self.before = before
        self.batch_size, self.drop_remainder = batch.args
        self.after = after
        self.seed = seed
        self.maps = _Maps(
            [op.args[0] for op in before if op.kind == "map"],
            [op.args[0] for op in after if op.kind == "map"],
            stack,
        )
        self._decided = False

    def _rng(self, position: int, op_seed, reshuffle: bool) -> Callable:
        passes = itertools.count()

        def rng() -> np.random.Generator:
            base = self.seed if op_seed is None else int(op_seed)
            key = [base & 0x7FFFFFFF, position] + ([next(passes)] if reshuffle else [])
            return np.random.default_rng(key)

        return rng

    def _choose(self, ds):
        """The operations before ``batch`` that choose elements, over chunks (maps commute
        with them: they run later, on blocks)."""
        for position, op in enumerate(self.before):
            if op.kind == "shuffle":
                size, op_seed, reshuffle = op.args
                ds = engine.Shuffle(ds, size, self._rng(position, op_seed, reshuffle))
            elif op.kind == "repeat":
                ds = engine.Repeat(ds, op.args[0])
            elif op.kind == "take":
                ds = ds if op.args[0] < 0 else engine.Select(ds, 0, 1, op.args[0])
            elif op.kind == "skip":
                ds = engine.Select(ds, 0, 1, 0) if op.args[0] < 0 else engine.Select(ds, op.args[0])
            elif op.kind == "shard":
                ds = engine.Select(ds, op.args[1], op.args[0])
        return ds

    def build(self, fn: Callable | None):
        """The batches, with ``fn`` (the Estimator's row-by-row host phase) applied."""
        maps = self.maps
        whole = maps.after_row_wise

        def work(block: engine.Block):
            value = maps.block(block)
            if fn is None or not whole:
                return value
            if isinstance(value, engine.Cut):
                return engine.Cut(fn(batch) for batch in value)
            return fn(value)

        ds = self._choose(engine.Source(self.files.chunks))
        ds = engine.Blocks(ds, self.batch_size, drop_remainder=self.drop_remainder)
        ds = engine.prefetch(ds, 2)
        ds = engine.ParallelMap(ds, work, workers=_WORKERS, depth=_WORKERS + 1)
        ds = engine.Unblock(ds)
        if not whole:
            ds = ds.map(maps.batch if fn is None else (lambda b: fn(maps.batch(b))))
        for op in self.after:
            if op.kind == "repeat":
                ds = engine.Repeat(ds, op.args[0])
        return ds

    def iterator(self, fn: Callable | None = None) -> engine.Batches:
        """The batches (``fn``: see :meth:`build`); the maps' mode is chosen on the first
        call, from the files' first chunk."""
        if not self._decided:
            first = next(iter(self._choose(engine.Source(self.files.chunks))), [])
            sample = _as_array(first[: 4 * self.batch_size] if len(first) else [])
            self.maps.decide(sample, self.batch_size)
            self._decided = True
        batches = engine.Batches(self.build)
        return batches if fn is None else batches.map_rows(fn)


def plan(source: Source, ops: tuple[Op, ...], seed: int, stack: Callable) -> StreamingPlan | None:
    """The streaming plan of a pipeline, or None when it needs the element executor.

    Args:
      stack: how elements are batched (the element executor's ``batch``).
    """
    if not isinstance(source.value, Files):
        return None
    parts = around_batch(ops)
    if parts is None:
        return None
    before, batch, after = parts
    if any(op.kind not in _BEFORE for op in before) or any(op.kind not in _AFTER for op in after):
        return None
    return StreamingPlan(source.value, before, batch, after, seed, stack)
