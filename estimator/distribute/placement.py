"""Batches in and values out of a multi-process job.

Each process reads its own rows of every global batch (and all reach the end of their
input together, :class:`AgreedEnd`); :func:`process_local_placement` assembles the global
array (``jax.make_array_from_process_local_data``), sharded over the
mesh's data axis. Values leave the device the other way: a fully replicated array (the
loss, metrics) is read from the local copy; a sharded one (predictions) gives this
process its own rows (:func:`process_local`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec

__all__ = [
    "AgreedEnd",
    "local_copy",
    "place",
    "process_local",
    "process_local_placement",
]


def process_local_placement(mesh) -> Callable:
    """``place(batch)``: this process's rows -> global arrays over ``mesh``'s first axis.

    Raises (when called):
      ValueError: a batch whose rows don't split evenly over this process's devices on
        the data axis (every process must feed batches of one shape, step by step).
    """
    axis = mesh.axis_names[0]
    sharding = NamedSharding(mesh, PartitionSpec(axis))
    local_devices = mesh.shape[axis] // jax.process_count()

    def leaf(x):
        x = np.asarray(x) if not isinstance(x, jax.Array) else x
        if np.ndim(x) == 0 or np.shape(x)[0] % local_devices:
            raise ValueError(
                f"In a multi-process job each process's batch must split evenly over its "
                f"{local_devices} devices on the '{axis}' axis; got an input of shape "
                f"{np.shape(x)}. Feed batches of a multiple of {local_devices} rows (e.g. "
                "batch(..., drop_remainder=True), or numpy_input_fn with a size that "
                "divides), the same number of them on every process."
            )
        return jax.make_array_from_process_local_data(sharding, x)

    return lambda batch: jax.tree.map(leaf, batch)


def place(tree, shardings):
    """``jax.device_put(tree, shardings)``, also where a sharding spans several processes.

    An array of this process alone (a fresh initial state, a warm-started one) goes through
    the host on its way to a sharding that spans processes: with one device per process,
    JAX's ``device_put`` of a one-device array onto a sharding whose only local device is
    that array's own reuses the buffer as the global array's single shard, and that array's
    ``addressable_shards`` raises ("When making an array from single-device arrays the
    input arrays must have one shard each"), which orbax's save reads: every such job died
    at its first checkpoint. Arrays already spanning processes, and host arrays, are placed
    by ``device_put`` as they are.
    """
    leaves, treedef = jax.tree.flatten(tree)
    targets = treedef.flatten_up_to(shardings)
    leaves = [
        np.asarray(x)
        if isinstance(x, jax.Array)
        and x.is_fully_addressable
        and where is not None
        and not where.is_fully_addressable
        else x
        for x, where in zip(leaves, targets, strict=True)
    ]
    return jax.device_put(treedef.unflatten(leaves), shardings)


def process_local(tree, mesh):
    """``tree`` with every array that spans other processes cut to this process's rows."""
    axis = mesh.axis_names[0]

    def leaf(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return multihost_utils.global_array_to_host_local_array(x, mesh, PartitionSpec(axis))
        return x

    return jax.tree.map(leaf, tree)


def local_copy(tree):
    """``tree`` with every array that spans other processes made this process's own: its
    local copy of a replicated array (a metrics accumulator, replicated variables), else
    the whole array gathered from every process (a collective: every process must call).
    Arrays of this process alone are returned as they are."""

    def leaf(x):
        if not isinstance(x, jax.Array) or x.is_fully_addressable:
            return x
        if x.sharding.is_fully_replicated:
            return x.addressable_data(0)
        return multihost_utils.process_allgather(x, tiled=True)

    return jax.tree.map(leaf, tree)


class AgreedEnd:
    """A prefetcher whose end of input every process of the job must reach together.

    Every process must run the same steps: one whose input ends early would leave the
    others waiting forever in their next step's collective. When this process's input
    ends it waits (on the coordination service, ``timeout_secs`` at most) for every process
    to reach its end too; if they don't, it raises, and its exit ends the others' wait
    (their heartbeat timeout) — an error within bounded time instead of a hang.

    Args:
      prefetcher: the process's ``estimator.engine.input_pipeline.Prefetcher``.
      timeout_secs: how long to wait for the other processes' end of input.
    """

    _ends = 0  # barrier names must be unique and in the same order on every process

    def __init__(self, prefetcher, timeout_secs: int) -> None:
        self._prefetcher = prefetcher
        self._timeout = int(timeout_secs)
        self._batches = 0
        self._agreed = False

    def fill(self) -> None:
        self._prefetcher.fill()

    def warm(self) -> None:
        self._prefetcher.warm()

    def epoch_ended(self) -> bool:
        return self._prefetcher.epoch_ended()

    def peek(self):
        try:
            return self._prefetcher.peek()
        except StopIteration:
            self._agree()  # the loop may learn of the end by a peek (an epoch to begin)
            raise

    def pop(self):
        try:
            batch = self._prefetcher.pop()
        except StopIteration:
            self._agree()
            raise
        self._batches += 1
        return batch

    def __getattr__(self, name: str):  # last_batch_size, batch_count, padding
        return getattr(self._prefetcher, name)

    def _agree(self) -> None:
        if self._agreed:
            return
        self._agreed = True
        AgreedEnd._ends += 1
        try:
            ocp.multihost.sync_global_processes(
                f"estimator_end_of_input_{AgreedEnd._ends}",
                timeout=self._timeout,
                processes=set(range(jax.process_count())),
            )
        except Exception as err:  # the coordination service's timeout error
            raise RuntimeError(
                f"The input of process {jax.process_index()} ended after {self._batches} "
                f"batches, and the other processes did not end theirs within "
                f"{self._timeout} s: every process of a multi-process job must feed the same "
                "number of batches. Use a repeating input with steps/max_steps, or give "
                f"each process an equal shard ({type(err).__name__}: {err})."
            ) from err
