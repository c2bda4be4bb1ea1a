"""``tf.tpu`` (TF 1.15's ``tf.compat.v1.tpu``): ``CrossShardOptimizer`` (see
``tf.estimator.tpu``); the TPU system ops are refused (JAX runs on any device)."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.estimator.tpu import CrossShardOptimizer as CrossShardOptimizer

__all__ = ["CrossShardOptimizer"]

__getattr__ = module_getattr("tf.tpu", __name__)
