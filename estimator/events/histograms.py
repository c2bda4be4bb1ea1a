"""Histogram summaries in TF's buckets, binned where the values are.

``tf.compat.v1.summary.histogram`` bins its values inside the graph, into TF's default
buckets (``tensorflow/core/lib/histogram/histogram.cc``: edges ``±1e-12·1.1^k`` up to
``1e20``, and 0), and only the bucket counts leave the device. :func:`counts` does the same
in JAX: the train step's summary program (``estimator.engine.steps.summary_step``) bins a
histogram's values on the device, and :func:`proto_fields` turns the counts into the fields
of tensorboardX's ``add_histogram_raw`` (its ``make_histogram``'s layout: the non-empty
range of buckets, one empty bucket before it, right edges as limits).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["EDGES", "HOST_PADDED_MIN", "counts", "host_counts", "proto_fields"]

_SMALLEST = 1e-12  # TF's smallest positive edge; each next is 1.1 times the last


def _edges() -> np.ndarray:
    edges, v = [], _SMALLEST
    while v < 1e20:
        edges.append(v)
        v *= 1.1
    return np.array([-e for e in reversed(edges)] + [0.0] + edges)


#: TF's default histogram bucket edges, float64 ``[1549]`` (bucket ``i`` holds
#: ``EDGES[i] <= v < EDGES[i + 1]``, the last also ``v == EDGES[-1]``, as ``np.histogram``).
EDGES = _edges()


def counts(values, mask=None) -> dict:
    """The histogram of ``values`` over :data:`EDGES`, as JAX arrays (traceable).

    Args:
      values: a real array of any shape.
      mask: None, or a ``[values.shape[0]]`` array: rows whose mask is 0 are left out (a
        padded batch's padding rows, ``estimator.model.padding``).

    Returns:
      ``{"min", "max", "num", "sum", "sum_squares"}`` (float32 scalars over the values
      counted) and ``"counts"`` (float32 ``[1548]``, one per bucket). Values beyond
      ``±1e20`` count in ``num`` and the sums, not in a bucket (as ``np.histogram``).
      Unlike TF's double sums, the sums are float32 (JAX's default): beyond ~1.8e19 in
      magnitude a value's square, and ``sum_squares``, is infinite.
    """
    x, keep = _flattened(values, mask, jnp)
    edges = jnp.asarray(EDGES, jnp.float32)
    bucket = _bucket(x, edges)
    inside = (x >= edges[0]) & (x <= edges[-1])
    binned = jnp.zeros(EDGES.size - 1, jnp.float32)
    binned = binned.at[bucket].add(jnp.where(inside, keep, 0.0))
    return {
        "min": jnp.min(jnp.where(keep > 0, x, jnp.inf)),
        "max": jnp.max(jnp.where(keep > 0, x, -jnp.inf)),
        "num": jnp.sum(keep),
        "sum": jnp.sum(keep * x),
        "sum_squares": jnp.sum(keep * x * x),
        "counts": binned,
    }


def _flattened(values, mask, xp) -> tuple:
    """``values`` as float32 and their weights (0 in a row ``mask`` leaves out, else 1),
    both flattened, with ``xp`` (``numpy`` or ``jax.numpy``)."""
    x = xp.asarray(values, xp.float32)
    keep = xp.ones(x.shape, xp.float32)
    if mask is not None:
        row = (xp.asarray(mask) > 0).astype(xp.float32)
        keep = keep * row.reshape(row.shape + (1,) * (x.ndim - 1))
    return x.reshape(-1), keep.reshape(-1)


def _bucket(x, edges):
    """The bucket of each value (``edges[i] <= x < edges[i + 1]``, clipped to the buckets):
    the edges are powers of 1.1, so a logarithm gives it to within one, and comparing with
    the two edges around it corrects that (a binary search over the 1,549 edges costs XLA's
    CPU backend several times more)."""
    half = (EDGES.size - 1) // 2  # the index of the edge 0.0
    last = EDGES.size - 2
    power = jnp.floor(jnp.log(jnp.abs(x) / _SMALLEST) / _LOG_STEP)
    power = jnp.clip(jnp.nan_to_num(power, nan=-1.0), -1, half - 1).astype(jnp.int32)
    guess = jnp.where(x >= 0, half + 1 + power, half - 2 - power)
    bucket = jnp.clip(guess, 0, last)
    for _ in range(2):
        bucket = jnp.clip(bucket - (x < edges[bucket]), 0, last)
        bucket = jnp.clip(bucket + (x >= edges[bucket + 1]), 0, last)
    return bucket


_LOG_STEP = float(np.log(1.1))


@functools.cache
def _host_counts():
    return jax.jit(counts)


#: Host values are binned in padded vectors of at least this many values, a power of two:
#: one compiled program serves every histogram up to this size.
HOST_PADDED_MIN = 1 << 16


def host_counts(values, mask=None) -> dict:
    """:func:`counts` of host arrays (fetched values; ``mask`` as there), as NumPy. The
    values are flattened and padded to a power of two of at least ``HOST_PADDED_MIN``
    (the padding left out as masked rows are), so histograms of different shapes share a
    compiled program."""
    x, keep = _flattened(values, mask, np)
    size = max(HOST_PADDED_MIN, 1 << max(x.size - 1, 0).bit_length())
    binned = _host_counts()(np.pad(x, (0, size - x.size)), np.pad(keep, (0, size - keep.size)))
    return {k: np.asarray(v) for k, v in binned.items()}


def proto_fields(histogram: dict) -> dict | None:
    """The keyword arguments of ``add_histogram_raw`` (tensorboardX's ``SummaryWriter``,
    ``estimator.events.files.EventWriter``) for :func:`counts`' result (host values);
    None when no value fell in a bucket (tensorboardX refuses an empty histogram)."""
    binned = np.asarray(histogram["counts"], np.float64)
    filled = np.flatnonzero(binned)
    if float(histogram["num"]) == 0 or filled.size == 0:
        return None
    start, end = int(filled[0]), int(filled[-1]) + 1
    # TensorBoard reads right edges only: an empty bucket before the first non-empty one
    # keeps the left edge (tensorboardX's make_histogram).
    buckets = binned[start - 1 : end] if start > 0 else np.concatenate([[0.0], binned[:end]])
    return {
        "min": float(histogram["min"]),
        "max": float(histogram["max"]),
        "num": float(histogram["num"]),
        "sum": float(histogram["sum"]),
        "sum_squares": float(histogram["sum_squares"]),
        "bucket_limits": EDGES[start : end + 1].tolist(),
        "bucket_counts": buckets.tolist(),
    }
