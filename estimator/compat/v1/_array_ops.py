"""TF 1.x array ops (``tf.reshape``, ``tf.concat``, ``tf.one_hot``, ...) on ``jax.numpy``.

Arguments, defaults and argument order are TF 1.15's (``tf.compat.v1``). Shapes in JAX are
static, so :func:`shape` returns a NumPy ``int32`` vector: ``tf.shape(x)[0]`` is a plain
integer usable in ``tf.reshape``. Values holding strings run with NumPy (host data in an
``input_fn``) and hold them as TF does, as ``bytes`` (``tf.constant('a')`` is ``b'a'``;
``tf.where(c, labels, 'none')`` mixes bytes and a ``str`` literal as TF does).
"""

from __future__ import annotations

import builtins
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from estimator.compat.v1._base import axis_arg, is_host, named, op, tf_strings, xnp
from estimator.compat.v1._base import dtype as _dtype_of
from estimator.compat.v1._placeholders import Placeholder, is_symbolic

__all__ = [
    "newaxis",
    "constant",
    "convert_to_tensor",
    "zeros",
    "ones",
    "zeros_like",
    "ones_like",
    "fill",
    "shape",
    "size",
    "rank",
    "reshape",
    "concat",
    "stack",
    "unstack",
    "expand_dims",
    "squeeze",
    "transpose",
    "tile",
    "gather",
    "gather_nd",
    "one_hot",
    "where",
    "where_v2",
    "boolean_mask",
    "slice",
    "split",
    "pad",
    "reverse",
    "range",
    "linspace",
    "identity",
    "stop_gradient",
    "cast",
    "to_float",
    "to_int32",
    "to_int64",
    "sequence_mask",
    "broadcast_to",
    "placeholder",
    "placeholder_with_default",
    "argsort",
    "sort",
    "einsum",
    "tensordot",
    "meshgrid",
]

newaxis = None


def _array(value: Any, dt=None):
    if is_host(value):
        return tf_strings(np.asarray(value, dtype=dt if dt is not None else None))
    if dt is None and isinstance(value, float):
        return jnp.asarray(value, jnp.float32)
    return jnp.asarray(value, dtype=dt)


@op
def constant(value, dtype=None, shape=None, name=None, verify_shape=False):
    """``tf.constant`` (TF 1): ``value`` as an array; with ``shape``, a single value fills it,
    as many values as the shape holds are reshaped, fewer are padded with the last one.

    Raises:
      ValueError: more values than ``shape`` holds (TF's message).
    """
    del verify_shape
    out = _array(value, _dtype_of(dtype))
    if shape is None:
        return out
    shape = tuple(int(d) for d in np.ravel(shape))
    module = xnp(out)
    needed = int(np.prod(shape))
    if out.size == 1:
        return module.broadcast_to(out.reshape(()), shape)
    if out.size > needed:
        raise ValueError(
            f"Too many elements provided. Needed at most {needed}, but received {out.size}"
        )
    flat = out.reshape(-1)
    if out.size < needed:
        flat = module.concatenate([flat, module.repeat(flat[-1:], needed - out.size)])
    return flat.reshape(shape)


@op
def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None, dtype_hint=None):
    """``tf.convert_to_tensor``: ``value`` as an array (Python floats as float32)."""
    dt = _dtype_of(dtype if dtype is not None else (preferred_dtype or dtype_hint))
    return _array(value, dt)


@op
def zeros(shape, dtype=jnp.float32, name=None):
    """``tf.zeros``."""
    return jnp.zeros(tuple(int(d) for d in np.ravel(shape)), _dtype_of(dtype))


@op
def ones(shape, dtype=jnp.float32, name=None):
    """``tf.ones``."""
    return jnp.ones(tuple(int(d) for d in np.ravel(shape)), _dtype_of(dtype))


@op
def zeros_like(tensor, dtype=None, name=None, optimize=True):
    """``tf.zeros_like``."""
    return jnp.zeros_like(tensor, dtype=_dtype_of(dtype))


@op
def ones_like(tensor, dtype=None, name=None, optimize=True):
    """``tf.ones_like``."""
    return jnp.ones_like(tensor, dtype=_dtype_of(dtype))


