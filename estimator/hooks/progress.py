"""``ProgressBarHook``: a tqdm progress bar for ``train``/``evaluate``/``predict``.

``train()``, ``evaluate()`` and ``predict()`` show one by default when stderr is a
terminal, so an interactive run shows progress and a log file or CI output stays clean.
To change that:

* ``JAX_ESTIMATOR_PROGRESS_BAR=0`` (or ``false``/``off``/``no``) turns the default bar off
  everywhere; ``=1`` (``true``/``on``/``yes``) shows it even when stderr is not a terminal
  (notebooks, logs). tqdm's own ``TQDM_DISABLE=1`` turns it off too.
* Pass your own ``ProgressBarHook`` in ``hooks=`` and it replaces the default for that call:
  ``hooks=[est.ProgressBarHook(disable=True)]`` turns it off,
  ``est.ProgressBarHook(show_loss=False)`` keeps the bar without fetching the loss.

Cost: the bar counts steps on the host; it never waits for the device, except to show the
training loss, fetched once every ``every_n_secs`` (default 1 s) and at the end: one
device->host transfer per interval, not per step. With ``RunConfig.steps_per_execution``
> 1 the count runs ahead of the device by the steps queued.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from estimator.hooks.session_run_hook import SessionRunArgs, SessionRunHook
from estimator.keys import LOSS
from estimator.mode_keys import ModeKeys

__all__ = ["ProgressBarHook", "ENV_VAR"]

ENV_VAR = "JAX_ESTIMATOR_PROGRESS_BAR"
_OFF = ("0", "false", "off", "no")
_ON = ("1", "true", "on", "yes")

_DESC = {ModeKeys.TRAIN: "train", ModeKeys.EVAL: "evaluate", ModeKeys.PREDICT: "predict"}
_UNIT = {ModeKeys.TRAIN: "step", ModeKeys.EVAL: "batch", ModeKeys.PREDICT: "batch"}


class ProgressBarHook(SessionRunHook):
    """Shows the loop's progress as a tqdm bar (optionally with the training loss).

    In training the bar counts global steps: it starts at the step training resumes from
    and, when ``train()`` was given ``steps``/``max_steps``, ends at the step it stops at.
    In evaluation and prediction it counts batches (up to ``steps`` when given).

    Args:
      num_steps: steps this loop runs (``train(steps=)``, ``evaluate(steps=)``); None: as
        ``last_step`` or unknown.
      last_step: the global step training stops at (``train(max_steps=)``).
      desc: keyword-only; the bar's label (default ``train``/``evaluate``/``predict``).
      show_loss: keyword-only; show the loss (training only by default: the loss of one
        evaluation batch says little).
      every_n_secs: keyword-only; seconds between loss fetches.
      disable: keyword-only; show nothing (a way to turn the default bar off for a call).
      file: keyword-only; where to draw (default ``sys.stderr`` when the loop starts).
      clock: keyword-only; the time source of ``every_n_secs`` (tests pass a fake).
      **tqdm_kwargs: keyword-only; passed to ``tqdm.tqdm`` (``leave``, ``ncols``, ...).

    Attributes:
      bar: the ``tqdm`` object of the loop in progress (None before it starts).
    """

    def __init__(
        self,
        num_steps: int | None = None,
        last_step: int | None = None,
        *,
        desc: str | None = None,
        show_loss: bool | None = None,
        every_n_secs: float = 1.0,
        disable: bool = False,
        file=None,
        clock: Callable[[], float] = time.monotonic,
        **tqdm_kwargs,
    ) -> None:
        if every_n_secs < 0:
            raise ValueError(f"every_n_secs must be >= 0, given: {every_n_secs}")
        self._num_steps = num_steps
        self._last_step = last_step
        self._desc = desc
        self._show_loss = show_loss
        self._every_n_secs = every_n_secs
        self.disable = disable
        self._file = file
        self._clock = clock
        self._tqdm_kwargs = tqdm_kwargs
        self._fetch = False
        self._loss_on = False
        self._last_fetch = 0.0
        self.bar = None

    def after_create_session(self, session, coord) -> None:
        if self.disable:
            return
        from tqdm import tqdm

        mode = session.mode
        train = mode == ModeKeys.TRAIN
        start = session.global_step if train else 0
        if train and self._last_step is not None:
            total = self._last_step
        elif self._num_steps is not None:
            total = start + self._num_steps
        else:
            total = None
        show = train if self._show_loss is None else self._show_loss
        self._loss_on = show and LOSS in session.output_names
        self._last_fetch = self._clock()
        self._close()
        self.bar = tqdm(
            total=total,
            initial=start,
            desc=self._desc or _DESC.get(mode, mode),
            unit=_UNIT.get(mode, "step"),
            file=self._file if self._file is not None else sys.stderr,
            dynamic_ncols=True,
            **self._tqdm_kwargs,
        )

    def before_run(self, run_context):
        self._fetch = (
            self.bar is not None
            and self._loss_on
            and self._clock() - self._last_fetch >= self._every_n_secs
        )
        return SessionRunArgs(LOSS) if self._fetch else None

    def after_run(self, run_context, run_values) -> None:
        if self.bar is None:
            return
        if self._fetch:
            self._last_fetch = self._clock()
            self.bar.set_postfix(loss=f"{float(run_values.results):.4g}", refresh=False)
        self.bar.update(1)

    def end(self, session) -> None:
        if self.bar is not None and self._loss_on and self.bar.n > self.bar.initial:
            # The final loss (one fetch when the loop has ended anyway).
            self.bar.set_postfix(loss=f"{float(session.run(LOSS)):.4g}", refresh=False)
        self._close()

    def _close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _env_choice() -> bool | None:
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    if os.environ.get("TQDM_DISABLE", "").strip().lower() in _ON:
        return False
    return None


def default_hook(
    hooks: list, *, num_steps: int | None = None, last_step: int | None = None
) -> ProgressBarHook | None:
    """The bar ``train``/``evaluate``/``predict`` add (internal): None when ``hooks`` has a
    ``ProgressBarHook`` already, when turned off by ``JAX_ESTIMATOR_PROGRESS_BAR`` /
    ``TQDM_DISABLE``, or when stderr is not a terminal (unless forced on)."""
    if any(isinstance(h, ProgressBarHook) for h in hooks):
        return None
    choice = _env_choice()
    if choice is None:
        try:
            choice = sys.stderr.isatty()
        except (AttributeError, ValueError):  # replaced or closed stderr
            choice = False
    if not choice:
        return None
    return ProgressBarHook(num_steps, last_step)
