"""``tf.nn`` (TF 1.15's ``tf.compat.v1.nn``): activations, losses on logits, dropout,
embedding lookups, the low-level conv/pool ops, on ``jax.nn`` / ``jax.lax``, and TF 1's
recurrent cells (``rnn_cell``) with ``dynamic_rnn`` / ``bidirectional_dynamic_rnn``
(``_rnn``).

Numerics follow TF's kernels: ``sigmoid_cross_entropy_with_logits`` is
``max(x, 0) - x z + log(1 + exp(-|x|))``; the softmax cross entropies are
``logsumexp(logits) - Σ labels · logits``; ``l2_normalize`` divides by
``sqrt(max(Σ x², epsilon))``. ``dropout`` takes TF 1's ``keep_prob`` (or ``rate``) and
draws its mask from ``estimator.next_rng_key()`` (inside ``model_fn``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from estimator import layers as _layers
from estimator.compat._unsupported import module_getattr
from estimator.compat.v1 import rnn_cell as rnn_cell
from estimator.compat.v1._base import axis_arg, op
from estimator.compat.v1._math_ops import in_top_k, sigmoid, softplus, tanh, top_k
from estimator.compat.v1._rnn import bidirectional_dynamic_rnn as bidirectional_dynamic_rnn
from estimator.compat.v1._rnn import dynamic_rnn as dynamic_rnn
from estimator.compat.v1.errors import raising_tf_errors
from estimator.layers import convolution
from estimator.model.variables import next_rng_key

__all__ = [
    "rnn_cell",
    "dynamic_rnn",
    "bidirectional_dynamic_rnn",
    "relu",
    "relu6",
    "elu",
    "selu",
    "leaky_relu",
    "crelu",
    "sigmoid",
    "tanh",
    "softplus",
    "softsign",
    "swish",
    "softmax",
    "log_softmax",
    "l2_normalize",
    "l2_loss",
    "dropout",
    "embedding_lookup",
    "bias_add",
    "xw_plus_b",
    "sparse_softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "sigmoid_cross_entropy_with_logits",
    "weighted_cross_entropy_with_logits",
    "moments",
    "batch_normalization",
    "conv1d",
    "conv2d",
    "max_pool",
    "avg_pool",
    "top_k",
    "in_top_k",
    "zero_fraction",
]

__getattr__ = module_getattr("tf.nn", __name__)


def _unary(fn):
    @op
    def wrapper(features, name=None):
        return fn(jnp.asarray(features))

    wrapper.__name__ = fn.__name__
    return wrapper


relu = _unary(jax.nn.relu)
relu6 = _unary(jax.nn.relu6)
elu = _unary(jax.nn.elu)
selu = _unary(jax.nn.selu)
softsign = _unary(jax.nn.soft_sign)


@op
def leaky_relu(features, alpha=0.2, name=None):
    """``tf.nn.leaky_relu`` (TF's default slope 0.2)."""
    return jax.nn.leaky_relu(jnp.asarray(features), alpha)


@op
def crelu(features, name=None, axis=-1):
    """``tf.nn.crelu``: ``concat([relu(x), relu(-x)], axis)``."""
    x = jnp.asarray(features)
    return jnp.concatenate([jax.nn.relu(x), jax.nn.relu(-x)], axis=axis)


@op
def swish(features, beta=1.0, name=None):
    """``tf.nn.swish``: ``x * sigmoid(beta * x)``."""
    x = jnp.asarray(features)
    return x * jax.nn.sigmoid(beta * x)


@op
def softmax(logits, axis=None, name=None, dim=None):
    """``tf.nn.softmax`` over ``axis`` (default the last; ``dim`` is TF 1's alias)."""
    axis = axis_arg(axis, dim, "dim")
    return jax.nn.softmax(jnp.asarray(logits), axis=-1 if axis is None else axis)


@op
def log_softmax(logits, axis=None, name=None, dim=None):
    """``tf.nn.log_softmax``."""
    axis = axis_arg(axis, dim, "dim")
    return jax.nn.log_softmax(jnp.asarray(logits), axis=-1 if axis is None else axis)


@op
def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """``tf.nn.l2_normalize``: ``x / sqrt(max(Σ x², epsilon))`` over ``axis``."""
    axis = axis_arg(axis, dim, "dim")
    x = jnp.asarray(x)
    square_sum = jnp.sum(jnp.square(x), axis=axis, keepdims=True)
    return x * jax.lax.rsqrt(jnp.maximum(square_sum, epsilon))


@op
def l2_loss(t, name=None):
    """``tf.nn.l2_loss``: ``Σ t² / 2``."""
    return jnp.sum(jnp.square(jnp.asarray(t))) / 2


@op
def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """``tf.nn.dropout`` (TF 1): keeps each entry with probability ``keep_prob`` (or
    ``1 - rate``) and scales it by ``1 / keep_prob``. Always active, as TF's op: pass
    ``keep_prob=1.0`` outside training. Keys come from ``estimator.next_rng_key()``.

    Raises:
      ValueError: both or neither of ``keep_prob`` and ``rate``; a rate outside [0, 1).
    """
    del seed
    if (keep_prob is None) == (rate is None):
        raise ValueError("You must provide a rate to dropout (or keep_prob, but not both).")
    rate = 1.0 - keep_prob if rate is None else rate
    if isinstance(rate, (int, float)):
        if not 0.0 <= rate < 1.0:
            raise ValueError(
                f"rate must be a scalar tensor or a float in the range [0, 1), got {rate}"
            )
        if rate == 0.0:
            return jnp.asarray(x)
    x = jnp.asarray(x)
    shape = x.shape if noise_shape is None else tuple(int(d) for d in noise_shape)
    keep = jax.random.bernoulli(next_rng_key(), 1.0 - rate, shape)
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros((), x.dtype))


