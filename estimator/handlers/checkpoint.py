"""``CheckpointHandler``: a checkpoint at the end of every N epochs (or every N batches)
(Gluon's ``CheckpointHandler``), in the Estimator's ``model_dir``."""

from __future__ import annotations

import logging
import os

from estimator.handlers.events import BatchEnd, EpochEnd, TrainBegin

__all__ = ["CheckpointHandler"]

logger = logging.getLogger("estimator")


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Saves a checkpoint of the training state every ``epoch_period`` epochs and/or
    every ``batch_period`` batches (Gluon's ``CheckpointHandler``).

    The checkpoint is the Estimator's own (``model_dir/model.ckpt_<global step>``, orbax,
    asynchronous, ``RunConfig.keep_checkpoint_max`` kept): later ``train()``,
    ``evaluate()`` and ``predict()`` calls resume from it, as from the saves
    ``RunConfig.save_checkpoints_steps`` schedules. In a multi-process job every process
    takes part in the save (epochs end at the same step on every process). Gluon's other
    options have Estimator counterparts: the best model is ``BestExporter``'s job, the
    number kept ``RunConfig.keep_checkpoint_max``, and ``train()`` always resumes from the
    latest checkpoint.

    Args:
      model_dir: None, or the Estimator's ``model_dir`` (checked when training begins).
      epoch_period: save at the end of every this many epochs (None: not by epochs).
      batch_period: save after every this many batches (None: not by batches).
      verbose: keyword-only; 1 logs every save.

    Attributes:
      saved: the checkpoint paths this handler saved.

    Raises:
      ValueError: a period that is not None or a positive integer; (at ``train_begin``) a
        ``model_dir`` other than the Estimator's.
    """

    def __init__(
        self,
        model_dir: str | None = None,
        epoch_period: int | None = 1,
        batch_period: int | None = None,
        *,
        verbose: int = 0,
    ) -> None:
        for what, value in (("epoch_period", epoch_period), ("batch_period", batch_period)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{what} must be None or an integer >= 1, given: {value!r}")
        self.model_dir = None if model_dir is None else os.fspath(model_dir)
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.verbose = verbose
        self.current_batch = 0
        self.current_epoch = 0
        self.saved: list[str] = []

    def train_begin(self, session, *args, **kwargs) -> None:
        if self.model_dir is not None and os.path.abspath(self.model_dir) != os.path.abspath(
            session.model_dir
        ):
            raise ValueError(
                f"CheckpointHandler(model_dir={self.model_dir!r}) saves the Estimator's "
                f"checkpoints, which live in its model_dir {session.model_dir!r}: pass "
                "model_dir=None, or train an Estimator whose model_dir is that directory."
            )
        self.current_batch = 0
        self.current_epoch = 0

    def batch_end(self, session, *args, **kwargs) -> bool:
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self._save(session)
        return False

    def epoch_end(self, session, *args, **kwargs) -> bool:
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self._save(session)
        return False

    def _save(self, session) -> None:
        path = session.save_checkpoint()
        if path is not None:
            self.saved.append(path)
        if self.verbose and getattr(session, "is_chief", True):
            logger.info(
                "[Epoch %d] CheckpointHandler: saved global step %d in %s",
                self.current_epoch,
                session.global_step,
                session.model_dir,
            )
