"""Joining a multi-process job: ``jax.distributed`` from TF_CONFIG, the global mesh, the
chief, and what every process must agree on.

A TF Estimator job on several machines sets ``TF_CONFIG`` (``chief``, ``worker``,
``evaluator`` tasks) and runs the same program on each. Here the ``chief`` and ``worker``
tasks form one JAX multi-controller job (``jax.distributed``: a coordination service on
the chief's address, XLA collectives between processes); the ``evaluator`` stays outside
it and reads checkpoints. There is no parameter server: variables are replicated (or
sharded) over the global mesh and gradients are reduced by XLA.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable

import jax
import numpy as np
from jax.experimental import multihost_utils

from estimator.config import TaskType

__all__ = [
    "check_same",
    "connect",
    "heartbeat_timeout",
    "input_end_timeout",
    "is_chief",
    "mesh_for",
    "multi_process",
    "preemption_sync_point",
    "shared_seed",
]

logger = logging.getLogger("estimator")

# Seconds without a heartbeat after which the coordination service declares a process dead
# and every other process fails (jax.distributed's default is 100).
HEARTBEAT_ENV = "JAX_ESTIMATOR_HEARTBEAT_SECS"
DEFAULT_HEARTBEAT_SECS = 30
# Seconds a process exiting waits for the others at jax.distributed's shutdown barrier (its
# default 300 would keep a failed job alive for 5 minutes).
SHUTDOWN_ENV = "JAX_ESTIMATOR_SHUTDOWN_SECS"
DEFAULT_SHUTDOWN_SECS = 120
# Seconds a process whose input ended waits for the others to end theirs.
INPUT_END_ENV = "JAX_ESTIMATOR_INPUT_END_SECS"
DEFAULT_INPUT_END_SECS = 60


def input_end_timeout() -> int:
    """Seconds to wait for every process's end of input (``JAX_ESTIMATOR_INPUT_END_SECS``)."""
    return int(os.environ.get(INPUT_END_ENV, DEFAULT_INPUT_END_SECS))


def heartbeat_timeout() -> int:
    """Seconds without a heartbeat after which a process counts as dead
    (``JAX_ESTIMATOR_HEARTBEAT_SECS``, 30 by default: tests shorten it)."""
    return int(os.environ.get(HEARTBEAT_ENV, DEFAULT_HEARTBEAT_SECS))


def _training_tasks(config) -> list[tuple[str, int, str]]:
    """``(task_type, task_id, address)`` of the chief and workers, in global-id order."""
    cluster = config.cluster_spec.as_dict()
    tasks = [(TaskType.CHIEF, i, a) for i, a in enumerate(cluster.get(TaskType.CHIEF, []))]
    tasks += [(TaskType.WORKER, i, a) for i, a in enumerate(cluster.get(TaskType.WORKER, []))]
    return tasks


