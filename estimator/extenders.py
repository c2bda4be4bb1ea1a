"""``add_metrics``: more evaluation metrics for an existing Estimator
(``tf.estimator.add_metrics``, TF 2.15's ``extenders.py``)."""

from __future__ import annotations

from collections.abc import Callable

from estimator.estimator import Estimator
from estimator.fn_args import fn_args
from estimator.mode_keys import ModeKeys

__all__ = ["add_metrics", "with_model_fn"]

_METRIC_FN_ARGS = ("labels", "predictions", "features", "config")
_MODEL_FN_ARGS = ("labels", "mode", "params", "config")


def add_metrics(estimator: Estimator, metric_fn: Callable) -> Estimator:
    """A new Estimator on the same ``model_dir``, config, params, warm start and host-side
    transform whose evaluation adds ``metric_fn``'s metrics to ``model_fn``'s.

    Args:
      estimator: the Estimator to extend.
      metric_fn: takes some of ``labels``, ``predictions``, ``features``, ``config`` (by
        name) and returns ``{name: metric}`` (``estimator.metrics`` objects); a name that
        ``model_fn`` already uses is replaced, as TF's ``dict.update``.

    Returns:
      An ``Estimator``.

    Raises:
      ValueError: a ``metric_fn`` with other arguments (TF's message).
    """
    unexpected = set(fn_args(metric_fn)) - set(_METRIC_FN_ARGS)
    if unexpected:
        raise ValueError(
            f"metric_fn ({metric_fn}) has following not expected args: {sorted(unexpected)}"
        )
    runtime = estimator.runtime
    model_fn = runtime.model.model_fn
    takes = set(fn_args(model_fn))

    def new_model_fn(features, labels, mode, params, config):
        available = {"labels": labels, "mode": mode, "params": params, "config": config}
        kwargs = {k: v for k, v in available.items() if k in takes}
        spec = model_fn(features=features, **kwargs)
        if mode != ModeKeys.EVAL:
            return spec
        given = {"labels": labels, "predictions": spec.predictions, "features": features}
        given["config"] = config
        new = metric_fn(**{k: v for k, v in given.items() if k in fn_args(metric_fn)})
        return spec._replace(eval_metric_ops={**(spec.eval_metric_ops or {}), **new})

    return with_model_fn(estimator, new_model_fn)


def with_model_fn(estimator: Estimator, model_fn: Callable) -> Estimator:
    """A new Estimator running ``model_fn`` (``(features, labels, mode, params, config)``)
    on ``estimator``'s ``model_dir``, config, params, warm start and host-side transform
    (what the extenders return)."""
    runtime = estimator.runtime
    return Estimator(
        model_fn,
        model_dir=estimator.model_dir,
        config=estimator.config,
        params=estimator.params,
        warm_start_from=None if runtime.warm_start is None else runtime.warm_start.settings,
        input_transform=runtime.input_transform,
    )
