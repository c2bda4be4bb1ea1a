"""``train_and_evaluate``: training with periodic evaluation and export
(``tf.estimator.train_and_evaluate``, ``TrainSpec``, ``EvalSpec``).

::

    train_spec = est.TrainSpec(train_input_fn, max_steps=10_000)
    eval_spec = est.EvalSpec(eval_input_fn, exporters=[est.BestExporter(...)],
                             start_delay_secs=0, throttle_secs=60)
    metrics, export_results = est.train_and_evaluate(estimator, train_spec, eval_spec)

Local mode (no cluster in TF_CONFIG), as TF 2.15: one ``train()`` call; after each checkpoint
is saved (``RunConfig.save_checkpoints_steps``/``_secs``) the checkpoint is evaluated,
unless the last evaluation started less than ``throttle_secs`` ago; each evaluation is
followed by the exporters; when training ends, the final checkpoint is evaluated and
exported. ``start_delay_secs`` applies to a separate evaluator task only (TF ignores it in
local mode too). Returns the last evaluation's metrics and export results.

Beyond TF:

* ``EvalSpec(..., every_n_steps=N)`` evaluates in process every N global steps from the
  live train state, without waiting for (or reading) a checkpoint; exporters, when given,
  export a checkpoint saved at that step.
* The evaluation at the end of training is always flagged ``is_the_final_export`` (TF
  flags only an evaluation at ``max_steps``, so a run stopped early, or with
  ``max_steps=None``, never got its ``FinalExporter`` export).
* Early-stopping hooks in ``TrainSpec.hooks`` check right after each evaluation (see
  ``estimator.early_stopping``).

Distributed (TF_CONFIG with a cluster): the ``evaluator`` task evaluates each new checkpoint
(after ``start_delay_secs``, at most every ``throttle_secs``) until one reaches
``max_steps``; ``chief``/``worker`` tasks train (TF's worker start-up delays, meant for
asynchronous parameter-server training, are not applied); ``ps`` is not supported. Beyond
TF: with ``EvalSpec(every_n_steps=N)`` the chief and the workers themselves evaluate the
live state every N steps, each process its shard of the evaluation input, merged into the
whole set's result (``estimator.engine.live_evaluation``), which the chief writes and
exports; every process returns it. No evaluator task is needed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from estimator.config import TaskType
from estimator.estimator import Estimator
from estimator.hooks.checkpoint_saver import CheckpointSaverHook, CheckpointSaverListener
from estimator.hooks.timers import SecondOrStepTimer
from estimator.training.in_memory_evaluator import InMemoryEvaluatorHook
from estimator.training.specs import EvalSpec, TrainSpec

__all__ = ["TrainSpec", "EvalSpec", "train_and_evaluate"]

logger = logging.getLogger("estimator")


def _clock() -> float:
    return time.time()  # looked up at call time: tests replace this module's ``time``


#: The longest an evaluator task waits for a checkpoint without saying so (seconds).
WAIT_LOG_SECS = 60.0


def _sleep(seconds: float, waiting) -> None:
    """Sleeps ``seconds`` in slices of at most ``WAIT_LOG_SECS``, checking ``waiting`` (a
    :class:`_WaitLog`, or None) after each."""
    end = _clock() + seconds
    while (left := end - _clock()) > 0:
        time.sleep(min(left, WAIT_LOG_SECS))
        if waiting is not None:
            waiting.check()


class _WaitLog:
    """An evaluator task's "still waiting" line: at most every ``WAIT_LOG_SECS``, and only
    while the evaluator is waiting for training (not while it evaluates)."""

    def __init__(self, model_dir: str, max_steps: int | None, evaluator: _Evaluator) -> None:
        self._model_dir = model_dir
        self._max_steps = max_steps
        self._evaluator = evaluator
        self._since = _clock()

    def check(self) -> None:
        now = _clock()
        if now - self._since < WAIT_LOG_SECS:
            return
        self._since = now
        newest = self._evaluator.latest_checkpoint()
        evaluated = self._evaluator.eval_result
        step = (
            None
            if evaluated is None or evaluated.metrics is None
            else (evaluated.metrics.get("global_step"))
        )
        age = (
            "none yet"
            if newest is None
            else (f"{os.path.basename(newest)}, written {now - _mtime(newest):.0f} s ago")
        )
        logger.warning(
            "The evaluator is waiting for a new checkpoint in %s (to reach max_steps=%s; "
            "last evaluated global_step: %s; newest checkpoint: %s). If the training job "
            "has stopped, no more checkpoints will come: stop this task.",
            self._model_dir,
            self._max_steps,
            step,
            age,
        )


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:  # removed meanwhile (checkpoint retention)
        return _clock()


def _assert_eval_spec(eval_spec) -> None:
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"`eval_spec` must have type `estimator.EvalSpec`. Got: {type(eval_spec)}")


def _check_metrics(metrics) -> None:
    """TF's ``_EvalResult`` checks of what ``Estimator.evaluate`` returned (a subclass's
    ``evaluate`` may return anything), with TF's messages."""
    if not metrics:
        raise ValueError("Internal error: `Estimator.evaluate` should never return empty metrics.")
    if not isinstance(metrics, dict):
        raise TypeError(f"`Estimator.evaluate` should return dict. Given {type(metrics)}.")
    if "global_step" not in metrics:
        raise ValueError(
            "Internal error: `Estimator.evaluate` result should have `global_step` in result. "
            f"Given {metrics}"
        )


