"""Several processes, several machines: TF_CONFIG clusters on ``jax.distributed``.

* ``cluster`` — joining the job from ``TF_CONFIG`` (``connect``), the chief, the global
  mesh, a seed every process shares, the step a preempted job stops at.
* ``failures`` — a process that raises ends the job at once, and every process says which
  task failed and why (:class:`JobFailedError`).
* ``input_context`` — :class:`InputContext`: which shard of the input a process reads.
* ``placement`` — global batches from each process's rows, process-local values out,
  checkpoint decisions every process shares.
* ``sharding`` — where the state lives: replicated, or sharded by
  ``RunConfig(variable_partitions=...)``.

The guide: ``docs/distributed.md``.
"""

from estimator.distribute.cluster import barrier as barrier
from estimator.distribute.cluster import check_same as check_same
from estimator.distribute.cluster import connect as connect
from estimator.distribute.cluster import heartbeat_timeout as heartbeat_timeout
from estimator.distribute.cluster import input_end_timeout as input_end_timeout
from estimator.distribute.cluster import is_chief as is_chief
from estimator.distribute.cluster import mesh_for as mesh_for
from estimator.distribute.cluster import multi_process as multi_process
from estimator.distribute.cluster import preemption_sync_point as preemption_sync_point
from estimator.distribute.cluster import shared_seed as shared_seed
from estimator.distribute.failures import JobFailedError as JobFailedError
from estimator.distribute.failures import reporting as reporting
from estimator.distribute.failures import watch as watch
from estimator.distribute.input_context import InputContext as InputContext
from estimator.distribute.placement import AgreedEnd as AgreedEnd
from estimator.distribute.placement import local_copy as local_copy
from estimator.distribute.placement import place as place
from estimator.distribute.placement import process_local as process_local
from estimator.distribute.placement import process_local_placement as process_local_placement
from estimator.distribute.sharding import state_shardings as state_shardings
from estimator.hooks.timers import SyncedTimer as SyncedTimer

__all__ = [
    "AgreedEnd",
    "InputContext",
    "JobFailedError",
    "SyncedTimer",
    "barrier",
    "check_same",
    "connect",
    "heartbeat_timeout",
    "input_end_timeout",
    "is_chief",
    "local_copy",
    "mesh_for",
    "multi_process",
    "place",
    "preemption_sync_point",
    "process_local",
    "process_local_placement",
    "reporting",
    "shared_seed",
    "state_shardings",
    "watch",
]
