"""Early stopping: hooks that stop training when evaluation results stop improving
(``tf.estimator.experimental.stop_if_*_hook``).

::

    estimator = est.Estimator(model_fn, model_dir)
    hook = est.early_stopping.stop_if_no_decrease_hook(
        estimator, "loss", max_steps_without_decrease=1000, run_every_steps=100)
    est.train_and_evaluate(
        estimator, est.TrainSpec(train_input_fn, hooks=[hook]), est.EvalSpec(eval_input_fn))

The hooks read the results that evaluations append to ``eval_dir/eval_results.jsonl``
(``estimator.events.eval_history.read_eval_metrics``): ``train_and_evaluate``'s evaluations, those
of an ``InMemoryEvaluatorHook``, of ``Estimator.evaluate`` or of another process. The hook
itself is ``estimator.hooks.early_stopping``'s. Arguments,
defaults and decisions follow TF 2.15 (``tensorflow_estimator/python/estimator/
early_stopping.py``). TF's hooks fail silently in ways this module reports instead:

* No evaluation writes to ``eval_dir`` (a plain ``train()`` with nothing evaluating, or
  ``EvalSpec(name="val")`` writing to ``eval_val`` while the hook reads ``eval``): at the
  first check that finds no results, a warning says why the hook can never fire and what
  to change (naming the directories where results do exist).
* ``metric_name`` is not among the results: a warning lists the metric names there are
  (TF raises ``KeyError`` in the middle of training).
* ``run_every_secs=60`` (the default) checks once a minute, so a short run could end before
  any check saw an evaluation. Here an evaluation of the same Estimator made in this
  process (by ``train_and_evaluate`` or an ``InMemoryEvaluatorHook``) also triggers a
  check right after it, so training stops at the step of the evaluation that decides it.
  The evaluators announce it on ``estimator.evaluations``, which the hook watches (no
  process-wide registry: another Estimator's evaluations do not reach it).
* In a multi-process job every process must stop at the same step: the chief decides
  (it wrote the results it reads) and broadcasts the decision, at steps every process
  agrees on (after each in-training evaluation, every ``run_every_steps``, or for
  ``run_every_secs`` by the chief's clock checked every ``log_step_count_steps`` steps).
"""

from __future__ import annotations

import logging
import operator
import os
import time
from collections.abc import Callable

from estimator.estimator import Estimator
from estimator.hooks.early_stopping import MetricCheck, StopOnPredicateHook
from estimator.hooks.session_run_hook import SessionRunHook

__all__ = [
    "make_early_stopping_hook",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_increase_hook",
    "stop_if_no_decrease_hook",
]

logger = logging.getLogger("estimator")


