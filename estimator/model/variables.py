"""Variables inside ``model_fn``: the init/apply transform behind ``get_variable``.

TF builds a graph once and keeps variables in it. Here ``model_fn`` is a plain Python
function traced by JAX, so variables are handled the way ``haiku.transform`` handles
them: the driver runs ``model_fn`` once in *init* mode, where every
:func:`get_variable` creates its initial value, and afterwards in *apply* mode, where
:func:`get_variable` returns the value held by the driver (a traced array). Values live
in flat dicts keyed by TF-style names (``dense/kernel``,
``linear/linear_model/age/weights``), trainable and non-trainable apart.

Inside ``model_fn``:

* :func:`get_variable` / :func:`variable_scope` — TF 1.x names and semantics;
  re-requesting a name in one call reuses the variable (the shape must match).
* :func:`assign` — new value for non-trainable state (batch-norm moving averages); the
  driver threads it out of the train step. Unlike TF 1.x there is no ``UPDATE_OPS``
  collection to wire into ``train_op``: assignments made in TRAIN mode always apply.
* :func:`next_rng_key` — a fresh PRNG key, derived from ``RunConfig.random_seed``, the
  global step and the call order; deterministic for a given seed.
* :func:`get_global_step` — the global step as a traced ``int32`` scalar.
* :func:`identity` — names an array so hooks can fetch it (``tf.identity(x, name=...)``).

This module also holds what the driver needs to run ``model_fn`` under the transform
(:func:`transform_context`); that part is internal.
"""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np

from estimator import initializers as _init

__all__ = [
    "get_variable",
    "variable_scope",
    "assign",
    "next_rng_key",
    "get_global_step",
    "identity",
    "get_regularization_loss",
]

INIT = "init"
APPLY = "apply"

_STATE = threading.local()


def _current_trace():
    """The JAX trace ops are recorded in now (``jax.extend.core``)."""
    with jex.take_current_trace() as trace:
        return trace


@dataclass
class Frame:
    """What one run of ``model_fn`` under the transform reads and writes (internal)."""

    kind: str  # INIT or APPLY
    key: Any  # the base key of this call, or a function that makes it: see ``rng``
    global_step: Any  # traced int32 scalar
    trainable: dict[str, Any] = field(default_factory=dict)
    non_trainable: dict[str, Any] = field(default_factory=dict)
    assigned: dict[str, Any] = field(default_factory=dict)
    named: dict[str, Any] = field(default_factory=dict)
    summaries: dict[str, Any] = field(default_factory=dict)
    regularization: list[Any] = field(default_factory=list)
    scopes: list[tuple[str, Any]] = field(default_factory=list)  # (name, initializer)
    name_counts: dict[str, int] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    rng_count: int = 0
    by_id: dict[int, str] = field(default_factory=dict)
    rows: Any = None  # estimator.model.rows.RowAccess in a sparse train step, else None
    lookups: set[str] = field(default_factory=set)  # variables read by lookup_rows
    # {id(feature array as model_fn received it): its key path}, and the model's host
    # checks of those features (estimator.model.input_checks), or None
    input_paths: dict[int, tuple] = field(default_factory=dict)
    input_checks: Any = None
    row_mask: Any = None  # float32 [batch] of a padded batch (estimator.model.padding)
    mode: str | None = None  # the ModeKeys value model_fn runs in (estimator.modules)
    dtype_policy: Any = None  # estimator.model.dtype_policy.DTypePolicy, or None
    # A TRAIN run whose eval_metric_ops the step accumulates (RunConfig(train_metrics_steps)):
    # heads return their metrics in TRAIN mode then (estimator.engine.steps.train_batch).
    train_metrics: bool = False
    _rng: Any = None
    _trace: Any = field(default_factory=_current_trace)  # the trace model_fn runs in

    @property
    def rng(self) -> jax.Array:
        """The base key of this call, made when first used, in the trace ``model_fn`` runs
        in (also when first used inside a transformation of ``model_fn``'s own, such as a
        ``lax.scan`` body, so it can be used after it), with the values a key made before
        ``model_fn`` ran would have. The key is a Threefry hash of the seed and the global
        step; a ``model_fn`` that draws no random numbers and creates no randomly initialised
        variable now has none in its programs, which saves lowering the hash (a large share
        of a small model's first ``train()`` and ``evaluate()``: ``benchmarks/cold_start.py``)."""
        if self._rng is None:
            with jex.set_current_trace(self._trace):
                self._rng = self.key() if callable(self.key) else self.key
        return self._rng


