"""Core layers: ``dense``, ``dropout``, ``flatten`` and ``embedding_lookup``
(``tf.compat.v1.layers``' ``core`` module; the embedding lookup is ``tf.nn``'s)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from estimator import initializers as init
from estimator.layers._utils import activity, constrained, layer_name
from estimator.model import dtype_policy
from estimator.model.input_checks import check_ids
from estimator.model.rows import lookup_rows
from estimator.model.variables import current_frame, get_variable, next_rng_key, variable_scope

__all__ = ["dense", "dropout", "flatten", "embedding_lookup"]


def dense(
    inputs: jax.typing.ArrayLike,
    units: int,
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
    """Densely connected layer: ``activation(inputs @ kernel + bias)``
    (``tf.compat.v1.layers.dense``).

    Args:
      inputs: ``[..., in]`` floating point.
      units: output size.
      activation: e.g. ``jax.nn.relu``; None is linear.
      use_bias: add ``bias``.
      kernel_initializer: default ``glorot_uniform``; bias_initializer default zeros.
      kernel_regularizer, bias_regularizer: ``array -> scalar``, summed into
        ``estimator.get_regularization_loss()``.
      trainable: whether ``train_op`` updates the variables.
      name: the layer's scope; default ``dense``, ``dense_1``, ...

    Returns:
      ``[..., units]``.

    Variables:
      ``<name>/kernel`` ``[in, units]`` and ``<name>/bias`` ``[units]``.
    """
    options = KernelOptions.of(locals())
    del reuse
    inputs = jnp.asarray(inputs)
    if inputs.ndim < 1 or inputs.shape[-1] is None:
        raise ValueError(
            f"The last dimension of the inputs to `Dense` should be defined. Found shape "
            f"{inputs.shape}."
        )
    dtype = inputs.dtype if jnp.issubdtype(inputs.dtype, jnp.floating) else jnp.float32
    return kernel_layer(
        layer_name(name, "dense"),
        (inputs.shape[-1], units),
        dtype,
        lambda kernel: jnp.asarray(inputs, kernel.dtype) @ kernel,
        options,
    )


class KernelOptions(NamedTuple):
    """The arguments every kernel layer (``dense``, ``conv1d``, ``conv2d``) takes about its
    variables and output, with TF's names and meanings."""

    activation: Callable | None
    use_bias: bool
    kernel_initializer: Any
    bias_initializer: Any
    kernel_regularizer: Any
    bias_regularizer: Any
    activity_regularizer: Any
    kernel_constraint: Any
    bias_constraint: Any
    trainable: bool

    @classmethod
    def of(cls, arguments: dict) -> KernelOptions:
        """The options among a layer function's arguments (its ``locals()`` on entry)."""
        return cls(**{field: arguments[field] for field in cls._fields})


def kernel_layer(scope, kernel_shape, dtype, apply, options: KernelOptions) -> jax.Array:
    """``activation(apply(kernel) + bias)`` with TF's ``<scope>/kernel`` and ``<scope>/bias``
    (the bias as the kernel's last dimension; glorot-uniform and zero defaults). Under a
    mixed dtype policy the variables are float32 and ``apply`` gets the kernel in the
    compute dtype (``estimator.model.dtype_policy``)."""
    with variable_scope(scope):
        kernel = get_variable(
            "kernel",
            kernel_shape,
            dtype_policy.variable_dtype(dtype),
            options.kernel_initializer or init.glorot_uniform_initializer(),
            options.kernel_regularizer,
            options.trainable,
        )
        outputs = apply(dtype_policy.autocast(constrained(kernel, options.kernel_constraint)))
        if options.use_bias:
            bias = get_variable(
                "bias",
                (kernel_shape[-1],),
                kernel.dtype,
                options.bias_initializer or init.zeros_initializer(),
                options.bias_regularizer,
                options.trainable,
            )
            outputs = outputs + dtype_policy.autocast(constrained(bias, options.bias_constraint))
    if options.activation is not None:
        outputs = options.activation(outputs)
    activity(options.activity_regularizer, outputs)
    return outputs


