"""Convolution layers: ``conv1d`` and ``conv2d`` (``tf.compat.v1.layers``'
``convolutional`` module) over ``estimator.layers.convolution``'s kernels."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from estimator.layers import convolution
from estimator.layers._utils import check_format, int_tuple, layer_name
from estimator.layers.core import KernelOptions, kernel_layer

__all__ = ["conv1d", "conv2d"]


def _conv(rank: int, default_name: str, args: dict) -> jax.Array:
    """The convolution layers of any rank: TF's variables, checks and messages. ``args``
    are the layer function's arguments (``conv1d``'s or ``conv2d``'s ``locals()``)."""
    pad = check_format(args["data_format"], args["padding"], rank)
    inputs = jnp.asarray(args["inputs"])
    if inputs.ndim != rank + 2:
        raise ValueError(
            f"Input 0 of layer {default_name} is incompatible with the layer: expected "
            f"ndim={rank + 2}, found ndim={inputs.ndim}. Full shape received: {inputs.shape}"
        )
    window = int_tuple(args["kernel_size"], rank, "kernel_size")
    strides = int_tuple(args["strides"], rank, "strides")
    dilation_rate = int_tuple(args["dilation_rate"], rank, "dilation_rate")
    return kernel_layer(
        layer_name(args["name"], default_name),
        window + (inputs.shape[-1], args["filters"]),
        jnp.float32,
        lambda kernel: convolution.conv(
            inputs.astype(kernel.dtype),
            kernel,
            strides,
            pad,
            dilation_rate,
        ),
        KernelOptions.of(args),
    )


def conv1d(
    inputs: jax.typing.ArrayLike,
    filters: int,
    kernel_size: int | Sequence[int],
    strides: int | Sequence[int] = 1,
    padding: str = "valid",
    data_format: str = "channels_last",
    dilation_rate: int | Sequence[int] = 1,
    activation: Callable | None = None,
    use_bias: bool = True,
    kernel_initializer=None,
    bias_initializer=None,
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    kernel_constraint=None,
    bias_constraint=None,
    trainable: bool = True,
    name: str | None = None,
    reuse=None,
) -> jax.Array:
    """1-D convolution over ``[batch, width, channels]`` (``tf.compat.v1.layers.conv1d``).

    Args:
      inputs: ``[batch, width, channels]``.
      filters: output channels.
      kernel_size, strides, dilation_rate: an int or a 1-tuple.
      padding: ``"valid"`` or ``"same"`` (TF's meaning).
      data_format: only ``"channels_last"``.

    Returns:
      ``[batch, out_width, filters]``.

    Variables:
      ``<name>/kernel`` ``[kernel_size, channels, filters]``, ``<name>/bias`` ``[filters]``;
      default name ``conv1d``, ``conv1d_1``, ...

    Raises:
      ValueError: inputs that are not 3-D (TF's message), a bad padding or data format.
    """
    return _conv(1, "conv1d", locals())


def conv2d(
    inputs: jax.typing.ArrayLike,
    filters: int,
    kernel_size: int | Sequence[int],
    strides: int | Sequence[int] = (1, 1),
    padding: str = "valid",
    data_format: str = "channels_last",
    dilation_rate: int | Sequence[int] = (1, 1),
    activation: Callable | None = None,
    use_bias: bool = True,
    kernel_initializer=None,
    bias_initializer=None,
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    kernel_constraint=None,
    bias_constraint=None,
    trainable: bool = True,
    name: str | None = None,
    reuse=None,
) -> jax.Array:
    """2-D convolution over NHWC inputs (``tf.compat.v1.layers.conv2d``).

    Args:
      inputs: ``[batch, height, width, channels]``.
      filters: output channels.
      kernel_size, strides, dilation_rate: an int or a pair.
      padding: ``"valid"`` or ``"same"`` (TF's meaning).
      data_format: only ``"channels_last"``.

    Returns:
      ``[batch, out_height, out_width, filters]``.

    Variables:
      ``<name>/kernel`` ``[kh, kw, channels, filters]``, ``<name>/bias`` ``[filters]``;
      default name ``conv2d``, ``conv2d_1``, ...

    Raises:
      ValueError: inputs that are not 4-D (TF's message), a bad padding or data format.
    """
    return _conv(2, "conv2d", locals())
