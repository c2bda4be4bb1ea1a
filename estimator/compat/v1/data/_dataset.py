"""``tf.data.Dataset``: a description of an input pipeline, run on grain.

A :class:`Dataset` records its source and operations (TF's names and arguments) and runs
them when iterated (``as_numpy_iterator()``, which is what the Estimator calls on what an
``input_fn`` returns). Three executors, all built on grain (``grain.MapDataset`` /
``grain.IterDataset``):

* **columnar** (``_columnar``), for in-memory sources (``from_tensor_slices``,
  ``from_tensors``, ``range``) batched once, with maps jax can trace: a grain
  ``MapDataset`` whose elements are whole batches, gathered from the arrays with NumPy;
  element-wise maps run once per batch through ``jax.vmap``. This is the usual TF 1
  ``input_fn`` (``from_tensor_slices(...).shuffle(n).repeat().batch(b)``) and costs a few
  microseconds per batch instead of tens per example.
* **streaming** (``_streaming``), for files (``TextLineDataset``, ``TFRecordDataset``)
  batched once: the input engine that ``tfrecord_input_fn`` runs on
  (``estimator.inputs.engine``), with ``map`` and ``batch`` fused and the maps called on
  blocks of elements at once where that gives the same elements (TF's ``map_and_batch``
  fusion; ``benchmarks/text_pipeline.py`` measures it against TF).
* **elements** (``_elements``), for everything else (generators, filters, ...): grain's
  element-wise ``map``/``filter``/``batch``, the engine's shuffle buffer, and limits.

All give TF's elements in TF's order of operations. ``shuffle(buffer_size)`` is TF's
shuffle buffer of ``buffer_size`` elements in every executor (the buffer fills with the
first ``buffer_size``; each element out is drawn uniformly from it and replaced by the next
one in; at the end it drains in random order; ``estimator.inputs.engine``); with
``reshuffle_each_iteration`` each pass draws a new order. Differences from ``tf.data``:

* ``shuffle`` after ``repeat`` of in-memory data shuffles within each pass (TF's buffer
  mixes the end of one pass with the start of the next). With ``seed=None`` the order is
  still reproducible: seeds derive from ``tf.set_random_seed``'s value (default 0) and the
  operation's position, as TF's with a graph-level seed.
* ``num_parallel_calls`` and ``prefetch`` are accepted and need no tuning: file pipelines
  run their maps in a pool of threads on blocks and read ahead in the background, and the
  Estimator prefetches batches; ``cache`` keeps nothing (sources are in memory or
  streamed).
* A ``map`` that draws random numbers runs element by element (each element its own
  draw, from NumPy).

Values and errors are TF's: ``as_numpy_iterator()`` (and iterating the dataset, as TF's
eager iteration) gives a scalar string as ``bytes``, a numeric scalar as a NumPy scalar and
everything else as NumPy arrays; an error while reading is raised as TF's class
(``tf.errors.DataLossError`` for a damaged TFRecord, ``NotFoundError`` for a missing file,
``InvalidArgumentError`` for a bad value, each also the native exception's class: see
``estimator.compat.v1.errors``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from estimator.compat._unsupported import unsupported
from estimator.compat.v1._base import tf_strings
from estimator.compat.v1.data import _columnar, _elements, _streaming
from estimator.compat.v1.data._iterator import Iterator as TFIterator
from estimator.compat.v1.data._pipeline import Op, Source, call_map
from estimator.compat.v1.errors import InvalidArgumentError, raising_tf_errors, tf_error
from estimator.inputs import apply_to_rows

__all__ = ["Dataset", "AUTOTUNE", "set_default_seed"]

AUTOTUNE = -1
_SEED = {"value": 0}


def set_default_seed(seed: int | None) -> None:
    """The base of the shuffle seeds of datasets without ``seed`` (``tf.set_random_seed``)."""
    _SEED["value"] = 0 if seed is None else int(seed)


def _to_numpy(tree: Any) -> Any:
    def leaf(x):
        if isinstance(x, np.ndarray):
            return x
        if isinstance(x, bytes | str):  # a tf.string scalar (NumPy's "S" would drop NULs)
            return tf_strings(x)
        array = np.asarray(x)
        if array.dtype == np.float64 and isinstance(x, (float, list)):
            array = array.astype(np.float32)  # Python floats are float32 tensors in TF
        if array.dtype == np.int64 and isinstance(x, (int, list)):
            array = array.astype(np.int32)
        return array

    return jax.tree.map(leaf, tree, is_leaf=lambda x: isinstance(x, list))


def _length(tree: Any) -> int:
    lengths = {int(np.shape(x)[0]) for x in jax.tree.leaves(tree)}
    if len(lengths) != 1:
        raise ValueError(
            "Dimensions of the components of from_tensor_slices must agree: got first "
            f"dimensions {sorted(lengths)}."
        )
    return lengths.pop()


def _pads_to_longest(padded_shapes) -> bool:
    """Whether ``padded_shapes`` (a structure of shapes, None for all) leaves a dimension
    to each batch's longest."""
    if padded_shapes is None:
        return True
    if hasattr(padded_shapes, "as_list"):  # a TensorShape
        padded_shapes = padded_shapes.as_list()
    if isinstance(padded_shapes, dict):
        return any(_pads_to_longest(s) for s in padded_shapes.values())
    if isinstance(padded_shapes, (list, tuple)):
        if all(d is None or isinstance(d, (int, np.integer)) for d in padded_shapes):
            return any(d is None or d == -1 for d in padded_shapes)  # one shape
        return any(_pads_to_longest(s) for s in padded_shapes)
    return False


