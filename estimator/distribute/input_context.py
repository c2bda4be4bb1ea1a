"""``InputContext``: which shard of the input a process reads (``tf.distribute.InputContext``)."""

from __future__ import annotations

__all__ = ["InputContext"]


class InputContext:
    """What an ``input_fn(input_context)`` needs to read its process's share of the data
    (TF 2.15's ``tf.distribute.InputContext``).

    In a multi-process job each process feeds its own shard of every global batch: an
    ``input_fn`` that takes an ``input_context`` argument reads ``1/num_input_pipelines``
    of the data (e.g. ``dataset.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)``)
    in batches of ``ctx.get_per_replica_batch_size(global_batch) * local devices``; the
    Estimator assembles the global batch from the processes' parts
    (``jax.make_array_from_process_local_data``).

    Args:
      num_input_pipelines: the number of processes feeding input (JAX processes).
      input_pipeline_id: this process's index, in ``[0, num_input_pipelines)``.
      num_replicas_in_sync: devices on the data axis across all processes.
    """

    def __init__(
        self, num_input_pipelines: int = 1, input_pipeline_id: int = 0, num_replicas_in_sync=1
    ) -> None:
        self._num_input_pipelines = num_input_pipelines
        self._input_pipeline_id = input_pipeline_id
        self._num_replicas_in_sync = num_replicas_in_sync

    @property
    def num_input_pipelines(self) -> int:
        return self._num_input_pipelines

    @property
    def input_pipeline_id(self) -> int:
        return self._input_pipeline_id

    @property
    def num_replicas_in_sync(self) -> int:
        return self._num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        """``global_batch_size // num_replicas_in_sync``.

        Raises:
          ValueError: TF's message when it does not divide evenly.
        """
        if global_batch_size % self._num_replicas_in_sync != 0:
            raise ValueError(
                f"The `global_batch_size` {global_batch_size!r} is not divisible by "
                f"`num_replicas_in_sync` {self._num_replicas_in_sync!r} "
            )
        return global_batch_size // self._num_replicas_in_sync

    def __str__(self) -> str:
        return (
            f"tf.distribute.InputContext(input pipeline id {self._input_pipeline_id}, "
            f"total: {self._num_input_pipelines})"
        )
