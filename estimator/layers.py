"""``tf.compat.v1.layers`` as functions over ``estimator.get_variable``.

Each layer takes TF's arguments, with TF's defaults, and creates TF's variables under
TF's names: an unnamed layer is named ``dense``, ``dense_1``, ... in the current
``variable_scope`` (counts restart on every ``model_fn`` call); ``name="logits"`` gives
``logits/kernel`` and ``logits/bias``. Kernels default to ``glorot_uniform``, biases to
zeros. Layouts are TF's: ``[batch, ..., features]`` for dense, NHWC (``channels_last``)
for images, kernels ``[in, out]`` / ``[height, width, in, out]``.

Arguments that configure TF graph machinery (``kernel_constraint``, ``reuse``,
``activity_regularizer`` ...) are accepted; constraints are applied to the value read,
``activity_regularizer`` adds to ``estimator.get_regularization_loss()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from estimator import convolution
from estimator import initializers as init
from estimator.model import dtype_policy
from estimator.model.rows import lookup_rows
from estimator.model.variables import (
    _frame,
    assign,
    get_variable,
    next_rng_key,
    unique_name,
    variable_scope,
)

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
    "embedding_lookup",
]


def _layer_name(name: str | None, default: str) -> str:
    return name if name is not None else unique_name(default)


def _activity(regularizer, outputs) -> None:
    if regularizer is not None:
        _frame("layers").regularization.append(regularizer(outputs))


def _constrained(value, constraint):
    return value if constraint is None else constraint(value)


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
    del reuse
    inputs = jnp.asarray(inputs)
    if inputs.ndim < 1 or inputs.shape[-1] is None:
        raise ValueError(
            f"The last dimension of the inputs to `Dense` should be defined. Found shape "
            f"{inputs.shape}."
        )
    dtype = inputs.dtype if jnp.issubdtype(inputs.dtype, jnp.floating) else jnp.float32
    return _kernel_layer(
        _layer_name(name, "dense"),
        (inputs.shape[-1], units),
        dtype,
        lambda kernel: jnp.asarray(inputs, kernel.dtype) @ kernel,
        activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint, trainable,
    )  # fmt: skip


def _kernel_layer(scope, kernel_shape, dtype, apply, activation, use_bias, kernel_initializer,
                  bias_initializer, kernel_regularizer, bias_regularizer, activity_regularizer,
                  kernel_constraint, bias_constraint, trainable) -> jax.Array:  # fmt: skip
    """``activation(apply(kernel) + bias)`` with TF's ``<scope>/kernel`` and ``<scope>/bias``
    (the bias as the kernel's last dimension; glorot-uniform and zero defaults). Under a
    mixed dtype policy the variables are float32 and ``apply`` gets the kernel in the
    compute dtype (``estimator.model.dtype_policy``)."""
    with variable_scope(scope):
        kernel = get_variable(
            "kernel",
            kernel_shape,
            dtype_policy.variable_dtype(dtype),
            kernel_initializer or init.glorot_uniform_initializer(),
            kernel_regularizer,
            trainable,
        )
        outputs = apply(dtype_policy.autocast(_constrained(kernel, kernel_constraint)))
        if use_bias:
            bias = get_variable(
                "bias",
                (kernel_shape[-1],),
                kernel.dtype,
                bias_initializer or init.zeros_initializer(),
                bias_regularizer,
                trainable,
            )
            outputs = outputs + dtype_policy.autocast(_constrained(bias, bias_constraint))
    if activation is not None:
        outputs = activation(outputs)
    _activity(activity_regularizer, outputs)
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
    with variable_scope(_layer_name(name, "batch_normalization")) as scope:
        gamma = (
            _constrained(
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
            _constrained(
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


def _tuple(value, n: int, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        noun = "integer" if n == 1 else "integers"
        raise ValueError(f"The `{what}` argument must be a tuple of {n} {noun}. Received: {value}")
    return value


_LAYOUTS = {1: ("NWC", "(0, 2, 1)"), 2: ("NHWC", "(0, 2, 3, 1)")}


def _check_format(data_format: str, padding: str, rank: int = 2) -> str:
    if data_format != "channels_last":
        layout, perm = _LAYOUTS[rank]
        raise ValueError(
            f"data_format={data_format!r} is not supported; use 'channels_last' ({layout}) and "
            f"transpose channels-first inputs with jnp.transpose(x, {perm})."
        )
    padding = padding.upper()
    if padding not in ("VALID", "SAME"):
        raise ValueError(f"The `padding` argument must be 'valid' or 'same'. Received: {padding}")
    return padding


def _conv(rank: int, default_name: str, inputs, filters, kernel_size, strides, padding,
          data_format, dilation_rate, activation, use_bias, kernel_initializer,
          bias_initializer, kernel_regularizer, bias_regularizer, activity_regularizer,
          kernel_constraint, bias_constraint, trainable, name) -> jax.Array:  # fmt: skip
    """The convolution layers of any rank: TF's variables, checks and messages."""
    pad = _check_format(data_format, padding, rank)
    inputs = jnp.asarray(inputs)
    if inputs.ndim != rank + 2:
        raise ValueError(
            f"Input 0 of layer {default_name} is incompatible with the layer: expected "
            f"ndim={rank + 2}, found ndim={inputs.ndim}. Full shape received: {inputs.shape}"
        )
    window = _tuple(kernel_size, rank, "kernel_size")
    return _kernel_layer(
        _layer_name(name, default_name),
        window + (inputs.shape[-1], filters),
        jnp.float32,
        lambda kernel: convolution.conv(
            inputs.astype(kernel.dtype),
            kernel,
            _tuple(strides, rank, "strides"),
            pad,
            _tuple(dilation_rate, rank, "dilation_rate"),
        ),
        activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint, trainable,
    )  # fmt: skip


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
    del reuse
    return _conv(1, "conv1d", inputs, filters, kernel_size, strides, padding, data_format,
                 dilation_rate, activation, use_bias, kernel_initializer, bias_initializer,
                 kernel_regularizer, bias_regularizer, activity_regularizer, kernel_constraint,
                 bias_constraint, trainable, name)  # fmt: skip


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
    del reuse
    return _conv(2, "conv2d", inputs, filters, kernel_size, strides, padding, data_format,
                 dilation_rate, activation, use_bias, kernel_initializer, bias_initializer,
                 kernel_regularizer, bias_regularizer, activity_regularizer, kernel_constraint,
                 bias_constraint, trainable, name)  # fmt: skip


def _pool(rank, inputs, pool_size, strides, padding, data_format, init_value, op):
    pad, inputs = _check_format(data_format, padding, rank), jnp.asarray(inputs)
    window, step = _tuple(pool_size, rank, "pool_size"), _tuple(strides, rank, "strides")
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


def flatten(
    inputs: jax.typing.ArrayLike, name: str | None = None, data_format: str = "channels_last"
) -> jax.Array:
    """``[batch, d1, d2, ...] -> [batch, d1 * d2 * ...]`` (``tf.compat.v1.layers.flatten``)."""
    del name, data_format
    inputs = jnp.asarray(inputs)
    return inputs.reshape(inputs.shape[0], math.prod(inputs.shape[1:]))


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
      ids: integer array of any shape, values in ``[0, vocab_size)``; other values (-1 for
        "none") give rows of zeros (TF raises on them; a compiled step cannot).
      max_norm: clip each looked-up row to this L2 norm (TF's ``max_norm``).

    Returns:
      ``ids.shape + [dimension]``.

    In training, a table read only through lookups is updated row by row when ``train_op``
    allows it (``est.sparse_updates``): only the looked-up rows and their optimizer slots
    change, as with TF's sparse gradients (``estimator.model.rows``).

    Raises:
      ValueError: when neither a table nor its size is given.
    """
    if params is None:
        if vocab_size is None or dimension is None:
            raise ValueError(
                "embedding_lookup needs either the table (params) or vocab_size and dimension "
                "to create one."
            )
        with variable_scope(_layer_name(name, "embedding")):
            params = get_variable(
                "embeddings",
                (vocab_size, dimension),
                jnp.float32,
                initializer or init.random_uniform_initializer(-0.05, 0.05),
            )
    rows = lookup_rows(params, ids)
    if max_norm is not None:
        norms = jnp.linalg.norm(rows, axis=-1, keepdims=True)
        rows = rows * jnp.minimum(1.0, max_norm / jnp.maximum(norms, 1e-12))
    return dtype_policy.autocast(rows)  # rows, not the table: sparse updates still apply
