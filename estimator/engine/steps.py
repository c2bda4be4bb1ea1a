"""The step functions: pure functions of the state and a batch, built on ``model_fn``.

This is the only place that calls ``jax.value_and_grad`` and ``optax.apply_updates``.
Each takes the :class:`~estimator.model.ModelFunction` first (bound with
``functools.partial`` before ``jax.jit``), and returns, beside its arrays, a
:class:`StepInfo`: what running ``model_fn`` revealed that is not an array (its hooks,
``train_op``, the names hooks can fetch). ``StepInfo`` is a pytree node without leaves, so
it comes back from ``jax.jit(...).trace(...).out_info`` and ``jax.eval_shape`` as an
ordinary return value and costs nothing on the device.

* TRAIN ``train_step(model, state, features, labels) -> (state', outputs, info)``: the
  loss's gradient, then ``train_op``; a non-finite loss changes nothing, then or later.
* EVAL ``eval_step(model, state, acc, features, labels) -> (acc', outputs, info)``:
  ``acc`` holds the merged metrics, the sum of batch losses and the number of batches.
* PREDICT ``predict_step(model, state, features) -> (predictions, outputs, info)``.

``outputs`` maps the names hooks can fetch (``"loss"``, ``identity`` names, summaries,
arrays held by hooks made inside ``model_fn``) to arrays. :data:`PROGRAMS` says, per mode,
which functions run it and which argument is donated: the compiler has no per-mode code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from estimator.hooks import basic as hooks_lib
from estimator.hooks.session_run_hook import SessionRunHook
from estimator.mode_keys import ModeKeys
from estimator.model.function import ModelFunction
from estimator.model.spec import EstimatorSpec

__all__ = [
    "PROGRAMS",
    "FetchName",
    "Program",
    "StepInfo",
    "TrainState",
    "batch_stats",
    "eval_step",
    "eval_steps",
    "init_state",
    "predict_step",
    "train_step",
    "train_steps",
]


class TrainState(NamedTuple):
    """The state of a model between steps.

    Attributes:
      trainable: ``{name: array}`` updated by ``train_op``.
      non_trainable: ``{name: array}`` updated by ``estimator.assign``.
      opt_state: ``train_op``'s state (None outside training).
      global_step: shape=(), dtype=int32: the number of train steps run.
      non_finite_step: shape=(), dtype=int32: the first global step whose loss was NaN or
        infinite (that step was skipped), or -1.
    """

    trainable: dict
    non_trainable: dict
    opt_state: Any
    global_step: jax.Array
    non_finite_step: jax.Array


@jax.tree_util.register_static
class StepInfo:
    """What a run of ``model_fn`` inside a step revealed besides arrays (static).

    Attributes:
      hooks: the mode's hooks from the ``EstimatorSpec`` (``training_hooks``,
        ``evaluation_hooks`` or ``prediction_hooks``), the very objects ``model_fn``
        returned (TF's identity semantics).
      chief_hooks: ``training_chief_hooks`` (TRAIN), else ``()``.
      output_names: the names of the step's ``outputs`` (what hooks may fetch besides
        ``global_step``).
      train_op: the ``optax.GradientTransformation`` (TRAIN), else None.
    """

    def __init__(self, hooks: tuple, chief_hooks: tuple, output_names: tuple, train_op) -> None:
        self.hooks = hooks
        self.chief_hooks = chief_hooks
        self.output_names = output_names
        self.train_op = train_op


class FetchName(str):
    """A name standing for an array that a hook created inside ``model_fn`` held."""


def _lift_hook_arrays(hooks: Iterable[SessionRunHook], outputs: dict) -> None:
    """Replaces traced arrays held by hooks made inside ``model_fn`` with the names of
    step outputs (added to ``outputs``), so the hooks can fetch them by name."""

    def lift(value, path):
        if isinstance(value, jax.core.Tracer):
            name = FetchName(path)
            outputs[name] = value
            return name
        if isinstance(value, dict):
            items = {k: lift(v, f"{path}/{k}") for k, v in value.items()}
            if any(items[k] is not value[k] for k in value):
                return type(value)(items)
        elif isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            items = [lift(v, f"{path}/{i}") for i, v in enumerate(value)]
            if any(new is not old for new, old in zip(items, value, strict=True)):
                return type(value)(items)
        return value  # unchanged: keep the very object (hooks may share it)

    for index, hook in enumerate(hooks):
        for attr, value in list(vars(hook).items()):
            new = lift(value, f"hook_{index}_{type(hook).__name__}/{attr}")
            if new is not value:
                setattr(hook, attr, new)


_SPEC_HOOKS: dict[str, Callable[[EstimatorSpec], tuple[tuple, tuple]]] = {
    ModeKeys.TRAIN: lambda spec: (spec.training_hooks, spec.training_chief_hooks),
    ModeKeys.EVAL: lambda spec: (spec.evaluation_hooks, ()),
    ModeKeys.PREDICT: lambda spec: (spec.prediction_hooks, ()),
}


def _run(model: ModelFunction, mode: str, state: TrainState, features, labels, trainable=None):
    """``model_fn`` on the state's variables: ``(spec, outputs, info)``."""
    variables = {
        "trainable": state.trainable if trainable is None else trainable,
        "non_trainable": state.non_trainable,
    }
    spec, frame = model.apply(mode, features, labels, variables, state.global_step)
    hooks, chief_hooks = _SPEC_HOOKS[mode](spec)
    outputs = {**frame.named, **frame.summaries}
    if spec.loss is not None:
        outputs[hooks_lib.LOSS] = spec.loss
    _lift_hook_arrays(tuple(hooks) + tuple(chief_hooks), outputs)
    info = StepInfo(tuple(hooks), tuple(chief_hooks), tuple(sorted(outputs)), spec.train_op)
    return spec, frame, outputs, info


