"""``StepCompiler``: one mode's step, compiled once per batch signature.

The programs are keyed on the batch's structure (its pytree and each leaf's shape and
dtype): a call with a known signature runs the compiled program; a new one is traced,
lowered and compiled (``jax.jit(step).trace(...).lower().compile()``), and the trace's
return value includes the :class:`~estimator.engine.steps.StepInfo` (hooks, ``train_op``,
output names). Three parts, each its own module:

* what a program is and how it is called: here (the step's arguments, stacked batches);
* the cache and its one lock discipline (claim, trace on the caller, compile off-thread,
  publish): ``estimator.engine.compile_queue``;
* how each program is compiled, for compile or run speed (:class:`RunPlan`, XLA options):
  ``estimator.engine.compile_policy``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import numpy as np

from estimator import distribute
from estimator.engine.compile_policy import (
    FAST_INIT_MAX,
    MANY,
    MANY_RUNS,
    ONCE,
    RunPlan,
    compile_options,
    largest_array,
)
from estimator.engine.compile_queue import CompileQueue
from estimator.engine.eval_results import finalize
from estimator.engine.init_run import abstract_init, init_state
from estimator.engine.programs import PROGRAMS, TRAIN_METRICS, bind
from estimator.engine.row_plan import planned
from estimator.engine.steps import (
    StepInfo,
    TrainState,
    batch_stats,
    run_model,
    summary_step,
    traced,
    train_batch,
)
from estimator.mode_keys import ModeKeys
from estimator.model.function import ModelFunction

__all__ = ["StepCompiler", "signature"]


def signature(batch) -> tuple:
    """``(treedef, ((shape, dtype), ...))`` of a batch: what a compiled step depends on."""
    leaves, treedef = jax.tree.flatten(batch)
    return treedef, tuple(
        (
            tuple(x.shape) if isinstance(x, jax.ShapeDtypeStruct) else np.shape(x),
            jax.dtypes.canonicalize_dtype(getattr(x, "dtype", None) or np.result_type(x)),
        )
        for x in leaves
    )


#: A fused call stacks its host batches when all its slots take at most this many bytes.
STACK_BYTES_MAX = 16 << 20


def _stack(batches: list, slots: int):
    """``batches`` (of one signature) as one batch with ``slots`` first on every leaf:
    ``[slots, ...]`` host arrays whose unused slots are zeros (never read), or
    ``jax.ShapeDtypeStruct`` leaves for an abstract batch."""
    leaves = [jax.tree.leaves(b) for b in batches]
    treedef = jax.tree.structure(batches[0])
    stacked = []
    for column in zip(*leaves, strict=True):
        first = column[0]
        if isinstance(first, jax.ShapeDtypeStruct):
            stacked.append(jax.ShapeDtypeStruct((slots, *first.shape), first.dtype))
            continue
        dtype = jax.dtypes.canonicalize_dtype(np.result_type(first))
        out = np.zeros((slots, *np.shape(first)), dtype)
        for i, value in enumerate(column):
            out[i] = value
        stacked.append(out)
    return treedef.unflatten(stacked)


def _bounds(first: int, count: int) -> np.ndarray:
    """A fused call's ``[first, stop)``: the slots of the steps it runs (int32 [2])."""
    return np.array((first, first + count), np.int32)


