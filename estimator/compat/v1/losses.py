"""``tf.losses`` (TF 1.15's ``tf.compat.v1.losses``): TF's losses, weights and reductions.

Every loss is computed in float32, multiplied by ``weights`` (a scalar or an array of the
losses' rank whose dimensions are 1 or equal to the losses'), then reduced as
``reduction`` says (TF's ``compute_weighted_loss``):

* ``NONE``: the weighted losses, unreduced;
* ``SUM``: their sum;
* ``MEAN``: the sum divided by the sum of the (broadcast) weights;
* ``SUM_OVER_BATCH_SIZE``: the sum divided by the number of loss elements;
* ``SUM_BY_NONZERO_WEIGHTS`` (the default; alias ``SUM_OVER_NONZERO_WEIGHTS``): the sum
  divided by the number of elements whose weight is not 0.

A division by zero gives 0 (TF's ``_safe_mean``). Each loss is also added to the
``LOSSES`` collection of the ``model_fn`` run, so :func:`get_total_loss` sums them with the
regularization losses, as in TF.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import nn as _nn
from estimator.compat.v1._graph import GraphKeys, add_to_collection, collection
from estimator.model.variables import current_frame

__all__ = [
    "Reduction",
    "compute_weighted_loss",
    "absolute_difference",
    "cosine_distance",
    "hinge_loss",
    "huber_loss",
    "log_loss",
    "mean_pairwise_squared_error",
    "mean_squared_error",
    "sigmoid_cross_entropy",
    "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
    "add_loss",
    "get_losses",
    "get_regularization_loss",
    "get_regularization_losses",
    "get_total_loss",
]

__getattr__ = module_getattr("tf.losses", __name__)


class Reduction:
    """TF 1's loss reductions (``tf.losses.Reduction``)."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls) -> tuple[str, ...]:
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key: str) -> None:
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}.")


def _safe_mean(total, count):
    count = jnp.asarray(count, jnp.float32)
    return jnp.where(count > 0, total / jnp.where(count > 0, count, 1.0), 0.0)


def _broadcast_weights(weights, losses):
    if weights.ndim == 0:
        return jnp.broadcast_to(weights, losses.shape)
    if weights.ndim != losses.ndim or any(
        w not in (1, v) for w, v in zip(weights.shape, losses.shape, strict=True)
    ):
        raise ValueError(
            "weights can not be broadcast to values. "
            f"values.rank={losses.ndim}. weights.rank={weights.ndim}. "
            f"values.shape={tuple(losses.shape)}. weights.shape={tuple(weights.shape)}."
        )
    return jnp.broadcast_to(weights, losses.shape)


