"""Evaluation during training without a checkpoint
(``tf.estimator.experimental.InMemoryEvaluatorHook``).

::

    evaluator = est.InMemoryEvaluatorHook(estimator, eval_input_fn, every_n_iter=500)
    estimator.train(train_input_fn, hooks=[evaluator], max_steps=10_000)

The hook evaluates the live train state (the variables on the device, no checkpoint read or
written) with ``Estimator.evaluate``'s loop and compiled step: before the first step, every
``every_n_iter`` steps of this ``train()`` call (or every ``every_n_secs`` seconds), and at
the end. Results go where ``evaluate(name=name)`` writes them (``estimator.eval_dir(name)``),
so early-stopping hooks and ``BestExporter`` see them. Semantics follow TF 2.15's hook
(``tensorflow_estimator/python/estimator/hooks/hooks.py``); the evaluation at the end is
skipped when the last step was just evaluated (TF evaluates it twice).

Beyond TF, which refuses distributed configs: in a multi-process job (chief and workers,
one or more devices each) every process evaluates at the same step, each its shard of the
evaluation input, and the merged result is the whole set's (``estimator.engine.
live_evaluation``); the chief writes it. Time-based evaluations are decided by the chief's
clock, checked every ``RunConfig.log_step_count_steps`` steps and broadcast
(``estimator.distribute.SyncedTimer``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from estimator import distribute
from estimator.estimator import Estimator
from estimator.handlers.events import check_hooks
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.hooks.timers import SecondOrStepTimer

__all__ = ["InMemoryEvaluatorHook"]

logger = logging.getLogger("estimator")


class InMemoryEvaluatorHook(SessionRunHook):
    """Evaluates the model being trained every N steps, without a checkpoint
    (``tf.estimator.experimental.InMemoryEvaluatorHook``).

    Args:
      estimator: the ``Estimator`` being trained (its ``evaluate`` machinery is used).
      input_fn: the evaluation input, as for ``Estimator.evaluate``.
      steps: evaluate at most this many batches; None until the input ends.
      hooks: ``SessionRunHook`` objects (or ``estimator.handlers``) for each evaluation.
      name: evaluation name; results go to ``estimator.eval_dir(name)``.
      every_n_iter: evaluate every this many training steps of the ``train()`` call.
      every_n_secs: keyword-only, beyond TF: evaluate every this many seconds instead
        (``every_n_iter`` is then ignored).

    Attributes:
      eval_result: the last evaluation's results (``evaluate()``'s dict), None before.

    Raises:
      ValueError: "invalid every_n_iter=..." for a non-positive value, non-positive steps
        or ``every_n_secs``, a ``RunConfig`` with parameter servers.
      TypeError: ``estimator`` is not an ``Estimator``; a hook is not a ``SessionRunHook``.
    """

    def __init__(
        self,
        estimator,
        input_fn: Callable,
        steps: int | None = None,
        hooks=None,
        name: str | None = None,
        every_n_iter: int = 100,
        *,
        every_n_secs: float | None = None,
    ) -> None:

        if not isinstance(estimator, Estimator):
            raise TypeError(
                f"`estimator` must have type `estimator.Estimator`. Got: {type(estimator)}"
            )
        if every_n_iter is None or every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if every_n_secs is not None and every_n_secs <= 0:
            raise ValueError(f"invalid every_n_secs={every_n_secs}.")
        config = estimator.config
        if config.num_ps_replicas > 0:
            raise ValueError(
                "InMemoryEvaluator supports chief and worker tasks (each process evaluates "
                "its shard), not parameter servers."
            )
        self._estimator = estimator
        self._input_fn = input_fn
        self._steps = steps
        self._name = name
        self._every_n_iter = every_n_iter
        self._every_n_secs = every_n_secs
        self._timer = None
        self._hooks = check_hooks(hooks)
        self.eval_dir = estimator.eval_dir(name)
        self.eval_result: dict[str, Any] | None = None
        self._iter_count = 0
        self._last_evaluated_step: int | None = None

    # ----- when to evaluate (overridden by train_and_evaluate's every_n_steps) ----------
    _evaluate_at_start = True

    def _due(self, session) -> bool:
        if self._timer is not None:
            step = session.global_step
            if not self._timer.should_trigger_for_step(step):
                return False
            self._timer.update_last_triggered_step(step)
            return True
        return self._iter_count % self._every_n_iter == 0

    def _after_evaluation(self, session, results: dict, at_end: bool) -> None:
        """Called after each evaluation (for subclasses)."""

    def _end_on_evaluated_step(self, session) -> None:
        """Called at the end instead of an evaluation when the last step was evaluated."""

    # ----- the hook ---------------------------------------------------------------------
    def begin(self) -> None:
        self._iter_count = 0
        self._last_evaluated_step = None
        if self._every_n_secs is not None:
            timer = SecondOrStepTimer(every_secs=self._every_n_secs)
            if self._estimator.runtime.processes > 1:
                # The chief's clock decides, every log_step_count_steps steps: every process
                # must evaluate at the same step.
                check = self._estimator.config.log_step_count_steps or 100
                timer = distribute.SyncedTimer(timer, self._every_n_secs, check)
            self._timer = timer
        self._estimator.evaluations.add_evaluator(self)

    def after_create_session(self, session, coord) -> None:
        """Evaluates the initial (or restored) model, before training."""
        if self._evaluate_at_start:
            self._evaluate(session, at_end=False)

    def after_run(self, run_context, run_values) -> None:
        self._iter_count += 1
        session = run_context.session
        if self._due(session):
            self._evaluate(session, at_end=False)

    def end(self, session) -> None:
        """Evaluates the final model (unless its step was just evaluated)."""
        try:
            if self._last_evaluated_step != session.global_step:
                self._evaluate(session, at_end=True)
            else:
                self._end_on_evaluated_step(session)
        finally:
            self._estimator.evaluations.remove_evaluator(self)

    def _evaluate(self, session, *, at_end: bool) -> None:
        results = self._estimator.runtime.evaluate_live(
            session, self._input_fn, self._steps, list(self._hooks), self._name
        )
        if self._timer is not None:
            self._timer.update_last_triggered_step(session.global_step)
        self.eval_result = results
        self._last_evaluated_step = session.global_step
        self._estimator.evaluations.evaluated(self.eval_dir)
        self._after_evaluation(session, results, at_end)
