"""Normalization layers: ``batch_normalization`` (``tf.compat.v1.layers``'
``normalization`` module)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from estimator import initializers as init
from estimator.layers._utils import constrained, layer_name
from estimator.model import dtype_policy
from estimator.model.variables import assign, get_variable, variable_scope

__all__ = ["batch_normalization"]


def batch_normalization(
    inputs: jax.typing.ArrayLike,
    axis: int = -1,
    momentum: float = 0.99,
    epsilon: float = 1e-3,
    center: bool = True,
    scale: bool = True,
    beta_initializer=None,
    gamma_initializer=None,
    moving_mean_initializer=None,
    moving_variance_initializer=None,
    beta_regularizer=None,
    gamma_regularizer=None,
    beta_constraint=None,
    gamma_constraint=None,
    training: bool = False,
    trainable: bool = True,
    name: str | None = None,
    reuse=None,
    fused: bool | None = None,
) -> jax.Array:
    """Batch normalization (``tf.compat.v1.layers.batch_normalization``; Ioffe & Szegedy,
    2015).

    With ``training=True`` the batch's mean and (biased) variance over all axes but
    ``axis`` normalise the inputs, and the moving averages are updated as
    ``moving = moving * momentum + batch * (1 - momentum)`` — applied by the train step
    automatically (TF 1.x needed the ``UPDATE_OPS`` control dependency for that). With
    ``training=False`` the moving averages are used.

    As TF 2.15, whose 4-D and 5-D inputs with the channels first or last take the fused
    kernel (``fused=None`` or True), the moving variance of those is updated with the
    Bessel-corrected batch variance ``var * n / (n - 1)`` (``n`` = examples per channel);
    other inputs, or ``fused=False``, update it with the biased variance. Normalisation
    always uses the biased variance.

    Returns:
      ``gamma * (inputs - mean) / sqrt(var + epsilon) + beta``, same shape as ``inputs``.

    Variables:
      ``<name>/gamma``, ``<name>/beta`` (trainable), ``<name>/moving_mean``,
      ``<name>/moving_variance`` (non-trainable), each ``[inputs.shape[axis]]``.
    """
    del reuse
    inputs = jnp.asarray(inputs)
    axis = axis % inputs.ndim
    size = inputs.shape[axis]
    dtype = inputs.dtype if jnp.issubdtype(inputs.dtype, jnp.floating) else jnp.float32
    # Mixed precision: statistics and variables in float32, output in the compute dtype
    # (Keras' BatchNormalization does the same).
    output_dtype = dtype_policy.compute_dtype()
    if output_dtype is not None:
        dtype = dtype_policy.variable_dtype(dtype)
        inputs = inputs.astype(dtype)
    # Keras' BatchNormalization V1: fused when the rank is 4 or 5, the channel axis first or
    # last, and the dtype one the fused kernel supports.
    fused = (
        fused is not False
        and inputs.ndim in (4, 5)
        and axis in (1, inputs.ndim - 1)
        and dtype != jnp.float64
    )
    reduce = tuple(i for i in range(inputs.ndim) if i != axis)
    bshape = [1] * inputs.ndim
    bshape[axis] = size
    with variable_scope(layer_name(name, "batch_normalization")) as scope:
        gamma = (
            constrained(
                get_variable(
                    "gamma",
                    (size,),
                    dtype,
                    gamma_initializer or init.ones_initializer(),
                    gamma_regularizer,
                    trainable,
                ),
                gamma_constraint,
            )
            if scale
            else None
        )
        beta = (
            constrained(
                get_variable(
                    "beta",
                    (size,),
                    dtype,
                    beta_initializer or init.zeros_initializer(),
                    beta_regularizer,
                    trainable,
                ),
                beta_constraint,
            )
            if center
            else None
        )
        moving_mean = get_variable(
            "moving_mean",
            (size,),
            dtype,
            moving_mean_initializer or init.zeros_initializer(),
            trainable=False,
        )
        moving_variance = get_variable(
            "moving_variance",
            (size,),
            dtype,
            moving_variance_initializer or init.ones_initializer(),
            trainable=False,
        )
        if training:
            mean = jnp.mean(inputs, axis=reduce)
            variance = jnp.var(inputs, axis=reduce)
            n = math.prod(inputs.shape[i] for i in reduce)
            update = variance * (n / max(n - 1, 1)) if fused else variance
            assign(f"{scope}/moving_mean", moving_mean * momentum + mean * (1.0 - momentum))
            assign(
                f"{scope}/moving_variance", moving_variance * momentum + update * (1.0 - momentum)
            )
        else:
            mean, variance = moving_mean, moving_variance
    outputs = (inputs - mean.reshape(bshape)) * jax.lax.rsqrt(variance.reshape(bshape) + epsilon)
    if gamma is not None:
        outputs = outputs * gamma.reshape(bshape)
    if beta is not None:
        outputs = outputs + beta.reshape(bshape)
    return outputs if output_dtype is None else outputs.astype(output_dtype)
