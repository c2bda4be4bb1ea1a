"""``import estimator.compat.v1 as tf``: TF 1's API for Estimator programs, on JAX.

Replace ``import tensorflow.compat.v1 as tf`` (or ``import tensorflow as tf`` in TF 1
code, with ``import estimator.compat as tf``) and an Estimator program runs on jax-estimator
unchanged::

    import estimator.compat.v1 as tf

    def my_model(features, labels, mode, params):
        net = tf.feature_column.input_layer(features, params["feature_columns"])
        net = tf.layers.dense(net, 10, activation=tf.nn.relu)
        logits = tf.layers.dense(net, 3)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        accuracy = tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, 1))
        tf.summary.scalar("accuracy", accuracy[1])
        train_op = tf.train.AdagradOptimizer(0.1).minimize(
            loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, train_op=train_op, eval_metric_ops={"accuracy": accuracy})

It is a thin namespace of functions mapping TF 1 names, arguments and defaults onto
``jax.numpy``, ``jax.nn``, optax and ``estimator``: no graph, no sessions, no tensors of
its own (values are jax arrays; strings stay NumPy arrays on the host). What that changes
for TF 1 code is said where it happens; the main points:

* ``tf.shape(x)`` is static (a NumPy vector); ``x.get_shape()`` and other ``tf.Tensor``
  methods do not exist on jax arrays (use ``x.shape``).
* ``optimizer.minimize(loss)`` returns an optax transformation the Estimator applies
  (``tf.train``); ``compute_gradients`` returns symbolic gradients.
* ``tf.metrics.*`` return ``(value, update_op)`` pairs backed by streaming metrics.
* ``control_dependencies`` / ``UPDATE_OPS`` are no-ops (batch norm updates itself).
* ``tf.Session``, ``tf.get_default_graph`` and ``tf.reset_default_graph`` serve a
  program's epilogue only (``_session``); ``tf.__version__`` is the TF 1 API level
  followed (``1.15``).
* A symbol outside the covered surface raises
  :class:`~estimator.compat.UnsupportedSymbolError` naming it and its replacement;
  ``python -m estimator.compat.check program.py`` lists what a program uses.

**Layering.** TF's namespace includes canned estimators and feature columns
(``tf.estimator.LinearClassifier``, ``tf.feature_column``), which live in ``canned``. So
``estimator.compat`` is the top layer of the package, above ``canned``, and imports it
plainly; the rest of ``estimator`` never imports ``canned`` (``docs/architecture.md``,
``tests/test_layout.py``).
"""

from __future__ import annotations

import jax

from estimator.compat._unsupported import UnsupportedSymbolError as UnsupportedSymbolError
from estimator.compat._unsupported import module_getattr as _module_getattr
from estimator.compat.v1 import _array_ops, _framework, _math_ops
from estimator.compat.v1 import app as app
from estimator.compat.v1 import contrib as contrib
from estimator.compat.v1 import data as data
from estimator.compat.v1 import dtypes as dtypes
from estimator.compat.v1 import errors as errors
from estimator.compat.v1 import estimator as estimator
from estimator.compat.v1 import gfile as gfile
from estimator.compat.v1 import initializers as initializers
from estimator.compat.v1 import io as io
from estimator.compat.v1 import keras as keras
from estimator.compat.v1 import layers as layers
from estimator.compat.v1 import logging as logging
from estimator.compat.v1 import losses as losses
from estimator.compat.v1 import math as math
from estimator.compat.v1 import metrics as metrics
from estimator.compat.v1 import nn as nn
from estimator.compat.v1 import python_io as python_io
from estimator.compat.v1 import random as random
from estimator.compat.v1 import saved_model as saved_model
from estimator.compat.v1 import strings as strings
from estimator.compat.v1 import summary as summary
from estimator.compat.v1 import tpu as tpu
from estimator.compat.v1 import train as train
from estimator.compat.v1._canned import feature_column as feature_column
from estimator.compat.v1._config import ConfigProto as ConfigProto
from estimator.compat.v1._config import GPUOptions as GPUOptions
from estimator.compat.v1._config import GraphOptions as GraphOptions
from estimator.compat.v1._config import OptimizerOptions as OptimizerOptions
from estimator.compat.v1._graph import GraphKeys as GraphKeys
from estimator.compat.v1._graph import add_to_collection as add_to_collection
from estimator.compat.v1._session import Session as Session
from estimator.compat.v1._session import get_default_graph as get_default_graph
from estimator.compat.v1._session import reset_default_graph as reset_default_graph
from estimator.compat.v1.initializers import constant_initializer as constant_initializer
from estimator.compat.v1.initializers import (
    glorot_normal_initializer as glorot_normal_initializer,
)
from estimator.compat.v1.initializers import (
    glorot_uniform_initializer as glorot_uniform_initializer,
)
from estimator.compat.v1.initializers import ones_initializer as ones_initializer
from estimator.compat.v1.initializers import (
    random_normal_initializer as random_normal_initializer,
)
from estimator.compat.v1.initializers import (
    random_uniform_initializer as random_uniform_initializer,
)
from estimator.compat.v1.initializers import (
    truncated_normal_initializer as truncated_normal_initializer,
)
from estimator.compat.v1.initializers import (
    variance_scaling_initializer as variance_scaling_initializer,
)
from estimator.compat.v1.initializers import zeros_initializer as zeros_initializer
from estimator.compat.v1.io import FixedLenFeature as FixedLenFeature
from estimator.compat.v1.io import FixedLenSequenceFeature as FixedLenSequenceFeature
from estimator.compat.v1.io import SparseFeature as SparseFeature
from estimator.compat.v1.io import VarLenFeature as VarLenFeature
from estimator.compat.v1.io import decode_csv as decode_csv
from estimator.compat.v1.io import parse_example as parse_example
from estimator.compat.v1.io import parse_single_example as parse_single_example
from estimator.compat.v1.io import parse_single_sequence_example as parse_single_sequence_example
from estimator.compat.v1.strings import as_string as as_string
from estimator.compat.v1.strings import regex_full_match as regex_full_match
from estimator.compat.v1.strings import string_split as string_split
from estimator.compat.v1.summary import Summary as Summary
from estimator.compat.v1.train._optimizers import gradients as gradients

