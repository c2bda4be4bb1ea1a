"""The hooks ``Estimator.train()`` adds, in TF 2.15's order.

As ``Estimator._train_with_estimator_spec`` and ``MonitoredTrainingSession`` wire them:
chief hooks first (a ``CheckpointSaverHook`` on the ``RunConfig`` schedule unless one is
given, ``EstimatorSpec.training_chief_hooks``, a ``StepCounterHook`` and a
``SummarySaverHook``), then the worker hooks (the caller's hooks, a ``NanTensorHook``, a
``LoggingTensorHook`` of loss and step every ``log_step_count_steps``, then
``EstimatorSpec.training_hooks``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from estimator.hooks import basic as hooks_lib
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.summary import make_summary_hook

logger = logging.getLogger("estimator")


def default_training_hooks(
    config, info, hooks, saving_listeners, saver: Callable
) -> list[SessionRunHook]:
    """All hooks of a ``train()`` call, in call order.

    Args:
      config: the ``RunConfig``.
      info: the train step's ``StepInfo`` (the hooks ``model_fn`` returned).
      hooks: the caller's hooks (with a ``StopAtStepHook`` for steps/max_steps).
      saving_listeners: ``CheckpointSaverListener``s.
      saver: returns the Estimator's ``Checkpointer``.

    Raises:
      ValueError: listeners without a checkpoint saver (TF's message).
    """
    log_steps = config.log_step_count_steps
    worker_hooks = list(hooks)
    # The NaN guard is in the step (after a non-finite loss no step changes anything); the
    # hook raises as soon as any fetch or checkpoint save brings the record to the host,
    # and checks it itself every log_step_count_steps (100 without logging) and at the end.
    worker_hooks.append(hooks_lib.NanTensorHook(hooks_lib.LOSS, every_n_iter=log_steps or 100))
    if log_steps:
        worker_hooks.append(
            hooks_lib.LoggingTensorHook(
                {"loss": hooks_lib.LOSS, "step": hooks_lib.GLOBAL_STEP}, every_n_iter=log_steps
            )
        )
    spec_hooks, spec_chief_hooks = list(info.hooks), list(info.chief_hooks)
    worker_hooks.extend(spec_hooks)
    chief_hooks: list[SessionRunHook] = []
    existing = worker_hooks + spec_chief_hooks
    if config.save_checkpoints_secs or config.save_checkpoints_steps:
        if not any(isinstance(h, hooks_lib.CheckpointSaverHook) for h in existing):
            chief_hooks.append(
                hooks_lib.CheckpointSaverHook(
                    config.model_dir,
                    save_secs=config.save_checkpoints_secs,
                    save_steps=config.save_checkpoints_steps,
                    # Non-chief workers drop the hook below; they open no checkpointer.
                    saver=saver() if config.is_chief else None,
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
            if listener not in savers[0]._listeners:
                savers[0]._listeners.append(listener)
    all_hooks = chief_hooks + spec_chief_hooks
    if log_steps:
        all_hooks.append(
            hooks_lib.StepCounterHook(every_n_steps=log_steps, output_dir=config.model_dir)
        )
    if config.save_summary_steps:
        all_hooks.append(make_summary_hook(config.model_dir, config.save_summary_steps))
    if not config.is_chief:
        # TF's MonitoredTrainingSession runs chief-only hooks (checkpoints, step counter,
        # summaries, EstimatorSpec.training_chief_hooks) on the chief alone.
        return worker_hooks
    return all_hooks + worker_hooks