@op
def fill(dims, value, name=None):
    """``tf.fill``: an array of shape ``dims`` holding ``value`` (a string: bytes, on the
    host)."""
    if is_host(value):
        return np.full(tuple(int(d) for d in np.ravel(dims)), tf_strings(value)[()], object)
    return jnp.full(tuple(int(d) for d in np.ravel(dims)), value)


def shape(input, name=None, out_type=np.int32):  # noqa: A002 (TF's argument name)
    """``tf.shape``: the static shape as a NumPy vector (JAX shapes are static)."""
    return np.asarray(np.shape(input), dtype=_dtype_of(out_type))


def size(input, name=None, out_type=np.int32):  # noqa: A002
    """``tf.size``: the number of elements (static)."""
    return np.asarray(np.size(input), dtype=_dtype_of(out_type))


def rank(input, name=None):  # noqa: A002
    """``tf.rank``: the number of dimensions (static)."""
    return np.asarray(np.ndim(input), np.int32)


@op
def reshape(tensor, shape, name=None):
    """``tf.reshape`` (``-1`` infers one dimension)."""
    return xnp(tensor).reshape(tensor, tuple(int(d) for d in np.ravel(np.asarray(shape))))


@op
def concat(values, axis, name="concat"):
    """``tf.concat(values, axis)``."""
    return xnp(values).concatenate([_array(v) for v in values], axis=int(axis))


@op
def stack(values, axis=0, name="stack"):
    """``tf.stack``."""
    return xnp(values).stack([_array(v) for v in values], axis=axis)


def unstack(value, num=None, axis=0, name="unstack"):
    """``tf.unstack``: a list of the slices along ``axis``."""
    value = _array(value)
    return [xnp(value).take(value, i, axis=axis) for i in builtins.range(value.shape[axis])]


@op
def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002
    """``tf.expand_dims`` (``dim`` is TF 1's alias of ``axis``)."""
    axis = axis_arg(axis, dim, "dim")
    return xnp(input).expand_dims(_array(input), axis)


@op
def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002
    """``tf.squeeze`` (``squeeze_dims`` is TF 1's alias of ``axis``)."""
    axis = axis_arg(axis, squeeze_dims, "squeeze_dims")
    if axis == ():
        axis = None
    return xnp(input).squeeze(_array(input), axis=axis)


@op
def transpose(a, perm=None, name="transpose", conjugate=False):
    """``tf.transpose`` (reverses the axes when ``perm`` is None)."""
    out = xnp(a).transpose(_array(a), perm)
    return jnp.conj(out) if conjugate else out


@op
def tile(input, multiples, name=None):  # noqa: A002
    """``tf.tile``."""
    return xnp(input).tile(_array(input), tuple(int(m) for m in np.ravel(multiples)))


@op
def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """``tf.gather``: slices of ``params`` along ``axis`` (default 0) at ``indices``."""
    axis = 0 if axis is None else int(axis)
    if batch_dims:
        fn = lambda p, i: jnp.take(p, i, axis=axis - batch_dims)  # noqa: E731
        for _ in builtins.range(batch_dims):
            fn = jax.vmap(fn)
        return fn(jnp.asarray(params), jnp.asarray(indices))
    module = xnp(params)
    return module.take(_array(params), module.asarray(indices), axis=axis)


@op
def gather_nd(params, indices, name=None, batch_dims=0):
    """``tf.gather_nd``: ``params[tuple(indices[..., k] for k)]``."""
    if batch_dims:
        raise ValueError("gather_nd with batch_dims > 0 is not supported; use jax.vmap.")
    indices = jnp.asarray(indices)
    return jnp.asarray(params)[tuple(jnp.moveaxis(indices, -1, 0))]


@op
def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """``tf.one_hot``: ids outside ``[0, depth)`` (such as -1) give all ``off_value``."""
    dt = _dtype_of(dtype) or (
        jnp.asarray(on_value).dtype
        if on_value is not None
        else (jnp.asarray(off_value).dtype if off_value is not None else jnp.float32)
    )
    on = jnp.asarray(1 if on_value is None else on_value, dt)
    off = jnp.asarray(0 if off_value is None else off_value, dt)
    hot = jax.nn.one_hot(jnp.asarray(indices), int(depth), dtype=jnp.bool_, axis=-1)
    out = jnp.where(hot, on, off)
    if axis is not None and axis != -1:
        out = jnp.moveaxis(out, -1, axis)
    return out