def train_and_evaluate(estimator, train_spec: TrainSpec, eval_spec: EvalSpec):
    """Trains ``estimator``, evaluating and exporting along the way
    (``tf.estimator.train_and_evaluate``).

    See the module docstring for when evaluations happen. Hooks in ``train_spec.hooks``
    run during training; ``eval_spec.hooks`` during each evaluation.

    Args:
      estimator: an ``Estimator``.
      train_spec: a :class:`TrainSpec`.
      eval_spec: an :class:`EvalSpec`.

    Returns:
      ``(metrics, export_results)``: the last evaluation's ``evaluate()`` dict and the list
      of what each exporter returned after it (an export path or None). ``(None, None)``
      when nothing was evaluated (``max_steps`` already reached: training is skipped, as
      TF), and on ``chief``/``worker`` tasks.

    Raises:
      TypeError: an argument of the wrong type (TF's messages).
      ValueError: a bad TF_CONFIG task (TF's messages), or local mode without checkpoints
        and without ``every_n_steps`` (nothing would trigger an evaluation).
    """
    _assert_eval_spec(eval_spec)
    executor = _TrainingExecutor(estimator, train_spec, eval_spec)
    config = estimator.config
    if config.task_type == TaskType.EVALUATOR and config.task_id > 0:
        raise ValueError(
            "For distributed training, there can only be one `evaluator` task (with task id "
            f"0).  Given task id {config.task_id}"
        )
    return executor.run()


# ----- evaluation and export ----------------------------------------------------------------
class _EvalStatus:
    EVALUATED = "evaluated"
    MISSING_CHECKPOINT = "missing checkpoint"
    NO_NEW_CHECKPOINT = "no new checkpoint"


class _EvalResult(NamedTuple):
    status: str
    metrics: dict[str, Any] | None = None
    checkpoint_path: str | None = None


