"""When hooks act: ``SecondOrStepTimer`` (``tf.compat.v1.train.SecondOrStepTimer``) and
``SyncedTimer``, the timer whose time-based decisions every process of a job shares."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from jax.experimental import multihost_utils

__all__ = ["SecondOrStepTimer", "SyncedTimer"]


class SecondOrStepTimer:
    """Triggers every N seconds or every N steps (``tf.compat.v1.train.SecondOrStepTimer``).

    Args:
      every_secs: seconds between triggers.
      every_steps: steps between triggers (exactly one of the two).
      clock: the time source (seconds); tests pass a fake clock.

    Raises:
      ValueError: "Either every_secs or every_steps should be provided." /
        "Can not provide both every_secs and every_steps."
    """

    def __init__(
        self,
        every_secs: float | None = None,
        every_steps: int | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if every_secs is None and every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if every_secs is not None and every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self._clock = clock
        self.reset()

    def reset(self) -> None:
        self._last_triggered_step = None
        self._last_triggered_time = None

    def should_trigger_for_step(self, step: int) -> bool:
        """True at the first step, then once ``every_secs``/``every_steps`` have passed."""
        if self._last_triggered_step is None:
            return True
        if self._last_triggered_step == step:
            return False
        if self._every_secs is not None:
            if self._clock() >= self._last_triggered_time + self._every_secs:
                return True
        if self._every_steps is not None:
            if step >= self._last_triggered_step + self._every_steps:
                return True
        return False

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Records a trigger; returns ``(elapsed_secs, elapsed_steps)`` since the last one
        (both None the first time)."""
        now = self._clock()
        if self._last_triggered_time is None:
            elapsed = (None, None)
        else:
            elapsed = (now - self._last_triggered_time, step - self._last_triggered_step)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def last_triggered_step(self) -> int | None:
        return self._last_triggered_step


class NeverTriggerTimer(SecondOrStepTimer):
    """A timer that never triggers (a hook whose periodic action is switched off)."""

    def __init__(self) -> None:
        self._clock = time.time
        self.reset()

    def should_trigger_for_step(self, step: int) -> bool:
        return False


class SyncedTimer:
    """A ``SecondOrStepTimer`` whose time-based decisions every process shares.

    Every process must save a checkpoint at the same steps (an orbax save is a collective
    operation). Step intervals agree by themselves; a time interval is checked only at
    steps that are multiples of ``check_every`` and decided by process 0's clock
    (broadcast: one small collective per ``check_every`` steps, none in between).

    Args:
      timer: the ``SecondOrStepTimer`` to share.
      every_secs: its time interval (None: steps only, nothing to share).
      check_every: steps between time checks.
    """

    def __init__(self, timer, every_secs: float | None, check_every: int = 100) -> None:
        self._timer = timer
        self._every_secs = every_secs
        self._check_every = max(1, int(check_every))

    def should_trigger_for_step(self, step: int) -> bool:
        if self._every_secs is None:
            return self._timer.should_trigger_for_step(step)
        if step % self._check_every:
            return False
        local = self._timer.should_trigger_for_step(step)
        return bool(multihost_utils.broadcast_one_to_all(np.bool_(local)))

    def __getattr__(self, name):  # reset, update_last_triggered_step, last_triggered_step
        return getattr(self._timer, name)
