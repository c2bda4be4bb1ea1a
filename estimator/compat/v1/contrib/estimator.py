"""``tf.contrib.estimator`` (TF 1.15): what moved to ``tf.estimator`` in TF 2.x.

The heads (``binary_classification_head``, ``multi_class_head``, ``multi_label_head``,
``regression_head``, ``poisson_regression_head``, ``logistic_regression_head``,
``multi_head``: TF 2.15's ``tf.estimator.*Head`` classes, TF 1.15's arguments and
``loss_reduction=SUM_OVER_BATCH_SIZE``), ``DNNEstimator``, ``LinearEstimator``,
``DNNLinearCombinedEstimator``, ``RNNClassifier``/``RNNEstimator``, ``add_metrics``,
``InMemoryEvaluatorHook``, the early-stopping hooks, ``call_logit_fn``,
``build_raw_supervised_input_receiver_fn``. They come from ``canned`` with TF 1.15's
defaults (``estimator.compat.v1.contrib._canned``). The extenders ``add_metrics``,
``clip_gradients_by_norm`` and ``forward_features`` are
``estimator.compat.v1.estimator._extenders``'.
"""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.contrib._canned import DNNEstimator as DNNEstimator
from estimator.compat.v1.contrib._canned import (
    DNNLinearCombinedEstimator as DNNLinearCombinedEstimator,
)
from estimator.compat.v1.contrib._canned import InMemoryEvaluatorHook as InMemoryEvaluatorHook
from estimator.compat.v1.contrib._canned import LinearEstimator as LinearEstimator
from estimator.compat.v1.contrib._canned import RNNClassifier as RNNClassifier
from estimator.compat.v1.contrib._canned import RNNEstimator as RNNEstimator
from estimator.compat.v1.contrib._canned import add_metrics as add_metrics
from estimator.compat.v1.contrib._canned import (
    binary_classification_head as binary_classification_head,
)
from estimator.compat.v1.contrib._canned import (
    build_raw_supervised_input_receiver_fn as build_raw_supervised_input_receiver_fn,
)
from estimator.compat.v1.contrib._canned import call_logit_fn as call_logit_fn
from estimator.compat.v1.contrib._canned import logistic_regression_head as logistic_regression_head
from estimator.compat.v1.contrib._canned import make_early_stopping_hook as make_early_stopping_hook
from estimator.compat.v1.contrib._canned import (
    make_stop_at_checkpoint_step_hook as make_stop_at_checkpoint_step_hook,
)
from estimator.compat.v1.contrib._canned import multi_class_head as multi_class_head
from estimator.compat.v1.contrib._canned import multi_head as multi_head
from estimator.compat.v1.contrib._canned import multi_label_head as multi_label_head
from estimator.compat.v1.contrib._canned import poisson_regression_head as poisson_regression_head
from estimator.compat.v1.contrib._canned import regression_head as regression_head
from estimator.compat.v1.contrib._canned import stop_if_higher_hook as stop_if_higher_hook
from estimator.compat.v1.contrib._canned import stop_if_lower_hook as stop_if_lower_hook
from estimator.compat.v1.contrib._canned import stop_if_no_decrease_hook as stop_if_no_decrease_hook
from estimator.compat.v1.contrib._canned import stop_if_no_increase_hook as stop_if_no_increase_hook
from estimator.compat.v1.estimator._extenders import (
    clip_gradients_by_norm as clip_gradients_by_norm,
)
from estimator.compat.v1.estimator._extenders import forward_features as forward_features

__all__ = [
    "add_metrics",
    "clip_gradients_by_norm",
    "forward_features",
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

_unsupported_getattr = module_getattr("tf.contrib.estimator", __name__)


def __getattr__(name: str):
    return _unsupported_getattr(name)


def __dir__() -> list[str]:
    return list(__all__)
