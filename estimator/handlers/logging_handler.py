"""``LoggingHandler``: training progress in the log, per batch or per epoch, with an
optional progress bar (Gluon's ``LoggingHandler``)."""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable, Sequence

import jax

from estimator.handlers.events import BatchEnd, EpochBegin, EpochEnd, TrainBegin, TrainEnd
from estimator.handlers.metric import format_values

__all__ = ["LoggingHandler"]

logger = logging.getLogger("estimator")


def _rows(batch) -> int:
    leaves = jax.tree.leaves(batch[0] if isinstance(batch, tuple) else batch)
    return int(leaves[0].shape[0]) if leaves and getattr(leaves[0], "ndim", 0) else 0


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchEnd):
    """Logs training statistics (Gluon's ``LoggingHandler``; it times intervals from batch
    to batch, so unlike Gluon's it needs no ``batch_begin``, which would cost every step a
    call).

    * ``log_interval="epoch"``: at each epoch's begin and end (its time and the values in
      ``session.logs``: the training metrics and validation results reported so far);
    * ``log_interval=k``: also every k batches, with the samples seen, the time since the
      last line and the step's loss (a fetch: one transfer every k batches).

    It runs last (priority +inf, Gluon's), so it logs what the other handlers reported in
    the same step or epoch. Only the chief logs in a multi-process job.

    Args:
      log_interval: ``"epoch"`` or a number of batches.
      metrics: the names in ``session.logs`` to show (``"train/accuracy"``,
        ``"validation/auc"``); None: all of them.
      priority: Gluon's ``inf``.
      progress_bar: keyword-only; also draw a tqdm bar per epoch (its length known from
        the second epoch on) with the values as they are reported.
      file: keyword-only; where the bar draws (default ``sys.stderr``).
      clock: keyword-only; the time source (tests pass a fake).

    Raises:
      ValueError: a ``log_interval`` that is neither ``"epoch"`` nor a positive integer.
    """

    def __init__(
        self,
        log_interval: int | str = "epoch",
        metrics: Sequence[str] | None = None,
        priority: float = math.inf,
        *,
        progress_bar: bool = False,
        file=None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if log_interval != "epoch" and (
            isinstance(log_interval, bool) or not isinstance(log_interval, int) or log_interval < 1
        ):
            raise ValueError(
                f"log_interval must be either a positive integer or 'epoch', given: "
                f"{log_interval!r}"
            )
        self.log_interval = log_interval
        self.metrics = None if metrics is None else list(metrics)
        self.priority = priority
        self.progress_bar = progress_bar
        self._file = file
        self._clock = clock
        self.current_epoch = 0
        self.batch_index = 0
        self.processed_samples = 0
        self._bar = None
        self._epoch_batches: int | None = None  # the first epoch's length, for the bar

    def _values(self, session) -> dict:
        logs = session.logs
        if self.metrics is None:
            return {k: v for k, v in logs.items() if not k.endswith("global_step")}
        return {k: logs[k] for k in self.metrics if k in logs}

    def _log(self, session, message: str, *args) -> None:
        if getattr(session, "is_chief", True):
            logger.info(message, *args)

    def train_begin(self, session, *args, **kwargs) -> None:
        self.train_start = self._clock()
        self.current_epoch = 0
        self.batch_index = 0
        self.processed_samples = 0
        self._interval_start = self.train_start
        self._log(session, "Training begin at global step %d.", session.global_step)

    def train_end(self, session, *args, **kwargs) -> None:
        self._close_bar()
        elapsed = self._clock() - self.train_start
        self._log(
            session,
            "Train finished using total %ds with %d epochs. %s",
            elapsed,
            self.current_epoch,
            format_values(self._values(session)),
        )

    def epoch_begin(self, session, *args, **kwargs) -> None:
        self.epoch_start = self._clock()
        self._interval_start = self.epoch_start
        self._log(
            session, "[Epoch %d] Begin at global step %d", self.current_epoch, session.global_step
        )
        if self.progress_bar and getattr(session, "is_chief", True):
            from tqdm import tqdm

            self._close_bar()
            self._bar = tqdm(
                total=self._epoch_batches,
                desc=f"epoch {self.current_epoch}",
                unit="batch",
                file=self._file if self._file is not None else sys.stderr,
                dynamic_ncols=True,
            )

    def batch_end(self, session, *args, batch=None, loss=None, **kwargs) -> bool:
        self.batch_index += 1
        self.processed_samples += _rows(batch) if batch is not None else 0
        if self._bar is not None:
            self._bar.update(1)
        if isinstance(self.log_interval, int) and self.batch_index % self.log_interval == 0:
            now = self._clock()
            values = self._values(session)
            if loss is not None:
                values = {"loss": float(loss), **values}
            message = "[Epoch %d][Batch %d][Samples %d] time/interval: %.3fs %s"
            self._log(
                session,
                message,
                self.current_epoch,
                self.batch_index,
                self.processed_samples,
                now - self._interval_start,
                format_values(values),
            )
            self._interval_start = now
            if self._bar is not None:
                self._bar.set_postfix_str(format_values(values), refresh=False)
        return False

    def epoch_end(self, session, *args, **kwargs) -> bool:
        elapsed = self._clock() - self.epoch_start
        values = self._values(session)
        self._log(
            session,
            "[Epoch %d] Finished in %.3fs, %s",
            self.current_epoch,
            elapsed,
            format_values(values),
        )
        if self._bar is not None:
            self._bar.set_postfix_str(format_values(values), refresh=False)
            self._close_bar()
        if self._epoch_batches is None:
            self._epoch_batches = self.batch_index
        self.current_epoch += 1
        self.batch_index = 0
        return False

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
