"""TF 1.x math ops (``tf.reduce_mean``, ``tf.argmax``, ``tf.equal``, ``tf.clip_by_norm``, ...)
on ``jax.numpy``, with TF 1.15's arguments and defaults.

On strings (host values) the binary ops compare and add bytes, a ``str`` operand encoded as
UTF-8 first, as TF converts it to a ``tf.string`` (``tf.equal(labels, '>50K')`` is true for
``b'>50K'``; see ``_base.tf_strings``).

TF 1 spellings are accepted: ``keep_dims``/``reduction_indices`` (reductions), ``dimension``
(``argmax``/``argmin``, whose ``axis`` defaults to 0 in TF 1). ``argmax`` returns int64 in
TF; here jax's default integer (int32 unless ``jax_enable_x64``). The clipping ops also
accept the symbolic gradients of ``compute_gradients`` (see ``_symbolic``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from estimator.compat.v1._base import axis_arg, is_host, op, tf_strings, xnp
from estimator.compat.v1._base import dtype as _dtype
from estimator.compat.v1._symbolic import SymbolicGradient, SymbolicNorm, is_symbolic

__all__ = [
    "add",
    "subtract",
    "multiply",
    "scalar_mul",
    "divide",
    "div",
    "truediv",
    "realdiv",
    "div_no_nan",
    "floordiv",
    "floormod",
    "mod",
    "pow",
    "square",
    "sqrt",
    "rsqrt",
    "exp",
    "log",
    "log1p",
    "abs",
    "negative",
    "sign",
    "reciprocal",
    "maximum",
    "minimum",
    "floor",
    "ceil",
    "round",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "erf",
    "squared_difference",
    "add_n",
    "matmul",
    "cumsum",
    "cumprod",
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "is_nan",
    "is_inf",
    "is_finite",
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_all",
    "reduce_any",
    "reduce_logsumexp",
    "argmax",
    "argmin",
    "count_nonzero",
    "clip_by_value",
    "clip_by_norm",
    "clip_by_global_norm",
    "global_norm",
    "softplus",
    "top_k",
    "in_top_k",
    "confusion_matrix",
]


def _binary(jnp_fn, np_fn=None):
    np_fn = np_fn or getattr(np, jnp_fn.__name__, jnp_fn)

    @op
    def fn(x, y, name=None):
        if is_host(x, y):
            return np_fn(tf_strings(np.asarray(x)), tf_strings(np.asarray(y)))
        return jnp_fn(x, y)

    return fn


def _unary(jnp_fn):
    @op
    def fn(x, name=None):
        return jnp_fn(x)

    return fn


add = _binary(jnp.add)
subtract = _binary(jnp.subtract)
maximum = _binary(jnp.maximum)
minimum = _binary(jnp.minimum)
equal = _binary(jnp.equal)
not_equal = _binary(jnp.not_equal)
greater = _binary(jnp.greater)
greater_equal = _binary(jnp.greater_equal)
less = _binary(jnp.less)
less_equal = _binary(jnp.less_equal)
logical_and = _binary(jnp.logical_and)
logical_or = _binary(jnp.logical_or)
logical_xor = _binary(jnp.logical_xor)
floordiv = _binary(jnp.floor_divide)
floormod = _binary(jnp.mod)
mod = floormod
pow = _binary(jnp.power)  # noqa: A001 (TF's name)
squared_difference = _binary(lambda x, y: jnp.square(jnp.subtract(x, y)), lambda x, y: (x - y) ** 2)

square = _unary(jnp.square)
sqrt = _unary(jnp.sqrt)
rsqrt = _unary(jax.lax.rsqrt)
exp = _unary(jnp.exp)
log = _unary(jnp.log)
log1p = _unary(jnp.log1p)
abs = _unary(jnp.abs)  # noqa: A001
negative = _unary(jnp.negative)
sign = _unary(jnp.sign)
reciprocal = _unary(jnp.reciprocal)
floor = _unary(jnp.floor)
ceil = _unary(jnp.ceil)
round = _unary(jnp.round)  # noqa: A001 (half to even, as TF)
sin = _unary(jnp.sin)
cos = _unary(jnp.cos)
tan = _unary(jnp.tan)
tanh = _unary(jnp.tanh)
sigmoid = _unary(jax.nn.sigmoid)
erf = _unary(jax.scipy.special.erf)
softplus = _unary(jax.nn.softplus)
logical_not = _unary(jnp.logical_not)
is_nan = _unary(jnp.isnan)
is_inf = _unary(jnp.isinf)
is_finite = _unary(jnp.isfinite)


@op
def multiply(x, y, name=None):
    """``tf.multiply`` (a symbolic gradient times a number stays symbolic)."""
    if isinstance(x, SymbolicGradient):
        return x * y
    if isinstance(y, SymbolicGradient):
        return y * x
    return jnp.multiply(x, y)


def scalar_mul(scalar, x, name=None):
    """``tf.scalar_mul``."""
    return multiply(scalar, x, name=name)


@op
def divide(x, y, name=None):
    """``tf.divide``: true division (integers give floats, as TF)."""
    if isinstance(x, SymbolicGradient):
        return x / y
    return jnp.true_divide(x, y)


truediv = divide
realdiv = divide


@op
def div(x, y, name=None):
    """``tf.div`` (TF 1): Python 2 division: floor division for integers."""
    x, y = jnp.asarray(x), jnp.asarray(y)
    if jnp.issubdtype(jnp.result_type(x, y), jnp.integer):
        return jnp.floor_divide(x, y)
    return jnp.true_divide(x, y)


@op
def div_no_nan(x, y, name=None):
    """``tf.div_no_nan``: 0 where ``y == 0``."""
    y = jnp.asarray(y)
    safe = jnp.where(y == 0, jnp.ones_like(y), y)
    return jnp.where(y == 0, jnp.zeros((), jnp.result_type(x, y)), jnp.true_divide(x, safe))


@op
def add_n(inputs, name=None):
    """``tf.add_n``: the sum of a list of arrays."""
    return functools.reduce(jnp.add, [jnp.asarray(v) for v in inputs])


@op
def matmul(
    a,
    b,
    transpose_a=False,
    transpose_b=False,
    adjoint_a=False,
    adjoint_b=False,
    a_is_sparse=False,
    b_is_sparse=False,
    name=None,
):
    """``tf.matmul`` over the last two axes."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    if transpose_a or adjoint_a:
        a = jnp.swapaxes(a, -1, -2)
        a = jnp.conj(a) if adjoint_a else a
    if transpose_b or adjoint_b:
        b = jnp.swapaxes(b, -1, -2)
        b = jnp.conj(b) if adjoint_b else b
    return jnp.matmul(a, b)