class Dataset:
    """``tf.data.Dataset`` (TF 1.15/2.15 names and arguments), run on grain.

    Build it with the static constructors, chain operations, and return it from an
    ``input_fn``. See the module docstring for how it runs.
    """

    def __init__(self, source: Source, ops: tuple[Op, ...] = ()) -> None:
        self._source = source
        self._ops = ops
        self._plans: dict = {}  # streaming plans by default seed

    def _then(self, kind: str, *args) -> Dataset:
        return Dataset(self._source, self._ops + (Op(kind, args),))

    @property
    def varying_shapes(self) -> bool:
        """Whether its batches may differ beyond the batch dimension by design: a
        ``padded_batch`` that pads a dimension to each batch's longest (a ``None`` or ``-1``
        padded dimension, or no ``padded_shapes``), which TF's element spec declares as a
        ``None`` dimension. The Estimator then compares no batch with the first
        (``estimator.engine.input_shapes``); each new width compiles its own step."""
        return any(op.kind == "padded_batch" and _pads_to_longest(op.args[1]) for op in self._ops)

    # ----- sources ------------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors, name=None) -> Dataset:
        """Elements are the slices of ``tensors`` (a tree of arrays) along the first axis.

        Raises:
          ValueError: components whose first dimensions differ (TF's check).
        """
        tree = _to_numpy(tensors)
        n = _length(tree)
        return Dataset(Source("slices", (tree, n)))

    @staticmethod
    def from_tensors(tensors, name=None) -> Dataset:
        """One element: ``tensors``."""
        tree = jax.tree.map(lambda x: x[None], _to_numpy(tensors))
        return Dataset(Source("slices", (tree, 1)))

    @staticmethod
    def range(*args, output_type=np.int32, name=None) -> Dataset:  # noqa: A003 (TF's name)
        """``Dataset.range([start,] stop[, step])``."""
        values = np.arange(*args).astype(np.dtype(jax.dtypes.canonicalize_dtype(output_type)))
        return Dataset(Source("slices", (values, len(values))))

    @staticmethod
    def from_generator(
        generator: Callable,
        output_types=None,
        output_shapes=None,
        args=None,
        output_signature=None,
        name=None,
    ) -> Dataset:
        """Elements from ``generator(*args)``, called anew for each pass. Values are
        converted with NumPy (``output_types`` cast them when given)."""
        call_args = tuple(args or ())

        def make() -> Iterator:
            for element in generator(*call_args):
                yield _to_numpy(element)

        return Dataset(Source("generator", make))

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None, name=None) -> Dataset:
        """The files matching ``file_pattern`` (a pattern or a list), as bytes scalars,
        shuffled unless ``shuffle=False`` (TF's default is to shuffle; the order here is
        reproducible, from ``seed`` or ``tf.set_random_seed``'s value).

        Raises:
          tf.errors.InvalidArgumentError: "No files matched pattern: ..." (TF's class; also a
            ``ValueError``).
        """
        from estimator.io import tfrecord

        with raising_tf_errors(InvalidArgumentError):
            names = tfrecord.list_files(np.ravel(file_pattern).tolist())
        if shuffle is None or shuffle:
            rng = np.random.default_rng(_SEED["value"] if seed is None else int(seed))
            names = [names[i] for i in rng.permutation(len(names))]
        values = np.empty(len(names), dtype=object)
        values[:] = [n.encode() for n in names]
        return Dataset(Source("slices", (values, len(values))))

    @staticmethod
    def zip(datasets, name=None) -> Dataset:
        raise unsupported("tf.data.Dataset.zip")

    zip.unsupported_symbol = "tf.data.Dataset.zip"  # what the checker reports

    # ----- operations ---------------------------------------------------------------------
    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None) -> Dataset:
        """Applies ``map_func`` to each element (a tuple element is passed as arguments)."""
        return self._then("map", map_func)

    def interleave(
        self,
        map_func,
        cycle_length=None,
        block_length=None,
        num_parallel_calls=None,
        deterministic=None,
        name=None,
    ) -> Dataset:
        """Maps each element to a dataset and interleaves them: ``cycle_length`` at a time
        (default: the number of CPUs, as TF's AUTOTUNE), ``block_length`` elements (default
        1) from each in turn; a finished one is replaced by the next element's dataset."""
        auto = cycle_length in (None, AUTOTUNE)
        cycle = (os.cpu_count() or 1) if auto else int(cycle_length)
        block = 1 if block_length in (None, AUTOTUNE) else int(block_length)
        if cycle < 1 or block < 1:
            raise ValueError(
                f"cycle_length and block_length must be >= 1; got {cycle_length}, {block_length}."
            )
        outer = self

        def elements() -> Iterator:  # the elements as the pipeline holds them (_elements)
            pending = (call_map(map_func, e) for e in outer._iterate())
            active = [d._iterate() for d in itertools.islice(pending, cycle)]
            while active:
                still = []
                for inner in active:
                    for _ in range(block):
                        try:
                            yield next(inner)
                        except StopIteration:
                            replacement = next(pending, None)
                            if replacement is not None:
                                still.append(replacement._iterate())
                            break
                    else:
                        still.append(inner)
                active = still

        return Dataset(Source("generator", elements))

    def flat_map(self, map_func, name=None) -> Dataset:
        """Maps each element to a dataset and chains them in order."""
        return self.interleave(map_func, cycle_length=1)

    def filter(self, predicate, name=None) -> Dataset:
        """Keeps the elements for which ``predicate`` is true."""
        return self._then("filter", predicate)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None, name=None):
        """Shuffles the elements through TF's shuffle buffer of ``buffer_size`` elements
        (``estimator.inputs.engine`` says what each shuffle of this package means).

        Raises:
          tf.errors.InvalidArgumentError: ``buffer_size`` < 1 (AUTOTUNE is refused, as TF).
        """
        if int(buffer_size) < 1:
            raise _invalid(
                "buffer_size must be greater than zero or UNKNOWN_CARDINALITY.",
                f"Got {buffer_size}.",
            )
        reshuffle = True if reshuffle_each_iteration is None else bool(reshuffle_each_iteration)
        return self._then("shuffle", int(buffer_size), seed, reshuffle)

    def repeat(self, count=None, name=None) -> Dataset:
        """Repeats the dataset ``count`` times (None or -1: forever)."""
        count = None if count is None or int(count) < 0 else int(count)
        return self._then("repeat", count)

    def batch(
        self,
        batch_size,
        drop_remainder=False,
        num_parallel_calls=None,
        deterministic=None,
        name=None,
    ) -> Dataset:
        """Stacks ``batch_size`` consecutive elements (the last batch may be smaller unless
        ``drop_remainder``).

        Raises:
          tf.errors.InvalidArgumentError: ``batch_size`` < 1.
        """
        if int(batch_size) < 1:
            raise _invalid("Batch size must be greater than zero.", f"Got {batch_size}.")
        return self._then("batch", int(batch_size), bool(drop_remainder))

    def padded_batch(
        self,
        batch_size,
        padded_shapes=None,
        padding_values=None,
        drop_remainder=False,
        name=None,
    ) -> Dataset:
        """Stacks ``batch_size`` consecutive elements, each component padded at the end of
        every axis to ``padded_shapes`` (TF 2.15's ``Dataset.padded_batch``).

        Args:
          batch_size: elements per batch (the last one may be smaller unless
            ``drop_remainder``).
          padded_shapes: the element's structure of shapes (lists or tuples of ints); a
            ``None`` or ``-1`` dimension pads to the longest in the batch. None (the
            default) pads every dimension so.
          padding_values: the element's structure of scalars, or one scalar for all
            components (default ``0``, and ``b""`` for strings).
          drop_remainder: drop a last, smaller batch.

        Raises:
          tf.errors.InvalidArgumentError: ``batch_size`` < 1; when read, an element larger
            than its padded shape (TF's message).
        """
        if int(batch_size) < 1:
            raise _invalid("Batch size must be greater than zero.", f"Got {batch_size}.")
        return self._then(
            "padded_batch", int(batch_size), padded_shapes, padding_values, bool(drop_remainder)
        )

    def take(self, count, name=None) -> Dataset:
        """The first ``count`` elements (-1: all)."""
        return self._then("take", int(count))

    def skip(self, count, name=None) -> Dataset:
        """All but the first ``count`` elements (-1: none)."""
        return self._then("skip", int(count))

    def shard(self, num_shards, index, name=None) -> Dataset:
        """Every ``num_shards``-th element from ``index`` on.

        Raises:
          tf.errors.InvalidArgumentError: ``index`` outside ``[0, num_shards)``.
        """
        if not 0 <= int(index) < int(num_shards):
            raise _invalid(
                f"Index must be between 0 and {int(num_shards) - 1} (currently index = {index}).",
                "shard(num_shards, index) reads every num_shards-th element from index.",
            )
        return self._then("shard", int(num_shards), int(index))

    def prefetch(self, buffer_size, name=None) -> Dataset:
        """Accepted; the Estimator prefetches batches itself."""
        return self

    def cache(self, filename="", name=None) -> Dataset:
        """Accepted; sources are already in memory (see the module docstring)."""
        return self

    def with_options(self, options, name=None) -> Dataset:
        """Accepted and ignored."""
        return self

    def apply(self, transformation_func) -> Dataset:
        """``transformation_func(self)``."""
        return transformation_func(self)

    def make_one_shot_iterator(self):
        """TF 1's iterator; ``get_next()`` is what ``input_fn`` returns (``_iterator``)."""
        return TFIterator(self)

    def make_initializable_iterator(self, shared_name=None):
        """TF 1's iterator with a no-op ``initializer`` (``_iterator``)."""
        return TFIterator(self)

    # ----- running ------------------------------------------------------------------------
    def _streaming(self):
        """The streaming plan (kept: it decides how its maps run once, on a sample)."""
        seed = _SEED["value"]
        if seed not in self._plans:
            self._plans[seed] = _streaming.plan(self._source, self._ops, seed, _elements._stacked)
        return self._plans[seed]

    def _iterate(self) -> Iterator:
        """The elements as the executors hold them (0-d arrays for scalars)."""
        plan = _columnar.plan(self._source, self._ops, _SEED["value"]) or self._streaming()
        if plan is not None:
            return plan.iterator()
        return _elements.iterator(self._source, self._ops, _SEED["value"])

    def as_numpy_iterator(self) -> Iterator:
        """The elements as NumPy values, in order (what the Estimator reads): ``bytes`` for
        a scalar string, a NumPy scalar for a numeric scalar, NumPy arrays otherwise, as
        TF's.

        Raises:
          tf.errors.OpError: when an element cannot be read (see the module docstring).
        """
        with raising_tf_errors(InvalidArgumentError):  # a pipeline may open its files at once
            elements = self._iterate()
        return _TFElements(elements)

    def __iter__(self) -> Iterator:
        return self.as_numpy_iterator()

    # ----- what the Estimator may ask of an input (engine.input_pipeline.batch_pipeline) -----
    def map_rows(self, fn):
        """The same batches of ``fn`` applied once to all source rows, or None when the
        pipeline is not a columnar one without maps (a ``map`` must see the raw rows).

        ``fn`` is the Estimator's row-by-row host phase (feature columns): for
        ``from_tensor_slices(...).shuffle(...).repeat().batch(...)`` it runs once over the
        data instead of on every batch of every pass.
        """
        plan = _columnar.plan(self._source, self._ops, _SEED["value"])
        if plan is None:
            streaming = self._streaming()
            return None if streaming is None else _Planned(streaming, fn)
        if plan.maps or any(op.kind == "map" for op in plan.after):
            return None
        plan.tree = apply_to_rows(fn, plan.tree)
        return _Planned(plan)

    @property
    def last_batch_size(self) -> int | None:
        """The size of the last batch when it is known in advance and shorter than the
        others (a finite columnar pipeline), else None."""
        plan = _columnar.plan(self._source, self._ops, _SEED["value"])
        return None if plan is None else plan.last_batch_size()

    @property
    def batch_count(self) -> int | None:
        """The number of batches when known in advance (a finite columnar pipeline), else
        None."""
        plan = _columnar.plan(self._source, self._ops, _SEED["value"])
        return None if plan is None else plan.batch_count()

    def __repr__(self) -> str:
        ops = ".".join(op.kind for op in self._ops)
        return f"<Dataset {self._source.kind}{'.' + ops if ops else ''}>"


