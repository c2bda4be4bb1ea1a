"""``tf.estimator.EstimatorSpec`` for TF 1 code: ``estimator.EstimatorSpec`` that also takes
what TF 1's ``model_fn`` returns.

* ``eval_metric_ops`` values made by ``tf.metrics`` (``(value, update_op)`` pairs) become
  their streaming metrics;
* ``scaffold=tf.train.Scaffold()`` counts as none;
* ``train_op`` from ``optimizer.minimize(loss)`` / ``apply_gradients`` / ``tf.group`` is
  already an optax transformation; ``tf.no_op()`` outside TRAIN counts as none;
* when ``minimize`` was given another loss than ``loss`` (say the loss plus a
  regularization term), the Estimator must differentiate that one while reporting
  ``loss``: the spec's loss becomes ``reported_as(loss, objective)``, whose value is
  ``loss`` and whose gradient is ``objective``'s.
"""

from __future__ import annotations

import jax

from estimator.compat.v1.metrics import as_metric
from estimator.compat.v1.train import Scaffold
from estimator.compat.v1.train._train_op import NoOp, TrainOp, objective_of
from estimator.mode_keys import ModeKeys
from estimator.model.spec import EstimatorSpec as _EstimatorSpec

__all__ = ["EstimatorSpec", "reported_as"]


@jax.custom_jvp
def reported_as(reported, objective):
    """``reported``'s value with ``objective``'s derivative (a scalar pair)."""
    del objective
    return reported


@reported_as.defjvp
def _reported_as_jvp(primals, tangents):
    reported, objective = primals
    del objective
    return reported, tangents[1]


class EstimatorSpec(_EstimatorSpec):
    """``tf.estimator.EstimatorSpec`` (TF's fields, order and checks; see the module
    docstring for what TF 1 values it converts)."""

    def __new__(
        cls,
        mode,
        predictions=None,
        loss=None,
        train_op=None,
        eval_metric_ops=None,
        export_outputs=None,
        training_chief_hooks=None,
        training_hooks=None,
        scaffold=None,
        evaluation_hooks=None,
        prediction_hooks=None,
    ):
        if isinstance(train_op, NoOp):
            train_op = None
        if isinstance(scaffold, Scaffold):  # tf.train.Scaffold(): nothing to customise
            scaffold = None
        if isinstance(eval_metric_ops, dict):
            eval_metric_ops = {k: as_metric(k, v) for k, v in eval_metric_ops.items()}
        if mode == ModeKeys.TRAIN and isinstance(train_op, TrainOp) and loss is not None:
            objective = objective_of(train_op)
            if objective is not None and objective is not loss:
                loss = reported_as(jax.numpy.reshape(loss, ()), jax.numpy.reshape(objective, ()))
        return super().__new__(
            cls,
            mode,
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
