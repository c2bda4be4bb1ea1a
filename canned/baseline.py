"""``BaselineClassifier`` and ``BaselineRegressor`` (``tf.estimator``, TF 2.15's V2 classes).

The model every team trains first: logits are one bias vector, ``baseline/bias``
(``[logits_dimension]``, from zero), the same for every example, so a classifier learns the
label prior (its logits approach the log-odds of the class frequencies) and a regressor the
label mean. Features are ignored but for the batch size and the weight column. The default
optimizer is FTRL at 0.3 (TF 2.15's ``canned/baseline.py``).
"""

from __future__ import annotations

import jax.numpy as jnp

import estimator as est
from canned import feature_column as fc
from canned._base import (
    HostTransform,
    classifier_head,
    model_features,
    regressor_head,
    weight_key,
)
from canned.head.keys import Reduction
from canned.optimizers import get_optimizer_instance

__all__ = ["BaselineClassifier", "BaselineEstimator", "BaselineRegressor"]

_LEARNING_RATE = 0.3
_BATCH = "baseline/batch_size"  # the host phase's [batch_size, 0] array


class _Baseline(est.Estimator):
    def __init__(self, head, model_dir, weight_column, optimizer, config) -> None:
        key, _ = weight_key(weight_column)
        ops = [(_BATCH, est.preprocessing.BatchSize())]
        weight = None
        if key is not None:
            weight = est.preprocessing.InputTransform([(key, fc.numeric_column(key).host_op)])

        def model_fn(features, labels, mode, config):
            del config
            features = model_features(features, weight_column)
            bias = est.get_variable(
                "baseline/bias",
                [head.logits_dimension],
                initializer=est.initializers.zeros_initializer(),
            )
            batch_size = features[_BATCH].shape[0]
            logits = jnp.broadcast_to(bias, (batch_size, head.logits_dimension))
            est.identity(logits, "baseline/Mul")  # TF's graph name (for hooks)
            train_op = None
            if mode == est.ModeKeys.TRAIN:
                train_op = get_optimizer_instance(optimizer, learning_rate=_LEARNING_RATE)
            return head.create_estimator_spec(
                features=features, mode=mode, logits=logits, labels=labels, optimizer=train_op
            )

        self._head = head
        super().__init__(
            model_fn=model_fn,
            model_dir=model_dir,
            config=config,
            input_transform=HostTransform(est.preprocessing.InputTransform(ops), head, weight),
            fast_compile=True,  # TF 2.15 is the reference (Estimator's docstring)
        )

    @property
    def head(self):
        """The head (loss, predictions, metrics, export outputs)."""
        return self._head


class BaselineClassifier(_Baseline):
    """Predicts the label prior (``tf.estimator.BaselineClassifier``, TF 2.15).

    Args:
      model_dir: where checkpoints go.
      n_classes: number of label classes (>= 2).
      weight_column: a feature key or ``numeric_column`` of per-example loss weights.
      label_vocabulary: the class names, when labels are strings.
      optimizer: ``'Ftrl'`` (default, learning rate 0.3), another name, an optax
        transformation or a callable returning one.
      config: a ``RunConfig``.
      loss_reduction: ``"sum_over_batch_size"`` (default) or ``"sum"``.
    """

    def __init__(
        self,
        model_dir=None,
        n_classes: int = 2,
        weight_column=None,
        label_vocabulary=None,
        optimizer="Ftrl",
        config=None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
    ) -> None:
        head = classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, model_dir, weight_column, optimizer, config)


class BaselineRegressor(_Baseline):
    """Predicts the label mean (``tf.estimator.BaselineRegressor``, TF 2.15).

    Args:
      model_dir: where checkpoints go.
      label_dimension: labels per example.
      weight_column, optimizer, config, loss_reduction: as :class:`BaselineClassifier`.
    """

    def __init__(
        self,
        model_dir=None,
        label_dimension: int = 1,
        weight_column=None,
        optimizer="Ftrl",
        config=None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
    ) -> None:
        head = regressor_head(label_dimension, weight_column, loss_reduction)
        super().__init__(head, model_dir, weight_column, optimizer, config)


class BaselineEstimator(_Baseline):
    """The baseline with any head (``tf.estimator.BaselineEstimator``, TF 2.15).

    Args:
      head: a ``canned.head`` head (its ``weight_column`` feature is read too).
      model_dir, optimizer, config: as :class:`BaselineClassifier`.
    """

    def __init__(self, head, model_dir=None, optimizer="Ftrl", config=None) -> None:
        super().__init__(head, model_dir, head.weight_column, optimizer, config)
