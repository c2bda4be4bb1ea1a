"""``tf.data.experimental``: ``AUTOTUNE`` and ``shuffle_and_repeat``."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.data._dataset import AUTOTUNE

__all__ = ["AUTOTUNE", "shuffle_and_repeat"]

__getattr__ = module_getattr("tf.data.experimental", __name__)


def shuffle_and_repeat(buffer_size, count=None, seed=None):
    """``tf.data.experimental.shuffle_and_repeat``: for ``dataset.apply``; the same as
    ``dataset.shuffle(buffer_size, seed).repeat(count)``."""

    def transformation(dataset):
        return dataset.shuffle(buffer_size, seed).repeat(count)

    return transformation
