"""Early stopping: hooks that stop training when evaluation results stop improving
(``tf.estimator.experimental.stop_if_*_hook``).

::

    estimator = est.Estimator(model_fn, model_dir)
    hook = est.early_stopping.stop_if_no_decrease_hook(
        estimator, "loss", max_steps_without_decrease=1000, run_every_steps=100)
    est.train_and_evaluate(
        estimator, est.TrainSpec(train_input_fn, hooks=[hook]), est.EvalSpec(eval_input_fn))

The hooks read the results that evaluations append to ``eval_dir/eval_results.jsonl``
(``estimator.summary.read_eval_metrics``): ``train_and_evaluate``'s evaluations, those of an
``InMemoryEvaluatorHook``, of ``Estimator.evaluate`` or of another process. Arguments,
defaults and decisions follow TF 2.15 (``tensorflow_estimator/python/estimator/
early_stopping.py``). TF's hooks fail silently in ways this module reports instead:

* No evaluation writes to ``eval_dir`` (a plain ``train()`` with nothing evaluating, or
  ``EvalSpec(name="val")`` writing to ``eval_val`` while the hook reads ``eval``): at the
  first check that finds no results, a warning says why the hook can never fire and what
  to change (naming the directories where results do exist).
* ``metric_name`` is not among the results: a warning lists the metric names there are
  (TF raises ``KeyError`` in the middle of training).
* ``run_every_secs=60`` (the default) checks once a minute, so a short run could end before
  any check saw an evaluation. Here an evaluation made in this process (by
  ``train_and_evaluate`` or an ``InMemoryEvaluatorHook``) also triggers a check right
  after it, so training stops at the step of the evaluation that decides it.
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
import weakref
from collections.abc import Callable

import jax
import numpy as np

from estimator import distribute
from estimator.estimator import Estimator
from estimator.eval_history import read_eval_metrics
from estimator.hooks.basic import SecondOrStepTimer
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.io import fs

__all__ = [
    "make_early_stopping_hook",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_increase_hook",
    "stop_if_no_decrease_hook",
]

logger = logging.getLogger("estimator")

EVAL_RESULTS = "eval_results.jsonl"  # the file estimator.summary.write_eval_results appends

# ----- in-process evaluations ----------------------------------------------------------------
# Evaluators running in this process (objects with an ``eval_dir``), and the early-stopping
# hooks of running trainings: an evaluator announces each evaluation so that the hooks check
# at once, and a hook knows whether anything here will ever write to its directory.
_EVALUATORS: weakref.WeakSet = weakref.WeakSet()
_WATCHERS: weakref.WeakSet = weakref.WeakSet()


def _same_dir(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    return fs.abspath(a) == fs.abspath(b)


def register_evaluator(evaluator) -> None:
    """Marks ``evaluator`` (with an ``eval_dir`` attribute) as evaluating in this process."""
    _EVALUATORS.add(evaluator)


def unregister_evaluator(evaluator) -> None:
    _EVALUATORS.discard(evaluator)


def notify_evaluation(eval_dir: str) -> None:
    """Called after an in-process evaluation wrote to ``eval_dir``: the early-stopping hooks
    reading it (and those with a custom ``should_stop_fn``) check after the current step."""
    for hook in list(_WATCHERS):
        if hook._eval_dir is None or _same_dir(hook._eval_dir, eval_dir):
            hook._check_soon = True


def _evaluated_here(eval_dir: str) -> bool:
    return any(_same_dir(getattr(e, "eval_dir", None), eval_dir) for e in list(_EVALUATORS))


def _dirs_with_results(model_dir: str) -> list[str]:
    if not model_dir:
        return []
    return sorted(
        fs.join(model_dir, name)
        for name in fs.listdir(model_dir)
        if name.startswith("eval") and fs.isfile(fs.join(model_dir, name, EVAL_RESULTS))
    )


# ----- the hook ------------------------------------------------------------------------------
class _StopOnPredicateHook(SessionRunHook):
    """Requests a stop when ``should_stop_fn()`` is True, checked every N seconds or steps
    and after each in-process evaluation (TF's ``_StopOnPredicateHook``)."""

    def __init__(
        self,
        should_stop_fn: Callable[[], bool],
        run_every_secs: float | None = 60,
        run_every_steps: int | None = None,
        *,
        eval_dir: str | None = None,
        clock: Callable[[], float] = time.time,
        check_every: int = 100,
    ) -> None:
        if not callable(should_stop_fn):
            raise TypeError("`should_stop_fn` must be callable.")
        self._should_stop_fn = should_stop_fn
        self._timer = SecondOrStepTimer(
            every_secs=run_every_secs, every_steps=run_every_steps, clock=clock
        )
        self._run_every_secs = run_every_secs
        self._check_every = check_every
        self._eval_dir = eval_dir
        self._check_soon = False

    def begin(self) -> None:
        self._timer.reset()
        self._check_soon = False
        _WATCHERS.add(self)
        self._agreed = (
            distribute.SyncedTimer(self._timer, self._run_every_secs, self._check_every)
            if jax.process_count() > 1
            else self._timer
        )

    def _decide(self) -> bool:
        """``should_stop_fn()``; in a multi-process job the chief's, broadcast."""
        if jax.process_count() == 1:
            return bool(self._should_stop_fn())
        from jax.experimental import multihost_utils

        local = bool(self._should_stop_fn()) if jax.process_index() == 0 else False
        return bool(multihost_utils.broadcast_one_to_all(np.bool_(local)))

    def after_run(self, run_context, run_values) -> None:
        global_step = run_context.session.global_step
        if not (self._check_soon or self._agreed.should_trigger_for_step(global_step)):
            return
        self._check_soon = False
        self._timer.update_last_triggered_step(global_step)
        if self._decide():
            logger.info("Requesting early stopping at global step %d", global_step)
            run_context.request_stop()

    def end(self, session) -> None:
        _WATCHERS.discard(self)


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
    global steps (and at the first step), and after each evaluation made in this process by
    ``train_and_evaluate`` or an ``InMemoryEvaluatorHook``. The stop happens after the
    current step; the checkpoint saved at the end of ``train()`` holds that step.

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
    return _StopOnPredicateHook(
        should_stop_fn,
        run_every_secs,
        run_every_steps,
        eval_dir=eval_dir,
        clock=clock,
        check_every=estimator.config.log_step_count_steps or 100,
    )


class _MetricCheck:
    """The ``should_stop_fn`` of the metric hooks: reads ``eval_dir``, warns when it cannot
    decide, and applies ``decide(values_by_step)``."""

    def __init__(self, estimator, hook_name, metric_name, eval_dir, min_steps, decide):
        self.model_dir = estimator.model_dir
        self.hook_name = hook_name
        self.metric_name = metric_name
        self.eval_dir = eval_dir
        self.min_steps = min_steps
        self.decide = decide
        self.warned_empty = False
        self.warned_metric = False

    def __call__(self) -> bool:

        results = read_eval_metrics(self.eval_dir)
        if not results:
            self._warn_no_results()
            return False
        newest_step = next(reversed(results))
        if self.metric_name not in results[newest_step] and not self.warned_metric:
            self.warned_metric = True
            logger.warning(
                '%s: metric "%s" is not in the evaluation results of global step %d in %s, '
                "which has: %s. Results without it are skipped, so the hook cannot fire on "
                "them: pass metric_name= one of those names.",
                self.hook_name,
                self.metric_name,
                newest_step,
                self.eval_dir,
                ", ".join(sorted(results[newest_step])),
            )
        values = {
            step: metrics[self.metric_name]
            for step, metrics in results.items()
            if step >= self.min_steps and self.metric_name in metrics
        }
        return self.decide(values)

    def _warn_no_results(self) -> None:
        if self.warned_empty or _evaluated_here(self.eval_dir):
            return  # an evaluator of this process writes here: results are on their way
        self.warned_empty = True
        here = sorted({fs.abspath(e.eval_dir) for e in list(_EVALUATORS)})
        others = [d for d in _dirs_with_results(self.model_dir) if not _same_dir(d, self.eval_dir)]
        others = [d for d in others if d not in here]
        hint = ""
        if here:
            hint += f" This process evaluates into {', '.join(here)}."
        if others:
            hint += f" Evaluation results exist in {', '.join(others)}."
        if here or others:
            hint += (
                " To read one of those, pass eval_dir=estimator.eval_dir(name) with the "
                "evaluation's name (None for 'eval', 'val' for 'eval_val')."
            )
        logger.warning(
            "%s can never fire: %s holds no evaluation results and nothing evaluating in "
            "this process writes there (early stopping reads the results evaluations "
            "write; it does not evaluate). Evaluate during training with "
            "train_and_evaluate(estimator, train_spec, EvalSpec(..., name=N)) or "
            "InMemoryEvaluatorHook(..., name=N), where estimator.eval_dir(N) is the hook's "
            "eval_dir, or have another process evaluate into it.%s",
            self.hook_name,
            self.eval_dir,
            hint,
        )


def _check_args(max_steps_name: str, value) -> None:
    if value is None or value < 0:
        raise ValueError(f"Must specify {max_steps_name} >= 0, given: {value}")


def _threshold_hook(
    hook_name, estimator, metric_name, threshold, higher, eval_dir, min_steps, secs, steps
):
    """TF's ``_stop_if_threshold_crossed_hook``."""
    is_lhs_better = operator.gt if higher else operator.lt
    relation = "greater than" if higher else "less than"
    eval_dir = estimator.eval_dir() if eval_dir is None else os.fspath(eval_dir)

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

    check = _MetricCheck(estimator, hook_name, metric_name, eval_dir, min_steps, decide)
    return _make_hook(estimator, check, secs, steps, eval_dir, time.time)


def _no_improvement_hook(
    hook_name, estimator, metric_name, max_steps, higher, eval_dir, min_steps, secs, steps
):
    """TF's ``_stop_if_no_metric_improvement_hook``."""
    is_lhs_better = operator.gt if higher else operator.lt
    direction = "increase" if higher else "decrease"
    eval_dir = estimator.eval_dir() if eval_dir is None else os.fspath(eval_dir)

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

    check = _MetricCheck(estimator, hook_name, metric_name, eval_dir, min_steps, decide)
    return _make_hook(estimator, check, secs, steps, eval_dir, time.time)


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
