"""The session loop: TF's ``MonitoredSession`` around the compiled steps.

* :class:`Session` — what hooks see (global step, state, the last step's outputs) and the
  one place values move from the device to the host (:meth:`Session.run`).
* :class:`TrainRunner`, :class:`EvalRunner`, :class:`PredictRunner` — run the steps of a
  mode; train and evaluation steps whose values no hook fetches are queued and run
  ``steps_per_execution`` at a time.
* :func:`loop_steps` / :func:`run_loop` — the hook calls in TF's order around each step
  (see ``estimator.hooks.session_run_hook``).
"""

from __future__ import annotations

from collections.abc import Iterator

import jax
import numpy as np

from estimator.engine.compile_policy import MANY_RUNS, RunPlan
from estimator.engine.compiler import StepCompiler
from estimator.engine.interrupt import SignalGuard
from estimator.engine.steps import TrainState
from estimator.hooks import basic as hooks_lib
from estimator.hooks.session_run_hook import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from estimator.inputs import Prefetcher
from estimator.mode_keys import ModeKeys
from estimator.model.strings import to_host


class Session:
    """What hooks see of the running loop (TF's ``session``).

    Attributes:
      mode: the ``ModeKeys`` value of the loop.
      model_dir: the Estimator's model directory.
      global_step: the global step (a host ``int``; exact without a device sync).
      state: the current :class:`TrainState` (device arrays; reading it runs any
        deferred steps first). Valid until the next step, which donates its input state:
        a hook that keeps values copies them (``jax.device_get``), as TF hooks receive
        copies from ``session.run``.
      outputs: the last step's named outputs (device arrays; likewise).
      output_names: the names every step outputs (what hooks may fetch besides
        ``global_step``).
      non_finite_step: training: the first global step whose loss was not finite, as
        last seen on the host, or -1. Every transfer :meth:`run` makes in training also
        brings the device's record, so this is current whenever anything was fetched,
        at no extra sync.
    """

    def __init__(
        self, mode: str, model_dir: str, runner, global_step: int, output_names: tuple = ()
    ) -> None:
        self.mode = mode
        self.model_dir = model_dir
        self.runner = runner
        self.global_step = global_step
        self.output_names = output_names
        self.non_finite_step = -1

    @property
    def state(self) -> TrainState:
        self.runner.flush()
        return self.runner.state

    @property
    def outputs(self) -> dict:
        self.runner.flush()
        return self.runner.outputs

    def _lookup(self, name: str, step: int | None):
        if name == hooks_lib.GLOBAL_STEP:
            return np.int64(self.global_step if step is None else step)
        if name == hooks_lib.NON_FINITE_STEP:
            return self.state.non_finite_step
        outputs = self.outputs
        if name in outputs:
            return outputs[name]
        known = ", ".join(sorted([hooks_lib.GLOBAL_STEP, *map(str, outputs)]))
        raise KeyError(
            f"A hook asked for {name!r}, but no value of that name exists in this step. Known "
            f"names: {known}. Name an array inside model_fn with "
            f"estimator.identity(x, name={name!r})."
        )

    def run(self, fetches, *, step: int | None = None):
        """Values for ``fetches`` (a name or a nested list/tuple/dict of names) from the
        last step, as NumPy (one device -> host transfer for all of them)."""
        names = {_strip(n): None for n in _fetch_names(fetches)}
        values = {name: self._lookup(name, step) for name in names}
        on_device = {k: v for k, v in values.items() if not isinstance(v, np.generic)}
        if on_device:  # one transfer for everything requested in this step
            training = self.mode == ModeKeys.TRAIN
            if training:  # the NaN record rides along: a scalar in the same transfer
                on_device.setdefault(hooks_lib.NON_FINITE_STEP, self.state.non_finite_step)
            host = to_host(on_device)
            if training:
                self.non_finite_step = int(host[hooks_lib.NON_FINITE_STEP])
            values.update(host)

        def build(f):
            if isinstance(f, str):
                return values[_strip(f)]
            if isinstance(f, dict):
                return type(f)((k, build(v)) for k, v in f.items())
            if isinstance(f, (list, tuple)):
                return type(f)(build(v) for v in f)
            return None

        return build(fetches)

    def checkpoint_state(self, step: int) -> tuple[int, TrainState]:
        """``(global_step, state)`` to save as the checkpoint for ``step``.

        After a non-finite loss at global step k, the train step changes nothing (see
        ``StepCompiler``), so the state is the one of step k: it is saved as step k, never
        under a later step's number. Reads the device's record (one scalar; a save
        transfers the state anyway).
        """
        if self.mode == ModeKeys.TRAIN:
            bad = int(self.run(hooks_lib.NON_FINITE_STEP))
            if 0 <= bad < step:
                return bad, self.state
        return step, self.state