class _Evaluator:
    """Evaluates (a checkpoint, or results computed in process) and runs the exporters;
    remembers the last evaluation (TF's ``_TrainingExecutor._Evaluator``)."""

    def __init__(self, estimator, eval_spec: EvalSpec, max_training_steps: int | None) -> None:
        self._estimator = estimator
        self._eval_spec = eval_spec
        self._max_training_steps = max_training_steps
        self._previous_ckpt_path: str | None = None
        self._last_warning_time = 0.0
        self.eval_dir = estimator.eval_dir(eval_spec.name)
        self.eval_result: _EvalResult | None = None
        self.export_results: list | None = None
        self.last_was_final = False

    @property
    def evaluations(self):
        """The estimator's ``Evaluations`` (where its early-stopping hooks hear of
        evaluations)."""
        return self._estimator.evaluations

    def latest_checkpoint(self) -> str | None:
        return self._estimator.latest_checkpoint()

    def evaluate_and_export(self, *, at_end: bool = False) -> tuple[_EvalResult, list]:
        """Evaluates the latest checkpoint if it is new, then exports."""
        latest = self._estimator.latest_checkpoint()
        if not latest:
            self._log_err_msg(
                "Estimator is not trained yet. Will start an evaluation when a checkpoint is ready."
            )
            return _EvalResult(_EvalStatus.MISSING_CHECKPOINT), []
        if latest == self._previous_ckpt_path:
            self._log_err_msg(
                "No new checkpoint ready for evaluation. Skip the current evaluation pass as "
                "evaluation results are expected to be same for the same checkpoint."
            )
            return _EvalResult(_EvalStatus.NO_NEW_CHECKPOINT), []
        spec = self._eval_spec
        metrics = self._estimator.evaluate(
            spec.input_fn,
            steps=spec.steps,
            hooks=list(spec.hooks),
            checkpoint_path=latest,
            name=spec.name,
        )
        self._estimator.evaluations.evaluated(self.eval_dir)
        self._last_warning_time = 0.0
        self._previous_ckpt_path = latest
        return self.record(metrics, lambda: latest, at_end=at_end)

    def record(self, metrics: dict, checkpoint_fn: Callable[[], str], *, at_end: bool):
        """Records an evaluation and exports; ``checkpoint_fn()`` gives the checkpoint of
        the evaluated state (called only when there are exporters)."""
        _check_metrics(metrics)
        step = metrics["global_step"]
        final = at_end or bool(self._max_training_steps and step >= self._max_training_steps)
        path = checkpoint_fn() if self._eval_spec.exporters else None
        result = _EvalResult(_EvalStatus.EVALUATED, metrics, path)
        self.eval_result = result
        self.export_results = self._export(result, final)
        self.last_was_final = final
        return result, self.export_results

    def final_export(self, checkpoint_fn: Callable[[], str]) -> None:
        """Training ended on the step evaluated last: call the exporters again as final
        (``LatestExporter``/``BestExporter`` do not export the same checkpoint twice)."""
        if self.eval_result is None or self.last_was_final:
            return
        result = self.eval_result
        if self._eval_spec.exporters and result.checkpoint_path is None:
            result = result._replace(checkpoint_path=checkpoint_fn())
            self.eval_result = result
        self.export_results = self._export(result, True)
        self.last_was_final = True

    def _export(self, result: _EvalResult, is_the_final_export: bool) -> list:
        if self._estimator.runtime.processes > 1 and not self._estimator.runtime.is_chief:
            # In-training evaluation of a job: the chief exports (the checkpoint it reads
            # was saved by every process together).
            return [None] * len(self._eval_spec.exporters)
        export_dir_base = os.path.join(self._estimator.model_dir, "export")
        return [
            exporter.export(
                estimator=self._estimator,
                export_path=os.path.join(export_dir_base, exporter.name),
                checkpoint_path=result.checkpoint_path,
                eval_result=result.metrics,
                is_the_final_export=is_the_final_export,
            )
            for exporter in self._eval_spec.exporters
        ]

    def _log_err_msg(self, message: str) -> None:
        """Logs ``message`` as a warning at most every 10 minutes (TF)."""
        now = _clock()
        if now - self._last_warning_time > 600:
            logger.warning(message)
            self._last_warning_time = now


class _NewCheckpointListenerForEvaluate(CheckpointSaverListener):
    """Evaluates and exports after checkpoint saves, at most every ``eval_throttle_secs``,
    and the final checkpoint at the end (TF's listener of the same name)."""

    def __init__(
        self,
        evaluator: _Evaluator,
        eval_throttle_secs: float,
        *,
        clock: Callable[[], float] = _clock,
    ) -> None:
        self._evaluator = evaluator
        self._eval_throttle_secs = eval_throttle_secs
        self._clock = clock
        self.eval_dir = evaluator.eval_dir  # what Evaluations.evaluates_into asks
        self._timer = SecondOrStepTimer(every_secs=eval_throttle_secs, clock=clock)
        self._is_first_run = True

    def begin(self) -> None:
        self._timer = SecondOrStepTimer(every_secs=self._eval_throttle_secs, clock=self._clock)
        self._is_first_run = True
        self._evaluator.evaluations.add_evaluator(self)

    def after_save(self, session, global_step_value: int) -> None:
        if self._is_first_run:  # the checkpoint saved at the start: nothing trained yet
            self._is_first_run = False
            return
        if self._timer.should_trigger_for_step(global_step_value):
            self._evaluate(global_step_value, at_end=False)
        else:
            logger.info(
                "Skip the current checkpoint eval due to throttle secs (%s secs).",
                self._eval_throttle_secs,
            )

    def end(self, session, global_step_value: int) -> None:
        try:
            if global_step_value != self._timer.last_triggered_step():
                self._evaluate(global_step_value, at_end=True)
            else:
                self._evaluator.final_export(self._evaluator.latest_checkpoint)
        finally:
            self._evaluator.evaluations.remove_evaluator(self)

    def _evaluate(self, global_step_value: int, *, at_end: bool) -> None:
        self._timer.update_last_triggered_step(global_step_value)
        result, _ = self._evaluator.evaluate_and_export(at_end=at_end)
        if result.status != _EvalStatus.EVALUATED:
            raise RuntimeError(
                f"There was no new checkpoint after the training. Eval status: {result.status}"
            )


