"""``tf.estimator.experimental`` for ``canned`` users: TF 2.15's twelve names in one place.

``LinearSDCA``, ``RNNClassifier`` and ``RNNEstimator`` are defined in ``canned`` (in
``canned.sdca`` and ``canned.rnn``); the others are ``estimator.experimental``'s. Importing
this module (``import canned`` does) also makes the three available as
``estimator.experimental.X``, the spelling of ported code (``tf.estimator.experimental.X``).
"""

from canned.rnn import RNNClassifier as RNNClassifier
from canned.rnn import RNNEstimator as RNNEstimator
from canned.sdca import LinearSDCA as LinearSDCA
from estimator import experimental as _core
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
    "LinearSDCA",
    "RNNClassifier",
    "RNNEstimator",
    "build_raw_supervised_input_receiver_fn",
    "call_logit_fn",
    "make_early_stopping_hook",
    "make_stop_at_checkpoint_step_hook",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
]

_core.provide(LinearSDCA=LinearSDCA, RNNClassifier=RNNClassifier, RNNEstimator=RNNEstimator)
