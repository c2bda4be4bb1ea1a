"""The hook protocol of the training, evaluation and prediction loops (``tf.train``).

A hook observes or steers a loop. The driver calls, as TF's ``MonitoredSession`` does::

    call hooks.begin()
    state = restore or initialise
    call hooks.after_create_session(session, coord)
    while not stop_requested:
      for hook in hooks: args.append(hook.before_run(run_context))   # fetch requests
      try:
        results = step(batch)          # one jitted step; only requested values leave the device
      except (StopIteration, end of input):
        break
      for hook in hooks: hook.after_run(run_context, SessionRunValues(results[hook]))
    call hooks.end(session)            # on a normal stop or end of input, not on an error

``after_run`` is skipped when the step raised; ``end`` is skipped when any other exception
ends the loop. ``run_context.request_stop()`` ends the loop after the current step.

Fetches are names: ``"loss"``, ``"global_step"``, a name given with
``estimator.identity(x, name=...)`` or ``estimator.summary.scalar``; a hook created inside
``model_fn`` may also hold the arrays themselves, as in TF. ``session`` is a
:class:`estimator.engine.session.Session` (global step, model_dir, the current train state).
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "SessionRunHook",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunValues",
]


class SessionRunHook:
    """Hook to extend calls to the step function (``tf.compat.v1.train.SessionRunHook``)."""

    def begin(self) -> None:
        """Called once before using the session; ``model_fn`` has been traced."""

    def after_create_session(self, session, coord) -> None:
        """Called when the state has been created or restored (``coord`` is None)."""

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Called before each step; returns the values to fetch in this step, or None."""
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Called after each step with the values requested in ``before_run``."""

    def end(self, session) -> None:
        """Called at the end of the loop (not when it ends by an error)."""


class SessionRunArgs(NamedTuple):
    """What a hook wants fetched in this step.

    Attributes:
      fetches: a name, or a list/tuple/dict (nested) of names or arrays held by a hook made
        inside ``model_fn``. The matching ``SessionRunValues.results`` has the same
        structure, with NumPy values.
      feed_dict: unsupported in JAX (must be None); kept for TF's field order.
      options: ignored.
    """

    fetches: Any
    feed_dict: Any = None
    options: Any = None


class SessionRunValues(NamedTuple):
    """Results of a step for one hook: ``results`` mirrors its ``SessionRunArgs.fetches``."""

    results: Any
    options: Any = None
    run_metadata: Any = None


class SessionRunContext:
    """Information about the step in progress, and the way to stop the loop.

    Args:
      original_args: the ``SessionRunArgs`` of the step (all hooks' fetches merged).
      session: the driver's session.
    """

    def __init__(self, original_args: SessionRunArgs, session) -> None:
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self) -> SessionRunArgs:
        return self._original_args

    @property
    def session(self):
        return self._session

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        """Ends the loop after the current step (its ``after_run`` calls still happen)."""
        self._stop_requested = True
