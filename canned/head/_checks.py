"""Checks and loss helpers every head shares (TF 2.15's ``base_head`` functions).

Shapes are static under ``jax.jit``, so every shape check raises at trace time with TF's
eager-mode message; values (label ranges) are checked only on concrete arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from canned.head._labels import (
    LABEL_NONE_ERR_MSG,
    LABEL_SHAPE_ERR_MSG,
    MISMATCHED_LABEL_DIM_ERR_MSG,
    check_host_label_range,
)
from canned.head.keys import Reduction
from estimator.fn_args import fn_args
from estimator.model import padding

VALIDATION_ERROR_MSG = "{} should be a list or a tuple. Given type: {}."
_LOSS_FN_ARGS = ("labels", "logits", "features", "loss_reduction")


# ----------------------------------------------------------------------- construction


def validate_loss_reduction(loss_reduction: Any) -> None:
    """TF's ``validate_loss_reduction``: any ``Reduction`` but ``NONE``."""
    if loss_reduction not in Reduction.all() or loss_reduction == Reduction.NONE:
        raise ValueError(
            f"Invalid loss_reduction: {loss_reduction}. See `canned.head.Reduction` for valid "
            "options: 'sum_over_batch_size' (the default), 'sum', or 'auto' (reduced as "
            "'sum_over_batch_size'); 'none' is not allowed, as a head's loss is a scalar."
        )


def validate_loss_fn_args(loss_fn: Callable) -> None:
    """TF's ``validate_loss_fn_args``: ``labels`` and ``logits`` required, nothing unknown."""
    args = fn_args(loss_fn)
    for required in ("labels", "logits"):
        if required not in args:
            raise ValueError(f"loss_fn must contain argument: {required}. Given arguments: {args}")
    invalid = [a for a in args if a not in _LOSS_FN_ARGS]
    if invalid:
        raise ValueError(
            f"loss_fn has unexpected args: {invalid}. Allowed: labels, logits (required), "
            "features, loss_reduction."
        )


def validate_weight_column(weight_column: Any) -> None:
    if weight_column is not None and not isinstance(weight_column, str):
        raise TypeError(
            "Weight column must be a string: the key of the feature holding the example "
            f"weights. Given type: {type(weight_column)}. For a numeric column "
            "`numeric_column('w')`, pass its key 'w'."
        )


def validate_label_vocabulary(label_vocabulary: Any) -> tuple[str, ...] | None:
    """``None`` or the vocabulary as a tuple of distinct ``str`` (TF's type check, then ours).

    The length is checked by each head (TF checks it for the multi-class head only).
    """
    if label_vocabulary is None:
        return None
    if not isinstance(label_vocabulary, list | tuple):
        raise ValueError(
            f"label_vocabulary should be a list or a tuple. Given type: {type(label_vocabulary)}"
        )
    vocabulary = tuple(v.decode() if isinstance(v, bytes) else v for v in label_vocabulary)
    bad = [v for v in vocabulary if not isinstance(v, str)]
    if bad:
        raise ValueError(
            f"label_vocabulary must hold strings; got {bad!r} in {list(label_vocabulary)!r}. "
            "Without a vocabulary, labels are class ids 0 .. n_classes - 1."
        )
    if len(set(vocabulary)) != len(vocabulary):
        dups = sorted({v for v in vocabulary if vocabulary.count(v) > 1})
        raise ValueError(
            f"label_vocabulary has duplicate entries {dups}: each class needs one distinct "
            f"name. Given: {list(vocabulary)!r}."
        )
    return vocabulary


# ------------------------------------------------------------------ device-side checks


