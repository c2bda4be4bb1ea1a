"""``tf.contrib.metrics`` (TF 1.15): the ``streaming_*`` metrics that are ``tf.metrics``.

TF 1.15's ``contrib/metrics/python/ops/metric_ops.py`` defines these as ``tf.metrics`` with
the arguments in another order — **predictions first**: ``streaming_accuracy(predictions,
labels, weights=None, ...)`` is ``tf.metrics.accuracy(labels, predictions, weights)``;
``streaming_auc`` keeps ``curve``, ``num_thresholds`` (200) and ``summation_method``
(``'trapezoidal'``). Each returns the same ``(value, update_op)`` pair as ``tf.metrics``.
The other ``streaming_*`` metrics are refused with the replacement named.
"""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import metrics as _metrics

__all__ = [
    "streaming_accuracy",
    "streaming_mean",
    "streaming_auc",
    "streaming_precision",
    "streaming_recall",
    "streaming_mean_squared_error",
    "streaming_root_mean_squared_error",
    "streaming_mean_absolute_error",
    "streaming_true_positives",
    "streaming_false_positives",
    "streaming_true_negatives",
    "streaming_false_negatives",
    "streaming_mean_iou",
    "streaming_precision_at_thresholds",
    "streaming_recall_at_thresholds",
]

__getattr__ = module_getattr("tf.contrib.metrics", __name__)


def _swapped(metric, *extra: str):
    """``streaming_<name>(predictions, labels, *extra, weights=None, ...)`` over
    ``tf.metrics.<name>(labels, predictions, *extra, weights, ...)``."""

    def streaming(
        predictions,
        labels,
        *args,
        weights=None,
        metrics_collections=None,
        updates_collections=None,
        name=None,
        **kwargs,
    ):
        named = dict(zip(extra, args, strict=False))
        if len(args) > len(extra):  # weights given positionally, after the extras
            weights = args[len(extra)]
        return metric(
            labels,
            predictions,
            weights=weights,
            metrics_collections=metrics_collections,
            updates_collections=updates_collections,
            name=name,
            **named,
            **kwargs,
        )

    streaming.__name__ = f"streaming_{metric.__name__}"
    streaming.__doc__ = (
        f"``tf.contrib.metrics.streaming_{metric.__name__}(predictions, labels, "
        f"{''.join(e + ', ' for e in extra)}weights=None)``: ``tf.metrics.{metric.__name__}`` "
        "with predictions first."
    )
    return streaming


streaming_accuracy = _swapped(_metrics.accuracy)
streaming_precision = _swapped(_metrics.precision)
streaming_recall = _swapped(_metrics.recall)
streaming_mean_squared_error = _swapped(_metrics.mean_squared_error)
streaming_root_mean_squared_error = _swapped(_metrics.root_mean_squared_error)
streaming_mean_absolute_error = _swapped(_metrics.mean_absolute_error)
streaming_true_positives = _swapped(_metrics.true_positives)
streaming_false_positives = _swapped(_metrics.false_positives)
streaming_true_negatives = _swapped(_metrics.true_negatives)
streaming_false_negatives = _swapped(_metrics.false_negatives)
streaming_mean_iou = _swapped(_metrics.mean_iou, "num_classes")
streaming_precision_at_thresholds = _swapped(_metrics.precision_at_thresholds, "thresholds")
streaming_recall_at_thresholds = _swapped(_metrics.recall_at_thresholds, "thresholds")


def streaming_mean(
    values, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    """``tf.contrib.metrics.streaming_mean``: ``tf.metrics.mean``."""
    return _metrics.mean(values, weights, metrics_collections, updates_collections, name)


def streaming_auc(
    predictions,
    labels,
    weights=None,
    num_thresholds=200,
    metrics_collections=None,
    updates_collections=None,
    curve="ROC",
    name=None,
    summation_method="trapezoidal",
):
    """``tf.contrib.metrics.streaming_auc``: ``tf.metrics.auc`` with predictions first."""
    return _metrics.auc(
        labels,
        predictions,
        weights=weights,
        num_thresholds=num_thresholds,
        metrics_collections=metrics_collections,
        updates_collections=updates_collections,
        curve=curve,
        name=name,
        summation_method=summation_method,
    )