def _invalid(message: str, detail: str) -> InvalidArgumentError:
    """TF's ``InvalidArgumentError`` for a bad argument: TF's message, then ours."""
    return tf_error(ValueError(f"{message} {detail}"), InvalidArgumentError)


def _tf_value(value: Any) -> Any:
    """A value as TF's ``Tensor.numpy()`` gives it: strings as ``bytes`` (in an ``object``
    array unless a scalar), a numeric scalar as a NumPy scalar."""
    if isinstance(value, np.generic) and value.dtype.kind in "SUO":
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype.kind in "SU":
        value = tf_strings(value)
    if value.ndim == 0:
        return value.item() if value.dtype == object else value[()]
    return value


class _TFElements:
    """The iterator of ``as_numpy_iterator()``: TF's value types and error classes; the
    epoch marker (``ends_epoch``) of the iterator it wraps passes through."""

    def __init__(self, elements: Iterator) -> None:
        self._elements = elements

    def __iter__(self) -> _TFElements:
        return self

    def __next__(self) -> Any:
        try:
            element = next(self._elements)
        except StopIteration:
            raise
        except Exception as error:
            translated = tf_error(error, InvalidArgumentError)
            if translated is error:
                raise
            raise translated.with_traceback(error.__traceback__) from error
        if isinstance(element, np.ndarray):
            return _tf_value(element)
        return jax.tree.map(_tf_value, element)

    @property
    def ends_epoch(self) -> bool:
        return bool(getattr(self._elements, "ends_epoch", False))


class _Planned:
    """A columnar or streaming plan's batches (``Dataset.map_rows``; a streaming plan runs
    ``fn`` in its map's threads), iterable as a dataset is."""

    def __init__(self, plan, fn=None) -> None:
        self._plan = plan
        self._fn = fn
        self.last_batch_size = getattr(plan, "last_batch_size", lambda: None)()  # as Dataset's
        self.batch_count = getattr(plan, "batch_count", lambda: None)()

    def as_numpy_iterator(self) -> Iterator:
        with raising_tf_errors(InvalidArgumentError):  # a plan may open its files at once
            iterator = self._plan.iterator() if self._fn is None else self._plan.iterator(self._fn)
        return _TFElements(iterator)

    def __iter__(self) -> Iterator:
        return self.as_numpy_iterator()
