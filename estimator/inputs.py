"""Input functions: ``numpy_input_fn`` and how the driver reads what ``input_fn`` returns.

``input_fn`` may take any of ``mode``, ``params``, ``config`` (passed by name, as TF) and
return:

* ``(features, labels)`` or ``features`` alone — one batch. Training repeats it until
  ``steps``/``max_steps`` (TF's constant tensors); evaluation and prediction use it once.
* an iterator, generator or other iterable of such elements, one per batch — e.g. the
  result of :func:`numpy_input_fn`'s ``input_fn``;
* anything with ``as_numpy_iterator()``, such as a ``tf.data.Dataset`` (TensorFlow is
  never required).

``features`` is an array or a dict of arrays, ``labels`` an array, a dict of arrays or
None; every array is ``[batch_size, ...]``.
"""

from __future__ import annotations

import collections
import inspect
import itertools
import numbers
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from estimator import platform
from estimator.inputs_tfrecord import tfrecord_input_fn as tfrecord_input_fn

__all__ = ["numpy_input_fn", "tfrecord_input_fn"]


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

    Examples are read in order (or in a new random order each epoch with ``shuffle``),
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
      shuffle: required, as in TF: True to shuffle (training), False to keep the order.
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
    if not isinstance(shuffle, bool):
        raise ValueError(
            "shuffle must be provided and explicitly set as boolean (it is recommended to set "
            f"it as True for training); got {shuffle}"
        )
    if batch_size <= 0:
        raise ValueError(f"batch_size must be > 0, given: {batch_size}")
    calls = itertools.count()

    def input_fn(config=None):
        data = _as_ordered_dict(x, "x")
        feature_keys = list(data)
        target_keys: Any = None
        if isinstance(y, dict):
            if not y:
                raise ValueError("y cannot be empty dict, use None instead.")
            ordered_y = _as_ordered_dict(y, "y")
            target_keys = list(ordered_y)
            duplicates = set(feature_keys) & set(target_keys)
            if duplicates:
                raise ValueError(
                    f"{len(duplicates)} duplicate keys are found in both x and y: {duplicates}"
                )
            data.update(ordered_y)
        elif y is not None:
            target_keys = "__target_key__"
            while target_keys in data:  # TF's _get_unique_target_key
                target_keys += "_n"
            data[target_keys] = np.asarray(y)
        lengths = {len(v) for v in data.values()}
        if len(lengths) != 1:
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
        (n,) = lengths
        seed = getattr(config, "random_seed", None)
        rng = np.random.default_rng(None if seed is None else [seed, next(calls)])

        def indices():
            for _ in itertools.count() if num_epochs is None else range(num_epochs):
                yield rng.permutation(n) if shuffle else np.arange(n)

        def batches(take):
            if not shuffle:  # in order: every batch within an epoch is a view, no copy
                yield from contiguous_batches(take)
                return
            pending = np.empty((0,), np.int64)
            for epoch in indices():
                pending = np.concatenate([pending, epoch])
                while len(pending) >= batch_size:
                    yield take(pending[:batch_size])
                    pending = pending[batch_size:]
            if len(pending):
                yield take(pending)

        def contiguous_batches(take):
            total = None if num_epochs is None else n * num_epochs
            start = 0
            while total is None or start < total:
                stop = start + batch_size if total is None else min(start + batch_size, total)
                lo = start % n
                if lo + (stop - start) <= n:
                    yield take(slice(lo, lo + stop - start))
                else:  # the batch spans an epoch boundary, as TF's queue
                    yield take(np.arange(start, stop) % n)
                start = stop

        features = (
            data["__direct_np_input__"]
            if isinstance(x, np.ndarray)
            else {k: data[k] for k in feature_keys}
        )
        if target_keys is None:
            rows = features
        elif isinstance(target_keys, str):
            rows = features, data[target_keys]
        else:
            rows = features, {k: data[k] for k in target_keys}
        tail = None if num_epochs is None else (n * num_epochs) % batch_size
        count = None if num_epochs is None else -(-n * num_epochs // batch_size)
        return Batches(batches, rows, last_batch_size=tail or None, batch_count=count)

    return input_fn


class Batches:
    """The batches of in-memory rows, with what is known of them in advance (internal).

    What ``numpy_input_fn``'s ``input_fn`` returns: an iterator of batches, each
    ``take(index)`` of ``rows`` for the indices (a slice or an index array along axis 0)
    that ``cut(take)`` yields them for. It also tells the Estimator

    * the size of its last batch before it is read (:attr:`last_batch_size`): the program
      for that shorter batch compiles in the background while the others run;
    * how many batches there are (:attr:`batch_count`): an evaluation or prediction over a
      few batches compiles for compile speed;
    * that its batches are rows of fixed arrays (:meth:`map_rows`): a host phase that works
      row by row (feature columns, label vocabularies) runs once over all rows instead of
      once per batch and epoch, and (:meth:`warm`) at a time of the Estimator's choosing,
      while the first batch's program compiles.

    Args:
      cut: ``cut(take) -> iterator of take(index)`` for each batch's indices.
      rows: a pytree of arrays ``[n, ...]``: the input's whole data.
      last_batch_size: the number of examples of the last batch when it is shorter than the
        others, else None.
      batch_count: the number of batches, None when unknown or endless.
      fn: a row-by-row function the batches are mapped through (see :meth:`map_rows`).
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
    ) -> None:
        self._cut = cut
        self._rows = rows
        self._fn = fn
        self._mapped = None  # fn(rows), once computed
        self._first = True  # the next batch taken is the first: fn of its own rows
        self._batches: Iterator | None = None
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
        if self._batches is not None or self._fn is not None:
            raise RuntimeError(
                "map_rows() after reading batches or mapping them: call it once, first."
            )
        mapped = Batches(self._cut, self._rows, fn=fn)
        mapped.last_batch_size, mapped.batch_count = self.last_batch_size, self.batch_count
        return mapped

    def warm(self) -> None:
        """Maps all rows now (see :meth:`map_rows`); nothing when done or not mapped."""
        if self._fn is not None and self._mapped is None:
            self._mapped = apply_to_rows(self._fn, self._rows, self.CHUNK)

    def _take(self, index):
        if self._fn is None:
            return jax.tree.map(lambda v: v[index], self._rows)
        if self._mapped is None and self._first:
            self._first = False  # the first batch: its own rows mapped, the rest not yet
            return self._fn(jax.tree.map(lambda v: v[index], self._rows))
        self.warm()
        return jax.tree.map(lambda v: v[index], self._mapped)

    def __iter__(self) -> Batches:
        return self

    def __next__(self):
        if self._batches is None:
            self._batches = self._cut(self._take)
        return next(self._batches)


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


def fn_args(fn) -> tuple[str, ...]:
    """Argument names of a function (or ``functools.partial``/callable), as TF's
    ``function_utils.fn_args``."""
    if hasattr(fn, "func") and hasattr(fn, "args"):  # functools.partial
        bound = len(fn.args)
        return tuple(a for a in fn_args(fn.func)[bound:] if a not in (fn.keywords or {}))
    params = inspect.signature(fn).parameters
    return tuple(
        name for name, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def call_input_fn(input_fn: Callable, mode: str, params: dict, config, input_context=None) -> Any:
    """Calls ``input_fn`` with the arguments it names among mode, params, config and
    input_context (an ``estimator.distribute.InputContext``: this process's shard)."""
    names = fn_args(input_fn)
    kwargs = {}
    if "input_context" in names:
        kwargs["input_context"] = input_context
    if "mode" in names:
        kwargs["mode"] = mode
    if "params" in names:
        kwargs["params"] = params
    if "config" in names:
        kwargs["config"] = config
    return input_fn(**kwargs)


def _is_single_element(result) -> bool:
    return isinstance(result, (dict, np.ndarray, jax.Array, tuple, list))


def _split(element) -> tuple[Any, Any]:
    if isinstance(element, (tuple, list)):
        if len(element) != 2:
            raise ValueError(
                "input_fn should return (features, labels) as a len 2 tuple; got a "
                f"{type(element).__name__} of length {len(element)}."
            )
        return element[0], element[1]
    return element, None


def _to_arrays(tree):
    # A Python list is one array (as tf.constant makes it one tensor), not a pytree node.
    return jax.tree.map(
        lambda v: v if isinstance(v, jax.Array) else np.asarray(v),
        tree,
        is_leaf=lambda v: isinstance(v, list),
    )


def iterate_batches(result, *, repeat_single: bool) -> Iterator[tuple[Any, Any]]:
    """``(features, labels)`` per batch from what ``input_fn`` returned (internal).

    Args:
      result: the value ``input_fn`` returned.
      repeat_single: repeat a single ``(features, labels)`` forever (training) instead of
        yielding it once.

    Raises:
      ValueError: for a tuple that is not ``(features, labels)``.
      TypeError: for something that is neither a batch nor an iterable of batches.
    """
    if hasattr(result, "as_numpy_iterator"):
        result = result.as_numpy_iterator()
    if _is_single_element(result):
        batch = _split(result)
        batch = (_to_arrays(batch[0]), _to_arrays(batch[1]))
        if repeat_single:
            return itertools.repeat(batch)
        return iter([batch])
    if not isinstance(result, collections.abc.Iterable):
        raise TypeError(
            "input_fn must return features, (features, labels), an iterable of those (one per "
            "batch) or a dataset with as_numpy_iterator(); got "
            f"{type(result).__name__}: {result!r}"
        )
    return map(_split, result)


class Prefetcher:
    """Reads batches ahead of the step that uses them (internal).

    ``pop()`` returns the next prepared batch (preparing one on the spot if none is ready);
    ``fill()`` prepares batches up to ``depth`` ahead. The driver calls ``fill()`` right
    after dispatching a step, so host-side work (``input_fn``'s iterator, the host phase of
    feature columns, the transfer to the device) overlaps the device's work on that step.

    Args:
      batches: iterator of ``(features, labels)``.
      prepare: host-side preparation of one batch (transform, checks, placement).
      depth: batches kept ready.
      warm: the input's up-front host work (``Batches.warm``), or None.
    """

    def __init__(
        self, batches: Iterator, prepare: Callable, depth: int = 1, warm: Callable | None = None
    ) -> None:
        self._batches = batches
        self._prepare = prepare
        self._depth = depth
        self._warm = warm
        self._ready: collections.deque = collections.deque()
        self._exhausted = False
        self.last_batch_size: int | None = None  # known in advance (``Batches``), or None
        self.batch_count: int | None = None  # likewise
        self.padding = None  # the RowPadding of a model_fn that masks padding, or None

    def fill(self) -> None:
        while not self._exhausted and len(self._ready) < self._depth:
            self._prepare_one()

    def warm(self) -> None:
        """Does the input's up-front host work now (a row-by-row host phase over all rows
        of an in-memory input), e.g. while the first batch's program compiles."""
        if self._warm is not None:
            self._warm()

    def peek(self):
        """The next batch without consuming it; raises ``StopIteration`` at the end."""
        if not self._ready:
            self._prepare_one()
        if not self._ready:
            raise StopIteration
        return self._ready[0]

    def pop(self):
        """The next batch; raises ``StopIteration`` at the end of the input."""
        if not self._ready:
            self._prepare_one()
        if not self._ready:
            raise StopIteration
        return self._ready.popleft()

    def _prepare_one(self) -> None:
        if self._exhausted:
            return
        try:
            batch = next(self._batches)
        except StopIteration:
            self._exhausted = True
            return
        self._ready.append(self._prepare(batch))


CANONICAL = frozenset(
    [
        np.dtype(d)
        for d in (
            "float32",
            "float16",
            "int32",
            "uint32",
            "int16",
            "uint16",
            "int8",
            "uint8",
            "bool",
        )
    ]
    + [np.dtype(jax.numpy.bfloat16)]
)  # dtypes a jitted step takes as they are (x64 off)


def canonical(tree, what: str):
    """NumPy arrays of JAX's canonical dtypes; strings are refused with a hint (internal)."""
    if isinstance(tree, dict) and all(
        type(v) is np.ndarray and v.dtype in CANONICAL for v in tree.values()
    ):
        return tree  # the common case, checked cheaply on every batch

    def one(path, value):
        if isinstance(value, jax.Array):
            return value
        value = np.asarray(value)
        if value.dtype.kind == "O":
            value = _from_objects(value, what + jax.tree_util.keystr(path))
        if value.dtype.kind in "USO":
            where = jax.tree_util.keystr(path) or ""
            raise TypeError(
                f"{what}{where} holds strings (dtype {value.dtype}), which cannot enter a "
                "jitted step. Map them to numbers on the host: pass "
                "input_transform=canned.feature_column.input_transform(feature_columns) "
                "to the Estimator, or convert them in input_fn."
            )
        dtype = jax.dtypes.canonicalize_dtype(value.dtype)
        if value.dtype == dtype:
            return value
        if value.dtype.kind in "iu":
            check_int_range(value, dtype, f"{what}{jax.tree_util.keystr(path)}")
        return value.astype(dtype)

    return jax.tree_util.tree_map_with_path(one, tree)


def _from_objects(value: np.ndarray, what: str) -> np.ndarray:
    """An object array (e.g. a pandas column) as numbers when every element is one; an
    array of strings is returned as is (refused by the caller with its hint)."""
    flat = value.ravel().tolist()
    numbers_ = [isinstance(v, numbers.Number) for v in flat]
    if all(numbers_):
        return np.asarray(flat).reshape(value.shape)
    if all(isinstance(v, str | bytes) for v in flat):
        return value
    index = numbers_.index(False)
    raise TypeError(
        f"{what} is an object array whose element {flat[index]!r} (of type "
        f"{type(flat[index]).__name__}, at flat index {index}) is not a number; expected "
        "numbers only (or strings only, for feature columns). Convert the column in "
        "input_fn, e.g. pandas' df[col].astype('float32'), after filling missing values."
    )


def check_int_range(value: np.ndarray, dtype, what: str) -> None:
    """Raises if an integer array holds a value that ``dtype`` cannot represent, instead
    of letting the conversion wrap it (int64 ``3_000_000_000`` becomes int32
    ``-1294967296``; TF keeps int64, so a port must not lose it silently).

    Integer width policy: JAX computes with 32-bit integers unless 64-bit mode is on, so
    int64/uint64 inputs and labels are narrowed to int32/uint32 on the way to the device
    when every value fits, and refused otherwise. Floats narrow to float32 freely.

    Raises:
      ValueError: naming ``what``, the first value out of range, what it would have
        become, and the fixes.
    """
    info = np.iinfo(dtype)
    if value.size == 0 or (info.min <= value.min() and value.max() <= info.max):
        return
    flat = value.ravel()
    index = int(np.flatnonzero((flat < info.min) | (flat > info.max))[0])
    bad = flat[index]
    raise ValueError(
        f"{what} holds the {value.dtype} value {bad} (at flat index {index}), which does not "
        f"fit {np.dtype(dtype).name}: JAX computes with 32-bit integers unless 64-bit mode "
        f"is on, and the value would silently become {bad.astype(dtype)}. Enable 64-bit "
        "integers with jax.config.update('jax_enable_x64', True) at the start of the "
        "program, or map the values into range on the host (e.g. ids through "
        "categorical_column_with_hash_bucket or a vocabulary)."
    )


def host_batches(mesh) -> bool:
    """Whether batches reach the step as host arrays (internal): on one CPU device, where
    the host buffer is the device buffer (see :func:`placement`)."""
    return mesh is None and platform.on_cpu()


def placement(mesh) -> Callable:
    """How a batch reaches the device(s) (internal).

    On one CPU device the host buffer is the device buffer: the batch is passed as is
    (an explicit transfer per batch costs more than the jitted call's own). On an
    accelerator the batch is transferred ahead of its step. With a ``mesh`` the batch is
    sharded over the mesh's first axis; a batch that does not split evenly (the last one)
    is replicated instead.
    """
    if host_batches(mesh):
        return lambda batch: batch
    if mesh is None:
        return jax.device_put
    axis = mesh.axis_names[0]
    n = mesh.shape[axis]
    sharded = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def place(batch):
        leaves = jax.tree.leaves(batch)
        even = all(np.ndim(x) > 0 and np.shape(x)[0] % n == 0 for x in leaves)
        return jax.device_put(batch, sharded if even else replicated)

    return place


def _resolve_deferred(result):
    """``result`` as an input: when it holds a value that stands for the elements of a
    dataset (``estimator.compat``'s ``iterator.get_next()``, a leaf with
    ``__input_source__``), that value's source of such results, else ``result``."""
    if hasattr(result, "as_numpy_iterator"):
        return result
    for leaf in jax.tree.leaves(result, is_leaf=lambda x: hasattr(x, "__input_source__")):
        if hasattr(leaf, "__input_source__"):
            return leaf.__input_source__(result)
    return result


def batch_pipeline(
    result, mode: str, transform, place: Callable, pad: Callable | None = None
) -> Prefetcher:
    """The prepared batches of what ``input_fn`` returned (internal): the host-side
    ``transform`` (feature columns, label vocabularies), canonical dtypes, ``pad``
    (``estimator.model.padding.RowPadding``: a shorter batch padded to the first one's
    size, for a ``model_fn`` that masks padding; not in PREDICT mode), placement.

    A ``transform`` with ``row_wise`` set (the feature columns' ``InputTransform``) runs once
    over all rows of an in-memory input rather than on every batch of every epoch: an input
    with ``map_rows(fn)`` (``numpy_input_fn``'s :class:`Batches`, ``estimator.compat``'s
    ``tf.data`` pipelines of in-memory slices) returns the same batches of ``fn(rows)``, or
    None when it cannot.

    Yields ``(features, labels)``, or ``(features,)`` in PREDICT mode (labels dropped).
    """
    predict = mode == "infer"
    result = _resolve_deferred(result)

    def transformed(element, transform=transform):  # may run later (``Batches.warm``)
        features, labels = _split(element)
        return transform.apply(features, None if predict else labels)

    mapped = None
    if transform is not None and getattr(transform, "row_wise", False):
        map_rows = getattr(result, "map_rows", None)  # Batches, compat's tf.data
        mapped = map_rows(transformed) if map_rows is not None else None
    if mapped is not None:
        result, transform = mapped, None
    batches = iterate_batches(result, repeat_single=mode == "train")

    def prepare(batch):
        features, labels = batch
        if transform is not None:
            features, labels = transform.apply(features, None if predict else labels)
        features = canonical(features, "features")
        if predict:
            return (place(features),)
        if labels is not None:
            labels = (
                labels
                if type(labels) is np.ndarray and labels.dtype in CANONICAL
                else canonical(labels, "labels")
            )
        if pad is not None:
            features, labels = pad(features, labels)
        return place((features, labels))

    prefetcher = Prefetcher(batches, prepare, warm=getattr(mapped, "warm", None))
    prefetcher.last_batch_size = getattr(result, "last_batch_size", None)
    prefetcher.batch_count = getattr(result, "batch_count", None)
    prefetcher.padding = pad
    return prefetcher
