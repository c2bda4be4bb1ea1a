"""The hooks ``Estimator.train()`` adds, in TF 2.15's order.

As ``Estimator._train_with_estimator_spec`` and ``MonitoredTrainingSession`` wire them:
chief hooks first (a ``CheckpointSaverHook`` on the ``RunConfig`` schedule unless one is
given, ``EstimatorSpec.training_chief_hooks``, a ``StepCounterHook`` and a
``SummarySaverHook``), then the worker hooks (the caller's hooks, a ``NanTensorHook``, a
``LoggingTensorHook`` of loss and step every ``log_step_count_steps``, then
``EstimatorSpec.training_hooks``). The loop then orders the list by priority
(``estimator.handlers.events.Dispatcher``): TF's hooks keep this order. In a multi-process
job the processes other than the chief also fetch values where the chief's reporting hooks
do, so that ``steps_per_execution`` fuses the same steps on every process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from estimator import hooks as hooks_lib
from estimator import keys
from estimator.hooks.checkpoint_saver import savers_among
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.hooks.summary import make_summary_hook
from estimator.hooks.timers import SyncedTimer

logger = logging.getLogger("estimator")


def default_training_hooks(
    config, info, hooks, saving_listeners, saver: Callable, *, chief: bool, processes: int = 1
) -> list[SessionRunHook]:
    """All hooks of a ``train()`` call, in call order.

    Args:
      config: the ``RunConfig``.
      info: the train step's ``StepInfo`` (the hooks ``model_fn`` returned).
      hooks: the caller's hooks (with a ``StopAtStepHook`` for steps/max_steps).
      saving_listeners: ``CheckpointSaverListener``s.
      saver: returns the Estimator's ``Checkpointer``.
      chief: whether this process is the job's chief.
      processes: JAX processes in the job. With several, every process saves checkpoints
        (an orbax save is collective: written once, each process its part), at steps all
        agree on; the other chief hooks, and the loss logging, run on the chief alone, and
        the other processes fetch values at the steps where the chief's do
        (:func:`_chief_fetch_steps`).

    Raises:
      ValueError: listeners without a checkpoint saver (TF's message).
    """
    worker_hooks = [*hooks, *_worker_hooks(config, log_loss=chief or processes == 1), *info.hooks]
    existing = worker_hooks + list(info.chief_hooks)
    chief_hooks = _saver_hook(config, existing, saver, chief, collective=processes > 1)
    savers = savers_among(chief_hooks + existing)
    if saving_listeners:
        if not savers:
            raise ValueError(
                "There should be a CheckpointSaverHook to use saving_listeners. Please set one "
                "of the RunConfig.save_checkpoints_steps or RunConfig.save_checkpoints_secs."
            )
        for listener in saving_listeners:
            savers[0].add_listener(listener)
    if not chief:
        # TF's MonitoredTrainingSession runs chief-only hooks (checkpoints, step counter,
        # summaries, EstimatorSpec.training_chief_hooks) on the chief alone; in a JAX
        # multi-process job every process takes part in the (collective) checkpoint save.
        if processes == 1:
            return worker_hooks
        return chief_hooks + _chief_fetch_steps(config) + worker_hooks
    return chief_hooks + list(info.chief_hooks) + _chief_reporting(config) + worker_hooks


def _worker_hooks(config, log_loss: bool) -> list[SessionRunHook]:
    """The NaN guard, and the loss logging (``log_loss``): the hooks TF adds on every worker."""
    log_steps = config.log_step_count_steps
    # The NaN guard is in the step (after a non-finite loss no step changes anything); the
    # hook raises as soon as any fetch or checkpoint save brings the record to the host,
    # and checks it itself every log_step_count_steps (100 without logging) and at the end.
    added = [hooks_lib.NanTensorHook(keys.LOSS, every_n_iter=log_steps or 100)]
    if log_steps and log_loss:
        added.append(
            hooks_lib.LoggingTensorHook(
                {"loss": keys.LOSS, "step": keys.GLOBAL_STEP}, every_n_iter=log_steps
            )
        )
    return added


def _saver_hook(config, existing, saver, chief: bool, collective: bool) -> list[SessionRunHook]:
    """``[CheckpointSaverHook]`` on the ``RunConfig`` schedule, unless ``existing`` has a
    saver or checkpoints are off (then ``[]``). In a multi-process job (``collective``)
    time-based saves happen at steps every process agrees on (``SyncedTimer``)."""
    secs, steps = config.save_checkpoints_secs, config.save_checkpoints_steps
    if not (secs or steps):
        logger.warning(
            "Checkpoints are disabled (save_checkpoints_steps and save_checkpoints_secs are "
            "None): the trained variables are not saved and later calls will not see them."
        )
        return []
    if savers_among(existing):
        return []
    timer = hooks_lib.SecondOrStepTimer(every_secs=secs, every_steps=steps)
    saver_hook = hooks_lib.CheckpointSaverHook(
        config.model_dir,
        save_secs=secs,
        save_steps=steps,
        # Non-chief workers of a TF-style cluster drop the hook; they open no checkpointer.
        saver=saver() if chief or collective else None,
        timer=SyncedTimer(timer, secs, config.log_step_count_steps or 100) if collective else None,
    )
    return [saver_hook]


def _chief_fetch_steps(config) -> list[SessionRunHook]:
    """What a process other than the chief runs in place of the chief's reporting hooks,
    so that it asks for values at the same steps: with ``steps_per_execution`` > 1 a
    process runs the steps queued since its last fetch in one call, and every process of a
    job must run the same calls (each step's gradients are reduced across them). The
    chief's ``LoggingTensorHook`` fetches at the steps of the ``NanTensorHook`` every
    process runs (both every ``log_step_count_steps``); its ``SummarySaverHook`` every
    ``save_summary_steps``, which a ``SummarySaverHook`` without an output directory
    matches here: it fetches at those steps and writes nothing."""
    if config.save_summary_steps and config.steps_per_execution > 1:
        return [hooks_lib.SummarySaverHook(save_steps=config.save_summary_steps)]
    return []


def _chief_reporting(config) -> list[SessionRunHook]:
    """The chief's ``StepCounterHook`` and ``SummarySaverHook`` (when their intervals are set)."""
    added: list[SessionRunHook] = []
    if config.log_step_count_steps:
        added.append(
            hooks_lib.StepCounterHook(
                every_n_steps=config.log_step_count_steps, output_dir=config.model_dir
            )
        )
    if config.save_summary_steps:
        added.append(make_summary_hook(config.model_dir, config.save_summary_steps))
    return added