@op
def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """``tf.cumsum``."""
    return _cumulative(jnp.cumsum, 0, x, axis, exclusive, reverse)


@op
def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """``tf.cumprod``."""
    return _cumulative(jnp.cumprod, 1, x, axis, exclusive, reverse)


def _cumulative(fn, identity, x, axis, exclusive, reverse):
    x = jnp.asarray(x)
    if reverse:
        x = jnp.flip(x, axis)
    out = fn(x, axis=axis)
    if exclusive:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        out = jnp.pad(out, pad, constant_values=identity)
        out = jax.lax.slice_in_dim(out, 0, x.shape[axis], axis=axis)
    return jnp.flip(out, axis) if reverse else out


def _reduction(jnp_fn, np_fn=None):
    np_fn = np_fn or getattr(np, jnp_fn.__name__, jnp_fn)

    @op
    def fn(
        input_tensor,
        axis=None,
        keepdims=None,
        name=None,
        reduction_indices=None,
        keep_dims=None,
    ):
        axis = axis_arg(axis, reduction_indices)
        if keepdims is not None and keep_dims is not None:
            raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'.")
        keep = bool(keepdims if keepdims is not None else keep_dims)
        if is_host(input_tensor):
            return np_fn(np.asarray(input_tensor), axis=axis, keepdims=keep)
        return jnp_fn(jnp.asarray(input_tensor), axis=axis, keepdims=keep)

    return fn


def _mean(x, axis=None, keepdims=False):
    # TF keeps the input dtype: the mean of integers is an (truncated) integer.
    if jnp.issubdtype(x.dtype, jnp.integer):
        return (jnp.sum(x, axis=axis, keepdims=keepdims) // _count(x, axis)).astype(x.dtype)
    return jnp.mean(x, axis=axis, keepdims=keepdims)


def _count(x, axis):
    if axis is None:
        return x.size
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([x.shape[a] for a in axes]))


reduce_sum = _reduction(jnp.sum)
reduce_mean = _reduction(_mean, np.mean)
reduce_max = _reduction(jnp.max)
reduce_min = _reduction(jnp.min)
reduce_prod = _reduction(jnp.prod)
reduce_all = _reduction(jnp.all)
reduce_any = _reduction(jnp.any)
reduce_logsumexp = _reduction(jax.nn.logsumexp)


def _arg(jnp_fn):
    @op
    def fn(input, axis=None, name=None, dimension=None, output_type=jnp.int64):  # noqa: A002
        axis = axis_arg(axis, dimension, "dimension")
        axis = 0 if axis is None else axis  # TF 1's default
        return jnp_fn(jnp.asarray(input), axis=axis).astype(_dtype(output_type))

    return fn


argmax = _arg(jnp.argmax)
argmin = _arg(jnp.argmin)


