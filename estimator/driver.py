"""The driver: pure step functions built from ``model_fn`` (the loop is ``session``).

This is the only place that calls ``jax.value_and_grad`` and ``optax.apply_updates``.

* :class:`TrainState` — everything a train step reads and writes, one pytree.
* :class:`ModelFunction` — calls the user's ``model_fn`` under the variable transform,
  with TF's argument handling.
* :class:`StepCompiler` — builds the train/eval/predict step of a mode, traces and
  compiles it once per input signature (``jax.jit(...).trace().lower().compile()``), and
  keeps what the trace learnt about ``model_fn`` (hooks, ``train_op``, export outputs).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from estimator import hooks as hooks_lib
from estimator.inputs import fn_args
from estimator.mode_keys import ModeKeys
from estimator.model_fn import EstimatorSpec
from estimator.session_run_hook import (
    SessionRunHook,
)
from estimator.variables import APPLY, INIT, Frame, transform_context

logger = logging.getLogger("estimator")

_VALID_MODEL_FN_ARGS = {"features", "labels", "mode", "params", "self", "config"}


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


def verify_model_fn_args(model_fn: Callable, params) -> None:
    """TF's ``_verify_model_fn_args``: the names ``model_fn`` may take."""
    args = set(fn_args(model_fn))
    if "features" not in args:
        raise ValueError(f"model_fn ({model_fn}) must include features argument.")
    if params is not None and "params" not in args:
        raise ValueError(
            f"model_fn ({model_fn}) does not include params argument, but params ({params}) "
            "is passed to Estimator."
        )
    if params is None and "params" in args:
        logger.warning(
            "Estimator's model_fn (%s) includes params argument, but params are not passed "
            "to Estimator.",
            model_fn,
        )
    unexpected = sorted(args - _VALID_MODEL_FN_ARGS)
    if unexpected:
        raise ValueError(f"model_fn ({model_fn}) has following not expected args: {unexpected}")


class ModelFunction:
    """Calls ``model_fn`` with TF's argument passing, under the variable transform.

    Args:
      model_fn: the user's function.
      params: the Estimator's params (passed when ``model_fn`` takes ``params``).
      config: the ``RunConfig``.
      seed: the base random seed.
    """

    def __init__(self, model_fn: Callable, params: dict, config, seed: int) -> None:
        self.model_fn = model_fn
        self.params = params
        self.config = config
        self.base_key = jax.random.key(seed)
        self.arg_names = set(fn_args(model_fn))
        self.trace_count = 0

    def check_labels(self, labels) -> None:
        if "labels" not in self.arg_names and labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")

    def __call__(self, features, labels, mode: str, frame: Frame) -> EstimatorSpec:
        self.check_labels(labels)
        kwargs = {}
        if "labels" in self.arg_names:
            kwargs["labels"] = labels
        if "mode" in self.arg_names:
            kwargs["mode"] = mode
        if "params" in self.arg_names:
            kwargs["params"] = self.params
        if "config" in self.arg_names:
            kwargs["config"] = self.config
        with transform_context(frame):
            spec = self.model_fn(features=features, **kwargs)
        if not isinstance(spec, EstimatorSpec):
            raise ValueError(
                f"model_fn should return an EstimatorSpec; it returned {type(spec).__name__}."
            )
        return spec

    def public(self) -> Callable:
        """TF's ``Estimator.model_fn``: ``(features, labels, mode, config) -> EstimatorSpec``
        with the Estimator's params. Variables take their initial values: no checkpoint is
        read, as TF's graph variables stay uninitialised until a session runs."""

        def public_model_fn(features, labels, mode, config):
            model = ModelFunction(self.model_fn, self.params, config, 0)
            model.base_key = self.base_key
            frame = Frame(INIT, self.init_key(mode), jnp.zeros((), jnp.int32))
            return model(features, labels, mode, frame)

        return public_model_fn

    def step_key(self, global_step) -> jax.Array:
        return jax.random.fold_in(self.base_key, global_step)

    def init_key(self, mode: str) -> jax.Array:
        return jax.random.fold_in(self.base_key, zlib.crc32(f"init/{mode}".encode()) >> 1)