class _EvalEveryNStepsHook(InMemoryEvaluatorHook):
    """``EvalSpec(every_n_steps=N)``: evaluates the live state at global steps that are
    multiples of N and at the end, then exports (from a checkpoint saved for that step)."""

    _evaluate_at_start = False

    def __init__(self, estimator, eval_spec: EvalSpec, evaluator: _Evaluator) -> None:
        super().__init__(
            estimator,
            eval_spec.input_fn,
            steps=eval_spec.steps,
            hooks=list(eval_spec.hooks),
            name=eval_spec.name,
            every_n_iter=eval_spec.every_n_steps,
        )
        self._evaluator = evaluator

    def _due(self, session) -> bool:
        return session.global_step % self._every_n_iter == 0

    def _checkpoint_fn(self, session) -> Callable[[], str]:
        def checkpoint() -> str:
            saver = self._estimator.runtime.saver()  # the Estimator's: a no-op if step is saved
            path = saver.save(session.global_step, session.state)
            saver.wait()
            return path

        return checkpoint

    def _after_evaluation(self, session, results: dict, at_end: bool) -> None:
        self._evaluator.record(results, self._checkpoint_fn(session), at_end=at_end)

    def _end_on_evaluated_step(self, session) -> None:
        self._evaluator.final_export(self._checkpoint_fn(session))