def compute_weighted_loss(
    losses,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Weights and reduces ``losses`` (``tf.losses.compute_weighted_loss``).

    Args:
      losses: ``[batch_size, d1, ..., dN]``.
      weights: a scalar or an array of the losses' rank (dimensions 1 or equal).
      scope: ignored (no name scopes).
      loss_collection: the collection the result is added to (None: none).
      reduction: a :class:`Reduction`.

    Returns:
      A float32 scalar, or the weighted losses for ``Reduction.NONE`` (in the losses'
      dtype, as TF casts back).

    Raises:
      ValueError: an unknown reduction; weights that do not broadcast (TF's message).
    """
    del scope
    Reduction.validate(reduction)
    losses = jnp.asarray(losses)
    input_dtype = losses.dtype
    losses = losses.astype(jnp.float32)
    weights = jnp.asarray(weights, jnp.float32)
    full_weights = _broadcast_weights(weights, losses)
    weighted = losses * weights
    if reduction == Reduction.NONE:
        loss = weighted
    else:
        loss = jnp.sum(weighted)
        if reduction == Reduction.MEAN:
            loss = _safe_mean(loss, jnp.sum(full_weights))
        elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
            loss = _safe_mean(loss, jnp.sum(full_weights != 0))
        elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
            loss = _safe_mean(loss, losses.size)
    loss = loss.astype(input_dtype)
    if loss_collection is not None:
        add_to_collection(loss_collection, loss)
    return loss


def _pair(labels, predictions, what=("labels", "predictions")):
    if labels is None:
        raise ValueError(f"Argument `{what[0]}` must not be None.")
    if predictions is None:
        raise ValueError(f"Argument `{what[1]}` must not be None.")
    predictions = jnp.asarray(predictions, jnp.float32)
    labels = jnp.asarray(labels, jnp.float32)
    if predictions.shape != labels.shape:
        raise ValueError(
            f"Shapes {tuple(predictions.shape)} and {tuple(labels.shape)} are incompatible"
        )
    return labels, predictions


def absolute_difference(
    labels,
    predictions,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """``|predictions - labels|``, weighted and reduced."""
    labels, predictions = _pair(labels, predictions)
    losses = jnp.abs(predictions - labels)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def cosine_distance(
    labels,
    predictions,
    axis=None,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
    dim=None,
):
    """``1 - Σ_axis labels · predictions`` (inputs already unit-normalised, as TF)."""
    axis = dim if axis is None else axis
    if axis is None:
        raise ValueError("You must specify argument `axis`.")
    labels, predictions = _pair(labels, predictions)
    losses = 1 - jnp.sum(predictions * labels, axis=(axis,), keepdims=True)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def hinge_loss(
    labels,
    logits,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """``relu(1 - (2 labels - 1) logits)`` for 0/1 labels."""
    labels, logits = _pair(labels, logits, ("labels", "logits"))
    losses = jax.nn.relu(1 - (2 * labels - 1) * logits)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def huber_loss(
    labels,
    predictions,
    weights=1.0,
    delta=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Huber loss: ``0.5 q² + delta (|e| - q)`` with ``q = min(|e|, delta)``."""
    labels, predictions = _pair(labels, predictions)
    abs_error = jnp.abs(predictions - labels)
    quadratic = jnp.minimum(abs_error, delta)
    losses = 0.5 * quadratic * quadratic + delta * (abs_error - quadratic)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def log_loss(
    labels,
    predictions,
    weights=1.0,
    epsilon=1e-7,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """``-z log(p + eps) - (1 - z) log(1 - p + eps)``."""
    labels, predictions = _pair(labels, predictions)
    losses = -labels * jnp.log(predictions + epsilon) - (1 - labels) * jnp.log(
        1 - predictions + epsilon
    )
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def mean_pairwise_squared_error(
    labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES
):
    """TF's pairwise squared error, per example over its present elements, weighted by
    example and summed."""
    del scope
    labels, predictions = _pair(labels, predictions)
    weights = jnp.asarray(weights, jnp.float32)
    diffs = predictions - labels
    axes = tuple(range(1, diffs.ndim))
    present = _broadcast_weights((weights != 0).astype(jnp.float32), diffs)
    n = jnp.sum(present, axis=axes, keepdims=True)

    def div_no_nan(x, y):
        return jnp.where(y == 0, 0.0, x / jnp.where(y == 0, 1.0, y))

    term1 = 2.0 * div_no_nan(
        jnp.sum(jnp.square(diffs), axis=axes, keepdims=True), jnp.maximum(n - 1, 0)
    )
    term2 = 2.0 * div_no_nan(
        jnp.square(jnp.sum(diffs, axis=axes, keepdims=True)), jnp.maximum(n * (n - 1), 0)
    )
    loss = jnp.sum((term1 - term2) * weights)
    loss = jnp.where(jnp.sum(n) > 0, loss, 0.0)
    if loss_collection is not None:
        add_to_collection(loss_collection, loss)
    return loss


def mean_squared_error(
    labels,
    predictions,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """``(predictions - labels)²``, weighted and reduced (mean over non-zero weights by
    default)."""
    labels, predictions = _pair(labels, predictions)
    losses = jnp.square(predictions - labels)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def sigmoid_cross_entropy(
    multi_class_labels,
    logits,
    weights=1.0,
    label_smoothing=0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Sigmoid cross entropy of 0/1 labels; smoothing gives ``z (1 - s) + s / 2``."""
    if multi_class_labels is None:
        raise ValueError("Argument `multi_class_labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    logits = jnp.asarray(logits)
    labels = jnp.asarray(multi_class_labels, logits.dtype)
    if label_smoothing > 0:
        labels = labels * (1 - label_smoothing) + 0.5 * label_smoothing
    losses = _nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def softmax_cross_entropy(
    onehot_labels,
    logits,
    weights=1.0,
    label_smoothing=0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Softmax cross entropy of one-hot labels ``[batch, classes]``; smoothing gives
    ``z (1 - s) + s / classes``."""
    if onehot_labels is None:
        raise ValueError("Argument `onehot_labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    logits = jnp.asarray(logits)
    labels = jnp.asarray(onehot_labels, logits.dtype)
    if label_smoothing > 0:
        labels = labels * (1.0 - label_smoothing) + label_smoothing / labels.shape[-1]
    losses = _nn.softmax_cross_entropy_with_logits_v2(
        labels=jax.lax.stop_gradient(labels), logits=logits
    )
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def sparse_softmax_cross_entropy(
    labels,
    logits,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Softmax cross entropy of integer labels ``[batch]`` (or ``[batch, 1]``, squeezed as
    TF's ``remove_squeezable_dimensions``) against ``logits [batch, classes]``."""
    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    logits = jnp.asarray(logits)
    labels = jnp.asarray(labels)
    if labels.ndim == logits.ndim and labels.shape[-1] == 1:
        labels = labels[..., 0]
    weights = jnp.asarray(weights)
    if weights.ndim and weights.ndim == labels.ndim + 1:
        weights = weights[..., 0]
    losses = _nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def add_loss(loss, loss_collection=GraphKeys.LOSSES) -> None:
    """``tf.losses.add_loss``: adds ``loss`` to the collection of this ``model_fn`` run."""
    if loss_collection is not None:
        add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES) -> list:
    """``tf.losses.get_losses``: the losses added in this ``model_fn`` run."""
    del scope
    return collection(loss_collection)


def get_regularization_losses(scope=None) -> list:
    """``tf.losses.get_regularization_losses``: the values of the regularizers given to
    variables and layers in this ``model_fn`` run (``scope`` is not recorded: all of
    them)."""
    del scope
    return collection(GraphKeys.REGULARIZATION_LOSSES)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """``tf.losses.get_regularization_loss``: their sum (0.0 when there are none)."""
    losses = get_regularization_losses(scope)
    if not losses:
        return jnp.zeros((), jnp.float32)
    return sum(jnp.asarray(r, jnp.float32) for r in losses)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """``tf.losses.get_total_loss``: the collected losses plus (by default) the
    regularization losses.

    Raises:
      ValueError: when nothing was collected (TF's message).
    """
    del name
    losses = get_losses(scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope)
    if not losses:
        if current_frame() is None:
            raise ValueError("No losses found: tf.losses.get_total_loss() works inside model_fn.")
        raise ValueError("No losses found.")
    return sum(jnp.asarray(v, jnp.float32) for v in losses)
