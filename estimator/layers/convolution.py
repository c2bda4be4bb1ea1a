"""Channels-last convolution and max pooling, laid out for XLA's CPU backend (internal).

On other backends (and with ``JAX_ESTIMATOR_CPU_CONVOLUTIONS=0``, see
``estimator.config.platform``) :func:`conv` is ``lax.conv_general_dilated`` and :func:`max_pool`
``lax.reduce_window``, with JAX's own gradients; what follows is the CPU backend's path.

``jax.lax.conv_general_dilated`` differentiates into convolutions with swapped dimension
numbers (the filter gradient treats the batch as the input feature dimension, the input
gradient swaps the kernel's in/out features). XLA's CPU backend runs those through its
fast (Eigen) convolution only when it can re-lay the operands out, which it does for a
step on its own but not inside a loop body: in the Estimator's fused steps (a
``lax.scan`` over ``steps_per_execution`` steps) a small conv net's step was 8-10x
slower on CPU (measured: 52 ms vs 6 ms per step, the MNIST-style compat program).

:func:`conv` computes the same convolution in one of two ways:

* a **patch matrix** (im2col) times the kernel, when the kernel's contraction (window
  size x input channels) is at most :data:`PATCH_CONTRACTION_MAX` and the patches at most
  :data:`PATCH_BYTES_MAX`: a first layer over few channels. Its gradients are a matrix
  product and sums of shifted slices, where XLA's convolution gradients over 1-8 input
  channels are slow: the patch matrix is faster over few input channels and the
  convolution over 32 or more (``benchmarks/conv_floor.py`` times both). How the
  patch matrix is built depends on what is differentiated (``custom_vjp`` with symbolic
  zeros tells):

  - nothing (every layer at evaluation and prediction): one gather, one XLA kernel to
    compile, where a slice is a kernel each (a fraction of the compile time);
  - the kernel only, the input being data (a training step's first layer): transposed,
    ``[window x C_in, N x out]``, a slice per window offset along one spatial dimension
    at a time, and the product taken as ``[C_out, N x out]``, so that XLA's CPU matrix
    kernels vectorize along the long dimension;
  - the input (a hidden layer): a strided slice per window offset, in rows, whose
    transpose is the input's gradient (transposed, XLA fused that sum of shifted slices
    into the preceding pooling's gradient and recomputed it for each read: slower);
* otherwise a convolution whose gradients, through ``jax.custom_vjp``, are convolutions in
  the canonical ``N...C`` / ``...IO`` layout, the operands transposed explicitly, with the
  paddings of JAX's own transpose rules.

Both give JAX's values (the same sums, in another order). :func:`max_pool` takes
non-overlapping windows (``strides == window``, TF's usual ``pool_size=2, strides=2``) as
a reshape and a max, with TF's gradient (to the first maximum of each window in row-major
order, as ``MaxPoolGrad``), where XLA's ``select_and_scatter`` costs a sixth of a small
conv net's step; other windows go to ``lax.reduce_window``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from estimator.config import platform

__all__ = ["PATCH_BYTES_MAX", "PATCH_CONTRACTION_MAX", "conv", "max_pool"]

#: Largest window size x input channels computed as a patch matrix (see the module doc).
PATCH_CONTRACTION_MAX = 256
#: Largest patch matrix (bytes) built for that.
PATCH_BYTES_MAX = 32 << 20


def _dilate(shape: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    return tuple(0 if s == 0 else 1 + d * (s - 1) for s, d in zip(shape, dilation, strict=True))


def _specs(n: int) -> tuple[str, str, str]:
    spatial = "DHW"[-n:] if n <= 3 else None
    if spatial is None:
        raise ValueError(f"conv supports 1 to 3 spatial dimensions, got {n}.")
    return f"N{spatial}C", f"{spatial}IO", f"N{spatial}C"


def _forward(x, kernel, strides, padding, dilation):
    return jax.lax.conv_general_dilated(
        x,
        kernel,
        window_strides=strides,
        padding=padding,
        rhs_dilation=dilation,
        dimension_numbers=_specs(x.ndim - 2),
    )


@partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _conv(x, kernel, strides, padding, dilation):
    return _forward(x, kernel, strides, padding, dilation)


def _conv_fwd(x, kernel, strides, padding, dilation):
    return _forward(x, kernel, strides, padding, dilation), (x, kernel)


def _conv_bwd(strides, padding, dilation, residuals, g):
    x, kernel = residuals
    n = x.ndim - 2
    specs = _specs(n)
    in_shape, window, out_shape = x.shape[1:-1], kernel.shape[:n], g.shape[1:-1]
    window_dilated = _dilate(window, dilation)
    out_dilated = _dilate(out_shape, strides)

    # Input gradient: g (dilated by the strides) convolved with the kernel flipped in space
    # and its in/out features swapped (JAX's _conv_general_dilated_transpose_lhs).
    pads_lhs = []
    for size, win, out, (lo, _) in zip(in_shape, window_dilated, out_dilated, padding, strict=True):
        before = win - lo - 1
        pads_lhs.append((before, size + win - 1 - out - before))
    flipped = jnp.flip(kernel, axis=tuple(range(n)))
    swapped = jnp.swapaxes(flipped, n, n + 1)
    dx = jax.lax.conv_general_dilated(
        g,
        swapped.astype(g.dtype),
        window_strides=(1,) * n,
        padding=pads_lhs,
        lhs_dilation=strides,
        rhs_dilation=dilation,
        dimension_numbers=specs,
    )

    # Kernel gradient: x with batch and features swapped (x's features as the batch)
    # convolved with g as the kernel (g's batch as the input features)
    # (JAX's _conv_general_dilated_transpose_rhs).
    pads_rhs = []
    for size, win, out, (lo, _) in zip(in_shape, window_dilated, out_dilated, padding, strict=True):
        pads_rhs.append((lo, (out - size) + (win - lo - 1)))
    lhs = jnp.moveaxis(x, (0, n + 1), (n + 1, 0))  # [C_in, spatial..., N]
    rhs = jnp.moveaxis(g, 0, n)  # [spatial..., N, C_out]
    dk = jax.lax.conv_general_dilated(
        lhs,
        rhs.astype(lhs.dtype),
        window_strides=dilation,
        padding=pads_rhs,
        rhs_dilation=strides,
        dimension_numbers=specs,
    )  # [C_in, window..., C_out]
    dk = jnp.moveaxis(dk, 0, n)
    return dx.astype(x.dtype), dk.astype(kernel.dtype)


_conv.defvjp(_conv_fwd, _conv_bwd)


def conv(
    x: jax.Array,
    kernel: jax.Array,
    strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    dilation: Sequence[int] | None = None,
) -> jax.Array:
    """``lax.conv_general_dilated`` in channels-last layout, as a patch matrix product or
    a convolution with canonical gradients (see the module doc).

    Args:
      x: ``[batch, *spatial, in_channels]`` (1 to 3 spatial dimensions).
      kernel: ``[*window, in_channels, out_channels]``.
      strides: one per spatial dimension.
      padding: ``"SAME"``, ``"VALID"`` or ``[(low, high)]`` per spatial dimension.
      dilation: the kernel's dilation per spatial dimension (default 1).

    Returns:
      ``[batch, *out_spatial, out_channels]``, as ``lax.conv_general_dilated``.
    """
    n = x.ndim - 2
    strides = tuple(int(s) for s in strides)
    dilation = (1,) * n if dilation is None else tuple(int(d) for d in dilation)
    if isinstance(padding, str):
        padding = tuple(
            jax.lax.padtype_to_pads(
                x.shape[1:-1], _dilate(kernel.shape[:n], dilation), strides, padding
            )
        )
    else:
        padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    if not platform.cpu_path(platform.CPU_CONVOLUTIONS):
        return _forward(x, kernel, strides, padding, dilation)  # XLA's own (cuDNN on GPUs)
    if _use_patches(x, kernel, strides, padding, dilation):
        return _patch_conv(x, kernel, strides, padding, dilation)
    return _conv(x, kernel, strides, padding, dilation)


def _out_shape(x, window, strides, padding, dilation) -> tuple[int, ...]:
    return tuple(
        (size + lo + hi - win) // stride + 1
        for size, (lo, hi), win, stride in zip(
            x.shape[1:-1], padding, _dilate(window, dilation), strides, strict=True
        )
    )


def _use_patches(x, kernel, strides, padding, dilation) -> bool:
    n = x.ndim - 2
    window = kernel.shape[:n]
    out = _out_shape(x, window, strides, padding, dilation)
    if min(out, default=0) <= 0 or min(x.shape, default=0) == 0:
        return False
    contraction = math.prod(window) * x.shape[-1]
    patch_bytes = x.shape[0] * math.prod(out) * contraction * x.dtype.itemsize
    return contraction <= PATCH_CONTRACTION_MAX and patch_bytes <= PATCH_BYTES_MAX


def _patch_conv(x, kernel, strides, padding, dilation):
    """The convolution as a product of the patch matrix (im2col: per output position, the
    window's inputs in the kernel's (window..., in-channel) order) and the kernel."""
    n = x.ndim - 2
    window = tuple(kernel.shape[:n])
    out = _out_shape(x, window, strides, padding, dilation)
    padded = jax.lax.pad(
        x, jnp.zeros((), x.dtype), [(0, 0, 0), *((lo, hi, 0) for lo, hi in padding), (0, 0, 0)]
    )
    matrix = kernel.reshape(-1, kernel.shape[-1]).astype(x.dtype)
    return _patch_product(padded, matrix, (window, tuple(strides), tuple(dilation), out))


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def _patch_product(padded, matrix, geometry):
    """``[N, *out, C_out]``: the patches of ``padded`` times ``matrix`` (``[window x C_in,
    C_out]``). Undifferentiated (every layer at evaluation and prediction) the patch
    matrix is one gather of constant positions, row per output position: one XLA kernel to
    compile, where the slices of the differentiated form are a kernel each."""
    window, _, _, out = geometry
    rows = padded.reshape(padded.shape[0], -1, padded.shape[-1])
    positions = _patch_positions(padded.shape[1:-1], *geometry)
    taken = rows.at[:, positions].get(mode="promise_in_bounds")  # all in range
    product = taken.reshape(-1, math.prod(window) * padded.shape[-1]) @ matrix
    return product.reshape(padded.shape[0], *out, matrix.shape[-1])


def _patch_positions(spatial, window, strides, dilation, out) -> np.ndarray:
    """Flat positions in the padded input, ``[prod(out) * prod(window)]`` int32: output
    position-major, then window offset (the kernel's order)."""
    starts = np.meshgrid(
        *(np.arange(o) * s for o, s in zip(out, strides, strict=True)), indexing="ij"
    )
    offsets = np.meshgrid(
        *(np.arange(w) * d for w, d in zip(window, dilation, strict=True)), indexing="ij"
    )
    index = 0
    for size, start, offset in zip(spatial, starts, offsets, strict=True):
        index = index * size + start.reshape(-1, 1) + offset.reshape(1, -1)
    return np.asarray(index, np.int32).reshape(-1)


def _sliced_patches(padded, geometry):
    """``[N, *out, prod(window), C]``: the window's inputs per output position (the rows of
    the patch matrix), a strided slice per window offset."""
    window, strides, dilation, out = geometry
    columns = []
    for offset in itertools.product(*(range(w) for w in window)):
        start = [o * d for o, d in zip(offset, dilation, strict=True)]
        limit = [s + (o - 1) * st + 1 for s, o, st in zip(start, out, strides, strict=True)]
        columns.append(
            jax.lax.slice(
                padded,
                (0, *start, 0),
                (padded.shape[0], *limit, padded.shape[-1]),
                (1, *strides, 1),
            )
        )
    return jnp.stack(columns, axis=-2)


def _stacked_patches(padded, geometry):
    """The transposed patch matrix, ``[prod(window) * C_in, N * prod(out)]``: rows in the
    kernel's (window..., in-channel) order, columns batch- then position-major. Built one
    spatial dimension at a time (a strided slice per window offset along it, stacked): a
    5x5 window takes 10 slices, not 25, each copying whole rows."""
    window, strides, dilation, out = geometry
    stacked = jnp.moveaxis(padded, -1, 0)  # [C, N, *spatial]
    for d in range(len(window)):
        axis = 2 * d + 2  # spatial dimension d, behind d window axes, C and N
        start, step = dilation[d], strides[d]
        stacked = jnp.stack(
            [
                jax.lax.slice_in_dim(
                    stacked, o * start, o * start + (out[d] - 1) * step + 1, step, axis
                )
                for o in range(window[d])
            ],
            axis=d,
        )
    return stacked.reshape(math.prod(window) * padded.shape[-1], -1)


def _patch_product_fwd(padded, matrix, geometry):
    differentiated = padded.perturbed
    padded, matrix = padded.value, matrix.value
    out = geometry[3]
    if differentiated:  # a hidden layer: its input's gradient is the rows' transpose
        patches = _sliced_patches(padded, geometry)
        product = patches.reshape(-1, matrix.shape[0]) @ matrix
        value = product.reshape(padded.shape[0], *out, matrix.shape[-1])
        return value, (patches, matrix, padded.shape)
    # Data (the first layer of a training step): only the kernel's gradient is needed, and
    # the product is taken transposed, [C_out, N x out], so that the long batch x position
    # dimension is the one XLA's CPU kernels vectorize along, here and in the gradient.
    patches = _stacked_patches(padded, geometry)
    product = matrix.T @ patches
    value = jnp.moveaxis(product.reshape(matrix.shape[-1], padded.shape[0], *out), 0, -1)
    return value, (patches, matrix, padded.shape)


def _patch_product_bwd(geometry, residuals, g):
    if isinstance(g, jax.custom_derivatives.SymbolicZero):  # (symbolic_zeros=True)
        return None, None
    patches, matrix, shape = residuals
    if patches.ndim == 2:  # transposed, from data: no input gradient
        g = jnp.moveaxis(g, -1, 0).reshape(matrix.shape[-1], -1)  # [C_out, N x out]
        d_matrix = jax.lax.dot_general(patches, g, (((1,), (1,)), ((), ())))
        return None, d_matrix
    rows = patches.reshape(-1, matrix.shape[0])
    g = g.reshape(-1, matrix.shape[-1])
    d_patches = (g @ matrix.T).reshape(patches.shape)
    sliced = partial(_sliced_patches, geometry=geometry)
    (d_padded,) = jax.linear_transpose(sliced, jax.ShapeDtypeStruct(shape, g.dtype))(d_patches)
    return d_padded, rows.T @ g


_patch_product.defvjp(_patch_product_fwd, _patch_product_bwd, symbolic_zeros=True)


def max_pool(
    x: jax.Array, window: Sequence[int], strides: Sequence[int], padding: str
) -> jax.Array:
    """Max pooling of channels-last ``x`` (``tf.nn.max_pool``'s values and gradient).

    Args:
      x: ``[batch, *spatial, channels]``.
      window, strides: one per spatial dimension.
      padding: ``"SAME"`` or ``"VALID"``.

    Returns:
      ``[batch, *out_spatial, channels]``, as ``lax.reduce_window`` with ``lax.max``.
    """
    window, strides = tuple(int(w) for w in window), tuple(int(s) for s in strides)
    spatial = x.shape[1:-1]
    blocked = platform.cpu_path(platform.CPU_CONVOLUTIONS)
    if blocked and window == strides and min(window, default=0) > 0:
        if padding == "VALID":
            keep = tuple(size - size % w for size, w in zip(spatial, window, strict=True))
            if min(keep, default=0) > 0:
                cropped = x[(slice(None), *(slice(0, k) for k in keep))]
                return _blocked_max(cropped, window)
        elif all(size % w == 0 for size, w in zip(spatial, window, strict=True)):
            return _blocked_max(x, window)  # "SAME" pads nothing here
    return jax.lax.reduce_window(
        x, -jnp.inf, jax.lax.max, (1, *window, 1), (1, *strides, 1), padding
    )


def _blocks(x, window):
    """``x`` as ``[batch, out_0, window_0, out_1, window_1, ..., channels]``."""
    shape = [x.shape[0]]
    for size, w in zip(x.shape[1:-1], window, strict=True):
        shape += [size // w, w]
    return x.reshape(*shape, x.shape[-1])


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _blocked_max(x, window):
    n = len(window)
    return jnp.max(_blocks(x, window), axis=tuple(range(2, 2 + 2 * n, 2)))


def _blocked_max_fwd(x, window):
    return _blocked_max(x, window), x


def _blocked_max_bwd(window, x, g):
    n = len(window)
    axes = tuple(range(2, 2 + 2 * n, 2))
    blocks = _blocks(x, window)
    y = jnp.max(blocks, axis=axes, keepdims=True)
    # Each element's row-major position in its window; the gradient goes to the first
    # maximum (TF's MaxPoolGrad).
    position = jnp.zeros((), jnp.int32)
    for axis, w in zip(axes, window, strict=True):
        shape = [1] * blocks.ndim
        shape[axis] = w
        position = position * w + jnp.arange(w, dtype=jnp.int32).reshape(shape)
    candidate = jnp.where(blocks == y, position, math.prod(window))
    first = candidate == jnp.min(candidate, axis=axes, keepdims=True)
    g = jnp.expand_dims(g, axes)
    return (jnp.where(first, g, jnp.zeros((), g.dtype)).reshape(x.shape),)


_blocked_max.defvjp(_blocked_max_fwd, _blocked_max_bwd)
