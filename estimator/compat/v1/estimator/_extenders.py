"""TF 1.15's estimator extenders (``tf.contrib.estimator``'s ``extenders.py``):

* ``add_metrics`` (also ``tf.estimator.add_metrics``): ``estimator.add_metrics`` whose
  ``metric_fn`` may return ``tf.metrics`` ``(value, update_op)`` pairs, as a ``model_fn``'s
  ``eval_metric_ops`` may (``tf.estimator.EstimatorSpec`` converts both the same way);
* ``clip_gradients_by_norm(optimizer, clip_norm)``: an optimizer whose gradients are
  clipped by their global norm before they are applied (TF's ``_TransformGradients``);
* ``forward_features(estimator, keys)``: an Estimator whose predictions (and
  ``PredictOutput`` exports) also hold the given features.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from estimator import add_metrics as _add_metrics
from estimator.compat.v1._math_ops import clip_by_global_norm
from estimator.compat.v1.metrics import as_metric
from estimator.estimator import Estimator
from estimator.extenders import with_model_fn
from estimator.fn_args import fn_args
from estimator.model.export_output import PredictOutput

__all__ = ["add_metrics", "clip_gradients_by_norm", "forward_features"]


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


class _TransformGradients:
    """An optimizer whose ``compute_gradients`` edits the gradients of another's (TF's
    ``_TransformGradients``); every other attribute is the wrapped optimizer's, so slots
    keep its names."""

    def __init__(self, optimizer, transform_grads_fn: Callable, name: str) -> None:
        self._optimizer = optimizer
        self._transform = transform_grads_fn
        self._name = name

    def get_name(self) -> str:
        return self._name

    def compute_gradients(self, loss, var_list=None, **kwargs):
        return self._transform(self._optimizer.compute_gradients(loss, var_list, **kwargs))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._optimizer.apply_gradients(grads_and_vars, global_step, name)

    def minimize(self, loss, global_step=None, var_list=None, **kwargs):
        """``apply_gradients(compute_gradients(loss))``: the transformed gradients."""
        kwargs.pop("name", None)
        grads = self.compute_gradients(loss, var_list, **kwargs)
        return self.apply_gradients(grads, global_step)

    def __getattr__(self, name: str):
        return getattr(self._optimizer, name)


def clip_gradients_by_norm(optimizer, clip_norm: float):
    """``tf.contrib.estimator.clip_gradients_by_norm``: ``optimizer`` with its gradients
    clipped by their global norm (``tf.clip_by_global_norm``, as TF's despite the name)
    before they are applied; named ``ClipByNorm<name>``.

    Args:
      optimizer: a ``tf.train.Optimizer``.
      clip_norm: the largest global norm (float).

    Returns:
      An optimizer with ``minimize``, ``compute_gradients``, ``apply_gradients``.
    """

    def clip(grads_and_vars):
        gradients, variables = zip(*grads_and_vars, strict=True)
        gradients = clip_by_global_norm(gradients, clip_norm)[0]
        return list(zip(gradients, variables, strict=True))

    return _TransformGradients(optimizer, clip, "ClipByNorm" + optimizer.get_name())


def _forward_keys(keys: Any, features: dict) -> list[str]:
    if keys is None:
        return list(features)
    keys = [keys] if isinstance(keys, str) else keys
    if not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys):
        raise TypeError(f"keys should be either a string or a list of strings. Given: {keys}")
    missing = [k for k in keys if k not in features]
    if missing:
        raise ValueError(f"Given keys are not in features: {missing}")
    return list(keys)


def forward_features(estimator: Estimator, keys: Any = None, sparse_default_values=None):
    """``tf.contrib.estimator.forward_features``: an Estimator whose predictions also hold
    the features ``keys`` (a name, a list, or None for every feature), as do the
    ``predict`` / ``serving_default`` ``PredictOutput`` s of its exports.

    A forwarded feature passes through the compiled predict step: it must be numeric
    (an id, not a string; forward a string key with its index instead).

    Raises:
      TypeError: ``keys`` not a string or list of strings (TF's message).
      ValueError: a key not in the features, a key already a prediction, predictions that
        are not a dict, a feature without a batch dimension (TF's messages).
    """
    del sparse_default_values  # sparse features reach model_fn dense here
    model_fn = estimator.runtime.model.model_fn
    takes = set(fn_args(model_fn))

    def new_model_fn(features, labels, mode, params, config):
        available = {"labels": labels, "mode": mode, "params": params, "config": config}
        spec = model_fn(features=features, **{k: v for k, v in available.items() if k in takes})
        if spec.predictions is None:
            return spec
        if not isinstance(spec.predictions, dict):
            raise ValueError(
                "Predictions should be a dict to be able to forward features. Given: "
                f"{type(spec.predictions)}"
            )
        predictions = dict(spec.predictions)
        chosen = _forward_keys(keys, features)
        for key in chosen:
            if key in predictions:
                raise ValueError(
                    f"Cannot forward feature key ({key}). Since it does exist in predictions. "
                    f"Existing keys in predictions: {sorted(predictions)}"
                )
            if getattr(features[key], "ndim", 0) < 1:
                raise ValueError(
                    f"Feature ({key}) should have rank >= 1 (a batch dimension); got a scalar."
                )
            predictions[key] = features[key]
        outputs = dict(spec.export_outputs or {})
        for name in ("predict", "serving_default"):
            if isinstance(outputs.get(name), PredictOutput):
                forwarded = {**outputs[name].outputs, **{k: predictions[k] for k in chosen}}
                outputs[name] = PredictOutput(forwarded)
        return spec._replace(predictions=predictions, export_outputs=outputs or None)

    return with_model_fn(estimator, new_model_fn)
