"""``tf.estimator.add_metrics`` for TF 1 code: ``estimator.add_metrics`` whose ``metric_fn``
may return ``tf.metrics`` ``(value, update_op)`` pairs, as a ``model_fn``'s
``eval_metric_ops`` may (``tf.estimator.EstimatorSpec`` converts both the same way)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from estimator import add_metrics as _add_metrics
from estimator.compat.v1.metrics import as_metric
from estimator.estimator import Estimator

__all__ = ["add_metrics"]


def add_metrics(estimator: Estimator, metric_fn: Callable) -> Estimator:
    """``tf.estimator.add_metrics`` (``tf.contrib.estimator.add_metrics``): a new Estimator
    whose evaluation adds ``metric_fn``'s metrics to ``model_fn``'s.

    Args:
      estimator: the Estimator to extend.
      metric_fn: takes some of ``labels``, ``predictions``, ``features``, ``config`` (by
        name) and returns ``{name: metric}``: ``tf.metrics`` pairs or ``estimator.metrics``
        objects.

    Returns:
      An ``Estimator`` (see ``estimator.add_metrics``).

    Raises:
      ValueError: a ``metric_fn`` with other arguments (TF's message).
      TypeError: a ``(value, update_op)`` tuple that ``tf.metrics`` did not make.
    """

    @functools.wraps(metric_fn)
    def converted(**kwargs):
        metrics = metric_fn(**kwargs)
        if not isinstance(metrics, dict):
            return metrics
        return {key: as_metric(key, value) for key, value in metrics.items()}

    return _add_metrics(estimator, converted)
