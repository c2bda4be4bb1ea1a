"""Channels-last convolution whose gradients are canonical convolutions (internal).

``jax.lax.conv_general_dilated`` differentiates into convolutions with swapped dimension
numbers (the filter gradient treats the batch as the input feature dimension, the input
gradient swaps the kernel's in/out features). XLA's CPU backend runs those through its
fast (Eigen) convolution only when it can re-lay the operands out, which it does for a
step on its own but not inside a loop body: in the Estimator's fused steps (a
``lax.scan`` over ``steps_per_execution`` steps) a small conv net's step was 8-10x
slower on CPU (measured: 52 ms vs 6 ms per step, the MNIST-style compat program).

:func:`conv` computes the same convolution and, through ``jax.custom_vjp``, both gradients
as convolutions in the canonical ``N...C`` / ``...IO`` layout, the operands transposed
explicitly, with the paddings of JAX's own transpose rules. The values are JAX's (the same
sums); only the layout of the work changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp

__all__ = ["conv"]


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
    """``lax.conv_general_dilated`` in channels-last layout, with canonical gradients.

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
    return _conv(x, kernel, strides, padding, dilation)
