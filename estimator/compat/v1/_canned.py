"""The canned part of ``estimator.compat.v1``: TF 1's canned estimators and feature columns.

``estimator.compat.v1`` stands in for ``tensorflow.compat.v1``, whose ``tf.estimator`` and
``tf.feature_column`` include canned estimators and feature columns. Those live in
``canned``, which builds on ``estimator``; the core never imports ``canned``, so
``estimator.compat.v1`` asks for this module by name (``importlib``) when a program first
uses one of these symbols.

TF 2.15's ``tf.compat.v1.estimator.LinearClassifier`` & co. are the TF 1 versions, whose
defaults differ from the TF 2 ones ``canned`` implements:

* ``loss_reduction=tf.compat.v1.losses.Reduction.SUM`` (TF 2: ``SUM_OVER_BATCH_SIZE``);
* optimizer names give TF 1 optimizers (``tf.compat.v1.train.*Optimizer``: Adagrad without
  epsilon, Adam's ε = 1e-8, ...) at TF 1's canned learning rates: Linear 0.2, DNN 0.05,
  DNNLinearCombined 0.001 (DNN) and ``min(0.005, 1/sqrt(n_columns))`` (linear), Baseline
  0.3; ``optimizer=None`` for Linear is ``Ftrl`` at ``min(0.2, 1/sqrt(n_columns))``.

A ``tf.train.*Optimizer`` instance (or a callable returning one) is accepted wherever TF 1
takes one; an optax transformation passes through.

Their heads name their values for hooks as TF 1's heads do (``linear/head/truediv``, the
average loss; ``linear/head/weighted_loss/Sum``, the loss; ``dnn/head/...``; ``head/...``
for wide & deep and baseline; see ``canned.head._graph_names``).
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

from canned import feature_column as _fc
from canned.baseline import BaselineClassifier as _BaselineClassifier
from canned.baseline import BaselineEstimator as BaselineEstimator
from canned.baseline import BaselineRegressor as _BaselineRegressor
from canned.dnn import DNNClassifier as _DNNClassifier
from canned.dnn import DNNEstimator as DNNEstimator
from canned.dnn import DNNRegressor as _DNNRegressor
from canned.dnn_linear_combined import DNNLinearCombinedClassifier as _DNNLinearCombinedClassifier
from canned.dnn_linear_combined import DNNLinearCombinedEstimator as DNNLinearCombinedEstimator
from canned.dnn_linear_combined import DNNLinearCombinedRegressor as _DNNLinearCombinedRegressor
from canned.head import BinaryClassHead as BinaryClassHead
from canned.head import Head as Head
from canned.head import LogisticRegressionHead as LogisticRegressionHead
from canned.head import MultiClassHead as MultiClassHead
from canned.head import MultiHead as MultiHead
from canned.head import MultiLabelHead as MultiLabelHead
from canned.head import PoissonRegressionHead as PoissonRegressionHead
from canned.head import RegressionHead as RegressionHead
from canned.head import _graph_names
from canned.head.keys import Reduction as _HeadReduction
from canned.linear import LinearClassifier as _LinearClassifier
from canned.linear import LinearEstimator as LinearEstimator
from canned.linear import LinearRegressor as _LinearRegressor
from canned.parsing_utils import classifier_parse_example_spec as classifier_parse_example_spec
from canned.parsing_utils import regressor_parse_example_spec as regressor_parse_example_spec
from estimator.compat._unsupported import unsupported
from estimator.compat.v1 import losses as _losses
from estimator.compat.v1 import train as _train
from estimator.compat.v1.train._train_op import Application, make_train_op

__all__ = [
    "LinearClassifier",
    "LinearRegressor",
    "LinearEstimator",
    "DNNClassifier",
    "DNNRegressor",
    "DNNEstimator",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
    "DNNLinearCombinedEstimator",
    "BaselineClassifier",
    "BaselineRegressor",
    "BaselineEstimator",
    "Head",
    "BinaryClassHead",
    "MultiClassHead",
    "MultiHead",
    "MultiLabelHead",
    "RegressionHead",
    "PoissonRegressionHead",
    "LogisticRegressionHead",
    "classifier_parse_example_spec",
    "regressor_parse_example_spec",
    "feature_column",
    "optimizer_transform",
]

_OPTIMIZERS: dict[str, Callable[[float], Any]] = {
    "Adagrad": _train.AdagradOptimizer,
    "Adam": _train.AdamOptimizer,
    "Ftrl": _train.FtrlOptimizer,
    "RMSProp": _train.RMSPropOptimizer,
    "SGD": _train.GradientDescentOptimizer,
}

_REDUCTIONS = {
    _losses.Reduction.SUM: _HeadReduction.SUM,
    _losses.Reduction.SUM_OVER_BATCH_SIZE: _HeadReduction.SUM_OVER_BATCH_SIZE,
}


def optimizer_transform(opt: Any, learning_rate: float):
    """An optax transformation for a TF 1 canned estimator's ``optimizer`` argument
    (TF 1's ``optimizers.get_optimizer_instance``): a name gives the TF 1 optimizer at
    ``learning_rate``; a ``tf.train.Optimizer`` (or a callable returning one) is applied to
    every variable; an optax transformation passes through.

    Raises:
      ValueError: an unknown name (TF's message).
    """
    if isinstance(opt, str):
        if opt not in _OPTIMIZERS:
            raise ValueError(
                f"Unsupported optimizer name: {opt}. Supported names are: "
                f"{tuple(sorted(_OPTIMIZERS))}"
            )
        opt = _OPTIMIZERS[opt](learning_rate=learning_rate)
    elif callable(opt) and not isinstance(opt, _train.Optimizer) and not hasattr(opt, "init"):
        opt = opt()
    if isinstance(opt, _train.Optimizer):
        return make_train_op([Application(opt, None)])
    return opt


def _v1_kwargs(values: dict, optimizers: dict[str, Any]) -> dict:
    """A TF 1 constructor's arguments (its ``locals()``) as ``canned``'s: the optimizers
    given (already transformations), the loss reduction in the heads' terms, partitioners
    dropped, an activation of None left to ``canned``'s default (ReLU, TF's too)."""
    kwargs = {
        k: v
        for k, v in values.items()
        if k not in ("self", "__class__", "optimizers", "partitioner", "input_layer_partitioner")
    }
    kwargs.update(optimizers)
    reduction = kwargs.pop("loss_reduction")
    kwargs["loss_reduction"] = _REDUCTIONS.get(reduction, reduction)
    for key in ("activation_fn", "dnn_activation_fn"):
        if key in kwargs and kwargs[key] is None:
            del kwargs[key]
    return kwargs


def _linear_optimizer(optimizer, feature_columns):
    if optimizer is None:  # TF 1's _get_default_optimizer: Ftrl at min(0.2, 1/sqrt(n))
        rate = min(0.2, 1.0 / math.sqrt(len(list(feature_columns))))
        return optimizer_transform("Ftrl", rate)
    return optimizer_transform(optimizer, 0.2)


def _combined(linear_optimizer, linear_feature_columns, dnn_optimizer) -> dict:
    n = len(list(linear_feature_columns or ()))
    linear_rate = min(0.005, 1.0 / math.sqrt(n)) if n else 0.005
    return {
        "linear_optimizer": optimizer_transform(linear_optimizer, linear_rate),
        "dnn_optimizer": optimizer_transform(dnn_optimizer, 0.001),
    }


_SUM = _losses.Reduction.SUM

# The names TF 1's heads give their values, by estimator (``canned.head._graph_names``).
_TF1_LINEAR = _graph_names.tf1(
    "linear", logits="linear/linear_model/linear_model/linear_model/weighted_sum"
)
_TF1_DNN = _graph_names.tf1("dnn")
_TF1_ROOT = _graph_names.tf1(None)


class LinearClassifier(_LinearClassifier):
    """``tf.compat.v1.estimator.LinearClassifier`` (TF 1 defaults: Ftrl at 0.2, SUM)."""

    def __init__(
        self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
        label_vocabulary=None, optimizer="Ftrl", config=None, partitioner=None,
        warm_start_from=None, loss_reduction=_SUM, sparse_combiner="sum",
    ) -> None:  # fmt: skip
        optimizer = _linear_optimizer(optimizer, feature_columns)
        super().__init__(**_v1_kwargs(locals(), {"optimizer": optimizer}))
        self._head.graph_names = _TF1_LINEAR


class LinearRegressor(_LinearRegressor):
    """``tf.compat.v1.estimator.LinearRegressor`` (TF 1 defaults: Ftrl at 0.2, SUM)."""

    def __init__(
        self, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
        optimizer="Ftrl", config=None, partitioner=None, warm_start_from=None,
        loss_reduction=_SUM, sparse_combiner="sum",
    ) -> None:  # fmt: skip
        optimizer = _linear_optimizer(optimizer, feature_columns)
        super().__init__(**_v1_kwargs(locals(), {"optimizer": optimizer}))
        self._head.graph_names = _TF1_LINEAR


class DNNClassifier(_DNNClassifier):
    """``tf.compat.v1.estimator.DNNClassifier`` (TF 1 defaults: Adagrad at 0.05, SUM)."""

    def __init__(
        self, hidden_units, feature_columns, model_dir=None, n_classes=2, weight_column=None,
        label_vocabulary=None, optimizer="Adagrad", activation_fn=None, dropout=None,
        input_layer_partitioner=None, config=None, warm_start_from=None,
        loss_reduction=_SUM, batch_norm=False,
    ) -> None:  # fmt: skip
        optimizer = optimizer_transform(optimizer, 0.05)
        super().__init__(**_v1_kwargs(locals(), {"optimizer": optimizer}))
        self._head.graph_names = _TF1_DNN


class DNNRegressor(_DNNRegressor):
    """``tf.compat.v1.estimator.DNNRegressor`` (TF 1 defaults: Adagrad at 0.05, SUM)."""

    def __init__(
        self, hidden_units, feature_columns, model_dir=None, label_dimension=1,
        weight_column=None, optimizer="Adagrad", activation_fn=None, dropout=None,
        input_layer_partitioner=None, config=None, warm_start_from=None,
        loss_reduction=_SUM, batch_norm=False,
    ) -> None:  # fmt: skip
        optimizer = optimizer_transform(optimizer, 0.05)
        super().__init__(**_v1_kwargs(locals(), {"optimizer": optimizer}))
        self._head.graph_names = _TF1_DNN


class DNNLinearCombinedClassifier(_DNNLinearCombinedClassifier):
    """``tf.compat.v1.estimator.DNNLinearCombinedClassifier`` (TF 1 defaults: Ftrl at
    ``min(0.005, 1/sqrt(n))``, Adagrad at 0.001, SUM)."""

    def __init__(
        self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
        dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
        dnn_activation_fn=None, dnn_dropout=None, n_classes=2, weight_column=None,
        label_vocabulary=None, input_layer_partitioner=None, config=None,
        warm_start_from=None, loss_reduction=_SUM, batch_norm=False,
        linear_sparse_combiner="sum",
    ) -> None:  # fmt: skip
        optimizers = _combined(linear_optimizer, linear_feature_columns, dnn_optimizer)
        super().__init__(**_v1_kwargs(locals(), optimizers))
        self._head.graph_names = _TF1_ROOT


class DNNLinearCombinedRegressor(_DNNLinearCombinedRegressor):
    """``tf.compat.v1.estimator.DNNLinearCombinedRegressor`` (TF 1 defaults, as the
    classifier's)."""

    def __init__(
        self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
        dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
        dnn_activation_fn=None, dnn_dropout=None, label_dimension=1, weight_column=None,
        input_layer_partitioner=None, config=None, warm_start_from=None,
        loss_reduction=_SUM, batch_norm=False, linear_sparse_combiner="sum",
    ) -> None:  # fmt: skip
        optimizers = _combined(linear_optimizer, linear_feature_columns, dnn_optimizer)
        super().__init__(**_v1_kwargs(locals(), optimizers))
        self._head.graph_names = _TF1_ROOT


class BaselineClassifier(_BaselineClassifier):
    """``tf.compat.v1.estimator.BaselineClassifier`` (TF 1 defaults: Ftrl at 0.3, SUM)."""

    def __init__(
        self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
        optimizer="Ftrl", config=None, loss_reduction=_SUM,
    ) -> None:  # fmt: skip
        optimizer = optimizer_transform(optimizer, 0.3)
        super().__init__(**_v1_kwargs(locals(), {"optimizer": optimizer}))
        self._head.graph_names = _TF1_ROOT


class BaselineRegressor(_BaselineRegressor):
    """``tf.compat.v1.estimator.BaselineRegressor`` (TF 1 defaults: Ftrl at 0.3, SUM)."""

    def __init__(
        self, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl",
        config=None, loss_reduction=_SUM,
    ) -> None:  # fmt: skip
        optimizer = optimizer_transform(optimizer, 0.3)
        super().__init__(**_v1_kwargs(locals(), {"optimizer": optimizer}))
        self._head.graph_names = _TF1_ROOT


class _FeatureColumns(types.ModuleType):
    """``tf.feature_column`` (TF 1.15's names) over ``canned.feature_column``."""

    _ALIASES = {"shared_embedding_columns": "shared_embeddings"}
    _NAMES = (
        "bucketized_column",
        "categorical_column_with_hash_bucket",
        "categorical_column_with_identity",
        "categorical_column_with_vocabulary_file",
        "categorical_column_with_vocabulary_list",
        "crossed_column",
        "embedding_column",
        "indicator_column",
        "input_layer",
        "linear_model",
        "make_parse_example_spec",
        "numeric_column",
        "shared_embedding_columns",
        "shared_embeddings",
        "weighted_categorical_column",
        "input_transform",
    )

    def __init__(self) -> None:
        super().__init__("estimator.compat.v1.feature_column", self.__doc__)
        self.__all__ = list(self._NAMES)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._NAMES:
            return getattr(_fc, self._ALIASES.get(name, name))
        raise unsupported(f"tf.feature_column.{name}")

    def __dir__(self):
        return sorted(self._NAMES)


feature_column = _FeatureColumns()
