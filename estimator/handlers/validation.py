"""``ValidationHandler``: evaluates the model being trained every N epochs or batches
(Gluon's ``ValidationHandler``), from the live state: no checkpoint is read or written."""

from __future__ import annotations

from collections.abc import Callable

from estimator.handlers.events import BatchEnd, EpochEnd, TrainBegin, check_handler
from estimator.hooks.session_run_hook import SessionRunHook

__all__ = ["VALIDATION_PREFIX", "ValidationHandler"]

#: Validation results are ``session.logs[VALIDATION_PREFIX + name]``.
VALIDATION_PREFIX = "validation/"


class ValidationHandler(TrainBegin, BatchEnd, EpochEnd):
    """Evaluates the live model every ``epoch_period`` epochs and/or ``batch_period``
    batches (Gluon's ``ValidationHandler``).

    The default evaluation is ``session.evaluate``: ``Estimator.evaluate``'s compiled
    loop on the variables on the device now (``InMemoryEvaluatorHook``'s), writing the
    results to ``eval_dir(name)`` (event files and ``eval_results.jsonl``: early-stopping
    hooks and ``BestExporter`` see them). In a multi-process job every process evaluates at
    the same step, each its shard of ``val_data`` (``input_fn(input_context)``), and the
    merged result is the whole set's (see ``Runtime.evaluate_distributed``).

    The results are kept in :attr:`eval_result` and in ``session.logs`` as
    ``"validation/<name>"`` for the handlers after this one (priority -1000, Gluon's, so
    that ``EarlyStoppingHandler`` and ``LoggingHandler`` see this epoch's).

    Args:
      val_data: the evaluation ``input_fn`` (as for ``Estimator.evaluate``).
      eval_fn: None (``session.evaluate``), or ``eval_fn(val_data=val_data)`` returning a
        dict of results (Gluon's ``eval_fn``).
      epoch_period: evaluate at the end of every this many epochs (None: never by epochs).
      batch_period: evaluate after every this many batches (None: never by batches).
      priority: Gluon's -1000.
      event_handlers: hooks and handlers for each evaluation (``evaluate(hooks=...)``).
      steps: keyword-only; evaluate at most this many batches.
      name: keyword-only; the evaluation's name (``eval_dir(name)``).

    Attributes:
      eval_result: the last evaluation's results, None before one.

    Raises:
      ValueError: a period that is not None or a positive integer.
      TypeError: a member of ``event_handlers`` that is not a hook or handler.
    """

    def __init__(
        self,
        val_data: Callable,
        eval_fn: Callable | None = None,
        epoch_period: int | None = 1,
        batch_period: int | None = None,
        priority: float = -1000,
        event_handlers=None,
        *,
        steps: int | None = None,
        name: str | None = None,
    ) -> None:
        for what, value in (("epoch_period", epoch_period), ("batch_period", batch_period)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{what} must be None or an integer >= 1, given: {value!r}")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        self.val_data = val_data
        self.eval_fn = eval_fn
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.priority = priority
        self.event_handlers = list(event_handlers or [])
        for handler in self.event_handlers:
            if not isinstance(handler, SessionRunHook):
                raise TypeError(
                    "event_handlers must be SessionRunHooks or estimator.handlers event "
                    f"handlers, given: {handler}"
                )
            check_handler(handler)
        self.steps = steps
        self.name = name
        self.eval_result: dict | None = None
        self.current_batch = 0
        self.current_epoch = 0

    def train_begin(self, session, *args, **kwargs) -> None:
        self.current_batch = 0
        self.current_epoch = 0

    def batch_end(self, session, *args, **kwargs) -> bool:
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self._validate(session)
        return False

    def epoch_end(self, session, *args, **kwargs) -> bool:
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self._validate(session)
        return False

    def _validate(self, session) -> None:
        if self.eval_fn is not None:
            results = self.eval_fn(val_data=self.val_data)
        else:
            results = session.evaluate(
                self.val_data, steps=self.steps, hooks=list(self.event_handlers), name=self.name
            )
        self.eval_result = results
        session.logs.update({VALIDATION_PREFIX + k: v for k, v in results.items()})
