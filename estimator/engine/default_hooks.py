"""The hooks ``Estimator.train()`` adds, in TF 2.15's order.

As ``Estimator._train_with_estimator_spec`` and ``MonitoredTrainingSession`` wire them:
chief hooks first (a ``CheckpointSaverHook`` on the ``RunConfig`` schedule unless one is
given, ``EstimatorSpec.training_chief_hooks``, a ``StepCounterHook`` and a
``SummarySaverHook``), then the worker hooks (the caller's hooks, a ``NanTensorHook``, a
``LoggingTensorHook`` of loss and step every ``log_step_count_steps``, then
``EstimatorSpec.training_hooks``). Beyond TF: a ``MetricHandler`` reporting the training
metrics every ``RunConfig.train_metrics_steps`` (the loop then orders the list by
priority: ``estimator.handlers.order``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from estimator import hooks as hooks_lib
from estimator import keys
from estimator.handlers.metric import MetricHandler
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
        agree on; the other chief hooks, and the loss logging, run on the chief alone.

    Raises:
      ValueError: listeners without a checkpoint saver (TF's message).
    """
    log_steps = config.log_step_count_steps
    worker_hooks = list(hooks)
    if config.train_metrics_steps and not any(isinstance(h, MetricHandler) for h in hooks):
        # Every process reads and resets its copy of the metrics at the same steps; the
        # chief logs and writes them (RunConfig.train_metrics_steps).
        worker_hooks.append(MetricHandler(batch_period=config.train_metrics_steps))
    # The NaN guard is in the step (after a non-finite loss no step changes anything); the
    # hook raises as soon as any fetch or checkpoint save brings the record to the host,
    # and checks it itself every log_step_count_steps (100 without logging) and at the end.
    worker_hooks.append(hooks_lib.NanTensorHook(keys.LOSS, every_n_iter=log_steps or 100))
    if log_steps and (chief or processes == 1):
        worker_hooks.append(
            hooks_lib.LoggingTensorHook(
                {"loss": keys.LOSS, "step": keys.GLOBAL_STEP}, every_n_iter=log_steps
            )
        )
    spec_hooks, spec_chief_hooks = list(info.hooks), list(info.chief_hooks)
    worker_hooks.extend(spec_hooks)
    chief_hooks: list[SessionRunHook] = []
    existing = worker_hooks + spec_chief_hooks
    collective_save = processes > 1
    if config.save_checkpoints_secs or config.save_checkpoints_steps:
        if not any(isinstance(h, hooks_lib.CheckpointSaverHook) for h in existing):
            secs, steps = config.save_checkpoints_secs, config.save_checkpoints_steps
            timer = hooks_lib.SecondOrStepTimer(every_secs=secs, every_steps=steps)
            chief_hooks.append(
                hooks_lib.CheckpointSaverHook(
                    config.model_dir,
                    save_secs=secs,
                    save_steps=steps,
                    # Non-chief workers of a TF-style cluster drop the hook below; they open
                    # no checkpointer.
                    saver=saver() if chief or collective_save else None,
                    timer=SyncedTimer(timer, secs, log_steps or 100) if collective_save else None,
                )
            )
    else:
        logger.warning(
            "Checkpoints are disabled (save_checkpoints_steps and save_checkpoints_secs are "
            "None): the trained variables are not saved and later calls will not see them."
        )
    savers = [h for h in chief_hooks + existing if isinstance(h, hooks_lib.CheckpointSaverHook)]
    if saving_listeners:
        if not savers:
            raise ValueError(
                "There should be a CheckpointSaverHook to use saving_listeners. Please set one "
                "of the RunConfig.save_checkpoints_steps or RunConfig.save_checkpoints_secs."
            )
        for listener in saving_listeners:
            savers[0].add_listener(listener)
    all_hooks = chief_hooks + spec_chief_hooks
    if log_steps:
        all_hooks.append(
            hooks_lib.StepCounterHook(every_n_steps=log_steps, output_dir=config.model_dir)
        )
    if config.save_summary_steps:
        all_hooks.append(make_summary_hook(config.model_dir, config.save_summary_steps))
    if not chief:
        # TF's MonitoredTrainingSession runs chief-only hooks (checkpoints, step counter,
        # summaries, EstimatorSpec.training_chief_hooks) on the chief alone; in a JAX
        # multi-process job every process takes part in the (collective) checkpoint save.
        savers = [h for h in chief_hooks if isinstance(h, hooks_lib.CheckpointSaverHook)]
        return (savers if collective_save else []) + worker_hooks
    return all_hooks + worker_hooks
