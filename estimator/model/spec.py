"""``EstimatorSpec``: what ``model_fn`` returns (``tf.estimator.EstimatorSpec``).

Validated at construction, per mode, in TF 2.15's order and with its messages
(``tensorflow_estimator/python/estimator/model_fn.py``): train_op, loss, predictions,
export_outputs, hooks, eval_metric_ops, scaffold. A missing required field keeps TF's
message first ("Missing loss.") and adds the mode and the fix. What differs under JAX:

* ``train_op`` is an ``optax.GradientTransformation``: the engine differentiates ``loss``
  with respect to the trainable variables and applies it. TF's
  ``optimizer.minimize(loss, global_step)`` becomes ``train_op=optax.sgd(lr)``.
* ``eval_metric_ops`` values are streaming metrics from ``estimator.metrics``, not TF's
  ``(value_op, update_op)`` tuples.
* ``scaffold`` must be None (no graph, no Saver, no init ops to customise).
"""

from __future__ import annotations

import collections
from typing import Any

import jax.numpy as jnp
import numpy as np
import optax

from estimator.hooks.session_run_hook import SessionRunHook
from estimator.metrics import Metric
from estimator.mode_keys import ModeKeys
from estimator.model.export_output import get_export_outputs, is_array
from estimator.model.strings import IndexToString

__all__ = ["EstimatorSpec"]

_FIELDS = [
    "mode",
    "predictions",
    "loss",
    "train_op",
    "eval_metric_ops",
    "export_outputs",
    "training_chief_hooks",
    "training_hooks",
    "scaffold",
    "evaluation_hooks",
    "prediction_hooks",
]


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _FIELDS)):
    """Ops and objects returned from a ``model_fn`` and passed to an ``Estimator``.

    Required by mode: TRAIN needs ``loss`` and ``train_op``; EVAL needs ``loss``; PREDICT
    needs ``predictions``. Other fields are ignored in modes that do not use them.

    Args:
      mode: a ``ModeKeys`` value.
      predictions: an array or a dict of arrays, each ``[batch_size, ...]`` (a classifier's
        string classes as ``estimator.index_to_string(ids, vocabulary)``).
      loss: a scalar floating-point array (shape ``[1]`` is reshaped to ``[]``, as TF).
      train_op: an ``optax.GradientTransformation`` applied to the gradient of ``loss``.
      eval_metric_ops: ``{name: estimator.metrics.Metric}``, computed over the whole
        evaluation set.
      export_outputs: ``{signature_name: ExportOutput}``; in PREDICT mode None becomes
        ``{"serving_default": PredictOutput(predictions)}``.
      training_chief_hooks, training_hooks, evaluation_hooks, prediction_hooks: iterables
        of ``SessionRunHook``.
      scaffold: must be None (TF's ``Scaffold`` has no JAX counterpart).

    Raises:
      ValueError: "Missing train_op.", "Missing loss.", "Missing predictions." (each
        followed by the mode and the fix), "Loss must be scalar, given: ...",
        export-output rules, a non-None scaffold.
      TypeError: a train_op that is not an optax transformation, a non-array loss or
        prediction, hooks that are not ``SessionRunHook`` objects, ``eval_metric_ops`` that are not
        a dict of metrics.
    """

    def __new__(
        cls,
        mode: str,
        predictions: Any = None,
        loss: Any = None,
        train_op: optax.GradientTransformation | None = None,
        eval_metric_ops: dict | None = None,
        export_outputs: dict | None = None,
        training_chief_hooks=None,
        training_hooks=None,
        scaffold=None,
        evaluation_hooks=None,
        prediction_hooks=None,
    ) -> EstimatorSpec:
        train_op = _validate_train_op(train_op, mode)
        loss = _validate_loss(loss, mode)
        predictions = _validate_predictions(predictions, mode)
        if mode == ModeKeys.PREDICT:
            export_outputs = get_export_outputs(export_outputs, predictions)
        training_hooks = _validate_hooks(training_hooks)
        evaluation_hooks = _validate_hooks(evaluation_hooks)
        prediction_hooks = _validate_hooks(prediction_hooks)
        training_chief_hooks = _validate_hooks(training_chief_hooks)
        eval_metric_ops = _validate_eval_metric_ops(eval_metric_ops)
        if scaffold is not None:
            raise ValueError(
                f"scaffold is not supported, given: {scaffold}. TF's Scaffold customises graph "
                "initialisation and savers; here variables are initialised by get_variable "
                "initializers and checkpoints by the Estimator. Leave scaffold=None."
            )
        return super().__new__(
            cls,
            mode=mode,
            predictions=predictions,
            loss=loss,
            train_op=train_op,
            eval_metric_ops=eval_metric_ops,
            export_outputs=export_outputs,
            training_chief_hooks=training_chief_hooks,
            training_hooks=training_hooks,
            scaffold=scaffold,
            evaluation_hooks=evaluation_hooks,
            prediction_hooks=prediction_hooks,
        )

    def _replace(self, **kwds) -> EstimatorSpec:
        """A new ``EstimatorSpec`` with some fields replaced (validated again)."""
        if "mode" in kwds and self.mode != kwds["mode"]:
            raise ValueError("mode of EstimatorSpec cannot be changed.")
        new_fields = map(kwds.pop, self._fields, list(self))
        return EstimatorSpec(*new_fields)