def connect(config) -> bool:
    """Starts ``jax.distributed`` for a ``chief``/``worker`` task of a TF_CONFIG cluster.

    Coordinator: the chief's address; ``num_processes``: chief + workers;
    ``process_id``: the task's rank among them (the chief 0, then ``worker`` 0, 1, ...),
    which is TF's ``global_id_in_cluster`` unless the cluster lists an ``evaluator`` (TF
    numbers it before the workers; it is no process of the training job). Does nothing without a
    cluster, for a single training task, for the ``evaluator`` (it stays outside the
    training job), or when ``jax.distributed`` is already initialised (a job started by
    the user's own ``jax.distributed.initialize`` is used as it is).

    Must run before anything touches a JAX device (the Estimator calls it first).

    Returns:
      True when this call initialised ``jax.distributed``.

    Raises:
      ValueError: a cluster with ``ps`` tasks (no parameter servers: variables are
        replicated or sharded over the global mesh), or a cluster without a chief.
      RuntimeError: JAX was already used in this process (devices created) before the
        Estimator joined the cluster.
    """
    if jax.distributed.is_initialized() or not config.cluster_spec.as_dict():
        return False
    if config.task_type not in (TaskType.CHIEF, TaskType.WORKER):
        return False  # the evaluator (or a ps task, refused by train_and_evaluate)
    if config.num_ps_replicas:
        raise ValueError(
            "TF_CONFIG names ps tasks, but there are no parameter servers here: every chief "
            "and worker process holds the variables (replicated, or sharded with "
            "RunConfig(variable_partitions=...)) and XLA reduces the gradients. Remove the "
            "ps tasks from the cluster."
        )
    tasks = _training_tasks(config)
    if len(tasks) < 2:
        return False
    if not any(t == TaskType.CHIEF for t, _, _ in tasks):
        raise ValueError("A multi-process cluster needs a chief task in TF_CONFIG.")
    coordinator = tasks[0][2]
    process_id = [(t, i) for t, i, _ in tasks].index((config.task_type, config.task_id))
    heartbeat = heartbeat_timeout()
    shutdown = int(os.environ.get(SHUTDOWN_ENV, DEFAULT_SHUTDOWN_SECS))
    logger.info(
        "Joining a %d-process job as %s:%d (process %d), coordinator %s.",
        len(tasks),
        config.task_type,
        config.task_id,
        process_id,
        coordinator,
    )
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator,
            num_processes=len(tasks),
            process_id=process_id,
            heartbeat_timeout_seconds=heartbeat,
            shutdown_timeout_seconds=shutdown,
        )
    except RuntimeError as err:
        raise RuntimeError(
            f"Could not join the TF_CONFIG cluster as {config.task_type}:{config.task_id}: "
            f"{str(err).rstrip('.')}. JAX must not have been used in this process before the "
            "first Estimator is built (build no mesh and run no jax computation before it), or "
            "call jax.distributed.initialize(...) yourself first."
        ) from err
    return True


def multi_process() -> bool:
    """Whether this process is one of several in a ``jax.distributed`` job."""
    return jax.process_count() > 1


def is_chief(config) -> bool:
    """The chief of the job: TF_CONFIG's chief task, and JAX process 0 (without TF_CONFIG,
    a job the user started with ``jax.distributed.initialize``)."""
    return bool(config.is_chief) and jax.process_index() == 0


def mesh_for(config):
    """The mesh a run uses: ``RunConfig.mesh``; in a multi-process job without one, every
    device of every process on one ``data`` axis; else None (one device)."""
    if config.mesh is not None:
        return config.mesh
    if multi_process():
        return jax.sharding.Mesh(np.array(jax.devices()), ("data",))
    return None


def shared_seed(seed: int) -> int:
    """Process 0's ``seed`` on every process (replicated variables start equal)."""
    if not multi_process():
        return seed
    return int(multihost_utils.broadcast_one_to_all(np.int32(seed)))


def check_same(what: str, value: str) -> None:
    """Raises on every process when ``value`` (e.g. ``model_dir``) differs between the
    processes of a job (a checkpoint save would otherwise wait forever for files another
    process writes elsewhere).

    Raises:
      ValueError: naming this process's value and the fix.
    """
    if not multi_process():
        return
    digest = np.frombuffer(hashlib.sha256(value.encode()).digest()[:8], np.int32)
    try:
        multihost_utils.assert_equal(digest)
    except AssertionError:
        raise ValueError(
            f"Every process of a multi-process job must use the same {what}; process "
            f"{jax.process_index()} has {value!r}, which differs from another's. Use one "
            f"{what} on a file system every host mounts (e.g. NFS) at the same path."
        ) from None


def barrier(name: str) -> None:
    """Waits until every process of the job reaches the barrier ``name`` (nothing in a
    single process); ``name`` must be reached in the same order everywhere."""
    if multi_process():
        multihost_utils.sync_global_devices(name)


def preemption_sync_point() -> Callable[[int], bool] | None:
    """``reached(step) -> bool``: JAX's preemption sync point
    (``jax.experimental.multihost_utils.reached_preemption_sync_point``, which orbax's
    ``CheckpointManager`` uses). Once any process of the job got SIGTERM, it is True on
    every process at the same step: the step after the fastest process's latest, so none
    has passed it. Each process must ask at every step, with the same step numbers.

    Asking costs a lock and a comparison (the notifier's thread does the agreeing), so the
    training loop asks after every step.

    Returns:
      The check, or None in a single process, or when JAX's preemption service is off
      (``jax_enable_preemption_service``; SIGTERM then keeps its default action).
    """
    if not multi_process() or not jax.config.jax_enable_preemption_service:
        return None
    return multihost_utils.reached_preemption_sync_point