def _strip(name: str) -> str:
    return name[:-2] if name.endswith(":0") else name


def _fetch_names(fetches) -> Iterator[str]:
    if isinstance(fetches, str):
        yield fetches
    elif isinstance(fetches, dict):
        for value in fetches.values():
            yield from _fetch_names(value)
    elif isinstance(fetches, (list, tuple)):
        for value in fetches:
            yield from _fetch_names(value)
    elif fetches is not None:
        raise TypeError(
            f"Fetches must be names (str) or lists/tuples/dicts of names; got {fetches!r}."
        )


def _needs_device(requests: dict) -> bool:
    return any(_strip(n) != hooks_lib.GLOBAL_STEP for n in _fetch_names(requests))


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
        self._pending: list = []
        self._shapes = None

    def run(self, batch, sync: bool) -> None:
        if self.k == 1:
            self._many([batch])
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


class TrainRunner(_QueuedRunner):
    """Train steps; ``state`` is the :class:`TrainState` after the last step run."""

    def __init__(self, compiler: StepCompiler, state: TrainState, plan: RunPlan = MANY_RUNS):
        super().__init__(compiler)
        self.state = state
        self.plan = plan

    def _many(self, batches: list) -> None:
        self.state, self.outputs, _ = self.compiler.multi(self.state, batches, plan=self.plan)


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

    def run(self, batch, sync: bool) -> None:
        predictions, self.outputs, _ = self.compiler(self.state, *batch, plan=self.plan)
        self.pending.append(predictions)

    def flush(self) -> None:
        pass


def loop_steps(
    session: Session,
    hooks: list[SessionRunHook],
    prefetcher: Prefetcher,
    *,
    num_steps: int | None = None,
    advances_global_step: bool = False,
    guard: SignalGuard | None = None,
) -> Iterator[int]:
    """Runs steps with TF's hook protocol until a stop, the end of input or ``num_steps``,
    yielding the number of steps run after each one.

    ``hooks``' ``begin`` and ``after_create_session`` have been called by the caller (the
    state is created between them); this calls ``before_run``/``after_run`` around each
    step and ``end`` when the loop ends normally.

    Args:
      session: the :class:`Session`; its runner runs the steps.
      hooks: in call order.
      prefetcher: the batches.
      num_steps: at most this many steps (evaluation's ``steps``).
      advances_global_step: training: the global step grows by one per step.
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
    prefetcher.fill()
    while num_steps is None or count < num_steps:
        context = SessionRunContext(_NO_ARGS, session)
        requests = None
        for index, hook in before:
            args = hook.before_run(context)
            if args is not None:
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
            f is hooks_lib.GLOBAL_STEP or f == hooks_lib.GLOBAL_STEP for f in requests.values()
        )
        run(batch, requests is not None and not only_step and _needs_device(requests))
        prefetcher.fill()
        if advances_global_step:
            session.global_step = step_before + 1
        count += 1
        if requests:
            if only_step:
                value = np.int64(step_before)
                results = dict.fromkeys(requests, value)
            else:
                results = session.run(requests, step=step_before)
            for index, hook in after_indexed:
                values = SessionRunValues(results[index]) if index in results else _NO_RESULTS
                hook.after_run(context, values)
        else:
            for hook in after:
                hook.after_run(context, _NO_RESULTS)
        yield count
        if context.stop_requested:
            break
        if guard is not None and guard.signum is not None:
            session.runner.flush()
            return
    session.runner.flush()
    for hook in hooks:
        hook.end(session)


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