def require_frame(what: str) -> Frame:
    """The frame of the ``model_fn`` call in progress (internal accessor).

    The one way code outside this module reaches the variable store of the running
    ``model_fn`` (layers, summaries, the compat optimizers and graph emulation) when it
    needs it to exist; :func:`current_frame` is the variant that may return None.

    Args:
      what: the caller's name, for the error message (e.g. ``"summary.scalar"``).

    Returns:
      The current :class:`Frame`.

    Raises:
      RuntimeError: no ``model_fn`` is running (called at module level or in ``input_fn``).
    """
    frame = getattr(_STATE, "frame", None)
    if frame is None:
        raise RuntimeError(
            f"{what} was called outside model_fn. Variables and the global step exist only "
            "while an Estimator runs model_fn: call it inside model_fn (directly or through "
            "estimator.layers), not at module level or in input_fn."
        )
    return frame


def current_frame() -> Frame | None:
    """The frame of the ``model_fn`` call in progress, or None (internal)."""
    return getattr(_STATE, "frame", None)


@contextlib.contextmanager
def transform_context(frame: Frame) -> Iterator[Frame]:
    """Runs the body with ``frame`` as the current variable store (internal)."""
    previous = getattr(_STATE, "frame", None)
    _STATE.frame = frame
    try:
        yield frame
    finally:
        _STATE.frame = previous


def scope_prefix(frame: Frame) -> str:
    """The ``variable_scope`` path of ``frame``, with a trailing ``/`` (``""`` at the root;
    internal, for code naming things the way ``get_variable`` does)."""
    return "".join(name + "/" for name, _ in frame.scopes if name)


def unique_name(base: str) -> str:
    """TF's layer auto-naming: ``dense``, ``dense_1``, ... within the current scope.

    Counts restart on every ``model_fn`` call, so init and apply name layers alike.
    """
    frame = require_frame("unique_name")
    key = scope_prefix(frame) + base
    count = frame.name_counts.get(key, 0)
    frame.name_counts[key] = count + 1
    return base if count == 0 else f"{base}_{count}"


@contextlib.contextmanager
def variable_scope(
    name_or_scope: str | None,
    default_name: str | None = None,
    values: Any = None,
    initializer: Callable | None = None,
    reuse: Any = None,
    dtype: Any = None,
) -> Iterator[str]:
    """Prefixes the names of variables created in the block (``tf.compat.v1.variable_scope``).

    Args:
      name_or_scope: the scope name. ``None`` uses ``default_name``, made unique as TF does
        (``block``, ``block_1``, ...).
      default_name: the base name when ``name_or_scope`` is None.
      values: ignored (TF uses it for graph checks).
      initializer: default initializer for :func:`get_variable` calls in the block.
      reuse: ignored: variables are always reused by name within a ``model_fn`` call,
        which is what ``reuse=tf.compat.v1.AUTO_REUSE`` does in TF.
      dtype: ignored; give dtypes to :func:`get_variable`.

    Yields:
      The full scope name, e.g. ``"outer/inner"``.

    Raises:
      TypeError: if both ``name_or_scope`` and ``default_name`` are None (TF's message).
      RuntimeError: outside ``model_fn``.
    """
    del values, reuse, dtype
    frame = require_frame("variable_scope")
    if name_or_scope is None:
        if default_name is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        name_or_scope = unique_name(default_name)
    frame.scopes.append((str(name_or_scope).strip("/"), initializer))
    try:
        yield scope_prefix(frame).rstrip("/")
    finally:
        frame.scopes.pop()


@contextlib.contextmanager
def root_scope() -> Iterator[None]:
    """Variables created in the block are named from the root, whatever the enclosing
    ``variable_scope`` blocks (TF's shared embedding tables: ``a_b_shared_embedding``, not
    ``input_layer/.../a_b_shared_embedding``).

    Raises:
      RuntimeError: outside ``model_fn``.
    """
    frame = require_frame("root_scope")
    saved, frame.scopes = frame.scopes, []
    try:
        yield
    finally:
        frame.scopes = saved


def _default_initializer(frame: Frame, dtype: Any) -> Callable:
    for _, scope_init in reversed(frame.scopes):
        if scope_init is not None:
            return scope_init
    if jnp.issubdtype(dtype, jnp.floating):
        return _init.glorot_uniform_initializer()
    return _init.zeros_initializer()


def _initial_value(frame: Frame, name: str, shape, dtype, initializer) -> jax.Array:
    if initializer is None:
        initializer = _default_initializer(frame, dtype)
    if callable(initializer):
        # A stable per-name key: adding a layer does not change the others' initial values.
        key = jax.random.fold_in(frame.rng, zlib.crc32(name.encode()))
        value = initializer(key, shape, dtype)
    else:
        value = jnp.asarray(initializer, dtype=dtype)
    # Always a copy: every variable must be its own array (an initializer may return the same
    # array for several variables), because assign() finds a variable by its value's identity.
    value = jnp.array(value, dtype=dtype, copy=True)
    if tuple(value.shape) != tuple(shape):
        raise ValueError(
            f"The initializer of variable {name} returned shape {tuple(value.shape)}, "
            f"but the variable was declared with shape {tuple(shape)}."
        )
    return value


