"""``RegressionHead``: squared error on ``label_dimension`` targets (TF's ``RegressionHead``)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from canned.head import _base, _checks, _labels
from canned.head.keys import (
    DEFAULT_SERVING_KEY,
    PREDICT_SERVING_KEY,
    REGRESS_SERVING_KEY,
    MetricKeys,
    PredictionKeys,
    Reduction,
)
from estimator import metrics
from estimator.model.export_output import PredictOutput, RegressionOutput

__all__ = [
    "LogisticRegressionHead",
    "PoissonRegressionHead",
    "RegressionHead",
    "log_poisson_loss",
]

_KEYS = PredictionKeys


class RegressionHead(_base.Head):
    """Head for regression with squared error loss (TF 2.15's ``RegressionHead``).

    Loss: ``(labels - logits)²`` per element ``[B, label_dimension]``, weighted and reduced
    by ``loss_reduction`` (``SUM_OVER_BATCH_SIZE`` divides by ``B · label_dimension``). The
    loss is computed on the logits, before any ``inverse_link_fn``, as in TF.

    Predictions: ``predictions`` float32 ``[B, label_dimension]`` =
    ``inverse_link_fn(logits)`` (or the logits); with an ``inverse_link_fn``, also
    ``logits``.

    Eval metrics: ``average_loss`` (weighted mean of the unreduced loss), ``label/mean``,
    ``prediction/mean`` (of ``predictions``), and ``regularization_loss`` when
    ``regularization_losses`` are given; suffixed ``/name`` when named.

    Export outputs (PREDICT): ``serving_default`` and ``regression`` =
    ``RegressionOutput(predictions)``, ``predict`` = ``PredictOutput(predictions)``.

    Args:
      label_dimension: number of regression targets per example, an int >= 1.
      weight_column: key of the numeric feature of weights: ``[B]``, ``[B, 1]`` or
        ``[B, label_dimension]`` (one weight per target).
      loss_reduction: ``Reduction.SUM_OVER_BATCH_SIZE`` (default), ``SUM`` or ``AUTO``.
      loss_fn: optional ``loss_fn(labels, logits[, features][, loss_reduction])`` returning
        the unreduced loss ``[B, label_dimension]``; labels arrive as float32.
      inverse_link_fn: optional function from logits to predictions (e.g. ``jnp.exp``).
      name: suffix of metric and summary keys.

    Raises:
      ValueError: ``Invalid label_dimension`` (TF's message; also for a non-integer), an
        invalid ``loss_reduction`` or ``loss_fn``.
      TypeError: a ``weight_column`` that is not a string.
    """

    _allow_per_logit_weights = True

    def __init__(
        self,
        label_dimension: int = 1,
        weight_column: str | None = None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        loss_fn: Callable | None = None,
        inverse_link_fn: Callable[[jax.Array], jax.Array] | None = None,
        name: str | None = None,
    ) -> None:
        try:
            valid = operator.index(label_dimension) >= 1
        except TypeError:
            valid = False
        if not valid:
            raise ValueError(
                f"Invalid label_dimension {label_dimension}. It is the number of regression "
                "targets per example: an integer >= 1."
            )
        label_dimension = operator.index(label_dimension)
        super().__init__(
            weight_column=weight_column, loss_reduction=loss_reduction, loss_fn=loss_fn, name=name
        )
        self._label_dimension = label_dimension
        self._inverse_link_fn = inverse_link_fn

    @property
    def logits_dimension(self) -> int:
        """``label_dimension``."""
        return self._label_dimension

    # ----- labels --------------------------------------------------------------------------
    def prepare_labels(self, labels: ArrayLike) -> np.ndarray:
        """Host-side labels -> float32 ``[B, label_dimension]`` (``[B]`` allowed for 1).

        Raises:
          ValueError: labels that are not numbers, or of the wrong shape (TF's messages).
        """
        arr = _labels.as_host_array(labels)
        if arr.dtype.kind not in "biuf":
            raise ValueError(
                f"Labels dtype should be numeric for a regression head. Instead got "
                f"{arr.dtype}. Convert them to numbers, e.g. labels.astype(np.float32)."
            )
        return _labels.host_reshape(arr, self._label_dimension).astype(np.float32)

    def _processed_labels(self, logits: jax.Array, labels: Any) -> jax.Array:
        labels = _checks.check_dense_labels_match_logits_and_reshape(
            labels, logits, self._label_dimension
        )
        return labels.astype(jnp.float32)

    # The per-example loss's name in TF's graph (``_graph_names``).
    _per_example_loss_name = "mean_squared_error/SquaredDifference"

    def _default_unweighted_loss(self, labels: jax.Array, logits: jax.Array) -> jax.Array:
        return jnp.square(labels - logits)  # tf.compat.v1.losses.mean_squared_error, NONE

    # ----- predictions ---------------------------------------------------------------------
    @property
    def _valid_keys(self) -> tuple[str, ...]:
        if self._inverse_link_fn:
            return (_KEYS.PREDICTIONS, _KEYS.LOGITS)
        return (_KEYS.PREDICTIONS,)

    def predictions(self, logits: ArrayLike, keys: Sequence[str] | None = None) -> dict:
        """``{"predictions": inverse_link_fn(logits)}`` (plus ``"logits"`` with a link).

        Raises:
          ValueError: an unknown key or mis-shaped logits (TF's messages).
        """
        keys, logits = self._prediction_keys(keys, self._valid_keys, logits)
        out = {}
        if _KEYS.PREDICTIONS in keys:
            value = self._inverse_link_fn(logits) if self._inverse_link_fn else logits
            out[_KEYS.PREDICTIONS] = jnp.asarray(value)
        if _KEYS.LOGITS in keys:
            out[_KEYS.LOGITS] = logits
        return out

    # ----- metrics -------------------------------------------------------------------------
    def eval_metrics(
        self,
        labels: ArrayLike,
        logits: ArrayLike,
        features: Mapping[str, Any] | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> dict[str, metrics.Metric]:
        """``average_loss``, ``label/mean``, ``prediction/mean`` (and
        ``regularization_loss``) of one batch.

        Args:
          labels: float ``[B, label_dimension]`` (``[B]`` when it is 1).
          logits: float ``[B, label_dimension]``.
          features: the features dict (for the ``weight_column``).
          regularization_losses: optional list of scalars.

        Returns:
          ``{key: estimator.metrics.Metric}``; merge over batches, then ``compute()``.
        """
        predicted = self.predictions(logits, [_KEYS.PREDICTIONS])[_KEYS.PREDICTIONS]
        _, labels, unweighted, weights = self._checked(labels, logits, features)
        key = self._summary_key
        out = self._mean_loss_metrics(unweighted, weights, regularization_losses)
        out[key(MetricKeys.LABEL_MEAN)] = metrics.mean(labels, weights)
        out[key(MetricKeys.PREDICTION_MEAN)] = metrics.mean(predicted, weights)
        return out

    # ----- export --------------------------------------------------------------------------
    def _export_outputs(self, predictions: dict) -> dict:
        regression = RegressionOutput(value=predictions[_KEYS.PREDICTIONS])
        return {
            DEFAULT_SERVING_KEY: regression,
            REGRESS_SERVING_KEY: regression,
            PREDICT_SERVING_KEY: PredictOutput(predictions),
        }


def log_poisson_loss(targets: jax.Array, log_input: jax.Array, compute_full_loss: bool = False):
    """``tf.nn.log_poisson_loss``: ``exp(c) - z * c`` per element for targets ``z`` and
    log-rates ``c``; with ``compute_full_loss``, plus Stirling's approximation of
    ``log(z!)``, ``z log z - z + 0.5 log(2 pi z)``, where ``z > 1`` (0 for ``0 <= z <= 1``).
    """
    result = jnp.exp(log_input) - log_input * targets
    if compute_full_loss:
        safe = jnp.where(targets > 1, targets, 1.0)  # no log(0) even in the unused branch
        stirling = safe * jnp.log(safe) - safe + 0.5 * jnp.log(2 * math.pi * safe)
        result = result + jnp.where((targets >= 0) & (targets <= 1), 0.0, stirling)
    return result


class PoissonRegressionHead(RegressionHead):
    """Regression of counts with the Poisson loss (``tf.estimator.PoissonRegressionHead``).

    The logits are log-rates: ``predictions = exp(logits)``; the loss is
    :func:`log_poisson_loss` of the labels (counts >= 0) and the logits.

    Args:
      label_dimension, weight_column, loss_reduction, name: as :class:`RegressionHead`.
      compute_full_loss: add the constant ``log(z!)`` term (Stirling), as TF's default.
    """

    def __init__(
        self,
        label_dimension: int = 1,
        weight_column: str | None = None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        compute_full_loss: bool = True,
        name: str | None = None,
    ) -> None:
        self._compute_full_loss = compute_full_loss
        super().__init__(
            label_dimension,
            weight_column,
            loss_reduction,
            loss_fn=self._poisson_loss,
            inverse_link_fn=jnp.exp,
            name=name,
        )

    def _poisson_loss(self, labels, logits):
        return log_poisson_loss(labels, logits, self._compute_full_loss)


class LogisticRegressionHead(RegressionHead):
    """Regression of a probability with the logistic loss
    (``tf.estimator.LogisticRegressionHead``): labels in ``[0, 1]``, sigmoid cross-entropy
    on the logits, ``predictions = sigmoid(logits)``, regression metrics and exports.

    Args:
      weight_column, loss_reduction, name: as :class:`RegressionHead`.

    Raises:
      ValueError: "Labels must be in range [0, 1]" (TF's message) for other labels,
        checked on the host.
    """

    def __init__(
        self,
        weight_column: str | None = None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        name: str | None = None,
    ) -> None:
        super().__init__(
            1,
            weight_column,
            loss_reduction,
            loss_fn=self._logistic_loss,
            inverse_link_fn=jax.nn.sigmoid,
            name=name,
        )

    def prepare_labels(self, labels: ArrayLike) -> np.ndarray:
        out = super().prepare_labels(labels)
        if out.size and (out.min() < 0 or out.max() > 1):
            raise ValueError("Labels must be in range [0, 1]")
        return out

    def _logistic_loss(self, labels, logits):
        # tf.nn.sigmoid_cross_entropy_with_logits: max(x, 0) - x * z + log(1 + exp(-|x|)).
        return jnp.maximum(logits, 0) - logits * labels + jnp.log1p(jnp.exp(-jnp.abs(logits)))