@op
def where(condition, x=None, y=None, name=None):
    """``tf.where`` (TF 1): ``x`` where ``condition`` else ``y``; with ``x`` and ``y`` None,
    the ``[n, rank]`` coordinates of the true entries (computed on the host: the count is
    data-dependent). TF 1 requires ``x``/``y`` to match ``condition``'s shape or a rank-1
    ``condition`` to select rows; both work here."""
    if x is None and y is None:
        return np.argwhere(np.asarray(condition)).astype(np.int32)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    module = xnp(x, y)
    if module is np:
        x, y = tf_strings(np.asarray(x)), tf_strings(np.asarray(y))
    cond = module.asarray(condition)
    x = _array(x)
    if cond.ndim == 1 and np.ndim(x) > 1:  # TF 1's row selection
        cond = cond.reshape(cond.shape + (1,) * (np.ndim(x) - 1))
    return module.where(cond, x, _array(y))


@op
def where_v2(condition, x=None, y=None, name=None):
    """``tf.where_v2``: ``jnp.where`` with broadcasting."""
    if x is None and y is None:
        return np.argwhere(np.asarray(condition)).astype(np.int32)
    if is_host(x, y):
        return np.where(np.asarray(condition), tf_strings(np.asarray(x)), tf_strings(np.asarray(y)))
    return jnp.where(condition, _array(x), _array(y))


def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """``tf.boolean_mask``. The result's size depends on the data, which jit cannot trace:
    this works on concrete values (an ``input_fn``); inside ``model_fn`` multiply by the mask
    or use weights instead."""
    if isinstance(mask, jax.core.Tracer) or isinstance(tensor, jax.core.Tracer):
        raise ValueError(
            "tf.boolean_mask inside model_fn gives a data-dependent shape, which jit cannot "
            "compile. Keep the shape: tf.where(mask, x, tf.zeros_like(x)), or pass the mask "
            "as weights to the loss / metric (weights=tf.cast(mask, tf.float32))."
        )
    tensor, mask = np.asarray(tensor), np.asarray(mask, bool)
    axis = 0 if axis is None else int(axis)
    index = (slice(None),) * axis + (mask,)
    return tensor[index]


@op
def slice(input_, begin, size, name=None):  # noqa: A001 (TF's name)
    """``tf.slice``: ``size[i] == -1`` takes the rest of dimension ``i``."""
    value = _array(input_)
    index = tuple(
        builtins.slice(int(b), None if int(s) == -1 else int(b) + int(s))
        for b, s in zip(np.ravel(begin), np.ravel(size), strict=True)
    )
    return value[index]


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """``tf.split``: an int splits evenly, a list gives the sizes."""
    value = _array(value)
    module = xnp(value)
    if isinstance(num_or_size_splits, int):
        return module.split(value, num_or_size_splits, axis=axis)
    sizes = [int(s) for s in np.ravel(num_or_size_splits)]
    if -1 in sizes:
        sizes[sizes.index(-1)] = value.shape[axis] - (sum(sizes) + 1)
    return module.split(value, np.cumsum(sizes)[:-1].tolist(), axis=axis)


@op
def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """``tf.pad`` (modes ``CONSTANT``, ``REFLECT``, ``SYMMETRIC``)."""
    modes = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "symmetric"}
    mode_name = modes[mode.upper()]
    widths = [tuple(int(w) for w in row) for row in np.asarray(paddings)]
    kwargs = {"constant_values": constant_values} if mode_name == "constant" else {}
    return jnp.pad(jnp.asarray(tensor), widths, mode=mode_name, **kwargs)


@op
def reverse(tensor, axis, name=None):
    """``tf.reverse`` along the listed axes."""
    return jnp.flip(jnp.asarray(tensor), axis=axis_arg(axis))


@op
def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001
    """``tf.range``: ``[start, limit)`` by ``delta`` (``range(n)`` counts from 0)."""
    if limit is None:
        start, limit = 0, start
    dt = _dtype_of(dtype)
    if dt is None:
        is_float = any(isinstance(v, float) for v in (start, limit, delta))
        dt = np.dtype(np.float32 if is_float else np.int32)
    return jnp.arange(start, limit, delta, dtype=dt)


@op
def linspace(start, stop, num, name=None, axis=0):
    """``tf.linspace``."""
    return jnp.linspace(start, stop, int(num), axis=axis, dtype=jnp.float32)


