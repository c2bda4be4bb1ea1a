"""``StoppingHandler`` (stop after a number of epochs or batches) and
``EarlyStoppingHandler`` (stop when a monitored value stops improving), Gluon's."""

from __future__ import annotations

import logging
import math
import re
import warnings

from estimator.handlers.events import BatchEnd, EpochEnd, TrainBegin, TrainEnd

__all__ = ["EarlyStoppingHandler", "StoppingHandler"]

logger = logging.getLogger("estimator")


def _positive_or_none(value, what: str):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{what} must be None or an integer >= 1, given: {value!r}")
    return value


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stops training after ``max_epoch`` epochs or ``max_batch`` batches of this
    ``train()`` call (Gluon's ``StoppingHandler``).

    Epochs are those the input marks (see ``estimator.handlers.events``). When the input
    ends before ``max_epoch`` epochs (a one-pass input, or ``numpy_input_fn(num_epochs=2)``
    with ``max_epoch=5``), ``input_fn`` is called again for more passes until
    ``max_epoch`` is reached: the Gluon habit of iterating one ``DataLoader`` per epoch.

    Args:
      max_epoch: epochs to train; None: no limit by epochs.
      max_batch: batches (steps) to train; None: no limit by batches.

    Attributes:
      current_epoch, current_batch: epochs and batches run since ``train_begin``.
      stop_training: whether a limit was reached.

    Raises:
      ValueError: a limit that is not None or a positive integer.
    """

    def __init__(self, max_epoch: int | None = None, max_batch: int | None = None) -> None:
        self.max_epoch = _positive_or_none(max_epoch, "max_epoch")
        self.max_batch = _positive_or_none(max_batch, "max_batch")
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def train_begin(self, session, *args, **kwargs) -> None:
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def batch_end(self, session, *args, **kwargs) -> bool:
        self.current_batch += 1
        if self.max_batch is not None and self.current_batch >= self.max_batch:
            self.stop_training = True
        return self.stop_training

    def epoch_end(self, session, *args, **kwargs) -> bool:
        self.current_epoch += 1
        if self.max_epoch is not None and self.current_epoch >= self.max_epoch:
            self.stop_training = True
        return self.stop_training

    def wants_another_pass(self) -> bool:
        """Whether the input should be read again when it ends (epochs still to train)."""
        return (
            not self.stop_training
            and self.max_epoch is not None
            and self.current_epoch < self.max_epoch
        )


#: Monitored names whose larger values are better in ``mode="auto"``.
_HIGHER_IS_BETTER = re.compile(r"acc|f1|auc|precision|recall", re.IGNORECASE)


class EarlyStoppingHandler(TrainBegin, EpochEnd, TrainEnd):
    """Stops training when a monitored value has not improved for ``patience`` epochs
    (Gluon's ``EarlyStoppingHandler``).

    Checked at each epoch's end: after the ``MetricHandler`` and ``ValidationHandler``
    (priority -1000) have reported that epoch's values.

    Args:
      monitor: the value to watch: a name in ``session.logs`` (``"validation/accuracy"``,
        ``"validation/loss"``, ``"train/auc"``, ...), or Gluon's metric protocol, an
        object whose ``get()`` returns ``(name, value)``.
      min_delta: the smallest change that counts as an improvement.
      patience: epochs without improvement that stop training (0 and 1: the first one).
      mode: ``"min"``, ``"max"``, or ``"auto"``: ``"max"`` for names containing acc, f1,
        auc, precision or recall, else ``"min"`` (what Gluon's ``auto`` means to do; its
        code picks ``max`` for every name).
      baseline: the value to beat from the start (None: the first value seen).

    Attributes:
      best: the best value seen; wait: epochs since it; stopped_epoch: the epoch (counted
        from 0) training stopped at, or 0.

    Raises:
      ValueError: an unknown ``mode``, a negative ``patience``.
      TypeError: ``monitor`` neither a name nor an object with ``get()``.
    """

    def __init__(
        self,
        monitor,
        min_delta: float = 0,
        patience: int = 0,
        mode: str = "auto",
        baseline: float | None = None,
    ) -> None:
        if not isinstance(monitor, str) and not callable(getattr(monitor, "get", None)):
            raise TypeError(
                "monitor must be the name of a reported value (e.g. 'validation/accuracy', "
                f"a key of session.logs) or an object with get() -> (name, value); got {monitor!r}"
            )
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"mode must be 'auto', 'min' or 'max', given: {mode!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(f"patience must be an integer >= 0, given: {patience!r}")
        self.monitor = monitor
        self.min_delta = abs(float(min_delta))
        self.patience = patience
        self.baseline = baseline
        name = monitor if isinstance(monitor, str) else monitor.get()[0]
        if mode == "auto":
            mode = "max" if _HIGHER_IS_BETTER.search(str(name)) else "min"
        self.mode = mode
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        self.best = math.nan
        self._warned = False

    def train_begin(self, session, *args, **kwargs) -> None:
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        self._warned = False
        if self.baseline is not None:
            self.best = float(self.baseline)
        else:
            self.best = math.inf if self.mode == "min" else -math.inf

    def _value(self, session) -> tuple[str, float]:
        if isinstance(self.monitor, str):
            return self.monitor, float(session.logs.get(self.monitor, math.nan))
        name, value = self.monitor.get()
        return name, float(value)

    def _improved(self, value: float) -> bool:
        if self.mode == "max":
            return value - self.min_delta > self.best
        return value + self.min_delta < self.best

    def epoch_end(self, session, *args, **kwargs) -> bool:
        name, value = self._value(session)
        if math.isnan(value):
            if not self._warned:
                self._warned = True
                known = ", ".join(sorted(session.logs)) or "none yet"
                warnings.warn(
                    f"EarlyStoppingHandler: {name!r} has no value at the end of epoch "
                    f"{self.current_epoch} (values reported so far: {known}). Report it "
                    "before the epoch ends: a ValidationHandler (validation/...) or training "
                    "metrics (RunConfig(train_metrics_steps=...) or a MetricHandler: train/...).",
                    RuntimeWarning,
                    stacklevel=2,
                )
        elif self._improved(value):
            self.best = value
            self.wait = 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = self.current_epoch
                self.stop_training = True
        self.current_epoch += 1
        return self.stop_training

    def train_end(self, session, *args, **kwargs) -> None:
        if self.stop_training and getattr(session, "is_chief", True):
            name = self.monitor if isinstance(self.monitor, str) else self.monitor.get()[0]
            logger.info(
                "[Epoch %d] EarlyStoppingHandler: early stopping due to %s not improving",
                self.stopped_epoch,
                name,
            )
