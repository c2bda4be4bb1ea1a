"""``LinearClassifier`` and ``LinearRegressor`` (``tf.estimator``, TF 2.15's V2 classes).

Built as TF builds them: a head + a linear logit function over feature columns, closed
over in a ``model_fn`` given to ``estimator.Estimator``. Weights start at zero and are named
as TF names them (``linear/linear_model/<column>/weights``,
``linear/linear_model/bias_weights``); the default optimizer is FTRL at learning rate 0.2
(TF 2.15's ``optimizer='Ftrl'``).

Strings never reach the device: the feature columns' host phase and the head's label
mapping (``label_vocabulary``) run on every batch in the input pipeline, and the host phase
is saved with exports.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import estimator as est
from canned import feature_column as fc
from canned._base import (
    check_columns,
    classifier_head,
    host_transform,
    masks_padding,
    model_features,
    regressor_head,
)
from canned._ftrl import ftrl
from canned.head.keys import Reduction
from canned.optimizers import get_optimizer_instance
from canned.sdca._linear import LinearSDCA, SDCAHostTransform, loss_type_of, sdca_model_fn

__all__ = ["LinearClassifier", "LinearEstimator", "LinearRegressor"]

_LEARNING_RATE = 0.2
#: The logits' name in TF 2.15's graph under the ``linear`` scope (``canned.head._graph_names``).
LOGITS_NAME = "linear_model/linear/linear_model/linear/linear_model/weighted_sum"
_SPARSE_COMBINERS = ("mean", "sqrtn", "sum")


def _default_optimizer(columns: tuple):
    """TF 2.15's optimizer for ``optimizer=None``: FTRL at ``min(0.2, 1/sqrt(n_columns))``
    (``_get_default_optimizer_v2``; ``optimizer='Ftrl'``, the default, is 0.2)."""
    return ftrl(min(_LEARNING_RATE, 1.0 / math.sqrt(len(columns))))


def _model_fn_for(head, columns: tuple, optimizer, sparse_combiner: str, weight_column):
    def model_fn(features, labels, mode, config):
        del config
        features = model_features(features, weight_column)
        with est.variable_scope("linear"):
            logits = fc.linear_model(
                features,
                columns,
                units=head.logits_dimension,
                sparse_combiner=sparse_combiner,
            )
            est.identity(logits, LOGITS_NAME)  # TF 2.15's graph name (for hooks)
        train_op = None
        if mode == est.ModeKeys.TRAIN:
            train_op = get_optimizer_instance(optimizer, learning_rate=_LEARNING_RATE)
        return head.create_estimator_spec(
            features=features, mode=mode, logits=logits, labels=labels, optimizer=train_op
        )

    # The linear model works example by example: a padded batch's mask matters to the head.
    return est.masks_padding(model_fn) if masks_padding(head, columns, weight_column) else model_fn


class _Linear(est.Estimator):
    def __init__(
        self,
        head,
        feature_columns,
        model_dir,
        weight_column,
        optimizer,
        config,
        warm_start_from,
        sparse_combiner,
    ) -> None:
        if sparse_combiner not in _SPARSE_COMBINERS:
            raise ValueError(
                f"sparse_combiner must be one of {list(_SPARSE_COMBINERS)}; got "
                f"{sparse_combiner!r}."
            )
        columns = check_columns(feature_columns)
        transform = host_transform(columns, weight_column, head)
        self._head = head
        self._feature_columns = columns
        if isinstance(optimizer, LinearSDCA):
            if sparse_combiner != "sum":
                raise ValueError(
                    'sparse_combiner must be "sum" when optimizer is a LinearSDCA object.'
                )
            loss_type = loss_type_of(head)  # TF raises this one at the first train()
            model_fn = sdca_model_fn(head, columns, optimizer, weight_column)
            transform = SDCAHostTransform(
                transform.transform,
                head,
                optimizer.example_id_column,
                loss_type,
                transform.weight,
            )
        else:
            model_fn = _model_fn_for(
                head,
                columns,
                optimizer or _default_optimizer(columns),
                sparse_combiner,
                weight_column,
            )
        super().__init__(
            model_fn=model_fn,
            model_dir=model_dir,
            config=config,
            warm_start_from=warm_start_from,
            input_transform=transform,
            fast_compile=True,  # TF 2.15 is the reference (Estimator's docstring)
        )

    @property
    def head(self):
        """The head (loss, predictions, metrics, export outputs)."""
        return self._head


class LinearClassifier(_Linear):
    """A linear classifier (``tf.estimator.LinearClassifier``, TF 2.15).

    ``logits = sum over columns of (column input @ weights) + bias``, trained with the
    binary (``n_classes=2``: sigmoid cross-entropy) or multi-class (softmax cross-entropy)
    head. Categorical columns look up one weight row per id, combined per example with
    ``sparse_combiner``.

    Args:
      feature_columns: feature columns from ``canned.feature_column``.
      model_dir: where checkpoints go (see ``estimator.Estimator``).
      n_classes: number of label classes (>= 2).
      weight_column: a feature key, or a ``numeric_column``, holding per-example weights
        that multiply the loss.
      label_vocabulary: the class names, when labels are strings; else labels are class
        ids in ``[0, n_classes)`` (or 0/1 floats for ``n_classes=2``).
      optimizer: ``'Ftrl'`` (default, learning rate 0.2), ``'Adagrad'``, ``'Adam'``,
        ``'RMSProp'``, ``'SGD'``, an ``optax.GradientTransformation``, or a callable
        returning one; None is FTRL at ``min(0.2, 1/sqrt(len(feature_columns)))``, as TF;
        or ``canned.experimental.LinearSDCA(...)`` (binary classification only).
      config: a ``RunConfig``.
      warm_start_from: a checkpoint/model directory or export to start from.
      loss_reduction: ``"sum_over_batch_size"`` (default) or ``"sum"``.
      sparse_combiner: ``"sum"`` (default), ``"mean"`` or ``"sqrtn"``.

    Raises:
      ValueError: TF's messages for ``n_classes`` < 2, a bad label vocabulary, an empty
        ``feature_columns`` or an unknown ``sparse_combiner``; with ``LinearSDCA``, for
        ``n_classes > 2`` or a ``sparse_combiner`` other than ``"sum"``.
    """

    def __init__(
        self,
        feature_columns: Iterable,
        model_dir=None,
        n_classes: int = 2,
        weight_column=None,
        label_vocabulary=None,
        optimizer="Ftrl",
        config=None,
        warm_start_from=None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        sparse_combiner: str = "sum",
    ) -> None:
        if isinstance(optimizer, LinearSDCA) and n_classes is not None and n_classes > 2:
            raise ValueError("LinearSDCA cannot be used in a multi-class setting.")
        head = classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(
            head,
            feature_columns,
            model_dir,
            weight_column,
            optimizer,
            config,
            warm_start_from,
            sparse_combiner,
        )


class LinearRegressor(_Linear):
    """A linear regressor (``tf.estimator.LinearRegressor``, TF 2.15): squared error on
    ``logits = sum over columns of (input @ weights) + bias``.

    Args:
      feature_columns: feature columns from ``canned.feature_column``.
      model_dir: where checkpoints go.
      label_dimension: labels per example (``[batch_size, label_dimension]``).
      weight_column: a feature key or ``numeric_column`` of per-example weights.
      optimizer: as :class:`LinearClassifier` (default FTRL at 0.2); ``LinearSDCA`` needs
        ``label_dimension=1``.
      config, warm_start_from, loss_reduction, sparse_combiner: as
        :class:`LinearClassifier`.
    """

    def __init__(
        self,
        feature_columns: Iterable,
        model_dir=None,
        label_dimension: int = 1,
        weight_column=None,
        optimizer="Ftrl",
        config=None,
        warm_start_from=None,
        loss_reduction: str = Reduction.SUM_OVER_BATCH_SIZE,
        sparse_combiner: str = "sum",
    ) -> None:
        if isinstance(optimizer, LinearSDCA) and label_dimension > 1:
            raise ValueError("LinearSDCA can only be used with one-dimensional label.")
        head = regressor_head(label_dimension, weight_column, loss_reduction)
        super().__init__(
            head,
            feature_columns,
            model_dir,
            weight_column,
            optimizer,
            config,
            warm_start_from,
            sparse_combiner,
        )


class LinearEstimator(_Linear):
    """A linear model with any head (``tf.estimator.LinearEstimator``, TF 2.15): the
    head's loss, predictions and metrics on ``sum over columns of (input @ weights) + bias``.

    Args:
      head: a ``canned.head`` head (its ``weight_column`` feature is read too).
      feature_columns: feature columns from ``canned.feature_column``.
      model_dir, optimizer, config, sparse_combiner, warm_start_from: as
        :class:`LinearClassifier`.
    """

    def __init__(
        self,
        head,
        feature_columns: Iterable,
        model_dir=None,
        optimizer="Ftrl",
        config=None,
        sparse_combiner: str = "sum",
        warm_start_from=None,
    ) -> None:
        super().__init__(
            head,
            feature_columns,
            model_dir,
            head.weight_column,
            optimizer,
            config,
            warm_start_from,
            sparse_combiner,
        )
