"""Checkpoint saving: ``CheckpointSaverHook`` and its ``CheckpointSaverListener`` objects
(TF 2.15's ``basic_session_run_hooks.py``)."""

from __future__ import annotations

import logging

from estimator.checkpoint import Checkpointer
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.hooks.timers import SecondOrStepTimer

__all__ = ["CheckpointSaverHook", "CheckpointSaverListener", "savers_among"]

logger = logging.getLogger("estimator")


class CheckpointSaverListener:
    """Called around checkpoint saves (``tf.estimator.CheckpointSaverListener``).

    ``after_save`` returning True requests a stop of training.
    """

    def begin(self) -> None:
        pass

    def before_save(self, session, global_step_value: int) -> None:
        pass

    def after_save(self, session, global_step_value: int) -> bool | None:
        pass

    def end(self, session, global_step_value: int) -> None:
        pass


class CheckpointSaverHook(SessionRunHook):
    """Saves checkpoints at the start, every N steps or seconds, and at the end
    (``tf.estimator.CheckpointSaverHook``).

    Saves are asynchronous (orbax): training goes on while files are written; ``end``
    waits for them, so ``train()`` returns with every checkpoint complete.

    Args:
      checkpoint_dir: the model directory.
      save_secs: seconds between saves.
      save_steps: steps between saves (exactly one of the two).
      saver: an ``estimator.checkpoint.Checkpointer`` (the Estimator passes its own, with
        the RunConfig's retention); None makes one keeping 5.
      checkpoint_basename, scaffold, save_graph_def: accepted for TF compatibility.
      listeners: ``CheckpointSaverListener`` objects (more can be added before training with
        :meth:`add_listener`).
      timer: keyword-only, beyond TF: what decides when to save (a
        :class:`SecondOrStepTimer` or an object with its methods), made from
        ``save_secs``/``save_steps`` when None. In a multi-process job the Estimator passes
        one whose decisions all processes share (``estimator.distribute.SyncedTimer``).

    Raises:
      ValueError: from :class:`SecondOrStepTimer` when not exactly one interval is given.
    """

    def __init__(
        self,
        checkpoint_dir,
        save_secs=None,
        save_steps=None,
        saver=None,
        checkpoint_basename="model.ckpt",
        scaffold=None,
        listeners=None,
        save_graph_def=True,
        *,
        timer=None,
    ) -> None:
        del checkpoint_basename, scaffold, save_graph_def
        self._checkpoint_dir = checkpoint_dir
        self._timer = timer or SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._saver = saver
        self._listeners = list(listeners or [])

    @property
    def listeners(self) -> tuple[CheckpointSaverListener, ...]:
        """The listeners called around each save, in order."""
        return tuple(self._listeners)

    def add_listener(self, listener: CheckpointSaverListener) -> None:
        """Registers ``listener`` to be called around each save, after those already there;
        a listener registered already is not added twice.

        Beyond TF: TF 2.15 takes listeners only as ``listeners=`` in the constructor. The
        Estimator uses this to give ``train(saving_listeners=...)`` to a
        ``CheckpointSaverHook`` the user passed in ``hooks`` (TF does the same by mutating
        the hook's private list).

        Args:
          listener: a ``CheckpointSaverListener``.

        Raises:
          TypeError: ``listener`` is not a ``CheckpointSaverListener``.

        Add listeners before ``train()``: one added while training runs misses ``begin``.
        """
        if not isinstance(listener, CheckpointSaverListener):
            raise TypeError(f"add_listener expects a CheckpointSaverListener, given: {listener!r}.")
        if listener not in self._listeners:
            self._listeners.append(listener)

    def begin(self) -> None:
        if self._saver is None:
            self._saver = Checkpointer(self._checkpoint_dir)
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord) -> None:
        self._timer.reset()
        self._save(session, session.global_step)
        self._timer.update_last_triggered_step(session.global_step)

    def after_run(self, run_context, run_values) -> None:
        global_step = run_context.session.global_step
        if self._timer.should_trigger_for_step(global_step):
            self._timer.update_last_triggered_step(global_step)
            if self._save(run_context.session, global_step):
                run_context.request_stop()

    def end(self, session) -> None:
        last_step = session.global_step
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        self._saver.wait()
        for listener in self._listeners:
            listener.end(session, last_step)

    def _save(self, session, step: int) -> bool:
        step, state = session.checkpoint_state(step)  # a NaN's step, if there was one
        logger.info("Saving checkpoints for %d into %s.", step, self._checkpoint_dir)
        for listener in self._listeners:
            listener.before_save(session, step)
        self._saver.save(step, state)
        if self._listeners:
            # Listeners (e.g. an evaluation after each save) read the checkpoint: finish it.
            self._saver.wait()
        should_stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                logger.info(
                    "A CheckpointSaverListener requested that training be stopped. listener: %s",
                    listener,
                )
                should_stop = True
        return should_stop


def savers_among(hooks) -> list[CheckpointSaverHook]:
    """The ``CheckpointSaverHook``s among ``hooks``, in order: TF's Estimator adds
    its own saver only when there is none, and attaches ``saving_listeners`` to the first."""
    return [hook for hook in hooks if isinstance(hook, CheckpointSaverHook)]
