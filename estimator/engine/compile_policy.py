"""How each program is compiled: for compile speed or for run speed, by how often the call
that needs it runs it (the compile policy of ``estimator.engine.compiler``).

A call knows how often it will run its programs (:class:`RunPlan`): a training or a long
evaluation runs its step ``MANY`` times (XLA's defaults: run speed); a short evaluation or
prediction (its input known to end within ``FEW_BATCHES`` batches) ``FEW`` times; an initial
state, a shorter last batch or evaluation's finalize ``ONCE``. :func:`compile_options` turns
that into XLA options. A program compiled for fewer runs is compiled again when a call needs
it for more (``estimator.engine.compile_queue``).

With ``Estimator(fast_compile=True)`` (the canned estimators) what a program computes
decides too: a program whose every array is small (at most ``SMALL_ARRAY_MAX`` values: the
linear models' steps, whose tables and batches are a few thousand values) compiles for
compile speed however often it runs (:func:`largest_array`). XLA's fusion emitters
vectorise loops over larger arrays better than its older emitters; over small ones the
older emitters' code runs as fast, and compiles in less time
(``benchmarks/loop_emitters.py`` measures both sides of this line: an FTRL update of 1,024
to 65,536 values, a dense layer, and each census model's training). The two emitters may
group a fusion's multiply-adds differently, so the values can differ in the last bits:
without ``fast_compile`` a program run many times compiles as ``jax.jit`` compiles it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from jax.extend import core

from estimator.config import platform

__all__ = [
    "FAST_INIT_MAX",
    "FEW",
    "FEW_BATCHES",
    "MANY",
    "MANY_RUNS",
    "ONCE",
    "RunPlan",
    "SMALL_ARRAY_MAX",
    "compile_options",
    "largest_array",
]

#: States up to this many values get an initial-state program compiled for compile speed.
FAST_INIT_MAX = 1 << 20
#: An evaluation or prediction over at most this many batches (known in advance, see
#: :class:`RunPlan`) compiles for compile speed.
FEW_BATCHES = 64
#: How a program is compiled, from compile speed to run speed (see ``compile_options``).
ONCE, FEW, MANY = 0, 1, 2
#: Under ``fast_compile``, a program none of whose arrays holds more values than this
#: compiles with XLA's older loop emitters however often it runs (the module docstring).
SMALL_ARRAY_MAX = 4096


def largest_array(jaxpr: core.ClosedJaxpr) -> int:
    """The most values any array computed in ``jaxpr`` holds (its equations' results,
    those of the loops, conditionals and calls inside it too; its inputs not: a program
    reads them, its loops run over what it computes).

    Args:
      jaxpr: a traced program (``jax.make_jaxpr``'s result, a ``Traced``'s ``jaxpr``).

    Returns:
      The count of elements (int; 1 for a scalar, 0 for a program of no equations), of any
      dtype.
    """
    most = 0
    pending = [jaxpr.jaxpr]
    while pending:
        for eqn in pending.pop().eqns:
            for var in eqn.outvars:
                most = max(most, math.prod(getattr(var.aval, "shape", ())))
            pending.extend(
                sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub
                for sub in core.jaxprs_in_params(eqn.params)
            )
    return most


def compile_options(runs: int, largest: int | None = None) -> dict | None:
    """XLA's compile options for a program that runs ``ONCE`` per call (an initial state,
    a shorter last batch, evaluation's finalize), ``FEW`` times (a short evaluation or
    prediction) or ``MANY`` times (training, a long evaluation; XLA's defaults).

    XLA's CPU backend emits its loop fusions with its MLIR fusion emitters by default; its
    older LLVM IR emitters compile in 55-65% of their time (measured, the MNIST-style
    compat program: train 0.90 -> 0.56 s, evaluate 0.21 -> 0.12 s, initial state 0.25 ->
    0.14 s) for code that runs slower (that train step: 1.29 -> 1.65 ms; a logistic
    evaluation step at batch 1024: half the speed): ``FEW`` and ``ONCE`` use them. ``ONCE``
    adds backend optimization level 0 (a third less compile time). ``MANY`` uses them too for
    a program whose ``largest`` array (:func:`largest_array`; given under ``fast_compile``
    only, else None) holds at most ``SMALL_ARRAY_MAX`` values (the module docstring says
    why). Only on the CPU backend, unless ``JAX_ESTIMATOR_CPU_COMPILE_OPTIONS=0``
    (``estimator.config.platform``); elsewhere, and for ``MANY`` otherwise, XLA's defaults
    (None).
    """
    small = largest is not None and largest <= SMALL_ARRAY_MAX
    if (runs == MANY and not small) or not platform.cpu_path(platform.CPU_COMPILE_OPTIONS):
        return None  # XLA's defaults (and always off the CPU backend)
    options = {"xla_cpu_use_fusion_emitters": False}
    if runs == ONCE:
        options["xla_backend_optimization_level"] = 0
    return options


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
