"""TF's SDCA ops with their TF 1 names and arguments (``tf.compat.v1.train.sdca_optimizer``,
``sdca_fprint``, ``sdca_shrink_l1``), for code that calls them directly.

``sdca_optimizer`` takes TF's layout — sparse features as COO lists of
``(example index, feature index[, value])`` per group, the weights of the feature ids
present — converts it on the host to the padded layout of the kernel
(``canned.sdca._kernel``) and runs one jitted pass. Every loss of TF's kernel is here:
``logistic_loss``, ``squared_loss``, ``hinge_loss``, ``smooth_hinge_loss`` and
``poisson_loss``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import farmhash
import jax
import jax.numpy as jnp
import numpy as np

from canned.sdca import _kernel
from canned.sdca._losses import get_loss

__all__ = ["sdca_fprint", "sdca_optimizer", "sdca_shrink_l1"]


def sdca_fprint(input: Sequence[str | bytes]) -> np.ndarray:  # noqa: A002 (TF's name)
    """128-bit fingerprints of example ids (``tf.compat.v1.train.sdca_fprint``).

    FarmHash ``Fingerprint128`` of each string, as ``int64 [n, 2]`` ``(low, high)``; a low
    half of 0 or 1 is moved by ``-2`` (mod 2**64) so that ``[0, 0]`` and ``[1, 1]`` stay free
    as the hash table's empty and deleted keys — TF's values, bit for bit.

    Args:
      input: a vector of strings (or bytes).

    Raises:
      ValueError: for input that is not a vector (TF's message).
    """
    values = np.asarray(input, dtype=object)
    if values.ndim != 1:
        raise ValueError(f"Input must be a vector, got shape {list(values.shape)}")
    out = np.empty((len(values), 2), np.uint64)
    for i, value in enumerate(values):
        low, high = farmhash.fingerprint128(value)
        out[i] = (low if low >= 2 else (low - 2) % 2**64, high)
    return out.view(np.int64)


def sdca_shrink_l1(weights: Sequence[jax.typing.ArrayLike], l1: float, l2: float) -> list:
    """``sign(w)·max(|w| - l1/l2, 0)`` of each array (``tf.compat.v1.train.sdca_shrink_l1``;
    TF updates the variables in place, this returns the new values)."""
    return [_kernel.shrink(jnp.asarray(w, jnp.float32), l1, l2) for w in weights]


def _padded(example_indices, feature_indices, values, num_examples):
    """COO ``(example, feature, value)`` -> ``ids [B, k]`` (-1 padded) and ``values [B, k]``."""
    example_indices = np.asarray(example_indices, np.int64).ravel()
    feature_indices = np.asarray(feature_indices, np.int64).ravel()
    if len(example_indices) != len(feature_indices):
        raise ValueError(
            f"Found mismatched example_indices and feature_indices [{example_indices}] vs "
            f"[{feature_indices}]"
        )
    values = (
        np.ones(len(feature_indices), np.float32)
        if values is None
        else np.asarray(values, np.float32).ravel()
    )
    counts = np.bincount(example_indices, minlength=num_examples)
    longest = max(int(counts.max(initial=0)), 1)
    width = 1 << (longest - 1).bit_length()  # a power of two: few compiled shapes
    ids = np.full((num_examples, width), -1, np.int32)
    out = np.zeros((num_examples, width), np.float32)
    position = np.zeros(num_examples, np.int64)
    for e, f, v in zip(example_indices, feature_indices, values, strict=True):
        if f in ids[e, : position[e]]:
            raise ValueError("Duplicate index in sparse vector.")
        ids[e, position[e]], out[e, position[e]] = f, v
        position[e] += 1
    return ids, out


def sdca_optimizer(
    sparse_example_indices: Sequence,
    sparse_feature_indices: Sequence,
    sparse_feature_values: Sequence,
    dense_features: Sequence,
    example_weights,
    example_labels,
    sparse_indices: Sequence,
    sparse_weights: Sequence,
    dense_weights: Sequence,
    example_state_data,
    loss_type: str,
    l1: float,
    l2: float,
    num_loss_partitions: int,
    num_inner_iterations: int,
    adaptative: bool = True,
    name=None,
):
    """One SDCA pass over a batch (``tf.compat.v1.train.sdca_optimizer``, TF's kernel).

    Args:
      sparse_example_indices, sparse_feature_indices: per sparse group, the example and
        feature index of each entry (COO, grouped by example).
      sparse_feature_values: per group (the first ones), the entries' values; a group
        without values has 1.0 everywhere.
      dense_features: per dense group, ``float32 [B, d]``.
      example_weights, example_labels: ``float32 [B]``.
      sparse_indices: per sparse group, the feature ids whose weights are given.
      sparse_weights: per sparse group, their (unshrunk) weights.
      dense_weights: per dense group, ``[d]`` (or ``[d, 1]``) weights.
      example_state_data: ``float32 [B, 4]``: dual, primal loss, dual loss, weight.
      loss_type: ``logistic_loss``, ``squared_loss``, ``hinge_loss``,
        ``smooth_hinge_loss`` or ``poisson_loss``.
      l1, l2: symmetric regularizations.
      num_loss_partitions: the CoCoA+ factor (number of concurrent workers).
      num_inner_iterations: accepted; TF's kernel makes one pass as well.
      adaptative: visit examples in an importance order (see
        ``canned.sdca._kernel.adaptive_order``, seeded with 0) instead of in order. TF
        visits them in a random order either way.
      name: ignored.

    Returns:
      ``(out_example_state_data [B, 4], out_delta_sparse_weights, out_delta_dense_weights)``
      as NumPy arrays, the deltas shaped like the given weights.

    Raises:
      ValueError: TF's messages for an unknown loss, mismatched lengths or duplicate
        feature ids within an example.
    """
    del num_inner_iterations, name
    get_loss(loss_type)  # an unknown loss raises before any work
    example_weights = np.asarray(example_weights, np.float32).ravel()
    num_examples = len(example_weights)
    state = np.asarray(example_state_data, np.float32)
    if state.shape != (num_examples, 4):
        raise ValueError(
            f"Expected shape [{num_examples},4] for example_state_data, got {list(state.shape)}"
        )
    if len(sparse_indices) != len(sparse_weights):
        raise ValueError(
            "sparse_indices and sparse_weights must have the same length, got "
            f"{len(sparse_indices)} and {len(sparse_weights)}"
        )
    ids, values, tables = [], [], []
    for g, (indices, weights) in enumerate(zip(sparse_indices, sparse_weights, strict=True)):
        indices = np.asarray(indices, np.int64).ravel()
        features = np.asarray(sparse_feature_indices[g], np.int64).ravel()
        size = int(max(indices.max(initial=-1), features.max(initial=-1))) + 1
        table = np.zeros(size, np.float32)
        table[indices] = np.asarray(weights, np.float32).ravel()
        group_values = sparse_feature_values[g] if g < len(sparse_feature_values) else None
        group_ids, group_vals = _padded(
            sparse_example_indices[g], features, group_values, num_examples
        )
        ids.append(group_ids)
        values.append(group_vals)
        tables.append(table)
    dense = [np.asarray(x, np.float32) for x in dense_features]
    dense_tables = [np.asarray(w, np.float32).ravel() for w in dense_weights]
    new_state, sparse_deltas, dense_deltas = _run(
        loss_type,
        float(l1),
        float(l2),
        int(num_loss_partitions),
        bool(adaptative),
        ids,
        values,
        dense,
        tables,
        dense_tables,
        np.asarray(example_labels, np.float32).ravel(),
        example_weights,
        state,
    )
    sparse_out = [
        np.asarray(delta)[np.asarray(indices, np.int64).ravel()].reshape(np.shape(weights))
        for delta, indices, weights in zip(
            sparse_deltas, sparse_indices, sparse_weights, strict=True
        )
    ]
    dense_out = [
        np.asarray(delta).reshape(np.shape(w))
        for delta, w in zip(dense_deltas, dense_weights, strict=True)
    ]
    return np.asarray(new_state), sparse_out, dense_out


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _run(
    loss_type, l1, l2, p, adaptive, ids, values, dense, tables, dense_tables, labels, weights, state
):
    loss = get_loss(loss_type)
    if adaptive:
        wx = _kernel.logits(ids, values, dense, tables, dense_tables, l1, l2)
        norms = _kernel.squared_norms(ids, values, dense)
        order = _kernel.adaptive_order(
            jax.random.key(0), loss, labels, weights, state, norms, wx, l2
        )
    else:
        order = jnp.arange(labels.shape[0], dtype=jnp.int32)
    return _kernel.sdca_batch(
        loss,
        sparse_ids=ids,
        sparse_values=values,
        dense=dense,
        sparse_tables=tables,
        dense_tables=dense_tables,
        labels=labels,
        weights=weights,
        state=state,
        order=order,
        l1=l1,
        l2=l2,
        num_loss_partitions=p,
    )
