"""``BinaryClassHead``: sigmoid cross-entropy over one logit (``tf.estimator.BinaryClassHead``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from canned.head import _base, _checks, _labels
from canned.head.keys import (
    REGRESS_SERVING_KEY,
    MetricKeys,
    PredictionKeys,
    Reduction,
)
from estimator import metrics
from estimator.model.export_output import RegressionOutput

__all__ = ["BinaryClassHead"]

_KEYS = PredictionKeys
_VALID_KEYS = (
    _KEYS.LOGITS,
    _KEYS.LOGISTIC,
    _KEYS.PROBABILITIES,
    _KEYS.CLASS_IDS,
    _KEYS.CLASSES,
    _KEYS.ALL_CLASS_IDS,
    _KEYS.ALL_CLASSES,
)


def sigmoid_cross_entropy_with_logits(labels: jax.Array, logits: jax.Array) -> jax.Array:
    """``max(x, 0) - x·z + log(1 + exp(-|x|))``, TF's stable form of
    ``-z·log σ(x) - (1 - z)·log(1 - σ(x))`` (``tf.nn.sigmoid_cross_entropy_with_logits``)."""
    # TF's select-based form: its gradient at x = 0 is sigmoid(0) - z, as it should be
    # (with jnp.maximum/jnp.abs the gradient at exactly 0 would be -z).
    nonnegative = logits >= 0
    relu = jnp.where(nonnegative, logits, jnp.zeros_like(logits))
    neg_abs = jnp.where(nonnegative, -logits, logits)
    return relu - logits * labels + jnp.log1p(jnp.exp(neg_abs))


class BinaryClassHead(_base.Head):
    """Head for single-label binary classification (TF 2.15's ``BinaryClassHead``).

    Loss: ``sigmoid_cross_entropy_with_logits(labels, logits)`` per example, weighted and
    reduced by ``loss_reduction``. Expects logits ``[B, 1]``; labels ``[B]`` or ``[B, 1]``
    with values in [0, 1] (class ids, or soft labels as TF allows), made from strings on the
    host by :meth:`prepare_labels` when ``label_vocabulary`` is given. Labels outside [0, 1]
    raise TF's messages when concrete; inside ``jax.jit`` they make the loss NaN.

    Predictions (``PredictionKeys``): ``logits`` float32 ``[B, 1]``; ``logistic`` =
    ``sigmoid(logits)`` ``[B, 1]``; ``probabilities`` = ``softmax([0, logit])`` ``[B, 2]``
    (as ``[sigmoid(-logit), sigmoid(logit)]``: finite where TF's softmax gives NaN for an
    infinite logit);
    ``class_ids`` int32 ``[B, 1]`` (1 iff logit > 0; TF: int64, JAX runs without x64);
    ``classes`` ``[B, 1]`` and ``all_classes`` ``[B, 2]`` as :class:`estimator.IndexToString`
    over ``label_vocabulary`` or ``("0", "1")`` (bytes on the host, as TF's strings);
    ``all_class_ids`` int32 ``[B, 2]``.

    Eval metrics (``MetricKeys``, suffixed ``/name`` when named): ``average_loss``
    (weighted mean of the unreduced loss), ``accuracy``, ``precision``, ``recall`` (of
    ``class_ids``), ``prediction/mean`` (of ``logistic``), ``label/mean``,
    ``accuracy_baseline`` (``max(label_mean, 1 - label_mean)``), ``auc`` and
    ``auc_precision_recall`` (``tf.keras.metrics.AUC``: 200 thresholds, interpolation),
    ``regularization_loss`` when ``regularization_losses`` are given, and per threshold
    ``t``: ``accuracy/positive_threshold_t``, ``precision/positive_threshold_t``,
    ``recall/positive_threshold_t`` (``logistic > t`` is positive).

    Export outputs (PREDICT): ``serving_default`` and ``classification`` =
    ``ClassificationOutput(scores=probabilities, classes=all_classes)``, ``regression`` =
    ``RegressionOutput(logistic)``, ``predict`` = ``PredictOutput(predictions)``.

    Example::

        head = BinaryClassHead()
        logits = jnp.array([[45.0], [-41.0]])
        labels = jnp.array([[1], [1]])
        head.loss(labels, logits)  # (0 + 41) / 2 = 20.5

    Args:
      weight_column: key of the numeric feature of example weights, ``[B]`` or ``[B, 1]``.
      thresholds: floats in (0, 1) for the per-threshold accuracy/precision/recall.
      label_vocabulary: list or tuple of the two class names; labels are then strings,
        mapped to ids by :meth:`prepare_labels`. Default: labels are numbers in [0, 1].
      loss_reduction: ``Reduction.SUM_OVER_BATCH_SIZE`` (default: ``Σ w·l / B``),
        ``Reduction.SUM`` or ``Reduction.AUTO``.
      loss_fn: optional ``loss_fn(labels, logits[, features][, loss_reduction])`` returning
        the unreduced loss ``[B, 1]``; labels arrive as float32 ``[B, 1]``.
      name: suffix of metric and summary keys.

    Raises:
      ValueError: TF 2.15's messages for a ``label_vocabulary`` that is not a list or tuple,
        thresholds outside (0, 1), an invalid ``loss_reduction`` or ``loss_fn``; also (not
        checked by TF) a vocabulary without exactly two distinct strings.
      TypeError: a ``weight_column`` that is not a string.
    """

    def __init__(
        self,
        weight_column: str | None = None,
        thresholds: Sequence[float] | None = None,
        label_vocabulary: Sequence[str] | None = None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        loss_fn: Callable | None = None,
        name: str | None = None,
    ) -> None:
        if label_vocabulary is not None and not isinstance(label_vocabulary, list | tuple):
            raise ValueError(
                "label_vocabulary should be a list or a tuple. Given type: "
                f"{type(label_vocabulary)}"
            )
        thresholds = tuple(float(t) for t in thresholds) if thresholds is not None else ()
        for threshold in thresholds:
            if threshold <= 0.0 or threshold >= 1.0:
                raise ValueError(f"thresholds not in (0, 1): {(thresholds,)}.")
        super().__init__(
            weight_column=weight_column, loss_reduction=loss_reduction, loss_fn=loss_fn, name=name
        )
        self._label_vocabulary = _checks.validate_label_vocabulary(label_vocabulary)
        if self._label_vocabulary is not None and len(self._label_vocabulary) != 2:
            # Not checked by TF 2.15, whose lookup then fails on the third class's labels.
            raise ValueError(
                "A binary head's label_vocabulary needs exactly 2 class names (negative, "
                f"positive); got {len(label_vocabulary)}: {list(label_vocabulary)!r}. For more "
                "classes use MultiClassHead."
            )
        self._thresholds = thresholds

    @property
    def logits_dimension(self) -> int:
        """1: one logit per example."""
        return 1

    @property
    def _class_names(self) -> tuple[str, ...]:
        return self._label_vocabulary or ("0", "1")

    # ----- labels --------------------------------------------------------------------------
    def prepare_labels(self, labels: ArrayLike) -> np.ndarray:
        """Host-side labels -> float32 ``[B, 1]`` in [0, 1] (vectorized NumPy).

        With ``label_vocabulary``, string (or bytes) labels become their index. Without it,
        numeric labels are checked to lie in [0, 1] (TF's "Labels must be <= 2 - 1" /
        "Labels must be >= 0"); fractional values pass as soft labels, as in TF. The result
        is float32, the dtype TF's head computes with, whatever the input dtype.

        Args:
          labels: array-like ``[B]`` or ``[B, 1]``.

        Returns:
          float32 ``[B, 1]``.

        Raises:
          ValueError: labels missing from the vocabulary (listed), out of range (listed),
            of the wrong dtype or shape.
        """
        return _labels.host_label_ids(
            labels,
            vocabulary=self._label_vocabulary,
            n_classes=2,
            allow_float=True,
            dtype=np.float32,
        )

    def _processed_labels(self, logits: jax.Array, labels: Any) -> jax.Array:
        labels = _checks.check_dense_labels_match_logits_and_reshape(labels, logits, 1)
        labels = _checks.check_label_range(labels.astype(jnp.float32), 2)
        # Traced labels outside [0, 1] cannot raise without a host sync: make them NaN, so
        # the loss is NaN and the Estimator's NaN guard reports it (as for MultiClassHead).
        return jnp.where((labels >= 0) & (labels <= 1), labels, jnp.nan)

    # The per-example loss's name in TF's graph (``_graph_names``).
    _per_example_loss_name = "logistic_loss"

    def _default_unweighted_loss(self, labels: jax.Array, logits: jax.Array) -> jax.Array:
        return sigmoid_cross_entropy_with_logits(labels, logits)

    # ----- predictions ---------------------------------------------------------------------
    def predictions(self, logits: ArrayLike, keys: Sequence[str] | None = None) -> dict:
        """Predictions from logits ``[B, 1]``; all seven keys when ``keys`` is None.

        Raises:
          ValueError: an unknown key or mis-shaped logits (TF's messages).
        """
        keys, logits = self._prediction_keys(keys, _VALID_KEYS, logits)
        two_class_logits = jnp.concatenate([jnp.zeros_like(logits), logits], axis=-1)
        out = {}
        if _KEYS.LOGITS in keys:
            out[_KEYS.LOGITS] = logits
        if _KEYS.LOGISTIC in keys:
            out[_KEYS.LOGISTIC] = jax.nn.sigmoid(logits)
        if _KEYS.PROBABILITIES in keys:
            # softmax([0, x]) = [sigmoid(-x), sigmoid(x)]: the same values, and [0, 1] rather
            # than TF's NaN when x overflows to inf (a huge finite input).
            out[_KEYS.PROBABILITIES] = jax.nn.sigmoid(jnp.concatenate([-logits, logits], -1))
        self._class_predictions(out, keys, two_class_logits, 2)
        return out

    # ----- metrics -------------------------------------------------------------------------
    def eval_metrics(
        self,
        labels: ArrayLike,
        logits: ArrayLike,
        features: Mapping[str, Any] | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> dict[str, metrics.Metric]:
        """The batch's metrics (keys in the class docstring), TF 2.15's numerics.

        Args:
          labels: ``[B]`` or ``[B, 1]`` numbers in [0, 1].
          logits: float ``[B, 1]``.
          features: the features dict (for the ``weight_column``).
          regularization_losses: optional list of scalars, reported as
            ``regularization_loss``.

        Returns:
          ``{key: estimator.metrics.Metric}``; merge over batches, then ``compute()``.
        """
        preds = self.predictions(logits, [_KEYS.LOGISTIC, _KEYS.CLASS_IDS])
        logistic, class_ids = preds[_KEYS.LOGISTIC], preds[_KEYS.CLASS_IDS]
        _, labels, unweighted, weights = self._checked(labels, logits, features)
        key = self._summary_key
        out = self._mean_loss_metrics(unweighted, weights, regularization_losses)
        out[key(MetricKeys.ACCURACY)] = metrics.accuracy(labels, class_ids, weights)
        out[key(MetricKeys.PRECISION)] = metrics.precision(labels, class_ids, weights)
        out[key(MetricKeys.RECALL)] = metrics.recall(labels, class_ids, weights)
        out[key(MetricKeys.PREDICTION_MEAN)] = metrics.mean(logistic, weights)
        out[key(MetricKeys.LABEL_MEAN)] = metrics.mean(labels, weights)
        out[key(MetricKeys.ACCURACY_BASELINE)] = metrics.accuracy_baseline(labels, weights)
        out[key(MetricKeys.AUC)] = metrics.auc(
            labels, logistic, weights, summation_method="interpolation"
        )
        out[key(MetricKeys.AUC_PR)] = metrics.auc(
            labels, logistic, weights, curve="PR", summation_method="interpolation"
        )
        out.update(self._threshold_metrics(self._thresholds, labels, logistic, weights))
        return out

    # ----- export --------------------------------------------------------------------------
    def _export_outputs(self, predictions: dict) -> dict:
        regression = RegressionOutput(value=predictions[_KEYS.LOGISTIC])
        return _base.classification_export_outputs(
            predictions, _KEYS.ALL_CLASSES, **{REGRESS_SERVING_KEY: regression}
        )
