"""``StepCompiler``: one mode's step, compiled once per batch signature.

The cache is keyed on the batch's structure (its pytree and each leaf's shape and dtype):
a call with a known signature runs the compiled program; a new one is traced, lowered and
compiled (``jax.jit(step).trace(...).lower().compile()``), and the trace's return value
includes the :class:`~estimator.engine.steps.StepInfo` (hooks, ``train_op``, output names).

A program is compiled for compile speed or for run speed, by how often the call that needs
it runs it (:class:`RunPlan`); a cached program compiled for compile speed is compiled
again when a call needs it for run speed (see ``compile_options``).
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
import threading
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from estimator import distribute
from estimator.engine.eval_results import finalize
from estimator.engine.steps import (
    PROGRAMS,
    TRAIN_METRICS,
    StepInfo,
    TrainState,
    batch_stats,
    bind,
    init_state,
    run_model,
    traced,
    train_batch,
)
from estimator.mode_keys import ModeKeys
from estimator.model.function import ModelFunction

__all__ = ["MANY_RUNS", "RunPlan", "StepCompiler", "compile_options", "signature"]


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
#: States up to this many values get an initial-state program compiled for compile speed.
FAST_INIT_MAX = 1 << 20
#: An evaluation or prediction over at most this many batches (known in advance, see
#: :class:`RunPlan`) compiles for compile speed.
FEW_BATCHES = 64
#: How a program is compiled, from compile speed to run speed (see ``compile_options``).
ONCE, FEW, MANY = 0, 1, 2


def compile_options(runs: int) -> dict | None:
    """XLA's compile options for a program that runs ``ONCE`` per call (an initial state,
    a shorter last batch, evaluation's finalize), ``FEW`` times (a short evaluation or
    prediction) or ``MANY`` times (training, a long evaluation; XLA's defaults).

    XLA's CPU backend emits its loop fusions with its MLIR fusion emitters by default; its
    older LLVM IR emitters compile in 55-65% of their time (measured, the MNIST-style
    compat program: train 0.90 -> 0.56 s, evaluate 0.21 -> 0.12 s, initial state 0.25 ->
    0.14 s) for code that runs slower (that train step: 1.29 -> 1.65 ms; a logistic
    evaluation step at batch 1024: half the speed): ``FEW`` and ``ONCE`` use them (on the
    CPU). ``ONCE`` adds backend optimization level 0 (a third less compile time).
    """
    options = {}
    if runs <= FEW and jax.default_backend() == "cpu":
        options["xla_cpu_use_fusion_emitters"] = False
    if runs == ONCE:
        options["xla_backend_optimization_level"] = 0
    return options or None


class RunPlan(NamedTuple):
    """How often one ``train``/``evaluate``/``predict`` call runs its programs.

    Attributes:
      few_runs: the call runs at most ``FEW_BATCHES`` steps (its input says so).
      once: the signature of the call's shorter last batch, run once, or None.
    """

    few_runs: bool = False
    once: tuple | None = None

    def runs(self, key: tuple) -> int:
        """``ONCE``, ``FEW`` or ``MANY``: how the program for signature ``key`` is needed."""
        if key == self.once:
            return ONCE
        return FEW if self.few_runs else MANY


#: The plan of a call that runs its programs many times (every program for run speed).
MANY_RUNS = RunPlan()


def _start(target: Callable[[], None], name: str) -> None:
    """Runs ``target`` (an XLA compile) in a background thread that the interpreter waits
    for at exit. A daemon thread would be torn down by the interpreter's shutdown when it
    returns from XLA into Python, unwinding through C++ frames: the process died by SIGABRT
    ("FATAL: exception not rethrown") or SIGSEGV whenever a call raised (a damaged
    checkpoint in ``evaluate()``) while one of its programs was still compiling."""
    threading.Thread(target=target, name=name, daemon=False).start()


def compile_in_background(lowered: jax.stages.Lowered, options=None) -> concurrent.futures.Future:
    """``lowered.compile(compiler_options=options)`` in a background thread (XLA compiles
    without the GIL, on another core); the future holds the executable or the error."""
    future: concurrent.futures.Future = concurrent.futures.Future()

    def run():
        try:
            future.set_result(lowered.compile(compiler_options=options))
        except BaseException as err:  # noqa: BLE001 - raised by the future's reader
            future.set_exception(err)

    _start(run, "compile")
    return future


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


class _Entry(NamedTuple):
    executable: jax.stages.Compiled
    info: StepInfo
    stacked: bool  # the program takes stacked batches (see StepCompiler.stacks)
    runs: int  # compiled for ONCE, FEW or MANY runs (see compile_options)


def _compile(lowered: jax.stages.Lowered, info: StepInfo, stacked: bool, runs: int) -> _Entry:
    """The entry of ``lowered`` compiled with ``compile_options(runs)``."""
    return _Entry(lowered.compile(compiler_options=compile_options(runs)), info, stacked, runs)


class StepCompiler:
    """Builds and compiles the step function of one mode (internal).

    With ``steps_per_call`` 1 (and for PREDICT) the program is the mode's single step. With
    more, it is the mode's fused form (``estimator.engine.steps.train_steps``): up to
    ``steps_per_call`` batches in one call, how many given at run time, so one program per
    batch signature serves every call, one step or many.

    Args:
      model: the :class:`~estimator.model.ModelFunction`.
      mode: a ``ModeKeys`` value (the step is ``estimator.engine.steps.PROGRAMS[mode]``).
      state_sharding: ``state_sharding(state) -> pytree of shardings`` (None on one
        device).
      steps_per_call: the most steps one call runs (``RunConfig.steps_per_execution``).
      host_batches: batches reach the program as host arrays (one CPU device: see
        ``estimator.inputs.placement``); a fused call then stacks small ones
        (:meth:`stacks`).
      program: the key of ``PROGRAMS`` to compile when it is not ``mode`` (``TRAIN_METRICS``:
        the train step that accumulates training metrics).

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
    ) -> None:
        self.model = model
        self.mode = mode
        self.state_sharding = state_sharding
        self.program = PROGRAMS[program or mode]
        # The function an accumulator's structure comes from, and its place in the result.
        self._accumulated = {ModeKeys.EVAL: (batch_stats, 0), TRAIN_METRICS: (train_batch, 3)}.get(
            program or mode
        )
        self.steps_per_call = max(1, int(steps_per_call)) if self.program.steps else 1
        self.info: StepInfo | None = None
        self.compile_count = 0
        self.call_count = 0
        self._step = bind(self.program.step, model)
        self.host_batches = host_batches
        donate = self.program.donate
        if self.steps_per_call == 1:
            self._jitted = {False: jax.jit(self._step, donate_argnums=donate)}
        else:
            steps = bind(self.program.steps, model)
            self._jitted = {
                stacked: jax.jit(functools.partial(steps, stacked=stacked), donate_argnums=donate)
                for stacked in (False, True)
            }
        self._init = jax.jit(functools.partial(init_state, model, mode))
        self._compiled: dict = {}
        self._inits: dict = {}  # signature -> Future of the compiled init program
        self._pending: dict = {}  # signature -> Future of a compile in progress
        self._lock = threading.Lock()
        self._abstract_acc = None
        self._finalize = jax.jit(finalize)
        self._finalizers: dict = {}  # accumulator signature -> Future of compiled finalize

    # ----- state ------------------------------------------------------------------------
    def abstract_state(self, features, labels) -> TrainState:
        """The state's structure, shapes and dtypes (``model_fn`` traced in init mode; the
        initial-state program's compile reuses the trace, which jax caches)."""
        return jax.eval_shape(self._init, features, labels, self.model.key_data)

    def init_state(self, features, labels) -> TrainState:
        """Freshly initialised variables (and optimizer state in TRAIN mode), placed as
        every state is (:meth:`place`).

        The program runs once, so a small state's is compiled for compile speed rather
        than run speed (XLA's backend optimization level 0 and its older loop emitters:
        half the compile time of random initializers, see ``compile_options``); a large
        state's (over ``FAST_INIT_MAX`` values) as usual, where filling the tables is what
        takes the time. :meth:`precompile_init` may have started its compile."""
        args = (features, labels, self.model.key_data)
        with self._lock:
            future = self._inits.get(signature(args))
        if future is None:
            return self.place(self._compile_init(features, labels, background=False)(*args))
        return self.place(future.result()(*args))

    def precompile_init(self, features, labels) -> None:
        """Traces the initial-state program for this batch signature now (in the calling
        thread) and compiles it in a background thread, beside the step's program; nothing
        when it exists or is compiling. A failure raises in :meth:`init_state`."""
        self._compile_init(features, labels, background=True)

    def _compile_init(self, features, labels, *, background: bool):
        """The compiled initial-state program (None with ``background``: compiling)."""
        args = (features, labels, self.model.key_data)
        key = signature(args)
        with self._lock:
            if key in self._inits:
                return None if background else self._inits[key].result()
            future = self._inits[key] = concurrent.futures.Future()

        def fail(err):
            with self._lock:
                del self._inits[key]  # a later call tries again
            future.set_exception(err)

        try:
            traced = self._init.trace(*args)
            size = sum(math.prod(x.shape) for x in jax.tree.leaves(traced.out_info))
            lowered = traced.lower()
        except BaseException as err:
            fail(err)
            if background:
                return None
            raise

        def compile_init():
            options = compile_options(ONCE if size <= FAST_INIT_MAX else MANY)
            try:
                future.set_result(lowered.compile(compiler_options=options))
            except BaseException as err:  # noqa: BLE001 - raised by the caller or init_state
                fail(err)

        if background:
            _start(compile_init, "precompile_init")
            return None
        compile_init()
        return future.result()

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
            self._abstract_acc = traced(self.model, function, state, features, labels)[1][index]
        return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), self._abstract_acc)

    def finalizer(self, acc) -> Callable:
        """``finalize`` (``estimator.engine.eval_results``) for accumulators like ``acc``:
        traced now, compiled in a background thread while the evaluation runs (one device;
        on a mesh it compiles when called)."""
        if self.state_sharding is not None:
            return self._finalize
        key = signature(acc)
        with self._lock:
            future = self._finalizers.get(key)
        if future is None:
            future = compile_in_background(self._finalize.trace(acc).lower(), compile_options(ONCE))
            with self._lock:
                self._finalizers[key] = future
        return lambda value: future.result()(value)

    # ----- compiling --------------------------------------------------------------------
    def _arguments(self, leading: tuple, batches: list, stacked: bool) -> tuple:
        """The program's arguments for ``batches`` (1 to ``steps_per_call`` of them), in
        the stacked form when ``stacked``."""
        if self.steps_per_call == 1:
            (batch,) = batches
            return (*leading, *batch)
        count = np.int32(len(batches))
        if stacked:
            return (*leading, _stack(batches, self.steps_per_call), count)
        if count < self.steps_per_call:
            # Unused slots repeat the last batch, placed once: nothing more is transferred.
            filler = batches[-1]
            if not any(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(filler)):
                filler = jax.device_put(filler)
            batches = [*batches, *[filler] * (self.steps_per_call - count)]
        return (*leading, tuple(batches), count)

    def _claim(self, key, runs: int) -> tuple[_Entry | None, concurrent.futures.Future, bool]:
        """``(entry, future, owner)``: the compiled entry of ``key`` if it was compiled for
        at least ``runs`` (see ``compile_options``), else the future of such a compile and
        whether the caller is to do it (none is in progress)."""
        with self._lock:
            entry = self._compiled.get(key)
            if entry is not None and entry.runs >= runs:
                return entry, None, False
            future = next(
                (
                    self._pending[(key, r)]
                    for r in range(MANY, runs - 1, -1)
                    if (key, r) in self._pending
                ),
                None,
            )
            if future is not None:
                return None, future, False
            future = self._pending[(key, runs)] = concurrent.futures.Future()
        return None, future, True

    def _finish(self, key, runs: int, future: concurrent.futures.Future, compile_entry) -> _Entry:
        """Runs ``compile_entry()`` for the claimed ``(key, runs)``; its result or error goes
        to ``future`` (and to the calls waiting on it). The entry replaces one compiled for
        fewer runs."""
        try:
            entry = compile_entry()
        except BaseException as err:
            with self._lock:
                del self._pending[(key, runs)]
            future.set_exception(err)
            raise
        with self._lock:
            known = self._compiled.get(key)
            if known is None or known.runs < runs:
                self._compiled[key] = entry
            del self._pending[(key, runs)]
            self.compile_count += 1
        future.set_result(entry)
        return entry

    def stacks(self, batch) -> bool:
        """Whether a fused call stacks batches like ``batch`` (see
        ``estimator.engine.steps._loop``): host batches of at most ``STACK_BYTES_MAX``
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

    def _lowered(self, leading: tuple, batch) -> tuple:
        stacked = self.stacks(batch)
        traced = self._jitted[stacked].trace(*self._arguments(leading, [batch], stacked))
        return traced.lower(), traced.out_info[-1], stacked

    def _entry(self, leading: tuple, batch, plan: RunPlan) -> _Entry:
        """The compiled program for ``batch``'s signature, as ``plan`` needs it: from the
        cache, from a compile in progress (:meth:`precompile`), or compiled now."""
        key = signature(batch)
        runs = plan.runs(key)
        entry, future, owner = self._claim(key, runs)
        if entry is not None:
            return entry
        if not owner:
            return future.result()  # compiled in the background: wait for it (or its error)

        def compile_entry():
            return _compile(*self._lowered(leading, batch), runs)

        return self._finish(key, runs, future, compile_entry)

    def precompile(self, leading: tuple, batch, plan: RunPlan) -> None:
        """Prepares the program for ``batch``'s signature, as ``plan`` needs it: traces and
        lowers it now (in the calling thread: ``model_fn`` is never traced in two threads
        at once) and compiles it in a background thread (XLA compiles without the GIL, on
        another core), so that a call reaching it finds it ready or waits for it.
        ``leading`` and ``batch`` may be ``jax.ShapeDtypeStruct`` trees; a failure raises
        in the call that needs the program. Nothing happens when the program exists or is
        being compiled (see ``compile_options`` for how ``plan`` decides the options)."""
        key = signature(batch)
        runs = plan.runs(key)
        _, future, owner = self._claim(key, runs)
        if not owner:
            return
        try:
            lowered = self._lowered(leading, batch)
        except BaseException as err:  # noqa: BLE001 - raised by the call that needs it
            with self._lock:
                del self._pending[(key, runs)]
            future.set_exception(err)
            return

        def compile_quietly():
            try:
                self._finish(key, runs, future, lambda: _compile(*lowered, runs))
            except BaseException:  # noqa: BLE001 - raised by the call that needs it
                pass

        _start(compile_quietly, "precompile")

    def prepare_run(self, *args, plan: RunPlan = MANY_RUNS) -> StepInfo:
        """Readies a ``train``/``evaluate``/``predict`` call: compiles the program for
        ``args`` (the leading arguments and the first batch) when its signature is new
        (as ``plan`` needs it), and returns (and keeps in :attr:`info`) the hooks
        ``model_fn`` gives this call.

        TF calls ``model_fn`` on every call and runs the hooks it returns. A new signature's
        trace gives them. A known signature whose ``model_fn`` returned hooks is traced
        again, abstractly (``jax.eval_shape``: no compile), so hooks it creates are new
        objects and hooks created outside it are the caller's very objects; one that
        returned none is not traced again.
        """
        leading, batch = args[: self.program.leading], args[self.program.leading :]
        known = signature(batch) in self._compiled
        info = self._entry(leading, batch, plan).info
        if known and (info.hooks or info.chief_hooks):
            # model_fn runs again (forward, abstractly) for this call's hooks.
            state, features = args[0], batch[0]
            labels = batch[1] if len(batch) > 1 else None
            fresh = jax.eval_shape(
                functools.partial(run_model, self.model, self.mode), state, features, labels
            )
            info = StepInfo(
                fresh.hooks, fresh.chief_hooks, info.output_names, info.train_op, info.row_tables
            )
        self.info = info
        return info

    def __call__(self, *args, plan: RunPlan = MANY_RUNS):
        """Runs one step, compiling for a new batch signature (as ``plan`` needs it);
        returns the step's result (see ``estimator.engine.steps``)."""
        leading, batch = args[: self.program.leading], args[self.program.leading :]
        return self.multi(*leading, [batch], plan=plan)

    def multi(self, *args, plan: RunPlan = MANY_RUNS):
        """Runs ``len(batches)`` steps (of one signature, at most ``steps_per_call``) in one
        call; ``args`` are the step's leading arguments (state, and the accumulator in EVAL)
        and the batches; ``plan`` says how a program compiled now is compiled."""
        *leading, batches = args
        batches = list(batches)
        if not 1 <= len(batches) <= self.steps_per_call:
            raise ValueError(
                f"A call runs 1 to {self.steps_per_call} steps (steps_per_execution); got "
                f"{len(batches)} batches."
            )
        entry = self._entry(tuple(leading), batches[0], plan)
        self.call_count += 1
        # The argument form was decided once, when the program was compiled.
        return entry.executable(*self._arguments(tuple(leading), batches, entry.stacked))

    def compiled_signatures(self) -> list[tuple]:
        """The batch signatures of the compiled programs (one program each)."""
        return list(self._compiled)
