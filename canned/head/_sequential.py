"""A head for sequential predictions: ``SequentialHeadWrapper`` (TF 2.15's
``tensorflow_estimator/python/estimator/head/sequential_head.py``).

It wraps a single-label head so that logits ``[B, T, logits_dimension]`` and labels
``[B, T]`` count only the steps the sequence mask ``features[input_sequence_mask_key]``
(``bool [B, T]``) keeps — what ``RNNClassifier(return_sequences=True)`` trains.

What differs from TF under JAX: TF drops the masked steps (``tf.boolean_mask``), a shape
that depends on the data; here the steps stay and get weight 0, with the same results:
the loss is the static head's weighted loss over the kept steps (``SUM_OVER_BATCH_SIZE``
divides by their number, as TF's flattened batch), and every metric weighs masked steps
by 0. Labels at masked steps are never read (they may be padding such as -1).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from canned.head._base import Head
from canned.head._checks import regularization_total
from canned.head.keys import Reduction
from estimator import metrics
from estimator.mode_keys import ModeKeys
from estimator.model.export_output import PredictOutput
from estimator.model.spec import EstimatorSpec

__all__ = ["SequentialHeadWrapper"]

_MASK_WEIGHT = "__sequence_mask_weight__"  # the static head's weights: mask · weight column


class SequentialHeadWrapper(Head):
    """Applies a static head to every kept step of a sequence
    (``SequentialHeadWrapper`` of TF 2.15).

    Args:
      static_head: the single-label head to wrap (not a ``MultiHead``).
      sequence_length_mask: key of the ``bool [B, T]`` sequence mask in ``features``.
      feature_columns: a key or list of keys of ``[B, T]`` features (typically the
        static head's ``weight_column``) read per step.

    Raises:
      TypeError: a ``sequence_length_mask`` or a feature column that is not a string
        (TF's messages).
      ValueError: for a ``MultiHead`` (TF's message).
    """

    def __init__(
        self,
        static_head: Head,
        sequence_length_mask: str = "sequence_length_mask",
        feature_columns: str | Iterable[str] | None = None,
    ) -> None:
        if not isinstance(sequence_length_mask, str):
            raise TypeError(
                "`sequence_mask` column must be a string. Given type: "
                f"{type(sequence_length_mask)}."
            )
        feature_columns = feature_columns or []
        if isinstance(feature_columns, str):
            feature_columns = [feature_columns]
        if not isinstance(feature_columns, Iterable):
            raise TypeError(
                "`feature_columns` must be either a string or an iterable of strings got "
                f"{type(feature_columns)} instead."
            )
        feature_columns = list(feature_columns)
        for column in feature_columns:
            if not isinstance(column, str):
                raise TypeError(f"Column must a string. Given type: {type(column)}.")
        from canned.head._multi_head import MultiHead

        if isinstance(static_head, MultiHead):
            raise ValueError("`MultiHead` is not supported with `SequentialHeadWrapper`.")
        self._static_head = static_head
        self._sequence_length_mask = sequence_length_mask
        self._feature_columns = feature_columns
        # The static head weighing each step by mask · its weight column.
        self._masked = copy.copy(static_head)
        self._masked._weight_column = _MASK_WEIGHT
        super().__init__(
            weight_column=static_head.weight_column,
            loss_reduction=static_head.loss_reduction,
            loss_fn=None,
            name=static_head.name,
        )

    @property
    def input_sequence_mask_key(self) -> str:
        """Key of the sequence mask in the features dict."""
        return self._sequence_length_mask

    @property
    def static_head(self) -> Head:
        """The wrapped head."""
        return self._static_head

    @property
    def logits_dimension(self) -> int:
        return self._static_head.logits_dimension

    # ----- host ---------------------------------------------------------------------------
    def prepare_labels(self, labels: ArrayLike, mask: ArrayLike | None = None) -> np.ndarray:
        """Host-side labels ``[B, T]`` (or ``[B, T, label_dimension]``) -> the static head's
        numbers, ``[B, T, label_dimension]``.

        Args:
          labels: the labels of every step.
          mask: optional ``bool [B, T]``; steps outside it are not checked (they may hold
            padding) and become 0.

        Raises:
          ValueError: the static head's label errors, for the kept steps.
        """
        labels = np.asarray(labels)
        if labels.ndim < 2:
            raise ValueError(
                "Labels of a sequential head must be [batch_size, T] (one label per step); "
                f"got shape {labels.shape}."
            )
        batch, steps = labels.shape[:2]
        keep = np.ones((batch, steps), bool) if mask is None else np.asarray(mask, bool)
        kept = self._static_head.prepare_labels(labels[keep])
        out = np.zeros((batch, steps) + kept.shape[1:], kept.dtype)
        out[keep] = kept
        return out

    # ----- device -------------------------------------------------------------------------
    def _flatten(self, labels, logits, features) -> tuple[Any, jax.Array, dict, jax.Array]:
        """``(labels [B·T, ...] or None, logits [B·T, n], features, mask [B·T])`` with the
        features holding ``mask · weights`` for the static head.

        Raises:
          ValueError: TF's messages for a missing or non-2-D mask, a missing feature
            column, logits or labels of rank < 2.
        """
        if features is None or self.input_sequence_mask_key not in features:
            found = [] if features is None else list(features.keys())
            raise ValueError(
                f"The provided sequence_length_mask key `{self.input_sequence_mask_key}` should "
                f"be included in the features dictionary, but was not found. Found keys: "
                f"{found}."
            )
        mask = jnp.asarray(features[self.input_sequence_mask_key])
        if mask.ndim != 2:
            raise ValueError(f"Mask is expected to have two dimensions, got {mask.ndim} instead.")
        logits = jnp.asarray(logits)
        if logits.ndim < 3:
            raise ValueError(
                "Logits of a sequential head must be [batch_size, T, logits_dimension]; got "
                f"shape {tuple(logits.shape)}."
            )
        batch, steps = logits.shape[:2]
        mask = _fit_steps(mask.astype(bool), steps, False)
        flat_mask = mask.reshape(batch * steps)
        flat = {}
        for column in self._feature_columns:
            if column not in features:
                raise ValueError(f"`{column}` column expected in features dictionary.")
            value = _fit_steps(jnp.asarray(features[column], jnp.float32), steps, 0.0)
            flat[column] = value.reshape((batch * steps,) + value.shape[2:])
        weights = flat_mask.astype(jnp.float32)
        if self._static_head.weight_column is not None:
            column = self._static_head.weight_column
            if column not in flat:
                raise ValueError(f"`{column}` column expected in features dictionary.")
            weights = weights * flat[column].reshape(batch * steps)
        flat[_MASK_WEIGHT] = weights
        flat_logits = logits.reshape(batch * steps, logits.shape[-1])
        flat_labels = None
        if labels is not None:
            labels = jnp.asarray(labels)
            if labels.ndim < 2:
                raise ValueError(
                    "Labels of a sequential head must be [batch_size, T]; got shape "
                    f"{tuple(labels.shape)}."
                )
            labels = _fit_steps(labels, steps, 0)
            keep = mask.reshape(mask.shape + (1,) * (labels.ndim - 2))
            labels = jnp.where(keep, labels, jnp.zeros((), labels.dtype))  # padding unread
            flat_labels = labels.reshape((batch * steps,) + labels.shape[2:])
        return flat_labels, flat_logits, flat, flat_mask

    def loss(
        self,
        labels: ArrayLike,
        logits: ArrayLike,
        features: Mapping[str, Any] | None = None,
        mode: str | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> jax.Array:
        """The static head's loss over the kept steps, a float32 scalar.

        ``SUM``: ``Σ w·l`` over kept steps; ``SUM_OVER_BATCH_SIZE``: that divided by the
        number of kept steps (times ``label_dimension``), TF's reduction of the flattened
        batch; plus ``Σ regularization_losses``.
        """
        del mode
        labels, logits, flat, mask = self._flatten(labels, logits, features)
        _, _, unweighted, weights = self._masked._checked(labels, logits, flat)
        total = jnp.sum(unweighted * weights)
        if self.loss_reduction != Reduction.SUM:
            count = jnp.sum(mask.astype(jnp.float32)) * unweighted.shape[-1]
            total = jnp.where(count > 0, total / jnp.maximum(count, 1.0), 0.0)
        if regularization_losses is not None:
            total = total + regularization_total(regularization_losses)
        return total

    def eval_metrics(
        self,
        labels: ArrayLike,
        logits: ArrayLike,
        features: Mapping[str, Any] | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> dict[str, metrics.Metric]:
        """The static head's metrics over the kept steps (masked steps weigh 0)."""
        labels, logits, flat, _ = self._flatten(labels, logits, features)
        return self._masked.eval_metrics(labels, logits, flat, regularization_losses)

    def predictions(self, logits: ArrayLike, keys: Sequence[str] | None = None) -> dict:
        """The static head's predictions for every step: ``[B, T, ...]``."""
        logits = jnp.asarray(logits)
        batch, steps = logits.shape[:2]
        flat = self._static_head.predictions(logits.reshape(batch * steps, -1), keys)
        # jax.tree.map: string predictions (IndexToString) reshape their ids.
        return jax.tree.map(lambda v: v.reshape((batch, steps) + v.shape[1:]), flat)

    def _export_outputs(self, predictions: dict) -> dict:
        from canned.head.keys import DEFAULT_SERVING_KEY, PREDICT_SERVING_KEY

        output = PredictOutput(predictions)
        return {DEFAULT_SERVING_KEY: output, PREDICT_SERVING_KEY: output}

    def create_estimator_spec(
        self,
        features: Mapping[str, Any] | None,
        mode: str,
        logits: ArrayLike,
        labels: ArrayLike | None = None,
        optimizer=None,
        trainable_variables: Sequence[str] | None = None,
        train_op_fn=None,
        update_ops: Sequence[Any] | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> EstimatorSpec:
        """As :meth:`Head.create_estimator_spec`, per step; PREDICT adds the sequence mask
        to the predictions (under ``input_sequence_mask_key``), as TF. Exports serve the
        per-step predictions as a ``PredictOutput`` (TF's static head outputs do not apply
        to ``[B, T, ...]`` tensors)."""
        if mode == ModeKeys.PREDICT:
            predictions = self.predictions(logits)
            if features is None or self.input_sequence_mask_key not in features:
                self._flatten(None, logits, features)  # raises TF's message
            predictions[self.input_sequence_mask_key] = jnp.asarray(
                features[self.input_sequence_mask_key]
            )
            return EstimatorSpec(
                mode=mode,
                predictions=predictions,
                export_outputs=self._export_outputs(predictions),
            )
        return super().create_estimator_spec(
            features,
            mode,
            logits,
            labels=labels,
            optimizer=optimizer,
            trainable_variables=trainable_variables,
            train_op_fn=train_op_fn,
            update_ops=update_ops,
            regularization_losses=regularization_losses,
        )


def _fit_steps(value: jax.Array, steps: int, fill) -> jax.Array:
    """``value [B, T', ...]`` cut or padded (with ``fill``) to ``T = steps``: labels and
    masks given for the raw sequences meet logits padded by the host phase."""
    if value.ndim < 2 or value.shape[1] == steps:
        return value
    if value.shape[1] > steps:
        return value[:, :steps]
    pad = [(0, 0), (0, steps - value.shape[1])] + [(0, 0)] * (value.ndim - 2)
    return jnp.pad(value, pad, constant_values=fill)