def dropout(
    inputs: jax.typing.ArrayLike,
    rate: float = 0.5,
    noise_shape: Sequence[int] | None = None,
    seed=None,
    training: bool | jax.Array = False,
    name: str | None = None,
) -> jax.Array:
    """Randomly zeroes ``rate`` of the inputs and scales the rest by ``1 / (1 - rate)``
    when ``training`` (``tf.compat.v1.layers.dropout``; note TF's default
    ``training=False``: pass ``training=(mode == ModeKeys.TRAIN)``).

    Args:
      inputs: any shape.
      rate: the fraction dropped, in ``[0, 1)``.
      noise_shape: shape of the keep mask, broadcast to the inputs (TF's meaning).
      seed: ignored; keys come from ``estimator.next_rng_key()``.
      training: a Python bool, or a boolean scalar array.
      name: ignored (dropout has no variables).

    Returns:
      Same shape as ``inputs``.

    Raises:
      ValueError: for a rate outside ``[0, 1)``.
    """
    del seed, name
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"rate must be a scalar tensor or a float in the range [0, 1), got {rate}")
    inputs = jnp.asarray(inputs)
    if training is False or rate == 0.0:
        return inputs
    shape = inputs.shape if noise_shape is None else tuple(noise_shape)
    keep = jax.random.bernoulli(next_rng_key(), 1.0 - rate, shape)
    dropped = jnp.where(keep, inputs / (1.0 - rate), jnp.zeros((), inputs.dtype))
    if training is True:
        return dropped
    return jnp.where(training, dropped, inputs)


def flatten(
    inputs: jax.typing.ArrayLike, name: str | None = None, data_format: str = "channels_last"
) -> jax.Array:
    """``[batch, d1, d2, ...] -> [batch, d1 * d2 * ...]`` (``tf.compat.v1.layers.flatten``)."""
    del name, data_format
    inputs = jnp.asarray(inputs)
    return inputs.reshape(inputs.shape[0], math.prod(inputs.shape[1:]))


def _check_ids(params, ids) -> None:
    """The range check of ``embedding_lookup``'s ids (``estimator.model.input_checks``)."""
    frame = current_frame()
    rows = int(jnp.shape(params)[0])
    name = frame.by_id.get(id(params)) if frame is not None else None
    table = name or f"a table of shape {list(jnp.shape(params))}"
    if not isinstance(ids, jax.core.Tracer):
        check_ids(ids, rows, table)
    elif frame is not None and frame.input_checks is not None and id(ids) in frame.input_paths:
        frame.input_checks.add(frame.input_paths[id(ids)], rows, table)


def embedding_lookup(
    params: jax.typing.ArrayLike | None,
    ids: jax.typing.ArrayLike,
    max_norm: float | None = None,
    *,
    vocab_size: int | None = None,
    dimension: int | None = None,
    initializer=None,
    name: str | None = None,
) -> jax.Array:
    """Rows of an embedding table (``tf.nn.embedding_lookup``).

    Either pass the table (``params``, e.g. from ``get_variable``), or pass
    ``params=None`` with ``vocab_size`` and ``dimension`` to create
    ``<name>/embeddings`` (default name ``embedding``, ``embedding_1``, ...; initializer
    default ``random_uniform(-0.05, 0.05)``, Keras' ``Embedding`` default).

    Args:
      params: ``[vocab_size, dimension]`` or None.
      ids: integer array of any shape, values in ``[0, vocab_size)``. An id outside it is
        an error, as TF's: checked at once for concrete ids, and on the host before each
        step for ids that are a feature as ``model_fn`` received it (``features["ids"]``);
        ids computed inside ``model_fn`` are not checked (an out-of-range one reads a row
        of zeros: a compiled step cannot raise). See ``estimator.model.input_checks``.
      max_norm: clip each looked-up row to this L2 norm (TF's ``max_norm``).

    Returns:
      ``ids.shape + [dimension]``.

    In training, a table read only through lookups is updated row by row when ``train_op``
    allows it (``est.sparse_updates``): only the looked-up rows and their optimizer slots
    change, as with TF's sparse gradients (``estimator.model.rows``).

    Raises:
      ValueError: when neither a table nor its size is given; an id outside ``[0,
        vocab_size)`` (TF's message first, then the table's name; for a feature, when the
        batch is prepared).
    """
    if params is None:
        if vocab_size is None or dimension is None:
            raise ValueError(
                "embedding_lookup needs either the table (params) or vocab_size and dimension "
                "to create one."
            )
        with variable_scope(layer_name(name, "embedding")):
            params = get_variable(
                "embeddings",
                (vocab_size, dimension),
                jnp.float32,
                initializer or init.random_uniform_initializer(-0.05, 0.05),
            )
    _check_ids(params, ids)
    rows = lookup_rows(params, ids)
    if max_norm is not None:
        norms = jnp.linalg.norm(rows, axis=-1, keepdims=True)
        rows = rows * jnp.minimum(1.0, max_norm / jnp.maximum(norms, 1e-12))
    return dtype_policy.autocast(rows)  # rows, not the table: sparse updates still apply