class FetchName(str):
    """A name standing for an array that a hook created inside ``model_fn`` held."""


def _is_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _lift_hook_arrays(hooks: Iterable[SessionRunHook], outputs: dict) -> None:
    """Replaces arrays held by hooks made inside ``model_fn`` with names of step outputs."""

    def lift(value, path):
        if _is_tracer(value):
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


class Traced(NamedTuple):
    """What tracing ``model_fn`` in one mode revealed (static parts of the spec)."""

    spec: EstimatorSpec  # holds tracers of a finished trace: use its static fields only
    hooks: tuple
    chief_hooks: tuple
    output_names: tuple  # names hooks can fetch from the step's outputs

    def new_hooks(self) -> tuple[list, list]:
        """``(hooks, chief_hooks)`` for one run: the very objects ``model_fn`` put in its
        ``EstimatorSpec`` (TF's identity semantics: a ``FinalOpsHook`` the caller keeps sees
        ``end``). The step is traced once, so a later run gets the same objects again, as
        TF does when ``model_fn`` returns hooks made outside it; hooks reset per run in
        ``begin``, as TF's do."""
        return list(self.hooks), list(self.chief_hooks)


def _check_trainable(trainable: dict) -> None:
    for name, value in trainable.items():
        if not jnp.issubdtype(value.dtype, jnp.inexact):
            raise ValueError(
                f"Variable {name} has dtype {value.dtype} and is trainable; only floating-point "
                "variables can be trained. Create it with get_variable(..., trainable=False)."
            )


def _merge_metrics(acc: dict, new: dict) -> dict:
    return {key: acc[key].merge(new[key]) for key in acc}


