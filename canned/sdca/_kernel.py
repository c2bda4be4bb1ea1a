"""The SDCA step on one batch: TF's ``SdcaOptimizerV2`` kernel
(``tensorflow/core/kernels/sdca_ops.cc``, ``sdca_internal.cc``) as one ``jax.lax.scan``
over the batch's examples.

For each example ``i`` in turn (Shalev-Shwartz & Zhang's SDCA with the proximal L1 step of
https://arxiv.org/abs/1309.2375 and the CoCoA+ factor ``p = num_loss_partitions``)::

    wx      = Σ_j x_ij · shrink(w_j + p · δ_j)        shrink(v) = sign(v)·max(|v| - l1/l2, 0)
    a'      = loss.update_dual(p, y_i, s_i, a_i, wx, ‖x_i‖² / l2)
    δ_j    += x_ij · (a' - a_i) · s_i / l2             for the features of example i
    state_i = [a', primal_loss(shrink(w)·x_i), dual_loss(a_i), s_i]

``w`` are the unshrunk weights at the start of the step and ``δ`` the deltas accumulated
during it; the caller adds ``δ`` to ``w`` afterwards (TF's ``scatter_add``/``assign_add``).
Examples are visited in ``order``; TF's kernel visits them in a random order (from
``std::random_device``, so TF itself is not reproducible on batches of more than one example).

Layout: sparse feature groups come padded per example — ids ``int32 [B, k]`` (-1: none,
no id twice in a row) and values ``float32 [B, k]`` — against a table ``float32 [n]``;
dense groups are ``float32 [B, d]`` against ``float32 [d]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax import lax

from canned.sdca._losses import DualLoss, convert_labels


def shrink(weights: jax.Array, l1: float, l2: float) -> jax.Array:
    """The proximal L1 step ``sign(w)·max(|w| - l1/l2, 0)`` (TF's ``EigenShrinkVector``)."""
    if l1 == 0:
        return weights
    return jnp.sign(weights) * jnp.maximum(jnp.abs(weights) - jnp.float32(l1 / l2), 0.0)


def _sparse_dot(ids, values, table, l1, l2):
    valid = ids >= 0
    return jnp.sum(jnp.where(valid, values * shrink(table[jnp.where(valid, ids, 0)], l1, l2), 0.0))


def squared_norms(sparse_ids, sparse_values, dense) -> jax.Array:
    """``‖x_i‖²`` of every example, ``float32 [B]``."""
    total = 0.0
    for ids, values in zip(sparse_ids, sparse_values, strict=True):
        total = total + jnp.sum(jnp.where(ids >= 0, values * values, 0.0), axis=1)
    for x in dense:
        total = total + jnp.sum(x * x, axis=1)
    return jnp.asarray(total, jnp.float32)


def logits(sparse_ids, sparse_values, dense, sparse_tables, dense_tables, l1, l2) -> jax.Array:
    """``shrink(w) · x_i`` of every example, ``float32 [B]``."""
    total = 0.0
    for ids, values, table in zip(sparse_ids, sparse_values, sparse_tables, strict=True):
        rows = shrink(table, l1, l2)[jnp.where(ids >= 0, ids, 0)]
        total = total + jnp.sum(jnp.where(ids >= 0, values * rows, 0.0), axis=1)
    for x, table in zip(dense, dense_tables, strict=True):
        total = total + x @ shrink(table, l1, l2)
    return jnp.asarray(total, jnp.float32)


def adaptive_order(key, loss: DualLoss, labels, weights, state, norms, wx, l2) -> jax.Array:
    """An importance order of the batch (adaptive SDCA, https://arxiv.org/abs/1502.08053):
    example ``i`` weighs ``s_i·sqrt(‖x_i‖² + l2·smoothness)·|a_i + loss'(wx_i)|`` (TF's
    ``SampleAdaptiveProbabilities``), and the order samples without replacement by weight
    (Gumbel top-k), so every example is visited once; TF samples with replacement with a
    decay, from its own generator."""
    y = convert_labels(loss, labels)
    kappa = state[:, 0] + loss.derivative(wx, y, 1.0)
    p = weights * jnp.sqrt(norms + l2 * loss.smoothness) * jnp.abs(kappa)
    scores = jnp.where(p > 0, jnp.log(jnp.where(p > 0, p, 1.0)), -jnp.inf)
    scores = scores + jax.random.gumbel(key, p.shape)
    return jnp.argsort(-scores).astype(jnp.int32)


def sdca_batch(
    loss: DualLoss,
    *,
    sparse_ids: Sequence[jax.Array],
    sparse_values: Sequence[jax.Array],
    dense: Sequence[jax.Array],
    sparse_tables: Sequence[jax.Array],
    dense_tables: Sequence[jax.Array],
    labels: jax.Array,
    weights: jax.Array,
    state: jax.Array,
    order: jax.Array,
    l1: float,
    l2: float,
    num_loss_partitions: int,
) -> tuple[jax.Array, list[jax.Array], list[jax.Array]]:
    """One SDCA pass over a batch (the kernel; see the module docstring).

    Args:
      loss: from ``canned.sdca._losses.get_loss``.
      sparse_ids, sparse_values: per sparse group, ``[B, k]`` ids and values.
      dense: per dense group, ``[B, d]``.
      sparse_tables, dense_tables: the unshrunk weights, ``[n]`` and ``[d]``.
      labels: ``float32 [B]`` (0/1 for the binary losses).
      weights: ``float32 [B]`` example weights.
      state: ``float32 [B, 4]``: dual, primal loss, dual loss, weight of each example.
      order: ``int32 [B]``, the visiting order.
      l1, l2: the symmetric regularizations (``l2 > 0``).
      num_loss_partitions: ``p`` above.

    Returns:
      ``(state [B, 4], sparse deltas [n] per group, dense deltas [d] per group)``.
    """
    y_all = convert_labels(loss, labels.astype(jnp.float32))
    norms = squared_norms(sparse_ids, sparse_values, dense) / jnp.float32(l2)
    p = jnp.float32(num_loss_partitions)

    def visit(carry, i):
        sparse_deltas, dense_deltas, state = carry
        wx = 0.0
        prev_wx = 0.0
        for ids, values, table, delta in zip(
            sparse_ids, sparse_values, sparse_tables, sparse_deltas, strict=True
        ):
            row_ids, row_values = ids[i], values[i]
            prev_wx = prev_wx + _sparse_dot(row_ids, row_values, table, l1, l2)
            wx = wx + _sparse_dot(row_ids, row_values, table + p * delta, l1, l2)
        for x, table, delta in zip(dense, dense_tables, dense_deltas, strict=True):
            prev_wx = prev_wx + jnp.sum(x[i] * shrink(table, l1, l2))
            wx = wx + jnp.sum(x[i] * shrink(table + delta * p, l1, l2))
        y, s, a = y_all[i], weights[i], state[i, 0]
        new_dual = loss.update_dual(p, y, s, a, wx, norms[i])
        step = (new_dual - a) * s / jnp.float32(l2)
        sparse_deltas = [
            delta.at[jnp.where(ids[i] >= 0, ids[i], delta.shape[0])].add(
                values[i] * step, mode="drop"
            )
            for ids, values, delta in zip(sparse_ids, sparse_values, sparse_deltas, strict=True)
        ]
        dense_deltas = [delta + x[i] * step for x, delta in zip(dense, dense_deltas, strict=True)]
        row = jnp.stack(
            [new_dual, loss.primal_loss(prev_wx, y, s), loss.dual_loss(a, y, s), s]
        ).astype(jnp.float32)
        return (sparse_deltas, dense_deltas, state.at[i].set(row)), None

    init = (
        [jnp.zeros_like(t) for t in sparse_tables],
        [jnp.zeros_like(t) for t in dense_tables],
        state.astype(jnp.float32),
    )
    (sparse_deltas, dense_deltas, state), _ = lax.scan(visit, init, order)
    return state, sparse_deltas, dense_deltas


def dedupe_ids(ids: jax.Array, values: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per example, ids < 0 dropped and repeated ids merged with their values summed (TF's
    ``LinearSDCA._prune_and_unique_sparse_ids``). ``[B, k]`` in, ``[B, k]`` out, -1 padded.
    """
    valid = ids >= 0
    big = jnp.iinfo(jnp.int32).max
    keys = jnp.where(valid, ids, big)
    order = jnp.argsort(keys, axis=1, stable=True)
    keys = jnp.take_along_axis(keys, order, axis=1)
    values = jnp.take_along_axis(jnp.where(valid, values, 0.0), order, axis=1)
    first = jnp.concatenate([jnp.ones_like(keys[:, :1], bool), keys[:, 1:] != keys[:, :-1]], 1)
    segment = jnp.cumsum(first, axis=1) - 1  # position of each run's merged entry
    rows = jnp.broadcast_to(jnp.arange(keys.shape[0])[:, None], keys.shape)
    summed = jnp.zeros_like(values).at[rows, segment].add(values)
    merged_ids = jnp.full_like(keys, -1).at[rows, segment].max(jnp.where(keys == big, -1, keys))
    return merged_ids, summed
