"""The session loop: TF's ``MonitoredSession`` around the compiled steps.

* :class:`~estimator.engine.session.Session` — what hooks see (global step, state, the
  last step's outputs) and the one place values move from the device to the host.
* :class:`TrainRunner`, :class:`EvalRunner`, :class:`PredictRunner` — run the steps of a
  mode; train and evaluation steps whose values no hook fetches are queued and run
  ``steps_per_execution`` at a time.
* :func:`loop_steps` / :func:`run_loop` — the steps, with the call's hooks and handlers
  called at fixed points through their ``estimator.handlers.events.Dispatcher`` (TF's hook
  order, and the handlers' events in the same list: that module's docstring has the loop
  as pseudo-code).
"""

from __future__ import annotations

from collections.abc import Iterator

import jax
import numpy as np

from estimator import distribute, keys
from estimator.engine.compile_policy import MANY_RUNS, RunPlan
from estimator.engine.compiler import StepCompiler
from estimator.engine.input_pipeline import Prefetcher
from estimator.engine.interrupt import SignalGuard
from estimator.engine.lazy_outputs import LazyValue, StepOutputs
from estimator.engine.session import Session, needs_device
from estimator.engine.steps import TrainState
from estimator.handlers.events import Dispatcher


def _batch_shapes(batch) -> tuple:
    features = batch[0]
    if type(features) is dict and all(hasattr(v, "shape") for v in features.values()):
        # The common case, cheaply: a dict of arrays and an array (or no) label.
        labels = batch[1] if len(batch) > 1 else None
        label_shape = (
            (np.shape(labels), getattr(labels, "dtype", None))
            if labels is None or hasattr(labels, "shape")
            else (tuple(np.shape(x) for x in jax.tree.leaves(labels)))
        )
        return tuple((k, v.shape, v.dtype) for k, v in features.items()), label_shape
    return tuple(np.shape(x) for x in jax.tree.leaves(batch))


class _QueuedRunner:
    """Runs steps up to ``steps_per_execution`` at a time (internal).

    Steps whose outputs no hook fetches are queued and run together in one device call
    (a ``lax.fori_loop``), so the per-call dispatch cost is shared; a step whose values a
    hook fetches, a read of the state (a checkpoint save) or the end of the loop runs the
    queue first. Every call, of one step or of many, runs the same compiled program (see
    ``StepCompiler``): a batch shape compiles once. ``steps_per_call`` (1 to the
    compiler's) runs fewer steps per call than the compiler allows. A call's batches are
    consecutive batches of one block of an in-memory input (``estimator.engine.row_blocks``:
    the call is handed the block), or batches of one shape.
    """

    def __init__(self, compiler: StepCompiler, steps_per_call: int | None = None) -> None:
        self.compiler = compiler
        self.outputs: dict = {}
        self.k = steps_per_call or compiler.steps_per_call
        self.steps_run = 0  # steps run on the device (the queued ones not yet)
        self._pending: list = []
        self._key = None  # what the queued batches share: their block, or their shapes
        self._origin = None  # the first queued batch's origin

    def run(self, batch, sync: bool, apart: bool = False, origin=None) -> None:
        """Runs (or queues) the step on ``batch``; ``sync``: a hook fetches its values, so
        it runs now with the steps queued before it; ``apart``: among them the outputs
        the step leaves to the summary program (``StepInfo.apart``), computed first from
        the state before the step; ``origin``: ``(RowBlock, i)`` when ``batch`` is batch
        ``i`` of a block (``estimator.engine.row_blocks``), else None."""
        if apart:
            self.flush()
            values = self.compiler.summaries(self.state, batch)
            self._one(batch, origin)
            self.outputs = {**self.outputs, **values}
            return
        if self.k == 1:
            self._one(batch, origin)
            return
        # A call's batches are consecutive batches of one block that it is handed (popped
        # in order: a block of a batch per slot), or batches of one signature.
        if origin is not None and origin[0].count != self.compiler.steps_per_call:
            origin = None
        key = _batch_shapes(batch) if origin is None else origin[0]
        if self._pending and key is not self._key and key != self._key:
            self.flush()
        if not self._pending:
            self._key, self._origin = key, origin
        self._pending.append(batch)
        if sync or len(self._pending) >= self.k:
            self.flush()

    def _one(self, batch, origin) -> None:
        self._many([batch], origin)
        self.steps_run += 1

    def flush(self) -> None:
        pending, origin = self._pending, self._origin
        while pending:
            chunk, pending[: self.k] = pending[: self.k], []
            self._many(chunk, origin)
            self.steps_run += len(chunk)
            origin = None if origin is None else (origin[0], origin[1] + len(chunk))


