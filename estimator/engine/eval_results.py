"""The end of an evaluation: metric values and mean loss from the device accumulator,
and results as host values (Python scalars, NumPy arrays)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["finalize", "host_value"]


def finalize(acc: dict) -> tuple[dict, jax.Array]:
    """Metric values and the mean batch loss from an evaluation's accumulator."""
    metrics = {k: m.compute() for k, m in acc["metrics"].items()}
    return metrics, acc["loss_sum"] / jnp.maximum(acc["batches"], 1)


def host_value(x):
    """A Python scalar for a 0-d value, else a NumPy array."""
    value = np.asarray(x)
    if value.shape == ():
        return value.item()
    return value
