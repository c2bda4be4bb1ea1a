"""The canned part of ``estimator.compat.v1``'s ``tf.contrib.estimator`` (TF 1.15).

``tf.contrib.estimator`` held what TF 2 moved to ``tf.estimator``: head functions (TF 2's
``*Head`` classes), the ``*Estimator`` classes taking a head, the RNN estimators, hooks.
The head functions keep TF 1.15's argument order (``regression_head(weight_column,
label_dimension, ...)``) and default (``loss_reduction=SUM_OVER_BATCH_SIZE``) and accept
``tf.losses.Reduction`` values. ``estimator.compat`` imports this module by name when a
program first asks for one of these (the core never imports ``canned``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from canned.dnn import DNNEstimator as DNNEstimator
from canned.dnn_linear_combined import DNNLinearCombinedEstimator as DNNLinearCombinedEstimator
from canned.experimental import RNNClassifier as RNNClassifier
from canned.experimental import RNNEstimator as RNNEstimator
from canned.head import (
    BinaryClassHead,
    LogisticRegressionHead,
    MultiClassHead,
    MultiHead,
    MultiLabelHead,
    PoissonRegressionHead,
    RegressionHead,
)
from canned.linear import LinearEstimator as LinearEstimator
from estimator.compat.v1._canned import _REDUCTIONS
from estimator.compat.v1.estimator import add_metrics as add_metrics
from estimator.compat.v1.losses import Reduction
from estimator.experimental import InMemoryEvaluatorHook as InMemoryEvaluatorHook
from estimator.experimental import (
    build_raw_supervised_input_receiver_fn as build_raw_supervised_input_receiver_fn,
)
from estimator.experimental import call_logit_fn as call_logit_fn
from estimator.experimental import make_early_stopping_hook as make_early_stopping_hook
from estimator.experimental import (
    make_stop_at_checkpoint_step_hook as make_stop_at_checkpoint_step_hook,
)
from estimator.experimental import stop_if_higher_hook as stop_if_higher_hook
from estimator.experimental import stop_if_lower_hook as stop_if_lower_hook
from estimator.experimental import stop_if_no_decrease_hook as stop_if_no_decrease_hook
from estimator.experimental import stop_if_no_increase_hook as stop_if_no_increase_hook

__all__ = [
    "add_metrics",
    "binary_classification_head",
    "multi_class_head",
    "multi_label_head",
    "regression_head",
    "poisson_regression_head",
    "logistic_regression_head",
    "multi_head",
    "DNNEstimator",
    "LinearEstimator",
    "DNNLinearCombinedEstimator",
    "RNNClassifier",
    "RNNEstimator",
    "InMemoryEvaluatorHook",
    "make_early_stopping_hook",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
    "make_stop_at_checkpoint_step_hook",
    "call_logit_fn",
    "build_raw_supervised_input_receiver_fn",
]

_SOBS = Reduction.SUM_OVER_BATCH_SIZE


def _reduction(value: str) -> str:
    return _REDUCTIONS.get(value, value)


def binary_classification_head(
    weight_column=None, thresholds=None, label_vocabulary=None, loss_reduction=_SOBS,
    loss_fn: Callable | None = None, name=None,
) -> BinaryClassHead:  # fmt: skip
    """``tf.contrib.estimator.binary_classification_head``: ``BinaryClassHead``."""
    return BinaryClassHead(
        weight_column, thresholds, label_vocabulary, _reduction(loss_reduction), loss_fn, name
    )


def multi_class_head(
    n_classes, weight_column=None, label_vocabulary=None, loss_reduction=_SOBS,
    loss_fn: Callable | None = None, name=None,
) -> MultiClassHead:  # fmt: skip
    """``tf.contrib.estimator.multi_class_head``: ``MultiClassHead``."""
    return MultiClassHead(
        n_classes, weight_column, label_vocabulary, _reduction(loss_reduction), loss_fn, name
    )


def multi_label_head(
    n_classes, weight_column=None, thresholds=None, label_vocabulary=None,
    loss_reduction=_SOBS, loss_fn: Callable | None = None,
    classes_for_class_based_metrics=None, name=None,
) -> MultiLabelHead:  # fmt: skip
    """``tf.contrib.estimator.multi_label_head``: ``MultiLabelHead``."""
    return MultiLabelHead(
        n_classes, weight_column, thresholds, label_vocabulary, _reduction(loss_reduction),
        loss_fn, classes_for_class_based_metrics, name,
    )  # fmt: skip


def regression_head(
    weight_column=None, label_dimension=1, loss_reduction=_SOBS,
    loss_fn: Callable | None = None, inverse_link_fn=None, name=None,
) -> RegressionHead:  # fmt: skip
    """``tf.contrib.estimator.regression_head`` (``weight_column`` first, as TF 1.15's):
    ``RegressionHead``."""
    return RegressionHead(
        label_dimension, weight_column, _reduction(loss_reduction), loss_fn, inverse_link_fn,
        name,
    )  # fmt: skip


def poisson_regression_head(
    weight_column=None, label_dimension=1, loss_reduction=_SOBS, compute_full_loss=True,
    name=None,
) -> PoissonRegressionHead:  # fmt: skip
    """``tf.contrib.estimator.poisson_regression_head``: ``PoissonRegressionHead``."""
    return PoissonRegressionHead(
        label_dimension, weight_column, _reduction(loss_reduction), compute_full_loss, name
    )


def logistic_regression_head(
    weight_column=None, loss_reduction=_SOBS, name=None
) -> LogisticRegressionHead:
    """``tf.contrib.estimator.logistic_regression_head``: ``LogisticRegressionHead``."""
    return LogisticRegressionHead(weight_column, _reduction(loss_reduction), name)


def multi_head(heads: Sequence, head_weights: Sequence[float] | None = None) -> MultiHead:
    """``tf.contrib.estimator.multi_head``: ``MultiHead``."""
    return MultiHead(heads, head_weights)
