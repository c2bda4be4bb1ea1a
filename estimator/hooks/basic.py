"""Built-in hooks (``tf.estimator`` / ``tf.compat.v1.train`` basic session-run hooks).

Names, arguments, defaults, messages and timing follow TF 2.15's
``basic_session_run_hooks.py``. Differences are noted per class; the main one: values
leave the device only when a hook asks for them, so hooks that TF runs every step
(``NanTensorHook``, ``StopAtStepHook``, ``StepCounterHook``) here read the host-side
global step or check a device-side record every ``every_n_iter`` steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from estimator.checkpoint import checkpoint_step, latest_checkpoint
from estimator.events.files import writer_for
from estimator.hooks.session_run_hook import SessionRunArgs, SessionRunHook
from estimator.hooks.timers import NeverTriggerTimer, SecondOrStepTimer
from estimator.keys import LOSS, NON_FINITE_STEP

__all__ = [
    "LoggingTensorHook",
    "StopAtStepHook",
    "NanTensorHook",
    "NanLossDuringTrainingError",
    "StepCounterHook",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "steps_bound",
]

logger = logging.getLogger("estimator")


class LoggingTensorHook(SessionRunHook):
    """Logs named values every N steps, every N seconds, and/or at the end.

    Args:
      tensors: ``{tag: name_or_array}`` or a list of names. Names are ``"loss"``,
        ``"global_step"`` or given with ``estimator.identity``; arrays are allowed when
        the hook is created inside ``model_fn``.
      every_n_iter: log every this many local steps.
      every_n_secs: log every this many seconds.
      at_end: also log the last step's values when the loop ends.
      formatter: ``dict -> str``; default ``"tag = value, ..."`` in sorted tag order with
        ``" (x.xxx sec)"`` since the last log, as TF.

    Raises:
      ValueError: TF's messages for a bad combination of the triggers.
    """

    def __init__(
        self, tensors, every_n_iter=None, every_n_secs=None, at_end=False, formatter=None
    ) -> None:
        only_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs must be "
                "provided."
            )
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if not isinstance(tensors, dict):
            self._tag_order = list(tensors)
            tensors = {item: item for item in tensors}
        else:
            self._tag_order = sorted(tensors)
        self._tensors = tensors
        self._formatter = formatter
        self._timer = (
            NeverTriggerTimer()
            if only_at_end
            else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        )
        self._log_at_end = at_end
        self._should_trigger = False
        self._iter_count = 0

    def begin(self) -> None:
        self._timer.reset()
        self._iter_count = 0

    def before_run(self, run_context):
        self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
        return SessionRunArgs(self._tensors) if self._should_trigger else None

    def after_run(self, run_context, run_values) -> None:
        if self._should_trigger:
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def end(self, session) -> None:
        if self._log_at_end:
            self._log_tensors(session.run(self._tensors))

    def _log_tensors(self, values: dict) -> None:
        elapsed_secs, _ = self._timer.update_last_triggered_step(self._iter_count)
        if self._formatter:
            logger.info(self._formatter(values))
            return
        with np.printoptions(suppress=True):
            stats = ", ".join(f"{tag} = {values[tag]}" for tag in self._tag_order)
        if elapsed_secs is not None:
            logger.info("%s (%.3f sec)", stats, elapsed_secs)
        else:
            logger.info("%s", stats)


class StopAtStepHook(SessionRunHook):
    """Requests a stop at a global step (``tf.compat.v1.train.StopAtStepHook``).

    Args:
      num_steps: steps to run from the global step at which the session starts.
      last_step: the global step after which to stop.

    Raises:
      ValueError: "One of num_steps or last_step must be specified." / "Only one of
        num_steps or last_step can be specified."
    """

    def __init__(self, num_steps: int | None = None, last_step: int | None = None) -> None:
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps = num_steps
        self._last_step = last_step

    @property
    def last_step(self) -> int | None:
        """The global step to stop after; None until a session starts when ``num_steps``
        was given."""
        return self._last_step

    @property
    def num_steps(self) -> int | None:
        """``num_steps`` as given: a count of steps (int), or None when ``last_step`` was
        given. Not in TF's hook (it keeps the value private); the Estimator reads it to know
        in advance how many steps a ``train()`` call can run."""
        return self._num_steps

    def after_create_session(self, session, coord) -> None:
        if self._last_step is None:
            self._last_step = session.global_step + self._num_steps

    def after_run(self, run_context, run_values) -> None:
        # TF fetches the global step each step; here the session knows it on the host (the
        # value after the step), so nothing is requested and no step waits for the device.
        if run_context.session.global_step >= self._last_step:
            run_context.request_stop()


def steps_bound(hooks, start: int) -> int | None:
    """The most steps a loop starting at global step ``start`` runs, as the
    ``StopAtStepHook``s among ``hooks`` say (None: none bounds it; the input's end
    or another hook may stop it sooner)."""
    return min(
        (
            hook.num_steps if hook.last_step is None else hook.last_step - start
            for hook in hooks
            if isinstance(hook, StopAtStepHook)
        ),
        default=None,
    )


class NanLossDuringTrainingError(RuntimeError):
    """Raised by :class:`NanTensorHook` (``tf.compat.v1.train.NanLossDuringTrainingError``).

    Attributes:
      global_step: the first global step whose loss was not finite (None if unknown).
    """

    def __init__(self, global_step: int | None = None) -> None:
        super().__init__(global_step)
        self.global_step = global_step

    def __str__(self) -> str:
        if self.global_step is None:
            return "NaN loss during training."
        return (
            f"NaN loss during training: the loss of global step {self.global_step} was not "
            "finite. That step was not applied, so the variables and the checkpoints hold the "
            "last finite state; lower the learning rate or check the input for NaN/inf."
        )


class NanTensorHook(SessionRunHook):
    """Stops training, or raises, when the loss is not finite
    (``tf.compat.v1.train.NanTensorHook``).

    The train step itself never applies a step whose loss is NaN or infinite (TF applies
    it and the variables become NaN), nor any later step of the same ``train()``; it records
    the first such global step on the device. This hook fetches that record every
    ``every_n_iter`` steps and at the end, and between those checks sees it whenever another
    hook's fetch or a checkpoint save brought it to the host (the record rides along with
    every transfer), so it never forces a transfer per step yet stops at the first step the
    host learns of the NaN. A checkpoint saved after the NaN holds the state of the NaN's
    step under that step's number; ``Estimator.train`` saves it before this error leaves.
    TF checks NaN only; this checks inf too.

    Args:
      loss_tensor: the loss to check: ``"loss"`` (the train loss, protected as above) or
        another name/array, which is fetched and checked at the same steps.
      fail_on_nan_loss: raise :class:`NanLossDuringTrainingError` (True) or log a warning
        and request a stop (False).
      every_n_iter: keyword-only; steps between checks (1 checks every step, as TF).
    """

    def __init__(
        self, loss_tensor="loss", fail_on_nan_loss: bool = True, *, every_n_iter: int = 1
    ) -> None:
        if every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss
        self._every_n_iter = every_n_iter
        self._iter_count = 0

    def begin(self) -> None:
        self._iter_count = 0

    def _fetches(self) -> dict:
        fetches = {"record": NON_FINITE_STEP}
        if not (isinstance(self._loss_tensor, str) and self._loss_tensor == LOSS):
            fetches["value"] = self._loss_tensor
        return fetches

    def before_run(self, run_context):
        check = self._iter_count % self._every_n_iter == 0  # steps 0, n, 2n, ... as logging
        self._iter_count += 1
        return SessionRunArgs(self._fetches()) if check else None

    def after_run(self, run_context, run_values) -> None:
        session = run_context.session
        results = run_values.results
        if results is None:
            # Between its own checks, the record any other fetch brought (no sync).
            known = getattr(session, "non_finite_step", -1)
            if known < 0:
                return
            results = {"record": known}
        self._check(results, session.global_step - 1, run_context.request_stop)

    def end(self, session) -> None:
        self._check(session.run(self._fetches()), session.global_step - 1, lambda: None)

    def _check(self, results: dict, step: int, request_stop) -> None:
        bad_step = int(results["record"])
        if bad_step < 0 and "value" in results and not np.all(np.isfinite(results["value"])):
            bad_step = step
        if bad_step < 0:
            return
        if self._fail_on_nan_loss:
            logger.error("Model diverged with loss = NaN.")
            raise NanLossDuringTrainingError(bad_step)
        logger.warning("Model diverged with loss = NaN (global step %d).", bad_step)
        request_stop()


class StepCounterHook(SessionRunHook):
    """Logs ``global_step/sec`` every N steps or seconds (``tf.compat.v1.train.StepCounterHook``).

    The rate is measured on the host between triggers; the loop does not wait for the
    device except where another hook fetches a value, so over short windows it may run
    ahead of the device by the depth of the dispatch queue.

    Args:
      every_n_steps: steps between logs (default 100).
      every_n_secs: seconds between logs (exclusive with ``every_n_steps``).
      output_dir: where ``global_step/sec`` summaries go (written by the summary writer of
        ``estimator.summary``, when available).
      summary_writer: a writer with ``add_scalar(tag, value, step)``; overrides output_dir.

    Attributes:
      last_rate: the last measured steps/second (None before the first measurement).
    """

    def __init__(
        self, every_n_steps=100, every_n_secs=None, output_dir=None, summary_writer=None
    ) -> None:
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._output_dir = output_dir
        self._summary_writer = summary_writer
        self.last_rate = None

    def begin(self) -> None:
        if self._summary_writer is None and self._output_dir is not None:
            self._summary_writer = writer_for(self._output_dir)

    def after_create_session(self, session, coord) -> None:
        self._timer.reset()

    def end(self, session) -> None:
        if self._summary_writer is not None and hasattr(self._summary_writer, "flush"):
            self._summary_writer.flush()

    def after_run(self, run_context, run_values) -> None:
        global_step = run_context.session.global_step
        if self._timer.should_trigger_for_step(global_step):
            elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(global_step)
            if elapsed_time is not None and elapsed_time > 0:
                self.last_rate = elapsed_steps / elapsed_time
                if self._summary_writer is not None:
                    self._summary_writer.add_scalar("global_step/sec", self.last_rate, global_step)
                logger.info("global_step/sec: %g", self.last_rate)


class FinalOpsHook(SessionRunHook):
    """Fetches named values when the loop ends (``tf.compat.v1.train.FinalOpsHook``).

    The values are those of the last step that ran (in ``evaluate()``, of the last batch;
    the metrics over all batches are ``evaluate()``'s return value).

    Args:
      final_ops: a name, or a list/tuple/dict of names (``"loss"``, ``"global_step"``,
        ``estimator.identity`` names, summaries); arrays when the hook is created inside
        ``model_fn``.
      final_ops_feed_dict: must be None: there is no graph to feed.

    Attributes:
      final_ops_values: the fetched values (NumPy, in the structure of ``final_ops``),
        None until the loop has ended.

    Raises:
      ValueError: for a ``final_ops_feed_dict``.
    """

    def __init__(self, final_ops, final_ops_feed_dict=None) -> None:
        if final_ops_feed_dict:
            raise ValueError(
                "FinalOpsHook(final_ops_feed_dict=...) is not supported: a jitted step has no "
                "placeholders to feed. Compute the value inside model_fn and name it with "
                "estimator.identity(x, name=...)."
            )
        self._final_ops = final_ops
        self._final_ops_values = None

    @property
    def final_ops_values(self):
        return self._final_ops_values

    def end(self, session) -> None:
        if self._final_ops is not None:
            self._final_ops_values = session.run(self._final_ops)


def _checkpoint_global_step(model_dir: str | None) -> int:
    """The global step of the newest checkpoint in ``model_dir`` (-1 without one)."""

    latest = latest_checkpoint(model_dir) if model_dir else None
    return -1 if latest is None else checkpoint_step(latest)


class GlobalStepWaiterHook(SessionRunHook):
    """Waits before the first step until the global step reaches ``wait_until_step``
    (``tf.compat.v1.train.GlobalStepWaiterHook``).

    TF uses it to start workers gradually: each waits until the chief's training has
    reached a step. Here "the global step" is the larger of this loop's own global step
    and the step of the newest checkpoint in ``model_dir`` (what another process training
    into the same ``model_dir`` has saved). A loop already at or past the step does not
    wait at all. In a single process nothing else advances the step while it waits, so a
    step ahead of both waits until another process's checkpoint reaches it (or
    ``timeout_secs`` passes).

    Args:
      wait_until_step: the global step to wait for; <= 0 never waits.
      global_step_fn: keyword-only; ``session -> int`` giving the global step to wait on
        (default: as above). Tests pass a fake.
      poll_secs: keyword-only; seconds between checks (TF: 0.5).
      timeout_secs: keyword-only; give up after this many seconds (raising); None waits
        for ever, as TF.
      sleep: keyword-only; ``seconds -> None`` (tests pass a fake).

    Raises:
      TimeoutError: (in ``before_run``) when ``timeout_secs`` passes first.
    """

    def __init__(
        self,
        wait_until_step: int,
        *,
        global_step_fn: Callable | None = None,
        poll_secs: float = 0.5,
        timeout_secs: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._wait_until_step = int(wait_until_step)
        self._global_step_fn = global_step_fn or (
            lambda session: max(session.global_step, _checkpoint_global_step(session.model_dir))
        )
        self._poll_secs = poll_secs
        self._timeout_secs = timeout_secs
        self._sleep = sleep
        self._worker_is_started = False

    def begin(self) -> None:
        self._worker_is_started = False

    def before_run(self, run_context):
        if self._worker_is_started:
            return None
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return None
        session = run_context.session
        current = self._global_step_fn(session)
        if current >= self._wait_until_step:
            self._worker_is_started = True
            return None
        logger.info("Waiting for global step %d before starting training.", self._wait_until_step)
        waited = 0.0
        last_logged_step = current
        while current < self._wait_until_step:
            if self._timeout_secs is not None and waited >= self._timeout_secs:
                raise TimeoutError(
                    f"GlobalStepWaiterHook waited {waited:g} s for global step "
                    f"{self._wait_until_step}; it is still {current}. Nothing else trains into "
                    f"{session.model_dir}: lower wait_until_step or start the chief first."
                )
            if current - last_logged_step > 1000:
                logger.info(
                    "Waiting for global step %d before starting training. Current step is %d.",
                    self._wait_until_step,
                    current,
                )
                last_logged_step = current
            self._sleep(self._poll_secs)
            waited += self._poll_secs
            current = self._global_step_fn(session)
        self._worker_is_started = True
        return None