@op
def embedding_lookup(
    params, ids, partition_strategy="mod", name=None, validate_indices=True, max_norm=None
):
    """``tf.nn.embedding_lookup``: ``params[ids]`` (a list of shards is concatenated first,
    which equals TF's ``"div"`` strategy; ``"mod"`` with several shards is refused).

    Ids are checked against the table's rows as ``estimator.layers.embedding_lookup`` says
    (concrete ids at once, a feature's ids on the host before each step, ids computed in
    ``model_fn`` not at all).

    Raises:
      tf.errors.InvalidArgumentError: a concrete id outside ``[0, rows)`` (TF's message
        first; also an ``estimator.model.input_checks.IdRangeError``).
    """
    if isinstance(params, (list, tuple)):
        if len(params) > 1 and partition_strategy == "mod":
            raise ValueError(
                "embedding_lookup over several shards with partition_strategy='mod' is not "
                "supported: use one table (RunConfig(variable_partitions=...) shards it) or "
                "partition_strategy='div'."
            )
        params = jnp.concatenate([jnp.asarray(p) for p in params], axis=0)
    with raising_tf_errors():
        return _layers.embedding_lookup(params, ids, max_norm=max_norm)


@op
def bias_add(value, bias, data_format=None, name=None):
    """``tf.nn.bias_add`` (channels last; ``"NCHW"`` adds along axis 1)."""
    value, bias = jnp.asarray(value), jnp.asarray(bias)
    if data_format is not None and data_format.startswith("NC"):
        return value + bias.reshape((1, -1) + (1,) * (value.ndim - 2))
    return value + bias


@op
def xw_plus_b(x, weights, biases, name=None):
    """``tf.nn.xw_plus_b``: ``x @ weights + biases``."""
    return jnp.asarray(x) @ jnp.asarray(weights) + jnp.asarray(biases)


def _check_sentinel(_sentinel, fn):
    if _sentinel is not None:
        raise ValueError(f"Only call `{fn}` with named arguments (labels=..., logits=..., ...)")


