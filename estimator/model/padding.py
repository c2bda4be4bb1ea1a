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
(not with batch normalization, whose batch statistics would include the padding); their
hidden-layer summaries leave the padded rows out too, as ``estimator.summary.histogram``
does for values with one row per example.

What differs from an unpadded run: a hook fetching a per-example tensor of the last step
sees the padded rows too. ``predict()`` never pads: its outputs are per example.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from estimator.model.variables import current_frame

__all__ = ["MASK_KEY", "RowPadding", "masks_padding", "pad_rows", "row_mask"]

MASK_KEY = "__row_mask__"  # the mask's key in a padded batch's features, on the host only


def masks_padding(model_fn: Callable) -> Callable:
    """Marks ``model_fn`` as reducing over examples only through :func:`row_mask` (see the
    module docstring); returns ``model_fn`` itself."""
    model_fn.masks_padding = True
    return model_fn


def row_mask() -> jax.Array | None:
    """float32 ``[batch_size]``: 1 for the examples of the batch ``model_fn`` runs on, 0
    for padding; None when the batch is not padded (a ``model_fn`` not marked with
    :func:`masks_padding`, ``predict()``, serving, or outside ``model_fn``)."""
    frame = current_frame()
    return None if frame is None else frame.row_mask


class RowPadding:
    """The host side (internal): pads every batch shorter than the first one and adds the
    masks as ``features[MASK_KEY]``. Inputs whose features are not a dict of arrays that
    all have the first batch's leading dimension pass unpadded, without a mask."""

    def __init__(self) -> None:
        self._size: int | None = None  # the first batch's size; 0: padding is off
        self._masks: dict[int, np.ndarray] = {}

    def __call__(self, features, labels):
        """``(features, labels)`` of one batch, padded to the first batch's size."""
        if self._size is None:
            self._size = _batch_size(features, labels) or 0
        if not self._size:
            return features, labels
        n = _batch_size(features, labels)
        if n is None:
            return features, labels
        if n < self._size:
            features, labels = pad_rows((features, labels), self._size)
        mask = self._masks.get(n)
        if mask is None:
            size = max(n, self._size)
            mask = self._masks[n] = (np.arange(size) < n).astype(np.float32)
        return {**features, MASK_KEY: mask}, labels


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
