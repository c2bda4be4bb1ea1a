"""``ProfilerHook``: ``jax.profiler`` traces of chosen steps (``tf.compat.v1.train.ProfilerHook``).

Synopsis::

    hook = est.ProfilerHook(save_steps=1000, output_dir=model_dir)           # TF's: 1 step
    hook = est.ProfilerHook(output_dir=model_dir, profile_steps=(100, 104))  # a step range
    clf.train(input_fn, hooks=[hook], steps=2000)
    # tensorboard --logdir model_dir  ->  Profile tab, runs "step_1000", "step_100-104", ...

Each trace is a ``jax.profiler`` trace (XLA's profiler: host and device activity, the
compiled ops of each step) written as a TensorBoard profile run
``<output_dir>/plugins/profile/step_<N>/`` (``step_<A>-<B>`` for a range), with
``<host>.xplane.pb`` and ``<host>.trace.json.gz`` (Chrome trace format, the counterpart of
TF's ``timeline-<step>.json``).

A trace waits for work queued before it and for its last step to finish on the device
(two device syncs per trace, none between traces), so the trace holds exactly its steps.
Steps are the global steps the steps run with (see ``estimator.summary``); in
``evaluate``/``predict``, where the global step stands still, the loop's batch count from 0.
"""

from __future__ import annotations

import logging
import os

import jax

from estimator.hooks.session_run_hook import SessionRunHook
from estimator.hooks.timers import SecondOrStepTimer
from estimator.io.fs import local_path
from estimator.mode_keys import ModeKeys

__all__ = ["ProfilerHook"]

logger = logging.getLogger("estimator")


def _block(session) -> None:
    """Waits until every step dispatched so far has finished on the device."""
    runner = session.runner
    jax.block_until_ready(
        (
            session.state,  # runs any deferred steps first
            session.outputs,
            getattr(runner, "accumulator", None),
            getattr(runner, "pending", None),
        )
    )


class ProfilerHook(SessionRunHook):
    """Captures ``jax.profiler`` traces every N steps or seconds, or of one step range.

    As TF's hook, the periodic mode traces one step per trigger, not the first step of the
    loop: the first trace is ``save_steps`` steps (or ``save_secs`` seconds) after it.

    Args:
      save_steps: trace one step every this many global steps.
      save_secs: trace one step every this many seconds.
      output_dir: the TensorBoard log directory of the traces; "" is the current directory
        (as TF). A local directory: ``jax.profiler`` writes local files only, so a storage
        URL is refused (ValueError) rather than becoming a local directory named after it.
      show_dataflow: accepted for TF compatibility (XLA's trace has its own flow events).
      show_memory: also save a device memory profile (pprof, ``jax.profiler.
        save_device_memory_profile``) after each trace, ``memory.prof`` in its run directory
        (TF's option shows tensor lifetimes in the timeline).
      profile_steps: keyword-only; ``(first, last)`` global steps, inclusive, or one step:
        trace that range once (Keras's ``profile_batch``). Exclusive with the two above.

    Raises:
      ValueError: a bad combination of ``save_steps``/``save_secs``/``profile_steps`` or a
        bad range.
    """

    def __init__(
        self,
        save_steps: int | None = None,
        save_secs: float | None = None,
        output_dir: str = "",
        show_dataflow: bool = True,
        show_memory: bool = False,
        *,
        profile_steps: int | tuple[int, int] | None = None,
    ) -> None:
        del show_dataflow
        self._range = None
        self._timer = None
        if profile_steps is not None:
            if save_steps is not None or save_secs is not None:
                raise ValueError(
                    "ProfilerHook: give profile_steps or one of save_steps/save_secs, not both."
                )
            first, last = (
                (profile_steps, profile_steps)
                if isinstance(profile_steps, int)
                else tuple(profile_steps)
            )
            if not 0 <= first <= last:
                raise ValueError(
                    "ProfilerHook: profile_steps must be a step >= 0 or (first, last) with "
                    f"0 <= first <= last; given {profile_steps!r}."
                )
            self._range = (int(first), int(last))
        else:
            self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._output_dir = local_path(output_dir, "ProfilerHook output_dir") or os.curdir
        self._show_memory = show_memory
        self._tracing: tuple[int, int] | None = None  # (first step, last step) in progress
        self._done = False
        self._iter = 0
        self._current = 0
        self.traces: list[str] = []  # run directories written, oldest first

    def begin(self) -> None:
        self._done = False
        if self._timer is not None:
            self._timer.reset()

    @staticmethod
    def _is_train(session) -> bool:
        return session.mode == ModeKeys.TRAIN

    def after_create_session(self, session, coord) -> None:
        self._iter = 0
        if self._timer is not None:
            # As TF: the first trigger is a full interval after the loop's first step.
            self._timer.update_last_triggered_step(self._step(session))

    def _step(self, session) -> int:
        """The global step in training; the loop's step (batch) count otherwise."""
        return session.global_step if self._is_train(session) else self._iter

    def _due(self, step: int) -> tuple[int, int] | None:
        if self._range is not None:
            first, last = self._range
            # A loop that starts inside the range traces the rest of it.
            return (step, last) if not self._done and first <= step <= last else None
        if self._timer.should_trigger_for_step(step):
            self._timer.update_last_triggered_step(step)
            return (step, step)
        return None

    def before_run(self, run_context):
        session = run_context.session
        self._current = self._step(session)
        if self._tracing is None:
            due = self._due(self._current)
            if due is not None:
                self._start(session, due)
        return None

    def after_run(self, run_context, run_values) -> None:
        self._iter += 1
        if self._tracing is not None and (
            self._current >= self._tracing[1] or run_context.stop_requested
        ):
            self._stop(run_context.session)

    def end(self, session) -> None:
        if self._tracing is not None:
            self._stop(session)

    def _run_name(self) -> str:
        first, last = self._tracing
        return f"step_{first}" if first == last else f"step_{first}-{last}"

    def _start(self, session, due: tuple[int, int]) -> None:
        _block(session)  # earlier steps stay out of the trace
        self._tracing = due
        options = jax.profiler.ProfileOptions()
        options.session_id = self._run_name()
        try:
            jax.profiler.start_trace(self._output_dir, profiler_options=options)
        except RuntimeError as err:  # another trace is running (only one at a time)
            logger.warning("ProfilerHook could not start a trace at step %d: %s", due[0], err)
            self._tracing = None
            self._done = True

    def _stop(self, session) -> None:
        _block(session)
        jax.profiler.stop_trace()
        name = self._run_name()
        run_dir = os.path.join(self._output_dir, "plugins", "profile", name)
        if self._show_memory:
            jax.profiler.save_device_memory_profile(os.path.join(run_dir, "memory.prof"))
        logger.info("Saved profile of steps %s into '%s'.", name[len("step_") :], run_dir)
        self.traces.append(run_dir)
        self._tracing = None
        self._done = self._range is not None
