"""The cluster a ``TF_CONFIG`` describes, as ``RunConfig`` reads it: task types, the
cluster spec, and TF's checks and derived values (``tensorflow_estimator``'s
``run_config.py``: same rules, order and messages). ``estimator.distribute`` turns the
cluster into a JAX multi-process job.
"""

from __future__ import annotations

__all__ = ["ClusterSpec", "TaskType", "global_task_id", "session_master", "validate_task"]


class TaskType:
    """Task types of a TF_CONFIG cluster (``tf.estimator.RunConfig`` task types)."""

    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


class ClusterSpec(dict):
    """The cluster, ``{job_name: [address, ...]}`` (``tf.train.ClusterSpec``'s reading
    side: ``as_dict``, ``jobs``, ``job_tasks``, ``num_tasks``); a ``dict`` itself."""

    def as_dict(self) -> dict:
        return {job: list(tasks) for job, tasks in self.items()}

    @property
    def jobs(self) -> list[str]:
        return list(self)

    def job_tasks(self, job_name: str) -> list[str]:
        return list(self[job_name])

    def num_tasks(self, job_name: str) -> int:
        return len(self[job_name])


def session_master(cluster: dict, task_type: str, task_id: int, tf_config: dict) -> str:
    """TF's ``_get_session_master``: ``session_master`` from TF_CONFIG, '' for a one-node
    cluster, else ``grpc://`` + this task's address."""
    if "session_master" in tf_config:
        return tf_config["session_master"]
    if len(cluster) == 1 and len(next(iter(cluster.values()))) == 1:
        return ""
    return "grpc://" + cluster[task_type][task_id]


def validate_task(cluster: dict, task: dict, chief: str) -> tuple[str, int]:
    """TF's ``_validate_task_type_and_task_id``: same checks, order and messages."""
    if chief not in cluster:
        raise ValueError(f'If "cluster" is set in TF_CONFIG, it must have one "{chief}" node.')
    if len(cluster[chief]) > 1:
        raise ValueError(f'The "cluster" in TF_CONFIG must have only one "{chief}" node.')
    task_type, task_id = task.get("type"), task.get("index")
    if not task_type:
        raise ValueError('If "cluster" is set in TF_CONFIG, task type must be set.')
    if task_id is None:
        raise ValueError('If "cluster" is set in TF_CONFIG, task index must be set.')
    task_id = int(task_id)
    if task_id < 0:
        raise ValueError("Task index must be non-negative number.")
    if task_type == TaskType.EVALUATOR:
        return task_type, task_id
    note = "\n\nNote that these values may be coming from the TF_CONFIG environment variable."
    if task_type not in cluster:
        raise ValueError(
            f"{task_type} is not a valid task_type in the cluster_spec:\n{cluster}{note}"
        )
    if not 0 <= task_id < len(cluster[task_type]):
        raise ValueError(
            f"{task_id} is not a valid task_id for task_type {task_type} in the cluster_spec:\n"
            f"{cluster}{note}"
        )
    return task_type, task_id


def global_task_id(cluster: dict, task_type: str, task_id: int, chief: str) -> int:
    """TF's ``_get_global_id_in_cluster``: the chief first, then the other jobs sorted by
    name (task ids ascending), ps last."""
    ordered = [chief] + [t for t in sorted(cluster) if t not in (chief, TaskType.PS)]
    if TaskType.PS in cluster:
        ordered.append(TaskType.PS)
    offset = 0
    for name in ordered:
        if name == task_type:
            return offset + task_id
        offset += len(cluster[name])
    raise RuntimeError(
        f"Internal Error: `task_type` ({task_type}) is not in cluster_spec ({cluster})."
    )
