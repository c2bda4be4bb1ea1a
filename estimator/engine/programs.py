"""The fused multi-step programs, and which functions run each mode (:data:`PROGRAMS`).

A call of ``steps_per_execution`` steps runs the mode's step of
``estimator.engine.steps`` in one ``lax.fori_loop`` (:func:`train_steps`,
:func:`eval_steps`, :func:`train_metrics_steps`): one compiled program per batch signature
serves calls of 1 to that many steps. :data:`PROGRAMS` says, per mode, which functions run
it and which argument is donated: the compiler has no per-mode code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from estimator.engine import table_groups
from estimator.engine.steps import (
    TrainState,
    eval_step,
    predict_step,
    replay,
    train_metrics_step,
    train_step,
)
from estimator.mode_keys import ModeKeys
from estimator.model.function import ModelFunction

__all__ = [
    "PROGRAMS",
    "TRAIN_METRICS",
    "Program",
    "bind",
    "eval_steps",
    "train_metrics_steps",
    "train_steps",
]


def _loop(step: Callable, fixed, carry, batches, bounds, stacked: bool):
    """Runs ``step(fixed, carry, batch) -> (carry, outputs, info)`` on the batches in the
    slots ``bounds[0] .. bounds[1] - 1`` (int32 [2], traced: at least one slot) in one
    ``lax.fori_loop`` (the step is compiled once, whatever the bounds); returns the last
    step's ``(carry, outputs, info)``. The step is traced once (``model_fn`` runs once),
    outside the loop: its result's structure gives the loop's outputs (carried from zeros of
    their shapes), and the loop's body replays its jaxpr.

    ``batches`` is either

    * ``stacked``: one batch whose every leaf has the slots first (``[slots, ...]``), built
      on the host (``StepCompiler``), or an in-memory input's block of batches itself
      (``estimator.engine.row_blocks``, a call starting at its batch ``bounds[0]``): a
      step takes slot ``i`` of each leaf. A call passes a few arrays, not a few per slot
      (each argument of a call costs ~1.5 µs of dispatch), and the program has no
      ``slots``-way branch to compile.
    * else a tuple of batches (placed on devices already, where stacking would be a device
      copy), the first slot first: a step picks one with ``lax.switch``, so a call running
      fewer steps than it has slots (the others repeat the last batch) moves only the
      batches it runs.
    """
    if stacked:
        first = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), batches)

        def take(i):
            return jax.tree.map(lambda x: jax.lax.dynamic_index_in_dim(x, i, 0, False), batches)

        def pick(i):
            # In a conditional (always true) the slices become buffers of their own, as
            # lax.switch's are. Unconditional, XLA fuses the slicing into every consumer
            # of the batch, which made the census linear model's step several times slower.
            return jax.lax.cond(
                i >= 0,
                take,
                lambda i: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), first),
                i,
            )
    else:
        first = batches[0]
        branches = [functools.partial(lambda b: b, b) for b in batches]

        def pick(i):
            return jax.lax.switch(i, branches)

    trace = jax.make_jaxpr(step, return_shape=True)(fixed, carry, first)
    _, output_shapes, info = trace[1]
    # The train state is carried with the tables the step updates as one array joined
    # (estimator.engine.table_groups): the step's join of the tables is then a
    # concatenation of adjacent slices of the carried array, and the loop's join of its
    # result the same of its split, which XLA folds away: the join and split run once a
    # call, not once a step.
    join = functools.partial(_states, table_groups.join_state, info.groups)
    split = functools.partial(_states, table_groups.split_state, info.groups)

    def body(i, value):
        new_carry, outputs, _ = replay(trace, fixed, split(value[0]), pick(i))
        return join(new_carry), outputs

    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), output_shapes)
    carry, outputs = jax.lax.fori_loop(bounds[0], bounds[1], body, (join(carry), zeros))
    return split(carry), outputs, info


def _states(convert: Callable, groups: tuple, tree):
    """``tree`` with ``convert(state, groups)`` applied to each ``TrainState`` in it."""
    if not groups:
        return tree
    return jax.tree.map(
        lambda x: convert(x, groups) if isinstance(x, TrainState) else x,
        tree,
        is_leaf=lambda x: isinstance(x, TrainState),
    )


def train_steps(model: ModelFunction, state: TrainState, batches, bounds, stacked: bool = False):
    """The batches in the slots ``bounds`` gives as train steps in one call (one compiled
    program per batch signature for any bounds; ``bounds`` and ``stacked``: see
    :func:`_loop`); returns the last step's ``(state', outputs, info)``."""
    return _loop(lambda _, s, b: train_step(model, s, *b), (), state, batches, bounds, stacked)


def eval_steps(
    model: ModelFunction, state: TrainState, acc, batches, bounds, stacked: bool = False
):
    """The batches in the slots ``bounds`` gives as evaluation steps in one call (as
    :func:`train_steps`)."""
    return _loop(lambda s, a, b: eval_step(model, s, a, *b), state, acc, batches, bounds, stacked)


def train_metrics_steps(
    model: ModelFunction, state: TrainState, acc, batches, bounds, stacked: bool = False
):
    """The batches in the slots ``bounds`` gives as :func:`train_metrics_step` steps in
    one call (as :func:`train_steps`): every step's metrics are merged, not only the last
    one's."""

    def step(_, carry, batch):
        new_state, new_acc, outputs, info = train_metrics_step(model, *carry, *batch)
        return (new_state, new_acc), outputs, info

    (state, acc), outputs, info = _loop(step, (), (state, acc), batches, bounds, stacked)
    return state, acc, outputs, info


class Program(NamedTuple):
    """How a mode runs: its step, its fused multi-step form, and the arguments before the
    batch (the first is donated in training: the step consumes the state)."""

    step: Callable
    steps: Callable | None
    leading: int
    donate: tuple


#: The key of :data:`PROGRAMS`' train step with training metrics (a TRAIN program).
TRAIN_METRICS = "train_metrics"

PROGRAMS: dict[str, Program] = {
    ModeKeys.TRAIN: Program(train_step, train_steps, leading=1, donate=(0,)),
    ModeKeys.EVAL: Program(eval_step, eval_steps, leading=2, donate=()),
    ModeKeys.PREDICT: Program(predict_step, None, leading=1, donate=()),
    # The accumulator is small and starts as host zeros: only the state is donated.
    TRAIN_METRICS: Program(train_metrics_step, train_metrics_steps, leading=2, donate=(0,)),
}


def bind(function: Callable, model: ModelFunction) -> Callable:
    """``function`` with ``model`` as its first argument (what ``jax.jit`` compiles)."""
    return functools.partial(function, model)
