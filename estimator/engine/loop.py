"""The session loop: TF's ``MonitoredSession`` around the compiled steps.

* :class:`~estimator.engine.session.Session` — what hooks see (global step, state, the
  last step's outputs) and the one place values move from the device to the host.
* :class:`TrainRunner`, :class:`EvalRunner`, :class:`PredictRunner` — run the steps of a
  mode; train and evaluation steps whose values no hook fetches are queued and run
  ``steps_per_execution`` at a time.
* :func:`loop_steps` / :func:`run_loop` — the hook calls in TF's order around each step
  (see ``estimator.hooks.session_run_hook``), and the event handlers' calls in the same
  list (see ``estimator.handlers.events``, whose docstring has the loop as pseudo-code).
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
from estimator.handlers.events import BatchBegin, BatchEnd, EpochBegin, EpochEnd, TrainEnd
from estimator.hooks.session_run_hook import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

_NO_RESULTS = SessionRunValues(None)
_NO_ARGS = SessionRunArgs(None)


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
    ``StepCompiler``): a batch shape compiles once.
    """

    def __init__(self, compiler: StepCompiler) -> None:
        self.compiler = compiler
        self.outputs: dict = {}
        self.k = compiler.steps_per_call
        self.steps_run = 0  # steps run on the device (the queued ones not yet)
        self._pending: list = []
        self._shapes = None

    def run(self, batch, sync: bool) -> None:
        if self.k == 1:
            self._many([batch])
            self.steps_run += 1
            return
        shapes = _batch_shapes(batch)
        if self._pending and shapes != self._shapes:
            self.flush()
        self._shapes = shapes
        self._pending.append(batch)
        if sync or len(self._pending) >= self.k:
            self.flush()

    def flush(self) -> None:
        pending = self._pending
        while pending:
            chunk, pending[: self.k] = pending[: self.k], []
            self._many(chunk)
            self.steps_run += len(chunk)


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
    ):
        super().__init__(compiler)
        self.state = state
        self.plan = plan
        self.metrics = metrics
        self._empty = metrics
        self._finalize = None if metrics is None else compiler.finalizer(metrics)

    def _many(self, batches: list) -> None:
        if self.metrics is None:
            self.state, self.outputs, _ = self.compiler.multi(self.state, batches, plan=self.plan)
            return
        self.state, self.metrics, self.outputs, _ = self.compiler.multi(
            self.state, self.metrics, batches, plan=self.plan
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

    def _many(self, batches: list) -> None:
        self.accumulator, self.outputs, _ = self.compiler.multi(
            self.state, self.accumulator, batches, plan=self.plan
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

    def run(self, batch, sync: bool) -> None:
        predictions, self.outputs, _ = self.compiler(self.state, *batch, plan=self.plan)
        self.pending.append(predictions)
        self.steps_run += 1

    def flush(self) -> None:
        pass


class _Handlers:
    """The event handlers among a loop's hooks, per event, in the list's order."""

    def __init__(self, hooks: list, training: bool) -> None:
        self.epoch_begin = [h for h in hooks if isinstance(h, EpochBegin)]
        self.batch_begin = [h for h in hooks if isinstance(h, BatchBegin)]
        self.batch_end = [h for h in hooks if isinstance(h, BatchEnd)]
        self.epoch_end = [h for h in hooks if isinstance(h, EpochEnd)]
        self.train_end = [h for h in hooks if isinstance(h, TrainEnd)] if training else []
        # Epoch boundaries are looked for only when a handler wants them.
        self.epochs = bool(self.epoch_begin or self.epoch_end)


def _interleave(hooks: list, first: list, second: list) -> list:
    """``[(hook, is_second)]``: the members of ``first`` and ``second`` (subsets of
    ``hooks``) in ``hooks``' order; one in both comes twice, ``first`` first."""
    in_first, in_second = {id(h) for h in first}, {id(h) for h in second}
    calls = []
    for hook in hooks:
        if id(hook) in in_first:
            calls.append((hook, False))
        if id(hook) in in_second:
            calls.append((hook, True))
    return calls


def _batch_end_kwargs(session, batch, step: int) -> dict:
    outputs = StepOutputs(session, step)
    labels = batch[1] if len(batch) > 1 else None
    loss = LazyValue(outputs, keys.LOSS) if keys.LOSS in session.output_names else None
    return {"batch": batch, "label": labels, "outputs": outputs, "loss": loss}


def loop_steps(
    session: Session,
    hooks: list[SessionRunHook],
    prefetcher: Prefetcher,
    *,
    num_steps: int | None = None,
    advances_global_step: bool = False,
    guard: SignalGuard | None = None,
) -> Iterator[int]:
    """Runs steps with TF's hook protocol, and the event handlers' protocol, until a stop,
    the end of input or ``num_steps``, yielding the number of steps run after each one.

    ``hooks``' ``begin`` and ``after_create_session`` (and handlers' ``train_begin``) have
    been called by the caller (the state is created between them); this calls
    ``before_run``/``after_run`` around each step, the handlers' epoch and batch events, and
    ``end`` (``train_end``) when the loop ends normally — see ``estimator.handlers.events``
    for the order.

    Args:
      session: the :class:`Session`; its runner runs the steps.
      hooks: hooks and handlers, in call order (``estimator.handlers.order``).
      prefetcher: the batches (with ``epoch_ended()``: see ``estimator.engine.epochs``).
      num_steps: at most this many steps (evaluation's ``steps``).
      advances_global_step: training: the global step grows by one per step, and the
        handlers' ``train_end`` is called.
      guard: a :class:`~estimator.engine.interrupt.SignalGuard`; when it has received a signal
        the loop stops after the step, without calling ``end`` (as an exception would).
    """
    count = 0
    run = session.runner.run

    # Hooks that keep SessionRunHook's empty before_run/after_run are not called for them
    # (nothing observable changes; it keeps the per-step host work small).
    def overrides(hook, name):
        method = getattr(type(hook), name, None)  # None: a mock's method lives on the instance
        return method is not getattr(SessionRunHook, name) or name in vars(hook)

    before = [(i, h) for i, h in enumerate(hooks) if overrides(h, "before_run")]
    after = [h for h in hooks if overrides(h, "after_run")]
    after_indexed = [(i, h) for i, h in enumerate(hooks) if h in after]
    handlers = _Handlers(hooks, advances_global_step)
    if handlers.batch_begin:
        before_calls = _interleave(hooks, [h for _, h in before], handlers.batch_begin)
        index_of = {id(h): i for i, h in before}
    if handlers.batch_end:
        after_calls = _interleave(hooks, after, handlers.batch_end)
        after_index = {id(h): i for i, h in after_indexed}
    epoch_open = False
    stopped = False
    prefetcher.fill()
    while num_steps is None or count < num_steps:
        if not epoch_open and (handlers.epochs or handlers.batch_begin):
            try:
                prefetcher.peek()  # an epoch (or a batch) begins only when a batch follows
            except StopIteration:
                break
            if handlers.epochs:
                for handler in handlers.epoch_begin:
                    handler.epoch_begin(session)
                epoch_open = True
        context = SessionRunContext(_NO_ARGS, session)
        requests = None
        if handlers.batch_begin:
            batch = prefetcher.peek()
            for hook, is_handler in before_calls:
                if is_handler:
                    hook.batch_begin(session, batch=batch)
                    continue
                args = _before_run(hook, context)
                if args is not None:
                    requests = requests if requests is not None else {}
                    requests[index_of[id(hook)]] = args.fetches
        else:
            for index, hook in before:
                args = _before_run(hook, context)
                if args is not None:
                    if requests is None:
                        requests = {}
                    requests[index] = args.fetches
        try:
            batch = prefetcher.pop()
        except StopIteration:
            break
        step_before = session.global_step
        # Fast path for the usual per-step request, the host-known global step alone
        # (StopAtStepHook): no device value, no traversal of nested fetches.
        only_step = requests is not None and all(
            f is keys.GLOBAL_STEP or f == keys.GLOBAL_STEP for f in requests.values()
        )
        run(batch, requests is not None and not only_step and needs_device(requests))
        prefetcher.fill()
        if advances_global_step:
            session.global_step = step_before + 1
        count += 1
        ended = handlers.epochs and prefetcher.epoch_ended()
        results = {}
        if requests:
            if only_step:
                value = np.int64(step_before)
                results = dict.fromkeys(requests, value)
            else:
                results = session.run(requests, step=step_before)
        if handlers.batch_end:
            kwargs = _batch_end_kwargs(session, batch, session.runner.steps_run + _queued(session))
            for hook, is_handler in after_calls:
                if is_handler:
                    stopped = bool(hook.batch_end(session, **kwargs)) or stopped
                    continue
                index = after_index[id(hook)]
                values = SessionRunValues(results[index]) if index in results else _NO_RESULTS
                hook.after_run(context, values)
        elif requests:
            for index, hook in after_indexed:
                values = SessionRunValues(results[index]) if index in results else _NO_RESULTS
                hook.after_run(context, values)
        else:
            for hook in after:
                hook.after_run(context, _NO_RESULTS)
        stopping = stopped or context.stop_requested
        last = stopping or (num_steps is not None and count >= num_steps)
        if epoch_open and (ended or last):
            for handler in handlers.epoch_end:  # an epoch a stop cut short ends here too
                stopped = bool(handler.epoch_end(session)) or stopped
            session.epoch += 1
            epoch_open = False
        yield count
        if stopped or context.stop_requested:
            break
        if guard is not None and guard.signum is not None:
            session.runner.flush()
            return
    session.runner.flush()
    train_end = {id(h) for h in handlers.train_end}
    for hook in hooks:
        hook.end(session)
        if id(hook) in train_end:
            hook.train_end(session)


def _queued(session) -> int:
    return len(getattr(session.runner, "_pending", ()))


def _before_run(hook, context):
    args = hook.before_run(context)
    if args is None:
        return None
    if not isinstance(args, SessionRunArgs):
        raise TypeError(
            f"{type(hook).__name__}.before_run returned {args!r}; expected None or "
            "a SessionRunArgs. (A mock hook: MagicMock(wraps=SessionRunHook(), "
            "spec=SessionRunHook) returns None, as TF's own tests use it.)"
        )
    if args.feed_dict:
        raise ValueError(
            f"{type(hook).__name__}.before_run returned a feed_dict; feeding values "
            "into a step is not supported (there is no graph to feed)."
        )
    return args


def run_loop(
    session: Session, hooks: list[SessionRunHook], prefetcher: Prefetcher, **kwargs
) -> int:
    """:func:`loop_steps` to the end; returns the number of steps run."""
    count = 0
    for count in loop_steps(session, hooks, prefetcher, **kwargs):  # noqa: B007
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