def get_variable(
    name: str,
    shape: Any = None,
    dtype: Any = None,
    initializer: Callable | jax.typing.ArrayLike | None = None,
    regularizer: Callable | None = None,
    trainable: bool | None = None,
) -> jax.Array:
    """Creates or reuses a variable (``tf.compat.v1.get_variable``).

    Args:
      name: name relative to the current :func:`variable_scope`; the full name
        (``"scope/name"``) is the key in checkpoints and ``Estimator.get_variable_names()``.
      shape: the variable's shape. May be omitted when ``initializer`` is an array.
      dtype: defaults to ``float32`` (or the dtype of an array initializer).
      initializer: a function ``(key, shape, dtype) -> array`` (see
        ``estimator.initializers``; ``jax.nn.initializers`` work too) or an array. The
        default is TF's: the scope's initializer, else ``glorot_uniform`` for floating
        dtypes and zeros otherwise.
      regularizer: a function ``array -> scalar``; its value is added to
        :func:`get_regularization_loss` (TF's ``REGULARIZATION_LOSSES`` collection) once
        per ``model_fn`` call, however often the variable is reused.
      trainable: whether ``train_op`` updates it (default True). Non-trainable variables
        change only through :func:`assign`.

    Returns:
      The variable's current value: its initial value while the model is initialised,
      the driver's value afterwards. Shape ``shape``, dtype ``dtype``.

    Raises:
      RuntimeError: outside ``model_fn``.
      ValueError: if the name was created with a different shape or dtype (TF's
        "Trying to share variable ..." message), or no shape can be determined.
    """
    frame = require_frame(f"get_variable({name!r})")
    full = scope_prefix(frame) + name
    trainable = True if trainable is None else bool(trainable)
    shape = _variable_shape(full, shape, initializer)
    dtype = _variable_dtype(dtype, initializer)
    value = _stored_value(frame, full, shape, dtype, initializer, trainable)
    first_use = full not in frame.used
    frame.used.add(full)
    if full in frame.assigned:
        value = frame.assigned[full]
    if regularizer is not None and first_use:
        # Once per variable and model_fn call: TF adds the loss when the variable is created,
        # not again when it is reused; a regularizer returning None adds nothing, as TF's.
        loss = regularizer(value)
        if loss is not None:
            frame.regularization.append(loss)
    frame.by_id[id(value)] = full
    return value


def _variable_shape(full: str, shape, initializer) -> tuple[int, ...]:
    """``shape`` as a tuple of ints; without one, an array initializer's shape."""
    if shape is None:
        if initializer is None:
            raise ValueError(
                f"Variable {full} did not get an initializer, so its `shape` argument must be "
                "specified."
            )
        if callable(initializer):
            raise ValueError(
                f"Shape of a new variable ({full}) must be fully defined, but instead was None."
            )
        shape = np.shape(initializer)
    return tuple(int(d) for d in shape)


def _variable_dtype(dtype, initializer) -> np.dtype:
    """``dtype``; without one, an array initializer's dtype, else ``float32``."""
    if dtype is None:
        dtype = (
            jnp.asarray(initializer).dtype
            if initializer is not None and not callable(initializer)
            else jnp.float32
        )
    return jnp.dtype(dtype)


def _stored_value(frame: Frame, full: str, shape: tuple, dtype, initializer, trainable: bool):
    """Variable ``full``'s value in ``frame``: the stored one (its shape and dtype checked),
    or in INIT mode a new initial value, stored."""
    store, other = (
        (frame.trainable, frame.non_trainable)
        if trainable
        else (frame.non_trainable, frame.trainable)
    )
    if full in other:
        raise ValueError(
            f"Variable {full} was created as {'non-' if trainable else ''}trainable and is now "
            f"requested as {'' if trainable else 'non-'}trainable. Pass the same trainable= on "
            "every call."
        )
    if full in store:
        value = store[full]
        _check_shared(full, value, shape, dtype)
        return value
    if frame.kind == INIT:
        value = _initial_value(frame, full, shape, dtype, initializer)
        store[full] = value
        return value
    raise ValueError(
        f"Variable {full} (shape {shape}) does not exist in the model's variables. It was "
        "not created when the model was initialised: model_fn creates different variables "
        "in different modes or calls. Create every variable on every call (in all modes) "
        "so that training, evaluation and prediction share them."
    )


