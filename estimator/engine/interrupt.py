"""Ctrl-C and SIGTERM during the step loop: stop at a step boundary, never mid-write.

TF lets ``KeyboardInterrupt`` land wherever the main thread happens to be, including
inside a checkpoint save, and SIGTERM (what a scheduler sends before preempting a job)
kills the process with every step since the last save lost. Here, while the step loop
of ``train()`` or ``evaluate()`` runs, :class:`SignalGuard` turns the first SIGINT or
SIGTERM into a request that the loop honours after the current step:

* SIGINT: the loop stops, saves already started are completed (so ``model_dir`` holds
  only complete checkpoints), then ``KeyboardInterrupt`` is raised. A second Ctrl-C
  raises at once.
* SIGTERM (preemption): ``train()`` writes a checkpoint of the current step, waits for
  it, then raises ``SystemExit(143)`` (128 + SIGTERM, the exit status of a process ended
  by SIGTERM, so schedulers see a terminated job and restart it; the restarted job resumes
  from that step). ``evaluate()`` stops without writing results.
  ``RunConfig(save_checkpoint_on_preemption=False)`` keeps TF's behaviour (the default
  action of SIGTERM: the process ends at once).

In a multi-process job (``jax.distributed``) a save needs every process, and SIGTERM
reaches one of them: there JAX's preemption notifier has SIGTERM's handler (installed by
``jax.distributed.initialize``; this module leaves it alone) and tells the coordination
service, which agrees on a step with every process (``jax.experimental.multihost_utils.
reached_preemption_sync_point``: the next step of the fastest process, so no process has
passed it). The training loop asks after each step (a check of a value the notifier's
thread sets: no host sync, no message); at that step every process stops, saves the
checkpoint of that step together, and raises ``SystemExit(143)``; the chief logs the step.
With ``save_checkpoint_on_preemption=False`` every process stops there without saving.

Outside the loop (building, compiling, restoring, and ``predict()``) Ctrl-C keeps Python's
handler: ``KeyboardInterrupt`` at once, so a long compile is still interrupted. But Python
swallows an exception raised in a ``__del__`` method or a weakref callback (it prints
"Exception ignored in ..." and goes on), and a Ctrl-C that lands in one, as the garbage of
a finished step is freed, is lost: TF's program goes on as if no key was pressed. Here,
while ``train()``/``evaluate()`` runs or ``predict()`` makes a batch, such a
``KeyboardInterrupt`` is recorded (``sys.unraisablehook``, chained to the one before) and
raised again at the next step boundary, or when the call or the batch ends.

The signal handlers are replaced only in the main thread and only over Python's default
ones: a handler the program installed itself is left alone.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable

logger = logging.getLogger("estimator")

PREEMPTION_EXIT_CODE = 128 + signal.SIGTERM


class SignalGuard:
    """Defers SIGINT (and optionally SIGTERM) to the next step boundary (internal).

    Use as a context manager around the step loop; the loop checks :attr:`signum` after
    each step and stops when it is set. After the loop, :meth:`raise_if_received` raises
    what the signal asked for.

    While entered it also records a ``KeyboardInterrupt`` that Python swallowed (a second
    Ctrl-C raised at once, or, with ``defer=False``, any Ctrl-C) as a received SIGINT. With
    ``defer=False`` (around a whole call, or a batch of ``predict()``: ~1.5 µs to enter and
    leave) the signal handlers are left alone and leaving the guard raises the
    recorded ``KeyboardInterrupt``; a deferring guard entered inside it starts with what
    it recorded, so its loop stops after the first step.

    Args:
      sigterm: also defer SIGTERM (preemption); else it keeps its default action.
      defer: defer the signals to the step boundary; else only record the swallowed ones.
      preemption: in a multi-process job, ``reached(step) -> bool``: whether ``step`` is
        the step the job agreed to stop at after a SIGTERM to one of its processes
        (``estimator.distribute.preemption_sync_point``); asked after every step.
    """

    def __init__(
        self,
        sigterm: bool = True,
        defer: bool = True,
        preemption: Callable[[int], bool] | None = None,
    ) -> None:
        self._signals = [signal.SIGINT] + ([signal.SIGTERM] if sigterm else []) if defer else []
        self._previous: dict = {}
        self._previous_hook = sys.__unraisablehook__
        self._hooked = False
        self._preemption = preemption
        self.defer = defer
        self.signum: int | None = None

    def __enter__(self) -> SignalGuard:
        self.signum = None
        if threading.current_thread() is not threading.main_thread():
            return self
        outer = getattr(sys.unraisablehook, "__self__", None)
        if isinstance(outer, SignalGuard):
            self.signum = outer.signum  # a Ctrl-C swallowed before this loop
        self._previous_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        self._hooked = True
        for signum in self._signals:
            current = signal.getsignal(signum)
            if current in (signal.default_int_handler, signal.SIG_DFL):
                self._previous[signum] = current
                signal.signal(signum, self._handle)
        return self

    def __exit__(self, exc_type, *exc_info) -> None:
        self._restore()
        if self._hooked:
            if sys.unraisablehook == self._unraisable:  # else replaced meanwhile: left so
                sys.unraisablehook = self._previous_hook
            self._hooked = False
        if exc_type is None and not self.defer:
            self.raise_if_received()  # a Ctrl-C that Python swallowed

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _unraisable(self, unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and self.signum is None:
            self.signum = signal.SIGINT
        self._previous_hook(unraisable)  # printed as before ("Exception ignored in ...")

    def _handle(self, signum, frame) -> None:
        if self.signum is not None:  # the second signal: at once
            self._restore()
            _raise(signum)
        self.signum = signum
        logger.warning(
            "Received %s: stopping after the current step%s. Send it again to stop at once.",
            signal.Signals(signum).name,
            " and saving a checkpoint" if signum == signal.SIGTERM else "",
        )

    def stop_after(self, step: int) -> bool:
        """Whether the loop stops after the step that made the global step ``step``: a
        signal arrived, or ``step`` is the job's agreed preemption step (then :attr:`signum`
        is SIGTERM, as if this process had received it)."""
        if self._preemption is not None and self.signum is None and self._preemption(step):
            self.signum = signal.SIGTERM
        return self.signum is not None

    def raise_if_received(self) -> None:
        """Raises ``KeyboardInterrupt`` after a SIGINT, ``SystemExit(143)`` after a
        SIGTERM; nothing if no signal arrived."""
        if self.signum is not None:
            _raise(self.signum)


def _raise(signum: int):
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)
