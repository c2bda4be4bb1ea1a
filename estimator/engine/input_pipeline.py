"""The host input pipeline: how the driver reads what ``input_fn`` returns, prepares the
batches (the host phase, canonical dtypes, padding) and places them on the devices ahead of
the step that needs them.

``input_fn`` may take any of ``mode``, ``params``, ``config`` (passed by name, as TF) and
return:

* ``(features, labels)`` or ``features`` alone — one batch. Training repeats it until
  ``steps``/``max_steps`` (TF's constant tensors); evaluation and prediction use it once.
* an iterator, generator or other iterable of such elements, one per batch — e.g. the
  result of ``estimator.inputs.numpy_input_fn``'s ``input_fn``;
* anything with ``as_numpy_iterator()``, such as a ``tf.data.Dataset`` (TensorFlow is
  never required).

``features`` is an array or a dict of arrays, ``labels`` an array, a dict of arrays or
None; every array is ``[batch_size, ...]``. The user-facing input functions are in
``estimator.inputs``.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from estimator.config import platform
from estimator.engine.input_shapes import ShapeCheck
from estimator.engine.row_blocks import BlockBatches
from estimator.fn_args import fn_args
from estimator.inputs import Batches
from estimator.inputs.dtypes import CANONICAL, canonical

__all__ = [
    "Prefetcher",
    "batch_pipeline",
    "call_input_fn",
    "host_batches",
    "iterate_batches",
    "placement",
]


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
    return _Elements(result)


class _Elements:
    """``(features, labels)`` of each element of an iterable, with its iterator's
    ``ends_epoch`` (the epoch protocol of ``estimator.handlers``) passed through."""

    def __init__(self, iterable) -> None:
        self._iterator = iter(iterable)

    def __iter__(self) -> _Elements:
        return self

    def __next__(self):
        return _split(next(self._iterator))

    @property
    def ends_epoch(self) -> bool:
        return bool(getattr(self._iterator, "ends_epoch", False))


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
      check: called with each batch :meth:`pop` hands to a step (a
        ``estimator.engine.input_shapes.ShapeCheck``), or None.
    """

    def __init__(
        self,
        batches: Iterator,
        prepare: Callable,
        depth: int = 1,
        warm: Callable | None = None,
        check: Callable | None = None,
    ) -> None:
        self._batches = batches
        self._prepare = prepare
        self._depth = depth
        self._warm = warm
        self.check = check
        self._ready: collections.deque = collections.deque()
        self._ends: collections.deque = collections.deque()  # each ready batch ends an epoch
        self._origins: collections.deque = collections.deque()  # each ready batch's block
        self.origin = None  # the block of the batch popped last (``row_blocks``), or None
        self._blocks = isinstance(batches, BlockBatches)
        self._last_ends = False  # the batch popped last ends an epoch (the input says)
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
        """The next batch; raises ``StopIteration`` at the end of the input, and what
        ``check`` raises for a batch that must not reach a step."""
        if not self._ready:
            self._prepare_one()
        if not self._ready:
            raise StopIteration
        self._last_ends = self._ends.popleft()
        self.origin = self._origins.popleft()
        batch = self._ready.popleft()
        if self.check is not None:
            self.check(batch)
        return batch

    def continue_from(self, other) -> None:
        """Checks batches as the continuation of ``other``'s (the next pass over an input
        in the same call: the first pass's first batch sets the shapes)."""
        if self.check is not None and getattr(other, "check", None) is not None:
            self.check.continue_from(other.check)

    def epoch_ended(self) -> bool:
        """Whether the batch :meth:`pop` returned last ends an epoch: the input marked it
        (``ends_epoch``), or no batch follows it (reading one ahead to know)."""
        if self._last_ends:
            return True
        if not self._ready:
            self._prepare_one()
        return not self._ready

    def _prepare_one(self) -> None:
        if self._exhausted:
            return
        try:
            batch = next(self._batches)
        except StopIteration:
            self._exhausted = True
            return
        self._ends.append(getattr(self._batches, "ends_epoch", False))
        self._origins.append(self._batches.origin if self._blocks else None)
        self._ready.append(self._prepare(batch))


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
    ``__input_source__``), that value's source of such results, else ``result``. A dataset
    or an iterator of batches (a generator) is no such value, and is not walked as a
    pytree (JAX warns that it would take an iterator for a leaf, and means to refuse it)."""
    if hasattr(result, "as_numpy_iterator") or isinstance(result, Iterator):
        return result
    for leaf in jax.tree.leaves(result, is_leaf=lambda x: hasattr(x, "__input_source__")):
        if hasattr(leaf, "__input_source__"):
            return leaf.__input_source__(result)
    return result


def _as_prepared(batch):
    return batch


def batch_pipeline(
    result,
    mode: str,
    transform,
    place: Callable,
    pad: Callable | None = None,
    input_checks: Callable | None = None,
) -> Prefetcher:
    """The prepared batches of what ``input_fn`` returned (internal): the host-side
    ``transform`` (feature columns, label vocabularies), canonical dtypes, ``input_checks``
    (the model's ``estimator.model.input_checks.InputChecks``: ids of table lookups), ``pad``
    (``estimator.model.padding.RowPadding``: a shorter batch padded to the first one's
    size, for a ``model_fn`` that masks padding; not in PREDICT mode), placement.

    A ``transform`` with ``row_wise`` set (the feature columns' ``InputTransform``) runs once
    over all rows of an in-memory input rather than on every batch of every epoch: an input
    with ``map_rows(fn)`` (``numpy_input_fn``'s :class:`Batches`, ``estimator.compat``'s
    ``tf.data`` pipelines of in-memory slices) returns the same batches of ``fn(rows)``, or
    None when it cannot. Such an input's batches (transformed or not) are prepared a block
    of batches at a time, and a fused call may be handed the block itself
    (``estimator.engine.row_blocks``).

    Yields ``(features, labels)``, or ``(features,)`` in PREDICT mode (labels dropped).
    Each batch is checked against the first as it is popped for a step
    (``estimator.engine.input_shapes.ShapeCheck``: only the batch dimension may vary): a
    ValueError names a feature or label whose shape changed, and the step.
    """
    predict = mode == "infer"
    result = _resolve_deferred(result)
    transform_given = transform

    def transformed(element, transform=transform):  # may run later (``Batches.warm``)
        features, labels = _split(element)
        return transform.apply(features, None if predict else labels)

    mapped = None
    if transform is not None and getattr(transform, "row_wise", False):
        map_rows = getattr(result, "map_rows", None)  # Batches, compat's tf.data
        mapped = map_rows(transformed) if map_rows is not None else None
    if mapped is not None:
        result, transform = mapped, None

    def checked(element, block=False):  # row by row: one batch, or a block of batches
        features, labels = _split(element)
        if transform is not None:
            features, labels = transform.apply(features, None if predict else labels)
        features = canonical(features, "features")
        if input_checks is not None and not block:  # a block's: BlockBatches'
            input_checks(features)
        if predict:
            return (features,)
        if labels is not None:
            labels = (
                labels
                if type(labels) is np.ndarray and labels.dtype in CANONICAL
                else canonical(labels, "labels")
            )
        return features, labels

    def finish(batch):  # batch by batch: padding, placement
        if pad is not None:
            batch = pad(*batch)
        return place(batch)

    if transform is None and isinstance(result, Batches):  # a block at a time
        masked = None if pad is None else pad.block
        batches = BlockBatches(result.blocks(), checked, finish, place, masked, input_checks)
        prepare = _as_prepared
    else:
        batches = iterate_batches(result, repeat_single=mode == "train")

        def prepare(batch):
            return finish(checked(batch))

    # Batches cut from fixed arrays (numpy_input_fn's) and a single batch cannot change
    # shape, and an input that declares its batches vary (compat's padded_batch to each
    # batch's longest, a None dimension in TF) may: no check. The features a transform
    # makes vary in width by design (feature columns pad multi-valued and sequence inputs
    # to each batch's longest), and its ops check the raw ones: only the labels are checked
    # after a transform.
    fixed = isinstance(result, Batches) or _is_single_element(result)
    varying = getattr(result, "varying_shapes", False) is True
    check = None if fixed or varying else ShapeCheck(mode, features=transform_given is None)
    prefetcher = Prefetcher(batches, prepare, warm=getattr(mapped, "warm", None), check=check)
    prefetcher.last_batch_size = getattr(result, "last_batch_size", None)
    prefetcher.batch_count = getattr(result, "batch_count", None)
    prefetcher.padding = pad
    return prefetcher
