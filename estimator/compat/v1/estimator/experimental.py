"""``tf.estimator.experimental``: early stopping, ``InMemoryEvaluatorHook``, ...
(``estimator.experimental``)."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
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
    "InMemoryEvaluatorHook",
    "build_raw_supervised_input_receiver_fn",
    "call_logit_fn",
    "make_early_stopping_hook",
    "make_stop_at_checkpoint_step_hook",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
]

__getattr__ = module_getattr("tf.estimator.experimental", __name__)
