"""``MultiLabelHead``: a sigmoid per class, several labels per example
(``tf.estimator.MultiLabelHead``, TF 2.15's ``multi_label_head.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from canned.head import _base, _checks, _labels
from canned.head._binary import sigmoid_cross_entropy_with_logits
from canned.head.keys import (
    MetricKeys,
    PredictionKeys,
    Reduction,
)
from estimator import metrics
from estimator.model.strings import IndexToString

__all__ = ["MultiLabelHead"]

_KEYS = PredictionKeys
_VALID_KEYS = (_KEYS.LOGITS, _KEYS.PROBABILITIES, _KEYS.CLASSES)
_RANGE_MSG = "labels must be an integer indicator Tensor with values in [0, 1]"


class MultiLabelHead(_base.Head):
    """Head for multi-label classification (TF 2.15's ``MultiLabelHead``).

    Each of ``n_classes`` classes is a separate yes/no question: the loss is
    ``sigmoid_cross_entropy(labels, logits)`` averaged over the classes, ``[B, 1]`` per
    example, weighted and reduced by ``loss_reduction``.

    Labels reach the device as a multi-hot float32 ``[B, n_classes]``; :meth:`prepare_labels`
    makes it on the host from a multi-hot array, from per-example lists of class ids (TF's
    integer ``SparseTensor``), or with ``label_vocabulary`` from per-example lists of class
    names (TF's string ``SparseTensor``).

    Predictions: ``logits`` ``[B, n]``, ``probabilities`` = ``sigmoid(logits)`` ``[B, n]``,
    ``classes`` ``[B, n]`` (every class name in each row, as TF's ``all_classes``; bytes on
    the host).

    Eval metrics (suffixed ``/name`` when named): ``average_loss``, ``auc`` and
    ``auc_precision_recall`` over every (example, class) pair (``tf.keras.metrics.AUC``:
    200 thresholds, interpolation), ``regularization_loss`` when given; per threshold
    ``t``: ``accuracy/positive_threshold_t``, ``precision/...``, ``recall/...``
    (``probability > t``); per class ``c`` of ``classes_for_class_based_metrics``:
    ``probability_mean/class<c>``, ``auc/class<c>``, ``auc_precision_recall/class<c>``
    (``/<name>`` with a vocabulary). Example weights apply to every class of the example.

    Export outputs (PREDICT): ``serving_default`` and ``classification`` =
    ``ClassificationOutput(scores=probabilities, classes=classes)``, ``predict``.

    Args:
      n_classes: number of classes, > 1 (one class: ``BinaryClassHead``).
      weight_column: key of the numeric feature of example weights, ``[B]`` or ``[B, 1]``.
      thresholds: floats in (0, 1) for the per-threshold accuracy/precision/recall.
      label_vocabulary: the ``n_classes`` class names; labels are then names.
      loss_reduction: ``Reduction.SUM_OVER_BATCH_SIZE`` (default), ``SUM`` or ``AUTO``.
      loss_fn: optional ``loss_fn(labels, logits[, features][, loss_reduction])`` returning
        the unreduced loss ``[B, 1]``; labels arrive multi-hot ``[B, n_classes]``.
      classes_for_class_based_metrics: class ids, or names from ``label_vocabulary``, to
        report per-class metrics for.
      name: suffix of metric and summary keys.

    Raises:
      ValueError: TF 2.15's messages for ``n_classes`` < 2, thresholds outside (0, 1), a
        vocabulary that is not a list or tuple or not of length ``n_classes``, per-class
        classes out of range or names without a vocabulary, an invalid reduction or
        ``loss_fn``.
    """

    _label_dimension = 1  # the unreduced loss is [B, 1]: the mean over classes

    def __init__(
        self,
        n_classes: int,
        weight_column: str | None = None,
        thresholds: Sequence[float] | None = None,
        label_vocabulary: Sequence[str] | None = None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        loss_fn: Callable | None = None,
        classes_for_class_based_metrics: Sequence[int | str] | None = None,
        name: str | None = None,
    ) -> None:
        if n_classes is None or n_classes < 2:
            raise ValueError(
                f"n_classes must be > 1 for multi-label classification. Given: {n_classes}"
            )
        thresholds = tuple(float(t) for t in thresholds) if thresholds else ()
        for threshold in thresholds:
            if threshold <= 0.0 or threshold >= 1.0:
                raise ValueError(f"thresholds must be in (0, 1) range. Given: {threshold}")
        if label_vocabulary is not None:
            if not isinstance(label_vocabulary, list | tuple):
                raise ValueError(
                    "label_vocabulary must be a list or tuple. Given type: "
                    f"{type(label_vocabulary)}"
                )
            if len(label_vocabulary) != n_classes:
                raise ValueError(
                    f"Length of label_vocabulary must be n_classes ({n_classes}). Given: "
                    f"{len(label_vocabulary)}"
                )
        super().__init__(
            weight_column=weight_column, loss_reduction=loss_reduction, loss_fn=loss_fn, name=name
        )
        self._n_classes = int(n_classes)
        self._thresholds = thresholds
        self._label_vocabulary = _checks.validate_label_vocabulary(label_vocabulary)
        self._class_ids = self._per_class_ids(classes_for_class_based_metrics)

    def _per_class_ids(self, classes) -> tuple[int, ...]:
        if not classes:
            return ()
        classes = tuple(classes)
        if isinstance(classes[0], str):
            if not self._label_vocabulary:
                raise ValueError(
                    "label_vocabulary must be provided when classes_for_class_based_metrics "
                    "are strings."
                )
            return tuple(self._label_vocabulary.index(c) for c in classes)
        for class_id in classes:
            if class_id < 0 or class_id >= self._n_classes:
                raise ValueError(
                    "All classes_for_class_based_metrics must be in range "
                    f"[0, {self._n_classes - 1}]. Given: {class_id}"
                )
        return tuple(int(c) for c in classes)

    @property
    def logits_dimension(self) -> int:
        """``n_classes``: one logit per class."""
        return self._n_classes

    @property
    def _class_names(self) -> tuple[str, ...]:
        return self._label_vocabulary or tuple(str(i) for i in range(self._n_classes))

    # ----- labels --------------------------------------------------------------------------
    def prepare_labels(self, labels: Any) -> np.ndarray:
        """Host-side labels -> multi-hot float32 ``[B, n_classes]``.

        Accepts a numeric ``[B, n_classes]`` multi-hot array (TF's dense labels), or one
        sequence per example of class ids in ``[0, n_classes)`` — or of class names with
        ``label_vocabulary`` — (TF's ``SparseTensor`` labels; ``""``/``b""`` entries are
        padding and ignored).

        Raises:
          ValueError: TF's "labels must be an integer indicator Tensor with values in
            [0, 1]" (with the values), ids out of range, names outside the vocabulary,
            names without a vocabulary, or a multi-hot array of the wrong width.
        """
        if labels is None:
            raise ValueError(_labels.LABEL_NONE_ERR_MSG)
        dense = np.asarray(labels) if not isinstance(labels, list | tuple) else None
        if dense is not None and dense.dtype.kind in "iufb":
            dense = dense.astype(np.float32)
            if dense.ndim != 2 or dense.shape[-1] != self._n_classes:
                raise ValueError(
                    f"Multi-hot labels must have shape [batch_size, {self._n_classes}]; got "
                    f"{dense.shape}. Per-example lists of class ids are taken too."
                )
            bad = ~((dense >= 0) & (dense <= 1))
            if np.any(bad):
                raise ValueError(f"{_RANGE_MSG}; got {np.unique(dense[bad])[:10].tolist()}.")
            return dense
        out = np.zeros((len(labels), self._n_classes), np.float32)
        for row, classes in enumerate(labels):
            for value in np.atleast_1d(np.asarray(classes, dtype=object)).tolist():
                if value in ("", b""):
                    continue  # padding of a dense array of names
                out[row, self._class_index(value)] = 1.0
        return out

    def _class_index(self, value) -> int:
        if isinstance(value, bytes):
            value = value.decode()
        if isinstance(value, str):
            if self._label_vocabulary is None:
                raise ValueError(
                    f"Labels are strings ({value!r}) but the head has no label_vocabulary; "
                    "pass label_vocabulary=[...] or give class ids."
                )
            if value not in self._label_vocabulary:
                raise ValueError(
                    f"Label {value!r} is not in label_vocabulary {list(self._label_vocabulary)}."
                )
            return self._label_vocabulary.index(value)
        if not float(value).is_integer() or not 0 <= value < self._n_classes:
            raise ValueError(
                f"labels must be an integer SparseTensor with values in [0, {self._n_classes}); "
                f"got {value!r}."
            )
        return int(value)

    def _processed_labels(self, logits: jax.Array, labels: Any) -> jax.Array:
        labels = _checks.check_dense_labels_match_logits_and_reshape(
            labels, logits, self._n_classes
        )
        labels = labels.astype(jnp.float32)
        if not isinstance(labels, jax.core.Tracer):
            bad = ~((np.asarray(labels) >= 0) & (np.asarray(labels) <= 1))
            if np.any(bad):
                raise ValueError(_RANGE_MSG)
        # Traced labels outside [0, 1] make the loss NaN (the Estimator's NaN guard reports it).
        return jnp.where((labels >= 0) & (labels <= 1), labels, jnp.nan)

    def _default_unweighted_loss(self, labels: jax.Array, logits: jax.Array) -> jax.Array:
        per_class = sigmoid_cross_entropy_with_logits(labels, logits)
        return jnp.mean(per_class, axis=-1, keepdims=True)

    # ----- predictions ---------------------------------------------------------------------
    def predictions(self, logits: ArrayLike, keys: Sequence[str] | None = None) -> dict:
        """Predictions from logits ``[B, n_classes]``; all three keys when ``keys`` is None.

        Raises:
          ValueError: an unknown key or mis-shaped logits (TF's messages).
        """
        keys, logits = self._prediction_keys(keys, _VALID_KEYS, logits)
        out = {}
        if _KEYS.LOGITS in keys:
            out[_KEYS.LOGITS] = logits
        if _KEYS.PROBABILITIES in keys:
            out[_KEYS.PROBABILITIES] = jax.nn.sigmoid(logits)
        if _KEYS.CLASSES in keys:
            ids = _checks.all_class_ids(logits, self._n_classes)
            out[_KEYS.CLASSES] = IndexToString(ids, self._class_names)
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
          labels: multi-hot ``[B, n_classes]`` (see :meth:`prepare_labels`).
          logits: float ``[B, n_classes]``.
          features: the features dict (for the ``weight_column``).
          regularization_losses: optional list of scalars (``regularization_loss``).
        """
        logits, labels, unweighted, weights = self._checked(labels, logits, features)
        probabilities = jax.nn.sigmoid(logits)
        key = self._summary_key
        out = self._mean_loss_metrics(unweighted, weights, regularization_losses)
        out[key(MetricKeys.AUC)] = metrics.auc(
            labels, probabilities, weights, summation_method="interpolation"
        )
        out[key(MetricKeys.AUC_PR)] = metrics.auc(
            labels, probabilities, weights, curve="PR", summation_method="interpolation"
        )
        out.update(self._threshold_metrics(self._thresholds, labels, probabilities, weights))
        for class_id in self._class_ids:
            if self._label_vocabulary is None:
                names = (
                    MetricKeys.PROBABILITY_MEAN_AT_CLASS % class_id,
                    MetricKeys.AUC_AT_CLASS % class_id,
                    MetricKeys.AUC_PR_AT_CLASS % class_id,
                )
            else:
                label = self._label_vocabulary[class_id]
                names = (
                    MetricKeys.PROBABILITY_MEAN_AT_NAME % label,
                    MetricKeys.AUC_AT_NAME % label,
                    MetricKeys.AUC_PR_AT_NAME % label,
                )
            p, y = probabilities[..., class_id : class_id + 1], labels[..., class_id : class_id + 1]
            out[key(names[0])] = metrics.mean(p, weights)
            out[key(names[1])] = metrics.auc(y, p, weights, summation_method="interpolation")
            out[key(names[2])] = metrics.auc(
                y, p, weights, curve="PR", summation_method="interpolation"
            )
        return out

    # ----- export --------------------------------------------------------------------------
    def _export_outputs(self, predictions: dict) -> dict:
        return _base.classification_export_outputs(predictions, _KEYS.CLASSES)