# ----- the executor -------------------------------------------------------------------------
class _TrainingExecutor:
    """Runs the procedure of the task type in ``estimator.config`` (TF's executor)."""

    def __init__(self, estimator, train_spec, eval_spec) -> None:

        if not isinstance(estimator, Estimator):
            raise TypeError(
                f"`estimator` must have type `estimator.Estimator`. Got: {type(estimator)}"
            )
        if not isinstance(train_spec, TrainSpec):
            raise TypeError(
                f"`train_spec` must have type `estimator.TrainSpec`. Got: {type(train_spec)}"
            )
        if eval_spec and not isinstance(eval_spec, EvalSpec):
            raise TypeError(
                "`eval_spec` must be either `None` or have type `estimator.EvalSpec`. Got: "
                f"{type(eval_spec)}"
            )
        self._estimator = estimator
        self._train_spec = train_spec
        self._eval_spec = eval_spec

    def run(self):
        config = self._estimator.config
        if not config.cluster_spec and config.task_type != TaskType.EVALUATOR:
            logger.info("Running training and evaluation locally (non-distributed).")
            return self.run_local()
        if not config.task_type:
            raise ValueError(
                "`estimator.config` must have task_type set. This usually means TF_CONFIG "
                "environment is not set correctly."
            )
        if config.task_type == "local":
            raise ValueError(
                "`task.type` in TF_CONFIG cannot be `local`. Leaving `cluster` and `task` "
                "properties in TF_CONFIG absent triggers train and evaluate `Estimator` "
                "locally (non-distributed)."
            )
        tasks = sorted(
            name[len("run_") :]
            for name in dir(self)
            if name.startswith("run_") and name != "run_local" and callable(getattr(self, name))
        )
        if config.task_type not in tasks:
            raise ValueError(
                f"Task type {config.task_type} is not supported. Supported task types are {tasks}"
            )
        return getattr(self, "run_" + config.task_type)()

    # ----- local (and the legacy master task) -------------------------------------------
    def run_local(self):
        """Trains once; evaluates and exports after checkpoints (or every N steps)."""
        config = self._estimator.config
        logger.info(
            "Start train and evaluate loop. The evaluate will happen after every checkpoint. "
            "Checkpoint frequency is determined based on RunConfig arguments: "
            "save_checkpoints_steps %s or save_checkpoints_secs %s.",
            config.save_checkpoints_steps,
            config.save_checkpoints_secs,
        )
        return self._train_with_evaluation()

    def run_master(self):
        return self._train_with_evaluation()

    def _train_with_evaluation(self):
        train_spec, eval_spec = self._train_spec, self._eval_spec
        evaluator = _Evaluator(self._estimator, eval_spec, train_spec.max_steps)
        hooks = list(train_spec.hooks)
        listeners = list(train_spec.saving_listeners)
        if eval_spec.every_n_steps:
            # First, so that hooks after it (early stopping) see this step's evaluation.
            hooks.insert(0, _EvalEveryNStepsHook(self._estimator, eval_spec, evaluator))
        else:
            self._check_checkpoints(hooks)
            listeners.append(_NewCheckpointListenerForEvaluate(evaluator, eval_spec.throttle_secs))
        self._estimator.train(
            train_spec.input_fn,
            hooks=hooks,
            max_steps=train_spec.max_steps,
            saving_listeners=listeners,
        )
        if evaluator.eval_result is None:
            logger.info(
                "train_and_evaluate made no evaluation (training was skipped: max_steps=%s "
                "has been reached in %s).",
                train_spec.max_steps,
                self._estimator.model_dir,
            )
            return None, None
        return evaluator.eval_result.metrics, evaluator.export_results

    def _check_checkpoints(self, hooks) -> None:
        config = self._estimator.config
        if config.save_checkpoints_steps or config.save_checkpoints_secs:
            return
        if any(isinstance(h, CheckpointSaverHook) for h in hooks):
            return
        raise ValueError(
            "There should be a CheckpointSaverHook to use saving_listeners. Please set one of "
            "the RunConfig.save_checkpoints_steps or RunConfig.save_checkpoints_secs "
            "(train_and_evaluate evaluates after each checkpoint), or evaluate in process "
            "without checkpoints with EvalSpec(..., every_n_steps=N)."
        )

    # ----- distributed ------------------------------------------------------------------
    def run_chief(self):
        if self._eval_spec.every_n_steps:
            return self._train_with_evaluation()  # every process evaluates its shard
        self._estimator.train(
            self._train_spec.input_fn,
            hooks=list(self._train_spec.hooks),
            max_steps=self._train_spec.max_steps,
            saving_listeners=list(self._train_spec.saving_listeners),
        )
        return None, None

    def run_worker(self):
        if self._eval_spec.every_n_steps:
            return self._train_with_evaluation()
        self._estimator.train(
            self._train_spec.input_fn,
            hooks=list(self._train_spec.hooks),
            max_steps=self._train_spec.max_steps,
        )
        return None, None

    def run_ps(self):
        raise ValueError(
            "Task type ps is not supported: jax-estimator trains data-parallel, with the "
            "variables replicated on every worker, so there are no parameter servers. Remove "
            "'ps' from the cluster in TF_CONFIG."
        )

    def run_evaluator(self):
        """Evaluates each new checkpoint until one reaches ``max_steps`` (TF's
        ``_start_continuous_evaluation``); returns the last ``(metrics, export_results)``.

        Beyond TF: while no checkpoint at ``max_steps`` has been evaluated, a line at least
        every ``WAIT_LOG_SECS`` (60 s) says what the evaluator waits for and how old the
        newest checkpoint is, so an evaluator whose training job died is seen waiting, not
        silent (TF logs nothing for up to 10 minutes at a time and waits forever)."""
        eval_spec, max_steps = self._eval_spec, self._train_spec.max_steps
        if eval_spec.start_delay_secs:
            logger.info("Waiting %f secs before starting eval.", eval_spec.start_delay_secs)
            _sleep(eval_spec.start_delay_secs, None)
        evaluator = _Evaluator(self._estimator, eval_spec, max_steps)
        waiting = _WaitLog(self._estimator.model_dir, max_steps, evaluator)
        latest = None
        while True:
            if latest is not None and latest.status == _EvalStatus.EVALUATED:
                step = latest.metrics.get("global_step")
                if step and max_steps and step >= max_steps:
                    logger.info(
                        "Exiting evaluation, global_step=%s >= train max_steps=%s",
                        step,
                        max_steps,
                    )
                    return evaluator.eval_result.metrics, evaluator.export_results
            start = _clock()
            latest, _ = evaluator.evaluate_and_export()
            waiting.check()
            difference = eval_spec.throttle_secs - (_clock() - start)
            if difference > 0:
                logger.info("Waiting %f secs before starting next eval run.", difference)
                _sleep(difference, waiting)
            elif eval_spec.throttle_secs == 0 and latest.status != _EvalStatus.EVALUATED:
                logger.warning(
                    "EvalSpec.throttle_secs is set as 0. This might overload the job before "
                    "finding (next) new checkpoint. Please consider to increase it."
                )