@op
def count_nonzero(
    input_tensor=None,
    axis=None,
    keepdims=None,
    dtype=jnp.int64,
    name=None,
    reduction_indices=None,
    keep_dims=None,
    input=None,  # noqa: A002
):
    """``tf.count_nonzero``."""
    value = input_tensor if input_tensor is not None else input
    axis = axis_arg(axis, reduction_indices)
    keep = bool(keepdims if keepdims is not None else keep_dims)
    return jnp.sum(jnp.asarray(value) != 0, axis=axis, keepdims=keep).astype(_dtype(dtype))


@op
def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """``tf.clip_by_value`` (also on a symbolic gradient)."""
    if isinstance(t, SymbolicGradient):
        return t.then(lambda g, _: jnp.clip(g, clip_value_min, clip_value_max))
    return xnp(t).clip(t, clip_value_min, clip_value_max)


def _clip_norm(g, clip_norm, axes):
    # TF: t * clip_norm / max(l2norm(t), clip_norm), computed from the sum of squares.
    l2sum = jnp.sum(jnp.square(g), axis=axes, keepdims=True)
    pred = l2sum > 0
    l2norm = jnp.where(pred, jnp.sqrt(jnp.where(pred, l2sum, 1.0)), l2sum)
    return g * clip_norm / jnp.maximum(l2norm, clip_norm)


@op
def clip_by_norm(t, clip_norm, axes=None, name=None):
    """``tf.clip_by_norm``: ``t * clip_norm / max(||t||₂, clip_norm)`` (also on a symbolic
    gradient)."""
    axes = axis_arg(axes)
    if isinstance(t, SymbolicGradient):
        return t.then(lambda g, _: _clip_norm(g, clip_norm, axes))
    return _clip_norm(jnp.asarray(t), clip_norm, axes)


def global_norm(t_list, name=None):
    """``tf.global_norm``: ``sqrt(Σ ||t||²)``; symbolic for symbolic gradients."""
    del name
    if is_symbolic(t_list):
        return SymbolicNorm(t_list)
    return jnp.sqrt(sum(jnp.sum(jnp.square(jnp.asarray(t))) for t in t_list if t is not None))


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """``tf.clip_by_global_norm``: ``(clipped list, global norm)``, each scaled by
    ``clip_norm / max(global_norm, clip_norm)``; ``None`` entries stay ``None``. On symbolic
    gradients both results are symbolic (the norm cannot be summarised inside
    ``model_fn``)."""
    del name
    t_list = list(t_list)
    if is_symbolic(t_list):
        norm = use_norm if use_norm is not None else SymbolicNorm(t_list)

        def scale(g, value_of):
            total = norm.value(value_of) if isinstance(norm, SymbolicNorm) else norm
            return g * clip_norm / jnp.maximum(total, clip_norm)

        return [None if t is None else t.then(scale) for t in t_list], norm
    norm = global_norm(t_list) if use_norm is None else jnp.asarray(use_norm)
    factor = clip_norm / jnp.maximum(norm, clip_norm)
    return [None if t is None else jnp.asarray(t) * factor for t in t_list], norm


def top_k(input, k=1, sorted=True, name=None):  # noqa: A002
    """``tf.nn.top_k``: ``(values, indices)`` of the ``k`` largest along the last axis."""
    del sorted, name
    return jax.lax.top_k(jnp.asarray(input), int(k))


@op
def in_top_k(predictions, targets, k, name=None):
    """``tf.nn.in_top_k`` (TF 1 argument order): whether each target is among the ``k``
    largest predictions of its row (ties count as in, as TF)."""
    predictions = jnp.asarray(predictions)
    targets = jnp.asarray(targets, jnp.int32)
    target_value = jnp.take_along_axis(predictions, targets[:, None], axis=1)
    larger = jnp.sum(predictions > target_value, axis=1)
    return larger < k


@op
def confusion_matrix(
    labels, predictions, num_classes=None, dtype=jnp.int32, name=None, weights=None
):
    """``tf.confusion_matrix``: ``[num_classes, num_classes]``, rows are labels.
    ``num_classes`` defaults to ``max(labels, predictions) + 1`` (concrete inputs only)."""
    labels = jnp.asarray(labels, jnp.int32).reshape(-1)
    predictions = jnp.asarray(predictions, jnp.int32).reshape(-1)
    if num_classes is None:
        num_classes = int(max(np.max(np.asarray(labels)), np.max(np.asarray(predictions)))) + 1
    w = jnp.ones_like(labels) if weights is None else jnp.asarray(weights).reshape(-1)
    out = jnp.zeros((num_classes, num_classes), _dtype(dtype))
    return out.at[labels, predictions].add(w.astype(out.dtype))