def _check_trainable(trainable: dict) -> None:
    for name, value in trainable.items():
        if not jnp.issubdtype(value.dtype, jnp.inexact):
            raise ValueError(
                f"Variable {name} has dtype {value.dtype} and is trainable; only floating-point "
                "variables can be trained. Create it with get_variable(..., trainable=False)."
            )


def init_state(model: ModelFunction, mode: str, features, labels) -> TrainState:
    """Freshly initialised variables, and ``train_op``'s state in TRAIN mode.

    Raises:
      ValueError: a trainable variable that is not floating-point.
    """
    spec, frame = model.apply(mode, features, labels)
    _check_trainable(frame.trainable)
    opt_state = spec.train_op.init(frame.trainable) if mode == ModeKeys.TRAIN else None
    return TrainState(
        frame.trainable,
        frame.non_trainable,
        opt_state,
        jnp.zeros((), jnp.int32),
        jnp.full((), -1, jnp.int32),
    )


def train_step(model: ModelFunction, state: TrainState, features, labels):
    """One train step: ``(state', outputs, info)`` (see the module docstring)."""

    def loss_fn(trainable):
        spec, frame, outputs, info = _run(model, ModeKeys.TRAIN, state, features, labels, trainable)
        non_trainable = {**state.non_trainable, **frame.assigned}
        return spec.loss, (non_trainable, outputs, info)

    (loss, (non_trainable, outputs, info)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        state.trainable
    )

    def apply(_):
        updates, opt_state = info.train_op.update(grads, state.opt_state, state.trainable)
        return optax.apply_updates(state.trainable, updates), non_trainable, opt_state

    def skip(_):
        return state.trainable, state.non_trainable, state.opt_state

    # A non-finite loss leaves everything as it was, and so does every later step of this
    # loop: nothing computed after a NaN can reach the variables or a checkpoint before the
    # host sees the record (at its next fetch) and stops. A conditional, not an elementwise
    # select over every variable: the skipped branch costs nothing.
    finite = jnp.isfinite(loss)
    healthy = finite & (state.non_finite_step < 0)
    trainable, non_trainable, opt_state = jax.lax.cond(healthy, apply, skip, None)
    new_state = TrainState(
        trainable,
        non_trainable,
        opt_state,
        state.global_step + 1,
        jnp.where(finite | (state.non_finite_step >= 0), state.non_finite_step, state.global_step),
    )
    return new_state, outputs, info


def batch_stats(model: ModelFunction, state: TrainState, features, labels):
    """One evaluation batch's metric statistics, loss and count: ``(stats, outputs, info)``.

    Raises:
      ValueError: a metric named ``loss`` or ``global_step`` (TF's messages).
    """
    spec, _, outputs, info = _run(model, ModeKeys.EVAL, state, features, labels)
    for reserved, quoted in ((hooks_lib.LOSS, '"loss"'), (hooks_lib.GLOBAL_STEP, "`global_step`")):
        if reserved in spec.eval_metric_ops:  # TF quotes the two names differently
            raise ValueError(
                f"Metric with name {quoted} is not allowed, because Estimator already defines "
                "a default metric with the same name."
            )
    stats = {
        "metrics": spec.eval_metric_ops,
        "loss_sum": spec.loss.astype(jnp.float32),
        "batches": jnp.ones((), jnp.int32),
    }
    return stats, outputs, info


def eval_step(model: ModelFunction, state: TrainState, acc, features, labels):
    """One evaluation step: ``(acc', outputs, info)``, the batch merged into ``acc``."""
    stats, outputs, info = batch_stats(model, state, features, labels)
    merged = {
        "metrics": {k: acc["metrics"][k].merge(stats["metrics"][k]) for k in acc["metrics"]},
        "loss_sum": acc["loss_sum"] + stats["loss_sum"],
        "batches": acc["batches"] + stats["batches"],
    }
    return merged, outputs, info


def predict_step(model: ModelFunction, state: TrainState, features):
    """One prediction step: ``(predictions, outputs, info)``."""
    spec, _, outputs, info = _run(model, ModeKeys.PREDICT, state, features, None)
    return spec.predictions, outputs, info


def _stack(batches: tuple):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *batches)


def train_steps(model: ModelFunction, state: TrainState, batches: tuple):
    """``len(batches)`` train steps in one call: a scan, then the last step, whose outputs
    are returned."""

    def body(s, batch):
        return train_step(model, s, *batch)[0], None

    state, _ = jax.lax.scan(body, state, _stack(batches[:-1]))
    return train_step(model, state, *batches[-1])


def eval_steps(model: ModelFunction, state: TrainState, acc, batches: tuple):
    """``len(batches)`` evaluation steps in one call (as :func:`train_steps`)."""

    def body(a, batch):
        return eval_step(model, state, a, *batch)[0], None

    acc, _ = jax.lax.scan(body, acc, _stack(batches[:-1]))
    return eval_step(model, state, acc, *batches[-1])


class Program(NamedTuple):
    """How a mode runs: its step, its fused multi-step form, and the arguments before the
    batch (the first is donated in training: the step consumes the state)."""

    step: Callable
    steps: Callable | None
    leading: int
    donate: tuple


PROGRAMS: dict[str, Program] = {
    ModeKeys.TRAIN: Program(train_step, train_steps, leading=1, donate=(0,)),
    ModeKeys.EVAL: Program(eval_step, eval_steps, leading=2, donate=()),
    ModeKeys.PREDICT: Program(predict_step, None, leading=1, donate=()),
}


def bind(function: Callable, model: ModelFunction) -> Callable:
    """``function`` with ``model`` as its first argument (what ``jax.jit`` compiles)."""
    return functools.partial(function, model)
