"""``DNNLinearCombinedClassifier`` / ``Regressor``: wide & deep (TF 2.15's V2 classes).

``logits = linear logits + DNN logits`` (either part may be absent), each part trained by
its own optimizer on its own variables (TF's ``tf.group`` of two ``get_updates``; here one
``est.train_op_by_scope({"dnn": ..., "linear": ...})``). The linear part is
``canned.linear``'s (``linear/linear_model/...``, FTRL at ``min(0.005, 1/sqrt(n_columns))``
by default), the DNN part ``canned.dnn``'s (``dnn/...``, Adagrad at 0.001 by default), as
TF 2.15's ``canned/dnn_linear_combined.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import jax

import estimator as est
from canned import feature_column as fc
from canned._base import (
    classifier_head,
    host_transform,
    masks_padding,
    model_features,
    regressor_head,
)
from canned.dnn import check_hidden_units, dnn_logits, layer_summary
from canned.head.keys import Reduction
from canned.linear import LOGITS_NAME as LINEAR_LOGITS_NAME
from canned.optimizers import get_optimizer_instance

__all__ = [
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedEstimator",
    "DNNLinearCombinedRegressor",
]

_DNN_LEARNING_RATE = 0.001
_LINEAR_LEARNING_RATE = 0.005
_SPARSE_COMBINERS = ("mean", "sqrtn", "sum")


class _DNNLinearCombined(est.Estimator):
    def __init__(
        self,
        head,
        model_dir,
        linear_feature_columns,
        linear_optimizer,
        dnn_feature_columns,
        dnn_optimizer,
        dnn_hidden_units,
        dnn_activation_fn,
        dnn_dropout,
        weight_column,
        config,
        warm_start_from,
        batch_norm,
        linear_sparse_combiner,
    ) -> None:
        linear_columns = tuple(linear_feature_columns or ())
        dnn_columns = tuple(dnn_feature_columns or ())
        if not linear_columns and not dnn_columns:
            raise ValueError(
                "Either linear_feature_columns or dnn_feature_columns must be defined."
            )
        if dnn_columns and not dnn_hidden_units:
            raise ValueError(
                "dnn_hidden_units must be defined when dnn_feature_columns is specified."
            )
        if linear_sparse_combiner not in _SPARSE_COMBINERS:
            raise ValueError(
                f"sparse_combiner must be one of {list(_SPARSE_COMBINERS)}; got "
                f"{linear_sparse_combiner!r}."
            )
        hidden = check_hidden_units(dnn_hidden_units)
        linear_rate = min(_LINEAR_LEARNING_RATE, 1.0 / math.sqrt(max(len(linear_columns), 1)))

        def model_fn(features, labels, mode, config):
            del config
            features = model_features(features, weight_column)
            parts, transforms = [], {}
            training = mode == est.ModeKeys.TRAIN
            if dnn_columns:
                parts.append(
                    dnn_logits(
                        features,
                        dnn_columns,
                        hidden,
                        head.logits_dimension,
                        mode,
                        dnn_activation_fn,
                        dnn_dropout,
                        batch_norm,
                    )
                )
                if training:
                    transforms["dnn"] = get_optimizer_instance(
                        dnn_optimizer, learning_rate=_DNN_LEARNING_RATE
                    )
            if linear_columns:
                with est.variable_scope("linear"):
                    linear = fc.linear_model(
                        features,
                        linear_columns,
                        units=head.logits_dimension,
                        sparse_combiner=linear_sparse_combiner,
                    )
                    est.identity(linear, LINEAR_LOGITS_NAME)  # TF 2.15's graph names
                layer_summary(linear, "linear")
                parts.append(linear)
                if training:
                    transforms["linear"] = get_optimizer_instance(
                        linear_optimizer, learning_rate=linear_rate
                    )
            logits = parts[0] if len(parts) == 1 else est.identity(parts[0] + parts[1], "add")
            train_op = est.train_op_by_scope(transforms) if training else None
            return head.create_estimator_spec(
                features=features, mode=mode, logits=logits, labels=labels, optimizer=train_op
            )

        self._head = head
        self._feature_columns = columns = linear_columns + dnn_columns
        # Batch normalization's statistics would see the padding.
        if not batch_norm and masks_padding(head, columns, weight_column, dnn_activation_fn):
            model_fn = est.masks_padding(model_fn)
        super().__init__(
            model_fn=model_fn,
            model_dir=model_dir,
            config=config,
            warm_start_from=warm_start_from,
            input_transform=host_transform(self._feature_columns, weight_column, head),
            fast_compile=True,  # TF 2.15 is the reference (Estimator's docstring)
        )

    @property
    def head(self):
        """The head (loss, predictions, metrics, export outputs)."""
        return self._head


class DNNLinearCombinedClassifier(_DNNLinearCombined):
    """Wide & deep classifier (``tf.estimator.DNNLinearCombinedClassifier``, TF 2.15).

    Args:
      model_dir: where checkpoints go.
      linear_feature_columns: columns of the linear ("wide") part (any kind).
      linear_optimizer: default ``'Ftrl'`` at ``min(0.005, 1/sqrt(len(columns)))``; a
        name, an optax transformation or a callable returning one.
      dnn_feature_columns: dense columns of the DNN ("deep") part.
      dnn_optimizer: default ``'Adagrad'`` at 0.001.
      dnn_hidden_units: units per hidden layer; required with ``dnn_feature_columns``.
      dnn_activation_fn: default ``jax.nn.relu``.
      dnn_dropout: fraction dropped in training, or None.
      n_classes, weight_column, label_vocabulary: as ``canned.LinearClassifier``.
      config, warm_start_from, loss_reduction: as ``canned.LinearClassifier``.
      batch_norm: batch normalization after each hidden layer.
      linear_sparse_combiner: ``"sum"`` (default), ``"mean"`` or ``"sqrtn"``.

    Raises:
      ValueError: TF's messages when both column lists are empty, or DNN columns come
        without ``dnn_hidden_units``.
    """

    def __init__(
        self,
        model_dir=None,
        linear_feature_columns: Iterable | None = None,
        linear_optimizer="Ftrl",
        dnn_feature_columns: Iterable | None = None,
        dnn_optimizer="Adagrad",
        dnn_hidden_units: Sequence[int] | None = None,
        dnn_activation_fn: Callable = jax.nn.relu,
        dnn_dropout: float | None = None,
        n_classes: int = 2,
        weight_column=None,
        label_vocabulary=None,
        config=None,
        warm_start_from=None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        batch_norm: bool = False,
        linear_sparse_combiner: str = "sum",
    ) -> None:
        head = classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(
            head,
            model_dir,
            linear_feature_columns,
            linear_optimizer,
            dnn_feature_columns,
            dnn_optimizer,
            dnn_hidden_units,
            dnn_activation_fn,
            dnn_dropout,
            weight_column,
            config,
            warm_start_from,
            batch_norm,
            linear_sparse_combiner,
        )


class DNNLinearCombinedRegressor(_DNNLinearCombined):
    """Wide & deep regressor (``tf.estimator.DNNLinearCombinedRegressor``, TF 2.15).

    Args: as :class:`DNNLinearCombinedClassifier`, with ``label_dimension`` (labels per
    example) instead of ``n_classes`` and ``label_vocabulary``.
    """

    def __init__(
        self,
        model_dir=None,
        linear_feature_columns: Iterable | None = None,
        linear_optimizer="Ftrl",
        dnn_feature_columns: Iterable | None = None,
        dnn_optimizer="Adagrad",
        dnn_hidden_units: Sequence[int] | None = None,
        dnn_activation_fn: Callable = jax.nn.relu,
        dnn_dropout: float | None = None,
        label_dimension: int = 1,
        weight_column=None,
        config=None,
        warm_start_from=None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        batch_norm: bool = False,
        linear_sparse_combiner: str = "sum",
    ) -> None:
        head = regressor_head(label_dimension, weight_column, loss_reduction)
        super().__init__(
            head,
            model_dir,
            linear_feature_columns,
            linear_optimizer,
            dnn_feature_columns,
            dnn_optimizer,
            dnn_hidden_units,
            dnn_activation_fn,
            dnn_dropout,
            weight_column,
            config,
            warm_start_from,
            batch_norm,
            linear_sparse_combiner,
        )


class DNNLinearCombinedEstimator(_DNNLinearCombined):
    """Wide & deep with any head (``tf.estimator.DNNLinearCombinedEstimator``, TF 2.15;
    TF's signature has no ``warm_start_from`` here).

    Args:
      head: a ``canned.head`` head (its ``weight_column`` feature is read too).
      model_dir, linear_feature_columns, linear_optimizer: as
        :class:`DNNLinearCombinedClassifier`.
      dnn_feature_columns, dnn_optimizer, dnn_hidden_units: the same.
      dnn_activation_fn, dnn_dropout, config, batch_norm, linear_sparse_combiner: the
        same.
    """

    def __init__(
        self,
        head,
        model_dir=None,
        linear_feature_columns: Iterable | None = None,
        linear_optimizer="Ftrl",
        dnn_feature_columns: Iterable | None = None,
        dnn_optimizer="Adagrad",
        dnn_hidden_units: Sequence[int] | None = None,
        dnn_activation_fn: Callable = jax.nn.relu,
        dnn_dropout: float | None = None,
        config=None,
        batch_norm: bool = False,
        linear_sparse_combiner: str = "sum",
    ) -> None:
        super().__init__(
            head,
            model_dir,
            linear_feature_columns,
            linear_optimizer,
            dnn_feature_columns,
            dnn_optimizer,
            dnn_hidden_units,
            dnn_activation_fn,
            dnn_dropout,
            head.weight_column,
            config,
            None,
            batch_norm,
            linear_sparse_combiner,
        )
