"""``tf.estimator.experimental``: the same names, so ``est.experimental.X`` ports as is.

Everything here is also importable from where it lives (the early-stopping hooks from
``estimator`` and ``estimator.early_stopping``, the receiver from ``estimator.export``).
TF 2.15's ``LinearSDCA``, ``RNNClassifier`` and ``RNNEstimator`` are canned models: they
live in ``canned`` (``canned.experimental``), which ``estimator`` never imports. Importing
``canned`` makes them available here too (``canned.experimental`` registers them); before
that, asking for them raises an ``AttributeError`` naming both ways.
"""

from __future__ import annotations

import time

from estimator.checkpoint import checkpoint_step, latest_checkpoint
from estimator.early_stopping import make_early_stopping_hook as make_early_stopping_hook
from estimator.early_stopping import stop_if_higher_hook as stop_if_higher_hook
from estimator.early_stopping import stop_if_lower_hook as stop_if_lower_hook
from estimator.early_stopping import stop_if_no_decrease_hook as stop_if_no_decrease_hook
from estimator.early_stopping import stop_if_no_increase_hook as stop_if_no_increase_hook
from estimator.export import (
    build_raw_supervised_input_receiver_fn as build_raw_supervised_input_receiver_fn,
)
from estimator.fn_args import fn_args
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.training.in_memory_evaluator import InMemoryEvaluatorHook as InMemoryEvaluatorHook

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

#: TF's experimental names that ``canned`` provides, and what they are.
CANNED_NAMES = {
    "LinearSDCA": "the SDCA optimizer of the linear estimators",
    "RNNClassifier": "a recurrent canned classifier",
    "RNNEstimator": "a recurrent canned estimator",
}
_provided: dict = {}


def provide(**objects) -> None:
    """Registers the canned implementations of :data:`CANNED_NAMES` (called by
    ``canned.experimental`` on import; ``estimator`` does not import ``canned``).

    Raises:
      ValueError: for a name TF's ``experimental`` does not have.
    """
    unknown = sorted(set(objects) - set(CANNED_NAMES))
    if unknown:
        raise ValueError(f"estimator.experimental.provide: not canned names of TF's: {unknown}.")
    _provided.update(objects)


def __getattr__(name: str):
    if name in _provided:
        return _provided[name]
    if name in CANNED_NAMES:
        raise AttributeError(
            f"tf.estimator.experimental.{name} ({CANNED_NAMES[name]}) lives in the canned "
            f"package: use canned.experimental.{name}, or `import canned` first and "
            f"estimator.experimental.{name} is the same object."
        )
    raise AttributeError(f"module 'estimator.experimental' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(__all__) | set(_provided))


def call_logit_fn(logit_fn, features, mode, params, config):
    """Calls ``logit_fn`` with the arguments it takes
    (``tf.estimator.experimental.call_logit_fn``).

    Args:
      logit_fn: ``(features[, mode][, params][, config]) -> logits`` (an array, or a dict
        of arrays for several heads).
      features, mode, params, config: passed by name when ``logit_fn`` takes them.

    Returns:
      The logits.

    Raises:
      ValueError: if ``logit_fn`` returns neither an array nor a dict of arrays (TF's
        message).
    """
    available = {"mode": mode, "params": params, "config": config}
    kwargs = {name: value for name, value in available.items() if name in fn_args(logit_fn)}
    logits = logit_fn(features=features, **kwargs)
    values = logits.values() if isinstance(logits, dict) else [logits]
    if not all(hasattr(v, "shape") and hasattr(v, "dtype") for v in values):
        raise ValueError(
            "logit_fn should return a Tensor or a dictionary mapping strings to Tensors.  "
            f"logit_fn returned: {logits}"
        )
    return logits


class _StopAtCheckpointStepHook(SessionRunHook):
    """TF's ``_StopAtCheckpointStepHook``: once the local global step reaches
    ``last_step``, stops when ``model_dir``'s latest checkpoint has reached it too, else
    sleeps ``wait_after_file_check_secs`` and looks again after the next step."""

    def __init__(self, model_dir, last_step: int, wait_after_file_check_secs: float) -> None:
        self._model_dir = model_dir
        self._last_step = last_step
        self._wait = wait_after_file_check_secs

    def after_run(self, run_context, run_values) -> None:
        if run_context.session.global_step < self._last_step:
            return
        latest = latest_checkpoint(self._model_dir)
        if latest is not None and checkpoint_step(latest) >= self._last_step:
            run_context.request_stop()
        else:
            time.sleep(self._wait)


def make_stop_at_checkpoint_step_hook(estimator, last_step: int, wait_after_file_check_secs=30):
    """A hook that stops training once ``estimator.model_dir`` holds a checkpoint of
    ``last_step`` or later (``tf.estimator.experimental.make_stop_at_checkpoint_step_hook``).

    Args:
      estimator: the Estimator whose checkpoints to watch.
      last_step: the global step to stop at.
      wait_after_file_check_secs: seconds to sleep after each look at ``model_dir`` that
        finds no such checkpoint (TF's default 30).

    Returns:
      A ``SessionRunHook``. Meant for non-chief workers, as in TF: on the chief, use
      ``max_steps``.
    """
    return _StopAtCheckpointStepHook(estimator.model_dir, last_step, wait_after_file_check_secs)
