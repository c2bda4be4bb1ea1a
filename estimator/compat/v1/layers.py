"""``tf.layers`` (TF 1.15's ``tf.compat.v1.layers``): ``estimator.layers`` and TF's layer
classes.

Functions keep TF's arguments, defaults and variable names (``dense/kernel``,
``conv2d_1/bias``, ``conv1d/kernel [width, in, filters]``). The classes (``tf.layers.Dense``,
``Conv2D``, ...) pick their name on the first call (``dense``, ``dense_1``, ... or the
``name`` given) and reuse it on later calls, so one layer object called twice shares its
variables, as in TF.
"""

from __future__ import annotations

from collections.abc import Callable

from estimator.compat._unsupported import module_getattr
from estimator.layers import (
    average_pooling1d,
    average_pooling2d,
    batch_normalization,
    conv1d,
    conv2d,
    dense,
    dropout,
    flatten,
    max_pooling1d,
    max_pooling2d,
)
from estimator.model.variables import unique_name

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
            from estimator.model.variables import require_frame

            frame = require_frame(f"tf.layers.{type(self).__name__}")
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
