"""The names TF 2.15's graphs give a canned estimator's values, for hooks.

TF programs log tensors of a canned estimator's graph by name, e.g.
``LoggingTensorHook({"loss": "linear/head/weighted_loss/Sum", "average_loss":
"linear/head/truediv"}, every_n_iter=100)``. Inside ``model_fn`` a head names the same
values with ``estimator.identity``, so such hooks fetch them here too. The names were read
from TF 2.15.1's graphs (``tf.compat.v1.get_default_graph().get_operations()`` in a hook's
``begin``) of the canned estimators over one numeric column, trained one step.

With ``P`` = ``head/losses`` for TF 2's heads (``tf.estimator.*``) and ``<s>/head`` for
TF 1's (``tf.compat.v1.estimator.*``), and ``Q`` = ``head/predictions`` or
``<s>/head/predictions``:

* ``P/labels``: the labels ``[B, 1]``;
* ``P/logistic_loss`` (the per-example loss, see below), ``P/weighted_loss/Mul`` (times the
  weights), ``P/weighted_loss/Sum`` (their sum: the loss with the SUM reduction);
* ``P/weighted_loss/value``: the loss with ``SUM_OVER_BATCH_SIZE``;
* TF 1 with SUM only: ``P/Sum`` (the example weights' sum) and ``P/truediv`` (the average
  loss, ``loss / Sum``);
* ``Q/probabilities``, ``Q/logistic``, ``Q/class_ids``.

``<s>`` is the estimator's scope (``linear``, ``dnn``; none for wide & deep and baseline:
``head/...``). The per-example loss is ``logistic_loss`` (binary),
``sparse_softmax_cross_entropy_loss/xentropy/xentropy`` (multi-class, ``[B]``) or
``mean_squared_error/SquaredDifference`` (regression). The logits are named by the
estimator that computes them: ``dnn/logits/BiasAdd``,
``linear/linear_model/linear/linear_model/linear/linear_model/weighted_sum`` (TF 2;
TF 1: ``linear/linear_model/linear_model/linear_model/weighted_sum``), ``add`` (wide & deep)
and ``baseline/Mul``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import jax
import jax.numpy as jnp

from canned.head.keys import Reduction
from estimator.model import variables as est_variables

__all__ = ["GraphNames", "TF2", "tf1", "name_losses", "name_predictions"]

#: The numeric predictions TF's graph names under ``.../predictions/``.
_PREDICTIONS = ("logistic", "probabilities", "class_ids")


@dataclasses.dataclass(frozen=True)
class GraphNames:
    """Where a head's values are named.

    Attributes:
      losses: the name scope of the loss values (``head/losses``; TF 1: ``linear/head``).
      predictions: the name scope of the predictions (``head/predictions``).
      mean_loss: TF 1's heads with the SUM reduction also compute the example weights' sum
        (``Sum``) and the average loss (``truediv``).
      logits: a name for the logits, when the estimator's own name for them differs
        (TF 1's linear model), or None.
    """

    losses: str
    predictions: str
    mean_loss: bool = False
    logits: str | None = None


#: TF 2.15's heads (``tf.estimator.*`` canned estimators, ``tf.estimator.*Head``).
TF2 = GraphNames("head/losses", "head/predictions")


def tf1(scope: str | None, logits: str | None = None) -> GraphNames:
    """TF 1's heads (``tf.compat.v1.estimator.*``) under ``scope`` (``"linear"``,
    ``"dnn"``, or None for wide & deep and baseline)."""
    prefix = f"{scope}/head" if scope else "head"
    return GraphNames(prefix, f"{prefix}/predictions", mean_loss=True, logits=logits)


def _name(value, name: str) -> None:
    est_variables.identity(value, name)


def name_losses(
    names: GraphNames,
    *,
    per_example: str | None,
    labels: jax.Array,
    unweighted: jax.Array,
    weights: jax.Array | None,
    loss: jax.Array,
    reduction: str,
) -> None:
    """Names the loss values (see the module docstring); nothing outside ``model_fn``.

    Args:
      names: where.
      per_example: the per-example loss's name (``logistic_loss``), or None to skip it.
      labels: the processed labels ``[B, label_dimension]``.
      unweighted: the per-example loss ``[B, label_dimension]``.
      weights: the example weights (None: 1).
      loss: the reduced training loss (before regularization).
      reduction: the head's ``loss_reduction``.
    """
    if est_variables.current_frame() is None:
        return
    prefix = names.losses
    weighted = unweighted if weights is None else unweighted * weights
    _name(labels, f"{prefix}/labels")
    if per_example is not None:
        squeeze = per_example.endswith("xentropy")  # TF's sparse cross entropy is [B]
        _name(jnp.squeeze(unweighted, -1) if squeeze else unweighted, f"{prefix}/{per_example}")
    _name(weighted, f"{prefix}/weighted_loss/Mul")
    _name(jnp.sum(weighted), f"{prefix}/weighted_loss/Sum")
    if reduction != Reduction.SUM:
        _name(loss, f"{prefix}/weighted_loss/value")
    elif names.mean_loss:
        ones = jnp.ones_like(unweighted)
        total = jnp.sum(ones if weights is None else weights * ones)
        _name(total, f"{prefix}/Sum")
        _name(loss / total, f"{prefix}/truediv")


def name_predictions(names: GraphNames, logits: jax.Array, predictions: Mapping) -> None:
    """Names the numeric predictions and (where the names say so) the logits."""
    if est_variables.current_frame() is None:
        return
    for key in _PREDICTIONS:
        if key in predictions:
            _name(predictions[key], f"{names.predictions}/{key}")
    if names.logits is not None:
        _name(logits, names.logits)
