"""Mixed precision: a dtype policy like Keras 3's, and dynamic loss scaling for float16.

Synopsis::

    import estimator as est

    config = est.RunConfig(dtype_policy="mixed_bfloat16")
    clf = est.Estimator(model_fn, "runs/mixed", config=config)

A policy names two dtypes (Keras 3's ``keras.DTypePolicy``): the *variable* dtype, in which
variables are created, trained, checkpointed and exported, and the *compute* dtype, in which
layers compute. Under ``"mixed_bfloat16"`` and ``"mixed_float16"`` variables stay float32
and ``est.layers``, the module adapters (``estimator.modules``) and the canned DNN towers
cast their floating inputs and weights to bfloat16 / float16 where they compute (batch
normalization computes its statistics in float32, as Keras' does, and returns the compute
dtype). Loss and metrics stay float32: the canned heads receive float32 logits, and the
train step differentiates a float32 loss, so gradients reach the float32 variables in
float32. In a ``model_fn`` of your own, cast the logits to float32 before the loss (as
Keras' guide asks of the last layer): ``logits.astype(jnp.float32)``.

Under ``"mixed_float16"`` the loss is also scaled dynamically (Keras'
``LossScaleOptimizer``, Micikevicius et al., 2018, https://arxiv.org/abs/1710.03740):
the train step differentiates ``loss * scale`` and divides the gradients by ``scale``; a
step whose gradients are not finite is skipped (no variable or optimizer slot changes) and
halves the scale, and every ``dynamic_growth_steps`` finite steps in a row double it. The
scale and its counter are part of the optimizer state (:class:`LossScaleState`), so they
are checkpointed. A non-finite *loss* is still what it always is: the step is skipped and
``NanLossDuringTrainingError`` names it; only overflowing gradients are absorbed by the
scale.

The policy is set per Estimator (``RunConfig(dtype_policy=...)``), not globally as Keras'
``keras.config.set_dtype_policy`` does. ``"float32"`` (the default) changes nothing. The
policy object itself (:class:`DTypePolicy`, :func:`get`) is ``estimator.config.dtype_policies``'
(a bottom-layer module, so that ``RunConfig`` can hold one); this module applies it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from estimator.config.dtype_policies import DTypePolicy
from estimator.model.train_op import mark_row_wise, row_rule
from estimator.model.variables import current_frame

__all__ = [
    "LossScaleState",
    "autocast",
    "compute_dtype",
    "current_policy",
    "loss_scale",
    "loss_scaling",
    "variable_dtype",
]


def current_policy() -> DTypePolicy | None:
    """The policy of the ``model_fn`` call in progress; None outside one or at float32."""
    frame = current_frame()
    policy = None if frame is None else frame.dtype_policy
    return policy if policy is not None and policy.mixed else None


def compute_dtype() -> jnp.dtype | None:
    """The dtype layers compute in under the current policy; None when it is full
    precision (nothing to cast)."""
    policy = current_policy()
    return None if policy is None else policy.compute_dtype


def variable_dtype(dtype: Any) -> jnp.dtype:
    """The dtype a layer creates its variables in: float32 under a mixed policy (whatever
    its inputs' dtype), else ``dtype``."""
    policy = current_policy()
    return jnp.dtype(dtype) if policy is None else policy.variable_dtype


def autocast(x: Any) -> Any:
    """``x`` (an array or a pytree of arrays) with its floating arrays cast to the compute
    dtype under a mixed policy; unchanged otherwise (integers and booleans never change)."""
    dtype = compute_dtype()
    if dtype is None:
        return x

    def cast(leaf):
        if hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating):
            return jnp.asarray(leaf).astype(dtype)
        return leaf

    return jax.tree.map(cast, x)


class LossScaleState(NamedTuple):
    """The state of :func:`loss_scaling` (Keras' ``LossScaleOptimizer`` variables).

    Attributes:
      inner_state: the wrapped transformation's state.
      dynamic_scale: shape=(), dtype=float32: the current loss scale.
      step_counter: shape=(), dtype=int32: finite steps since the scale last changed.
    """

    inner_state: Any
    dynamic_scale: jax.Array
    step_counter: jax.Array


def loss_scaling(
    inner: optax.GradientTransformation,
    *,
    initial_scale: float = 2.0**15,
    dynamic_growth_steps: int = 2000,
) -> optax.GradientTransformation:
    """Dynamic loss scaling around ``inner`` (Keras 3's ``LossScaleOptimizer``, its
    defaults).

    The train step differentiates ``loss * dynamic_scale`` (see :func:`loss_scale`), so the
    gradients arriving here are scaled. When they are all finite they are divided by the
    scale and passed to ``inner``; the scale doubles after ``dynamic_growth_steps`` such
    steps in a row. Otherwise the step is skipped (zero updates, ``inner``'s state
    unchanged) and the scale halves.

    Args:
      inner: the model's ``train_op``.
      initial_scale: the first loss scale (Keras' default 2**15).
      dynamic_growth_steps: finite steps between doublings (Keras' default 2000).

    Returns:
      An ``optax.GradientTransformation`` whose state is a :class:`LossScaleState`; it keeps
      ``inner``'s row-wise mark (sparse updates, ``est.sparse_updates``).
    """

    def init(params):
        return LossScaleState(
            inner.init(params),
            jnp.asarray(initial_scale, jnp.float32),
            jnp.zeros((), jnp.int32),
        )

    def update(grads, state, params=None, **extra):
        finite = jnp.array(True)
        for leaf in jax.tree.leaves(grads):
            finite = finite & jnp.all(jnp.isfinite(leaf))
        scale = state.dynamic_scale

        def apply(_):
            unscaled = jax.tree.map(lambda g: (g / scale.astype(g.dtype)).astype(g.dtype), grads)
            updates, inner_state = inner.update(unscaled, state.inner_state, params, **extra)
            grow = state.step_counter == dynamic_growth_steps - 1
            return updates, LossScaleState(
                inner_state,
                jnp.where(grow, scale * 2.0, scale),
                jnp.where(grow, 0, state.step_counter + 1).astype(jnp.int32),
            )

        def skip(_):
            updates = jax.tree.map(jnp.zeros_like, grads)
            return updates, LossScaleState(state.inner_state, scale * 0.5, jnp.zeros((), jnp.int32))

        return jax.lax.cond(finite, apply, skip, None)

    transform = optax.GradientTransformationExtraArgs(init, update)
    rows = getattr(inner, "row_wise", None)
    # The loss scale is one scalar for every variable: it keeps the inner rule.
    return transform if rows is None else mark_row_wise(transform, rows, row_rule(inner))


def loss_scale(opt_state: Any) -> jax.Array | None:
    """The loss scale the train step multiplies the loss by: ``dynamic_scale`` when
    ``opt_state`` is a :class:`LossScaleState`, else None (no scaling)."""
    if isinstance(opt_state, LossScaleState):
        return opt_state.dynamic_scale
    return None
