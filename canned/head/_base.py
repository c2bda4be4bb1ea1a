"""The ``Head`` interface and the checks every head shares (TF 2.15's ``base_head.py``).

A head sits on top of a model's logits and knows how to turn them into a loss,
predictions, evaluation metrics, export outputs and finally an ``EstimatorSpec``::

    import canned.head as head_lib

    head = head_lib.BinaryClassHead()

    def model_fn(features, labels, mode):
        logits = est.layers.dense(features["x"], head.logits_dimension)
        return head.create_estimator_spec(
            features=features, mode=mode, logits=logits, labels=labels,
            optimizer=optax.adagrad(0.1))

What differs from TF under JAX:

* Labels reach the device as numbers. String labels (``label_vocabulary``) are mapped to
  ids on the host by the head's ``prepare_labels`` (a canned estimator calls it in its input
  transform); the device methods take ids. Label ranges are checked by ``prepare_labels``,
  and by the device methods only when called on concrete arrays: values inside ``jax.jit``
  cannot be checked without a host sync.
* ``metrics()`` + ``update_metrics()`` are one method, ``eval_metrics``, returning the
  per-batch streaming metrics of ``estimator.metrics``; the Estimator merges them.
* ``optimizer`` is an ``optax.GradientTransformation`` (it becomes ``train_op``).
  ``trainable_variables`` (optional) names the variables to train; ``update_ops`` is
  accepted for TF compatibility (``estimator.assign`` updates always apply in TRAIN mode).
* ``weight_column`` is the key of a numeric feature (TF also takes a ``NumericColumn``).
* Inside ``model_fn`` the head names its labels, losses and predictions as TF 2.15's graph
  does (``head/losses/weighted_loss/value``, ``head/predictions/probabilities``, ...), so a
  ``LoggingTensorHook`` can fetch them by those names; ``graph_names`` says where
  (``canned.head._graph_names``; TF 1's estimators use TF 1's names).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from canned.head import _checks, _graph_names
from canned.head._checks import VALIDATION_ERROR_MSG, regularization_total
from canned.head.keys import (
    CLASSIFY_SERVING_KEY,
    DEFAULT_SERVING_KEY,
    PREDICT_SERVING_KEY,
    MetricKeys,
    PredictionKeys,
)
from estimator import metrics
from estimator import summary as est_summary
from estimator.mode_keys import ModeKeys
from estimator.model import variables as est_variables
from estimator.model.export_output import ClassificationOutput, PredictOutput
from estimator.model.spec import EstimatorSpec
from estimator.model.strings import IndexToString

__all__ = ["Head"]


# --------------------------------------------------------------------------- train op


def _restrict_to(optimizer: optax.GradientTransformation, names: tuple[str, ...]):
    """``optimizer`` on the variables ``names``; the other trainable variables stay fixed."""

    def label(params):
        unknown = sorted(set(names) - set(params))
        if unknown:
            raise ValueError(
                f"trainable_variables names variables that do not exist: {unknown}. The "
                f"model's trainable variables are {sorted(params)}."
            )
        return {k: "train" if k in names else "frozen" for k in params}

    return optax.multi_transform({"train": optimizer, "frozen": optax.set_to_zero()}, label)


def create_train_op(
    optimizer: optax.GradientTransformation | None,
    trainable_variables: Sequence[str] | None,
    train_op_fn: Callable | None,
    update_ops: Sequence[Any] | None,
    regularized_training_loss: jax.Array,
) -> optax.GradientTransformation:
    """TF's ``create_estimator_spec_train_op`` with an optax optimizer as the train op."""
    if update_ops is not None and not isinstance(update_ops, list | tuple):
        raise ValueError(VALIDATION_ERROR_MSG.format("update_ops", type(update_ops)))
    if optimizer is not None:
        if train_op_fn is not None:
            raise ValueError("train_op_fn and optimizer cannot both be set.")
        if not isinstance(optimizer, optax.GradientTransformation):
            raise ValueError(
                "The given optimizer is not an optax.GradientTransformation instance. Received "
                f"optimizer of type {type(optimizer)}. Pass e.g. optax.adagrad(0.05) or "
                "canned.optimizers.get_optimizer_instance('Ftrl', 0.2)."
            )
        if trainable_variables is None:
            return optimizer
        if not isinstance(trainable_variables, list | tuple):
            raise ValueError(
                VALIDATION_ERROR_MSG.format("trainable_variables", type(trainable_variables))
            )
        bad = [v for v in trainable_variables if not isinstance(v, str)]
        if bad:
            raise ValueError(
                "trainable_variables must hold variable names such as 'dense/kernel' (JAX "
                f"arrays carry no name); got {bad!r}. Leave it None to train every trainable "
                "variable."
            )
        return _restrict_to(optimizer, tuple(trainable_variables))
    if train_op_fn is not None:
        return train_op_fn(regularized_training_loss)
    raise ValueError("train_op_fn and optimizer cannot both be None.")