def make_early_stopping_hook(
    estimator,
    should_stop_fn: Callable[[], bool],
    run_every_secs: float | None = 60,
    run_every_steps: int | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> SessionRunHook:
    """A hook that stops training when ``should_stop_fn()`` returns True
    (``tf.estimator.experimental.make_early_stopping_hook``).

    ``should_stop_fn`` is called every ``run_every_secs`` seconds or ``run_every_steps``
    global steps (and at the first step), and after each evaluation of ``estimator`` made
    in this process by ``train_and_evaluate`` or an ``InMemoryEvaluatorHook``. The stop
    happens after the current step; the checkpoint saved at the end of ``train()`` holds
    that step.

    Args:
      estimator: the ``Estimator`` being trained.
      should_stop_fn: ``() -> bool``.
      run_every_secs: seconds between calls (default 60); set it to None to use
        ``run_every_steps``.
      run_every_steps: global steps between calls.
      clock: keyword-only; the time source for ``run_every_secs`` (tests pass a fake).

    Returns:
      A ``SessionRunHook`` for ``train()``/``TrainSpec(hooks=...)``.

    Raises:
      TypeError: ``estimator`` is not an ``Estimator``; ``should_stop_fn`` not callable.
      ValueError: both or neither of ``run_every_secs`` and ``run_every_steps``.
    """
    return _make_hook(estimator, should_stop_fn, run_every_secs, run_every_steps, None, clock)


def _make_hook(estimator, should_stop_fn, run_every_secs, run_every_steps, eval_dir, clock):
    if not isinstance(estimator, Estimator):
        raise TypeError(f"`estimator` must have type `estimator.Estimator`. Got: {type(estimator)}")
    if run_every_secs is not None and run_every_steps is not None:
        raise ValueError("Only one of `run_every_secs` and `run_every_steps` must be set.")
    return StopOnPredicateHook(
        should_stop_fn,
        run_every_secs,
        run_every_steps,
        evaluations=estimator.evaluations,
        eval_dir=eval_dir,
        clock=clock,
        check_every=estimator.config.log_step_count_steps or 100,
    )


def _metric_hook(hook_name, estimator, metric_name, eval_dir, min_steps, secs, steps, decide):
    """The hook of the ``stop_if_*`` factories: ``decide({step: value})`` over the results of
    ``metric_name`` in ``eval_dir`` (default ``estimator.eval_dir()``)."""
    if not isinstance(estimator, Estimator):
        raise TypeError(f"`estimator` must have type `estimator.Estimator`. Got: {type(estimator)}")
    eval_dir = estimator.eval_dir() if eval_dir is None else os.fspath(eval_dir)
    check = MetricCheck(
        estimator.model_dir,
        estimator.evaluations,
        hook_name,
        metric_name,
        eval_dir,
        min_steps,
        decide,
    )
    return _make_hook(estimator, check, secs, steps, eval_dir, time.time)


def _check_args(max_steps_name: str, value) -> None:
    if value is None or value < 0:
        raise ValueError(f"Must specify {max_steps_name} >= 0, given: {value}")


def _threshold_hook(
    hook_name, estimator, metric_name, threshold, higher, eval_dir, min_steps, secs, steps
):
    """TF's ``_stop_if_threshold_crossed_hook``."""
    is_lhs_better = operator.gt if higher else operator.lt
    relation = "greater than" if higher else "less than"

    def decide(values: dict) -> bool:
        for step, value in values.items():
            if is_lhs_better(value, threshold):
                logger.info(
                    'At step %s, metric "%s" has value %s which is %s the configured '
                    "threshold (%s) for early stopping.",
                    step,
                    metric_name,
                    value,
                    relation,
                    threshold,
                )
                return True
        return False

    return _metric_hook(hook_name, estimator, metric_name, eval_dir, min_steps, secs, steps, decide)


def _no_improvement_hook(
    hook_name, estimator, metric_name, max_steps, higher, eval_dir, min_steps, secs, steps
):
    """TF's ``_stop_if_no_metric_improvement_hook``."""
    is_lhs_better = operator.gt if higher else operator.lt
    direction = "increase" if higher else "decrease"

    def decide(values: dict) -> bool:
        best_value = best_step = None
        for step, value in values.items():
            if best_value is None or is_lhs_better(value, best_value):
                best_value, best_step = value, step
            if step - best_step >= max_steps:
                logger.info(
                    'No %s in metric "%s" for %s steps, which is greater than or equal to '
                    "max steps (%s) configured for early stopping.",
                    direction,
                    metric_name,
                    step - best_step,
                    max_steps,
                )
                return True
        return False

    return _metric_hook(hook_name, estimator, metric_name, eval_dir, min_steps, secs, steps, decide)


def stop_if_higher_hook(
    estimator,
    metric_name: str,
    threshold: float,
    eval_dir=None,
    min_steps: int = 0,
    run_every_secs: float | None = 60,
    run_every_steps: int | None = None,
) -> SessionRunHook:
    """A hook that stops training once ``metric_name`` is above ``threshold`` in an
    evaluation result of a global step >= ``min_steps``
    (``tf.estimator.experimental.stop_if_higher_hook``).

    Args:
      estimator: the ``Estimator`` being trained.
      metric_name: the metric to track: "loss", "accuracy", ...
      threshold: the value to exceed.
      eval_dir: the directory whose evaluation results are read; default
        ``estimator.eval_dir()`` (evaluations named N write to ``estimator.eval_dir(N)``).
      min_steps: results of global steps below this are ignored.
      run_every_secs: seconds between checks (default 60); None to use ``run_every_steps``.
      run_every_steps: global steps between checks.

    Returns:
      A ``SessionRunHook`` for ``train()``/``TrainSpec(hooks=...)``.

    Raises:
      TypeError: ``estimator`` is not an ``Estimator``.
      ValueError: both or neither of ``run_every_secs`` and ``run_every_steps``.
    """
    return _threshold_hook(
        "stop_if_higher_hook",
        estimator,
        metric_name,
        threshold,
        True,
        eval_dir,
        min_steps,
        run_every_secs,
        run_every_steps,
    )


def stop_if_lower_hook(
    estimator,
    metric_name: str,
    threshold: float,
    eval_dir=None,
    min_steps: int = 0,
    run_every_secs: float | None = 60,
    run_every_steps: int | None = None,
) -> SessionRunHook:
    """A hook that stops training once ``metric_name`` is below ``threshold`` in an
    evaluation result of a global step >= ``min_steps``
    (``tf.estimator.experimental.stop_if_lower_hook``).

    Args:
      estimator: the ``Estimator`` being trained.
      metric_name: the metric to track: "loss", "accuracy", ...
      threshold: the value to go below.
      eval_dir: the directory whose evaluation results are read; default
        ``estimator.eval_dir()`` (evaluations named N write to ``estimator.eval_dir(N)``).
      min_steps: results of global steps below this are ignored.
      run_every_secs: seconds between checks (default 60); None to use ``run_every_steps``.
      run_every_steps: global steps between checks.

    Returns:
      A ``SessionRunHook`` for ``train()``/``TrainSpec(hooks=...)``.

    Raises:
      TypeError: ``estimator`` is not an ``Estimator``.
      ValueError: both or neither of ``run_every_secs`` and ``run_every_steps``.
    """
    return _threshold_hook(
        "stop_if_lower_hook",
        estimator,
        metric_name,
        threshold,
        False,
        eval_dir,
        min_steps,
        run_every_secs,
        run_every_steps,
    )


def stop_if_no_increase_hook(
    estimator,
    metric_name: str,
    max_steps_without_increase: int,
    eval_dir=None,
    min_steps: int = 0,
    run_every_secs: float | None = 60,
    run_every_steps: int | None = None,
) -> SessionRunHook:
    """A hook that stops training when ``metric_name`` has not increased for
    ``max_steps_without_increase`` global steps: when the step of an evaluation minus the
    step of the best one up to it reaches that
    (``tf.estimator.experimental.stop_if_no_increase_hook``).

    Args:
      estimator: the ``Estimator`` being trained.
      metric_name: the metric to track: "loss", "accuracy", ...
      max_steps_without_increase: global steps allowed without a new maximum.
      eval_dir: the directory whose evaluation results are read; default
        ``estimator.eval_dir()`` (evaluations named N write to ``estimator.eval_dir(N)``).
      min_steps: results of global steps below this are ignored.
      run_every_secs: seconds between checks (default 60); None to use ``run_every_steps``.
      run_every_steps: global steps between checks.

    Returns:
      A ``SessionRunHook`` for ``train()``/``TrainSpec(hooks=...)``.

    Raises:
      TypeError: ``estimator`` is not an ``Estimator``.
      ValueError: both or neither of ``run_every_secs`` and ``run_every_steps``; a negative or
        None ``max_steps_without_increase``.
    """
    _check_args("max_steps_without_increase", max_steps_without_increase)
    return _no_improvement_hook(
        "stop_if_no_increase_hook",
        estimator,
        metric_name,
        max_steps_without_increase,
        True,
        eval_dir,
        min_steps,
        run_every_secs,
        run_every_steps,
    )


def stop_if_no_decrease_hook(
    estimator,
    metric_name: str,
    max_steps_without_decrease: int,
    eval_dir=None,
    min_steps: int = 0,
    run_every_secs: float | None = 60,
    run_every_steps: int | None = None,
) -> SessionRunHook:
    """A hook that stops training when ``metric_name`` has not decreased for
    ``max_steps_without_decrease`` global steps: when the step of an evaluation minus the
    step of the best one up to it reaches that
    (``tf.estimator.experimental.stop_if_no_decrease_hook``).

    Args:
      estimator: the ``Estimator`` being trained.
      metric_name: the metric to track: "loss", "accuracy", ...
      max_steps_without_decrease: global steps allowed without a new minimum.
      eval_dir: the directory whose evaluation results are read; default
        ``estimator.eval_dir()`` (evaluations named N write to ``estimator.eval_dir(N)``).
      min_steps: results of global steps below this are ignored.
      run_every_secs: seconds between checks (default 60); None to use ``run_every_steps``.
      run_every_steps: global steps between checks.

    Returns:
      A ``SessionRunHook`` for ``train()``/``TrainSpec(hooks=...)``.

    Raises:
      TypeError: ``estimator`` is not an ``Estimator``.
      ValueError: both or neither of ``run_every_secs`` and ``run_every_steps``; a negative or
        None ``max_steps_without_decrease``.
    """
    _check_args("max_steps_without_decrease", max_steps_without_decrease)
    return _no_improvement_hook(
        "stop_if_no_decrease_hook",
        estimator,
        metric_name,
        max_steps_without_decrease,
        False,
        eval_dir,
        min_steps,
        run_every_secs,
        run_every_steps,
    )