class StepCompiler:
    """Builds and compiles the step function of one mode (internal).

    The step functions (pure; ``v`` is a :class:`TrainState`):

    * TRAIN ``(state, features, labels) -> (state', outputs)``: the loss's gradient, then
      ``train_op``; a non-finite loss keeps the previous variables and optimizer state.
    * EVAL ``(state, acc, features, labels) -> (acc', outputs)``: ``acc`` holds the merged
      metrics, the sum of batch losses and the number of batches.
    * PREDICT ``(state, features) -> (predictions, outputs)``.

    ``outputs`` maps names hooks can fetch (``"loss"``, ``identity`` names, hook-held
    arrays) to arrays. Each is compiled once per input signature; :attr:`trace_count`
    counts traces (tests use it to show nothing is rebuilt).

    Args:
      model: the :class:`ModelFunction`.
      mode: a ``ModeKeys`` value.
      state_sharding: sharding of the state (None on one device).
    """

    def __init__(self, model: ModelFunction, mode: str, state_sharding=None) -> None:
        self.model = model
        self.mode = mode
        self.state_sharding = state_sharding
        self.traced: Traced | None = None
        self.trace_count = 0
        self._box: dict = {}
        self._compiled: dict = {}
        self._current = None
        self._current_key = None
        self._abstract_acc = None
        step = {
            ModeKeys.TRAIN: self._train_step,
            ModeKeys.EVAL: self._eval_step,
            ModeKeys.PREDICT: self._predict_step,
        }[mode]
        donate = (0,) if mode == ModeKeys.TRAIN else ()
        self._jitted = jax.jit(step, donate_argnums=donate)
        if mode == ModeKeys.TRAIN:
            self._multi = jax.jit(self._train_multi, donate_argnums=0)
        else:
            self._multi = jax.jit(self._eval_multi)
        self._init = jax.jit(self._init_state)

    # ----- pure functions -------------------------------------------------------------
    def _apply(self, features, labels, state: TrainState, trainable) -> tuple:
        frame = Frame(
            APPLY,
            self.model.step_key(state.global_step),
            state.global_step,
            trainable=trainable,
            non_trainable=dict(state.non_trainable),
        )
        spec = self.model(features, labels, self.mode, frame)
        return spec, frame

    def _record(self, spec: EstimatorSpec) -> None:
        self.trace_count += 1
        self.model.trace_count += 1
        if self.mode == ModeKeys.TRAIN:
            hooks, chief = spec.training_hooks, spec.training_chief_hooks
        elif self.mode == ModeKeys.EVAL:
            hooks, chief = spec.evaluation_hooks, ()
        else:
            hooks, chief = spec.prediction_hooks, ()
        self._box["traced"] = (spec, tuple(hooks), tuple(chief))

    def _outputs(self, spec: EstimatorSpec, frame: Frame, hooks) -> dict:
        outputs = {**frame.named, **frame.summaries}
        if spec.loss is not None:
            outputs[hooks_lib.LOSS] = spec.loss
        _lift_hook_arrays(hooks, outputs)
        self._box["names"] = tuple(sorted(outputs))
        return outputs

    def _init_state(self, features, labels) -> TrainState:
        frame = Frame(INIT, self.model.init_key(self.mode), jnp.zeros((), jnp.int32))
        spec = self.model(features, labels, self.mode, frame)
        _check_trainable(frame.trainable)
        opt_state = None
        if self.mode == ModeKeys.TRAIN:
            opt_state = spec.train_op.init(frame.trainable)
        return TrainState(
            frame.trainable,
            frame.non_trainable,
            opt_state,
            jnp.zeros((), jnp.int32),
            jnp.full((), -1, jnp.int32),
        )

    def _train_step(self, state: TrainState, features, labels):
        box = {}

        def loss_fn(trainable):
            spec, frame = self._apply(features, labels, state, trainable)
            box["spec"] = spec
            outputs = self._outputs(spec, frame, spec.training_hooks + spec.training_chief_hooks)
            non_trainable = {**state.non_trainable, **frame.assigned}
            return spec.loss, (non_trainable, outputs)

        (loss, (non_trainable, outputs)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.trainable
        )
        spec = box["spec"]
        self._record(spec)

        def apply(_):
            updates, opt_state = spec.train_op.update(grads, state.opt_state, state.trainable)
            return optax.apply_updates(state.trainable, updates), non_trainable, opt_state

        def skip(_):
            return state.trainable, state.non_trainable, state.opt_state

        # A non-finite loss leaves everything as it was, and so does every later step of
        # this loop: nothing computed after a NaN can reach the variables or a checkpoint
        # before the host sees the record (at its next fetch) and stops. A conditional,
        # not an elementwise select over every variable: the skipped branch costs nothing.
        finite = jnp.isfinite(loss)
        healthy = finite & (state.non_finite_step < 0)
        trainable, non_trainable, opt_state = jax.lax.cond(healthy, apply, skip, None)
        new_state = TrainState(
            trainable,
            non_trainable,
            opt_state,
            state.global_step + 1,
            jnp.where(
                finite | (state.non_finite_step >= 0), state.non_finite_step, state.global_step
            ),
        )
        return new_state, outputs

    def _train_multi(self, state: TrainState, batches: tuple):
        """``len(batches)`` train steps in one call: a scan, then the last step, whose
        outputs are returned."""
        stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *batches[:-1])
        state, _ = jax.lax.scan(
            lambda s, batch: (self._train_step(s, *batch)[0], None), state, stacked
        )
        return self._train_step(state, *batches[-1])

    def _eval_multi(self, state: TrainState, acc, batches: tuple):
        """``len(batches)`` evaluation steps in one call (as :meth:`_train_multi`)."""
        stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *batches[:-1])
        acc, _ = jax.lax.scan(
            lambda a, batch: (self._eval_step(state, a, *batch)[0], None), acc, stacked
        )
        return self._eval_step(state, acc, *batches[-1])

    def _batch_stats(self, state: TrainState, features, labels):
        spec, frame = self._apply(features, labels, state, state.trainable)
        self._record(spec)
        for reserved, quoted in (
            (hooks_lib.LOSS, '"loss"'),
            (hooks_lib.GLOBAL_STEP, "`global_step`"),
        ):
            if reserved in spec.eval_metric_ops:  # TF quotes the two names differently
                raise ValueError(
                    f"Metric with name {quoted} is not allowed, because Estimator already "
                    "defines a default metric with the same name."
                )
        stats = {
            "metrics": spec.eval_metric_ops,
            "loss_sum": spec.loss.astype(jnp.float32),
            "batches": jnp.ones((), jnp.int32),
        }
        return stats, self._outputs(spec, frame, spec.evaluation_hooks)

    def _eval_step(self, state: TrainState, acc, features, labels):
        stats, outputs = self._batch_stats(state, features, labels)
        merged = {
            "metrics": _merge_metrics(acc["metrics"], stats["metrics"]),
            "loss_sum": acc["loss_sum"] + stats["loss_sum"],
            "batches": acc["batches"] + stats["batches"],
        }
        return merged, outputs

    def _predict_step(self, state: TrainState, features):
        spec, frame = self._apply(features, None, state, state.trainable)
        self._record(spec)
        return spec.predictions, self._outputs(spec, frame, spec.prediction_hooks)

    # ----- tracing and compiling --------------------------------------------------------
    def abstract_state(self, features, labels) -> TrainState:
        """The state's structure, shapes and dtypes (traces ``model_fn`` in init mode)."""
        return jax.eval_shape(self._init, features, labels)

    def init_state(self, features, labels) -> TrainState:
        """Freshly initialised variables (and optimizer state in TRAIN mode)."""
        state = self._init(features, labels)
        if self.state_sharding is not None:
            state = jax.device_put(state, self.state_sharding)
        return state

    def empty_accumulator(self, state, features, labels):
        """Zero metrics/loss accumulator for EVAL (metric statistics are sums)."""
        if self._abstract_acc is None:
            self._abstract_acc = jax.eval_shape(self._batch_stats, state, features, labels)[0]
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), self._abstract_acc)

    @staticmethod
    def signature(args) -> tuple:
        leaves, treedef = jax.tree.flatten(args)
        return treedef, tuple(
            (
                np.shape(x),
                jax.dtypes.canonicalize_dtype(getattr(x, "dtype", None) or np.result_type(x)),
            )
            for x in leaves
        )

    def compile(self, *args):
        """The compiled step for these arguments' signature (traced on first use)."""
        key = self.signature(args[1:])
        entry = self._compiled.get(key)
        if entry is None:
            traced = self._jitted.trace(*args)
            entry = traced.lower().compile()
            self._compiled[key] = entry
            self.traced = Traced(*self._box["traced"], self._box["names"])
        self._current, self._current_key = entry, key
        return entry

    def prepare_run(self, *args) -> Traced:
        """Readies a ``train``/``evaluate``/``predict`` call: the compiled step for ``args``
        and :attr:`traced`, whose hooks are those ``model_fn`` returns for this call.

        TF calls ``model_fn`` on every call and runs the hooks it returns. A new signature
        is compiled, and that trace gives the hooks. Otherwise, when ``model_fn`` returned
        hooks before, it is traced again, abstractly (no compile), so hooks it creates are
        new objects and hooks created outside it are the caller's very objects; when it
        returned none, nothing is traced.
        """
        known = self.signature(args[1:]) in self._compiled
        self.compile(*args)
        if known and (self.traced.hooks or self.traced.chief_hooks):
            step = self._jitted.__wrapped__
            jax.eval_shape(lambda *a: step(*a), *args)  # a new function: no trace cache
            self.traced = Traced(*self._box["traced"], self._box["names"])
        return self.traced

    def multi(self, *args):
        """Runs ``len(batches)`` steps (of one signature) in one call; ``args`` are the
        step's leading arguments (state, and the accumulator in EVAL) and the batches."""
        *leading, batches = args
        batches = tuple(batches)
        key = ("multi", len(batches), self.signature(batches[0]))
        entry = self._compiled.get(key)
        if entry is None:
            entry = self._multi.trace(*leading, batches).lower().compile()
            self._compiled[key] = entry
        return entry(*leading, batches)

    def __call__(self, *args):
        """Runs the step, compiling for a new input signature when needed."""
        current = self._current
        if current is not None:
            try:
                return current(*args)
            except TypeError as err:
                if "compiled" not in str(err) and "pytree" not in str(err):
                    raise
        return self.compile(*args)(*args)