def _is_traced(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def _check_rank_at_least_2(name: str, value: jax.Array) -> None:
    if value.ndim < 2:
        raise ValueError(
            f"{name} must have rank at least 2.  Received rank {value.ndim}, shape "
            f"{tuple(value.shape)}"
        )


def check_logits_final_dim(logits: ArrayLike, expected_logits_dimension: int) -> jax.Array:
    """float32 logits of shape ``[D0, ... DN, logits_dimension]`` (TF's checks, eager form).

    Raises:
      ValueError: rank below 2, or a last dimension other than ``expected_logits_dimension``.
    """
    logits = jnp.asarray(logits, jnp.float32)
    _check_rank_at_least_2("logits", logits)
    if logits.shape[-1] != expected_logits_dimension:
        raise ValueError(
            "logits shape must be [D0, D1, ... DN, logits_dimension], got "
            f"{tuple(logits.shape)}. This head's logits_dimension is "
            f"{expected_logits_dimension}: give the last layer that many units."
        )
    return logits


def _reject_strings(labels: Any) -> None:
    if not isinstance(labels, jax.Array):
        kind = np.asarray(labels).dtype.kind
        if kind in "USO":
            raise ValueError(
                "labels reached the head as strings (dtype "
                f"{np.asarray(labels).dtype}); XLA has no strings. Map them to class ids on the "
                "host first: labels = head.prepare_labels(labels) (canned estimators do this "
                "in their input transform)."
            )


def check_dense_labels_match_logits_and_reshape(
    labels: Any, logits: jax.Array, expected_labels_dimension: int
) -> jax.Array:
    """Labels of shape ``logits.shape[:-1] + (expected_labels_dimension,)``.

    Labels one rank below the logits gain a trailing dimension (``[B]`` -> ``[B, 1]``), as
    TF's ``check_dense_labels_match_logits_and_reshape``.

    Raises:
      ValueError: ``labels`` is None, strings, or of the wrong shape (TF's messages).
    """
    if labels is None:
        raise ValueError(LABEL_NONE_ERR_MSG)
    if isinstance(labels, Mapping):
        raise ValueError(
            f"labels must be an array, got a dict with keys {sorted(labels)}. A single head "
            "takes one label array; pick it in input_fn or model_fn."
        )
    _reject_strings(labels)
    labels = jnp.asarray(labels)
    if labels.ndim == logits.ndim - 1:
        labels = jnp.expand_dims(labels, -1)
    _check_rank_at_least_2("labels", labels)
    if labels.shape[-1] != expected_labels_dimension:
        raise ValueError(
            MISMATCHED_LABEL_DIM_ERR_MSG.format(expected_labels_dimension, labels.shape[-1])
        )
    expected = tuple(logits.shape[:-1]) + (expected_labels_dimension,)
    if tuple(labels.shape) != expected:
        raise ValueError(
            f"{LABEL_SHAPE_ERR_MSG.format(expected_labels_dimension)}, expected_labels_shape: "
            f"{expected}. labels_shape: {tuple(labels.shape)}."
        )
    return labels


def check_label_range(labels: jax.Array, n_classes: int) -> jax.Array:
    """TF's ``check_label_range`` when ``labels`` is concrete; traced labels pass unchecked."""
    if not _is_traced(labels):
        check_host_label_range(np.asarray(labels), n_classes)
    return labels


def get_weights_and_check_match_logits(
    features: Mapping[str, Any] | None,
    weight_column: str | None,
    logits: jax.Array,
    allow_per_logit_weights: bool = False,
) -> jax.Array | None:
    """float32 weights ``[D0, ... DN, 1]`` (or the logits' shape when allowed); None if unset.

    Weights one rank below the logits (``[B]``) gain a trailing dimension, as TF. In a
    padded batch (``estimator.model.padding``) they are multiplied by its row mask, which
    is also the weights (``[B, 1]``) when there is no weight column.

    Raises:
      ValueError: the feature is missing, not numeric, or of the wrong shape (TF's messages).
    """
    weights = _weight_column(features, weight_column, logits, allow_per_logit_weights)
    mask = padding_mask(logits)
    if mask is None:
        return weights
    return mask if weights is None else weights * mask


def padding_mask(logits: jax.Array) -> jax.Array | None:
    """The row mask of a padded batch shaped to broadcast against ``logits``
    (``[B, 1, ...]``), or None when the batch is not padded.

    Raises:
      ValueError: logits without one row per example of the padded batch.
    """
    mask = padding.row_mask()
    if mask is None:
        return None
    if logits.shape[:1] != mask.shape:
        raise ValueError(
            f"The batch is padded to {mask.shape[0]} examples, but the logits have shape "
            f"{tuple(logits.shape)}: a model_fn marked masks_padding must give one row of "
            "logits per example."
        )
    return mask.reshape(mask.shape + (1,) * (logits.ndim - 1))


def _weight_column(features, weight_column, logits, allow_per_logit_weights) -> jax.Array | None:
    if weight_column is None:
        return None
    if features is None or weight_column not in features:
        raise ValueError(f"Feature {weight_column} is not in features dictionary.")
    raw = features[weight_column]
    _dtype = raw.dtype if hasattr(raw, "dtype") else np.asarray(raw).dtype
    if np.dtype(_dtype).kind not in "biuf":
        raise ValueError(f"Weight column should be castable to float. Given dtype: {_dtype}")
    weights = jnp.asarray(raw, jnp.float32)
    if allow_per_logit_weights:
        err_msg = (
            "weights shape must be [D0, D1, ... DN], [D0, D1, ... DN, 1] or "
            "[D0, D1, ... DN, logits_dimension]"
        )
    else:
        err_msg = "weights shape must be [D0, D1, ... DN] or [D0, D1, ... DN, 1]"
    logits_shape = tuple(logits.shape)
    detail = f"{err_msg}, logits_shape: {logits_shape}. weights_shape: {tuple(weights.shape)}."
    if weights.ndim == logits.ndim - 1:
        if tuple(weights.shape) != logits_shape[:-1]:
            raise ValueError(detail)
        return jnp.expand_dims(weights, -1)
    supported = logits_shape[:-1] + (1,)
    if tuple(weights.shape) != supported and not (
        allow_per_logit_weights and tuple(weights.shape) == logits_shape
    ):
        raise ValueError(detail)
    return weights


def call_loss_fn(
    loss_fn: Callable,
    labels: jax.Array,
    logits: jax.Array,
    features: Mapping[str, Any] | None,
    loss_reduction: str,
    expected_loss_dim: int = 1,
) -> jax.Array:
    """Calls a custom ``loss_fn`` and checks it returned ``[D0, ... DN, expected_loss_dim]``.

    ``features`` and ``loss_reduction`` are passed when ``loss_fn`` names them.
    """
    args = fn_args(loss_fn)
    kwargs = {}
    if "features" in args:
        kwargs["features"] = features
    if "loss_reduction" in args:
        kwargs["loss_reduction"] = loss_reduction
    loss = jnp.asarray(loss_fn(labels=labels, logits=logits, **kwargs), jnp.float32)
    expected = tuple(logits.shape[:-1]) + (expected_loss_dim,)
    if tuple(loss.shape) != expected:
        raise ValueError(
            f"loss_fn must return Tensor of shape [D0, D1, ... DN, {expected_loss_dim}]. "
            f"logits_shape: {tuple(logits.shape)} loss_shape: {tuple(loss.shape)}. Return the "
            f"unreduced per-example loss of shape {expected}."
        )
    return loss


def reduce_weighted_loss(
    unweighted_loss: jax.Array, weights: jax.Array | None, reduction: str
) -> jax.Array:
    """Keras' ``compute_weighted_loss``: ``Σ w·l``, divided by ``l.size`` unless ``SUM``.

    In a padded batch (``estimator.model.padding``; the weights hold its row mask) the
    divisor counts the real examples' elements only: the shorter batch's loss.
    """
    weighted = unweighted_loss if weights is None else unweighted_loss * weights
    total = jnp.sum(weighted)
    if reduction == Reduction.SUM:
        return total
    if weighted.size == 0:  # divide_no_nan
        return jnp.zeros((), jnp.float32)
    mask = padding.row_mask()
    if mask is not None and weighted.shape[:1] == mask.shape:
        return total / (jnp.sum(mask) * jnp.float32(weighted.size // mask.shape[0]))
    return total / jnp.float32(weighted.size)


def regularization_total(regularization_losses: Sequence[ArrayLike]) -> jax.Array:
    """``add_n(regularization_losses)`` as a float32 scalar (0 for an empty list)."""
    if not isinstance(regularization_losses, list | tuple):
        raise ValueError(
            VALIDATION_ERROR_MSG.format("regularization_losses", type(regularization_losses))
        )
    total = jnp.zeros((), jnp.float32)
    for r in regularization_losses:
        r = jnp.asarray(r, jnp.float32)
        if r.size != 1:
            raise ValueError(
                "regularization_losses must be scalars (e.g. "
                f"[estimator.get_regularization_loss()]); got one of shape {tuple(r.shape)}."
            )
        total = total + r.reshape(())
    return total


def check_prediction_keys(keys: Sequence[str], valid_keys: Sequence[str]) -> None:
    for key in keys:
        if key not in valid_keys:
            raise ValueError(
                f"Prediction key must be in PredictionKeys, given: {key}."
                f"Valid prediction keys include {list(valid_keys)}."
            )


def all_class_ids(logits: jax.Array, n_classes: int) -> jax.Array:
    """int32 ``[D0, ... DN, n_classes]``: ``0 .. n_classes-1`` in every row."""
    ids = jnp.arange(n_classes, dtype=jnp.int32)
    return jnp.broadcast_to(ids, tuple(logits.shape[:-1]) + (n_classes,))
