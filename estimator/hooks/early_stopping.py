"""The early-stopping hook (``estimator.early_stopping``'s ``stop_if_*_hook``s build it)
and :class:`Evaluations`, the channel through which an Estimator's in-process evaluators
announce evaluations to it.

The wiring is explicit and per Estimator: ``Estimator.evaluations`` is one
:class:`Evaluations`; ``train_and_evaluate``'s evaluator and ``InMemoryEvaluatorHook``
register on their estimator's and announce each evaluation there; the hooks made by
``stop_if_*_hook(estimator, ...)`` watch the same one. Two Estimators in one process do
not see each other's evaluations (each still reads whatever results are in its
``eval_dir``, written by anyone, at its timer's checks).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable

import jax
import numpy as np

from estimator.events.eval_history import EVAL_RESULTS, read_eval_metrics
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.hooks.timers import SecondOrStepTimer, SyncedTimer
from estimator.io import fs

__all__ = ["Evaluations", "MetricCheck", "StopOnPredicateHook"]

logger = logging.getLogger("estimator")


def _same_dir(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    return fs.abspath(a) == fs.abspath(b)


def _dirs_with_results(model_dir: str) -> list[str]:
    if not model_dir:
        return []
    return sorted(
        fs.join(model_dir, name)
        for name in fs.listdir(model_dir)
        if name.startswith("eval") and fs.isfile(fs.join(model_dir, name, EVAL_RESULTS))
    )


class Evaluations:
    """The evaluators of one Estimator running in this process and its early-stopping
    hooks: an evaluator announces each evaluation, and the hooks reading its directory
    check at once; a hook asks whether anything here will ever write to its directory.

    Beyond TF (whose hooks only poll): what lets a short run stop at the step of the
    evaluation that decides it. Members are held weakly: a hook or evaluator that is gone
    without ``end()`` (an exception in training) leaves nothing behind.
    """

    def __init__(self) -> None:
        self._evaluators: weakref.WeakSet = weakref.WeakSet()
        self._watchers: weakref.WeakSet = weakref.WeakSet()

    def add_evaluator(self, evaluator) -> None:
        """Marks ``evaluator`` (an object with an ``eval_dir`` attribute) as evaluating."""
        self._evaluators.add(evaluator)

    def remove_evaluator(self, evaluator) -> None:
        """Undoes :meth:`add_evaluator` (nothing if it was not added)."""
        self._evaluators.discard(evaluator)

    def evaluated(self, eval_dir: str) -> None:
        """Announces an evaluation that wrote to ``eval_dir``: the watching hooks that read
        it (and those reading no directory, with a custom ``should_stop_fn``) check after
        the current step."""
        for hook in list(self._watchers):
            if hook.eval_dir is None or _same_dir(hook.eval_dir, eval_dir):
                hook.check_soon()

    def evaluates_into(self, eval_dir: str) -> bool:
        """Whether a registered evaluator writes to ``eval_dir``."""
        return any(_same_dir(getattr(e, "eval_dir", None), eval_dir) for e in self._evaluators)

    def eval_dirs(self) -> list[str]:
        """The directories the registered evaluators write to, sorted."""
        return sorted({fs.abspath(e.eval_dir) for e in list(self._evaluators)})

    def watch(self, hook: StopOnPredicateHook) -> None:
        """Makes ``hook`` (with ``eval_dir`` and ``check_soon()``) hear of evaluations."""
        self._watchers.add(hook)

    def unwatch(self, hook: StopOnPredicateHook) -> None:
        """Undoes :meth:`watch`."""
        self._watchers.discard(hook)


class StopOnPredicateHook(SessionRunHook):
    """Requests a stop when ``should_stop_fn()`` is True, checked every N seconds or steps
    and after each evaluation announced on ``evaluations`` (TF's ``_StopOnPredicateHook``).

    Args:
      should_stop_fn: ``() -> bool``; in a multi-process job the chief's answer is used.
      run_every_secs: seconds between checks, or None to use ``run_every_steps``.
      run_every_steps: global steps between checks.
      evaluations: keyword-only; the :class:`Evaluations` of the Estimator being trained
        (its in-process evaluators announce evaluations there), or None for checks by the
        timer alone.
      eval_dir: keyword-only; the directory whose evaluations trigger a check (None: any).
      clock: keyword-only; the time source of ``run_every_secs``.
      check_every: keyword-only; in a multi-process job, steps between agreed time checks.

    Raises:
      TypeError: ``should_stop_fn`` is not callable.
    """

    def __init__(
        self,
        should_stop_fn: Callable[[], bool],
        run_every_secs: float | None = 60,
        run_every_steps: int | None = None,
        *,
        evaluations: Evaluations | None = None,
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
        self._evaluations = evaluations
        self.eval_dir = eval_dir
        self._check_soon = False

    def begin(self) -> None:
        self._timer.reset()
        self._check_soon = False
        if self._evaluations is not None:
            self._evaluations.watch(self)
        self._agreed = (
            SyncedTimer(self._timer, self._run_every_secs, self._check_every)
            if jax.process_count() > 1
            else self._timer
        )

    def check_soon(self) -> None:
        """Makes the hook check after the current step (an evaluation it reads was made)."""
        self._check_soon = True

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
        if self._evaluations is not None:
            self._evaluations.unwatch(self)


class MetricCheck:
    """The ``should_stop_fn`` of the metric hooks: reads ``eval_dir``, warns when it cannot
    decide, and applies ``decide(values_by_step)``.

    Args:
      model_dir: the model directory (where to look for other evaluations, for the warning).
      evaluations: the Estimator's :class:`Evaluations` (whether something evaluating in
        this process writes to ``eval_dir``), or None.
      hook_name: the factory's name, for messages.
      metric_name: the metric read.
      eval_dir: the directory whose results are read.
      min_steps: results of global steps below this are ignored.
      decide: ``{step: value} -> bool``.
    """

    def __init__(self, model_dir, evaluations, hook_name, metric_name, eval_dir, min_steps, decide):
        self.model_dir = model_dir
        self.evaluations = evaluations if evaluations is not None else Evaluations()
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
        if self.warned_empty or self.evaluations.evaluates_into(self.eval_dir):
            return  # an evaluator of this process writes here: results are on their way
        self.warned_empty = True
        here = self.evaluations.eval_dirs()
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