# ------------------------------------------------------------------------------ Head


class Head(abc.ABC):
    """Interface for the head/top of a model (``tf.estimator.Head``).

    Given logits ``[batch_size, logits_dimension]``, a head computes the loss, predictions,
    evaluation metrics, export outputs and the ``EstimatorSpec`` of each mode. Every method
    but ``prepare_labels`` traces under ``jax.jit`` without host syncs.

    Args:
      weight_column: key of the feature holding per-example weights (``[B]`` or
        ``[B, 1]``, numeric); each example's loss and metrics are multiplied by its weight.
      loss_reduction: a :class:`canned.head.Reduction` other than ``NONE``.
      loss_fn: optional ``loss_fn(labels, logits[, features][, loss_reduction])`` returning
        the unreduced loss ``[B, label_dimension]``.
      name: suffix of the metric and summary keys (``"auc/" + name``).

    Raises:
      ValueError: an invalid ``loss_reduction`` or ``loss_fn`` signature (TF's messages).
      TypeError: a ``weight_column`` that is not a string.
    """

    _allow_per_logit_weights = False  # weights [B, label_dimension] allowed (regression)
    _label_dimension = 1  # last dimension of the processed labels and unreduced loss
    _per_example_loss_name: str | None = None  # its name in TF's graph (``_graph_names``)

    #: Where the head's values are named for hooks inside ``model_fn`` (TF 2.15's heads'
    #: names by default; TF 1's canned estimators set TF 1's, see ``_graph_names``).
    graph_names: _graph_names.GraphNames = _graph_names.TF2

    def __init__(
        self,
        *,
        weight_column: str | None,
        loss_reduction: str,
        loss_fn: Callable | None,
        name: str | None,
    ) -> None:
        _checks.validate_loss_reduction(loss_reduction)
        if loss_fn:
            _checks.validate_loss_fn_args(loss_fn)
        _checks.validate_weight_column(weight_column)
        self._weight_column = weight_column
        self._loss_reduction = loss_reduction
        self._loss_fn = loss_fn
        self._name = name

    # ----- properties ---------------------------------------------------------------------
    @property
    def name(self) -> str | None:
        """The head's name (suffix of its metric keys), or None."""
        return self._name

    @property
    @abc.abstractmethod
    def logits_dimension(self) -> int:
        """Size of the last dimension of the logits the head expects."""

    @property
    def weight_column(self) -> str | None:
        """The key of the per-example weight feature, or None."""
        return self._weight_column

    @property
    def loss_reduction(self) -> str:
        """The :class:`canned.head.Reduction` of the training loss."""
        return self._loss_reduction

    def _summary_key(self, key: str) -> str:
        return f"{key}/{self._name}" if self._name else key

    # ----- what subclasses provide ---------------------------------------------------------
    @abc.abstractmethod
    def prepare_labels(self, labels: ArrayLike) -> np.ndarray:
        """Host-side (NumPy) labels -> what the device methods take; see subclasses."""

    # The single-label heads' hooks of loss() and create_estimator_spec() below; a head
    # that overrides those (MultiHead) does not use them.
    def _processed_labels(self, logits: jax.Array, labels: Any) -> jax.Array:
        """Labels checked and reshaped to ``[B, label_dimension]`` on the device."""
        raise NotImplementedError(f"{type(self).__name__} does not process labels itself.")

    def _default_unweighted_loss(self, labels: jax.Array, logits: jax.Array) -> jax.Array:
        """The head's own per-example loss ``[B, label_dimension]``."""
        raise NotImplementedError(f"{type(self).__name__} has no per-example loss.")

    @abc.abstractmethod
    def predictions(self, logits: ArrayLike, keys: Sequence[str] | None = None) -> dict:
        """Dict of predictions from ``logits`` (all valid keys when ``keys`` is None)."""

    @abc.abstractmethod
    def eval_metrics(
        self,
        labels: ArrayLike,
        logits: ArrayLike,
        features: Mapping[str, Any] | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> dict[str, metrics.Metric]:
        """The evaluation metrics of one batch, ``{key: estimator.metrics.Metric}``."""

    def _export_outputs(self, predictions: dict) -> dict:
        """The PREDICT-mode export outputs for ``predictions``."""
        raise NotImplementedError(f"{type(self).__name__} has no export outputs of its own.")

    # ----- loss ----------------------------------------------------------------------------
    def _unweighted_loss_and_weights(
        self, logits: jax.Array, labels: jax.Array, features: Mapping[str, Any] | None
    ) -> tuple[jax.Array, jax.Array | None]:
        if self._loss_fn:
            unweighted = _checks.call_loss_fn(
                self._loss_fn,
                labels,
                logits,
                features,
                self._loss_reduction,
                expected_loss_dim=self._label_dimension,
            )
        else:
            unweighted = self._default_unweighted_loss(labels, logits)
        weights = _checks.get_weights_and_check_match_logits(
            features,
            self._weight_column,
            logits,
            allow_per_logit_weights=self._allow_per_logit_weights,
        )
        return unweighted, weights

    def loss(
        self,
        labels: ArrayLike,
        logits: ArrayLike,
        features: Mapping[str, Any] | None = None,
        mode: str | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> jax.Array:
        """The regularized training loss, a float32 scalar.

        ``reduce(weights · loss(labels, logits)) + Σ regularization_losses`` with the head's
        ``loss_reduction`` (TF 2.15's ``Head.loss``).

        Args:
          labels: ``[B]`` or ``[B, label_dimension]`` numbers (see ``prepare_labels``).
          logits: float ``[B, logits_dimension]``.
          features: the features dict; needed when the head has a ``weight_column``.
          mode: unused (TF's signature).
          regularization_losses: optional list of scalars added to the loss.

        Raises:
          ValueError: missing or mis-shaped labels, logits or weights (TF's messages), or
            (for concrete inputs) labels out of range.
        """
        del mode
        loss = self._named_loss(labels, logits, features, name=False)
        if regularization_losses is not None:
            loss = loss + regularization_total(regularization_losses)
        return loss

    def _checked(self, labels, logits, features) -> tuple[jax.Array, ...]:
        """What the loss and every ``eval_metrics`` start from: ``(logits, labels,
        unweighted, weights)``, the logits checked against ``logits_dimension``, the labels
        processed, the per-example loss and the weights (None without a weight column)."""
        logits = _checks.check_logits_final_dim(logits, self.logits_dimension)
        labels = self._processed_labels(logits, labels)
        unweighted, weights = self._unweighted_loss_and_weights(logits, labels, features)
        return logits, labels, unweighted, weights

    def _named_loss(self, labels, logits, features, *, name: bool) -> jax.Array:
        """The reduced loss before regularization; with ``name``, its parts are named for
        hooks (``graph_names``)."""
        logits, labels, unweighted, weights = self._checked(labels, logits, features)
        loss = _checks.reduce_weighted_loss(unweighted, weights, self._loss_reduction)
        if name:
            _graph_names.name_losses(
                self.graph_names,
                per_example=None if self._loss_fn else self._per_example_loss_name,
                labels=labels,
                unweighted=unweighted,
                weights=weights,
                loss=loss,
                reduction=self._loss_reduction,
            )
        return loss

    # ----- predictions -------------------------------------------------------------------
    def _prediction_keys(
        self, keys: Sequence[str] | None, valid_keys: Sequence[str], logits: ArrayLike
    ) -> tuple[Sequence[str], jax.Array]:
        """``(keys, logits)`` for ``predictions``: the keys checked (all valid ones when
        None), the logits checked against ``logits_dimension`` (TF's messages)."""
        if keys:
            _checks.check_prediction_keys(keys, valid_keys)
        else:
            keys = valid_keys
        return keys, _checks.check_logits_final_dim(logits, self.logits_dimension)

    def _class_predictions(
        self, out: dict, keys: Sequence[str], scores: jax.Array, n_classes: int
    ) -> None:
        """Adds the requested ``class_ids``/``classes`` (the argmax of ``scores [B, n]``,
        ``[B, 1]``) and ``all_class_ids``/``all_classes`` (``[B, n_classes]``) to ``out``."""
        keys_ = PredictionKeys
        if keys_.CLASS_IDS in keys or keys_.CLASSES in keys:
            class_ids = jnp.argmax(scores, axis=-1).astype(jnp.int32)[..., None]
            if keys_.CLASS_IDS in keys:
                out[keys_.CLASS_IDS] = class_ids
            if keys_.CLASSES in keys:
                out[keys_.CLASSES] = IndexToString(class_ids, self._class_names)
        if keys_.ALL_CLASS_IDS in keys or keys_.ALL_CLASSES in keys:
            all_ids = _checks.all_class_ids(scores, n_classes)
            if keys_.ALL_CLASS_IDS in keys:
                out[keys_.ALL_CLASS_IDS] = all_ids
            if keys_.ALL_CLASSES in keys:
                out[keys_.ALL_CLASSES] = IndexToString(all_ids, self._class_names)

    # ----- metrics -------------------------------------------------------------------------
    def _mean_loss_metrics(
        self,
        unweighted: jax.Array,
        weights: jax.Array | None,
        regularization_losses: Sequence[ArrayLike] | None,
    ) -> dict[str, metrics.Metric]:
        out = {self._summary_key(MetricKeys.LOSS_MEAN): metrics.mean(unweighted, weights)}
        if regularization_losses is not None:
            out[self._summary_key(MetricKeys.LOSS_REGULARIZATION)] = metrics.mean(
                regularization_total(regularization_losses)
            )
        return out

    def _threshold_metrics(
        self,
        thresholds: Sequence[float],
        labels: jax.Array,
        probabilities: jax.Array,
        weights: jax.Array | None,
    ) -> dict[str, metrics.Metric]:
        """``accuracy/precision/recall/positive_threshold_<t>`` of ``probabilities > t``
        (Keras' ``BinaryAccuracy``/``Precision``/``Recall`` at ``t``, as TF's heads)."""
        out = {}
        for t in thresholds:
            positive = probabilities > t
            out[self._summary_key(MetricKeys.ACCURACY_AT_THRESHOLD % t)] = metrics.accuracy(
                labels, positive.astype(jnp.float32), weights
            )
            out[self._summary_key(MetricKeys.PRECISION_AT_THRESHOLD % t)] = metrics.precision(
                labels, positive, weights
            )
            out[self._summary_key(MetricKeys.RECALL_AT_THRESHOLD % t)] = metrics.recall(
                labels, positive, weights
            )
        return out

    # ----- EstimatorSpec ---------------------------------------------------------------------
    def create_estimator_spec(
        self,
        features: Mapping[str, Any] | None,
        mode: str,
        logits: ArrayLike,
        labels: ArrayLike | None = None,
        optimizer: optax.GradientTransformation | None = None,
        trainable_variables: Sequence[str] | None = None,
        train_op_fn: Callable[[jax.Array], optax.GradientTransformation] | None = None,
        update_ops: Sequence[Any] | None = None,
        regularization_losses: Sequence[ArrayLike] | None = None,
    ) -> EstimatorSpec:
        """The ``EstimatorSpec`` for ``mode`` (TF 2.15's ``Head.create_estimator_spec``).

        * PREDICT: ``predictions`` (all keys) and the head's export outputs.
        * EVAL: also the regularized ``loss`` and ``eval_metric_ops = eval_metrics(...)``.
        * TRAIN: also ``train_op``: ``optimizer`` (restricted to ``trainable_variables``
          when given), or ``train_op_fn(loss)``. Records the summaries ``loss`` and
          ``regularization_loss`` (with the head's name suffix) when run inside
          ``model_fn``; in a train step that reports training metrics
          (``RunConfig(train_metrics_steps=...)``), also the EVAL metrics, computed on the
          training batch.

        Args:
          features: the features dict (for the ``weight_column``).
          mode: a ``ModeKeys`` value.
          logits: float ``[B, logits_dimension]``.
          labels: ``[B]`` or ``[B, label_dimension]``, required in TRAIN and EVAL.
          optimizer: an ``optax.GradientTransformation``; exactly one of ``optimizer`` and
            ``train_op_fn`` in TRAIN mode.
          trainable_variables: None (train every trainable variable) or a list of variable
            names (``"dense/kernel"``); the others get zero updates.
          train_op_fn: ``loss -> optax.GradientTransformation``.
          update_ops: None or a list/tuple, ignored: ``estimator.assign`` updates made in
            ``model_fn`` always apply in TRAIN mode.
          regularization_losses: optional list of scalars added to the loss (and reported
            as the ``regularization_loss`` metric).

        Returns:
          An ``estimator.EstimatorSpec``.

        Raises:
          ValueError: an unknown mode; in TRAIN mode both or neither of ``optimizer`` and
            ``train_op_fn``, an optimizer that is not an optax transformation, a
            ``trainable_variables`` or ``update_ops`` that is not a list or tuple (TF's
            messages); the label, logits and weight errors of :meth:`loss`.
        """
        if mode not in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT):
            raise ValueError(
                f"mode must be one of ModeKeys.TRAIN ('train'), ModeKeys.EVAL ('eval') or "
                f"ModeKeys.PREDICT ('infer'); got {mode!r}."
            )
        predictions = self.predictions(logits)
        _graph_names.name_predictions(self.graph_names, logits, predictions)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(
                mode=mode,
                predictions=predictions,
                export_outputs=self._export_outputs(predictions),
            )
        if type(self).loss is Head.loss:  # the head's own loss: name its parts for hooks
            loss = self._named_loss(labels, logits, features, name=True)
            if regularization_losses is not None:
                loss = loss + regularization_total(regularization_losses)
        else:
            loss = self.loss(
                labels,
                logits,
                features=features,
                mode=mode,
                regularization_losses=regularization_losses,
            )
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(
                mode=mode,
                predictions=predictions,
                loss=loss,
                eval_metric_ops=self.eval_metrics(
                    labels, logits, features, regularization_losses=regularization_losses
                ),
            )
        train_op = create_train_op(optimizer, trainable_variables, train_op_fn, update_ops, loss)
        frame = est_variables.current_frame()
        if frame is not None:
            est_summary.scalar(self._summary_key(MetricKeys.LOSS), loss)
            if regularization_losses is not None:
                est_summary.scalar(
                    self._summary_key(MetricKeys.LOSS_REGULARIZATION),
                    regularization_total(regularization_losses),
                )
        metrics = None
        if frame is not None and frame.train_metrics:  # RunConfig(train_metrics_steps=...)
            metrics = self.eval_metrics(
                labels, logits, features, regularization_losses=regularization_losses
            )
        return EstimatorSpec(
            mode=mode,
            predictions=predictions,
            loss=loss,
            train_op=train_op,
            eval_metric_ops=metrics,
        )


def classification_export_outputs(predictions: dict, classes: str, **more) -> dict:
    """A classification head's PREDICT export outputs: TF's default and ``classification``
    signatures (``probabilities`` as scores, ``predictions[classes]`` as classes), the
    ``more`` ones, and ``predict`` (every prediction)."""
    classification = ClassificationOutput(
        scores=predictions[PredictionKeys.PROBABILITIES], classes=predictions[classes]
    )
    return {
        DEFAULT_SERVING_KEY: classification,
        CLASSIFY_SERVING_KEY: classification,
        **more,
        PREDICT_SERVING_KEY: PredictOutput(predictions),
    }
