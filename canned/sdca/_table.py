"""The per-example SDCA state on the device: an open-addressing hash table from example-id
fingerprints to ``[dual, primal loss, dual loss, weight]``.

TF keeps this state in a ``MutableDenseHashTable`` that grows as examples arrive. A jitted
step has fixed shapes, so here the table has a fixed ``capacity`` (a power of two): keys
``int32 [capacity, 4]`` (the four 32-bit words of ``sdca_fprint``'s 128 bits; all-zero
means empty, as TF's empty key ``[0, 0]``) and values ``float32 [capacity, 4]``. Lookups
probe linearly from the low bits of the fingerprint. When every slot is taken, a new
example finds no slot: it is left out of the step and counted in ``overflow`` (the
estimator then raises, naming the capacity to raise).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from canned.sdca._ops import sdca_fprint


def example_keys(ids) -> np.ndarray:
    """Host side: example ids (strings; integers as their decimal string) to ``int32
    [batch_size, 4]`` keys, the 128-bit ``sdca_fprint`` in four words (low word first)."""
    values = np.asarray(ids).reshape(-1)
    if values.dtype.kind in "iu":
        values = values.astype(str)
    elif values.dtype.kind not in "OUS":
        raise ValueError(
            f"Example ids must be strings (or integers); got dtype {values.dtype}. Give each "
            "example a unique string id."
        )
    values = [v if isinstance(v, bytes | str) else str(v) for v in values.tolist()]
    return sdca_fprint(values).view(np.uint32).reshape(len(values), 4).view(np.int32)


def find_slots(keys: jax.Array, queries: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Slots of ``queries`` (``int32 [B, 4]``) in the table ``keys`` (``int32 [C, 4]``),
    inserting the new ones in order.

    Returns:
      ``(slots int32 [B] (-1: no free slot), updated keys, number inserted)``.
    """
    capacity = keys.shape[0]
    mask = capacity - 1

    def find(carry, query):
        keys, inserted = carry
        start = query[0] & mask

        def cond(state):
            probe, slot = state
            row = keys[slot]
            return (probe < capacity) & ~jnp.all(row == query) & jnp.any(row != 0)

        def body(state):
            probe, slot = state
            return probe + 1, (slot + 1) & mask

        probe, slot = lax.while_loop(cond, body, (jnp.int32(0), start))
        found = probe < capacity
        new = found & jnp.all(keys[slot] == 0)
        keys = keys.at[slot].set(jnp.where(new, query, keys[slot]))
        return (keys, inserted + new.astype(jnp.int32)), jnp.where(found, slot, -1)

    (keys, inserted), slots = lax.scan(find, (keys, jnp.int32(0)), queries)
    return slots, keys, inserted


def last_occurrence(slots: jax.Array) -> jax.Array:
    """``bool [B]``: whether each entry is the last one of its slot in the batch (an example
    seen twice in a batch keeps its last update, as TF's table insert)."""
    order = jnp.argsort(slots, stable=True)
    ordered = slots[order]
    last_sorted = jnp.concatenate([ordered[1:] != ordered[:-1], jnp.ones((1,), bool)])
    return jnp.zeros_like(last_sorted).at[order].set(last_sorted)


def gather_states(values: jax.Array, slots: jax.Array) -> jax.Array:
    """``float32 [B, 4]`` states of ``slots`` (zeros for -1: an example without a slot)."""
    return jnp.where((slots >= 0)[:, None], values[jnp.maximum(slots, 0)], 0.0)


def scatter_states(values: jax.Array, slots: jax.Array, states: jax.Array) -> jax.Array:
    """``values`` with ``states`` written at ``slots`` (-1 and repeated slots but the last
    skipped)."""
    keep = (slots >= 0) & last_occurrence(slots)
    return values.at[jnp.where(keep, slots, values.shape[0])].set(states, mode="drop")
