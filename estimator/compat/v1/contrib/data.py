"""``tf.contrib.data`` (TF 1.15): ``map_and_batch`` and ``shuffle_and_repeat``, for
``dataset.apply``."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.data.experimental import shuffle_and_repeat as shuffle_and_repeat

__all__ = ["map_and_batch", "shuffle_and_repeat"]

__getattr__ = module_getattr("tf.contrib.data", __name__)


def map_and_batch(
    map_func,
    batch_size,
    num_parallel_batches=None,
    drop_remainder=False,
    num_parallel_calls=None,
):
    """``tf.contrib.data.map_and_batch``: ``dataset.map(map_func).batch(batch_size,
    drop_remainder)`` (TF's fused op gives the same elements).

    Raises:
      ValueError: both ``num_parallel_batches`` and ``num_parallel_calls`` (TF's message).
    """
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError(
            "The `num_parallel_batches` and `num_parallel_calls` arguments are mutually exclusive."
        )

    def transformation(dataset):
        return dataset.map(map_func).batch(batch_size, drop_remainder=drop_remainder)

    return transformation
