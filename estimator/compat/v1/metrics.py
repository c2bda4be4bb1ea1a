"""``tf.metrics`` (TF 1.15's ``tf.compat.v1.metrics``): TF's ``(value, update_op)`` pairs,
backed by the streaming metrics of ``estimator.metrics``.

Each function returns a :class:`MetricPair`: a 2-tuple ``(value, update_op)`` whose two
entries are the metric's value on this batch (a float32 array), carrying the streaming
metric as ``.metric``. So the TF 1 idioms work unchanged::

    accuracy = tf.metrics.accuracy(labels=labels, predictions=predicted_classes)
    tf.summary.scalar("accuracy", accuracy[1])              # a scalar array
    return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})

and ``tf.estimator.EstimatorSpec`` hands the streaming metric to the Estimator, which merges
it over the whole evaluation (numbers as TF's ``tf.compat.v1.metrics``). One difference:
during training ``accuracy[1]`` is the value on the current batch; TF's is the running value
since its local variables were created (the start of ``train()``).

``metrics_collections`` / ``updates_collections`` are added to like TF's collections of the
``model_fn`` run (``tf.get_collection``).
"""

from __future__ import annotations

import inspect
from typing import Any

from estimator import metrics as _metrics
from estimator.compat._unsupported import module_getattr
from estimator.compat.v1._graph import add_to_collection

__all__ = [
    "MetricPair",
    "accuracy",
    "auc",
    "mean",
    "mean_absolute_error",
    "mean_squared_error",
    "root_mean_squared_error",
    "precision",
    "recall",
    "true_positives",
    "false_positives",
    "true_negatives",
    "false_negatives",
    "mean_per_class_accuracy",
    "mean_iou",
    "precision_at_thresholds",
    "recall_at_thresholds",
]

__getattr__ = module_getattr("tf.metrics", __name__)


class MetricPair(tuple):
    """``(value, update_op)`` of a ``tf.metrics`` function, with the streaming metric.

    Attributes:
      metric: the ``estimator.metrics.Metric`` of this batch (what ``EstimatorSpec``'s
        ``eval_metric_ops`` passes on to the Estimator).
    """

    metric: _metrics.Metric

    def __new__(cls, metric: _metrics.Metric) -> MetricPair:
        value = metric.compute()
        pair = super().__new__(cls, (value, value))
        pair.metric = metric
        return pair


def _pair(metric: _metrics.Metric, metrics_collections, updates_collections) -> MetricPair:
    pair = MetricPair(metric)
    if metrics_collections:
        add_to_collection(metrics_collections, pair[0])
    if updates_collections:
        add_to_collection(updates_collections, pair[1])
    return pair


def auc(
    labels,
    predictions,
    weights=None,
    num_thresholds=200,
    metrics_collections=None,
    updates_collections=None,
    curve="ROC",
    name=None,
    summation_method="trapezoidal",
    thresholds=None,
) -> MetricPair:
    """``tf.metrics.auc``: ROC or PR AUC from ``num_thresholds`` thresholds (TF's
    placement and summation methods)."""
    metric = _metrics.auc(
        labels,
        predictions,
        weights,
        num_thresholds,
        curve=curve,
        summation_method=summation_method,
        thresholds=thresholds,
    )
    return _pair(metric, metrics_collections, updates_collections)


def mean(
    values, weights=None, metrics_collections=None, updates_collections=None, name=None
) -> MetricPair:
    """``tf.metrics.mean``: the weighted mean of ``values``."""
    return _pair(_metrics.mean(values, weights), metrics_collections, updates_collections)


def _tf_metric(fn, extra: tuple[str, ...] = ()):
    """``tf.metrics.<name>(labels, predictions, *extra, weights=None, metrics_collections=None,
    updates_collections=None, name=None)`` over ``estimator.metrics.<name>``."""
    names = ("labels", "predictions", *extra, "weights")
    optional = ("weights", "metrics_collections", "updates_collections", "name")
    parameters = [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
        if n in optional
        else inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for n in names[:-1] + optional
    ]
    signature = inspect.Signature(parameters)

    def metric_fn(*args, **kwargs) -> MetricPair:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        metric = fn(*(values[n] for n in names))
        return _pair(metric, values["metrics_collections"], values["updates_collections"])

    metric_fn.__name__ = fn.__name__
    metric_fn.__signature__ = signature
    metric_fn.__doc__ = f"``tf.metrics.{fn.__name__}`` (``estimator.metrics.{fn.__name__}``)."
    return metric_fn


accuracy = _tf_metric(_metrics.accuracy)
mean_absolute_error = _tf_metric(_metrics.mean_absolute_error)
mean_squared_error = _tf_metric(_metrics.mean_squared_error)
root_mean_squared_error = _tf_metric(_metrics.root_mean_squared_error)
precision = _tf_metric(_metrics.precision)
recall = _tf_metric(_metrics.recall)
true_positives = _tf_metric(_metrics.true_positives)
false_positives = _tf_metric(_metrics.false_positives)
true_negatives = _tf_metric(_metrics.true_negatives)
false_negatives = _tf_metric(_metrics.false_negatives)
mean_per_class_accuracy = _tf_metric(_metrics.mean_per_class_accuracy, ("num_classes",))
mean_iou = _tf_metric(_metrics.mean_iou, ("num_classes",))
precision_at_thresholds = _tf_metric(_metrics.precision_at_thresholds, ("thresholds",))
recall_at_thresholds = _tf_metric(_metrics.recall_at_thresholds, ("thresholds",))


def as_metric(key: str, value: Any) -> Any:
    """An ``eval_metric_ops`` value as the Estimator takes it: a :class:`MetricPair`'s
    streaming metric; streaming metrics pass through.

    Raises:
      TypeError: a ``(value, update_op)`` tuple not made by ``tf.metrics`` (its values
        cannot be merged across batches), naming the replacement.
    """
    if isinstance(value, MetricPair):
        return value.metric
    if isinstance(value, tuple) and len(value) == 2:
        raise TypeError(
            f"eval_metric_ops[{key!r}] is a (value, update_op) tuple that tf.metrics did not "
            "make, so it cannot be merged over the evaluation. Use a tf.metrics function "
            f"(e.g. {{{key!r}: tf.metrics.mean(values)}}) or an estimator.metrics metric."
        )
    return value
