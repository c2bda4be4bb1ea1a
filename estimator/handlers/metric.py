"""``MetricHandler``: reports and resets the training metrics (Gluon's ``MetricHandler``).

The metrics themselves are ``model_fn``'s ``eval_metric_ops``, accumulated on the device
by the train step (``estimator.engine.steps.train_metrics_step``): the handler only reads
them (one transfer per report), resets them, and tells everyone. ``train()`` adds one,
reporting every ``RunConfig.train_metrics_steps`` steps, unless the hooks hold one already.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

from estimator.events.files import FLUSH_SECS, writer_for
from estimator.handlers.events import (
    TRAIN_PREFIX,
    BatchEnd,
    EpochBegin,
    EpochEnd,
    TrainBegin,
    TrainEnd,
)

__all__ = ["MetricHandler", "format_values"]

logger = logging.getLogger("estimator")


def format_values(values: dict) -> str:
    """``"a = 0.5, b = [1 2]"`` for a log line (sorted by name)."""

    def one(value) -> str:
        array = np.asarray(value)
        if array.shape == ():
            return f"{array.item():.6g}" if array.dtype.kind == "f" else str(array.item())
        return np.array2string(array, precision=4, threshold=8)

    return ", ".join(f"{k} = {one(v)}" for k, v in sorted(values.items()))


class MetricHandler(TrainBegin, EpochBegin, BatchEnd, EpochEnd, TrainEnd):
    """Reports the training metrics every ``batch_period`` steps and at epoch ends, then
    resets them (Gluon's ``MetricHandler``; PaddlePaddle's Evaluator: statistics merged
    over "each N batches the user wanted").

    What a report does: reads the metrics accumulated on the device since the last reset
    (``eval_metric_ops`` over the training batches, with the variables each batch saw,
    merged across devices and processes) and the mean loss over those steps; keeps them in
    :attr:`values` and in ``session.logs`` as ``"train/<name>"`` (``"train/loss"`` for the
    loss) for the handlers and hooks after it; on the chief, logs one line and writes the
    metrics to TensorBoard in ``model_dir`` (the training run) at the global step, under
    the names ``evaluate()`` writes to ``eval_dir`` (the two curves share a chart).

    Between reports nothing leaves the device. A hook can also fetch the value so far
    with ``SessionRunArgs("train/<name>")``.

    Args:
      metrics: the names (keys of ``eval_metric_ops``) to report; None: all.
      priority: Gluon's -1000: before every handler and hook that reads the values.
      batch_period: keyword-only; report every this many steps of the window (None: not
        by steps).
      epoch_period: keyword-only; report at the end of every this many epochs (None: not
        at epoch ends).

    Attributes:
      values: the last report (``{name: value, "loss": mean loss}``), {} before one.
      step: the global step of the last report.

    Raises:
      ValueError: a period that is not None or a positive integer.
    """

    def __init__(
        self,
        metrics: Sequence[str] | None = None,
        priority: float = -1000,
        *,
        batch_period: int | None = None,
        epoch_period: int | None = 1,
    ) -> None:
        for what, value in (("batch_period", batch_period), ("epoch_period", epoch_period)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{what} must be None or an integer >= 1, given: {value!r}")
        self.metrics = None if metrics is None else list(metrics)
        self.priority = priority
        self.batch_period = batch_period
        self.epoch_period = epoch_period
        self.values: dict = {}
        self.step: int | None = None
        self._window = 0  # steps accumulated since the last reset
        self._epochs = 0
        self._writer = None
        self._flushed = 0.0

    #: The engine accumulates training metrics when a hook says it reads them.
    needs_train_metrics = True

    def train_begin(self, session, *args, **kwargs) -> None:
        self.values = {}
        self.step = None
        self._epochs = 0
        self._reset(session)

    def epoch_begin(self, session, *args, **kwargs) -> None:
        if self._window:
            self._reset(session)

    def batch_end(self, session, *args, **kwargs) -> bool:
        self._window += 1
        if self.batch_period is not None and self._window >= self.batch_period:
            self.report(session)
        return False

    def epoch_end(self, session, *args, **kwargs) -> bool:
        self._epochs += 1
        if self.epoch_period is not None and self._epochs % self.epoch_period == 0:
            if self._window:
                self.report(session)
        return False

    def train_end(self, session, *args, **kwargs) -> None:
        if self._window:  # the steps since the last report
            self.report(session)
        if self._writer is not None:
            self._writer.flush()
            self._writer = None

    def _reset(self, session) -> None:
        session.reset_train_metrics()
        self._window = 0

    def report(self, session) -> dict:
        """Reads, publishes and resets the metrics now (see the class docstring); returns
        the values."""
        values = session.train_metrics()
        if self.metrics is not None:
            unknown = sorted(set(self.metrics) - set(values))
            if unknown:
                raise KeyError(
                    f"MetricHandler(metrics={self.metrics}): {unknown} not among the training "
                    f"metrics, which are {sorted(values)} (model_fn's eval_metric_ops and the "
                    "loss)."
                )
            values = {k: values[k] for k in [*self.metrics, "loss"] if k in values}
        steps = self._window
        self._reset(session)
        self.values = values
        self.step = session.global_step
        session.logs.update({TRAIN_PREFIX + k: v for k, v in values.items()})
        if getattr(session, "is_chief", True):
            logger.info(
                "Training metrics for global step %d (%d steps): %s",
                session.global_step,
                steps,
                format_values(values),
            )
            writer = self._writer = writer_for(session.model_dir)
            for name, value in values.items():
                if name == "loss":
                    continue  # the summary hook writes the loss of every save_summary_steps
                if np.ndim(value) == 0:
                    writer.add_scalar(name, float(value), session.global_step)
                else:
                    writer.add_tensor(name, np.asarray(value), session.global_step)
            # Flushing syncs the file: at most every FLUSH_SECS (as the summary hook) and
            # at the end of training, not at every report.
            now = time.monotonic()
            if now - self._flushed >= FLUSH_SECS:
                writer.flush()
                self._flushed = now
        return values
