"""``MultiClassHead``: softmax cross-entropy over n > 2 classes (TF's ``MultiClassHead``)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from canned.head import _base, _checks, _labels
from canned.head.keys import (
    MetricKeys,
    PredictionKeys,
    Reduction,
)
from estimator import metrics

__all__ = ["MultiClassHead"]

_KEYS = PredictionKeys
_VALID_KEYS = (
    _KEYS.LOGITS,
    _KEYS.PROBABILITIES,
    _KEYS.CLASS_IDS,
    _KEYS.CLASSES,
    _KEYS.ALL_CLASS_IDS,
    _KEYS.ALL_CLASSES,
)


def sparse_softmax_cross_entropy(labels: jax.Array, logits: jax.Array) -> jax.Array:
    """``logsumexp(logits) - logits[label]`` per example, ``[B, 1]`` for labels ``[B, 1]``.

    ``tf.compat.v1.losses.sparse_softmax_cross_entropy(reduction=NONE)``. An id outside
    ``[0, n_classes)`` that reaches a jitted step gives NaN (the gather's fill value), which
    the Estimator's NaN guard reports.

    Computed as TF's ``SparseSoftmaxXentWithLogits`` kernel does, on logits shifted by
    their maximum: ``log(sum(exp(shifted))) - shifted[label]``, whose gradient is
    ``exp(shifted) / sum(exp(shifted)) - onehot``. ``logsumexp(logits) - logits[label]``
    adds the maximum back and subtracts it again, which rounds to the float32 spacing of
    the logits (1/128 at 1e5) and skews both the loss and the softmax in its gradient.
    """
    shifted = logits - jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
    picked = jnp.take_along_axis(shifted, labels, axis=-1, mode="fill", fill_value=jnp.nan)
    return jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True)) - picked


class MultiClassHead(_base.Head):
    """Head for single-label classification over ``n_classes > 2`` classes (TF 2.15).

    Loss: sparse softmax cross-entropy per example, weighted and reduced by
    ``loss_reduction``. Expects logits ``[B, n_classes]`` and integer class ids ``[B]`` or
    ``[B, 1]``, made from strings on the host by :meth:`prepare_labels` when
    ``label_vocabulary`` is given.

    Predictions (``PredictionKeys``): ``logits`` float32 ``[B, n]``; ``probabilities`` =
    ``softmax(logits)`` ``[B, n]``; ``class_ids`` int32 ``[B, 1]`` (argmax, the first on
    ties; TF: int64); ``classes`` ``[B, 1]`` and ``all_classes`` ``[B, n]`` as
    :class:`estimator.IndexToString` over ``label_vocabulary`` or ``("0", "1", ...)``;
    ``all_class_ids`` int32 ``[B, n]``.

    Eval metrics: ``average_loss``, ``accuracy`` (and ``regularization_loss`` when
    ``regularization_losses`` are given), suffixed ``/name`` when named.

    Export outputs (PREDICT): ``serving_default`` and ``classification`` =
    ``ClassificationOutput(scores=probabilities, classes=all_classes)``, ``predict`` =
    ``PredictOutput(predictions)``.

    Args:
      n_classes: number of classes, an int > 2 (use ``BinaryClassHead`` for 2).
      weight_column: key of the numeric feature of example weights, ``[B]`` or ``[B, 1]``.
      label_vocabulary: list or tuple of ``n_classes`` class names; labels are then
        strings, mapped to ids by :meth:`prepare_labels`. Default: labels are ids.
      loss_reduction: ``Reduction.SUM_OVER_BATCH_SIZE`` (default), ``SUM`` or ``AUTO``.
      loss_fn: optional ``loss_fn(labels, logits[, features][, loss_reduction])`` returning
        the unreduced loss ``[B, 1]``; labels arrive as integer ids ``[B, 1]``.
      name: suffix of metric and summary keys.

    Raises:
      ValueError: TF 2.15's messages for ``n_classes`` None or <= 2, a ``label_vocabulary``
        that is not a list or tuple or not of ``n_classes`` items, an invalid
        ``loss_reduction`` or ``loss_fn``; also a vocabulary with duplicates or non-strings,
        or a non-integer ``n_classes``.
      TypeError: a ``weight_column`` that is not a string.
    """

    def __init__(
        self,
        n_classes: int,
        weight_column: str | None = None,
        label_vocabulary: Sequence[str] | None = None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        loss_fn: Callable | None = None,
        name: str | None = None,
    ) -> None:
        if n_classes is None:
            raise ValueError("n_classes cannot be None")
        try:
            n_classes = operator.index(n_classes)
        except TypeError:
            raise ValueError(
                f"n_classes must be an integer > 2; got {n_classes!r} of type "
                f"{type(n_classes).__name__}."
            ) from None
        if label_vocabulary is not None and not isinstance(label_vocabulary, list | tuple):
            raise ValueError(
                "label_vocabulary should be a list or a tuple. Given type: "
                f"{type(label_vocabulary)}"
            )
        if label_vocabulary is not None and len(label_vocabulary) != n_classes:
            raise ValueError(
                '"label_vocabulary" does not have "n_classes" items. '
                f"len(label_vocabulary)={len(label_vocabulary)}, n_classes={n_classes}, "
                f"label_vocabulary={list(label_vocabulary)!r}"
            )
        super().__init__(
            weight_column=weight_column, loss_reduction=loss_reduction, loss_fn=loss_fn, name=name
        )
        if n_classes <= 2:
            raise ValueError(
                f"n_classes must be > 2: {n_classes}. For two classes use BinaryClassHead."
            )
        self._n_classes = n_classes
        self._label_vocabulary = _checks.validate_label_vocabulary(label_vocabulary)

    @property
    def logits_dimension(self) -> int:
        """``n_classes``: one logit per class."""
        return self._n_classes

    @property
    def _class_names(self) -> tuple[str, ...]:
        return self._label_vocabulary or tuple(str(i) for i in range(self._n_classes))

    # ----- labels --------------------------------------------------------------------------
    def prepare_labels(self, labels: ArrayLike) -> np.ndarray:
        """Host-side labels -> int32 class ids ``[B, 1]`` (vectorized NumPy).

        With ``label_vocabulary``, string (or bytes) labels become their index. Without it,
        labels must be integers in ``[0, n_classes)`` (TF's "Labels must be <= n - 1" /
        "Labels must be >= 0"; float labels are refused as TF refuses them).

        Args:
          labels: array-like ``[B]`` or ``[B, 1]``.

        Returns:
          int32 ``[B, 1]``.

        Raises:
          ValueError: labels missing from the vocabulary (listed), out of range (listed),
            of the wrong dtype or shape.
        """
        return _labels.host_label_ids(
            labels,
            vocabulary=self._label_vocabulary,
            n_classes=self._n_classes,
            allow_float=False,
            dtype=np.int32,
        )

    def _processed_labels(self, logits: jax.Array, labels: Any) -> jax.Array:
        labels = _checks.check_dense_labels_match_logits_and_reshape(labels, logits, 1)
        if not jnp.issubdtype(labels.dtype, jnp.integer):
            raise ValueError(
                f"Labels dtype should be integer. Instead got {labels.dtype}. Labels are class "
                f"ids in [0, {self._n_classes}): use head.prepare_labels(labels) on the host, "
                "or cast them, e.g. labels.astype(jnp.int32)."
            )
        return _checks.check_label_range(labels, self._n_classes)

    # The per-example loss's name in TF's graph (``_graph_names``).
    _per_example_loss_name = "sparse_softmax_cross_entropy_loss/xentropy/xentropy"

    def _default_unweighted_loss(self, labels: jax.Array, logits: jax.Array) -> jax.Array:
        return sparse_softmax_cross_entropy(labels, logits)

    # ----- predictions ---------------------------------------------------------------------
    def predictions(self, logits: ArrayLike, keys: Sequence[str] | None = None) -> dict:
        """Predictions from logits ``[B, n_classes]``; all six keys when ``keys`` is None.

        Raises:
          ValueError: an unknown key or mis-shaped logits (TF's messages).
        """
        keys, logits = self._prediction_keys(keys, _VALID_KEYS, logits)
        out = {}
        if _KEYS.LOGITS in keys:
            out[_KEYS.LOGITS] = logits
        if _KEYS.PROBABILITIES in keys:
            out[_KEYS.PROBABILITIES] = jax.nn.softmax(logits, axis=-1)
        self._class_predictions(out, keys, logits, self._n_classes)
        return out

    # ----- metrics -------------------------------------------------------------------------
    def eval_metrics(
        self,
        labels: ArrayLike,
        logits: ArrayLike,
        features: Mapping[str, Any] | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> dict[str, metrics.Metric]:
        """``average_loss``, ``accuracy`` (and ``regularization_loss``) of one batch.

        Args:
          labels: integer class ids ``[B]`` or ``[B, 1]``.
          logits: float ``[B, n_classes]``.
          features: the features dict (for the ``weight_column``).
          regularization_losses: optional list of scalars.

        Returns:
          ``{key: estimator.metrics.Metric}``; merge over batches, then ``compute()``.
        """
        class_ids = self.predictions(logits, [_KEYS.CLASS_IDS])[_KEYS.CLASS_IDS]
        _, label_ids, unweighted, weights = self._checked(labels, logits, features)
        out = self._mean_loss_metrics(unweighted, weights, regularization_losses)
        out[self._summary_key(MetricKeys.ACCURACY)] = metrics.accuracy(
            label_ids, class_ids, weights
        )
        return out

    # ----- export --------------------------------------------------------------------------
    def _export_outputs(self, predictions: dict) -> dict:
        return _base.classification_export_outputs(predictions, _KEYS.ALL_CLASSES)
