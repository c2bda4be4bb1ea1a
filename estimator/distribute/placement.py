"""Batches in and values out of a multi-process job.

Each process reads its own rows of every global batch; :func:`process_local_placement`
assembles the global array (``jax.make_array_from_process_local_data``), sharded over the
mesh's data axis. Values leave the device the other way: a fully replicated array (the
loss, metrics) is read from the local copy; a sharded one (predictions) gives this
process its own rows (:func:`process_local`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec

__all__ = ["SyncedTimer", "process_local", "process_local_placement"]


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


def process_local(tree, mesh):
    """``tree`` with every array that spans other processes cut to this process's rows."""
    axis = mesh.axis_names[0]

    def leaf(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return multihost_utils.global_array_to_host_local_array(x, mesh, PartitionSpec(axis))
        return x

    return jax.tree.map(leaf, tree)


class SyncedTimer:
    """A ``SecondOrStepTimer`` whose time-based decisions every process shares.

    Every process must save a checkpoint at the same steps (an orbax save is a collective
    operation). Step intervals agree by themselves; a time interval is checked only at
    steps that are multiples of ``check_every`` and decided by process 0's clock
    (broadcast: one small collective per ``check_every`` steps, none in between).

    Args:
      timer: the ``SecondOrStepTimer`` to share.
      every_secs: its time interval (None: steps only, nothing to share).
      check_every: steps between time checks.
    """

    def __init__(self, timer, every_secs: float | None, check_every: int = 100) -> None:
        self._timer = timer
        self._every_secs = every_secs
        self._check_every = max(1, int(check_every))

    def should_trigger_for_step(self, step: int) -> bool:
        if self._every_secs is None:
            return self._timer.should_trigger_for_step(step)
        if step % self._check_every:
            return False
        local = self._timer.should_trigger_for_step(step)
        return bool(multihost_utils.broadcast_one_to_all(np.bool_(local)))

    def __getattr__(self, name):  # reset, update_last_triggered_step, last_triggered_step
        return getattr(self._timer, name)
