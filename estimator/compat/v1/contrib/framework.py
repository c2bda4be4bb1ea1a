"""``tf.contrib.framework`` (TF 1.15): the global step (``tf.train``'s)."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.train import get_global_step as get_global_step
from estimator.compat.v1.train import get_or_create_global_step as get_or_create_global_step

__all__ = ["get_global_step", "get_or_create_global_step"]

__getattr__ = module_getattr("tf.contrib.framework", __name__)
