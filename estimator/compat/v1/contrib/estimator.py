"""``tf.contrib.estimator`` (TF 1.15): what moved to ``tf.estimator`` in TF 2.x.

The heads (``binary_classification_head``, ``multi_class_head``, ``multi_label_head``,
``regression_head``, ``poisson_regression_head``, ``logistic_regression_head``,
``multi_head``: TF 2.15's ``tf.estimator.*Head`` classes, TF 1.15's arguments and
``loss_reduction=SUM_OVER_BATCH_SIZE``), ``DNNEstimator``, ``LinearEstimator``,
``DNNLinearCombinedEstimator``, ``RNNClassifier``/``RNNEstimator``, ``add_metrics``,
``InMemoryEvaluatorHook``, the early-stopping hooks, ``call_logit_fn``,
``build_raw_supervised_input_receiver_fn``. They live in ``canned`` (a layer above the
core), so this module reaches them by name when first asked (``canned._compat_contrib``).
"""

from __future__ import annotations

import importlib

from estimator.compat._unsupported import module_getattr

#: Names served by ``canned._compat_contrib``.
CANNED = (
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
)

__all__ = [*CANNED]

_unsupported_getattr = module_getattr("tf.contrib.estimator", __name__)


def __getattr__(name: str):
    if name in CANNED:
        # Deferred by design: canned builds on estimator (see estimator.compat.v1).
        return getattr(importlib.import_module("canned._compat_contrib"), name)
    return _unsupported_getattr(name)


def __dir__() -> list[str]:
    return list(__all__)
