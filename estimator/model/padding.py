"""Padded batches: a shorter batch runs through the full batches' compiled program.

A ``numpy_input_fn`` or ``tf.data`` input whose example count is not a multiple of the
batch size ends with a shorter batch. TF runs it in the same graph (dynamic shapes); under
JAX a new batch shape is a new program to trace and compile, about as long as the first
one, for a single step. A ``model_fn`` marked with :func:`masks_padding` promises to
reduce over examples only through the :func:`row_mask` of the batch it runs on. For such a
``model_fn`` the engine, in ``train()`` and ``evaluate()``:

* pads every batch shorter than the first one to the first one's size, by repeating its
  first example (:func:`pad_rows`): a padded example looks up only rows the real ones
  look up, so sparse updates touch the same table rows, and its values are finite;
* passes every batch's mask (``1.0`` for an example, ``0.0`` for padding) to ``model_fn``
  as :func:`row_mask` (never as a feature).

The canned heads (``canned.head``) fold the mask into the example weights and divide
``SUM_OVER_BATCH_SIZE`` losses by the real example count, so a padded step has the loss,
gradients, metrics and summaries of the shorter batch (up to float summation order), and
TF's per-batch semantics hold. The canned linear, DNN and wide & deep estimators are marked
unless something could see the padding: batch normalization's statistics, a head's user
``loss_fn``, or a function of the user's they apply on the device (``normalizer_fn``,
``inverse_link_fn``, ``activation_fn``) that is not :func:`elementwise`. Their hidden-layer
summaries leave the padded rows out too (``estimator.summary.histogram(...,
per_example=True)``).

What differs from an unpadded run: a hook fetching a per-example tensor of the last step
sees the padded rows too. ``predict()`` never pads: its outputs are per example.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import numpy as np

from estimator.model.variables import current_frame

__all__ = ["MASK_KEY", "RowPadding", "elementwise", "masks_padding", "pad_rows", "row_mask"]

MASK_KEY = "__row_mask__"  # the mask's key in a padded batch's features, on the host only


def masks_padding(model_fn: Callable) -> Callable:
    """``model_fn`` marked as reducing over examples only through :func:`row_mask`.

    Not in TF's Estimator, which runs a shorter last batch in the same graph (dynamic
    shapes); the same idea as Keras' ``PartialBatchPaddingHandler``, which pads partial
    batches to a static shape with a padding mask for TPUs. With the mark,
    ``train()`` and ``evaluate()`` pad a shorter batch to the first batch's size and run
    it in the same compiled program (see the module docstring); ``model_fn`` must then
    weight every sum or mean over examples by :func:`row_mask` (the canned heads do).

    Args:
      model_fn: a ``model_fn`` (a function, method or callable); left unchanged.

    Returns:
      A new function with ``model_fn``'s signature that calls it, marked
      ``masks_padding = True``.
    """

    @functools.wraps(model_fn)
    def marked(*args, **kwargs):
        return model_fn(*args, **kwargs)

    marked.masks_padding = True
    return marked


#: Primitives that compute each element of their output from the same element of their
#: inputs (and constants): a function made of them works example by example.
_ELEMENTWISE = frozenset(
    "abs acos acosh add and asin asinh atan atan2 atanh broadcast_in_dim cbrt ceil clamp "
    "convert_element_type copy cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor "
    "ge gt imag integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg "
    "nextafter not or pow real reduce_precision rem round rsqrt select_n sign sin sinh sqrt "
    "square stop_gradient sub tan tanh xor".split()
)


def elementwise(fn: Callable, shape: tuple[int, ...]) -> bool:
    """Whether ``fn`` (of a float32 array of ``shape``, traced) is made of elementwise
    operations only, so that padded examples cannot change the real ones' values. False
    for anything else (a reduction, a reshape, a gather), or when ``fn`` cannot be traced:
    then the batch is not padded, which is always correct."""
    try:
        closed = jax.make_jaxpr(fn)(jax.ShapeDtypeStruct(shape, np.float32))
    except Exception:  # noqa: BLE001 - any failure: not provably elementwise
        return False
    return _elementwise_jaxpr(closed.jaxpr)


def _elementwise_jaxpr(jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        inner = [
            getattr(v, "jaxpr", v)
            for v in eqn.params.values()
            if hasattr(v, "eqns") or (hasattr(v, "jaxpr") and hasattr(v.jaxpr, "eqns"))
        ]
        if inner:
            if not all(_elementwise_jaxpr(j) for j in inner):
                return False
        elif eqn.primitive.name not in _ELEMENTWISE:
            return False
    return True


def row_mask() -> jax.Array | None:
    """The row mask of the batch ``model_fn`` runs on (see :func:`masks_padding`).

    Returns:
      float32 ``[batch_size]`` (traced): 1.0 for an example, 0.0 for a padding row; None
      when the batch is not padded (a ``model_fn`` not marked with :func:`masks_padding`,
      ``predict()``, serving, or outside ``model_fn``). Never raises.
    """
    frame = current_frame()
    return None if frame is None else frame.row_mask


class RowPadding:
    """The host side (internal): pads every batch shorter than the first one and adds the
    masks as ``features[MASK_KEY]``. Inputs whose features are not a dict of arrays that
    all have the first batch's leading dimension pass unpadded, without a mask."""

    def __init__(self) -> None:
        self._size: int | None = None  # the first batch's size; 0: padding is off
        self._masks: dict[int, np.ndarray] = {}
        self._block_masks: dict[int, np.ndarray] = {}  # by count: full batches' masks

    @property
    def active(self) -> bool:
        """Whether shorter batches are padded (known from the first batch on)."""
        return bool(self._size)

    def __call__(self, features, labels):
        """``(features, labels)`` of one batch, padded to the first batch's size."""
        if self._size is None:
            self._size = _batch_size(features, labels) or 0
        if not self._size:
            return features, labels
        if _full(features, labels, self._size):  # the common case, checked cheaply
            return {**features, MASK_KEY: self._mask(self._size)}, labels
        n = _batch_size(features, labels)
        if n is None:
            return features, labels
        if n < self._size:
            features, labels = pad_rows((features, labels), self._size)
        return {**features, MASK_KEY: self._mask(n)}, labels

    def block(self, features, labels, count: int):
        """``(features, labels)`` of ``count`` full batches one after the other (a block of
        an in-memory input, ``estimator.engine.row_blocks``) with every batch's mask, as
        :meth:`__call__` gives each of them; None where it would not pad them alike (not a
        dict of host arrays of ``count`` batches' rows), to pad them one by one."""
        if self._size is None:
            self._size = (_batch_size(features, labels) or 0) // count
        if not self._size:
            return features, labels
        if not _full(features, labels, self._size * count):
            return None
        mask = self._block_masks.get(count)
        if mask is None:
            mask = self._block_masks[count] = np.tile(self._mask(self._size), count)
        return {**features, MASK_KEY: mask}, labels

    def _mask(self, n: int) -> np.ndarray:
        mask = self._masks.get(n)
        if mask is None:
            size = max(n, self._size)
            mask = self._masks[n] = (np.arange(size) < n).astype(np.float32)
        return mask


def _full(features, labels, size: int) -> bool:
    """A dict of host arrays and an array (or no) label, all of ``size`` rows."""
    rows = (size,)
    return (
        type(features) is dict
        and MASK_KEY not in features
        and all(type(v) is np.ndarray and v.shape[:1] == rows for v in features.values())
        and (labels is None or (type(labels) is np.ndarray and labels.shape[:1] == rows))
    )


def _batch_size(features, labels) -> int | None:
    if not isinstance(features, dict) or MASK_KEY in features:
        return None
    shapes = {np.shape(x)[:1] for x in jax.tree.leaves((features, labels))}
    if len(shapes) != 1 or shapes == {()}:
        return None
    (n,) = shapes.pop()
    return n or None


def pad_rows(tree, size: int):
    """Every leaf of ``tree`` (host arrays of one leading dimension ``n <= size``) with
    its first row repeated to ``size`` rows."""

    def pad(x):
        x = np.asarray(x)
        return np.concatenate([x, np.repeat(x[:1], size - x.shape[0], axis=0)])

    return jax.tree.map(pad, tree)