def _missing(field: str, mode: str, need: str, fix: str) -> ValueError:
    """TF's "Missing <field>." first, then the mode and the fix."""
    name = {ModeKeys.TRAIN: "TRAIN", ModeKeys.EVAL: "EVAL", ModeKeys.PREDICT: "PREDICT"}
    where = f"{mode!r} (ModeKeys.{name[mode]})" if mode in name else repr(mode)
    return ValueError(
        f"Missing {field}. The EstimatorSpec of mode {where} has no `{field}`; {need}: "
        f"return {fix} from model_fn in that mode."
    )


def _validate_train_op(train_op, mode):
    if train_op is None:
        if mode == ModeKeys.TRAIN:
            raise _missing(
                "train_op",
                mode,
                "TRAIN needs an optax.GradientTransformation to apply to the loss's gradient",
                "EstimatorSpec(mode, loss=loss, train_op=optax.adam(1e-3))",
            )
        return None
    if not isinstance(train_op, optax.GradientTransformation):
        raise TypeError(
            "train_op must be an optax.GradientTransformation, e.g. "
            f"train_op=optax.adagrad(0.05); given: {train_op!r}. The Estimator differentiates "
            "the loss and applies this transformation itself, so TF's "
            "`optimizer.minimize(loss, global_step=...)` becomes the optimizer alone "
            "(optax.sgd, optax.adam, canned.optimizers.get_optimizer_instance('Ftrl', 0.2), ...)."
        )
    return train_op


def _validate_loss(loss, mode):
    if loss is None:
        if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            raise _missing(
                "loss",
                mode,
                "TRAIN and EVAL need a scalar loss (only PREDICT may leave it out)",
                "EstimatorSpec(mode, loss=..., train_op=...)"
                if mode == ModeKeys.TRAIN
                else "EstimatorSpec(mode, loss=..., eval_metric_ops=...)",
            )
        return None
    if not is_array(loss):  # a Python number too, as TF (wrap it: jnp.float32(1.0))
        raise TypeError(f"loss must be Tensor, given: {loss}")
    if int(np.prod(loss.shape)) != 1:
        raise ValueError(f"Loss must be scalar, given: {loss}")
    if loss.shape != ():
        loss = jnp.reshape(loss, ())
    if not jnp.issubdtype(loss.dtype, jnp.floating):
        raise TypeError(
            f"loss must be a floating-point scalar to be differentiated, given dtype "
            f"{loss.dtype}: cast it, e.g. loss.astype(jnp.float32)."
        )
    return loss


def _check_prediction(value, name):
    if not (is_array(value) or isinstance(value, IndexToString)):
        raise TypeError(f"{name} must be Tensor, given: {value}")
    return value


def _validate_predictions(predictions, mode):
    if predictions is None:
        if mode == ModeKeys.PREDICT:
            raise _missing(
                "predictions",
                mode,
                "PREDICT needs the arrays to yield, each [batch_size, ...]",
                "EstimatorSpec(mode, predictions={'name': array, ...})",
            )
        return {}
    if isinstance(predictions, dict):
        return {k: _check_prediction(v, f"predictions[{k}]") for k, v in predictions.items()}
    return _check_prediction(predictions, "predictions")


def _validate_hooks(hooks) -> tuple:
    hooks = tuple(hooks or [])
    for hook in hooks:
        if not isinstance(hook, SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {hook}")
    return hooks


def _validate_eval_metric_ops(eval_metric_ops) -> dict:
    if eval_metric_ops is None:
        return {}
    if not isinstance(eval_metric_ops, dict):
        raise TypeError(f"eval_metric_ops must be a dict, given: {eval_metric_ops}")
    for key, value in eval_metric_ops.items():
        if isinstance(value, Metric):
            continue
        if isinstance(value, tuple) and len(value) == 2:
            raise TypeError(
                f"eval_metric_ops[{key!r}] is a (metric_value, update_op) tuple, TF's "
                "tf.compat.v1.metrics form, which does not exist in JAX. Use the streaming "
                "metric of the same name from estimator.metrics, e.g. "
                f"eval_metric_ops={{{key!r}: estimator.metrics.accuracy(labels, predictions)}}."
            )
        raise TypeError(
            "Values of eval_metric_ops must be estimator.metrics.Metric objects (e.g. "
            f"estimator.metrics.mean(values)), given: {value!r} for key: {key}"
        )
    return dict(eval_metric_ops)
