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

Outside the loop (building, compiling, restoring, and ``predict()`` between its batches)
Ctrl-C still raises ``KeyboardInterrupt`` at once, so a long compile is still interrupted,
but it is not lost. Python swallows an exception raised in a ``__del__`` method or a weakref
callback (it prints "Exception ignored in ..." and goes on), and a Ctrl-C that lands in one,
as the garbage of a finished step is freed, is gone: TF's program goes on as if no key
was pressed. Here such a Ctrl-C is raised again at the next step boundary, or when the
``train()``/``evaluate()`` call or ``predict()``'s batch ends.

The guards are installed only in the main thread and only over Python's default handlers
(or a guard's own): a handler the program installed itself is left alone.
"""

from __future__ import annotations

import logging
import signal
import threading

logger = logging.getLogger("estimator")

PREEMPTION_EXIT_CODE = 128 + signal.SIGTERM


class SignalGuard:
    """Defers SIGINT (and optionally SIGTERM) to the next step boundary (internal).

    Use as a context manager around the step loop; the loop checks :attr:`signum` after
    each step and stops when it is set. After the loop, :meth:`raise_if_received` raises
    what the signal asked for.

    With ``defer=False`` (around a whole call, or a batch of ``predict()``) SIGINT raises
    ``KeyboardInterrupt`` at once, as Python's own handler does, and is remembered: when
    Python swallowed it (a ``__del__`` or weakref callback), leaving the guard raises it
    again, and a deferring guard entered inside it stops its loop after the first step.

    Args:
      sigterm: also defer SIGTERM (preemption); else it keeps its default action.
      defer: defer the signals to the step boundary; else raise at once and remember.
    """

    def __init__(self, sigterm: bool = True, defer: bool = True) -> None:
        self._signals = [signal.SIGINT] + ([signal.SIGTERM] if sigterm and defer else [])
        self._previous: dict = {}
        self.defer = defer
        self.signum: int | None = None

    def __enter__(self) -> SignalGuard:
        self.signum = None
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in self._signals:
            current = signal.getsignal(signum)
            outer = getattr(current, "__self__", None)
            if isinstance(outer, SignalGuard) and not outer.defer:
                self.signum = outer.signum  # a Ctrl-C swallowed before this loop
            elif current not in (signal.default_int_handler, signal.SIG_DFL):
                continue
            self._previous[signum] = current
            signal.signal(signum, self._handle)
        return self

    def __exit__(self, exc_type, *exc_info) -> None:
        self._restore()
        if exc_type is None and not self.defer:
            self.raise_if_received()  # a Ctrl-C that Python swallowed

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        if not self.defer:
            self.signum = signum
            _raise(signum)
        if self.signum is not None:  # the second signal: at once
            self._restore()
            _raise(signum)
        self.signum = signum
        logger.warning(
            "Received %s: stopping after the current step%s. Send it again to stop at once.",
            signal.Signals(signum).name,
            " and saving a checkpoint" if signum == signal.SIGTERM else "",
        )

    def raise_if_received(self) -> None:
        """Raises ``KeyboardInterrupt`` after a SIGINT, ``SystemExit(143)`` after a
        SIGTERM; nothing if no signal arrived."""
        if self.signum is not None:
            _raise(self.signum)


def _raise(signum: int):
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)
