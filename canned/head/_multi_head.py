"""``MultiHead``: several heads on one model, losses summed with ``head_weights``
(``tf.estimator.MultiHead``, TF 2.15's ``multi_head.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

from canned.head import _base
from canned.head._checks import regularization_total
from canned.head.keys import DEFAULT_SERVING_KEY, PREDICT_SERVING_KEY, MetricKeys
from estimator import metrics
from estimator import summary as est_summary
from estimator.mode_keys import ModeKeys
from estimator.model import variables as est_variables
from estimator.model.export_output import PredictOutput
from estimator.model.spec import EstimatorSpec

__all__ = ["MultiHead"]


class MultiHead(_base.Head):
    """Merges several named heads for multi-objective learning (TF 2.15's ``MultiHead``).

    * Loss: ``Σ head_weights[i] · heads[i].loss`` (+ regularization), each head on its own
      logits and labels.
    * Logits: ``{head.name: [B, head.logits_dimension]}``, or one array
      ``[B, Σ logits_dimension]`` split along the last axis in the heads' order.
    * Labels: ``{head.name: labels}``; :meth:`prepare_labels` prepares each head's on the
      host (string labels of a head with a vocabulary become ids there).
    * Predictions: keyed ``(head.name, key)``, as TF.
    * Eval metrics: ``loss/<head>`` (the mean over batches of each head's training loss),
      ``regularization_loss/<name>`` when given, and every head's own metrics (their keys
      carry the head's name).
    * Export outputs: ``serving_default`` is the first head's default output; each head's
      outputs appear as ``<head>`` (its default) and ``<head>/<key>``; ``predict`` merges
      every head's predictions as ``<head>/<key>``.

    Args:
      heads: a non-empty list or tuple of heads, each with a ``name``. The first is
        served by default.
      head_weights: optional weights of the heads' losses, one per head (default: 1).

    Raises:
      ValueError: TF 2.15's messages for no heads, a head without a name, or
        ``head_weights`` of another length.
    """

    def __init__(self, heads: Sequence[_base.Head], head_weights: Sequence[float] | None = None):
        if not heads:
            raise ValueError(f"Must specify heads. Given: {heads}")
        if head_weights and len(head_weights) != len(heads):
            raise ValueError(
                "heads and head_weights must have the same size. Given len(heads): "
                f"{len(heads)}. Given len(head_weights): {len(head_weights)}."
            )
        for head in heads:
            if head.name is None:
                raise ValueError(f"All given heads must have name specified. Given: {head}")
        self._heads = tuple(heads)
        self._head_weights = tuple(float(w) for w in head_weights) if head_weights else ()
        super().__init__(
            weight_column=None,
            loss_reduction=self._heads[0].loss_reduction,
            loss_fn=None,
            name="_".join(h.name for h in self._heads),
        )

    @property
    def heads(self) -> tuple[_base.Head, ...]:
        return self._heads

    @property
    def logits_dimension(self) -> int:
        """The sum of the heads' logits dimensions."""
        return sum(h.logits_dimension for h in self._heads)

    @property
    def loss_reduction(self) -> str:
        """The heads' common reduction.

        Raises:
          ValueError: TF's message when the heads' reductions differ.
        """
        reductions = [h.loss_reduction for h in self._heads]
        if len(set(reductions)) > 1:
            raise ValueError(
                f"The loss_reduction must be the same for different heads. Given: {reductions}"
            )
        return reductions[0]

    @property
    def weight_column(self) -> str | None:
        """The heads' weight column, for a canned estimator's input (one at most).

        Raises:
          ValueError: heads weighted by different columns (a canned estimator passes one
            weight feature through; use a custom ``model_fn`` for several).
        """
        columns = {h.weight_column for h in self._heads} - {None}
        if len(columns) > 1:
            raise ValueError(
                f"The heads are weighted by different columns {sorted(columns)}; a canned "
                "estimator passes one weight feature through. Give every head the same "
                "weight_column, or call MultiHead.create_estimator_spec in your own model_fn."
            )
        return next(iter(columns), None)

    # ----- logits and labels ----------------------------------------------------------------
    def _split_logits(self, logits: Any) -> dict:
        names = [h.name for h in self._heads]
        if isinstance(logits, Mapping):
            missing = [n for n in names if n not in logits]
            if missing:
                raise ValueError(f"logits has missing values for head(s): {missing}")
            return dict(logits)
        logits = jnp.asarray(logits)
        dims = [h.logits_dimension for h in self._heads]
        if logits.shape[-1] != sum(dims):
            # TF 2.15 prints the two numbers of the last sentence the other way round.
            raise ValueError(
                f"Could not split logits of shape {list(logits.shape)} among the heads with "
                f"individual logits dimensions: {dims}. The last dimension of the logits "
                f"tensor should equal {sum(dims)} but is {logits.shape[-1]}."
            )
        out, start = {}, 0
        for head, dim in zip(self._heads, dims, strict=True):
            out[head.name] = logits[..., start : start + dim]
            start += dim
        return out

    def _check_labels(self, labels: Any) -> dict:
        if not isinstance(labels, Mapping):
            raise ValueError(f"labels must be a dict. Given: {labels}")
        missing = [h.name for h in self._heads if h.name not in labels]
        if missing:
            raise ValueError(f"labels has missing values for head(s): {missing}")
        return labels

    def prepare_labels(self, labels: Any) -> dict:
        """``{head.name: head.prepare_labels(labels[head.name])}`` (host side).

        Raises:
          ValueError: labels that are not a dict or lack a head's entry (TF's messages),
            and each head's own label errors.
        """
        labels = self._check_labels(labels)
        return {h.name: h.prepare_labels(labels[h.name]) for h in self._heads}

    # ----- loss, predictions, metrics ------------------------------------------------------
    def _head_losses(self, labels, logits, features) -> list[jax.Array]:
        logits = self._split_logits(logits)
        labels = self._check_labels(labels)
        return [h.loss(labels[h.name], logits[h.name], features=features) for h in self._heads]

    def loss(
        self,
        labels: Mapping[str, ArrayLike],
        logits: Any,
        features: Mapping[str, Any] | None = None,
        mode: str | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> jax.Array:
        """``Σ head_weights[i] · heads[i].loss + Σ regularization_losses`` (TF's order)."""
        del mode
        losses = self._head_losses(labels, logits, features)
        if self._head_weights:
            losses = [loss * w for loss, w in zip(losses, self._head_weights, strict=True)]
        total = sum(losses[1:], losses[0])
        if regularization_losses is not None:
            total = total + regularization_total(regularization_losses)
        return total

    def predictions(self, logits: Any, keys: Sequence[str] | None = None) -> dict:
        """``{(head.name, key): prediction}`` of every head (``keys`` is ignored, as TF)."""
        del keys
        logits = self._split_logits(logits)
        return {
            (h.name, key): value
            for h in self._heads
            for key, value in h.predictions(logits[h.name]).items()
        }

    def eval_metrics(
        self,
        labels: Mapping[str, ArrayLike],
        logits: Any,
        features: Mapping[str, Any] | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> dict[str, metrics.Metric]:
        """``loss/<head>``, ``regularization_loss/<name>`` and every head's metrics."""
        split = self._split_logits(logits)
        labels = self._check_labels(labels)
        out = {}
        if regularization_losses is not None:
            out[self._summary_key(MetricKeys.LOSS_REGULARIZATION)] = metrics.mean(
                regularization_total(regularization_losses)
            )
        losses = self._head_losses(labels, split, features)
        for head, loss in zip(self._heads, losses, strict=True):
            out[f"{MetricKeys.LOSS}/{head.name}"] = metrics.mean(loss)
        for head in self._heads:
            out.update(head.eval_metrics(labels[head.name], split[head.name], features))
        return out

    def _merged_export_outputs(self, logits: dict, features) -> dict:
        merged, predict = {}, {}
        for index, head in enumerate(self._heads):
            spec = head.create_estimator_spec(features, ModeKeys.PREDICT, logits[head.name])
            outputs = spec.export_outputs
            if index == 0:
                merged[DEFAULT_SERVING_KEY] = _default_output(outputs, head.name)
            for key, output in outputs.items():
                merged[head.name if key == DEFAULT_SERVING_KEY else f"{head.name}/{key}"] = output
                if key == PREDICT_SERVING_KEY and isinstance(output, PredictOutput):
                    for name, value in output.outputs.items():
                        predict[f"{head.name}/{name}"] = value
        merged[PREDICT_SERVING_KEY] = PredictOutput(predict)
        return merged

    # ----- EstimatorSpec ---------------------------------------------------------------------
    def create_estimator_spec(
        self,
        features: Mapping[str, Any] | None,
        mode: str,
        logits: Any,
        labels: Mapping[str, ArrayLike] | None = None,
        optimizer: optax.GradientTransformation | None = None,
        trainable_variables: Sequence[str] | None = None,
        train_op_fn: Callable[[jax.Array], optax.GradientTransformation] | None = None,
        update_ops: Sequence[Any] | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> EstimatorSpec:
        """The merged ``EstimatorSpec`` (see the class docstring; arguments as
        ``Head.create_estimator_spec``, with ``logits`` and ``labels`` per head).

        Raises:
          ValueError: an unknown mode, missing logits or labels of a head, and the train
            op errors of ``Head.create_estimator_spec``.
        """
        if mode not in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT):
            raise ValueError(f"mode={mode} unrecognized")
        split = self._split_logits(logits)
        predictions = self.predictions(split)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(
                mode=mode,
                predictions=predictions,
                export_outputs=self._merged_export_outputs(split, features),
            )
        loss = self.loss(labels, split, features, mode, regularization_losses)
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(
                mode=mode,
                predictions=predictions,
                loss=loss,
                eval_metric_ops=self.eval_metrics(labels, split, features, regularization_losses),
            )
        train_op = _base.create_train_op(
            optimizer, trainable_variables, train_op_fn, update_ops, loss
        )
        frame = est_variables.current_frame()
        if frame is not None:
            est_summary.scalar(MetricKeys.LOSS, loss)
            if regularization_losses is not None:
                est_summary.scalar(
                    MetricKeys.LOSS_REGULARIZATION, regularization_total(regularization_losses)
                )
        metrics = None
        if frame is not None and frame.train_metrics:  # RunConfig(train_metrics_steps=...)
            metrics = self.eval_metrics(labels, split, features, regularization_losses)
        return EstimatorSpec(
            mode=mode,
            predictions=predictions,
            loss=loss,
            train_op=train_op,
            eval_metric_ops=metrics,
        )


def _default_output(export_outputs: dict, head_name: str):
    """The default export output of a head's outputs (TF's ``_default_export_output``)."""
    if len(export_outputs) == 1:
        return next(iter(export_outputs.values()))
    if DEFAULT_SERVING_KEY in export_outputs:
        return export_outputs[DEFAULT_SERVING_KEY]
    raise ValueError(
        f"{head_name} did not specify default export_outputs. Given: {export_outputs} "
        "Suggested fix: Use one of the heads in tf.estimator, or include key "
        f"{DEFAULT_SERVING_KEY} in export_outputs."
    )
