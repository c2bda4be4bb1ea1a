"""``tf.layers`` (TF 1.15's ``tf.compat.v1.layers``): ``estimator.layers`` plus the 1-D
layers and TF's layer classes.

Functions keep TF's arguments, defaults and variable names (``dense/kernel``,
``conv2d_1/bias``, ``conv1d/kernel [width, in, filters]``). The classes (``tf.layers.Dense``,
``Conv2D``, ...) pick their name on the first call (``dense``, ``dense_1``, ... or the
``name`` given) and reuse it on later calls, so one layer object called twice shares its
variables, as in TF.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from estimator import convolution
from estimator import initializers as _init
from estimator.compat._unsupported import module_getattr
from estimator.layers import (
    average_pooling2d,
    batch_normalization,
    conv2d,
    dense,
    dropout,
    flatten,
    max_pooling2d,
)
from estimator.model.variables import get_variable, unique_name, variable_scope

__all__ = [
    "dense",
    "dropout",
    "batch_normalization",
    "conv1d",
    "conv2d",
    "max_pooling1d",
    "max_pooling2d",
    "average_pooling1d",
    "average_pooling2d",
    "flatten",
    "Layer",
    "Dense",
    "Dropout",
    "BatchNormalization",
    "Conv1D",
    "Conv2D",
    "MaxPooling1D",
    "MaxPooling2D",
    "AveragePooling1D",
    "AveragePooling2D",
    "Flatten",
]

__getattr__ = module_getattr("tf.layers", __name__)


def _one(value, what: str) -> int:
    if isinstance(value, int):
        return value
    value = tuple(int(v) for v in value)
    if len(value) != 1:
        raise ValueError(f"The `{what}` argument must be a tuple of 1 integer. Received: {value}")
    return value[0]


def _padding(padding: str, data_format: str) -> str:
    if data_format != "channels_last":
        raise ValueError(
            f"data_format={data_format!r} is not supported; use 'channels_last' (NWC) and "
            "transpose NCW inputs with tf.transpose(x, [0, 2, 1])."
        )
    padding = padding.upper()
    if padding not in ("VALID", "SAME"):
        raise ValueError(f"The `padding` argument must be 'valid' or 'same'. Received: {padding}")
    return padding


def conv1d(
    inputs,
    filters: int,
    kernel_size,
    strides=1,
    padding: str = "valid",
    data_format: str = "channels_last",
    dilation_rate=1,
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

    Returns:
      ``[batch, out_width, filters]``.

    Variables:
      ``<name>/kernel [kernel_size, channels, filters]``, ``<name>/bias [filters]``;
      default name ``conv1d``, ``conv1d_1``, ...

    Raises:
      ValueError: inputs that are not 3-D (TF's message), bad padding or data format.
    """
    del reuse
    pad = _padding(padding, data_format)
    inputs = jnp.asarray(inputs)
    if inputs.ndim != 3:
        raise ValueError(
            f"Input 0 of layer conv1d is incompatible with the layer: expected ndim=3, found "
            f"ndim={inputs.ndim}. Full shape received: {inputs.shape}"
        )
    width = _one(kernel_size, "kernel_size")
    with variable_scope(name if name is not None else unique_name("conv1d")):
        kernel = get_variable(
            "kernel",
            (width, inputs.shape[-1], filters),
            jnp.float32,
            kernel_initializer or _init.glorot_uniform_initializer(),
            kernel_regularizer,
            trainable,
        )
        if kernel_constraint is not None:
            kernel = kernel_constraint(kernel)
        outputs = convolution.conv(
            inputs.astype(kernel.dtype),
            kernel,
            (_one(strides, "strides"),),
            pad,
            (_one(dilation_rate, "dilation_rate"),),
        )
        if use_bias:
            bias = get_variable(
                "bias",
                (filters,),
                jnp.float32,
                bias_initializer or _init.zeros_initializer(),
                bias_regularizer,
                trainable,
            )
            outputs = outputs + (bias if bias_constraint is None else bias_constraint(bias))
    if activation is not None:
        outputs = activation(outputs)
    if activity_regularizer is not None:
        from estimator.model.variables import _frame

        _frame("layers").regularization.append(activity_regularizer(outputs))
    return outputs


def _pool1d(inputs, pool_size, strides, padding, data_format, init, reducer):
    pad = _padding(padding, data_format)
    window = (1, _one(pool_size, "pool_size"), 1)
    step = (1, _one(strides, "strides"), 1)
    return jax.lax.reduce_window(jnp.asarray(inputs), init, reducer, window, step, pad)


def max_pooling1d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """Max pooling over ``[batch, width, channels]`` (``tf.compat.v1.layers.max_pooling1d``)."""
    del name
    return _pool1d(inputs, pool_size, strides, padding, data_format, -jnp.inf, jax.lax.max)


def average_pooling1d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """Average pooling over ``[batch, width, channels]``; with "same" padding the mean is over
    the valid entries, as TF."""
    del name
    total = _pool1d(inputs, pool_size, strides, padding, data_format, 0.0, jax.lax.add)
    ones = jnp.ones(jnp.shape(inputs)[:2] + (1,), total.dtype)
    count = _pool1d(ones, pool_size, strides, padding, data_format, 0.0, jax.lax.add)
    return total / count


class Layer:
    """A TF layer object over one of the layer functions (``tf.layers.Layer``'s call style).

    The name is fixed on the first call inside a ``model_fn`` run (TF's auto-naming, or
    ``name``) and reused on later calls of the same object in that run, so the variables are
    shared.
    """

    _function: Callable = staticmethod(dense)
    _default_name = "dense"
    _has_variables = True

    def __init__(self, *args, name: str | None = None, **kwargs) -> None:
        self._args = args
        self._kwargs = kwargs
        self.name = name
        self._names: dict[int, str] = {}

    def __call__(self, inputs, training=None, **kwargs):
        call_kwargs = {**self._kwargs, **kwargs}
        if training is not None:
            call_kwargs["training"] = training
        if self._has_variables:
            from estimator.model.variables import _frame

            frame = _frame(f"tf.layers.{type(self).__name__}")
            key = id(frame)
            if key not in self._names:
                self._names = {key: self.name or unique_name(self._default_name)}
            call_kwargs["name"] = self._names[key]
        return type(self)._function(inputs, *self._args, **call_kwargs)

    apply = __call__


def _layer_class(name: str, function: Callable, default: str, has_variables=True) -> type:
    return type(
        name,
        (Layer,),
        {
            "_function": staticmethod(function),
            "_default_name": default,
            "_has_variables": has_variables,
            "__doc__": f"``tf.layers.{name}``: :func:`{function.__name__}` as a layer object.",
        },
    )


Dense = _layer_class("Dense", dense, "dense")
Conv1D = _layer_class("Conv1D", conv1d, "conv1d")
Conv2D = _layer_class("Conv2D", conv2d, "conv2d")
BatchNormalization = _layer_class("BatchNormalization", batch_normalization, "batch_normalization")
Dropout = _layer_class("Dropout", dropout, "dropout", has_variables=False)
Flatten = _layer_class("Flatten", flatten, "flatten", has_variables=False)
MaxPooling1D = _layer_class("MaxPooling1D", max_pooling1d, "max_pooling1d", False)
MaxPooling2D = _layer_class("MaxPooling2D", max_pooling2d, "max_pooling2d", False)
AveragePooling1D = _layer_class("AveragePooling1D", average_pooling1d, "average_pooling1d", False)
AveragePooling2D = _layer_class("AveragePooling2D", average_pooling2d, "average_pooling2d", False)