def _check_shared(full: str, value, shape: tuple, dtype) -> None:
    """TF's "Trying to share variable" errors: a reused name asked with another shape or
    dtype."""
    if tuple(value.shape) != shape:
        raise ValueError(
            f"Trying to share variable {full}, but specified shape {shape} and found shape "
            f"{tuple(value.shape)}."
        )
    if jnp.dtype(value.dtype) != dtype:
        raise ValueError(
            f"Trying to share variable {full}, but specified dtype {dtype.name} and found "
            f"dtype {jnp.dtype(value.dtype).name}."
        )


def assign(ref: str | jax.Array, value: jax.typing.ArrayLike) -> jax.Array:
    """Sets a non-trainable variable's value for after this step (``tf.compat.v1.assign``).

    Args:
      ref: the variable's full name (``"batch_normalization/moving_mean"``), or the array
        :func:`get_variable` returned for it.
      value: the new value; same shape as the variable, cast to its dtype.

    Returns:
      ``value`` as an array. Later :func:`get_variable` calls in the same ``model_fn`` call
      return it too.

    The new value is kept only in TRAIN mode (by the train step); evaluation and prediction
    never change variables.

    Raises:
      RuntimeError: outside ``model_fn``.
      ValueError: for an unknown or trainable variable, or a shape mismatch.
    """
    frame = require_frame("assign")
    name = ref if isinstance(ref, str) else frame.by_id.get(id(ref))
    if name is None:
        raise ValueError(
            "assign() takes a variable name or the array get_variable() returned; got an array "
            "that is not a variable. Pass the variable's full name, e.g. "
            "assign('batch_normalization/moving_mean', new_value)."
        )
    if name in frame.trainable:
        raise ValueError(
            f"Variable {name} is trainable: its value comes from train_op and cannot be "
            "assigned. Create it with get_variable(..., trainable=False) to update it with "
            "assign()."
        )
    if name not in frame.non_trainable:
        known = ", ".join(sorted(frame.non_trainable)) or "none"
        raise ValueError(
            f"assign(): no non-trainable variable named {name}. Known non-trainable "
            f"variables: {known}."
        )
    current = frame.non_trainable[name]
    value = jnp.asarray(value, dtype=current.dtype)
    if value.shape != current.shape:
        raise ValueError(
            f"assign(): variable {name} has shape {tuple(current.shape)}, but the new value "
            f"has shape {tuple(value.shape)}."
        )
    frame.assigned[name] = value
    frame.by_id[id(value)] = name
    return value


def next_rng_key() -> jax.Array:
    """A fresh PRNG key for randomness inside ``model_fn`` (dropout, noise).

    Derived from ``RunConfig.random_seed``, the global step and the number of earlier
    calls in this ``model_fn`` call: the same seed gives the same keys, every step gets new
    ones. (TF draws op-level seeds from the graph seed; JAX needs explicit keys.)

    Returns:
      A ``jax.random`` key array.

    Raises:
      RuntimeError: outside ``model_fn``.
    """
    frame = require_frame("next_rng_key")
    frame.rng_count += 1
    return jax.random.fold_in(frame.rng, frame.rng_count)


def get_global_step() -> jax.Array | None:
    """The global step inside ``model_fn``: a traced ``int32`` scalar.

    It counts training steps and is restored from checkpoints. As
    ``tf.compat.v1.train.get_global_step`` returns None when the graph has no global step,
    this returns None outside ``model_fn``.
    """
    frame = current_frame()
    return None if frame is None else frame.global_step


def identity(x: jax.typing.ArrayLike, name: str) -> jax.Array:
    """Names an array so hooks can fetch it, like ``tf.identity(x, name=name)``.

    ``LoggingTensorHook({"acc": "accuracy"}, every_n_iter=100)`` then logs the array named
    ``"accuracy"``. The name is prefixed by the current :func:`variable_scope`. The array
    stays on the device unless a hook asks for it in that step.

    Args:
      x: any array.
      name: the name to fetch it by (a trailing ``":0"`` in fetches is ignored, as TF
        tensor names have one).

    Returns:
      ``x`` as an array.
    """
    frame = require_frame("identity")
    x = jnp.asarray(x)
    frame.named[scope_prefix(frame) + name] = x
    return x


def get_regularization_loss(name: str = "total_regularization_loss") -> jax.Array:
    """Sum of the regularizers given to variables so far in this ``model_fn`` call.

    The counterpart of ``tf.compat.v1.losses.get_regularization_loss()``: add it to the
    loss yourself, as in TF.

    Returns:
      A ``float32`` scalar (0 when no variable has a regularizer).
    """
    del name
    frame = require_frame("get_regularization_loss")
    if not frame.regularization:
        return jnp.zeros((), jnp.float32)
    return sum(jnp.asarray(r, jnp.float32) for r in frame.regularization)