class TrainRunner(_QueuedRunner):
    """Train steps; ``state`` is the :class:`TrainState` after the last step run.

    With ``metrics`` (an empty accumulator, host zeros: training metrics are on) the
    steps are ``estimator.engine.steps.train_metrics_step``s and ``metrics`` is the
    accumulator on the device after the last step run: read with :meth:`metric_values`,
    emptied with :meth:`reset_metrics`.
    """

    def __init__(
        self,
        compiler: StepCompiler,
        state: TrainState,
        plan: RunPlan = MANY_RUNS,
        metrics=None,
        steps_per_call: int | None = None,
    ):
        super().__init__(compiler, steps_per_call)
        self.state = state
        self.plan = plan
        self.metrics = metrics
        self._empty = metrics
        self._finalize = None if metrics is None else compiler.finalizer(metrics)

    def _many(self, batches: list, origin) -> None:
        if self.metrics is None:
            self.state, self.outputs, _ = self.compiler.multi(
                self.state, batches, plan=self.plan, rows=origin
            )
            return
        self.state, self.metrics, self.outputs, _ = self.compiler.multi(
            self.state, self.metrics, batches, plan=self.plan, rows=origin
        )

    def metric_values(self) -> tuple[dict, jax.Array]:
        """``(metrics, mean loss)`` of the accumulator after the queued steps, on the
        device (each process computes them from its copy: no collective)."""
        self.flush()
        return self._finalize(distribute.local_copy(self.metrics))

    def reset_metrics(self) -> None:
        self.flush()
        self.metrics = self._empty


class EvalRunner(_QueuedRunner):
    """Evaluation steps accumulating metrics on the device in ``accumulator``."""

    def __init__(
        self, compiler: StepCompiler, state: TrainState, accumulator, plan: RunPlan = MANY_RUNS
    ) -> None:
        super().__init__(compiler)
        self.state = state
        self.accumulator = accumulator
        self.plan = plan

    def _many(self, batches: list, origin) -> None:
        self.accumulator, self.outputs, _ = self.compiler.multi(
            self.state, self.accumulator, batches, plan=self.plan, rows=origin
        )


class PredictRunner:
    """Computes predictions batch by batch, kept on the device until yielded (internal)."""

    def __init__(
        self, compiler: StepCompiler, state: TrainState, predict_keys, plan: RunPlan = MANY_RUNS
    ) -> None:
        self.compiler = compiler
        self.state = state
        self.predict_keys = predict_keys
        self.plan = plan
        self.outputs: dict = {}
        self.pending: list = []
        self.steps_run = 0

    def run(self, batch, sync: bool, apart: bool = False, origin=None) -> None:
        del origin  # one batch a call
        values = self.compiler.summaries(self.state, batch) if apart else {}
        predictions, outputs, _ = self.compiler(self.state, *batch, plan=self.plan)
        self.outputs = {**outputs, **values}
        self.pending.append(predictions)
        self.steps_run += 1

    def flush(self) -> None:
        pass


def _batch_end_kwargs(session, batch) -> dict:
    """``batch_end``'s keyword arguments: the batch, and its step's values, lazily."""
    outputs = StepOutputs(session, session.runner.steps_run + _queued(session))
    labels = batch[1] if len(batch) > 1 else None
    loss = LazyValue(outputs, keys.LOSS) if keys.LOSS in session.output_names else None
    return {"batch": batch, "label": labels, "outputs": outputs, "loss": loss}


def _queued(session) -> int:
    return len(getattr(session.runner, "_pending", ()))


_NOTHING: dict = {}  # the values of a step nobody fetched from (never written to)


def _run_step(session, prefetcher, batch, requests: dict | None, advances: bool) -> dict:
    """Runs the step on ``batch`` and refills the input; returns the requested values of
    the step (``{index: value}``: see ``Dispatcher.before_run``)."""
    step_before = session.global_step
    # Fast path for the usual per-step request, the host-known global step alone
    # (StopAtStepHook): no device value, no traversal of nested fetches.
    only_step = requests is not None and all(
        f is keys.GLOBAL_STEP or f == keys.GLOBAL_STEP for f in requests.values()
    )
    sync = requests is not None and not only_step and needs_device(requests)
    session.runner.run(batch, sync, sync and session.fetches_apart(requests), prefetcher.origin)
    prefetcher.fill()
    if advances:
        session.global_step = step_before + 1
    if not requests:
        return _NOTHING
    if only_step:
        return dict.fromkeys(requests, np.int64(step_before))
    return session.run(requests, step=step_before)