class StepCompiler:
    """Builds and compiles the step function of one mode (internal).

    With ``steps_per_call`` 1 (and for PREDICT) the program is the mode's single step. With
    more, it is the mode's fused form (``estimator.engine.programs.train_steps``): up to
    ``steps_per_call`` batches in one call, how many given at run time, so one program per
    batch signature serves every call, one step or many.

    Args:
      model: the :class:`~estimator.model.ModelFunction`.
      mode: a ``ModeKeys`` value (the step is ``estimator.engine.programs.PROGRAMS[mode]``).
      state_sharding: ``state_sharding(state) -> pytree of shardings`` (None on one
        device).
      steps_per_call: the most steps one call runs (``RunConfig.steps_per_execution``).
      host_batches: batches reach the program as host arrays (one CPU device: see
        ``estimator.engine.input_pipeline.placement``); a fused call then stacks small ones
        (:meth:`stacks`).
      program: the key of ``PROGRAMS`` to compile when it is not ``mode`` (``TRAIN_METRICS``:
        the train step that accumulates training metrics).
      fast_compile: a step program of small arrays run many times compiles for compile
        speed (``Estimator(fast_compile=...)``: ``compile_policy.compile_options`` is given
        its largest array).

    Attributes:
      info: the :class:`StepInfo` of the current run (see :meth:`prepare_run`).
      compile_count: programs compiled so far (one per batch signature).
      call_count: device calls made so far (each runs 1 to ``steps_per_call`` steps).
      steps_per_call: the most steps one call runs (1 for PREDICT).
    """

    def __init__(
        self,
        model: ModelFunction,
        mode: str,
        state_sharding=None,
        steps_per_call: int = 1,
        host_batches: bool = True,
        program: str | None = None,
        fast_compile: bool = False,
    ) -> None:
        self.model = model
        self.fast_compile = fast_compile
        self.mode = mode
        self.state_sharding = state_sharding
        self.program = PROGRAMS[program or mode]
        # The function an accumulator's structure comes from, and its place in the result.
        self._accumulated = {ModeKeys.EVAL: (batch_stats, 0), TRAIN_METRICS: (train_batch, 3)}.get(
            program or mode
        )
        self.steps_per_call = max(1, int(steps_per_call)) if self.program.steps else 1
        self.info: StepInfo | None = None
        self.call_count = 0
        self._step = bind(self.program.step, model)
        self.host_batches = host_batches
        self._jitted: dict = {}
        self._renew()
        # The init run is traced once per signature (steps.traced): abstract_state reads
        # its result's shapes (and the sparse plan); the init program replays it.
        self._init = jax.jit(functools.partial(init_state, model, mode))
        self._summaries = jax.jit(functools.partial(summary_step, model, mode))
        # ("step" | "init" | "finalize" | "summaries", signature) -> program
        self._queue = CompileQueue()
        self._fresh: set = set()  # signatures whose program's trace ran model_fn this call
        self._abstract_acc = None
        self._finalize = jax.jit(finalize)

    def _renew(self) -> None:
        """New ``jax.jit`` wrappers of the step (``{stacked: jitted}``): a trace made with a
        sparse plan that did not hold is not reused (``row_plan.planned``)."""
        donate = self.program.donate
        if self.steps_per_call == 1:
            self._jitted = {False: jax.jit(self._step, donate_argnums=donate)}
        else:
            steps = bind(self.program.steps, self.model)
            self._jitted = {
                stacked: jax.jit(functools.partial(steps, stacked=stacked), donate_argnums=donate)
                for stacked in (False, True)
            }

    @property
    def compile_count(self) -> int:
        """Step programs compiled so far (one per batch signature and compile policy)."""
        return self._queue.compiled["step"]

    # ----- state ------------------------------------------------------------------------
    def abstract_state(self, features, labels) -> TrainState:
        """The state's structure, shapes and dtypes (``model_fn`` traced in init mode,
        which in TRAIN mode also plans the sparse updates: ``init_run.abstract_init``;
        the initial-state program replays that trace)."""
        return abstract_init(self.model, self.mode, features, labels, self.model.key_data)

    def init_state(self, features, labels) -> TrainState:
        """Freshly initialised variables (and optimizer state in TRAIN mode), placed as
        every state is (:meth:`place`).

        The program runs once, so a small state's is compiled for compile speed rather
        than run speed (XLA's backend optimization level 0 and its older loop emitters:
        half the compile time of random initializers, see ``compile_options``); a large
        state's (over ``FAST_INIT_MAX`` values) as usual, where filling the tables is what
        takes the time. :meth:`precompile_init` may have started its compile."""
        args = (features, labels, self.model.key_data)
        program = self._init_program(args, background=False)
        return self.place(program.executable(*args))

    def precompile_init(self, features, labels) -> None:
        """Traces the initial-state program for this batch signature now (in the calling
        thread) and compiles it in a background thread, beside the step's program; nothing
        when it exists or is compiling. A failure raises in :meth:`init_state`."""
        self._init_program((features, labels, self.model.key_data), background=True)

    def _init_program(self, args: tuple, *, background: bool):
        def lower():
            traced = self._init.trace(*args)
            size = sum(math.prod(x.shape) for x in jax.tree.leaves(traced.out_info))
            return traced.lower(), None, compile_options(ONCE if size <= FAST_INIT_MAX else MANY)

        return self._queue.program(("init", signature(args)), MANY, lower, background=background)

    def place(self, state: TrainState) -> TrainState:
        """``state`` on its devices: sharded over the mesh (``state_sharding``), else on
        the first local device. Fresh, restored and warm-started states are placed alike, so
        they give the compiled programs the same arguments (one program, one cache entry)."""
        if self.state_sharding is not None:
            return distribute.place(state, self.state_sharding(state))
        return jax.device_put(state, jax.sharding.SingleDeviceSharding(jax.local_devices()[0]))

    def empty_accumulator(self, state, features, labels):
        """Zero metrics/loss accumulator, as host arrays (metric statistics are sums): of
        evaluation (EVAL), or of training metrics (``TRAIN_METRICS``)."""
        if self._abstract_acc is None:
            # The trace the programs replay (estimator.engine.steps.traced).
            function, index = self._accumulated
            trace = planned(
                self.model,
                lambda: traced(self.model, function, state, features, labels),
                self._renew,
            )
            self._abstract_acc = trace[1][index]
        return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), self._abstract_acc)

    def finalizer(self, acc) -> Callable:
        """``finalize`` (``estimator.engine.eval_results``) for accumulators like ``acc``:
        traced now, compiled in a background thread while the evaluation runs (one device;
        on a mesh it compiles when called)."""
        if self.state_sharding is not None:
            return self._finalize
        key = ("finalize", signature(acc))

        def lower():
            return self._finalize.trace(acc).lower(), None, compile_options(ONCE)

        self._queue.program(key, MANY, lower, background=True)
        return lambda value: self._queue.program(key, MANY, lower).executable(value)

    # ----- compiling --------------------------------------------------------------------
    def _arguments(self, leading: tuple, batches: list, stacked: bool, rows=None) -> tuple:
        """The program's arguments for ``batches`` (1 to ``steps_per_call`` of them), in
        the stacked form when ``stacked``: the block ``rows`` names (see :meth:`multi`)
        when it has a batch per slot, else the batches stacked."""
        if self.steps_per_call == 1:
            (batch,) = batches
            return (*leading, *batch)
        count = len(batches)
        if stacked:
            if rows is not None and rows[0].count == self.steps_per_call:
                block, first = rows
                return (*leading, block.stacked(), _bounds(first, count))
            return (*leading, _stack(batches, self.steps_per_call), _bounds(0, count))
        if count < self.steps_per_call:
            # Unused slots repeat the last batch, placed once: nothing more is transferred
            # (a batch placed already, e.g. over a multi-process mesh, is used as it is).
            filler = batches[-1]
            if not any(
                isinstance(x, (jax.ShapeDtypeStruct, jax.Array)) for x in jax.tree.leaves(filler)
            ):
                filler = jax.device_put(filler)
            batches = [*batches, *[filler] * (self.steps_per_call - count)]
        return (*leading, tuple(batches), _bounds(0, count))

    def stacks(self, batch) -> bool:
        """Whether a fused call stacks batches like ``batch`` (see
        ``estimator.engine.programs._loop``): host batches of at most ``STACK_BYTES_MAX``
        for all the call's slots. Larger ones would cost that memory again, for a saving
        (~1.5 µs a call argument) that their steps' own time dwarfs."""
        if self.steps_per_call == 1 or not self.host_batches:
            return False
        size = sum(
            math.prod(np.shape(x))
            * np.dtype(getattr(x, "dtype", None) or np.result_type(x)).itemsize
            for x in jax.tree.leaves(batch)
        )
        return size * self.steps_per_call <= STACK_BYTES_MAX

    def _step_program(
        self, leading: tuple, batch, plan: RunPlan, *, background: bool, key: tuple | None = None
    ):
        """The compiled program for ``batch``'s signature (``key`` when the caller has it),
        as ``plan`` needs it (see ``estimator.engine.compile_queue``): its ``meta`` is
        ``(StepInfo, stacked)``."""
        key = signature(batch) if key is None else key
        runs = plan.runs(key)
        lower = self._lower_step(leading, batch, key, runs)
        return self._queue.program(("step", key), runs, lower, background=background)

    def _lower_step(self, leading: tuple, batch, key: tuple, runs: int):
        """The ``lower()`` of the step program for ``batch``'s signature ``key``."""

        def lower():
            stacked = self.stacks(batch)
            arguments = self._arguments(leading, [batch], stacked)
            runs_before = self.model.trace_count
            traced = planned(
                self.model, lambda: self._jitted[stacked].trace(*arguments), self._renew
            )
            if self.model.trace_count > runs_before:  # this call's model_fn made its hooks
                self._fresh.add(key)
            largest = largest_array(traced.jaxpr) if self.fast_compile else None
            options = compile_options(runs, largest)
            return traced.lower(), (traced.out_info[-1], stacked), options

        return lower

    def precompile(self, leading: tuple, batch, plan: RunPlan) -> None:
        """Prepares the program for ``batch``'s signature, as ``plan`` needs it: traces and
        lowers it now (in the calling thread: ``model_fn`` is never traced in two threads
        at once) and compiles it in a background thread (XLA compiles without the GIL, on
        another core), so that a call reaching it finds it ready or waits for it.
        ``leading`` and ``batch`` may be ``jax.ShapeDtypeStruct`` trees; a failure raises
        in the call that needs the program. Nothing happens when the program exists or is
        being compiled (see ``compile_options`` for how ``plan`` decides the options)."""
        self._step_program(leading, batch, plan, background=True)

    def prepare_run(self, *args, plan: RunPlan = MANY_RUNS) -> StepInfo:
        """Readies a ``train``/``evaluate``/``predict`` call: traces the program for
        ``args`` (the leading arguments and the first batch) when its signature is new
        (as ``plan`` needs it) and returns (and keeps in :attr:`info`) the hooks
        ``model_fn`` gives this call, without waiting for the program's compile: the
        call's set-up (hooks' ``begin``, the initial state, the first checkpoint) runs
        while XLA compiles on another core, and the first step waits for it (a compile's
        failure raises there).

        TF calls ``model_fn`` on every call and runs the hooks it returns. A new signature's
        trace gives them. A known signature whose ``model_fn`` returned hooks is traced
        again, abstractly (``jax.eval_shape``: no compile), so hooks it creates are new
        objects and hooks created outside it are the caller's very objects; one that
        returned none is not traced again.
        """
        leading, batch = args[: self.program.leading], args[self.program.leading :]
        key = signature(batch)
        runs = plan.runs(key)
        lower = self._lower_step(leading, batch, key, runs)
        info = self._queue.meta(("step", key), runs, lower)[0]
        # Whether model_fn ran in this call's trace of the program (in precompile or just
        # now), not whether the program was compiled by now: its background compile may
        # have finished since this call traced it.
        fresh = key in self._fresh
        self._fresh.clear()
        if not fresh and (info.hooks or info.chief_hooks):
            # model_fn runs again (forward, abstractly) for this call's hooks.
            state, features = args[0], batch[0]
            labels = batch[1] if len(batch) > 1 else None
            fresh = jax.eval_shape(
                functools.partial(run_model, self.model, self.mode), state, features, labels
            )
            info = info.replace(hooks=fresh.hooks, chief_hooks=fresh.chief_hooks)
        if info.apart:  # the first step's hooks fetch them: compiled beside the step
            self._summary_program(leading[0], batch, background=True)
        self.info = info
        return info

    def summaries(self, state: TrainState, batch) -> dict:
        """The summaries of the step on ``batch`` from ``state`` (``StepInfo.apart``:
        ``estimator.engine.steps.summary_step``), as device arrays; run before that step,
        which donates ``state``."""
        return self._summary_program(state, batch, background=False).executable(state, *batch)

    def _summary_program(self, state, batch, *, background: bool):
        """The compiled :func:`summary_step` for ``batch``'s signature. It runs once every
        ``save_summary_steps``, and the first step waits for it: compiled as a program run
        ``ONCE`` (for compile speed, see ``compile_options``)."""

        def lower():
            return self._summaries.trace(state, *batch).lower(), None, compile_options(ONCE)

        key = ("summaries", signature(batch))
        return self._queue.program(key, ONCE, lower, background=background)

    def __call__(self, *args, plan: RunPlan = MANY_RUNS):
        """Runs one step, compiling for a new batch signature (as ``plan`` needs it);
        returns the step's result (see ``estimator.engine.steps``)."""
        leading, batch = args[: self.program.leading], args[self.program.leading :]
        return self.multi(*leading, [batch], plan=plan)

    def multi(self, *args, plan: RunPlan = MANY_RUNS, rows=None):
        """Runs ``len(batches)`` steps (of one signature, at most ``steps_per_call``) in one
        call; ``args`` are the step's leading arguments (state, and the accumulator in EVAL)
        and the batches; ``plan`` says how a program compiled now is compiled; ``rows``:
        ``(RowBlock, i)`` when the batches are batches ``i, i + 1, ...`` of that block
        (``estimator.engine.row_blocks``), else None."""
        *leading, batches = args
        batches = list(batches)
        if not 1 <= len(batches) <= self.steps_per_call:
            raise ValueError(
                f"A call runs 1 to {self.steps_per_call} steps (steps_per_execution); got "
                f"{len(batches)} batches."
            )
        program = self._step_program(tuple(leading), batches[0], plan, background=False)
        self.call_count += 1
        # The argument form was decided once, when the program was compiled.
        stacked = program.meta[1]
        return program.executable(*self._arguments(tuple(leading), batches, stacked, rows))

    def compiled_signatures(self) -> dict[tuple, int]:
        """``{batch signature: runs}`` of the compiled step programs (one program each,
        compiled for ``compile_policy.ONCE``, ``FEW`` or ``MANY`` uses)."""
        return {key[1]: runs for key, runs in self._queue.runs().items() if key[0] == "step"}

    def compiling(self) -> int:
        """How many programs of this mode are being compiled now (any kind)."""
        return self._queue.in_flight()
