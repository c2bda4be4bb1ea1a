"""Pooling layers: max and average pooling over 1-D and 2-D windows
(``tf.compat.v1.layers``' ``pooling`` module)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from estimator.layers import convolution
from estimator.layers._utils import check_format, int_tuple

__all__ = ["max_pooling1d", "max_pooling2d", "average_pooling1d", "average_pooling2d"]


def _pool(rank, inputs, pool_size, strides, padding, data_format, init_value, op):
    pad, inputs = check_format(data_format, padding, rank), jnp.asarray(inputs)
    window, step = int_tuple(pool_size, rank, "pool_size"), int_tuple(strides, rank, "strides")
    if op is jax.lax.max:
        return convolution.max_pool(inputs, window, step, pad)
    return jax.lax.reduce_window(inputs, init_value, op, (1, *window, 1), (1, *step, 1), pad)


def _average(rank, inputs, pool_size, strides, padding, data_format):
    # With "same" padding the mean is over the valid entries only, as TF.
    total = _pool(rank, inputs, pool_size, strides, padding, data_format, 0.0, jax.lax.add)
    ones = jnp.ones(jnp.shape(inputs)[:-1] + (1,), total.dtype)
    count = _pool(rank, ones, pool_size, strides, padding, data_format, 0.0, jax.lax.add)
    return total / count


def max_pooling1d(
    inputs,
    pool_size,
    strides,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> jax.Array:
    """Max pooling over ``[batch, width, channels]`` (``tf.compat.v1.layers.max_pooling1d``;
    ``pool_size`` and ``strides`` an int or a 1-tuple, no defaults, as TF)."""
    del name
    return _pool(1, inputs, pool_size, strides, padding, data_format, -jnp.inf, jax.lax.max)


def max_pooling2d(
    inputs,
    pool_size,
    strides,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> jax.Array:
    """Max pooling over NHWC inputs (``tf.compat.v1.layers.max_pooling2d``).

    Args:
      inputs: ``[batch, height, width, channels]``.
      pool_size, strides: an int or a pair (no defaults, as TF).
      padding: ``"valid"`` or ``"same"``.

    Returns:
      ``[batch, out_height, out_width, channels]``.
    """
    del name
    return _pool(2, inputs, pool_size, strides, padding, data_format, -jnp.inf, jax.lax.max)


def average_pooling1d(
    inputs,
    pool_size,
    strides,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> jax.Array:
    """Average pooling over ``[batch, width, channels]``
    (``tf.compat.v1.layers.average_pooling1d``); with ``"same"`` padding the average is over
    the valid entries only, as TF."""
    del name
    return _average(1, inputs, pool_size, strides, padding, data_format)


def average_pooling2d(
    inputs,
    pool_size,
    strides,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
):
    """Average pooling over NHWC inputs (``tf.compat.v1.layers.average_pooling2d``); with
    ``"same"`` padding the average is over the valid entries only, as TF."""
    del name
    return _average(2, inputs, pool_size, strides, padding, data_format)