@op
def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """``tf.nn.sparse_softmax_cross_entropy_with_logits``: ``[batch]`` losses of integer
    ``labels [batch]`` against ``logits [batch, classes]``."""
    _check_sentinel(_sentinel, "sparse_softmax_cross_entropy_with_logits")
    logits = jnp.asarray(logits)
    labels = jnp.asarray(labels, jnp.int32)
    if labels.ndim != logits.ndim - 1:
        raise ValueError(
            f"Rank mismatch: Rank of labels (received {labels.ndim}) should equal rank of logits "
            f"minus 1 (received {logits.ndim})."
        )
    # The label's logit as a masked sum, not a gather: elementwise work XLA fuses with the
    # logsumexp, and whose gradient is a select rather than a scatter (fewer kernels to
    # compile and run). A label outside [0, classes) gives NaN (TF's GPU kernel; its CPU
    # kernel raises, which a jitted step cannot).
    n = logits.shape[-1]
    picked = jnp.sum(jnp.where(labels[..., None] == jnp.arange(n), logits, 0), axis=-1)
    picked = jnp.where((labels >= 0) & (labels < n), picked, jnp.nan)
    return jax.nn.logsumexp(logits, axis=-1) - picked


def _softmax_xent(labels, logits, axis):
    logits = jnp.asarray(logits)
    labels = jnp.asarray(labels, logits.dtype)
    return -jnp.sum(labels * jax.nn.log_softmax(logits, axis=axis), axis=axis)


@op
def softmax_cross_entropy_with_logits_v2(
    _sentinel=None, labels=None, logits=None, dim=-1, name=None, axis=None
):
    """``tf.nn.softmax_cross_entropy_with_logits_v2``: gradients flow into labels too."""
    _check_sentinel(_sentinel, "softmax_cross_entropy_with_logits_v2")
    axis = dim if axis is None else axis
    return _softmax_xent(labels, logits, axis)


@op
def softmax_cross_entropy_with_logits(
    _sentinel=None, labels=None, logits=None, dim=-1, name=None, axis=None
):
    """``tf.nn.softmax_cross_entropy_with_logits`` (TF 1): no gradient into labels."""
    _check_sentinel(_sentinel, "softmax_cross_entropy_with_logits")
    axis = dim if axis is None else axis
    return _softmax_xent(jax.lax.stop_gradient(jnp.asarray(labels)), logits, axis)


@op
def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """``tf.nn.sigmoid_cross_entropy_with_logits``: ``max(x, 0) - x z + log(1 + exp(-|x|))``.

    Raises:
      ValueError: labels and logits of different shapes (TF's message).
    """
    _check_sentinel(_sentinel, "sigmoid_cross_entropy_with_logits")
    x = jnp.asarray(logits)
    z = jnp.asarray(labels, x.dtype)
    if x.shape != z.shape:
        raise ValueError(f"logits and labels must have the same shape ({x.shape} vs {z.shape})")
    return jnp.maximum(x, 0) - x * z + jnp.log1p(jnp.exp(-jnp.abs(x)))


@op
def weighted_cross_entropy_with_logits(
    labels=None, logits=None, pos_weight=None, name=None, targets=None
):
    """``tf.nn.weighted_cross_entropy_with_logits``:
    ``(1 - z) x + (1 + (q - 1) z) (log(1 + exp(-|x|)) + max(-x, 0))``."""
    z = jnp.asarray(labels if labels is not None else targets)
    x = jnp.asarray(logits)
    log_weight = 1 + (pos_weight - 1) * z
    return (1 - z) * x + log_weight * (jnp.log1p(jnp.exp(-jnp.abs(x))) + jnp.maximum(-x, 0))


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """``tf.nn.moments``: ``(mean, variance)`` over ``axes`` (biased variance)."""
    del shift, name
    keep = bool(keepdims if keepdims is not None else keep_dims)
    x = jnp.asarray(x)
    axes = axis_arg(axes)
    mean = jnp.mean(x, axis=axes, keepdims=True)
    variance = jnp.mean(jnp.square(x - jax.lax.stop_gradient(mean)), axis=axes, keepdims=True)
    if not keep:
        mean, variance = jnp.squeeze(mean, axes), jnp.squeeze(variance, axes)
    return mean, variance


@op
def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """``tf.nn.batch_normalization``: ``scale (x - mean) / sqrt(variance + eps) + offset``."""
    inv = jax.lax.rsqrt(jnp.asarray(variance) + variance_epsilon)
    if scale is not None:
        inv = inv * scale
    out = jnp.asarray(x) * inv - jnp.asarray(mean) * inv
    return out + offset if offset is not None else out