flags = app.flags  # tf.flags: absl's flags, as TF's

#: The TF 1 API level this namespace follows (TF's ``tf.__version__``, ``tf.VERSION``).
__version__ = VERSION = "1.15.0"

# TF 1's top-level names of tf.strings ops.
string_join = strings.join
string_strip = strings.strip
string_to_hash_bucket_fast = strings.to_hash_bucket_fast
string_to_number = strings.to_number

print = _framework.print_  # noqa: A001 (TF's names)
tuple = _framework.tuple_  # noqa: A001

#: ``tf.Tensor``: what ``isinstance(x, tf.Tensor)`` checks (jax arrays, traced ones too).
Tensor = jax.Array

# The ops of the private modules, under their TF names (``tf.reshape``, ``tf.reduce_mean``,
# ``tf.get_variable``, ...): each module's ``__all__`` is its part of the namespace.
_OPS = [_array_ops, _math_ops, _framework]
for _module in _OPS:
    for _name in _module.__all__:
        if _name not in ("print_", "tuple_"):
            globals()[_name] = getattr(_module, _name)
for _name in dtypes.__all__:
    globals()[_name] = getattr(dtypes, _name)

_MODULES = [
    "app",
    "contrib",
    "data",
    "dtypes",
    "errors",
    "estimator",
    "feature_column",
    "gfile",
    "initializers",
    "io",
    "keras",
    "layers",
    "logging",
    "losses",
    "math",
    "metrics",
    "nn",
    "python_io",
    "random",
    "saved_model",
    "strings",
    "summary",
    "tpu",
    "train",
]

__all__ = sorted(
    {
        *_MODULES,
        *(n for m in _OPS for n in m.__all__ if n not in ("print_", "tuple_")),
        *dtypes.__all__,
        "print",
        "tuple",
        "Tensor",
        "GraphKeys",
        "Session",
        "Summary",
        "VERSION",
        "get_default_graph",
        "reset_default_graph",
        "string_split",
        "ConfigProto",
        "GPUOptions",
        "GraphOptions",
        "OptimizerOptions",
        "flags",
        "add_to_collection",
        "decode_csv",
        "FixedLenFeature",
        "FixedLenSequenceFeature",
        "SparseFeature",
        "VarLenFeature",
        "parse_example",
        "parse_single_example",
        "parse_single_sequence_example",
        "gradients",
        "as_string",
        "string_join",
        "regex_full_match",
        "string_strip",
        "string_to_hash_bucket_fast",
        "string_to_number",
        "UnsupportedSymbolError",
        "constant_initializer",
        "glorot_normal_initializer",
        "glorot_uniform_initializer",
        "ones_initializer",
        "random_normal_initializer",
        "random_uniform_initializer",
        "truncated_normal_initializer",
        "variance_scaling_initializer",
        "zeros_initializer",
    }
)

_unsupported_getattr = _module_getattr("tf", __name__)


def __getattr__(name: str):
    if name == "compat":
        # tf.compat.v1.X in a program that imports this module as tf (TF 2 code spelled
        # tf.compat.v1 everywhere): the package's tf.compat namespace, whose v1 is this module.
        import estimator.compat  # deferred: estimator.compat imports this module

        return estimator.compat.compat
    return _unsupported_getattr(name)


def __dir__() -> list[str]:
    return list(__all__)