def _batch_follows(session, events: Dispatcher, prefetcher) -> bool:
    """Whether a batch follows, looked at only when a handler must know before the step:
    an epoch begins (its ``epoch_begin`` is called here), or a ``batch_begin`` wants it."""
    if events.epoch_open:
        return True
    try:
        prefetcher.peek()  # an epoch (or a batch) begins only when a batch follows
    except StopIteration:
        return False
    events.epoch_begin(session)
    return True


def _close_epoch(session, events: Dispatcher, prefetcher, last: bool) -> None:
    """Ends the open epoch after its last batch, or after the loop's last step (``last``:
    ``num_steps`` reached; or a stop: an epoch a stop cut short ends too)."""
    if last or events.stop_requested or prefetcher.epoch_ended():
        events.epoch_end(session)


def loop_steps(
    session: Session,
    events: Dispatcher,
    prefetcher: Prefetcher,
    *,
    num_steps: int | None = None,
    advances_global_step: bool = False,
    guard: SignalGuard | None = None,
) -> Iterator[int]:
    """Runs steps until a stop, the end of input or ``num_steps``, calling the hooks and
    handlers at their points (TF's hook order and the handlers' events: the pseudo-code of
    ``estimator.handlers.events``), and yields the number of steps run after each one.

    ``events.begin()`` and ``events.after_create_session(session)`` have been called by
    the caller (the state is created between them); this makes the per-step calls and,
    when the loop ends normally, ``events.end(session)``.

    Args:
      session: the :class:`Session`; its runner runs the steps.
      events: the call's hooks and handlers (``estimator.handlers.events.Dispatcher``).
      prefetcher: the batches (with ``epoch_ended()``: see ``estimator.engine.epochs``).
      num_steps: at most this many steps (evaluation's ``steps``).
      advances_global_step: training: the global step grows by one per step.
      guard: a :class:`~estimator.engine.interrupt.SignalGuard`; when it asks for a stop
        (a signal; in a multi-process job, the step the job agreed to stop at) the loop
        stops after the step without calling ``end`` (as an exception would).
    """
    count = 0
    looks_ahead = events.epochs or events.sees_batch
    prefetcher.fill()
    while num_steps is None or count < num_steps:
        if looks_ahead and not _batch_follows(session, events, prefetcher):
            break
        requests = events.before_run(session, prefetcher.peek() if events.sees_batch else None)
        try:
            batch = prefetcher.pop()
        except StopIteration:
            break
        results = _run_step(session, prefetcher, batch, requests, advances_global_step)
        count += 1
        kwargs = _batch_end_kwargs(session, batch) if events.sees_batch_end else None
        events.after_run(results, kwargs)
        if events.epoch_open:
            _close_epoch(session, events, prefetcher, count == num_steps)
        yield count
        if events.stop_requested:
            break
        if guard is not None and guard.stop_after(session.global_step):
            session.runner.flush()
            return
    session.runner.flush()
    events.end(session)


def run_loop(session: Session, events: Dispatcher, prefetcher: Prefetcher, **kwargs) -> int:
    """:func:`loop_steps` to the end; returns the number of steps run."""
    count = 0
    for count in loop_steps(session, events, prefetcher, **kwargs):  # noqa: B007
        pass
    return count


def extract_keys(predictions, predict_keys):
    if not predict_keys:
        return predictions
    if not isinstance(predictions, dict):
        raise ValueError("predict_keys argument is not valid in case of non-dict predictions.")
    existing = predictions.keys()
    chosen = {k: v for k, v in predictions.items() if k in predict_keys}
    if not chosen:
        raise ValueError(
            f"Expected to run at least one output from {existing}, provided {predict_keys}."
        )
    return chosen


def examples(batch, single: bool):
    if not single:
        yield batch
        return
    if not isinstance(batch, dict):
        yield from batch
        return
    length = None
    for key, value in batch.items():
        length = length or value.shape[0]
        if value.shape[0] != length:
            raise ValueError(
                f"Batch length of predictions should be same. {key} has different batch "
                "length than others."
            )
    for i in range(length or 0):
        yield {key: value[i] for key, value in batch.items()}