def _strides(value, n: int, what: str) -> tuple[int, ...]:
    value = [int(v) for v in np.ravel(value)]
    if len(value) == 1:
        return tuple(value * n)
    if len(value) == n + 2:  # TF's NHWC form [1, sh, sw, 1]
        return tuple(value[1:-1])
    if len(value) == n:
        return tuple(value)
    raise ValueError(f"{what} must have 1, {n} or {n + 2} elements; got {value}")


def _nhwc_only(data_format, fn: str) -> None:
    if data_format not in (None, "NHWC", "NWC"):
        raise ValueError(
            f"tf.nn.{fn} with data_format={data_format!r} is not supported: use NHWC (transpose "
            "with tf.transpose(x, [0, 2, 3, 1]))."
        )


@op
def conv2d(
    input,  # noqa: A002 (TF's argument name)
    filter=None,  # noqa: A002
    strides=None,
    padding=None,
    use_cudnn_on_gpu=True,
    data_format="NHWC",
    dilations=(1, 1, 1, 1),
    name=None,
    filters=None,
):
    """``tf.nn.conv2d`` over NHWC inputs with an HWIO filter; ``padding`` "SAME"/"VALID"
    or explicit ``[[0, 0], [pt, pb], [pl, pr], [0, 0]]``."""
    _nhwc_only(data_format, "conv2d")
    kernel = jnp.asarray(filter if filter is not None else filters)
    if isinstance(padding, str):
        pad = padding.upper()
    else:
        pad = [tuple(int(p) for p in row) for row in np.asarray(padding)[1:3]]
    return convolution.conv(
        jnp.asarray(input, kernel.dtype),
        kernel,
        _strides(strides, 2, "strides"),
        pad,
        _strides(dilations, 2, "dilations"),
    )


@op
def conv1d(
    value=None,
    filters=None,
    stride=None,
    padding=None,
    use_cudnn_on_gpu=None,
    data_format=None,
    name=None,
    input=None,  # noqa: A002
    dilations=None,
):
    """``tf.nn.conv1d`` over NWC inputs with a ``[width, in, out]`` filter."""
    _nhwc_only(data_format, "conv1d")
    x = jnp.asarray(value if value is not None else input)
    kernel = jnp.asarray(filters)
    return convolution.conv(
        x.astype(kernel.dtype),
        kernel,
        _strides(stride, 1, "stride"),
        padding.upper(),
        _strides(dilations or 1, 1, "dilations"),
    )


def _pool(value, ksize, strides, padding, data_format, init, reducer, fn):
    _nhwc_only(data_format, fn)
    x = jnp.asarray(value)
    n = x.ndim - 2
    window = (1,) + _strides(ksize, n, "ksize") + (1,)
    step = (1,) + _strides(strides, n, "strides") + (1,)
    return jax.lax.reduce_window(x, init, reducer, window, step, padding.upper()), window, step


@op
def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
    """``tf.nn.max_pool``."""
    value = value if value is not None else input
    _nhwc_only(data_format, "max_pool")
    x = jnp.asarray(value)
    n = x.ndim - 2
    window = _strides(ksize, n, "ksize")
    return convolution.max_pool(x, window, _strides(strides, n, "strides"), padding.upper())


@op
def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
    """``tf.nn.avg_pool``: with "SAME" padding the mean is over the valid entries, as TF."""
    value = value if value is not None else input
    total, window, step = _pool(
        value, ksize, strides, padding, data_format, 0.0, jax.lax.add, "avg_pool"
    )
    ones = jnp.ones(jnp.shape(value)[:-1] + (1,), total.dtype)
    count = jax.lax.reduce_window(ones, 0.0, jax.lax.add, window, step, padding.upper())
    return total / count


@op
def zero_fraction(value, name=None):
    """``tf.nn.zero_fraction``: the fraction of zeros in ``value``."""
    return jnp.mean(jnp.asarray(value) == 0, dtype=jnp.float32)


# Re-exported from the math ops for ``tf.nn.*`` spellings.
sigmoid = sigmoid
tanh = tanh
softplus = softplus
top_k = top_k
in_top_k = in_top_k
