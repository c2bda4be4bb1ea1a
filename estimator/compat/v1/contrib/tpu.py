"""``tf.contrib.tpu`` (TF 1.15): ``TPUEstimator`` and its companions
(``tf.estimator.tpu``, on JAX devices)."""

from __future__ import annotations

from estimator.compat._unsupported import module_getattr
from estimator.compat.v1.estimator.tpu import CrossShardOptimizer as CrossShardOptimizer
from estimator.compat.v1.estimator.tpu import InputPipelineConfig as InputPipelineConfig
from estimator.compat.v1.estimator.tpu import RunConfig as RunConfig
from estimator.compat.v1.estimator.tpu import TPUConfig as TPUConfig
from estimator.compat.v1.estimator.tpu import TPUEstimator as TPUEstimator
from estimator.compat.v1.estimator.tpu import TPUEstimatorSpec as TPUEstimatorSpec

__all__ = [
    "CrossShardOptimizer",
    "InputPipelineConfig",
    "RunConfig",
    "TPUConfig",
    "TPUEstimator",
    "TPUEstimatorSpec",
]

__getattr__ = module_getattr("tf.contrib.tpu", __name__)
