"""Safe embedding lookup over padded ids (``tf.nn.safe_embedding_lookup_sparse``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from estimator.model.rows import lookup_rows

COMBINERS = ("mean", "sqrtn", "sum")


def check_combiner(combiner: str) -> None:
    """Raises TF's ``embedding_lookup_sparse`` error for an unknown combiner."""
    if combiner not in COMBINERS:
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner}")


def safe_embedding_lookup(
    params: jax.Array,
    ids: jax.Array,
    weights: jax.Array | None,
    combiner: str,
    max_norm: float | None = None,
) -> jax.Array:
    """Combines the rows of ``params`` selected by each example's ids.

    As ``tf.nn.safe_embedding_lookup_sparse`` (TF 2.15) on the sparse tensor the padded ids
    stand for: ids ``< 0`` are dropped; for ``mean``/``sqrtn`` entries with weight ``<= 0``
    are dropped too; an example with no id left gives zeros. With weights ``w_j`` and rows
    ``p_j = params[id_j]``::

        sum:   Σ w_j p_j
        mean:  Σ w_j p_j / Σ w_j
        sqrtn: Σ w_j p_j / sqrt(Σ w_j²)

    Args:
      params: ``[num_buckets, dim]`` embedding (or linear weight) matrix.
      ids: ``int32 [batch_size, k]``, -1 for "no id".
      weights: ``float32 [batch_size, k]`` or None (all 1).
      combiner: ``"sum"``, ``"mean"`` or ``"sqrtn"``.
      max_norm: if set, each looked-up row is rescaled to an l2 norm of at most
        ``max_norm`` first (``tf.nn.embedding_lookup``'s ``max_norm``).

    Returns:
      ``[batch_size, dim]`` array of ``params``' dtype.

    The rows are read with ``estimator.model.rows.lookup_rows``: in training, under an
    optimizer that allows it (FTRL, Adagrad, SGD), only the rows of the ids present (those
    not dropped above) and their slots are updated, as TF's sparse kernels do.
    """
    check_combiner(combiner)
    ids = jnp.asarray(ids, jnp.int32)
    if weights is None and combiner == "sum" and max_norm is None:
        # lookup_rows gives zeros for ids < 0: the sum needs no mask.
        return jnp.sum(lookup_rows(params, ids), axis=1)
    valid = ids >= 0
    if weights is None:
        w = jnp.ones(ids.shape, params.dtype)
    else:
        w = jnp.asarray(weights, params.dtype).reshape(ids.shape)
        if combiner != "sum":
            valid = valid & (w > 0)
    w = jnp.where(valid, w, 0)
    rows = lookup_rows(params, jnp.where(valid, ids, -1))  # [batch_size, k, dim]
    if max_norm is not None:
        norm = jnp.linalg.norm(rows, axis=-1, keepdims=True)
        rows = rows * jnp.where(norm > max_norm, max_norm / jnp.maximum(norm, 1e-30), 1.0)
    # Elementwise with a sum, not an einsum: XLA fuses it with the lookup (a batched
    # matrix-vector product has no reuse for a dot to exploit).
    total = jnp.sum(w[..., None] * rows, axis=1)
    if combiner == "sum":
        return total  # an example without ids sums nothing: 0
    if combiner == "mean":
        denominator = jnp.sum(w, axis=1)
    else:
        denominator = jnp.sqrt(jnp.sum(w * w, axis=1))
    combined = total / jnp.where(denominator > 0, denominator, 1)[:, None]
    return jnp.where(jnp.any(valid, axis=1)[:, None], combined, 0)