def identity(input, name=None):  # noqa: A002
    """``tf.identity``: names ``input`` for hooks (``LoggingTensorHook``) when ``name`` is
    given inside ``model_fn`` (``estimator.identity``)."""
    if is_symbolic(input):
        return input
    if is_host(input):
        return tf_strings(np.asarray(input))
    return named(jnp.asarray(input), name)


@op
def stop_gradient(input, name=None):  # noqa: A002
    """``tf.stop_gradient``."""
    return jax.lax.stop_gradient(input)


@op
def cast(x, dtype, name=None):
    """``tf.cast``. Floats cast to integers truncate toward zero, as TF."""
    dt = _dtype_of(dtype)
    if is_host(x):
        return np.asarray(x).astype(dt)
    x = jnp.asarray(x)
    if jnp.issubdtype(dt, jnp.integer) and jnp.issubdtype(x.dtype, jnp.floating):
        x = jnp.trunc(x)
    return x.astype(dt)


def to_float(x, name="ToFloat"):
    """``tf.to_float`` (TF 1): ``cast(x, tf.float32)``."""
    return cast(x, jnp.float32, name=name if name != "ToFloat" else None)


def to_int32(x, name="ToInt32"):
    """``tf.to_int32`` (TF 1)."""
    return cast(x, jnp.int32, name=name if name != "ToInt32" else None)


def to_int64(x, name="ToInt64"):
    """``tf.to_int64`` (TF 1); int32 unless ``jax_enable_x64``."""
    return cast(x, jnp.int64, name=name if name != "ToInt64" else None)


@op
def sequence_mask(lengths, maxlen=None, dtype=jnp.bool_, name=None):
    """``tf.sequence_mask``: ``[..., maxlen]``, true before each length. ``maxlen`` defaults
    to the largest length, which needs concrete lengths."""
    lengths = jnp.asarray(lengths)
    if maxlen is None:
        maxlen = int(np.max(np.asarray(lengths)))
    mask = jnp.arange(int(maxlen)) < lengths[..., None]
    return mask.astype(_dtype_of(dtype))


@op
def broadcast_to(input, shape, name=None):  # noqa: A002
    """``tf.broadcast_to``."""
    return jnp.broadcast_to(input, tuple(int(d) for d in np.ravel(shape)))


def placeholder(dtype, shape=None, name=None):
    """``tf.placeholder`` for a ``serving_input_receiver_fn``: a ``jax.ShapeDtypeStruct``
    (a ``None`` dimension is symbolic in the export), which
    ``tf.estimator.export.ServingInputReceiver`` accepts; ops on it are traced by the
    export (``estimator.compat.v1._placeholders``).

    Raises:
      ValueError: for an unknown rank (``shape=None``): exports need each input's rank.
    """
    del name
    if shape is None:
        raise ValueError(
            "tf.placeholder needs a shape here (e.g. shape=[None, 4]): an export needs the "
            "rank of each input; None dimensions stay symbolic."
        )
    dims = tuple(None if d is None or (isinstance(d, int) and d < 0) else int(d) for d in shape)
    return Placeholder(dims, _dtype_of(dtype))


def placeholder_with_default(input, shape, name=None):  # noqa: A002
    """``tf.placeholder_with_default``: the default value (there is nothing to feed)."""
    del shape, name
    return _array(input)


@op
def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None):
    """``tf.argsort``."""
    order = jnp.argsort(jnp.asarray(values), axis=axis, stable=True)
    return jnp.flip(order, axis) if direction == "DESCENDING" else order


@op
def sort(values, axis=-1, direction="ASCENDING", name=None):
    """``tf.sort``."""
    out = jnp.sort(jnp.asarray(values), axis=axis)
    return jnp.flip(out, axis) if direction == "DESCENDING" else out


def einsum(equation, *inputs, **kwargs):
    """``tf.einsum``."""
    return named(jnp.einsum(equation, *inputs), kwargs.get("name"))


@op
def tensordot(a, b, axes, name=None):
    """``tf.tensordot``."""
    return jnp.tensordot(a, b, axes)


def meshgrid(*args, **kwargs):
    """``tf.meshgrid`` (``indexing='xy'`` by default, as TF)."""
    return jnp.meshgrid(*args, indexing=kwargs.get("indexing", "xy"))
